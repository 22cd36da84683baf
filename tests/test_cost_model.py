"""The CUDA cost model against its calibration data, and its rules one by one.

bench/results/cost_sweep_h100.csv holds, per case, the measured times of stock
torch.compile, upstream mix-order off and the fused kernel on an H100, with the shape
facts the hook recorded; the model must reproduce each fuse / decline decision. Without
`always_fuse`, a compile keeps Inductor's kernels for a group the model declines."""

import csv
import dataclasses
import json
import math
import os
import pathlib
import re
import sys

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import inductor_ext
from inductor_ext.plan import PlanOptions, ShapeInfo
from inductor_ext.targets.cuda import cost
from inductor_ext.targets.cuda import plan as cuda_plan
from inductor_ext.targets.cuda.tuning import CudaTuning
from tests.support.fused_kernels import rms_inputs as _inputs
from tests.support.reference import rms_backward
from tests.support.tuning import tuned

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import fit_cost_model  # noqa: E402
import sweep_cost_model  # noqa: E402

SWEEP = ROOT / "bench" / "results" / "cost_sweep_h100.csv"
SPLIT_ROWS_FUSED = ROOT / "bench" / "results" / "cost_sweep_split_rows_fused_h100.csv"
STRIPS = ROOT / "bench" / "results" / "cost_sweep_strips_h100.csv"
STRIPS_BEFORE_RULE = ROOT / "bench" / "results" / "cost_sweep_strips_before_rule_h100.csv"
STRIPS_HELDOUT = ROOT / "bench" / "results" / "cost_sweep_strips_heldout_h100.csv"


def _rows() -> list[dict]:
    with open(SWEEP, newline="") as f:
        return list(csv.DictReader(f))


def test_the_sweep_covers_what_the_model_must_decide():
    rows = _rows()
    assert len(rows) >= 100
    fused = [r for r in rows if r["fused_kernels"] != "0"]
    assert len(fused) >= 90
    assert all(r["shape_info"] for r in fused), "every fused case carries the hook's facts"
    for r in rows:  # declined before the model: the variants run the same kernels
        if r["fused_kernels"] == "0":
            assert not r["shape_info"]
            assert abs(float(r["fused_us"]) / float(r["upstream_off_us"]) - 1) < 0.1, r["case"]
    assert {r["op"] for r in rows} == {"rms", "ln", "sum"}
    assert {r["layout"] for r in rows} == {"contiguous", "sliced", "transposed"}
    assert {r["dtype"] for r in rows} >= {"bf16", "fp32", "fp16"}
    sizes = [int(r["M"]) * int(r["N"]) for r in rows]
    assert min(sizes) <= 1 << 20 and max(sizes) >= 1 << 29
    assert all(r[f"{v}_ok"] == "True" for r in rows for v in ("stock", "upstream_off",
                                                               "fused"))


AA = ROOT / "bench" / "results" / "cost_sweep_aa_h100.csv"


def test_the_sweep_meets_the_bar_within_the_measured_noise():
    """The committed whole run: ext is never below the better of stock and upstream off by
    more than the same code moved between two compiles (the A/A run), and its geomean over
    stock on the shapes with M*N >= 16M is at least 1.3x."""
    with open(AA, newline="") as f:
        aa = [float(v) for r in csv.DictReader(f) for k, v in r.items() if k.endswith("_aa")]
    band = max(max(r, 1 / r) for r in aa)
    assert 1.0 < band < 1.06  # a noise run that saw no noise, or much, is not a band
    rows = _rows()
    assert all(r["ext_ok"] == "True" for r in rows)
    slow = [(r["case"], float(r["ext_speedup"])) for r in rows
            if float(r["ext_speedup"]) * band < 1]
    assert not slow, f"ext slower than the best of stock / upstream off beyond x{band:.3f}"
    large = [float(r["ext_over_stock"]) for r in rows if int(r["M"]) * int(r["N"]) >= 1 << 24]
    assert len(large) >= 60
    geomean = math.exp(sum(map(math.log, large)) / len(large))
    assert geomean >= 1.3, geomean


def _calibration() -> list[dict]:
    """The calibration rows as fit_cost_model.py takes them: the whole sweep (one run of
    the current kernels, column strips included)."""
    return [r for r in fit_cost_model.load([str(SWEEP)]) if r["shape_info"]]


@pytest.mark.parametrize("row", _calibration(), ids=lambda r: r["case"].replace(" ", "_"))
def test_model_reproduces_the_measured_decision(row):
    fuse, est = fit_cost_model.decide(row)
    speedup = fit_cost_model.measured_speedup(row)
    assert fit_cost_model.agrees(row, fuse), (
        f"measured x{speedup:.2f}, model {'fuses' if fuse else 'declines'}: {est.describe()}")


def test_the_committed_constants_are_the_fitted_ones():
    """Refitting the committed data gives the committed constants (within rounding)."""
    fitted = fit_cost_model.fit(_calibration())
    tuning = CudaTuning()
    for name in ("fused", "unfused", "upstream"):
        assert abs(fitted[f"{name}_efficiency"] - getattr(tuning, f"{name}_efficiency")) < 0.01
        assert abs(fitted[f"{name}_overhead_s"] - getattr(tuning, f"{name}_overhead_s")) \
            < 0.6e-6
    for name in ("strided_sector_cost", "strided_row_kernel_cost",
                 "strided_column_kernel_cost", "strided_stock_share"):
        assert abs(fitted[name] - getattr(tuning, name)) < 0.01, name


