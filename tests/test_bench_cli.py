"""The benchmark scripts' CPU-side logic: settings, shapes, bytes, timer options."""

import math
import os
import pathlib
import re
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench", "probes"))
import bench_norm_bwd  # noqa: E402
import common  # noqa: E402

import inductor_ext  # noqa: E402
from inductor_ext.interpreter import cpu_interpret  # noqa: E402
from inductor_ext.plan_inputs import plan_options, tuning_for  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture
def restore_tuning():
    with inductor_ext.config.patch(tuning={}):
        yield


def test_setting_parses_each_knob_type(restore_tuning):
    bench_norm_bwd.apply_setting("final_step_columns=32;autotune_on_cpu=True;"
                                 "register_budget=1.5")
    tuning = tuning_for("cuda")
    assert tuning.final_step_columns == 32
    assert tuning.autotune_on_cpu is True
    assert tuning.register_budget == 1.5
    bench_norm_bwd.apply_setting("autotune_on_cpu=False")
    assert tuning_for("cuda").autotune_on_cpu is False  # bool("False") is True
    assert plan_options().split_size is None  # options untouched


@pytest.mark.parametrize("setting, message", [
    ("no_such_knob=1", "'no_such_knob=1' is not KNOB=VALUE"),
    ("autotune_on_cpu=yes", "takes True or False"),
    ("tile_elems=big", "tile_elems takes a int"),
])
def test_bad_setting_names_the_problem(restore_tuning, setting, message):
    with pytest.raises(SystemExit, match=message):
        bench_norm_bwd.apply_setting(setting)


def test_unknown_flush_mode_is_refused():
    with pytest.raises(ValueError, match="flush must be one of"):
        common.GraphTimer("none")


def test_shapes_and_minimum_bytes():
    assert common.parse_shapes("32768x4096:bf16,576000x384:fp32") == [
        (32768, 4096, torch.bfloat16), (576000, 384, torch.float32)]
    assert common.parse_shapes("64x128:bfloat16") == [(64, 128, torch.bfloat16)]
    with pytest.raises(SystemExit, match="unknown dtype 'bf8'"):
        common.parse_shapes("64x128:bf8")
    with pytest.raises(SystemExit, match="'64x128' is not MxN:dtype"):
        common.parse_shapes("64x128")
    assert common.min_bytes("rms", 4, 8, 2) == 3 * 4 * 8 * 2 + 4 * 4 + 2 * 8 * 2
    assert common.min_bytes("ln", 4, 8, 2) == 3 * 4 * 8 * 2 + 8 * 4 + 4 * 8 * 2


#: The scripts users run (bench/README.md's table); the probes are bench/probes/.
USER_SCRIPTS = ["bench_norm_bwd", "bench_models", "bench_distributed", "bench_dit",
                "bench_compile_time", "bench_block", "bench_host_cost", "roofline",
                "sweep_cost_model", "fit_cost_model", "ascend_model", "ascend_width_table",
                "ncu_backward", "profile_backward", "profile_model"]
PROBES = ["bench_launch_floor", "bench_workspace_floor", "bench_column_strip_floor",
          "bench_row_exchange_floor", "bench_unaligned_rows_floor"]
NO_GPU = "needs a CUDA GPU, and torch.cuda.is_available() is False here; "
#: What each script that needs a GPU by default says without one, after its name and
#: NO_GPU: what to run instead (the CPU run, where the script has one).
WITHOUT_CUDA = {
    "bench_norm_bwd": "run it on a machine with one",
    "bench_block": "run it on a machine with one",
    "bench_host_cost": "run it on a machine with one",
    "ncu_backward": "run it on a machine with one",
    "profile_backward": "run it on a machine with one",
    "profile_model": "run it on a machine with one",
    "bench_distributed": "on CPU instead: python bench/bench_distributed.py --device cpu (a "
                         "smoke run, no times)",
    "bench_models": "on CPU instead: TRITON_INTERPRET=1 python bench/bench_models.py "
                    "--device cpu",
    "bench_dit": "on CPU instead: TRITON_INTERPRET=1 python bench/bench_dit.py --device cpu "
                 "--sizes 2x12x32",
    "sweep_cost_model": "on CPU instead: TRITON_INTERPRET=1 python "
                        "bench/sweep_cost_model.py --device cpu --grid smoke",
}
#: The scripts with a CPU run in the Triton interpreter: the arguments of that run.
CPU_RUNS = {"bench_compile_time": [], "bench_models": ["--device", "cpu"],
            "bench_dit": ["--device", "cpu", "--sizes", "2x12x32"],
            "sweep_cost_model": ["--device", "cpu", "--grid", "smoke"],
            "bench_distributed": ["--device", "cpu"]}


