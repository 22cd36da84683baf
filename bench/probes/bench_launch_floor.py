"""The fixed cost of a second, dependent kernel in a timed graph.

The fused kernel is followed by the final step; at small shapes that second launch is a
visible share of the backward. This times, with the same GraphTimer and L2 flush as
bench_norm_bwd.py, a 2-read-1-write add alone and followed by (a) a one-program kernel,
(b) a fold shaped like our final step ([programs, N] fp32 -> [N] bf16), with and without
programmatic dependent launch. The differences bound what any final step can cost.

    python bench/probes/bench_launch_floor.py --shape 4096x4096 --programs 128
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from common import (  # noqa: E402
    FLUSH_MODES,
    GraphTimer,
    description,
    print_breakdown,
    require_cuda,
)


@triton.jit
def _add(a, b, c, numel, BLOCK: tl.constexpr, TRIGGER: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    tl.store(c + offsets, tl.load(a + offsets, mask) + tl.load(b + offsets, mask), mask)
    if TRIGGER:
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def _fold(ws, out, N: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr,
          ROWS_P2: tl.constexpr, WAIT: tl.constexpr):
    if WAIT:
        tl.extra.cuda.gdc_wait()
    cols = tl.program_id(0) * COLS + tl.arange(0, COLS)[None, :]
    rows = tl.arange(0, ROWS_P2)[:, None]
    values = tl.load(ws + rows * N + cols, (rows < ROWS) & (cols < N), other=0.0)
    tl.store(out + cols, tl.sum(values, 0)[None, :].to(tl.bfloat16), cols < N)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=description(__doc__))
    ap.add_argument("--shape", default="4096x4096", help="MxN of the bf16 add")
    ap.add_argument("--programs", type=int, default=128, help="workspace rows to fold")
    ap.add_argument("--flush", choices=FLUSH_MODES, default="read")
    args = ap.parse_args(argv)
    require_cuda("bench_launch_floor")
    M, N = (int(v) for v in args.shape.split("x"))
    a = torch.randn(M * N, device="cuda", dtype=torch.bfloat16)
    b, c = torch.randn_like(a), torch.empty_like(a)
    ws = torch.randn(args.programs, N, device="cuda")
    out = torch.empty(N, device="cuda", dtype=torch.bfloat16)
    block, cols = 2048, 16
    grid = (triton.cdiv(M * N, block),)
    rows_p2 = triton.next_power_of_2(args.programs)
    pdl = torch.cuda.get_device_capability()[0] >= 9

    def add(trigger: bool = False) -> None:
        _add[grid](a, b, c, M * N, BLOCK=block, TRIGGER=trigger, num_warps=8)

    def fold(wait: bool = False) -> None:
        _fold[(triton.cdiv(N, cols),)](ws, out, N=N, ROWS=args.programs, COLS=cols,
                                       ROWS_P2=rows_p2, WAIT=wait, num_warps=8,
                                       **({"launch_pdl": True} if wait else {}))

    def one_program() -> None:
        _fold[(1,)](ws, out, N=N, ROWS=1, COLS=cols, ROWS_P2=1, WAIT=False, num_warps=1)

    cases = {
        "torch add": lambda: torch.add(a, b, out=c),
        "triton add": add,
        "add + one-program kernel": lambda: (add(), one_program()),
        "add + fold": lambda: (add(), fold()),
    }
    if pdl:
        cases["add + fold (PDL)"] = lambda: (add(trigger=True), fold(wait=True))
    timer = GraphTimer(args.flush)
    base = None
    for name, fn in cases.items():
        _, _, graph = timer.run(fn)
        us = timer.time_us(graph)
        base = us if name == "triton add" else base
        extra = f"  (+{us - base:.1f} us over the add)" if base and name != "triton add" else ""
        print(f"{name:26s} {us:7.1f} us end to end{extra}")
        print_breakdown(graph, name, timer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