H100 = fit_cost_model.H100


def _norm(M: int, N: int, es: int = 2, columns: int = 1, strided: bool = False,
          rows_after_sums: bool = True) -> ShapeInfo:
    """A norm backward's facts (x and dy read, dx written: rows after the row sums)."""
    total = 3 * M * N * es + 4 * M + 2 * N * es
    return ShapeInfo(M_hint=M, M_static=True, N=N, num_columns=columns, elem_bytes=es,
                     shared_bytes=2 * M * N * es, total_bytes=total,
                     unfused_bytes=total + 2 * M * N * es, row_elem_bytes=3 * es,
                     device=torch.device("cuda"), strided_bytes=M * N * es if strided else 0,
                     strided_elem_bytes=es if strided else 0, rows_after_sums=rows_after_sums)


def _estimate(shape: ShapeInfo, gates: str = "strict") -> cost.Estimate:
    options = PlanOptions(upstream_gates=gates)
    plan = cuda_plan.plan(shape, H100, CudaTuning(), options)
    return cost.estimate(shape, plan, H100, CudaTuning(), options)


def test_small_shapes_fuse_unless_programs_get_a_row_or_so():
    """The issue's held-out 2x wins (8192x1024, 2048x4096) fuse; one row per program
    does not (the old rule declined both: it counted row blocks, not rows)."""
    assert _estimate(_norm(8192, 1024, columns=2)).fuse
    assert _estimate(_norm(2048, 4096)).fuse
    tiny = _estimate(_norm(128, 8192, es=4, columns=2))
    assert not tiny.fuse and "rows per program" in tiny.why_not


def test_strided_operands_are_priced_per_contiguous_run():
    """A narrow run (2 rows x 2 bytes per row block) costs the fused loop more than a wide
    one per strided byte; both are priced, neither is ruled out by a reason."""
    narrow_shape = _norm(16384, 4096, strided=True)
    narrow_plan = cuda_plan.plan(narrow_shape, H100, CudaTuning(), PlanOptions())
    wide_shape = _norm(262144, 256, strided=True)
    wide_plan = cuda_plan.plan(wide_shape, H100, CudaTuning(), PlanOptions())
    assert cost.strided_run_bytes(narrow_shape, narrow_plan) == narrow_plan.block_m * 2
    per_byte = [cost.strided_fused_s(s, p, H100, CudaTuning()) / s.strided_bytes
                for s, p in ((narrow_shape, narrow_plan), (wide_shape, wide_plan))]
    assert per_byte[0] > 4 * per_byte[1] > 0
    narrow, wide = _estimate(narrow_shape), _estimate(wide_shape)
    assert narrow.why_not == wide.why_not == ""
    assert not narrow.fuse and wide.fuse


def test_strided_runs_use_the_strided_operands_element():
    """bf16 x transposed beside an fp32 weight: the run is block_m x 2 bytes, not x 4."""
    shape = dataclasses.replace(_norm(65536, 1024, es=4, strided=True),
                                strided_elem_bytes=2)
    plan = cuda_plan.plan(shape, H100, CudaTuning(), PlanOptions())
    assert cost.strided_run_bytes(shape, plan) == plan.block_m * 2


def test_stock_pays_more_when_the_column_kernel_reads_the_strided_operand():
    """rms with x transposed: both of Inductor's kernels read x; a sum pair's column
    kernel reads only the coalesced operand."""
    row_only = _norm(65536, 1024, strided=True)
    shared = dataclasses.replace(row_only, strided_shared_bytes=row_only.strided_bytes)
    assert (cost.strided_unfused_s(shared, H100, CudaTuning())
            > 5 * cost.strided_unfused_s(row_only, H100, CudaTuning()) > 0)


def test_strided_groups_fuse_only_with_the_margin():
    """The strided share applies to strided groups only. It is the lowest predicted ratio
    of a transposed pair measured slower fused: 1 while none is (the committed sweep)."""
    assert CudaTuning().strided_stock_share == 1.0
    tight = dataclasses.replace(CudaTuning(), strided_stock_share=0.5)
    shape = _norm(65536, 1024, strided=True)
    plan = cuda_plan.plan(shape, H100, tight, PlanOptions())
    est = cost.estimate(shape, plan, H100, tight, PlanOptions())
    assert est.stock_share == 0.5 and "fuses below 0.50 of stock" in est.describe()
    assert est.fuse == (est.fused_s < 0.5 * est.stock_s)
    plain = _norm(65536, 1024)
    assert cost.estimate(plain, cuda_plan.plan(plain, H100, tight, PlanOptions()), H100,
                         tight, PlanOptions()).stock_share == 1.0


def test_strided_groups_get_fewer_larger_programs():
    """A transposed operand is read in runs of XBLOCK elements: strided groups plan 2
    programs per SM with twice the rows per tile (rms 16384x4096 bf16 on the H100 is then
    faster than stock), coalesced ones keep 4 per SM."""
    strided = cuda_plan.plan(_norm(16384, 4096, strided=True), H100, CudaTuning(),
                             PlanOptions())
    plain = cuda_plan.plan(_norm(16384, 4096), H100, CudaTuning(), PlanOptions())
    # programs: whole row blocks per program (16384 rows), at most 4 (2) per SM
    assert (plain.programs, plain.block_m, plain.num_warps) == (512, 2, 8)
    assert (strided.programs, strided.block_m, strided.num_warps) == (256, 4, 16)


