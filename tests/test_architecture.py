"""The house rules of the package, checked: no import circle over two modules, planning
inputs are values (tuning knobs change the cache key; nothing patches the device), and the
plan survives its trip through a kernel's inductor_meta."""

import ast
import dataclasses
import pathlib
import re
import subprocess
import sys

import pytest
import torch

import inductor_ext
from inductor_ext.plan import (
    DeviceInfo,
    FinalizeBlock,
    LaunchPlan,
    PlanOptions,
    ShapeInfo,
    assume_device,
)
from inductor_ext.plan import knobs as tuning_mod
from inductor_ext.targets.ascend.tuning import AscendTuning
from inductor_ext.targets.cuda import plan as cuda_plan
from inductor_ext.targets.cuda.tuning import CudaTuning

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of a directed graph."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            out.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    """No module reaches itself through imports, the entry point's package included: every
    import counts, also the ones inside functions and under TYPE_CHECKING (grimp reads them
    all). A package's __init__ counts as its own module."""
    grimp = pytest.importorskip("grimp")
    built = grimp.build_graph("inductor_ext", "inductor_ext_autoload",
                              include_external_packages=False)
    graph = {m: set(built.find_modules_directly_imported_by(m)) for m in built.modules}
    circles = [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]
    assert circles == []


def test_the_layers_hold():
    """pyproject.toml's import-linter contracts: the pipeline's layers, the targets apart,
    the entry point never imported by the package."""
    pytest.importorskip("importlinter")
    lint_imports = pathlib.Path(sys.executable).with_name("lint-imports")
    res = subprocess.run([str(lint_imports)], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout[-3000:]
    assert "0 broken" in res.stdout


#: String knobs with a fixed set of values: another of them.
OTHER_CHOICE = {"strided": "contiguous"}


@pytest.mark.parametrize("target,cls", [("cuda", CudaTuning), ("ascend", AscendTuning)])
def test_every_tuning_knob_changes_the_cache_key(target, cls):
    p = inductor_ext.MixOrderPass()
    base = p.uuid()
    for field in dataclasses.fields(cls):
        default = getattr(cls(), field.name)
        # in its declared range: patch() checks it (powers of two, shares in (0, 1])
        candidates = ([not default] if isinstance(default, bool)
                      else [default + 1, default * 2] if isinstance(default, int)
                      else [default / 2 or 0.5, default * 2] if isinstance(default, float)
                      else [OTHER_CHOICE.get(default, default + "_other")])
        other = next(v for v in candidates if tuning_mod.range_of(field).admits(v))
        with inductor_ext.config.patch(tuning={target: {field.name: other}}):
            assert p.uuid() != base, field.name
    with assume_device(DeviceInfo(type="cpu", cores=3, interpreted=True)):
        assert p.uuid() != base  # an assumed device too
    assert p.uuid() == base


def test_bad_tuning_is_named():
    for bad, message in [({"tpu": {}}, "unknown target 'tpu'"),
                         ({"cuda": {"no_knob": 1}}, "unknown knob 'no_knob'"),
                         ({"cuda": {"register_tile": 1.5}}, "must be an int, got 1.5"),
                         ({"cuda": {"balance_rows": 1}}, "must be a bool"),
                         ({"cuda": {"row_order": "diagonal"}},
                          r"\['row_order'\] must be 'strided' or 'contiguous', got 'diagonal'"),
                         ([1], "must be a dict")]:
        with pytest.raises(ValueError, match=message):  # where it is set
            inductor_ext.config.patch(tuning=bad)
        if isinstance(bad, dict):  # and at compile: a dict changed in place skips the setter
            with inductor_ext.config.patch(tuning={}):
                inductor_ext.config.tuning.update(bad)
                with pytest.raises(ValueError, match=message):
                    inductor_ext.config.validate()
    assert tuning_mod.make("cuda", {"load_round_trip_s": 2}).load_round_trip_s == 2


def test_the_plan_round_trips_through_kernel_metadata():
    shape = ShapeInfo(M_hint=4096, M_static=True, N=4096, num_columns=2, elem_bytes=2,
                      shared_bytes=1 << 25, total_bytes=1 << 26, unfused_bytes=1 << 27,
                      row_elem_bytes=6, device=torch.device("cuda"))
    h100 = DeviceInfo(type="cuda", cores=132, l2_bytes=50 * 2**20, capability=(9, 0))
    plan = cuda_plan.plan(shape, h100, CudaTuning(), PlanOptions())
    assert plan.configs and isinstance(plan.final_step, FinalizeBlock)
    meta = eval(repr(plan.to_meta()))  # as the generated kernel module reads it back
    assert LaunchPlan.from_meta(meta) == plan


def _setattr_targets(path: pathlib.Path) -> list[tuple[str, str]]:
    """(object, attribute) source text of every `*.setattr(obj, "attr", ...)` call."""
    tree = ast.parse(path.read_text())
    return [(ast.unparse(node.args[0]),
             ast.unparse(node.args[1]).strip("'\"") if len(node.args) > 1 else "")
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "setattr" and node.args]


#: compat functions a test may force: marks the installed Inductor/Triton cannot produce
#: (strict reductions need an inner-tree ordering Triton 3.9 lacks), not device queries.
FORCEABLE_COMPAT = {"is_strict_reduction"}


def test_no_test_or_bench_patches_a_flavor_or_a_device_query():
    """Knobs go through `inductor_ext.config.tuning`, devices through `DeviceInfo` /
    `assume_device`: patching class attributes or queries would bypass the cache key."""
    forbidden = {"CudaFlavor", "AscendFlavor", "cuda", "ascend", "device", "compat",
                 "type(flavor)"}
    offenders = [f"{path.name}: setattr({target}, {attr!r}, ...)"
                 for folder in ("tests", "bench", "bench/probes")
                 for path in sorted((ROOT / folder).glob("*.py"))
                 for target, attr in _setattr_targets(path)
                 if target in forbidden
                 and not (target == "compat" and attr in FORCEABLE_COMPAT)]
    assert offenders == []


def test_one_list_of_targets():
    """plan.PLANNERS names the targets; every one has a code flavor, a flavor cannot be
    registered for any other name, and an unknown target is named by planning's error."""
    from inductor_ext.codegen import flavor
    from inductor_ext.plan import PLANNERS

    assert flavor.registered_targets() == set(PLANNERS)
    for target in ("auto", *PLANNERS):  # config.validate's own list agrees
        with inductor_ext.config.patch(target=target):
            inductor_ext.config.validate()
    with pytest.raises(ValueError, match="tpu"):
        inductor_ext.config.patch(target="tpu")

    class Stray(flavor.TargetFlavor):
        name = "tpu"

    with pytest.raises(ValueError, match="unknown target 'tpu'; known: \\['ascend', 'cuda'\\]"):
        flavor.register(Stray())
    with pytest.raises(ValueError, match="unknown target 'tpu'"):
        flavor.get_flavor("tpu")
    assert "tpu" not in flavor.registered_targets()


#: What only one target knows, by its folder under inductor_ext/targets/: its vendor
#: package (torch_npu, its module names and its pip name), and CUDA's device query and PTX.
TARGET_ONLY = {
    "ascend": re.compile(r"torch_npu|torch-npu"),
    "cuda": re.compile(r"tl\.extra\.cuda|cp\.async|torch\.cuda\.get_device_properties"
                       r"|mem_bus_width"),
}


def _target_names_outside(target: str, package: pathlib.Path) -> list[str]:
    return [f"{path.relative_to(package.parent)}:{n}: {line.strip()}"
            for path in sorted(package.rglob("*.py"))
            if not path.is_relative_to(package / "targets" / target)
            for n, line in enumerate(path.read_text().splitlines(), 1)
            if TARGET_ONLY[target].search(line)]


@pytest.mark.parametrize("target", sorted(TARGET_ONLY))
def test_a_target_is_whole_in_its_folder(target):
    """A target's own names appear in its folder only: code, docstrings and comments of
    every other module (the package and its entry point) name no vendor package or
    vendor-only feature, so adding or removing a target touches its folder and the one
    import line of inductor_ext/targets/__init__.py."""
    assert _target_names_outside(target, ROOT / "inductor_ext") == []
    assert _target_names_outside(target, ROOT / "inductor_ext_autoload") == []


def test_the_content_check_sees_a_stray_name(tmp_path):
    """The check above finds a name where it does not belong (and none in its folder)."""
    package = tmp_path / "inductor_ext"
    (package / "targets" / "ascend").mkdir(parents=True)
    (package / "targets" / "ascend" / "seams.py").write_text("import torch_npu\n")
    (package / "codegen.py").write_text("x = 1\n# torch_npu's text\n")
    assert _target_names_outside("ascend", package) == [
        "inductor_ext/codegen.py:2: # torch_npu's text"]
