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
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import require_cuda  # noqa: E402
from sweep_cost_model import Case, problem, variant_options  # noqa: E402

import inductor_ext  # noqa: E402

VARIANTS = {"stock": "torch.compile, upstream mix-order at its default (on)",
            "upstream_off": "torch.compile, upstream mix-order off",
            "inductor_ext": "inductor_ext (always_fuse)"}
CASES = [Case("rms", 1024, 1024, "bf16", "bf16", "contiguous"),
         Case("ln", 1024, 1024, "bf16", "bf16", "contiguous"),
         Case("rms", 16384, 4096, "bf16", "fp32", "contiguous"),
         Case("rms", 4096, 8192, "bf16", "bf16", "contiguous")]


def per_call_us(case: Case, variant: str, calls: int, profile_dir: str | None) -> tuple:
    """(host us per call, device us per call) of back-to-back backward calls."""
    torch._dynamo.reset()
    inductor_ext.metrics.reset()
    fn, inputs, wrt, dy = problem(case, "cuda")
    ext = variant == "inductor_ext"
    with inductor_ext.config.patch(always_fuse=ext):
        compiled = torch.compile(fn, options=variant_options("fused" if ext else variant))
        y = compiled(*inputs)

        def step():
            return torch.autograd.grad(y, wrt, dy, retain_graph=True)

        for _ in range(20):
            step()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        for _ in range(calls):
            step()
        end.record()
        torch.cuda.synchronize()
        host = (time.perf_counter() - t0) / calls * 1e6
        device = start.elapsed_time(end) / calls * 1e3
        if profile_dir:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(200):
                step()
            torch.cuda.synchronize()
            prof.disable()
            name = f"{case.op}_{case.M}x{case.N}_{variant}"
            prof.dump_stats(os.path.join(profile_dir, f"{name}.pstats"))
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(25)
            with open(os.path.join(profile_dir, f"{name}.txt"), "w") as f:
                f.write(text.getvalue())
    return host, device, inductor_ext.metrics.mix_order_kernels


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--profile", default="", help="directory for cProfile dumps")
    args = ap.parse_args(argv)
    require_cuda("bench_host_cost")
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, "
          f"{args.calls} calls each")
    for key, what in VARIANTS.items():
        print(f"  {key:13s} {what}")
    print(f"{'case':34s} " + " ".join(f"{v:>22s}" for v in VARIANTS) + "   ext - stock")
    for case in CASES:
        cells, host = [], {}
        for variant in VARIANTS:
            h, d, fused = per_call_us(case, variant, args.calls, args.profile or None)
            host[variant] = h
            cells.append(f"{h:8.1f} host {d:7.1f} dev")
        w = "" if case.wdtype == case.dtype else f"/w {case.wdtype}"
        print(f"{case.op} {case.M}x{case.N} {case.dtype}{w}".ljust(34)
              + " ".join(f"{c:>22s}" for c in cells)
              + f"   {host['inductor_ext'] - host['stock']:+7.1f} us", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