def test_looped_column_tiles_are_latency_bound():
    """ln 512x131072 bf16: 32 tiles of 4096, more than `max_register_tiles`: no unrolled
    tiles, whatever the groups."""
    ln = _norm(512, 131072, columns=2)
    plan = cuda_plan.plan(ln, H100, CudaTuning(), PlanOptions())
    assert plan.looped_column_tiles and plan.column_groups == 1
    est = cost.estimate(ln, plan, H100, CudaTuning(), PlanOptions())
    tiles, rows = 131072 // plan.r0_block, plan.rows_per_program(512) // plan.block_m
    assert not est.fuse and est.fused_s >= 2 * rows * tiles * CudaTuning().looped_tile_s


def test_unrolled_tiles_need_the_row_in_l1():
    fp32 = _norm(2048, 32768, es=4)  # x and dy rows: 256 KB, more than the L1 share
    bf16 = _norm(2048, 32768, es=2)  # 128 KB: one row fits, two do not
    assert cuda_plan.register_tiles_for(fp32, H100, CudaTuning()) == 0
    assert cuda_plan.register_tiles_for(fp32, H100, CudaTuning(), groups=2) == 8
    plan = cuda_plan.plan(bf16, H100, CudaTuning(), PlanOptions())
    assert (plan.register_tiles, plan.column_groups) == (8, 1)
    assert {dict(c)["XBLOCK"] for c in plan.configs} == {1}


@pytest.mark.parametrize("op,es,groups,programs", [
    ("ln", 2, 2, 64),  # 256 KB of partials: 128 KB per group, one program per SM
    ("ln", 4, 2, 64),  # and 128 KB of x and dy per group in L1
    ("rms", 4, 2, 128),  # 64 KB of partials per group: two programs per SM
    ("rms", 2, 1, 128),  # fits one program: not split
])
def test_rows_too_long_for_one_program_split_into_column_groups(op, es, groups, programs):
    """Rows of 32768 whose partials or L1 bytes are too many for one program: `groups`
    programs per row program, each reading the whole row for the row sums (a run-time
    loop) and keeping its share of the partials in registers (on the H100 ln 2048x32768
    bf16 is then faster than stock; as looped tiles it is declined)."""
    shape = _norm(2048, 32768, es=es, columns=2 if op == "ln" else 1)
    plan = cuda_plan.plan(shape, H100, CudaTuning(), PlanOptions())
    assert (plan.column_groups, plan.programs, plan.register_tiles) == (groups, programs, 8)
    assert plan.grid == programs * groups and plan.group_tiles == 8 // groups
    assert plan.unroll_row_sums is (groups == 1)  # unrolled row sums spilled beside them
    assert plan.workspace_bytes(shape) == programs * shape.num_columns * 32768 * 4
    assert cost.estimate(shape, plan, H100, CudaTuning(), PlanOptions()).fuse


def test_rows_of_65536_split_into_four_groups():
    """ln 1024x65536 bf16: 512 KB of partials, 128 KB in each of 4 groups (faster than
    stock on the H100; as looped tiles it is declined)."""
    plan = cuda_plan.plan(_norm(1024, 65536, columns=2), H100, CudaTuning(), PlanOptions())
    assert (plan.column_groups, plan.register_tiles, plan.group_tiles) == (4, 16, 4)
    two = dataclasses.replace(CudaTuning(), max_column_groups=2)
    assert cuda_plan.plan(_norm(1024, 65536, columns=2), H100, two,
                          PlanOptions()).looped_column_tiles


@pytest.mark.parametrize("N,groups,tile,tiles", [
    (20480, 2, 2048, 10),  # 5 tiles of 4096 split no way: halved, 2 groups of 5
    (18432, 3, 2048, 9),  # 9 tiles of 2048: 3 groups of 3
    (28672, 2, 2048, 14),
])
def test_rows_whose_tiles_no_group_count_shares_halve_the_tile(N, groups, tile, tiles):
    """LayerNorm rows of odd tile counts (held out: ln 8192x20480 / 4096x18432 /
    4096x28672 bf16, faster than stock on the H100 this way; as looped tiles, declined)."""
    plan = cuda_plan.plan(_norm(4096, N, columns=2), H100, CudaTuning(), PlanOptions())
    assert (plan.column_groups, plan.r0_block, plan.register_tiles) == (groups, tile, tiles)
    no_halving = dataclasses.replace(CudaTuning(), min_register_tile=4096)
    assert cuda_plan.plan(_norm(4096, N, columns=2), H100, no_halving,
                          PlanOptions()).looped_column_tiles


def test_column_groups_need_a_pass_after_the_row_sums():
    """A row side without [M, N] outputs after its sums (a row sum beside a column sum)
    holds the sums and the partials in one pass over the tiles, which groups cannot split:
    such rows are never grouped."""
    one_pass = _norm(2048, 32768, es=4, rows_after_sums=False)
    assert cuda_plan.column_groups_for(one_pass, H100, CudaTuning()) == 0
    assert cuda_plan.plan(one_pass, H100, CudaTuning(), PlanOptions()).looped_column_tiles
    forced = dataclasses.replace(CudaTuning(), column_groups=2)
    assert cuda_plan.plan(one_pass, H100, forced, PlanOptions()).column_groups == 1


