"""Where a model's training step spends its device time, kernel by kernel, per variant.

    python bench/profile_model.py --model bert [--variants stock,inductor_ext] \
        [--csv kernels.csv] [--size layers=2]

Finds the kernel behind a step-time gap in `bench_models.py` (a model whose step is
slower with inductor_ext although every norm fuses). Each variant compiles the
model and captures its step in a CUDA graph as bench_models.py does (gradients checked
against eager); then `--steps` rounds profile one replay of each variant in turns, after
the same L2 flush, so clock drift over the run hits every variant alike (profiled one
after another, a second compile of stock can time slower than the first).
Printed: each variant's kernels by device time per step, with launches per step. Add
`stock_again` (stock compiled a second time) to see what noise alone moves.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import bench_models  # noqa: E402
from common import (  # noqa: E402
    NEEDS_CUDA,
    GraphTimer,
    description,
    profiled_replay,
    require_cuda,
    rotated_turns,
    write_rows,
)

import inductor_ext  # noqa: E402
from tests.support import models  # noqa: E402

KernelTimes = dict[str, list[float]]  # kernel name -> [device µs per step, launches per step]


def captured_steps(work: models.Workload, variants: list[str],
                   timer: GraphTimer) -> dict[str, torch.cuda.CUDAGraph]:
    """Each variant's training step in a CUDA graph (bench_models.run_variant: compiled as
    there, the default profitability model, gradients against eager)."""
    eager = models.grads(work)
    run_args = argparse.Namespace(device="cuda", dtype="bf16", always_fuse=False)
    graphs = {}
    for variant in variants:
        result = bench_models.run_variant(work, variant, run_args, eager, timer)
        if result.graph is None:
            raise SystemExit(f"profile_model: {variant}'s step could not be captured in a "
                             f"CUDA graph ({result.row.get('timing')})")
        print(f"{work.name} {variant}: max grad rel err vs eager "
              f"{result.row['max_grad_err_vs_eager']:.2e}", flush=True)
        graphs[variant] = result.graph
    return graphs


def kernel_times_in_turns(graphs: dict[str, torch.cuda.CUDAGraph], timer: GraphTimer,
                          steps: int) -> dict[str, KernelTimes]:
    """Per variant, kernel device time and launches per step over `steps` profiled
    replays, the variants taking turns in a rotated order each round."""
    out: dict[str, KernelTimes] = {
        n: collections.defaultdict(lambda: [0.0, 0.0]) for n in graphs}
    for name in rotated_turns(list(graphs), steps):
        for evt in profiled_replay(graphs[name], timer):
            out[name][evt.name][0] += evt.device_time_total / steps
            out[name][evt.name][1] += 1 / steps
    return {n: dict(t) for n, t in out.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=description(__doc__, NEEDS_CUDA))
    ap.add_argument("--model", default="bert", choices=models.MODELS,
                    help="one of bench_models.py's models (default bert)")
    ap.add_argument("--variants", default="stock,inductor_ext",
                    help="comma-separated bench_models.py variants, profiled in turns "
                    f"(of {', '.join(bench_models.ALL_VARIANTS)}; default stock,inductor_ext)")
    ap.add_argument("--size", default="", help="e.g. 'layers=2' (over bench_models' size)")
    ap.add_argument("--steps", type=int, default=9, help="profiled rounds, variants in turns")
    ap.add_argument("--top", type=int, default=25,
                    help="kernels listed per variant, longest first (default 25)")
    ap.add_argument("--csv", default="", metavar="FILE",
                    help="write every kernel's time and launches per step and variant here")
    args = ap.parse_args(argv)
    variants = args.variants.split(",")
    known = bench_models.ALL_VARIANTS
    if set(variants) - set(known):
        raise SystemExit(f"unknown --variants {sorted(set(variants) - set(known))}"
                         f"; one of {', '.join(known)}")
    require_cuda("profile_model.py")
    inductor_ext.disable()  # "stock" means stock
    size = bench_models.parse_size(args.size, bench_models.GPU_SIZE)
    work = models.build(args.model, size).to("cuda", torch.bfloat16)
    rows: list[dict[str, Any]] = []
    timer = GraphTimer()
    per_variant = kernel_times_in_turns(captured_steps(work, variants, timer), timer,
                                        args.steps)
    for variant, times in per_variant.items():
        total = sum(us for us, _ in times.values())
        print(f"{args.model} {variant}: {total:.1f} µs of kernels per step")
        for name, (us, calls) in sorted(times.items(), key=lambda kv: -kv[1][0])[:args.top]:
            print(f"  {us:9.1f} µs  x{calls:4.1f}  {name[:100]}")
        rows += [{"model": args.model, "variant": variant, "kernel": name,
                  "us_per_step": round(us, 2), "launches_per_step": round(calls, 2)}
                 for name, (us, calls) in times.items()]
    if args.csv:
        write_rows(args.csv, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
