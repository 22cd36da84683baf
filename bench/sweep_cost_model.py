"""Calibration sweep for the CUDA cost model: fused (inductor_ext, always_fuse) against
stock torch.compile (upstream mix-order at its default, on since torch 2.10) and
upstream mix-order off, over shapes, dtypes, ops and operand layouts; `ext` is
inductor_ext as users run it (its cost model decides), the variant the "never slower than
stock" summary line is about.

    python bench/sweep_cost_model.py --csv bench/results/cost_sweep_h100.csv [--warm 8]
        [--part K/P] [--grid full|heldout|strided|twins|strips|random|bench|smoke]
        [--seed 42 --count 40] [--variants stock,upstream_off,fused,ext,liger]
    python bench/sweep_cost_model.py --merge h100_out/cost_sweep_h100_part*.csv --csv ...
    python bench/sweep_cost_model.py --aa 7 --only 'rms 4096x768 bf16 transposed' --csv ...

Every case is checked against float64 before it is timed (GraphTimer: CUDA-graph replay,
L2 emptied by a read before each replay, median). Each row carries the fused kernel's
`shape_info` and the cost model's verdict as the hook recorded them (mix_order_fusion
table), so `tests/test_cost_model.py` can check the model against the measured decision.

`--warm P` first compiles every (case, variant) in P parallel processes (Inductor's FX,
AOTAutograd and Triton caches, one shared cache dir), then times sequentially; the warm
processes' autotuning picks are dropped (timed on a shared GPU), so the timing process
autotunes afresh.

`--aa R` measures the noise instead: each variant is compiled twice (a and b) and the
copies are timed in R rotated turns; a / b of the same code is what one sweep measurement
can move by, the band a "never slower than stock" claim is read within.

`--grid random` draws `--count` norm cases at random per seed (`--seed 42`, `43-59` or
`43,50`; issue 42's roofline report, `bench/roofline.py` reads the CSV), `--grid bench` is
bench_norm_bwd.py's 16 cases. On a GPU every row has the same run's copy bandwidth
(`copy_tbps`, a 32768x4096 bf16 add; `shape_copy_tbps`, the same add at the case's size),
each timed variant's fraction of both (`*_copy_frac`, `*_shape_copy_frac`: min_bytes /
time / bandwidth), ext's ratios to stock, upstream off and Liger, and what ext's fused
kernel was compiled to (`ext_programs`, `ext_launched_programs`, `ext_block_m`, the picked
config's registers, resident programs per SM, waves) with its final step's time past the
fused kernel's end (profiled replays).
`liger` (not in the default variants) is Liger's fused RMSNorm / LayerNorm backward,
skipped with the reason in `liger_skipped` where liger_kernel is not importable.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import json
import math
import os
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

# One cache for this run and its warm processes, set before torch reads it: a warm cache
# from another run would serve graphs without writing their fusion-table rows.
# The process that makes it removes it at exit.
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    _cache_dir = tempfile.TemporaryDirectory(prefix="sweep_cache_", ignore_cleanup_errors=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache_dir.name

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from common import (  # noqa: E402
    BASELINE_SHAPES,
    DTYPES,
    GraphTimer,
    apply_setting,
    check,
    check_device,
    copy_tbps,
    description,
    has_liger,
    has_upstream_mix_order,
    interleaved_rounds,
    liger_forward,
    min_bytes,
    norm_forward,
    norm_weights,
    parse_shapes,
    profiled_replay,
)

import inductor_ext  # noqa: E402

#: stock: torch.compile as users get it (upstream mix-order at its default);
#: upstream_off: upstream mix-order off; fused: inductor_ext with always_fuse;
#: ext: inductor_ext with its cost model deciding (the default config).
VARIANTS = ("stock", "upstream_off", "fused", "ext")
#: Variants run only when --variants names them: liger is Liger's fused norm backward
#: (norms only; skipped, with the reason recorded, where liger_kernel is not importable).
ALL_VARIANTS = (*VARIANTS, "liger")
#: ext's ratios to these (their time / ext's), per case.
RATIO_BASES = ("stock", "upstream_off", "liger")
#: The summary's geomean covers shapes with M*N at least this (where bandwidth dominates).
GEOMEAN_MIN_NUMEL = 16 * 2**20
#: What the fused kernel's mix_order_fusion row adds to a case's measurements.
RECORDED = ("programs", "block_m", "model_fuses", "model_detail", "shape_info",
            "workspace_bytes")


@dataclasses.dataclass(frozen=True)
class Case:
    op: str  # rms | ln | sum (a row sum beside a column sum of the same [M, N])
    M: int
    N: int
    dtype: str  # x's dtype
    wdtype: str  # weight dtype (norms)
    layout: str  # contiguous | sliced (rows with a gap) | transposed (x read with a stride)

    @property
    def name(self) -> str:
        w = "" if self.wdtype == self.dtype else f"/w{self.wdtype}"
        return f"{self.op} {self.M}x{self.N} {self.dtype}{w} {self.layout}"

    def min_bytes(self) -> int:
        es, ws = DTYPES[self.dtype].itemsize, DTYPES[self.wdtype].itemsize
        if self.op == "sum":
            return 2 * self.M * self.N * es + (self.M + self.N) * es
        return min_bytes(self.op, self.M, self.N, es, ws)


#: The random grid's ranges (issue 42): N and M*N, each log-uniform between its bounds.
RANDOM_N = (256, 32768)
RANDOM_NUMEL = (4 * 2**20, 256 * 2**20)
#: Share of the random grid's N drawn as any integer (masked rows); the rest are
#: rounded to a multiple of 64.
RANDOM_ODD_N = 0.2


def random_grid(seed: int = 42, count: int = 40) -> list[Case]:
    """`count` distinct norm cases drawn with `seed` (the same cases for the same seed):
    op rms or ln; N log-uniform in RANDOM_N, a multiple of 64 but for about one in five;
    M*N log-uniform in RANDOM_NUMEL (M rounded, then kept so that M*N stays inside);
    x in bf16, fp16 or fp32, the weights in x's dtype or fp32 (fp32 with fp32 x);
    contiguous operands."""
    rng = random.Random(seed)
    lo_n, hi_n = RANDOM_N
    lo, hi = RANDOM_NUMEL
    cases: list[Case] = []
    while len(cases) < count:
        op = rng.choice(("rms", "ln"))
        n = math.exp(rng.uniform(math.log(lo_n), math.log(hi_n)))
        N = round(n) if rng.random() < RANDOM_ODD_N else 64 * round(n / 64)
        N = min(max(N, lo_n), hi_n)
        numel = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        M = min(max(round(numel / N), -(-lo // N)), hi // N)
        dtype = rng.choice(("bf16", "fp16", "fp32"))
        wdtype = dtype if dtype == "fp32" else rng.choice((dtype, "fp32"))
        case = Case(op, M, N, dtype, wdtype, "contiguous")
        if case not in cases:
            cases.append(case)
    return cases


def bench_grid() -> list[Case]:
    """bench_norm_bwd.py's 16 cases: its 8 baseline shapes, RMSNorm and LayerNorm each,
    the weights in x's dtype."""
    names = {dt: name for name, dt in DTYPES.items()}
    return [Case(op, M, N, names[dt], names[dt], "contiguous")
            for M, N, dt in parse_shapes(BASELINE_SHAPES) for op in ("rms", "ln")]


