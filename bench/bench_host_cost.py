"""Host cost per backward call, without CUDA graphs: back-to-back
`torch.autograd.grad` calls as an eager training loop issues them, timed with a CPU
clock over many calls (one synchronize at the end), for stock torch.compile (upstream
mix-order at its default), upstream mix-order off, and inductor_ext.

    python bench/bench_host_cost.py [--calls 1000] [--profile DIR]

On a small shape the device finishes each call's kernels long before the host issues
the next call, so the time per call is the host's: Python autograd, the compiled
wrapper, allocations and kernel launches. On large shapes the same loop shows whether
host cost hides behind the kernels. `--profile` writes a cProfile of each variant's
calls (pstats, sorted by cumulative time) to find where extra host time goes.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import NEEDS_CUDA, description, require_cuda, warmed_backward  # noqa: E402
from sweep_cost_model import Case, problem, variant_options  # noqa: E402

import inductor_ext  # noqa: E402

VARIANTS = {"stock": "torch.compile, upstream mix-order at its default (on)",
            "upstream_off": "torch.compile, upstream mix-order off",
            "inductor_ext": "inductor_ext (always_fuse)"}
CASES = [Case("rms", 1024, 1024, "bf16", "bf16", "contiguous"),
         Case("ln", 1024, 1024, "bf16", "bf16", "contiguous"),
         Case("rms", 16384, 4096, "bf16", "fp32", "contiguous"),
         Case("rms", 4096, 8192, "bf16", "bf16", "contiguous")]


def prepared(case: Case, variant: str):
    """A warmed-up backward call of `case` compiled as `variant` (its forward ran once)."""
    torch._dynamo.reset()
    fn, inputs, wrt, dy = problem(case, "cuda")
    ext = variant == "inductor_ext"
    with inductor_ext.config.patch(always_fuse=ext):
        compiled = torch.compile(fn, options=variant_options("fused" if ext else variant))
        return warmed_backward(compiled, inputs, wrt, dy, calls=20)


def launches_per_call(step) -> int:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def batch_us(step, calls: int) -> float:
    """Wall time per call of `calls` back-to-back calls (one synchronize at the end)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        step()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=description(__doc__, NEEDS_CUDA))
    ap.add_argument("--calls", type=int, default=1000, help="calls per variant and case")
    ap.add_argument("--rounds", type=int, default=10,
                    help="the calls are split into this many batches, variants in turns; "
                         "the median batch is reported")
    ap.add_argument("--profile", default="", metavar="DIR",
                    help="write a cProfile dump of each variant's calls into this directory")
    args = ap.parse_args(argv)
    require_cuda("bench_host_cost.py")
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, {args.calls} calls "
          f"per variant in {args.rounds} batches, variants in turns, median batch")
    for key, what in VARIANTS.items():
        print(f"  {key:13s} {what}")
    print(f"{'case':30s} " + " ".join(f"{v + ' us (launches)':>26s}" for v in VARIANTS)
          + "   ext - stock")
    for case in CASES:
        steps = {v: prepared(case, v) for v in VARIANTS}
        launches = {v: launches_per_call(steps[v]) for v in VARIANTS}
        times: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(args.rounds):
            for v in VARIANTS:
                times[v].append(batch_us(steps[v], max(1, args.calls // args.rounds)))
        med = {v: statistics.median(t) for v, t in times.items()}
        spread = {v: (max(t) - min(t)) / 2 for v, t in times.items()}
        w = "" if case.wdtype == case.dtype else f"/w {case.wdtype}"
        print(f"{case.op} {case.M}x{case.N} {case.dtype}{w}".ljust(30)
              + " ".join(f"{f'{med[v]:7.1f} +-{spread[v]:5.1f} ({launches[v]})':>26s}"
                         for v in VARIANTS)
              + f"   {med['inductor_ext'] - med['stock']:+7.1f} us", flush=True)
        if args.profile:
            for v in VARIANTS:
                prof = cProfile.Profile()
                prof.enable()
                batch_us(steps[v], 200)
                prof.disable()
                name = f"{case.op}_{case.M}x{case.N}_{v}"
                text = io.StringIO()
                pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(30)
                with open(os.path.join(args.profile, f"{name}.txt"), "w") as f:
                    f.write(text.getvalue())
        del steps
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
