"""A LLaMA-like transformer block's training step (forward + backward) with inductor_ext on
vs off: step time, fused kernels, max gradient error against eager.

    python bench/bench_block.py [--sizes 4x2048x2048,2x2048x4096] [--dtype bf16] [--csv F]

The block is built from torch.nn with random weights (nothing downloaded): RMSNorm ->
causal attention (scaled_dot_product_attention) -> residual -> RMSNorm -> SwiGLU MLP ->
residual. A size is batch x sequence x model dim; heads of 128 channels, MLP 8/3 x dim.
Both compiled variants keep upstream's mix-order reduction off, so "off" is stock Inductor
and "on" differs only by our pass. Timing as in bench_norm_bwd.py: the step captured in a
CUDA graph, do_bench of its replay; the three variants' graphs are then timed in turns
(`--rounds`, median), since a step of several milliseconds drifts with clocks and power.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import (  # noqa: E402
    DTYPES,
    FLUSH_MODES,
    NEEDS_CUDA,
    Block,
    GraphTimer,
    description,
    has_upstream_mix_order,
    interleaved_us,
    require_cuda,
    write_rows,
)

import inductor_ext  # noqa: E402
from tests.support.reference import max_rel_err  # noqa: E402


def run(block: Block, x: torch.Tensor, dy: torch.Tensor, variant: str, timer: GraphTimer):
    torch._dynamo.reset()
    inductor_ext.metrics.reset()
    params = [x, *block.parameters()]
    if variant == "eager":
        model = block
    else:
        opts = {"triton.mix_order_reduction": False} if has_upstream_mix_order() else {}
        if variant == "inductor_ext":
            opts.update(inductor_ext.options())
        model = torch.compile(block, options=opts)

    def step():
        return torch.autograd.grad(model(x), params, dy)

    _, grads, graph = timer.run(step)
    fused = inductor_ext.metrics.mix_order_kernels
    return graph, fused, [g.detach().clone() for g in grads]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=description(__doc__, NEEDS_CUDA))
    ap.add_argument("--sizes", default="4x2048x2048,2x2048x4096,8x1024x1024",
                    metavar="BxSxD,...",
                    help="comma-separated batch x sequence x model dim (D a multiple of 128); "
                    "default 4x2048x2048,2x2048x4096,8x1024x1024")
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES),
                    help="the block's dtype (default bf16)")
    ap.add_argument("--csv", default="", metavar="FILE",
                    help="write one row per size and variant here")
    ap.add_argument("--flush", choices=FLUSH_MODES, default="read",
                    help="how the L2 is emptied before each replay (bench/README.md)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="timing rounds, the variants taking turns; the median is reported")
    args = ap.parse_args(argv)
    require_cuda("bench_block.py")
    dtype = DTYPES[args.dtype]
    timer = GraphTimer(args.flush)
    rows = []
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    for size in args.sizes.split(","):
        B, S, D = (int(v) for v in size.split("x"))
        torch.manual_seed(0)
        hidden = 256 * math.ceil(8 * D / 3 / 256)
        block = Block(D, heads=D // 128, hidden=hidden, eps=1e-6).to("cuda", dtype)
        x = torch.randn(B, S, D, device="cuda", dtype=dtype, requires_grad=True)
        dy = torch.randn_like(x)
        built = {v: run(block, x, dy, v, timer) for v in ("eager", "inductor", "inductor_ext")}
        step_us = interleaved_us(timer, {v: b[0] for v, b in built.items()}, args.rounds)
        results = {v: (step_us[v], fused, grads) for v, (_, fused, grads) in built.items()}
        del built
        eager = results["eager"][2]
        for variant, (us, fused, grads) in results.items():
            err = max(max_rel_err(g, r) for g, r in zip(grads, eager))
            row = {"size": size, "dtype": args.dtype, "variant": variant, "step_us": us,
                   "fused_kernels": fused, "max_rel_err_vs_eager": err}
            rows.append(row)
            print(f"{size:14s} {variant:13s} step {us:9.1f} us  fused kernels {fused}  "
                  f"max grad rel err vs eager {err:.2e}", flush=True)
        off, on = results["inductor"][0], results["inductor_ext"][0]
        print(f"{size:14s} inductor_ext on/off step time: {on / off:.3f} "
              f"({(off - on):.1f} us saved per step)")
    if args.csv:
        write_rows(args.csv, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