def seeds(text: str) -> list[int]:
    """`--seed`: one seed (42), an inclusive range (43-59) or a comma list of either."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        try:
            out += range(int(lo), int(hi or lo) + 1)
        except ValueError:
            raise ValueError(f"--seed {text!r}: seeds are integers, 'A-B' ranges or a "
                             "comma list of them") from None
    return out


def grid(name: str, seed: str = "42", count: int = 40) -> list[Case]:
    """The sweep's cases. `full`: M*N from 1M to 512M, N 64..32768, rms/ln in bf16 and
    fp32 (fp16 x with fp32 w at some), plain sum pairs, sliced and transposed operands;
    `heldout`: the shapes the issue measured outside the tuned list; `strided`: transposed
    operands at shapes and dtypes the strided costs were not fitted on (ln, fp16, other
    widths), to check them; `twins`: the same cases coalesced, so that the two sweeps
    together give `fit_cost_model.py` 14 more transposed / coalesced pairs to fit;
    `strips`: sum pairs with a transposed operand at shapes the full grid has not, whose
    rows Inductor splits on the H100 (fewer than 2 x 32 x 132 rows): the column strips
    and their price held out; `random`: `count` norm cases drawn with each of `seed`'s
    seeds (`random_grid`, `seeds`), the same case once; `bench`: bench_norm_bwd.py's 16
    cases; `smoke`: tiny, for the CPU interpreter."""
    if name == "random":
        drawn = [case for one in seeds(seed) for case in random_grid(one, count)]
        return list(dict.fromkeys(drawn))
    if name == "bench":
        return bench_grid()
    if name == "smoke":
        return [Case("rms", 64, 48, "fp32", "fp32", "contiguous"),
                Case("ln", 33, 64, "fp32", "fp32", "sliced"),
                Case("sum", 64, 32, "fp32", "fp32", "transposed")]
    heldout = [Case("ln", 8192, 1024, "bf16", "bf16", "contiguous"),
               Case("rms", 2048, 4096, "bf16", "bf16", "contiguous"),
               Case("ln", 4096, 1024, "fp32", "fp32", "contiguous"),
               Case("ln", 24576, 3072, "bf16", "bf16", "contiguous"),
               Case("ln", 16384, 1536, "fp16", "fp32", "contiguous"),
               Case("rms", 4096, 8192, "bf16", "bf16", "contiguous"),
               Case("rms", 2048, 24576, "bf16", "bf16", "contiguous"),
               Case("rms", 16384, 4096, "bf16", "fp32", "contiguous")]
    if name == "heldout":
        return heldout
    if name == "strips":
        return [Case("sum", M, N, dtype, dtype, "transposed") for M, N, dtype in (
            (2048, 8192, "bf16"), (2048, 8192, "fp32"), (2048, 16384, "bf16"),
            (4096, 8192, "bf16"), (4096, 8192, "fp32"), (6144, 4096, "bf16"),
            (6144, 4096, "fp16"), (8192, 2048, "bf16"), (8192, 2048, "fp32"),
            (4096, 4096, "fp16"))]
    if name in ("strided", "twins"):
        layout = "transposed" if name == "strided" else "contiguous"
        return [Case(op, M, N, dtype, wdtype, layout) for op, M, N, dtype, wdtype in (
            ("rms", 32768, 2048, "bf16", "bf16"), ("rms", 131072, 512, "bf16", "bf16"),
            ("rms", 8192, 8192, "bf16", "bf16"), ("rms", 32768, 1024, "fp32", "fp32"),
            ("rms", 65536, 512, "fp32", "fp32"), ("ln", 65536, 1024, "bf16", "bf16"),
            ("ln", 16384, 2048, "bf16", "bf16"), ("ln", 131072, 768, "bf16", "bf16"),
            ("ln", 32768, 1024, "fp32", "fp32"), ("ln", 16384, 1536, "fp16", "fp32"),
            ("sum", 65536, 1024, "fp16", "fp16"), ("sum", 131072, 512, "fp16", "fp16"),
            ("sum", 16384, 2048, "bf16", "bf16"), ("sum", 524288, 128, "bf16", "bf16"))]
    cases = list(heldout)
    for op in ("rms", "ln"):
        for dtype in ("bf16", "fp32"):
            for N in (64, 512, 2048, 8192, 32768):
                for numel in (1 << 20, 1 << 23, 1 << 26, 1 << 29):
                    if dtype == "fp32" and numel > 1 << 28:
                        continue  # 2 GB per operand: the fp32 sweep stops at 256M
                    M = numel // N
                    if M >= 8:
                        cases.append(Case(op, M, N, dtype, dtype, "contiguous"))
    for M, N in ((16384, 4096), (65536, 1024), (4096, 768)):
        cases.append(Case("ln", M, N, "fp16", "fp32", "contiguous"))
        cases.append(Case("rms", M, N, "bf16", "bf16", "sliced"))
        cases.append(Case("rms", M, N, "bf16", "bf16", "transposed"))
    for M, N in ((65536, 1024), (8192, 4096), (262144, 256), (4096, 4096), (32768, 768)):
        for dtype in ("bf16", "fp32"):
            cases.append(Case("sum", M, N, dtype, dtype, "contiguous"))
            cases.append(Case("sum", M, N, dtype, dtype, "transposed"))
    return list(dict.fromkeys(cases))


def _operand(case: Case, device: str, gen: torch.Generator) -> torch.Tensor:
    """An [M, N] leaf (contiguous), or a view of one: rows with a gap (sliced), or
    the transpose of an [N, M] tensor (rows read with a stride of M)."""
    dt = DTYPES[case.dtype]
    if case.layout == "sliced":
        base = torch.randn(case.M, case.N + 64, device=device, dtype=dt, generator=gen)
        return base[:, 32:32 + case.N]
    if case.layout == "transposed":
        return torch.randn(case.N, case.M, device=device, dtype=dt, generator=gen).t()
    return torch.randn(case.M, case.N, device=device, dtype=dt, generator=gen)


def problem(case: Case, device: str):
    """(fn, inputs, what to differentiate, dy): fn(*inputs) is timed as a backward for
    norms (autograd.grad of its output under dy) and as a forward for sum pairs."""
    gen = torch.Generator(device=device).manual_seed(hash(case) & 0xFFFF)
    N = case.N
    if case.op == "sum":
        x = _operand(dataclasses.replace(case, layout="contiguous"), device, gen)
        y = _operand(case, device, gen)

        def fn(x, y):
            return (x + y).sum(-1), x.sum(0)

        return fn, [x, y], None, None
    x = _operand(case, device, gen).requires_grad_()
    w, b = norm_weights(case.op, N, device, DTYPES[case.wdtype], generator=gen)
    dy = torch.randn(case.M, N, device=device, dtype=DTYPES[case.dtype], generator=gen)
    return norm_forward(case.op, N), [x, w, b], [t for t in (x, w, b) if t is not None], dy


def variant_options(variant: str) -> dict:
    if variant == "stock":
        return {}
    if variant == "upstream_off":
        return {"triton.mix_order_reduction": False} if has_upstream_mix_order() else {}
    return inductor_ext.options()


def run_once(case: Case, variant: str, device: str):
    """Compile and run one (case, variant); returns (callable to time, outputs,
    reference inputs) with everything warmed up."""
    torch._dynamo.reset()
    fn, inputs, wrt, dy = problem(case, device)
    if variant == "liger":  # Liger's modules sharing our weights, not compiled
        compiled, params = liger_forward(case.op, case.N, inputs)
        wrt = [inputs[0], *params]
    else:
        compiled = torch.compile(fn, options=variant_options(variant), dynamic=False)
    holder: dict = {}
    if wrt is None:
        def prepare():
            return None

        def step():
            return compiled(*inputs)
    else:
        def prepare():
            holder["y"] = compiled(*inputs)

        def step():
            return torch.autograd.grad(holder["y"], wrt, dy, retain_graph=True)
    return fn, inputs, wrt, dy, prepare, step, holder


def reference(fn, inputs, wrt, dy):
    up = [None if t is None else t.detach().double().requires_grad_(t.requires_grad)
          for t in inputs]
    if wrt is None:
        return fn(*up)
    return torch.autograd.grad(fn(*up), [u for u in up if u is not None and u.requires_grad],
                               dy.double())


def run_checked(case: Case, variant: str, timer: GraphTimer | None, device: str
                ) -> tuple[bool, str, Any, tuple]:
    """Compile and run one (case, variant), captured in a CUDA graph when `timer` is
    given; (matches float64, its error, the graph or None, what the graph replays into)."""
    with inductor_ext.config.patch(always_fuse=variant == "fused"):
        fn, inputs, wrt, dy, prepare, step, holder = run_once(case, variant, device)
        if timer is not None:
            _, got, graph = timer.run(step, prepare)
        else:
            prepare()
            got, graph = step(), None
    got = got if isinstance(got, (tuple, list)) else [got]
    ok, err = check(got, reference(fn, inputs, wrt, dy))
    return ok, err, graph, (inputs, holder, got)


def fusion_rows(table_dir: pathlib.Path, before: int) -> list[dict]:
    path = table_dir / "metric_table_mix_order_fusion.csv"
    if not path.exists():
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return rows[before:]


def count_fusion_rows(table_dir: pathlib.Path) -> int:
    return len(fusion_rows(table_dir, 0))


def skip_reason(case: Case, variant: str) -> str:
    """Why `variant` does not run on `case` ("" where it does)."""
    if variant != "liger":
        return ""
    if case.op not in ("rms", "ln"):
        return "Liger has no kernel for this op"
    return "" if has_liger() else "liger_kernel is not importable"


@contextlib.contextmanager
def launched_kernels():
    """The Triton kernels (Inductor's autotuners) launched inside the block, in the order
    of their first launch: after the block, each holds the config its autotuning picked.
    Served from Inductor's caches or not, a compiled module launches through
    `CachingAutotuner.run`."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    seen: dict[int, Any] = {}
    original = CachingAutotuner.run

    def run(self, *args, **kwargs):
        seen.setdefault(id(self), self)
        return original(self, *args, **kwargs)

    CachingAutotuner.run = run  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        CachingAutotuner.run = original  # type: ignore[method-assign]


def plan_facts(kernels: list[Any]) -> dict:
    """What ext's fused kernel was compiled to, from the LaunchPlan in its inductor_meta
    and the launcher its autotuning kept: programs, rows per block, row tile, the column
    tiling, the final step; with the compiler's registers (a GPU build), the config's
    warps and XBLOCK, programs resident per SM, the waves the grid runs in and how full
    they are (1.0: every wave fills every SM). `ext_planned_kernels` 0: ext declined."""
    from inductor_ext.plan.types import LaunchPlan
    from inductor_ext.runtime.autotune import (
        PLAN_KEY,
        launched_programs,
        resident_per_sm,
        waves,
    )

    ours = [k for k in kernels if PLAN_KEY in (getattr(k, "inductor_meta", None) or {})]
    out: dict = {"ext_planned_kernels": len(ours)}
    if len(ours) != 1:
        return out
    kernel = ours[0]
    plan = LaunchPlan.from_meta(kernel.inductor_meta[PLAN_KEY])
    out.update(ext_kernel_name=getattr(kernel.fn, "__name__", ""),
               ext_programs=plan.programs, ext_column_groups=plan.column_groups,
               ext_block_m=plan.block_m, ext_r0_block=plan.r0_block,
               ext_column_tiled=plan.column_tiled, ext_register_tiles=plan.register_tiles,
               ext_final_step="aten" if plan.final_step is None else "generated")
    if len(kernel.launchers) != 1:
        return out
    launcher = kernel.launchers[0]
    warps = launcher.config.num_warps
    n_regs = getattr(launcher, "n_regs", None)
    props = kernel.device_props
    per_sm = resident_per_sm(n_regs, warps, props)
    launched = launched_programs(launcher, plan)
    grid_waves = waves(launched, n_regs, warps, props)
    sms = getattr(props, "multi_processor_count", None)
    out.update(ext_launched_programs=launched,
               ext_xblock=launcher.config.kwargs.get("XBLOCK"), ext_num_warps=warps,
               ext_n_regs=n_regs, ext_n_spills=getattr(launcher, "n_spills", None),
               ext_resident_per_sm=per_sm, ext_waves=grid_waves,
               ext_wave_fill=(round(launched / (grid_waves * per_sm * sms), 4)
                              if grid_waves and per_sm and sms else None))
    return out


def final_step_facts(graph: Any, timer: GraphTimer, kernel_name: str,
                     replays: int = 3) -> dict:
    """ext's backward in profiled replays (each after the timed replays' L2 flush),
    averaged: every kernel's device time, the fused kernel's (the one named
    `kernel_name`, else the longest), and the final step's time on the critical path:
    how long the backward runs past the fused kernel's end (`ext_final_us`, also written
    as `ext_tail_us`), and its share of the fused kernel plus that. With programmatic
    dependent launch the final step starts before the fused kernel ends and waits, so its
    own span would count the wait."""
    total = fused = tail = 0.0
    count = 0
    for _ in range(replays):
        events = profiled_replay(graph, timer)
        if not events:
            return {}
        named = [e for e in events if kernel_name and kernel_name in e.name]
        main = named[0] if named else max(events, key=lambda e: e.device_time_total)
        end = main.time_range.end
        total += sum(e.device_time_total for e in events) / replays
        fused += main.device_time_total / replays
        tail += (max(e.time_range.end for e in events) - end) / replays
        count = len(events)
    return {"ext_backward_kernels": count, "ext_kernels_us": round(total, 2),
            "ext_fused_kernel_us": round(fused, 2), "ext_final_us": round(tail, 2),
            "ext_final_share": round(tail / (fused + tail), 4) if fused + tail else None,
            "ext_tail_us": round(tail, 2)}


def measure_variant(case: Case, variant: str, timer: GraphTimer | None,
                    table_dir: pathlib.Path, device: str) -> dict:
    """One variant of one case: correct first, then timed; the fused and ext variants
    also report what the hook recorded, ext what its fused kernel was compiled to and its
    final step's share (their tensors die with this frame)."""
    out: dict = {}
    reason = skip_reason(case, variant)
    if reason:
        return {f"{variant}_skipped": reason}
    before = count_fusion_rows(table_dir)
    inductor_ext.metrics.reset()
    t0 = time.perf_counter()
    kernels: dict[int, Any] = {}
    try:
        with launched_kernels() as kernels:
            ok, err, graph, _replayed_into = run_checked(case, variant, timer, device)
        out[f"{variant}_ok"] = ok
        out[f"{variant}_err"] = err
        out[f"{variant}_us"] = (timer.time_us(graph) if timer is not None and ok
                                else math.nan)
        if variant == "ext":
            try:  # what the kernel was compiled to: facts, not the variant's result
                out.update(plan_facts(list(kernels.values())))
                if timer is not None and ok and out.get("ext_planned_kernels") == 1:
                    out.update(final_step_facts(graph, timer,
                                                out.get("ext_kernel_name", "")))
            except Exception as exc:
                out["ext_facts_error"] = repr(exc)[:300]
    except Exception as exc:  # a failing variant is a result, not a stop
        out[f"{variant}_ok"] = False
        out[f"{variant}_us"] = math.nan
        out[f"{variant}_error"] = repr(exc)[:300]
    out[f"{variant}_s"] = round(time.perf_counter() - t0, 2)
    if variant in RECORDED_VARIANTS:
        prefix = RECORDED_VARIANTS[variant]
        out[f"{variant}_kernels"] = inductor_ext.metrics.mix_order_kernels
        fused = fusion_rows(table_dir, before)
        if len(fused) == 1:
            out.update({prefix + key: fused[0].get(key, "") for key in RECORDED})
    return out


#: The variants whose fusion-table row a case records, and the prefix of its columns
#: (fused's unprefixed: fit_cost_model.py reads them).
RECORDED_VARIANTS = {"fused": "", "ext": "ext_"}


def record_path(record_dir: pathlib.Path, case: Case, variant: str) -> pathlib.Path:
    """Where a warm process leaves a variant's fusion-table rows for one case."""
    return record_dir / f"{case_key(case)}{'' if variant == 'fused' else '.' + variant}.json"


def roofline_columns(row: dict, run_copy: float | None) -> dict:
    """Each timed variant's fraction of the copy bandwidth (min_bytes / time / bandwidth):
    of the run's (`copy_tbps`) and of the same add at this size (`shape_copy_tbps`); ext's
    ratios to stock, upstream off and Liger (their time / ext's: above 1, ext is faster)."""
    out: dict = {}
    if run_copy is not None:
        out["copy_tbps"] = round(run_copy, 4)
    for variant in ALL_VARIANTS:
        us = row.get(f"{variant}_us")
        if not isinstance(us, float) or math.isnan(us) or not us:
            continue
        tbps = row["min_bytes"] / (us * 1e-6) / 1e12
        if run_copy:
            out[f"{variant}_copy_frac"] = round(tbps / run_copy, 4)
        if row.get("shape_copy_tbps"):
            out[f"{variant}_shape_copy_frac"] = round(tbps / row["shape_copy_tbps"], 4)
    ext = row.get("ext_us")
    for base in RATIO_BASES[1:]:  # ext_over_stock is the summary's own column
        other = row.get(f"{base}_us")
        out[f"ext_over_{base}"] = (other / ext if ext and other and not math.isnan(ext)
                                   else math.nan)
    return out


def measure(cases: list[Case], timer: GraphTimer | None, table_dir: pathlib.Path,
            device: str, out_csv: str | None, record_dir: pathlib.Path,
            run_copy: float | None = None) -> list[dict]:
    rows = []
    for case in cases:
        row: dict = {**dataclasses.asdict(case), "case": case.name,
                     "numel": case.M * case.N, "min_bytes": case.min_bytes()}
        if timer is not None:
            row["shape_copy_tbps"] = copy_tbps(timer, numel=case.M * case.N,
                                               dtype=DTYPES[case.dtype])
        for variant in ARGS.variants:
            row.update(measure_variant(case, variant, timer, table_dir, device))
            if device == "cuda":
                torch.cuda.empty_cache()
        for variant, prefix in RECORDED_VARIANTS.items():
            recorded = record_path(record_dir, case, variant)
            if prefix + "shape_info" not in row and recorded.exists():
                fused = json.loads(recorded.read_text())
                if len(fused) == 1:
                    row.update({prefix + k: fused[0].get(k, "") for k in RECORDED})
        best = min(row.get("stock_us", math.nan), row.get("upstream_off_us", math.nan))
        for variant in ("fused", "ext"):
            us = row.get(f"{variant}_us")
            row[f"{variant}_speedup"] = best / us if us else math.nan
        row["ext_over_stock"] = (row["stock_us"] / row["ext_us"]
                                 if row.get("ext_us") and "stock_us" in row else math.nan)
        row.update(roofline_columns(row, run_copy))
        rows.append(row)
        print(case_line(row, timed=timer is not None), flush=True)
        if out_csv:
            write_csv(out_csv, rows)
    return rows


def model_fuses(row: dict) -> bool:
    """The cost model's verdict as fused's row recorded it, else ext's (fused not run)."""
    return (row.get("model_fuses") or row.get("ext_model_fuses")) == "True"


def case_line(row: dict, timed: bool) -> str:
    """One case's printed line: each variant's time and the speedups (GPU); untimed (the
    CPU interpreter, which measures nothing) whether each variant matched float64."""
    model = f"model {'fuse' if model_fuses(row) else 'decline'}"
    if not timed:
        checks = "  ".join(f"{v} {'ok' if row.get(f'{v}_ok') else 'WRONG'}"
                           for v in ALL_VARIANTS if f"{v}_ok" in row)
        return f"{row['case']:44s} vs float64: {checks}  {model}  (not timed: CPU)"
    return (f"{row['case']:44s} stock {row.get('stock_us', math.nan):9.1f} off "
            f"{row.get('upstream_off_us', math.nan):9.1f} fused "
            f"{row.get('fused_us', math.nan):9.1f} ext {row.get('ext_us', math.nan):9.1f} us"
            f"  fused x{row['fused_speedup']:.2f} ext x{row['ext_speedup']:.2f}  {model}"
            + (f"  liger {row['liger_us']:.1f} us" if "liger_us" in row else "")
            + (f"  ext {row['ext_copy_frac']:.2f} of copy" if "ext_copy_frac" in row else ""))


def untimed_summary(rows: list[dict]) -> str:
    """The CPU run's verdict: correctness and the model's decisions, no speed."""
    wrong = [f"{r['case']} {v}" for r in rows for v in ALL_VARIANTS
             if r.get(f"{v}_ok") is False]
    return (f"{len(rows)} cases checked against float64 on CPU, not timed: "
            f"{len(wrong)} wrong{f' ({wrong})' if wrong else ''}; model fuses in "
            f"{sum(1 for r in rows if model_fuses(r))}")


def summary(rows: list[dict]) -> str:
    """The run's verdict in one paragraph: where fusing is faster, where the model fuses,
    the slowest ext case against the best of stock / upstream off, and the geomean of ext
    over stock on the large shapes."""
    faster = sum(1 for r in rows if r["fused_speedup"] > 1)
    lines = [f"{len(rows)} cases: fusing faster in {faster}; model fuses in "
             f"{sum(1 for r in rows if model_fuses(r))}"]
    ext = [r for r in rows if not math.isnan(r["ext_speedup"])]
    if ext:
        worst = min(ext, key=lambda r: r["ext_speedup"])
        large = [r["ext_over_stock"] for r in ext
                 if r["M"] * r["N"] >= GEOMEAN_MIN_NUMEL and not math.isnan(r["ext_over_stock"])]
        geo = math.exp(sum(map(math.log, large)) / len(large)) if large else math.nan
        lines.append(f"ext vs best of stock/upstream_off: slowest x{worst['ext_speedup']:.3f} "
                     f"({worst['case']}), {sum(1 for r in ext if r['ext_speedup'] < 1)} below "
                     f"1.0; geomean ext/stock over {len(large)} shapes with M*N >= "
                     f"{GEOMEAN_MIN_NUMEL // 2**20}M: x{geo:.3f}")
    return "\n".join(lines)


def measure_aa(cases: list[Case], timer: GraphTimer, rounds: int,
               out_csv: str | None) -> list[dict]:
    """Every variant compiled twice and timed in rotated turns: per case, each copy's
    median and a / b, the ratio two measurements of the same code can differ by."""
    rows = []
    for case in cases:
        graphs: dict = {}
        alive = []  # the graphs replay into these tensors
        for copy in "ab":
            for variant in ARGS.variants:
                ok, err, graph, tensors = run_checked(case, variant, timer, "cuda")
                if not ok:
                    raise RuntimeError(f"{case.name} {variant}: wrong result ({err})")
                graphs[f"{variant}_{copy}"] = graph
                alive.append(tensors)
        times = interleaved_rounds(timer, graphs, rounds)
        row: dict = {"case": case.name, "M": case.M, "N": case.N, "rounds": rounds}
        for variant in ARGS.variants:
            a, b = (statistics.median(times[f"{variant}_{c}"]) for c in "ab")
            row.update({f"{variant}_a_us": round(a, 2), f"{variant}_b_us": round(b, 2),
                        f"{variant}_aa": round(a / b, 4)})
        rows.append(row)
        print(f"{case.name:44s} " + "  ".join(
            f"{v} {row[f'{v}_a_us']:.1f}/{row[f'{v}_b_us']:.1f} x{row[f'{v}_aa']:.3f}"
            for v in ARGS.variants), flush=True)
        if out_csv:
            write_csv(out_csv, rows)
        del graphs, alive
        torch.cuda.empty_cache()
    return rows


def aa_summary(rows: list[dict]) -> str:
    """The noise band: the widest a / b of one variant's two compiles, either way."""
    ratios = [(r[key], r["case"], key[:-3]) for r in rows for key in r if key.endswith("_aa")]
    if not ratios:
        return "no A/A pairs"
    worst = max(ratios, key=lambda t: max(t[0], 1 / t[0]))
    band = max(worst[0], 1 / worst[0]) - 1
    return (f"A/A over {len(rows)} cases: the same code, compiled and measured twice, "
            f"differs by up to {band:.1%} ({worst[2]}, {worst[1]}: x{worst[0]:.3f})")


#: The columns `--merge` needs of every part (its summary computes on them).
PART_COLUMNS = ("case", "M", "N")


def read_parts(paths: list[str]) -> list[dict]:
    """The rows of one sweep's part CSVs (`--part K/P` runs, `h100_session.sh sweep K/P`),
    in order, as written. A ValueError, naming the file, for what is not one sweep: no
    part given, a file that is missing or not a sweep CSV, parts without a single case,
    a case in two parts (two runs, not one)."""
    if not paths:
        raise ValueError("--merge: no part CSVs given")
    rows: list[dict] = []
    for path in paths:
        try:
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                missing = [c for c in PART_COLUMNS if c not in (reader.fieldnames or [])]
                if missing:
                    raise ValueError(f"--merge: {path}: not a sweep CSV (no column "
                                     f"{', '.join(map(repr, missing))}; first line: "
                                     f"{','.join(reader.fieldnames or [])[:60] or 'empty file'})")
                rows += list(reader)
        except FileNotFoundError:
            hint = (" (a shell pattern that matched nothing? `h100_session.sh sweep K/P` "
                    "writes $OUT/cost_sweep_h100_partK.csv)" if "*" in path else "")
            raise ValueError(f"--merge: {path}: no such file{hint}") from None
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise ValueError(f"--merge: {path}: cannot be read as CSV ({exc})") from None
    if not rows:
        raise ValueError(f"--merge: no case in {len(paths)} part(s): {', '.join(paths)}")
    seen: set[str] = set()
    for row in rows:
        if row["case"] in seen:
            raise ValueError(f"--merge: case {row['case']!r} is in more than one part")
        seen.add(row["case"])
    return rows


def numeric(row: dict) -> dict:
    """A CSV row with the fields `summary` computes on as numbers (a ValueError naming the
    case where one is not a number: a part cut short mid-row)."""
    try:
        out = {**row, "M": int(row["M"]), "N": int(row["N"])}
        for key in ("fused_speedup", "ext_speedup", "ext_over_stock"):
            out[key] = float(row[key]) if row.get(key) else math.nan
    except (TypeError, ValueError):
        raise ValueError(f"--merge: case {row.get('case')!r}: M, N or a speedup is not a "
                         f"number (a part cut short?)") from None
    return out


def write_csv(path: str, rows: list[dict]) -> None:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)


