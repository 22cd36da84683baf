"""Where a model's training step spends its device time, kernel by kernel, per variant.

    python bench/profile_model.py --model bert [--variants stock,inductor_ext] \
        [--csv kernels.csv] [--size layers=2]

Finds the kernel behind a step-time gap in `bench_models.py` (on the H100, BERT's step
was 1.9% slower with inductor_ext although every norm fused). Each variant compiles the
model as bench_models.py does, runs a few steps, then times `--steps` under
torch.profiler; printed: each variant's kernels by device time per step, with call counts.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import bench_models  # noqa: E402
from common import require_cuda, write_rows  # noqa: E402

import inductor_ext  # noqa: E402
from inductor_ext.testing import models  # noqa: E402


def kernel_times(work: models.Workload, variant: str, steps: int) -> dict[str, list[float]]:
    """Kernel name -> [device µs per step, launches per step] of one variant."""
    torch._dynamo.reset()
    params = [p for p in work.model.parameters() if p.requires_grad]
    with torch._inductor.config.patch({**bench_models.compile_options(variant),
                                       "fx_graph_cache": False}), \
            torch._functorch.config.patch(enable_autograd_cache=False), \
            inductor_ext.config.patch(always_fuse=False):
        compiled = torch.compile(work.model)
        for _ in range(3):
            torch.autograd.grad(work.loss(compiled), params)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                torch.autograd.grad(work.loss(compiled), params)
            torch.cuda.synchronize()
    out: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for evt in prof.events():
        if evt.device_type == torch.autograd.DeviceType.CUDA:
            out[evt.name][0] += evt.device_time_total / steps
            out[evt.name][1] += 1 / steps
    return dict(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="bert", choices=models.MODELS)
    ap.add_argument("--variants", default="stock,inductor_ext")
    ap.add_argument("--size", default="", help="e.g. 'layers=2' (over bench_models' size)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--csv", default="")
    args = ap.parse_args(argv)
    variants = args.variants.split(",")
    if set(variants) - set(bench_models.VARIANTS):
        raise SystemExit(f"unknown --variants {sorted(set(variants) - set(bench_models.VARIANTS))}"
                         f"; one of {', '.join(bench_models.VARIANTS)}")
    require_cuda("profile_model")
    inductor_ext.disable()  # "stock" means stock
    size = bench_models.parse_size(args.size, bench_models.GPU_SIZE)
    work = models.build(args.model, size).to("cuda", torch.bfloat16)
    rows: list[dict[str, Any]] = []
    for variant in variants:
        times = kernel_times(work, variant, args.steps)
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
