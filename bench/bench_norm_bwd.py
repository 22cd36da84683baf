"""RMSNorm / LayerNorm backward, every variant side by side, against a 2-read-1-write copy.

    python bench/bench_norm_bwd.py [--shapes 32768x4096:bf16,...] [--ops rms,ln]
        [--variants eager,inductor_nomix,inductor_mix,liger,inductor_ext,inductor_ext_ascend]
        [--csv bench/results/norm_bwd.csv] [--plot bench/results/norm_bwd.png]
        [--flush read|write]

Each variant's gradients are checked against a float64 reference (and eager's own error)
before it is timed; a wrong variant is reported and not timed. Timing: the backward
(`torch.autograd.grad`) captured in a CUDA graph, `triton.testing.do_bench` of its replay
with the L2 emptied by a read before each replay (`--flush write`: do_bench's own
zero-fill, the baseline CSV's method; bench/README.md says why and compares the two).
With Inductor's metric table on (`TORCHINDUCTOR_ENABLED_METRIC_TABLES=mix_order_bench`),
every row also lands in metric_table_mix_order_bench.csv. `--autotune-log` records the
time of every launch config the autotuner tried for our fused kernels; `--setting`
changes CUDA tuning knobs (`inductor_ext.targets.cuda.tuning.CudaTuning`, through
`inductor_ext.config.tuning`, which is part of the cache key).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import (  # noqa: E402
    BASELINE_SHAPES,
    COMPILED,
    FLUSH_MODES,
    NEEDS_CUDA,
    OURS,
    GraphTimer,
    apply_setting,
    check,
    compile_options,
    copy_tbps,
    description,
    has_liger,
    has_upstream_mix_order,
    liger_forward,
    make_problem,
    min_bytes,
    parse_shapes,
    print_breakdown,
    reference_grads,
    require_cuda,
)

import inductor_ext  # noqa: E402
from inductor_ext.plan import PROGRAMS_KEY  # noqa: E402
from inductor_ext.runtime.autotune import PLAN_KEY  # noqa: E402

ALL_VARIANTS = "eager,inductor_nomix,inductor_mix,liger,inductor_ext,inductor_ext_ascend"
FIELDS = ["op", "M", "N", "dtype", "variant", "us", "TBps", "copy_frac", "shape_copy_frac",
          "flush", "rel_err", "correct",
          "ext_kernels", "upstream_mo_kernels", "error"]


def available(variants: list[str]) -> list[str]:
    out = []
    for v in variants:
        if v == "inductor_mix" and not has_upstream_mix_order():
            print("skipping inductor_mix: this torch has no upstream mix-order reduction")
        elif v == "liger" and not has_liger():
            print("skipping liger: liger_kernel is not importable")
        else:
            out.append(v)
    return out


def run_variant(timer: GraphTimer, op: str, variant: str, fn, inputs, dy, ref,
                eager_errs) -> dict:
    from torch._inductor import metrics as inductor_metrics

    torch._dynamo.reset()
    inductor_ext.metrics.reset()
    inductor_metrics.reset()
    N = inputs[0].shape[-1]
    params = [t for t in inputs if t is not None]
    forward = fn
    if variant == "liger":
        forward, lparams = liger_forward(op, N, inputs)
        params = [inputs[0], *lparams]
    elif variant in COMPILED:
        forward = torch.compile(fn, options=compile_options(variant), dynamic=False)
    target = "ascend" if variant == "inductor_ext_ascend" else "auto"
    holder = {}

    def prepare():
        holder["y"] = forward(*inputs)

    def backward():
        return torch.autograd.grad(holder["y"], params, dy, retain_graph=True)

    with inductor_ext.config.patch(target=target, always_fuse=target == "ascend"):
        _, grads, graph = timer.run(backward, prepare)
    ok, err = check(grads, ref, eager_errs)
    row = {"rel_err": err, "correct": ok,
           "ext_kernels": inductor_ext.metrics.mix_order_kernels,
           # Inductor counts at codegen: 0 when its FX graph cache served the graph.
           "upstream_mo_kernels": max(0, getattr(inductor_metrics,
                                                 "codegen_mix_order_reduction", 0)
                                      - (inductor_ext.metrics.mix_order_kernels
                                         if variant in OURS else 0))}
    row["us"] = timer.time_us(graph) if ok else math.nan
    if BREAKDOWN and ok and variant in BREAKDOWN:
        print_breakdown(graph, f"{op} {tuple(inputs[0].shape)} {variant}", timer)
    holder.clear()
    return row


BREAKDOWN: set[str] = set()


def summarize(rows: list[dict], copy: float) -> bool:
    """Print the three targets of the performance issue; True when all hold."""
    cases = sorted({(r["op"], r["M"], r["N"], r["dtype"]) for r in rows},
                   key=lambda c: (c[1] * c[2], c))
    all_ok = True
    ratios_mix = []
    print("\ncase                         ext TB/s  of copy  best other          ext/best  "
          "ext/mix  of shape copy")
    for case in cases:
        by = {r["variant"]: r for r in rows if (r["op"], r["M"], r["N"], r["dtype"]) == case}
        ext = by.get("inductor_ext")
        if ext is None or not ext["correct"]:
            print(f"{case}: inductor_ext missing or wrong")
            all_ok = False
            continue
        others = [r for v, r in by.items() if v not in OURS and r["correct"]]
        best = max(others, key=lambda r: r["TBps"]) if others else None
        vs_best = ext["TBps"] / best["TBps"] if best else math.inf
        mix = by.get("inductor_mix")
        vs_mix = ext["TBps"] / mix["TBps"] if mix and mix["correct"] else math.nan
        if not math.isnan(vs_mix):
            ratios_mix.append(vs_mix)
        big = case[1] * case[2] >= 16 * 2**20
        ok_copy = not big or ext["copy_frac"] >= 0.90
        ok_best = vs_best >= 0.97
        all_ok &= ok_copy and ok_best
        name = f"{case[0]} {case[1]}x{case[2]} {case[3]}"
        best_name = best["variant"] if best else "-"
        print(f"{name:28s} {ext['TBps']:7.3f}  {ext['copy_frac']:6.2f}{'' if ok_copy else '!'}"
              f"   {best_name:18s} {vs_best:7.2f}{'' if ok_best else '!'}  {vs_mix:6.2f}"
              f"  {ext.get('shape_copy_frac', math.nan):6.2f}")
    geo = math.exp(sum(map(math.log, ratios_mix)) / len(ratios_mix)) if ratios_mix else math.nan
    ok_geo = not ratios_mix or geo >= 1.25
    all_ok &= ok_geo
    print(f"copy (2-read-1-write bf16 add): {copy:.3f} TB/s")
    print(f"geomean inductor_ext / inductor_mix over {len(ratios_mix)} cases: {geo:.3f}"
          f"{'' if ok_geo else ' (below 1.25)'}")
    print("targets: M*N >= 16M at >= 0.90 of copy; >= 0.97 x best other variant; "
          f"geomean >= 1.25 x upstream -> {'ALL HOLD' if all_ok else 'NOT MET (! marks)'}")
    return all_ok


def plot(rows: list[dict], copy: float, path: str, title: str | None = None) -> None:
    """TB/s per case, one bar per variant, the copy and 0.90 of it as lines. `title`
    defaults to this machine's device, torch version and the rows' L2 flush."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = sorted({(r["op"], r["M"], r["N"], r["dtype"]) for r in rows},
                   key=lambda c: (c[0], c[1] * c[2], c))
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    width = 0.8 / len(variants)
    fig, ax = plt.subplots(figsize=(max(10, 1.3 * len(cases)), 5))
    for i, v in enumerate(variants):
        vals = []
        for c in cases:
            match = [r for r in rows if r["variant"] == v
                     and (r["op"], r["M"], r["N"], r["dtype"]) == c]
            vals.append(match[0]["TBps"] if match and match[0]["correct"] else 0.0)
        ax.bar([k + (i - (len(variants) - 1) / 2) * width for k in range(len(cases))], vals,
               width, label=v)
    ax.axhline(copy, color="black", linestyle="--", label=f"2R1W copy {copy:.2f} TB/s")
    ax.axhline(0.9 * copy, color="gray", linestyle=":", label="0.90 x copy")
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([f"{c[0]}\n{c[1]}x{c[2]}\n{c[3]}" for c in cases], fontsize=8)
    ax.set_ylabel("TB/s (minimum bytes / time)")
    if title is None:
        title = (f"Norm backward on {torch.cuda.get_device_name()}, torch {torch.__version__}, "
                 f"L2 flush: {rows[0].get('flush', 'read')}")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def log_autotuning(path: str) -> None:
    """Append one CSV row per config the autotuner times for an inductor_ext kernel."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    original = CachingAutotuner.benchmark_all_configs

    def logged(self, *args, **kwargs):
        timings = original(self, *args, **kwargs)
        plan = self.inductor_meta.get(PLAN_KEY)
        if plan:
            new = not os.path.exists(path)
            with open(path, "a", newline="") as f:
                w = csv.writer(f)
                if new:
                    w.writerow(["kernel", "programs", "xnumel", "r0_numel", "XBLOCK",
                                "num_warps", "num_stages", "us", "n_regs", "n_spills"])
                for launcher, ms in timings.items():
                    cfg = launcher.config
                    w.writerow([self.inductor_meta.get("kernel_name"),
                                cfg.kwargs.get(PROGRAMS_KEY, plan["programs"]),
                                args[-2] if len(args) >= 2 else "", args[-1] if args else "",
                                cfg.kwargs.get("XBLOCK"), cfg.num_warps, cfg.num_stages,
                                f"{ms * 1e3:.2f}", getattr(launcher, "n_regs", ""),
                                getattr(launcher, "n_spills", "")])
        return timings

    CachingAutotuner.benchmark_all_configs = logged


def write_csv(path: str, rows: list[dict]) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=description(__doc__, NEEDS_CUDA))
    ap.add_argument("--shapes", default=BASELINE_SHAPES, metavar="MxN:DTYPE,...",
                    help="problem sizes, rows x row width and x's dtype (bf16, fp16, fp32); "
                    "default: the 8 shapes of the H100 baseline")
    ap.add_argument("--ops", default="rms,ln",
                    help="comma-separated: rms (RMSNorm), ln (LayerNorm); default rms,ln")
    ap.add_argument("--variants", default=ALL_VARIANTS,
                    help="comma-separated, timed in this order: eager, inductor_nomix "
                    "(torch.compile, upstream mix-order off), inductor_mix (on), liger "
                    "(skipped without liger_kernel), inductor_ext, inductor_ext_ascend (the "
                    "Ascend plan run on CUDA); default all")
    ap.add_argument("--csv", default="", metavar="FILE",
                    help="write one row per shape, op and variant here (rewritten after each)")
    ap.add_argument("--plot", default="", metavar="PNG",
                    help="bar chart of TB/s per case and variant against the copy (needs "
                    "matplotlib)")
    ap.add_argument("--autotune-log", default="", metavar="FILE",
                    help="append a CSV row per launch config the autotuner timed for our "
                    "fused kernels")
    ap.add_argument("--breakdown", default="", metavar="VARIANTS",
                    help="variants whose timed graph gets a per-kernel device-time listing")
    ap.add_argument("--setting", default="", metavar="KNOB=VALUE;...",
                    help="CUDA tuning knobs for every compile, e.g. "
                    "'programs_per_sm=2;tile_elems=8192'")
    ap.add_argument("--flush", choices=FLUSH_MODES, default="read",
                    help="how the L2 is emptied before each replay (bench/README.md)")
    args = ap.parse_args(argv)
    apply_setting(args.setting)
    BREAKDOWN.update(filter(None, args.breakdown.split(",")))
    if args.autotune_log:
        log_autotuning(args.autotune_log)
    require_cuda("bench_norm_bwd.py")
    variants = available(args.variants.split(","))
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    timer = GraphTimer(args.flush)
    copy = copy_tbps(timer)
    print(f"2-read-1-write bf16 add: {copy:.3f} TB/s (L2 flush: {args.flush})")
    rows: list[dict] = []
    for M, N, dtype in parse_shapes(args.shapes):
        # The same add at this shape: what launch and ramp-up leave of the ceiling there.
        shape_copy = copy_tbps(timer, M * N, dtype)
        print(f"2-read-1-write add of {M}x{N} {dtype}: {shape_copy:.3f} TB/s "
              f"({shape_copy / copy:.2f} of the ceiling)")
        for op in args.ops.split(","):
            torch.manual_seed(0)
            fn, inputs, dy = make_problem(op, M, N, dtype)
            ref = reference_grads(fn, inputs, dy)
            eager_errs = None
            for variant in variants:
                row = {"op": op, "M": M, "N": N, "dtype": str(dtype).replace("torch.", ""),
                       "variant": variant, "flush": args.flush, "error": ""}
                try:
                    row.update(run_variant(timer, op, variant, fn, inputs, dy, ref,
                                           None if variant == "eager" else eager_errs))
                    if variant == "eager":
                        params = [t for t in inputs if t is not None]
                        g = torch.autograd.grad(fn(*inputs), params, dy)
                        from tests.support.reference import max_rel_err

                        eager_errs = [max_rel_err(a, r) for a, r in zip(g, ref)]
                except Exception as exc:  # report it in the table, go on with the others
                    row.update(us=math.nan, rel_err=math.nan, correct=False, ext_kernels=-1,
                               upstream_mo_kernels=-1, error=repr(exc)[:300])
                row["TBps"] = min_bytes(op, M, N, dtype.itemsize) / (row["us"] * 1e-6) / 1e12
                row["copy_frac"] = row["TBps"] / copy
                row["shape_copy_frac"] = row["TBps"] / shape_copy
                rows.append(row)
                inductor_ext.metrics.record_bench(op, f"{M}x{N}", row["dtype"], variant,
                                                  row["us"], row["TBps"], row["copy_frac"])
                print(f"{op:3s} {M:>7d}x{N:<5d} {row['dtype']:8s} {variant:19s} "
                      f"{row['us']:8.1f} us {row['TBps']:6.3f} TB/s {row['copy_frac']:5.2f} "
                      f"err {row['rel_err']:.1e} ok={row['correct']} "
                      f"ext={row['ext_kernels']} up={row['upstream_mo_kernels']} "
                      f"{row['error']}", flush=True)
                if args.csv:
                    write_csv(args.csv, rows)
            del fn, inputs, dy, ref
            torch.cuda.empty_cache()
    ok = summarize(rows, copy)
    if args.plot:
        plot(rows, copy, args.plot)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