def _one_line_exit_2(module, argv, capsys) -> str:
    """Run `module`'s main as its command line `argv` would; it must stop with exit
    status 2 and one line on stderr (no traceback), which is returned."""
    with pytest.raises(SystemExit) as stop:
        module.main(argv)
    assert stop.value.code == 2, stop.value.code
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.mark.parametrize("script", [*WITHOUT_CUDA, *PROBES])
def test_gpu_scripts_say_they_need_cuda(script, monkeypatch, capsys):
    """On a machine without CUDA every GPU bench stops with one line and exit status 2,
    not a traceback: a user script names itself, what is missing and what to run instead
    (its CPU run, where it has one)."""
    import importlib

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(sys, "argv", [f"{script}.py"])
    line = _one_line_exit_2(importlib.import_module(script), None, capsys)
    if script in PROBES:
        assert line.startswith(f"{script}: {NO_GPU}")
        return
    name = f"{script}.py --device cuda" if script in CPU_RUNS else f"{script}.py"
    assert line == f"{name}: {NO_GPU}{WITHOUT_CUDA[script]}"


@pytest.mark.parametrize("script", CPU_RUNS)
def test_cpu_runs_without_the_interpreter_say_how_to_start_it(script, monkeypatch, capsys):
    """A CPU run without TRITON_INTERPRET=1 (Triton imported without its interpreter)
    stops with one line naming the command that sets it, exit status 2."""
    import importlib

    import inductor_ext.interpreter

    monkeypatch.setattr(inductor_ext.interpreter, "interpreter_active", lambda: False)
    args = CPU_RUNS[script]
    line = _one_line_exit_2(importlib.import_module(script), args, capsys)
    assert line.startswith(f"{script}.py --device cpu: on CPU the kernels run in Triton's "
                           "interpreter, which needs TRITON_INTERPRET=1 set before Python "
                           "starts: ")
    assert line.endswith(" ".join(["TRITON_INTERPRET=1 python", f"bench/{script}.py", *args]))


