"""Where the backward's time goes: per-kernel device time (torch.profiler) of one variant.

    python bench/profile_backward.py --shape 65536x1024:bf16 --op rms --variant inductor_ext

Separates the fused kernel from the final step and allocation, to tell kernel time from
host overhead when do_bench numbers move between runs.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from common import (  # noqa: E402
    COMPILED,
    DTYPES,
    NEEDS_CUDA,
    apply_setting,
    compile_options,
    description,
    make_problem,
    require_cuda,
    warmed_backward,
)

import inductor_ext  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=description(__doc__, NEEDS_CUDA))
    ap.add_argument("--shape", default="65536x1024:bf16", metavar="MxN:DTYPE",
                    help="rows x row width and x's dtype (bf16, fp16, fp32); default "
                    "65536x1024:bf16")
    ap.add_argument("--op", default="rms", choices=("rms", "ln"),
                    help="rms (RMSNorm, default) or ln (LayerNorm)")
    ap.add_argument("--variant", default="inductor_ext", choices=COMPILED,
                    help="the compiled variant profiled (bench_norm_bwd.py's names; default "
                    "inductor_ext)")
    ap.add_argument("--iters", type=int, default=20,
                    help="backward calls profiled; the listing is per call (default 20)")
    ap.add_argument("--setting", default="",
                    help="CUDA tuning knobs, e.g. 'programs_per_sm=2;tile_elems=8192'")
    args = ap.parse_args(argv)
    require_cuda("profile_backward.py")
    apply_setting(args.setting)
    shape, dt = args.shape.split(":")
    M, N = (int(v) for v in shape.split("x"))
    torch.manual_seed(0)
    fn, inputs, dy = make_problem(args.op, M, N, DTYPES[dt])
    params = [t for t in inputs if t is not None]
    step = warmed_backward(torch.compile(fn, options=compile_options(args.variant)),
                           inputs, params, dy, calls=5)
    runs = [do_bench(step, warmup=25, rep=200, return_mode="median") * 1e3 for _ in range(3)]
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.iters):
            step()
        torch.cuda.synchronize()
    per_kernel: dict[str, float] = collections.defaultdict(float)
    for evt in prof.events():
        if evt.device_type == torch.autograd.DeviceType.CUDA:
            per_kernel[evt.name] += evt.device_time_total / args.iters
    total = sum(per_kernel.values())
    fused = inductor_ext.metrics.mix_order_kernels
    print(f"{args.op} {M}x{N} {dt} {args.variant}[{args.setting}]: do_bench medians {runs} us; "
          f"device time {total:.1f} us/iter; fused kernels {fused}")
    for name, us in sorted(per_kernel.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {us:8.1f} us  {name[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