def test_column_groups_are_priced_by_their_extra_reads():
    shape = _norm(2048, 32768, columns=2)
    plan = cuda_plan.plan(shape, H100, CudaTuning(), PlanOptions())
    free = dataclasses.replace(CudaTuning(), column_group_read_cost=0.0)
    priced = cost.estimate(shape, plan, H100, CudaTuning(), PlanOptions()).fused_s
    unpriced = cost.estimate(shape, plan, H100, free, PlanOptions()).fused_s
    extra = CudaTuning().column_group_read_cost * shape.shared_bytes / H100.dram_bytes_per_s
    assert priced - unpriced == pytest.approx(extra)


@pytest.mark.parametrize("gates,fuses", [("none", False), ("strict", False),
                                         ("relaxed", True)])
def test_upstream_gates_follow_the_torch_release(gates, fuses):
    """Square 8192x8192: 2.10-2.14 decline it (nrow < 2 ncol), 2.15 takes it."""
    assert cost.upstream_would_fuse(_norm(8192, 8192), gates) is fuses
    assert cost.upstream_would_fuse(_norm(65536, 1024), gates) is (gates != "none")
    assert not cost.upstream_would_fuse(_norm(8192, 32768), gates)
    assert not cost.upstream_would_fuse(_norm(65536, 1024, strided=True), gates)


def test_the_fusion_table_records_the_verdict(plugin, tmp_path, monkeypatch):
    """Under always_fuse the model's verdict and the shape facts still land in the
    table, so a sweep can compare them with what it measures."""
    from tests.support.reference import rms_backward

    monkeypatch.chdir(tmp_path)
    with torch._inductor.config.patch(enabled_metric_tables="mix_order_fusion"), \
            inductor_ext.config.patch(split_size=2):  # 2 rows per program: too few to pay
        torch.compile(rms_backward)(torch.randn(64, 40), torch.randn(40),
                                    torch.randn(64, 40), torch.rand(64, 1))
    with open(os.path.join(tmp_path, "metric_table_mix_order_fusion.csv")) as f:
        (row,) = list(csv.DictReader(f))
    assert row["model_fuses"] == "False" and "rows per program" in row["model_detail"]
    info = json.loads(row["shape_info"])
    assert info["M_hint"] == 64 and info["N"] == 40 and info["strided_bytes"] == 0


def test_the_hook_records_the_strided_operand(plugin, tmp_path, monkeypatch):
    """x transposed: its bytes, its element size and that the column reduction (dw)
    reads it too are in the shape facts the cost model prices."""
    from tests.support.reference import rms_backward

    monkeypatch.chdir(tmp_path)
    M, N = 64, 40
    x = torch.randn(N, M, dtype=torch.bfloat16).t()
    with torch._inductor.config.patch(enabled_metric_tables="mix_order_fusion"):
        torch.compile(rms_backward)(x, torch.randn(N), torch.randn(M, N, dtype=torch.bfloat16),
                                    torch.rand(M, 1))
    with open(os.path.join(tmp_path, "metric_table_mix_order_fusion.csv")) as f:
        (row,) = list(csv.DictReader(f))
    info = json.loads(row["shape_info"])
    assert info["strided_bytes"] == M * N * 2 and info["strided_elem_bytes"] == 2
    assert info["strided_shared_bytes"] == info["strided_bytes"]
    assert info["strided_rows_adjacent"] is True  # x.t(): row m+1 sits beside row m


def test_strided_rows_that_are_pieces_of_a_longer_axis_are_priced_per_element():
    """The hook's facts of sum 4096x4096 fp32 transposed on the H100: Inductor splits the
    4096-long rows into 131072 rows of 128, so adjacent rows of the transposed operand are
    512 KB apart. Priced at block_m-element runs the model would fuse it, and the kernel
    is several times slower than stock; priced per element it declines."""
    facts = ShapeInfo(M_hint=131072, M_static=True, N=128, num_columns=1, elem_bytes=4,
                      shared_bytes=67108864, total_bytes=134758400, unfused_bytes=201867264,
                      row_elem_bytes=8, device=torch.device("cuda"),
                      strided_bytes=67108864, strided_elem_bytes=4)
    assert _estimate(facts).fuse  # the wrong verdict: block_m-element runs
    apart = dataclasses.replace(facts, strided_rows_adjacent=False)
    plan = cuda_plan.plan(apart, H100, CudaTuning(), PlanOptions())
    assert cost.strided_run_bytes(apart, plan) == 4 < cost.strided_run_bytes(facts, plan)
    assert not _estimate(apart).fuse


@pytest.mark.parametrize("storage,adjacent", [("NBT", True), ("NTB", False)])
def test_the_hook_reads_whether_strided_rows_are_adjacent(plugin, tmp_path, monkeypatch,
                                                          storage, adjacent):
    """A [B, T, N] operand stored N-major: as [N, B, T] its row (b, t) + 1 is the next
    element (runs of block_m elements), as [N, T, B] it is B elements away (one element
    per request). The hook reads it off the row index's step, not from the sizes."""
    monkeypatch.chdir(tmp_path)
    B, T, N = 4, 16, 40
    if storage == "NBT":
        y = torch.randn(N, B, T).permute(1, 2, 0)
    else:
        y = torch.randn(N, T, B).permute(2, 1, 0)
    x = torch.randn(B, T, N)

    def pair(x, y):
        return (x + y).sum(-1), x.sum((0, 1))

    with torch._inductor.config.patch(enabled_metric_tables="mix_order_fusion"):
        rows, cols = torch.compile(pair)(x, y)
    torch.testing.assert_close(rows, (x + y).sum(-1))
    torch.testing.assert_close(cols, x.sum((0, 1)))
    with open(os.path.join(tmp_path, "metric_table_mix_order_fusion.csv")) as f:
        (row,) = list(csv.DictReader(f))
    info = json.loads(row["shape_info"])
    assert (info["M_hint"], info["N"]) == (B * T, N)
    assert info["strided_bytes"] == B * T * N * 4
    assert info["strided_rows_adjacent"] is adjacent


