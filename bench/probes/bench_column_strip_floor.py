"""What a column-strip kernel would be worth for a sum pair with a transposed operand.

`(x + y).sum(-1)` beside `x.sum(0)`, y the transpose of a contiguous [N, M] tensor: the
fused kernel owns whole rows, so a row block is only as tall as its registers allow, and
that height is the length of each contiguous run it reads from y. A column strip has no
such limit: each program owns BN columns and a share of the rows, walks them in [BM, BN]
tiles (x read along its rows, y along its columns), keeps the column sums in registers and
writes one partial row sum per strip; two small folds finish both. This hand-written
kernel of that structure, timed like the sweep (CUDA graph, L2 flushed before every
replay) against stock torch.compile and upstream mix-order off, is the ceiling of building
that kernel family into the plugin. The best of a small config grid is reported, with the
config.

    python bench/probes/bench_column_strip_floor.py --shapes 4096x4096:bf16,65536x1024:fp32
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import os
import sys
from collections.abc import Callable

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from common import (  # noqa: E402
    GraphTimer,
    check,
    copy_tbps,
    description,
    has_upstream_mix_order,
    parse_shapes,
    require_cuda,
    write_rows,
)

#: The sweep's transposed sum pairs (sweep_cost_model.grid("full")) and two more widths.
DEFAULT_SHAPES = ",".join(f"{shape}:{dtype}" for shape in (
    "4096x4096", "8192x4096", "32768x768", "65536x1024", "262144x256", "16384x2048",
    "131072x512") for dtype in ("bf16", "fp32"))
#: (BM, BN, warps, stages, programs per SM) tried per shape.
CONFIG_GRID = list(itertools.product((32, 64), (64, 128), (4, 8), (2, 3), (2, 4)))


@triton.jit
def _strip(x_ptr, yt_ptr, row_ws, col_ws, M, N, rows_per_group,
           BM: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr):
    """Program (strip, group): columns [strip * BN, +BN) over the group's rows."""
    strip = tl.program_id(0)
    group = tl.program_id(1)
    cols = strip * BN + tl.arange(0, BN)[None, :]
    col_mask = cols < N
    col_acc = tl.zeros([BM, BN], tl.float32)
    first = group * rows_per_group
    last = tl.minimum(first + rows_per_group, M)
    for start in tl.range(first, last, BM, num_stages=STAGES):
        rows_1d = start + tl.arange(0, BM)
        rows = rows_1d[:, None]
        mask = (rows < last) & col_mask
        xv = tl.load(x_ptr + rows * N + cols, mask, other=0.0).to(tl.float32)
        yv = tl.load(yt_ptr + cols * M + rows, mask, other=0.0).to(tl.float32)
        tl.store(row_ws + strip * M + rows_1d, tl.sum(xv + yv, 1), rows_1d < last)
        col_acc += xv
    tl.store(col_ws + group * N + cols, tl.sum(col_acc, 0)[None, :], col_mask)