def case_key(case: Case) -> str:
    return case.name.replace(" ", "_").replace("/", "-")


def selected(case: Case, only: str) -> bool:
    """Whether `case` passes --only: every word of one comma-separated filter is in its
    name (an empty filter keeps every case)."""
    filters = [f.split() for f in only.split(",") if f.strip()]
    return not filters or any(all(word in case.name for word in words) for words in filters)


def warm(cases: list[Case], workers: int, record_dir: pathlib.Path) -> None:
    """Compile every (case, variant) in `workers` processes sharing the cache dir, each
    recording the fused kernel's fusion-table row per case (a timing process served from
    the cache writes none); then drop their autotuning picks (timed on a shared GPU)."""
    procs = []
    for k in range(workers):
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--compile-only", "--part", ARGS.part,
             "--worker", f"{k}/{workers}", "--grid", ARGS.grid, "--device", ARGS.device,
             "--seed", str(ARGS.seed), "--count", str(ARGS.count),
             "--records", str(record_dir), "--variants", ",".join(ARGS.variants),
             "--only", ARGS.only, "--setting", ARGS.setting],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate()
        if p.returncode:
            print(f"warm worker failed ({p.returncode}): {err[-500:]}")
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if cache:
        for path in pathlib.Path(cache).rglob("*.best_config"):
            path.unlink()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="sweep_cost_model.py", description=description(
        __doc__, "Needs a CUDA GPU for --device cuda (the default); --device cpu checks each "
        "case on CPU under TRITON_INTERPRET=1 and times nothing (e.g. --grid smoke); --merge "
        "needs no device."))
    ap.add_argument("--csv", default="", metavar="FILE",
                    help="write one row per case here (with --merge: the joined table)")
    ap.add_argument("--grid", choices=("full", "heldout", "strided", "twins", "strips",
                                       "random", "bench", "smoke"),
                    default="full",
                    help="the cases: full (the calibration grid, default), heldout, strided, "
                    "twins, strips (held out of the fit), random (--seed, --count), bench "
                    "(bench_norm_bwd.py's 16), smoke (3 tiny cases, for --device cpu)")
    ap.add_argument("--seed", default="42",
                    help="--grid random: the draw's seed, a range '43-59' or a comma list")
    ap.add_argument("--count", type=int, default=40, help="--grid random: cases drawn")
    ap.add_argument("--part", default="0/1", help="K/P: every P-th case from the K-th")
    ap.add_argument("--warm", type=int, default=0, help="parallel compile processes first")
    ap.add_argument("--only", default="",
                    help="comma-separated words; keep the grid's cases whose name holds "
                         "all words of one of them (e.g. 'transposed,x32768 bf16')")
    ap.add_argument("--compile-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker", default="0/1", help=argparse.SUPPRESS)
    ap.add_argument("--records", default="", help=argparse.SUPPRESS)
    ap.add_argument("--records-only", action="store_true",
                    help="only compile (with --warm processes) and write each case's "
                         "recorded fusion-table fields to --csv")
    ap.add_argument("--setting", default="",
                    help="CUDA tuning knobs for every compile, e.g. 'column_groups=2'")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cuda (default): check and time; cpu: check against float64 in "
                    "the Triton interpreter (TRITON_INTERPRET=1), no times")
    ap.add_argument("--merge", nargs="+", default=[], metavar="PART_CSV",
                    help="no GPU: join the part CSVs of one sweep into --csv and print "
                         "the summary over all their cases")
    ap.add_argument("--aa", type=int, default=0, metavar="R",
                    help="noise run: each variant compiled twice, timed in R rotated turns")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help=f"comma-separated, of {','.join(ALL_VARIANTS)}")
    global ARGS
    ARGS = args = ap.parse_args(argv)
    args.variants = [v for v in args.variants.split(",") if v]
    apply_setting(args.setting)
    unknown = sorted(set(args.variants) - set(ALL_VARIANTS))
    if unknown:
        ap.error(f"--variants: unknown {unknown}; choose from {list(ALL_VARIANTS)}")
    if args.merge:
        try:
            rows = read_parts(args.merge)
            numbers = [numeric(row) for row in rows]
        except ValueError as exc:  # one line, no traceback
            ap.exit(2, f"{ap.prog}: error: {exc}\n")
        if args.csv:
            write_csv(args.csv, rows)
        print(summary(numbers))
        return 0
    k, p = (int(v) for v in args.part.split("/"))
    w, workers = (int(v) for v in args.worker.split("/"))
    try:
        drawn = grid(args.grid, args.seed, args.count)
    except ValueError as exc:
        ap.error(str(exc))
    cases = [case for case in drawn if selected(case, args.only)]
    if not cases:
        ap.error(f"--only {args.only!r}: no case of the {args.grid} grid matches")
    cases = cases[k::p][w::workers]
    if args.aa and args.device != "cuda":
        ap.error("--aa times CUDA graphs: it needs --device cuda")
    check_device("sweep_cost_model.py", args.device, "--device cpu --grid smoke")
    out = os.path.abspath(args.csv) if args.csv else None
    tables = tempfile.TemporaryDirectory(prefix="sweep_tables_", ignore_cleanup_errors=True)
    table_dir = pathlib.Path(tables.name)
    os.chdir(table_dir)  # MetricTable writes into the working directory
    torch._inductor.config.enabled_metric_tables = "mix_order_fusion"
    if args.device == "cpu":  # a smoke run of the whole path in the Triton interpreter
        from inductor_ext.interpreter import cpu_interpret

        stack = contextlib.ExitStack()  # held until exit: the interpreter stays on
        stack.enter_context(cpu_interpret())
    if args.compile_only:
        record_dir = pathlib.Path(args.records)
        for case in cases:
            for variant in args.variants:
                if skip_reason(case, variant):
                    continue
                before = count_fusion_rows(table_dir)
                try:
                    with inductor_ext.config.patch(always_fuse=variant == "fused"):
                        _, _, _, _, prepare, step, _ = run_once(case, variant, args.device)
                        prepare()
                        step()
                except Exception as exc:  # the timing process reports it
                    print(f"{case.name} {variant}: {exc!r}", file=sys.stderr)
                if variant in RECORDED_VARIANTS:
                    record = fusion_rows(table_dir, before)
                    record_path(record_dir, case, variant).write_text(json.dumps(record))
                if args.device == "cuda":
                    torch.cuda.empty_cache()
        return 0
    record_dir = pathlib.Path(tempfile.mkdtemp(prefix="sweep_records_"))
    if args.warm:
        t0 = time.perf_counter()
        warm(cases, args.warm, record_dir)
        print(f"warmed {len(cases)} cases x {len(args.variants)} variants in "
              f"{time.perf_counter() - t0:.0f} s with {args.warm} processes", flush=True)
    if args.records_only:
        rows = []
        for case in cases:
            path = record_path(record_dir, case, "fused")
            fused = json.loads(path.read_text()) if path.exists() else []
            rows.append({**dataclasses.asdict(case), "case": case.name,
                         **({k: fused[0].get(k, "") for k in RECORDED}
                            if len(fused) == 1 else {})})
        if out:
            write_csv(out, rows)
        print(f"recorded {sum(1 for r in rows if 'shape_info' in r)} of {len(rows)} cases")
        return 0
    timer = GraphTimer("read") if args.device == "cuda" else None
    run_copy = None
    if timer is not None:
        run_copy = copy_tbps(timer)
        print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}; copy "
              f"{run_copy:.3f} TB/s", flush=True)
    else:
        print(f"torch {torch.__version__} on CPU (Triton interpreter): each case checked, "
              f"not timed; the CSV's *_s columns are the interpreter's wall clock, not "
              f"measurements", flush=True)
    if out:
        pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
    if args.aa:
        print(aa_summary(measure_aa(cases, timer, args.aa, out)))
        return 0
    rows = measure(cases, timer, table_dir, args.device, out, record_dir, run_copy)
    print(summary(rows) if timer is not None else untimed_summary(rows))
    print(json.dumps({"cases": len(rows)}))
    return 0


ARGS: argparse.Namespace


if __name__ == "__main__":
    raise SystemExit(main())
