"""The decline reasons have one owner, `inductor_ext.reasons.Reason`: the README's table is
rendered from it, the counters and tables take only its members, the package names no
code as a bare string, and the report describes each code from it."""

import ast
import io
import pathlib
import re
import subprocess
import sys

import pytest
import torch

import inductor_ext
from inductor_ext import metrics, report
from inductor_ext.reasons import RETIRED, Reason, UnknownReason, describe, render_table

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _readme_table() -> str:
    """The README's table of reasons: the block of table lines from its header on."""
    lines = (ROOT / "README.md").read_text().splitlines()
    header = [i for i, line in enumerate(lines) if line == "| Reason code | Meaning |"]
    assert len(header) == 1, "README.md must hold one table of reasons"
    end = header[0]
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return "\n".join(lines[header[0]:end]) + "\n"


def test_readme_holds_exactly_the_rendered_table():
    """Regenerate with `python -m inductor_ext.report --reasons` and paste over the README's."""
    assert _readme_table() == render_table()


def test_the_module_prints_the_table():
    res = subprocess.run([sys.executable, "-m", "inductor_ext.report", "--reasons"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout == render_table()


def test_every_member_is_a_code_with_a_one_line_description():
    codes = [reason.value for reason in Reason]
    assert len(set(codes)) == len(codes)
    for reason in Reason:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", reason.value)
        assert reason.code == reason.value == str(reason) == f"{reason}" == f"{reason:s}"
        assert reason.name == reason.value.upper()
        assert reason.description and "\n" not in reason.description + reason.notes
        assert "|" not in reason.description + reason.notes  # a markdown table cell
        assert Reason(reason.value) is reason
    assert metrics.REASONS == tuple(codes)
    assert not set(RETIRED) & set(codes)


def test_not_persistent_is_split_into_its_causes():
    assert "not_persistent" in RETIRED
    for code in ("no_tile_fits", "tiled_row_reads", "tiled_non_sum"):
        assert code in RETIRED["not_persistent"]
        assert Reason(code).description


def test_a_decline_takes_a_member_only(interp):
    metrics.record_reject(Reason.NOT_PROFITABLE, detail="ok")
    assert inductor_ext.metrics.rejected_pairs == {"not_profitable": 1}
    for bad in ("not_profitable", "not_persistent", "no_such_reason", None):
        with pytest.raises(UnknownReason, match="not an inductor_ext.reasons.Reason"):
            metrics.record_reject(bad)
    assert inductor_ext.metrics.rejected_pairs == {"not_profitable": 1}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and node.body and isinstance(node.body[0], ast.Expr)
                and isinstance(node.body[0].value, ast.Constant)):
            out.add(id(node.body[0].value))
    return out


def test_the_package_names_no_reason_as_a_bare_string():
    """Outside reasons.py a decline names its reason as a member (`Reason.SPLIT_ROWS`),
    so that every code written has a description; docstrings may mention codes."""
    codes = {reason.value for reason in Reason} | set(RETIRED)
    found = []
    for path in sorted((ROOT / "inductor_ext").rglob("*.py")):
        if path.name == "reasons.py" and path.parent.name == "inductor_ext":
            continue
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        found += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
                  for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and node.value in codes and id(node) not in docs]
    assert found == []


def test_describe_a_table_code():
    assert describe("dynamic_n") == Reason.DYNAMIC_N.description
    assert "no_tile_fits" in describe("not_persistent")  # a table from an older version
    assert "not a reason code" in describe("no_such_reason")


def test_the_report_describes_each_reason():
    rows = [{"reason": "tiled_non_sum", "norms": "", "graph_id": "g"},
            {"reason": "tiled_non_sum", "norms": "", "graph_id": "g"},
            {"reason": "not_persistent", "norms": "", "graph_id": "g"}]
    out = io.StringIO()
    report.summarize({metrics.REJECT_TABLE: rows}, out)
    lines = out.getvalue().splitlines()
    tiled = next(line for line in lines if line.strip().startswith("tiled_non_sum"))
    assert tiled.split()[1] == "2" and Reason.TILED_NON_SUM.description in tiled
    old = next(line for line in lines if line.strip().startswith("not_persistent"))
    assert "retired" in old


class _LayerNormBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(64, 64)
        self.final_norm = torch.nn.LayerNorm(64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.final_norm(self.proj(x))


def test_a_norm_backward_left_as_an_extern_is_extern_norm(plugin, norm_views):
    """``aten.native_layer_norm_backward`` made a fallback (what a norm backward in torch_npu's
    NPU_INDUCTOR_FALLBACK_LIST would be; torch_npu 2.13 skips listed ops that Inductor can
    decompose, so here the decomposition is taken out by hand, on stock Inductor): one
    extern kernel, recorded as extern_norm in the module's name, in the counters, the reject
    table and the report; the Linear's matmul (an extern too) is not recorded.
    (tests/ascend/test_npu_rms_norm.py: torch_npu's npu_rms_norm_backward.)"""
    import csv
    import glob
    from unittest import mock

    from torch._inductor import lowering
    from torch._inductor.decomposition import decompositions, fast_random_decomps

    from tests.support import reference

    op = torch.ops.aten.native_layer_norm_backward.default
    model = _LayerNormBlock()
    x = torch.randn(16, 64, requires_grad=True)
    dy = torch.randn(16, 64)
    with mock.patch.dict(decompositions), mock.patch.dict(lowering.lowerings):
        decompositions.pop(op)
        fast_random_decomps.cache_clear()
        try:
            lowering.make_fallback(op, warn=False)
            compiled = torch.compile(model, dynamic=False)
            got = torch.autograd.grad(compiled(x), [x, *model.parameters()], dy)
        finally:
            fast_random_decomps.cache_clear()
    reference.assert_close(got, torch.autograd.grad(model(x), [x, *model.parameters()], dy))
    assert dict(inductor_ext.metrics.rejected_pairs) == {"extern_norm": 1}
    assert dict(inductor_ext.metrics.norms) == {"found": 1, "declined": 1}
    assert dict(inductor_ext.metrics.norms_declined) == {"extern_norm": 1}
    assert norm_views()["report"] == (1, 0, 1)
    with open("metric_table_mix_order_reject.csv", newline="") as f:
        [row] = list(csv.DictReader(f))
    assert (row["modules"], row["norms"], row["kind"]) == ("final_norm", "final_norm", "norm")
    assert (row["reason"], row["M"], row["N"]) == ("extern_norm", "16", "64"), row
    assert "aten::native_layer_norm_backward" in row["detail"], row
    out = io.StringIO()
    report.summarize(report.read_tables(sorted(glob.glob("metric_table_mix_order_*.csv"))), out)
    line = next(ln for ln in out.getvalue().splitlines() if ln.lstrip().startswith("final_norm"))
    assert line.split()[:4] == ["final_norm", "LayerNorm", "0/0", "backward"] or \
        line.split()[:2] == ["final_norm", "?"], line  # "?": a table without norm_classes
    assert "declined: extern_norm" in line, out.getvalue()