def test_rows_inductor_split_into_pieces_are_declined(plugin, tmp_path, monkeypatch):
    """Few long rows: Inductor splits each row's reduction into pieces (forced here to 4,
    as the H100 split 256 rows of 32768). The row side then holds partial sums over
    64 rows of 256; even under always_fuse it is declined as split_rows, with the pieces
    named, and the result is Inductor's. (Rows of 1024: the same four kernels as rows of
    4096 would give, a quarter of the interpreter's time.)"""
    from torch._inductor.choices import InductorChoices

    from tests.support.reference import max_rel_err, rms_backward, tolerance

    monkeypatch.chdir(tmp_path)
    M, N = 16, 1024
    monkeypatch.setattr(InductorChoices, "reduction_split_factor",
                        staticmethod(lambda device, reduction_numel_hint, numel_hint,
                                     inner_reduction: 4 if reduction_numel_hint == N else 1))
    x, w, dy, rstd = torch.randn(M, N), torch.randn(N), torch.randn(M, N), torch.rand(M, 1)
    tables = "mix_order_fusion,mix_order_reject"
    with torch._inductor.config.patch(enabled_metric_tables=tables):
        dx, dw = torch.compile(rms_backward)(x, w, dy, rstd)
    assert not os.path.exists(os.path.join(tmp_path, "metric_table_mix_order_fusion.csv"))
    with open(os.path.join(tmp_path, "metric_table_mix_order_reject.csv")) as f:
        (row,) = [r for r in csv.DictReader(f) if r["reason"] == "split_rows"]
    assert (row["M"], row["N"]) == (str(M * 4), str(N // 4))
    assert f"row of {N} into 4 pieces of {N // 4}" in row["detail"]
    ref_dx, ref_dw = rms_backward(x.double(), w.double(), dy.double(), rstd.double())
    assert max_rel_err(dx, ref_dx) < tolerance(torch.float32)
    assert max_rel_err(dw, ref_dw) < tolerance(torch.float32)


def test_the_committed_split_rows_all_ran_slower_fused():
    """The sweep's groups whose rows Inductor had split, measured fused before the hook
    declined them (kept apart: the sweep now runs Inductor's kernels for them): every one
    is slower than stock, which is what split_rows_reason says."""
    with open(SPLIT_ROWS_FUSED, newline="") as f:
        split = list(csv.DictReader(f))
    assert len(split) == 8
    assert all(fit_cost_model.shape_of(r).row_pieces > 1 for r in split)
    assert not any(r["shape_info"] for r in _rows()
                   if r["case"] in {s["case"] for s in split})
    assert max(fit_cost_model.measured_speedup(r) for r in split) < 1.0
    assert all(not fit_cost_model.decide(r)[0] for r in split)


def _csv(path: pathlib.Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_the_column_strips_decisions_and_overhead_match_their_sweep():
    """The transposed sum pairs Inductor split into pieces, walked one piece per program
    (cost_sweep_strips_h100.csv, H100, re-measured with the final step's samples side by
    side): every one runs faster fused and is fused, and the committed strip overhead is
    the fit's."""
    rows = [r for r in _csv(STRIPS) if r["shape_info"]]
    assert len(rows) == 4
    for row in rows:
        shape = fit_cost_model.shape_of(row)
        assert shape.walks_pieces and shape.strided_bytes and shape.row_pieces in (16, 32)
        fuse, est = fit_cost_model.decide(row)
        assert fuse and fit_cost_model.measured_speedup(row) > 1 + fit_cost_model.NOISE, (
            row["case"], est.describe())
    fitted = fit_cost_model.fit_strips(rows)
    assert fitted["strip_points"] == 4
    assert fitted["strip_overhead_s"] == pytest.approx(CudaTuning().strip_overhead_s,
                                                       rel=0.05)


def test_the_held_out_strips_decisions_agree():
    """`--grid strips` (shapes the strip price was not fitted on, 16-64 pieces): every
    decision agrees with the measurement, and every strip among them is fused."""
    rows = [r for r in _csv(STRIPS_HELDOUT) if r["shape_info"]]
    assert len(rows) == 10
    for row in rows:
        fuse, est = fit_cost_model.decide(row)
        assert fit_cost_model.agrees(row, fuse), (row["case"], est.describe())
    strips = [r for r in rows if fit_cost_model.shape_of(r).walks_pieces]
    assert len(strips) == 9
    assert {fit_cost_model.shape_of(r).row_pieces for r in strips} == {16, 32, 64}
    assert all(fit_cost_model.decide(r)[0] for r in strips)


def test_split_rows_without_a_strided_operand_stay_declined():
    """The split long rows walked as strips, measured fused before the rule
    (cost_sweep_strips_before_rule_h100.csv): without a transposed operand the strip has
    no gain (0.58-1.05x), so split_rows_reason declines them; the sums it keeps."""
    rows = _csv(STRIPS_BEFORE_RULE)
    plain = [r for r in rows if r["op"] != "sum"]
    assert len(plain) == 8
    for row in plain:
        shape = fit_cost_model.shape_of(row)
        assert shape.walks_pieces and not shape.strided_bytes
        assert "column strip pays only" in fit_cost_model.split_rows_reason(shape)
    speedups = sorted(fit_cost_model.measured_speedup(r) for r in plain)
    assert speedups[-1] < 1.06 and speedups[len(speedups) // 2] < 1.0
    for row in (r for r in rows if r["op"] == "sum"):
        assert not fit_cost_model.split_rows_reason(fit_cost_model.shape_of(row))


def _transposed_sum_pair(x, y):
    return (x + y).sum(-1), x.sum(0)


@pytest.mark.parametrize("dtype,double_buffered", [(torch.float32, False),
                                                   (torch.bfloat16, False),
                                                   (torch.bfloat16, True)])
def test_a_split_transposed_sum_is_fused_as_column_strips(interp, cuda_knobs, tmp_path,
                                                          monkeypatch, dtype,
                                                          double_buffered):
    """Inductor splits `(x + y).sum(-1)` with y transposed into pieces of each row (forced
    to 4 here, as the H100 splits 4096x4096 into 32): the column sum `x.sum(0)` reduces per
    piece, so each program walks one piece's rows (row t * 4 + piece), sharing x's loads;
    double-buffered, the next block's rows are the piece's too. Both sums match float64,
    one kernel fewer than stock, the table records the strip."""
    from torch._inductor.choices import InductorChoices
    from torch._inductor.utils import run_and_get_code

    from tests.support.reference import max_rel_err, tolerance

    monkeypatch.chdir(tmp_path)
    if double_buffered:
        cuda_knobs(prefetch_min_n=1, prefetch_min_rows=1)
    M = N = 96
    monkeypatch.setattr(InductorChoices, "reduction_split_factor",
                        staticmethod(lambda device, reduction_numel_hint, numel_hint,
                                     inner_reduction: 4))
    x = torch.randn(M, N, dtype=dtype)
    y = torch.randn(N, M, dtype=dtype).t()
    with torch._inductor.config.patch(inductor_ext.options()), \
            inductor_ext.config.patch(always_fuse=True), \
            torch._inductor.config.patch(enabled_metric_tables="mix_order_fusion"):
        (rows, cols), (code,) = run_and_get_code(torch.compile(_transposed_sum_pair), x, y)
    ref_rows, ref_cols = _transposed_sum_pair(x.double(), y.double())
    assert max_rel_err(rows, ref_rows) < tolerance(dtype)
    assert max_rel_err(cols, ref_cols) < tolerance(dtype)
    with open(os.path.join(tmp_path, "metric_table_mix_order_fusion.csv")) as f:
        (row,) = list(csv.DictReader(f))
    info = json.loads(row["shape_info"])
    assert info["walks_pieces"] and info["row_pieces"] == 4
    assert (info["M_hint"], info["N"]) == (M * 4, N // 4)
    assert info["strided_rows_adjacent"]  # along the original rows, as the strip walks
    assert "xindex = xstep * 4 + seg" in code
    # the final step folds the 4 pieces' partials side by side: one program per piece
    assert re.search(r"'fixed_grid': \['\d+', '4', '1'\]", code)
    assert "seg = tl.program_id(1)" in code and "for seg in" not in code
    assert ("xindex_pf = xstep_pf * 4 + seg" in code) is double_buffered
    torch._dynamo.reset()
    _, (stock,) = run_and_get_code(torch.compile(_transposed_sum_pair), x, y)
    assert code.count("@triton.jit") == stock.count("@triton.jit") - 1


def test_the_hook_records_a_transposed_operand_only_a_column_reads(plugin, tmp_path,
                                                                   monkeypatch):
    """A column sum over dy times a transposed [M, N] operand the row side never reads:
    Inductor's column kernel walks it coalesced, the fused row loop strided, so its bytes
    are priced apart (strided_column_bytes) and not as the row kernel's."""
    from tests.support.reference import rms_backward

    def with_bias_grad(x, w, dy, rstd, g):
        dx, dw = rms_backward(x, w, dy, rstd)
        return dx, dw, (dy.float() * g.float()).sum(0)

    monkeypatch.chdir(tmp_path)
    M, N = 64, 40
    g = torch.randn(N, M, dtype=torch.bfloat16).t()
    x = torch.randn(M, N, dtype=torch.bfloat16)
    with torch._inductor.config.patch(enabled_metric_tables="mix_order_fusion"):
        torch.compile(with_bias_grad)(x, torch.randn(N), x.clone(), torch.rand(M, 1), g)
    with open(os.path.join(tmp_path, "metric_table_mix_order_fusion.csv")) as f:
        rows = list(csv.DictReader(f))
    infos = [json.loads(row["shape_info"]) for row in rows]
    (info,) = [i for i in infos if i["num_columns"] == 2]  # dw and the transposed sum
    assert info["strided_bytes"] == 0 and info["strided_shared_bytes"] == 0
    assert info["strided_column_bytes"] == M * N * 2 and info["strided_elem_bytes"] == 2
    # priced in the fused loop only: a request per block_m-element run
    shape = ShapeInfo(**{**info, "device": torch.device("cuda")})
    plan = dataclasses.replace(cuda_plan.plan(shape, H100, CudaTuning(), PlanOptions()),
                               block_m=4)
    extra = cost.strided_fused_s(shape, plan, H100, CudaTuning())
    assert extra == pytest.approx(CudaTuning().strided_sector_cost * (M * N * 2 / 8) * 32
                                  / H100.dram_bytes_per_s)
    assert cost.strided_unfused_s(shape, H100, CudaTuning()) == 0


@pytest.mark.parametrize("M,N,es,columns,hinted", [
    (8192, 16384, 2, 2, True),  # 131 programs x 64 KB: 8.4 MB, the hint pays
    (2048, 24576, 2, 1, True),  # 12.6 MB: within a quarter of the L2 (a tie)
    (4096, 16384, 4, 2, False),  # 128 x 128 KB: 16.8 MB, slower with the hint
    (2048, 32768, 2, 1, False),  # 16.8 MB
    (2048, 32768, 4, 1, False),  # 2 groups x 128 programs x 256 KB
])
def test_register_tiled_rows_hint_l2_only_what_fits(M, N, es, columns, hinted):
    """The L2 hint of the next row block stays in register-tiled loops only while every
    program's hinted block fits a quarter of the L2 together; more pushes out the rows
    the programs are reading."""
    plan = cuda_plan.plan(_norm(M, N, es=es, columns=columns), H100, CudaTuning(),
                          PlanOptions())
    assert plan.register_tiles and bool(plan.l2_prefetch) is hinted
    wide = dataclasses.replace(CudaTuning(), register_tiled_hint_l2_share=1.5)
    assert cuda_plan.plan(_norm(M, N, es=es, columns=columns), H100, wide,
                          PlanOptions()).l2_prefetch == 1


def test_unaligned_long_rows_take_column_tiles():
    """rms 2392x10167 fp16 (rows of 20334 bytes, not whole 16-byte vectors) spills 80
    registers as one persistent row on an H100; its aligned neighbour of 16256
    and the unaligned 4918 (a padded 8192) stay persistent."""
    unaligned = cuda_plan.plan(_norm(2392, 10167), H100, CudaTuning(), PlanOptions())
    assert unaligned.column_tiled and unaligned.register_tiles == 5  # of 2048 columns
    assert not cuda_plan.plan(_norm(1254, 16256), H100, CudaTuning(), PlanOptions()).column_tiled
    assert not cuda_plan.plan(_norm(17693, 4918), H100, CudaTuning(), PlanOptions()).column_tiled
    off = dataclasses.replace(CudaTuning(), unaligned_register_share=1.0)
    assert not cuda_plan.plan(_norm(2392, 10167), H100, off, PlanOptions()).column_tiled


def test_grouped_row_sums_are_priced_per_tile_and_row():
    """ln 405x18752 bf16: 7 rows per program, each a run-time loop over 10 tiles for its
    row sums (slower fused than stock on the H100): declined."""
    shape = _norm(405, 18752, columns=2)
    plan = cuda_plan.plan(shape, H100, CudaTuning(), PlanOptions())
    assert plan.column_groups == 2 and not plan.unroll_row_sums
    est = cost.estimate(shape, plan, H100, CudaTuning(), PlanOptions())
    rows = plan.rows_per_program(405)
    assert est.fused_s >= rows * plan.register_tiles * CudaTuning().grouped_row_tile_s
    assert not est.fuse


@pytest.mark.parametrize("M,N,columns,tiles,unroll", [
    (956, 31488, 1, 8, 2),  # RMSNorm, 8 tiles of 4096 in two groups: two tiles a step
    (1792, 27840, 1, 14, 2),  # 14 tiles of 2048
    (1024, 32832, 1, 9, 1),  # 9 tiles in 3 groups: a remainder iteration lost 14-16%
    (7711, 29824, 2, 8, 1),  # LayerNorm: two sums and three loads a step spill more
])
def test_grouped_row_sums_unroll_only_where_it_gained(M, N, columns, tiles, unroll):
    """The column groups' run-time row-sum loop takes two tiles a step (Triton's
    loop_unroll_factor) for RMSNorm rows of an even number of at least 8 tiles."""
    plan = cuda_plan.plan(_norm(M, N, es=4, columns=columns), H100, CudaTuning(),
                          PlanOptions())
    assert plan.column_groups > 1 and not plan.unroll_row_sums
    assert (plan.register_tiles, plan.row_sum_unroll, plan.row_sum_stages) == (tiles, unroll,
                                                                               0)
    fewer = dataclasses.replace(CudaTuning(), grouped_row_sum_unroll_min_tiles=tiles + 1)
    assert cuda_plan.plan(_norm(M, N, es=4, columns=columns), H100, fewer,
                          PlanOptions()).row_sum_unroll == 1  # 6 tiles did not gain


def test_rows_in_one_group_take_no_row_sum_loop_hints():
    """Rows whose row sums are straight-line code have no loop to unroll."""
    plan = cuda_plan.plan(_norm(2048, 32768, es=2), H100, CudaTuning(), PlanOptions())
    assert plan.column_groups == 1 and plan.unroll_row_sums
    assert (plan.row_sum_unroll, plan.row_sum_stages) == (1, 0)


@settings(max_examples=400, deadline=None)
@given(M=st.integers(1, 1 << 21), N=st.integers(64, 70000), es=st.sampled_from([2, 4]),
       columns=st.integers(1, 3))
@example(M=2392, N=10167, es=2, columns=1)
def test_every_planned_warp_count_is_a_power_of_two(M, N, es, columns):
    """Triton takes no other (342 register-tiled programs would make 12)."""
    plan = cuda_plan.plan(_norm(M, N, es=es, columns=columns), H100, CudaTuning(),
                          PlanOptions())
    warps = [plan.num_warps, *(dict(c)["num_warps"] for c in plan.configs)]
    assert all(w > 0 and w & (w - 1) == 0 for w in warps), warps


def test_few_rows_at_one_program_per_sm_double_buffer():
    """One resident program per SM (few rows) double-buffers one-row blocks from
    `prefetch_min_rows_alone` rows a program; two-row blocks and more programs per SM
    keep the `prefetch_min_rows` rule, and so does `prefetch_min_rows_alone` 0."""
    tuning = CudaTuning()
    old = dataclasses.replace(tuning, prefetch_min_rows_alone=0)
    few = _norm(1430, 4672)  # 130 programs of 11 one-row blocks
    plan, plan_old = (cuda_plan.plan(few, H100, t, PlanOptions()) for t in (tuning, old))
    assert plan.programs == plan_old.programs <= H100.cores and plan.block_m == 1
    assert plan.prefetch and not plan_old.prefetch
    # (N odd: with the aligned rows off, which run one row a block)
    two_row_blocks = cuda_plan.plan(_norm(1682, 3033), H100,
                                    dataclasses.replace(tuning, aligned_row_min_n=0),
                                    PlanOptions())
    assert two_row_blocks.block_m == 2 and not two_row_blocks.prefetch
    one_row_each = _norm(H100.cores, 8192)
    assert not cuda_plan.plan(one_row_each, H100, tuning, PlanOptions()).prefetch
    assert cuda_plan.use_prefetch(_norm(264, 8192), H100, tuning, 8192, 1, 132, False)
    many = _norm(65536, 1024)  # 4 programs per SM: the 16-row rule
    assert cuda_plan.plan(many, H100, tuning, PlanOptions()).programs > H100.cores
    assert cuda_plan.use_prefetch(many, H100, tuning, 1024, 8, 4 * H100.cores, False)
    assert not cuda_plan.use_prefetch(_norm(1024 * 8, 1024), H100, tuning, 1024, 1,
                                      4 * H100.cores, False)


@pytest.mark.parametrize("M, N, es, columns, aligned_tiles, tiles", [
    (8146, 11591, 2, 2, 3, 6),  # ln bf16: every 4096-column config spilled 216 registers
    (5808, 23721, 4, 1, 6, 12),  # rms fp32
    (2392, 10167, 2, 1, 3, 5),  # the random grid's rms fp16
])
def test_unaligned_register_tiled_rows_take_smaller_tiles(M, N, es, columns, aligned_tiles,
                                                          tiles):
    """A register-tiled row off 16-byte vectors keeps an address per element: it runs in
    tiles of `unaligned_register_tile` (2048) columns, where 4096 spilled in every
    config; an aligned row of about the same width plans as without the rule; 0 turns the
    rule off."""
    shape = _norm(M, N, es=es, columns=columns)
    got = cuda_plan.plan(shape, H100, CudaTuning(), PlanOptions())
    assert (got.r0_block, got.register_tiles) == (2048, tiles)
    off = dataclasses.replace(CudaTuning(), unaligned_register_tile=0)
    before = cuda_plan.plan(shape, H100, off, PlanOptions())
    assert (before.r0_block, before.register_tiles) == (4096, aligned_tiles)
    aligned = _norm(M, N - N % 64, es=es, columns=columns)
    assert (cuda_plan.plan(aligned, H100, CudaTuning(), PlanOptions())
            == cuda_plan.plan(aligned, H100, off, PlanOptions()))


@pytest.mark.parametrize("rule_off", [{"prefetch_min_rows_alone": 0},
                                      {"register_tiled_fewer_programs": False},
                                      {"kept_row_tile": 0},
                                      {"register_tiled_scaled_warps": False},
                                      {"unaligned_register_tile": 0},
                                      {"grouped_row_sum_unroll": 1}])
def test_the_bench_cases_plan_as_before_the_newer_rules(rule_off):
    """The 16 bench cases own at least 16 rows a program (the one-program double
    buffering), none is register-tiled at more than one program per SM (the fewer
    register-tiled counts and their scaled warps), none has a padded LayerNorm row (the
    kept row tiles) and every row starts on a 16-byte vector (the unaligned register
    tile): no rule changes their plans, configs included, so their numbers stand."""
    old = dataclasses.replace(CudaTuning(), **rule_off)
    for case in sweep_cost_model.grid("bench"):
        shape = _norm(case.M, case.N, 4 if case.dtype == "fp32" else 2,
                      columns=2 if case.op == "ln" else 1)
        assert (cuda_plan.plan(shape, H100, CudaTuning(), PlanOptions())
                == cuda_plan.plan(shape, H100, old, PlanOptions())), case.name


# -- the model's decision in a compile, without always_fuse ----------------------------------
def test_cost_model_decline_keeps_inductor_kernels_without_always_fuse(interp):
    """A group the cost model declines (here: fewer rows per program than the tuning asks
    for) keeps Inductor's kernels; `always_fuse` off is the default."""
    with torch._inductor.config.patch(inductor_ext.options()), \
            tuned("cuda", min_rows_per_program=65):
        torch.compile(rms_backward)(*_inputs())
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs["not_profitable"] == 1


def test_small_shape_fuses_by_default(interp):
    """64x40: the model predicts one fused launch cheaper than Inductor's two kernels."""
    with torch._inductor.config.patch(inductor_ext.options()):
        torch.compile(rms_backward)(*_inputs())
    assert inductor_ext.metrics.mix_order_kernels == 1
