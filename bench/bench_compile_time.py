"""Compile-time cost of the inductor_ext hook on a transformer-block training step.

    TRITON_INTERPRET=1 python bench/bench_compile_time.py      # CPU, Triton interpreter
    python bench/bench_compile_time.py --device cuda           # GPU

Reports the wall time of the first (compiling) forward+backward, the time spent in our
scheduler pass and fused codegen, and their share; of the codegen, the early compile of the
fused kernels (codegen/precompile.py: inside the fallback, before the wrapper compiles them
again). `--no-early-compile` skips that step, to measure what it adds. Caches are off so
every run compiles.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

if __name__ == "__main__":  # every run compiles; an import (the tests) leaves it alone
    os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

import torch  # noqa: E402
from common import Block, check_device, description  # noqa: E402

import inductor_ext  # noqa: E402
from inductor_ext import backend_wrapper as backend_mod  # noqa: E402
from inductor_ext.codegen import precompile  # noqa: E402
from inductor_ext.scheduler import hook  # noqa: E402


class Timer:
    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, fn):
        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t
        return timed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=description(
        __doc__, "Runs on CPU under TRITON_INTERPRET=1 (--device cpu, the default: the hook's "
        "and codegen's host time hold, the compile total is the interpreter's); --device "
        "cuda needs a CUDA GPU."))
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="cpu (default): Triton's interpreter, needs TRITON_INTERPRET=1; "
                    "cuda: a real compile on the GPU")
    ap.add_argument("--dim", type=int, default=64,
                    help="the block's model width (default 64; the H100 numbers of "
                    "bench/NOTES.md use 1024)")
    ap.add_argument("--tokens", type=int, default=64,
                    help="tokens per sequence, batch 2 (default 64)")
    ap.add_argument("--no-early-compile", action="store_true",
                    help="skip compiling the fused kernels during codegen (A/B)")
    args = ap.parse_args(argv)
    check_device("bench_compile_time.py", args.device, "")
    ctx = contextlib.nullcontext()
    if args.device == "cpu":
        from inductor_ext.interpreter import cpu_interpret
        ctx = cpu_interpret()
    hook_timer, codegen_timer, early_timer = Timer(), Timer(), Timer()
    hook.run = hook_timer.wrap(hook.run)
    if args.no_early_compile:
        precompile.compile_now = lambda src_code: None
    precompile.compile_now = early_timer.wrap(precompile.compile_now)
    backend_mod._codegen_or_fallback = codegen_timer.wrap(backend_mod._codegen_or_fallback)
    torch.manual_seed(0)
    block = Block(args.dim, 4, 4 * args.dim).to(args.device)
    x = torch.randn(2, args.tokens, args.dim, device=args.device, requires_grad=True)
    with ctx, torch._inductor.config.patch(inductor_ext.options()), \
            inductor_ext.config.patch(always_fuse=True):
        step = torch.compile(block)
        t = time.perf_counter()
        step(x).sum().backward()
        first = time.perf_counter() - t
        t = time.perf_counter()
        step(x).sum().backward()
        second = time.perf_counter() - t
    compile_s = first - second
    ours = hook_timer.seconds + codegen_timer.seconds
    if args.device == "cpu":
        print("CPU run in the Triton interpreter: the hook's and the fused codegen's times "
              "are host time, as on a GPU; the steps, the compile total and so the share "
              "are the interpreter's (no Triton compile, kernels run as Python), NOT a GPU "
              "compile's measurement (bench/NOTES.md has the H100's)")
    print(f"first step {first:.2f} s, second {second:.2f} s -> compile ~{compile_s:.2f} s")
    print(f"hook {hook_timer.seconds * 1e3:.1f} ms + fused codegen "
          f"{codegen_timer.seconds * 1e3:.1f} ms = {ours * 1e3:.1f} ms "
          f"({100 * ours / compile_s:.2f}% of compile)")
    print(f"early compile of the fused kernels {early_timer.seconds * 1e3:.1f} ms"
          f"{' (skipped: --no-early-compile)' if args.no_early_compile else ''}")
    print(f"fused kernels: {inductor_ext.metrics.mix_order_kernels}, declined: "
          f"{dict(inductor_ext.metrics.rejected_pairs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