@pytest.mark.parametrize("script, args, env", [
    ("bench_compile_time", [], {}),                      # its default run is on CPU
    ("sweep_cost_model", [], {"TRITON_INTERPRET": "1"}),  # its default run is on a GPU
])
def test_a_script_run_without_its_device_prints_one_line(script, args, env):
    """The whole command, as a user runs it on a machine without a GPU: bench_compile_time
    without TRITON_INTERPRET, sweep_cost_model without flags. One line on stderr naming
    what is missing and what to run, exit status 2, no traceback."""
    import subprocess

    full = {**os.environ, "CUDA_VISIBLE_DEVICES": "", **env}
    if "TRITON_INTERPRET" not in env:
        full.pop("TRITON_INTERPRET", None)
    res = subprocess.run([sys.executable, str(ROOT / "bench" / f"{script}.py"), *args],
                         env=full, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr[-3000:]
    assert "Traceback" not in res.stderr and len(res.stderr.splitlines()) == 1, res.stderr
    assert "TRITON_INTERPRET=1 python bench/" in res.stderr
    if script == "sweep_cost_model":
        assert "--device cpu" in res.stderr


def test_the_shared_fold_sums_the_first_rows_into_one_or_two_outputs():
    """common.fold_workspace_columns, as bench_workspace_floor.py launches it (dw and db
    from a [rows, 2, N] workspace, fewer rows than its power of two) and as the row
    exchange probe does (one output)."""
    import triton

    rows, N = 5, 40
    ws = torch.randn(rows + 2, 2, N, generator=torch.Generator().manual_seed(0))
    dw, db = torch.full((N,), float("nan")), torch.full((N,), float("nan"))
    with cpu_interpret():
        common.fold_workspace_columns[(triton.cdiv(N, 16),)](ws, dw, db, rows, N=N, COLS=16,
                                                             ROWS_P2=8, OUTPUTS=2)
    torch.testing.assert_close(dw, ws[:rows, 0].sum(0))
    torch.testing.assert_close(db, ws[:rows, 1].sum(0))
    one = torch.full((N,), float("nan"))
    with cpu_interpret():
        common.fold_workspace_columns[(triton.cdiv(N, 16),)](ws[:, 0].contiguous(), one, None,
                                                             rows, N=N, COLS=16, ROWS_P2=8,
                                                             OUTPUTS=1)
    torch.testing.assert_close(one, ws[:rows, 0].sum(0))


@pytest.mark.parametrize("depth", [1, 2])
def test_row_exchange_probe_kernel_matches_float64(depth):
    """bench_row_exchange_floor.py's kernel with one column group (no exchange: the
    interpreter runs programs one after another, so G > 1 would wait forever on CPU; the
    GPU run checks those against float64 before timing), rows 1 or 2 ahead."""
    import bench_row_exchange_floor as probe
    import triton

    M, N, P = 37, 200, 8
    gen = torch.Generator().manual_seed(0)
    x, dy = torch.randn(M, N, generator=gen), torch.randn(M, N, generator=gen)
    w = 1 + 0.1 * torch.randn(N, generator=gen)
    xd, dyd, wd = x.double(), dy.double(), w.double()
    rstd = torch.rsqrt(xd.pow(2).mean(1) + 1e-6)
    ref_dx = (rstd[:, None] * wd * dyd
              - xd * (rstd ** 3 / N)[:, None] * (wd * dyd * xd).sum(1, keepdim=True))
    ref_dw = (dyd * xd * rstd[:, None]).sum(0)
    ws = torch.empty(P, N)
    dx, dw = torch.full_like(x, float("nan")), torch.full_like(w, float("nan"))
    with cpu_interpret():
        probe._rms_backward_exchange[(P,)](dy, x, w, rstd.float(), dx, ws, torch.empty(M, 1),
                                           M, N=N, G=1, G_P2=1, SLICE=N, BLOCK=256,
                                           DEPTH=depth)
        common.fold_workspace_columns[(triton.cdiv(N, 16),)](ws, dw, None, P, N=N, COLS=16,
                                                             ROWS_P2=P, OUTPUTS=1)
    assert common.max_rel_err(dx, ref_dx) < 1e-6
    assert common.max_rel_err(dw, ref_dw) < 1e-6
    assert probe.parse_configs("8x528x4x2+1x132x16x1") == [(8, 528, 4, 2), (1, 132, 16, 1)]
    # @auto: slices of at most 2048 lanes, 4 then 3 programs an SM in whole groups
    assert probe.rule_configs(28736, 132) == [(15, 525, 4, 2), (15, 390, 4, 2)]
    assert all(triton.next_power_of_2(-(-16528 // g) + 7) <= 2048
               for g, *_ in probe.rule_configs(16528, 132))
    for spec, message in (("8x528x4", "is not GROUPSxPROGRAMSxWARPSxDEPTH"),
                          ("8x530x4x2", "programs a multiple of groups"),
                          ("8x528x4x3", "depth is 1 or 2")):
        with pytest.raises(SystemExit, match=re.escape(message)):
            probe.parse_configs(spec)


@pytest.mark.parametrize("dtype, wdtype, N", [
    (torch.float16, torch.float16, 203),   # odd N: every row a different shift
    (torch.bfloat16, torch.float32, 202),  # N % 8 == 2: four shifts
    (torch.float32, torch.float32, 130),   # fp32, N % 4 == 2: two shifts
])
@pytest.mark.parametrize("aligned", [0, 1, 2, 3])
def test_unaligned_rows_probe_kernel_matches_float64(dtype, wdtype, N, aligned):
    """bench_unaligned_rows_floor.py's kernel, rows read from the 16-byte boundary before
    their start (aligned=1; 2: dx stored element-wise; 3: its edges gathered) or as they
    lie, against float64 within the dtype's tolerance: the shifted lanes, the over-read
    zeroed, the dx edges stored apart, and the dw partials shifted back. (The interpreter
    shows the indexing, not the vector widths.)"""
    import bench_unaligned_rows_floor as probe
    import triton

    M, vec = 37, 16 // dtype.itemsize
    P = probe.program_counts(N, vec, 3, (1, 2))[-1]
    assert P * N % vec == 0  # every row a program walks has its shift
    p = common.rms_problem(M, N, dtype, wdtype, device="cpu")
    # The last row's over-read must stay inside the allocation, as it does on the GPU
    # (one 16-byte granule): give the inputs a padded storage.
    x, dy = (torch.cat([t.flatten(), t.new_zeros(vec)])[:M * N].view(M, N)
             for t in (p.x, p.dy))
    ws = torch.empty(P, N)
    dx, dw = torch.full_like(x, float("nan")), torch.full_like(p.w, float("nan"))
    block = triton.next_power_of_2(N + vec - 1)
    with cpu_interpret():
        probe._rms_backward_rows[(P,)](dy, x, p.w, p.rstd, dx, ws, M, N=N, BLOCK=block,
                                       ROWS=2, VEC=vec, ALIGNED=aligned)
        common.fold_workspace_columns[(triton.cdiv(N, 16),)](
            ws, dw, None, P, N=N, COLS=16, ROWS_P2=triton.next_power_of_2(P), OUTPUTS=1)
    common.check_rms_grads(p, "probe", dx, dw)  # within the dtype's tolerance of float64
    with pytest.raises(SystemExit, match="probe: dw off by"):
        common.check_rms_grads(p, "probe", dx, dw * 1.1)
    # Program counts keep P * N on whole vectors: odd N needs multiples of 8 at 16 bits.
    assert probe.program_counts(4918, 8, 132, (1, 2, 4)) == [132, 264, 528]
    assert probe.program_counts(10167, 8, 132, (1, 2)) == [128, 264]
    with pytest.raises(SystemExit, match="is not rms:MxN:dtype"):
        common.parse_rms_case("ln:64x128:bf16")
    assert common.parse_rms_case("rms:4x8:bf16:fp32@auto") == (
        4, 8, torch.bfloat16, torch.float32)


def test_profile_model_names_a_bad_variant():
    import profile_model

    with pytest.raises(SystemExit, match=r"unknown --variants \['fused'\]; one of stock"):
        profile_model.main(["--variants", "stock,fused"])


def test_bench_models_without_cuda_says_so(monkeypatch, capsys):
    import bench_models

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _one_line_exit_2(bench_models, ["--device", "cuda"], capsys) == (
        "bench_models.py --device cuda: needs a CUDA GPU, and torch.cuda.is_available() is "
        "False here; on CPU instead: TRITON_INTERPRET=1 python bench/bench_models.py "
        "--device cpu")


def test_bench_dit_without_cuda_names_itself(monkeypatch, capsys):
    """bench_dit.py runs bench_models.py per size; without --device (cuda, the default) and
    without CUDA its one line names bench_dit.py and its own CPU smoke run, not
    bench_models, and stops before any size runs."""
    import bench_dit

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    ran = []
    monkeypatch.setattr(bench_dit.bench_models, "main", ran.append)
    line = _one_line_exit_2(bench_dit, [], capsys)
    assert line == ("bench_dit.py --device cuda: needs a CUDA GPU, and "
                    "torch.cuda.is_available() is False here; on CPU instead: "
                    "TRITON_INTERPRET=1 python bench/bench_dit.py --device cpu "
                    "--sizes 2x12x32")
    assert "bench_models" not in line and not ran


def test_bench_models_size_and_names():
    import bench_models

    from tests.support.models import TINY

    assert bench_models.parse_size("hidden=64,layers=1", TINY).hidden == 64
    with pytest.raises(SystemExit, match="is not one of"):
        bench_models.parse_size("width=3", TINY)
    with pytest.raises(SystemExit, match="unknown --models"):
        bench_models.main(["--device", "cpu", "--models", "llama,resnet"])


def test_bench_models_counts_every_norm_module_and_names_each_count():
    """A DiT's modulated LayerNorms have no weight, yet the pass finds and fuses them (their
    d(scale) / d(shift)): the model's count is of every norm module, and the printed line
    says what each number counts."""
    import bench_models

    from tests.support import models

    dit = models.build("dit", models.Size(layers=1))
    assert dit.norm_modules() == ["out"]
    assert bench_models.norm_module_count(dit) == 3  # blocks.0.norm1 / norm2, out
    stack = models.build("rmsnorm_stack")
    assert bench_models.norm_module_count(stack) == len(stack.norm_modules())
    line = bench_models.norm_line(
        "dit", 3, {"norms_found": 2, "norms_fused": 2, "norms_declined": 0,
                   "mix_order_kernels": 2}, {"mix_order_kernels": 0})
    assert line == ("dit: 3 norm modules; inductor_ext: norms found 2, fused 2, declined 0; "
                    "its fused kernels 2; upstream mix-order kernels (stock) 0")


def test_bench_models_csv_columns_are_documented():
    """bench/README.md's table of bench_models.py's CSV names every column it writes."""
    import bench_models

    with open(os.path.join(os.path.dirname(__file__), "..", "bench", "README.md")) as f:
        readme = f.read()
    table = readme.split("## bench_models.py's CSV", 1)[1].split("\n## ", 1)[0]
    documented = {name for line in table.splitlines() if line.startswith("| `")
                  for name in line.split("|")[1].replace("`", "").replace(",", " ").split()}
    assert documented == set(bench_models.FIELDS)


def _sweep_row(case: str, M: int, N: int, stock: float, off: float, fused: float,
               ext: float) -> dict:
    best = min(stock, off)
    return {"case": case, "M": M, "N": N, "stock_us": stock, "upstream_off_us": off,
            "fused_us": fused, "ext_us": ext, "fused_speedup": best / fused,
            "ext_speedup": best / ext, "ext_over_stock": stock / ext,
            "model_fuses": "True" if ext < best else "False"}


def test_sweep_summary_names_the_slowest_ext_case_and_the_large_shape_geomean():
    import sweep_cost_model

    rows = [_sweep_row("big fast", 4096, 4096, 200.0, 300.0, 100.0, 100.0),
            _sweep_row("big slow", 8192, 4096, 100.0, 90.0, 120.0, 95.0),
            _sweep_row("small", 64, 64, 10.0, 10.0, 5.0, 5.0)]
    text = sweep_cost_model.summary(rows)
    assert "fusing faster in 2; model fuses in 2" in text
    assert "slowest x0.947 (big slow), 1 below 1.0" in text
    # geomean of 200/100 and 100/95 over the two shapes with M*N >= 16M; "small" is out
    assert f"over 2 shapes with M*N >= 16M: x{(2.0 * 100 / 95) ** 0.5:.3f}" in text


def test_sweep_refuses_an_unknown_variant(capsys):
    import sweep_cost_model

    with pytest.raises(SystemExit):
        sweep_cost_model.main(["--device", "cpu", "--variants", "stock,eager"])
    assert "unknown ['eager']" in capsys.readouterr().err


def test_strided_grid_is_held_out_from_the_fit():
    """`--grid strided` checks the strided costs on cases the fit did not see: all
    transposed, none in the full grid, and ln / fp16 among them (the fit had neither)."""
    import sweep_cost_model

    strided = sweep_cost_model.grid("strided")
    assert strided and {c.layout for c in strided} == {"transposed"}
    assert not set(strided) & set(sweep_cost_model.grid("full"))
    assert {"ln", "rms", "sum"} <= {c.op for c in strided}
    assert "fp16" in {c.dtype for c in strided}


def test_strips_grid_is_held_out_from_the_fit():
    """`--grid strips` checks the column strips on shapes the fit did not see: sum pairs
    with a transposed operand, none in the full grid, fp16 among them (the fit had none),
    each with fewer rows than Inductor's H100 split threshold (2 x 32 x 132)."""
    import sweep_cost_model

    strips = sweep_cost_model.grid("strips")
    assert strips and {(c.op, c.layout) for c in strips} == {("sum", "transposed")}
    assert not set(strips) & set(sweep_cost_model.grid("full"))
    assert "fp16" in {c.dtype for c in strips}
    assert all(c.M < 2 * 32 * 132 and c.M * c.N >= 16 * 2**20 for c in strips)


def test_twins_grid_pairs_every_strided_case():
    """`--grid twins` is the strided grid coalesced: with both sweeps fit_cost_model.py
    finds a transposed / coalesced pair for every strided case."""
    import fit_cost_model
    import sweep_cost_model

    strided, twins = sweep_cost_model.grid("strided"), sweep_cost_model.grid("twins")
    assert {c.layout for c in twins} == {"contiguous"}
    rows = [{"op": c.op, "M": str(c.M), "N": str(c.N), "dtype": c.dtype, "wdtype": c.wdtype,
             "layout": c.layout} for c in strided + twins]
    assert len(fit_cost_model._strided_pairs(rows)) == len(strided)


def test_bench_models_leaves_out_gradients_that_are_only_rounding():
    """BERT's attention key bias has a zero gradient in exact arithmetic (softmax ignores a
    shift shared by every key): its values are rounding, and two runs differ by ~100%."""
    import bench_models

    from tests.support import models

    s = models.Size(hidden=32, layers=1, heads=2, kv_heads=2, ffn=64, vocab=64, seq=16,
                    batch=2)
    grads = models.grads(models.build("bert", s).copy(torch.bfloat16))
    zero = bench_models.zero_grads(grads)
    assert zero == {"bert.encoder.layer.0.attention.self.key.bias"}
    assert bench_models.zero_grads({"a": torch.ones(3), "b": torch.full((3,), 1e-3)}) == set()


class _RecordingTimer:
    """Stands in for GraphTimer: each 'graph' is a name, timed as its next listed time."""

    def __init__(self, times: dict[str, list[float]]) -> None:
        self.times = {n: list(t) for n, t in times.items()}
        self.order: list[str] = []

    def replay_us(self, graph: str) -> float:
        self.order.append(graph)
        return self.times[graph].pop(0)

    def time_us(self, graph: str, rep_ms: int = 100) -> float:
        return self.replay_us(graph)


def test_rounds_rotate_the_variants_and_pair_their_samples():
    timer = _RecordingTimer({"stock": [100, 110, 90], "ext": [95, 100, 100]})
    times = common.interleaved_rounds(timer, {"stock": "stock", "ext": "ext"}, 3,
                                      single_replay=True)
    assert timer.order == ["stock", "ext", "ext", "stock", "stock", "ext"]
    assert times == {"stock": [100, 110, 90], "ext": [95, 100, 100]}
    lo, hi = common.paired_ratio_range(times["stock"], times["ext"])
    assert (round(lo, 3), round(hi, 3)) == (0.9, 1.1)


def test_bench_models_takes_the_aa_control_variant():
    import bench_models

    assert bench_models.compile_options("stock_again") == bench_models.compile_options("stock")
    assert "vs_stock_range" in bench_models.FIELDS
    with pytest.raises(SystemExit, match="stock_twice"):
        bench_models.main(["--device", "cpu", "--variants", "stock,stock_twice"])


def test_profile_model_sums_kernels_per_step_in_turns(monkeypatch):
    import types

    import profile_model

    seen = []

    def fake_replay(graph, timer):
        seen.append(graph)
        return [types.SimpleNamespace(name=f"k_{graph}", device_time_total=10.0)] * 2

    monkeypatch.setattr(profile_model, "profiled_replay", fake_replay)
    out = profile_model.kernel_times_in_turns({"stock": "stock", "ext": "ext"}, None, 4)
    assert seen == ["stock", "ext", "ext", "stock"] * 2
    assert out == {"stock": {"k_stock": [20.0, 2.0]}, "ext": {"k_ext": [20.0, 2.0]}}


@pytest.mark.parametrize("M, N, bm, bn, groups", [(200, 96, 32, 64, 3), (64, 64, 32, 64, 1),
                                                   (37, 130, 16, 32, 4)])
def test_the_column_strip_floor_kernel_sums_both_ways(M, N, bm, bn, groups):
    """bench_column_strip_floor's hand-written kernel (run in the interpreter) computes the
    sum pair it times, ragged strips and row groups included, so its times are of a
    correct kernel (the bench checks again on the GPU before timing)."""
    import bench_column_strip_floor as strip

    from tests.support.reference import max_rel_err, tolerance

    gen = torch.Generator().manual_seed(M * N)
    x = torch.randn(M, N, generator=gen)
    yt = torch.randn(N, M, generator=gen)
    rows, cols = strip.column_strip(x, yt, bm, bn, warps=4, stages=2, groups=groups)()
    ref_rows, ref_cols = strip.sum_pair(x.double(), yt.t().double())
    assert max_rel_err(rows, ref_rows) < tolerance(torch.float32)
    assert max_rel_err(cols, ref_cols) < tolerance(torch.float32)


def test_aa_summary_reports_the_widest_pair_either_way():
    import sweep_cost_model

    rows = [{"case": "a", "stock_aa": 0.99, "ext_aa": 1.01},
            {"case": "b", "stock_aa": 0.965, "ext_aa": 1.02}]
    text = sweep_cost_model.aa_summary(rows)
    assert "A/A over 2 cases" in text
    assert "up to 3.6% (stock, b: x0.965)" in text  # 1 / 0.965 - 1, wider than 1.02 - 1


def test_aa_needs_a_gpu(capsys):
    import sweep_cost_model

    with pytest.raises(SystemExit):
        sweep_cost_model.main(["--device", "cpu", "--aa", "3"])
    assert "--aa times CUDA graphs" in capsys.readouterr().err


def test_merge_joins_the_parts_and_reproduces_the_committed_summary(tmp_path, capsys):
    """`--merge` of the committed sweep (split here into two parts) writes the same CSV
    and prints the summary its log ends with."""
    import sweep_cost_model

    sweep = ROOT / "bench" / "results" / "cost_sweep_h100.csv"
    lines = sweep.read_text().splitlines(keepends=True)
    parts = [tmp_path / "part0.csv", tmp_path / "part1.csv"]
    parts[0].write_text("".join(lines[:50]))
    parts[1].write_text(lines[0] + "".join(lines[50:]))
    merged = tmp_path / "merged.csv"
    assert sweep_cost_model.main(["--merge", *map(str, parts), "--csv", str(merged)]) == 0
    assert merged.read_text() == sweep.read_text()
    printed = capsys.readouterr().out.strip()
    log = (ROOT / "bench" / "results" / "cost_sweep_h100.log").read_text().strip()
    assert printed and log.endswith(printed)


def test_merge_refuses_a_case_measured_in_two_parts(tmp_path):
    import sweep_cost_model

    part = tmp_path / "part.csv"
    part.write_text("case,M,N\nrms 64x64 fp32 contiguous,64,64\n")
    with pytest.raises(ValueError, match="in more than one part"):
        sweep_cost_model.read_parts([str(part), str(part)])


@pytest.mark.parametrize("parts, message", [
    (["h100_out/cost_sweep_h100_part*.csv"],
     "h100_out/cost_sweep_h100_part*.csv: no such file (a shell pattern that matched nothing?"),
    (["empty.csv"], "empty.csv: not a sweep CSV (no column 'case', 'M', 'N'; first line: "
                    "empty file)"),
    (["header.csv"], "--merge: no case in 1 part(s): header.csv"),
    (["header.csv", "cut.csv"], "--merge: case 'rms 64x64 fp32 contiguous': M, N or a "
                                "speedup is not a number (a part cut short?)"),
])
def test_merge_without_parts_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, parts,
                                                    message):
    """`--merge` of a pattern that matched nothing (the README's command before the sweep
    ran), of empty or header-only parts, or of a part cut short mid-row: one error line
    naming the file or case, exit 2, no CSV written."""
    import sweep_cost_model

    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "header.csv").write_text("case,M,N,fused_speedup\n")
    (tmp_path / "cut.csv").write_text("case,M,N,fused_speedup\nrms 64x64 fp32 contiguous,64\n")
    with pytest.raises(SystemExit) as stop:
        sweep_cost_model.main(["--merge", *parts, "--csv", "merged.csv"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sweep_cost_model.py: error: --merge: "), err
    assert message in err[0]
    assert not (tmp_path / "merged.csv").exists()


@pytest.mark.parametrize("args, message", [
    ([], "gpu_session.sh: no stage given"),
    (["bogus"], "gpu_session.sh: unknown stage 'bogus'"),
    (["sweep"], "gpu_session.sh: sweep needs K/P with 0 <= K < P, e.g. 'sweep 0/4' (got '')"),
    (["sweep", "4/4"], "sweep needs K/P with 0 <= K < P, e.g. 'sweep 0/4' (got '4/4')"),
])
def test_gpu_session_without_a_stage_prints_usage_and_creates_nothing(tmp_path, args,
                                                                       message):
    """A call without a stage (or a wrong one, or sweep without K/P): what is wrong, the
    usage, exit 2; no python run (PYTHON is `false`) and no $OUT folder."""
    import subprocess

    env = {**os.environ, "PYTHON": "false"}
    env.pop("OUT", None)
    res = subprocess.run(["bash", str(ROOT / "bench" / "gpu_session.sh"), *args], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res.stderr
    err = res.stderr.splitlines()
    assert message in err[0] and err[1].startswith("usage: bash bench/gpu_session.sh STAGE")
    assert "sweep K/P" in res.stderr and "line " not in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_gpu_session_without_cuda_says_so_and_creates_nothing(tmp_path):
    import subprocess

    env = {**os.environ, "PYTHON": sys.executable, "CUDA_VISIBLE_DEVICES": ""}
    env.pop("OUT", None)
    res = subprocess.run(["bash", str(ROOT / "bench" / "gpu_session.sh"), "host"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert res.stderr.strip() == ("gpu_session.sh: no CUDA device here; these stages "
                                  "measure on a GPU")
    assert list(tmp_path.iterdir()) == []
    help_ = subprocess.run(["bash", str(ROOT / "bench" / "gpu_session.sh"), "--help"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert help_.returncode == 0 and help_.stdout.startswith("usage: ")


def _help(module, monkeypatch, capsys):
    """(the parser, the --help text with its whitespace collapsed) of `module`'s main."""
    import argparse

    parsers = []
    parse_args = argparse.ArgumentParser.parse_args

    def grab(self, *args, **kwargs):
        parsers.append(self)
        return parse_args(self, *args, **kwargs)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", grab)
    with pytest.raises(SystemExit) as stop:
        module.main(["--help"])
    assert stop.value.code == 0
    return parsers[-1], " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("script", USER_SCRIPTS + PROBES)
def test_help_says_the_whole_first_sentence(script, monkeypatch, capsys):
    """--help's description is the docstring's whole first paragraph, not its first line
    cut mid-sentence."""
    import importlib

    module = importlib.import_module(script)
    _, out = _help(module, monkeypatch, capsys)
    first = common.description(module.__doc__)
    assert first and first[-1] in ".)" and first in out


@pytest.mark.parametrize("script", USER_SCRIPTS)
def test_help_names_the_device_and_explains_every_option(script, monkeypatch, capsys):
    """Every user script's --help says what device it needs (a CUDA GPU, CPU only, or CPU
    under TRITON_INTERPRET=1) and what every option does."""
    import argparse
    import importlib

    parser, out = _help(importlib.import_module(script), monkeypatch, capsys)
    description = " ".join(parser.description.split())
    assert description in out
    assert any(words in description for words in common.DEVICE_WORDS), description
    undocumented = [a.option_strings or a.dest for a in parser._actions
                    if not a.help or not a.help.strip()]
    assert undocumented == []
    shown = [a for a in parser._actions if a.help != argparse.SUPPRESS]
    assert len(shown) > 1  # --help and the script's own options
    if script in ("bench_models", "bench_dit"):
        assert "--variants" in out and "stock_again" in out


def test_cpu_runs_say_their_times_are_not_measurements(capsys):
    """On CPU (the Triton interpreter) the timing scripts label every time they print as
    the interpreter's wall clock and print no speedup of it; on a GPU the lines are as
    before."""
    import bench_distributed
    import bench_models
    import sweep_cost_model

    banner = common.not_measured_banner("bench_models.py")
    assert "NOT a measurement" in banner and banner.startswith("-" * 88)

    row = {"model": "llama", "device": "cpu", "variant": "stock", "norm_modules": 2,
           "max_grad_err_vs_eager": 1e-6, "compile_s": 3.2}
    bench_models.print_model("llama", [row])
    assert ("compile+first step 3.2 s (interpreter wall clock, not a measurement)"
            in capsys.readouterr().out)
    bench_models.print_model("llama", [{**row, "device": "cuda"}])
    assert "not a measurement" not in capsys.readouterr().out

    case = {"case": "rms 64x64 fp32 contiguous", "stock_ok": True, "upstream_off_ok": True,
            "fused_ok": False, "ext_ok": True, "stock_us": math.nan, "fused_speedup": math.nan,
            "ext_speedup": math.nan, "model_fuses": "True"}
    line = sweep_cost_model.case_line(case, timed=False)
    assert "stock ok" in line and "fused WRONG" in line and "(not timed: CPU)" in line
    assert " x" not in line and "nan" not in line
    assert sweep_cost_model.untimed_summary([case]) == (
        "1 cases checked against float64 on CPU, not timed: 1 wrong "
        "(['rms 64x64 fp32 contiguous fused']); model fuses in 1")

    rows = [{"mode": "ddp", "checkpoint": "off", "rank": 0, "variant": v,
             "norms_fused": "", "norm_modules": 5, "fused_kernels": "", "declined": "",
             "declined_names": "", "max_grad_err_vs_off": "", "max_grad_err_vs_eager": "",
             "step_ms": ms} for v, ms in (("on", "10.0"), ("off", "20.0"))]
    bench_distributed.print_rows(rows, measured=False)
    out = capsys.readouterr().out
    assert "interp ms" in out and "step ms" not in out
    assert "interpreter wall clock (not a measurement) on/off 0.500" in out
    bench_distributed.print_rows(rows)
    assert "rank 0: step time on/off 0.500" in capsys.readouterr().out


def test_ncu_cases_take_the_weights_dtype(capsys):
    """`ncu_backward.py --cases op:MxN:dtype[:wdtype]`: fp32 weights under 16-bit x are
    profiled as the sweep's grid draws them; a bad case is one clear line."""
    import ncu_backward

    assert ncu_backward.parse_case("rms:1254x16256:fp16:fp32") == (
        "rms", 1254, 16256, torch.float16, torch.float32)
    assert ncu_backward.parse_case("ln:38197x448:fp32") == (
        "ln", 38197, 448, torch.float32, torch.float32)
    # torch's names, as for x's dtype
    assert ncu_backward.parse_case("rms:64x64:bfloat16:float32") == (
        "rms", 64, 64, torch.bfloat16, torch.float32)
    for spec, message in (("ln:64x64:bf16:fp8", "unknown weight dtype 'fp8'"),
                          ("ln:64x64:bf16:fp32:fp32", "is not op:MxN:dtype[:wdtype]"),
                          ("sum:64x64:bf16", "the op is rms or ln")):
        with pytest.raises(SystemExit, match=re.escape(message)):
            ncu_backward.parse_case(spec)


def test_roofline_of_the_calibration_sweep_has_numbers_and_a_cpu_sweep_is_refused(
        tmp_path, capsys):
    """bench/README.md's calibration sweep (cost_sweep_h100.csv) predates the run's copy
    bandwidth (`copy_tbps`): roofline.py says so in its first line and measures against
    each shape's same-size add, so every shape has a copy fraction (no `nan` printed). A
    sweep without ext's times (a CPU run) is one error line, exit status 2."""
    import csv

    import roofline

    sweep = ROOT / "bench" / "results" / "cost_sweep_h100.csv"
    assert roofline.main([str(sweep)]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith("copy fraction against the shape's copy bandwidth: ")
    assert "cost_sweep_h100.csv has no copy_tbps" in first
    assert "nan" not in out
    with open(sweep, newline="") as f:
        rows = list(csv.DictReader(f))
    assert f"{len(rows)} shapes ({len(rows)} timed)" in out
    for row in rows:
        row["ext_us"] = ""
    cpu = tmp_path / "cpu_sweep.csv"
    with open(cpu, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(SystemExit) as stop:
        roofline.main([str(cpu)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(
        f"roofline.py: error: no case in {cpu} has ext's time (ext_us)")