@triton.jit
def _fold(ws, out, K, L, BK: tl.constexpr, BL: tl.constexpr):
    """out[l] = sum over k of ws[k, l]."""
    cols = tl.program_id(0) * BL + tl.arange(0, BL)[None, :]
    acc = tl.zeros([BK, BL], tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + tl.arange(0, BK)[:, None]
        acc += tl.load(ws + ks * L + cols, (ks < K) & (cols < L), other=0.0)
    tl.store(out + cols, tl.sum(acc, 0)[None, :].to(out.dtype.element_ty), cols < L)


def column_strip(x: torch.Tensor, yt: torch.Tensor, bm: int, bn: int, warps: int,
                 stages: int, groups: int) -> Callable[[], tuple[torch.Tensor, torch.Tensor]]:
    """A launcher of the strip kernel and its two folds for x [M, N] and yt = y.t()
    ([N, M], contiguous), with its buffers allocated once (so a CUDA graph can hold it)."""
    M, N = x.shape
    strips = triton.cdiv(N, bn)
    rows_per_group = triton.cdiv(triton.cdiv(M, groups), bm) * bm
    groups = triton.cdiv(M, rows_per_group)
    row_ws = torch.empty(strips * M, device=x.device, dtype=torch.float32)
    col_ws = torch.empty(groups * N, device=x.device, dtype=torch.float32)
    row_out = torch.empty(M, device=x.device, dtype=x.dtype)
    col_out = torch.empty(N, device=x.device, dtype=x.dtype)

    def launch() -> tuple[torch.Tensor, torch.Tensor]:
        _strip[(strips, groups)](x, yt, row_ws, col_ws, M, N, rows_per_group, BM=bm, BN=bn,
                                 STAGES=stages, num_warps=warps)
        _fold[(triton.cdiv(M, 256),)](row_ws, row_out, strips, M, BK=8, BL=256, num_warps=4)
        _fold[(triton.cdiv(N, 64),)](col_ws, col_out, groups, N, BK=32, BL=64, num_warps=4)
        return row_out, col_out

    return launch


def sum_pair(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return (x + y).sum(-1), x.sum(0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=description(__doc__))
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="MxN:dtype,... (sum pairs)")
    ap.add_argument("--csv", default="")
    args = ap.parse_args(argv)
    require_cuda("bench_column_strip_floor")
    timer = GraphTimer("read")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for M, N, dtype in parse_shapes(args.shapes):
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(M, N, device="cuda", dtype=dtype, generator=gen)
        yt = torch.randn(N, M, device="cuda", dtype=dtype, generator=gen)
        ref = sum_pair(x.double(), yt.t().double())
        baselines = {"stock": {}}
        if has_upstream_mix_order():
            baselines["upstream_off"] = {"triton.mix_order_reduction": False}
        row: dict = {"case": f"sum {M}x{N} {str(dtype).replace('torch.', '')} transposed"}
        for name, options in baselines.items():
            torch._dynamo.reset()
            compiled = torch.compile(sum_pair, options=options, dynamic=False)
            _, got, graph = timer.run(functools.partial(compiled, x, yt.t()))
            ok, row[f"{name}_err"] = check(got, ref)
            if not ok:
                raise SystemExit(f"{row['case']}: {name} is wrong "
                                 f"(max rel err {row[f'{name}_err']:.3g})")
            row[f"{name}_us"] = timer.time_us(graph)
        best = None
        for bm, bn, warps, stages, per_sm in CONFIG_GRID:
            groups = min(max(1, math.ceil(sms * per_sm / triton.cdiv(N, bn))),
                         triton.cdiv(M, bm))
            launch = column_strip(x, yt, bm, bn, warps, stages, groups)
            _, got, graph = timer.run(launch)
            ok, err = check(got, ref)
            if not ok:
                raise SystemExit(f"{row['case']}: column strip {bm}x{bn} is wrong "
                                 f"(max rel err {err:.3g})")
            us = timer.time_us(graph)
            if best is None or us < best[0]:
                best = (us, f"BM{bm} BN{bn} w{warps} s{stages} groups{groups}", err)
        row["strip_us"], row["strip_config"], row["strip_err"] = best
        copy_us = 2 * M * N * x.element_size() / (copy_tbps(timer, M * N, dtype) * 1e12) * 1e6
        row["strip_of_copy"] = copy_us / row["strip_us"]
        row["strip_over_stock"] = row["stock_us"] / row["strip_us"]
        rows.append(row)
        off = f" off {row['upstream_off_us']:7.1f}" if "upstream_off_us" in row else ""
        print(f"{row['case']:34s} stock {row['stock_us']:7.1f}{off} strip "
              f"{row['strip_us']:7.1f} us ({row['strip_config']})  x{row['strip_over_stock']:.2f}"
              f" over stock, {row['strip_of_copy']:.2f} of copy", flush=True)
    if args.csv:
        write_rows(args.csv, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
