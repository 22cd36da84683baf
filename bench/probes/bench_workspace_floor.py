"""What the column partials of a LayerNorm backward cost, piece by piece.

A self-contained Triton kernel shaped like our fused persistent kernel (strided rows,
next row block double-buffered in registers, dx and both row sums per row) is timed with
the same GraphTimer and L2 flush as bench_norm_bwd.py, with its dw/db partials
(a) left out, (b) written as one fp32 workspace row per program and summed by a second
kernel (our design; with and without programmatic dependent launch), (c) written the same way
and folded by the same kernel behind a grid barrier (every program waits until all have
stored their row, then folds a share of the columns; launched cooperatively, so all
programs are resident), (d) added with fp32 atomics into one row and cast by a second
kernel, with and without the memset that zeroes that row (not deterministic: a bound, not
a candidate). The differences say what a design that keeps the partials in fp32 pays on
top of the row reduction, against the 0.90-of-copy line.

    python bench/probes/bench_workspace_floor.py --shape 4096x4096 --configs 256x1x8,128x2x16
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import NamedTuple

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from common import (  # noqa: E402
    FLUSH_MODES,
    GraphTimer,
    check,
    copy_tbps,
    description,
    fold_workspace_columns,
    min_bytes,
    require_cuda,
)

#: What the kernel does with its column partials.
NO_PARTIALS, WORKSPACE, ATOMICS, BARRIER_FOLD = 0, 1, 2, 3


@triton.jit
def _ln_backward(dy_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, ws_ptr, M,
                 arrivals_ptr, dw_ptr, db_ptr,
                 N: tl.constexpr, XB: tl.constexpr, PARTIALS: tl.constexpr,
                 TRIGGER: tl.constexpr, FOLD_COLS: tl.constexpr = 16,
                 PROGRAMS_P2: tl.constexpr = 1):
    cols = tl.arange(0, N)[None, :]
    lanes = tl.arange(0, XB)[:, None]
    start = tl.program_id(0) * XB
    step = tl.num_programs(0) * XB
    acc_dw = tl.zeros([XB, N], tl.float32)
    acc_db = tl.zeros([XB, N], tl.float32)
    rows = start + lanes
    dy = tl.load(dy_ptr + rows * N + cols, eviction_policy="evict_first")
    x = tl.load(x_ptr + rows * N + cols, eviction_policy="evict_first")
    mean = tl.load(mean_ptr + rows)
    rstd = tl.load(rstd_ptr + rows)
    for offset in tl.range(start, M, step):
        rows = offset + lanes
        ahead = tl.minimum(offset + step, M - XB) + lanes
        dy_next = tl.load(dy_ptr + ahead * N + cols, eviction_policy="evict_first")
        x_next = tl.load(x_ptr + ahead * N + cols, eviction_policy="evict_first")
        mean_next = tl.load(mean_ptr + ahead)
        rstd_next = tl.load(rstd_ptr + ahead)
        w = tl.load(w_ptr + cols, eviction_policy="evict_last").to(tl.float32)
        dyf = dy.to(tl.float32)
        xhat = (x.to(tl.float32) - mean) * rstd
        wdy = w * dyf
        sum_wdy = tl.sum(wdy, 1)[:, None]
        sum_wdy_xhat = tl.sum(wdy * xhat, 1)[:, None]
        dx = (rstd / N) * (wdy * N - sum_wdy - xhat * sum_wdy_xhat)
        tl.store(dx_ptr + rows * N + cols, dx.to(dx_ptr.dtype.element_ty))
        if PARTIALS != 0:
            acc_dw += dyf * xhat
            acc_db += dyf
        dy, x, mean, rstd = dy_next, x_next, mean_next, rstd_next
    if TRIGGER:
        tl.extra.cuda.gdc_launch_dependents()
    if PARTIALS == 1 or PARTIALS == 3:
        slot = tl.program_id(0) * 2 * N
        tl.store(ws_ptr + slot + cols, tl.sum(acc_dw, 0)[None, :])
        tl.store(ws_ptr + slot + N + cols, tl.sum(acc_db, 0)[None, :])
    if PARTIALS == 2:
        tl.atomic_add(ws_ptr + cols, tl.sum(acc_dw, 0)[None, :], sem="relaxed")
        tl.atomic_add(ws_ptr + N + cols, tl.sum(acc_db, 0)[None, :], sem="relaxed")
    if PARTIALS == 3:
        _barrier_fold(ws_ptr, arrivals_ptr, dw_ptr, db_ptr, N, FOLD_COLS, PROGRAMS_P2)


@triton.jit
def _barrier_fold(ws_ptr, arrivals_ptr, dw_ptr, db_ptr, N: tl.constexpr,
                  FOLD_COLS: tl.constexpr, PROGRAMS_P2: tl.constexpr):
    """Wait until every program has stored its workspace row, then fold FOLD_COLS columns.
    The arrival counter only grows: a launch's programs wait for the next multiple of the
    program count, so replays need no reset."""
    programs = tl.num_programs(0)
    tl.debug_barrier()  # the whole program's stores happen before the arrival
    arrived = tl.atomic_add(arrivals_ptr, 1, sem="release")
    target = (arrived // programs + 1) * programs
    seen = arrived + 1
    while seen < target:
        seen = tl.atomic_add(arrivals_ptr, 0, sem="acquire")
    tl.debug_barrier()
    fold_workspace_columns(ws_ptr, dw_ptr, db_ptr, programs, N, FOLD_COLS, PROGRAMS_P2, 2)


@triton.jit
def _fold(ws_ptr, dw_ptr, db_ptr, ROWS: tl.constexpr, ROWS_P2: tl.constexpr,
          N: tl.constexpr, COLS: tl.constexpr, WAIT: tl.constexpr):
    if WAIT:
        tl.extra.cuda.gdc_wait()
    fold_workspace_columns(ws_ptr, dw_ptr, db_ptr, ROWS, N, COLS, ROWS_P2, 2)


def parse_configs(spec: str) -> list[tuple[int, int, int]]:
    """'256x1x8,128x2x16' -> [(programs, rows per iteration, warps), ...]."""
    out = []
    for item in spec.split(","):
        try:
            programs, rows, warps = (int(v) for v in item.split("x"))
        except ValueError:
            raise SystemExit(f"config {item!r} is not PROGRAMSxROWSxWARPS") from None
        out.append((programs, rows, warps))
    return out


class Problem(NamedTuple):
    x: torch.Tensor
    dy: torch.Tensor
    w: torch.Tensor
    mean: torch.Tensor
    rstd: torch.Tensor
    dx: torch.Tensor
    dw: torch.Tensor
    db: torch.Tensor
    ref_dx: torch.Tensor
    ref_dw: torch.Tensor
    ref_db: torch.Tensor


def time_config(timer: GraphTimer, p: Problem, programs: int, rows: int, warps: int) -> None:
    """Print the end-to-end time of each way of handling the partials at one launch shape."""
    M, N = p.x.shape
    ws = torch.empty(programs, 2, N, device="cuda")
    arrivals = torch.zeros(1, device="cuda", dtype=torch.int32)
    fold_cols = 16
    # The barrier fold: each program folds an equal power-of-two share of the columns.
    share = triton.next_power_of_2(triton.cdiv(N, programs))

    def kernel(partials: int, trigger: bool = False) -> None:
        extra = ({"FOLD_COLS": share, "PROGRAMS_P2": triton.next_power_of_2(programs),
                  "launch_cooperative_grid": True} if partials == BARRIER_FOLD else {})
        _ln_backward[(programs,)](p.dy, p.x, p.w, p.mean, p.rstd, p.dx, ws, M, arrivals,
                                  p.dw, p.db, N=N, XB=rows, PARTIALS=partials,
                                  TRIGGER=trigger, num_warps=warps, **extra)

    def fold(rows_in: int, wait: bool = False) -> None:
        _fold[(triton.cdiv(N, fold_cols),)](
            ws, p.dw, p.db, ROWS=rows_in, ROWS_P2=triton.next_power_of_2(rows_in), N=N,
            COLS=fold_cols, WAIT=wait, num_warps=4, **({"launch_pdl": True} if wait else {}))

    cases = {
        "no dw/db partials": lambda: kernel(NO_PARTIALS),
        "workspace, kernel alone": lambda: kernel(WORKSPACE),
        "workspace + fold": lambda: (kernel(WORKSPACE), fold(programs)),
        "workspace + barrier fold": lambda: kernel(BARRIER_FOLD),
        "atomics, kernel alone": lambda: kernel(ATOMICS),
        "atomics + cast": lambda: (kernel(ATOMICS), fold(1)),
        "atomics + memset + cast": lambda: (ws.zero_(), kernel(ATOMICS), fold(1)),
    }
    if torch.cuda.get_device_capability()[0] >= 9:
        cases["workspace + fold (PDL)"] = lambda: (kernel(WORKSPACE, trigger=True),
                                                   fold(programs, wait=True))
    print(f"{programs} programs x {rows} rows per iteration x {warps} warps "
          f"({M // (programs * rows)} iterations):")
    for name, fn in cases.items():
        for out in (p.dx, p.dw, p.db):  # a case that leaves one unwritten fails its check
            out.fill_(math.nan)
        try:
            _, _, graph = timer.run(fn)
        except RuntimeError as exc:  # a cooperative launch of more programs than fit
            print(f"  {name:26s} not launched: {str(exc).splitlines()[0][:120]}")
            continue
        us = timer.time_us(graph)
        checked = {"dx": (p.dx, p.ref_dx)}
        if "fold" in name or "memset" in name:  # the others leave dw/db unwritten
            checked.update(dw=(p.dw, p.ref_dw), db=(p.db, p.ref_db))
        errors = {}
        for what, (got, want) in checked.items():
            ok, errors[what] = check([got], [want])  # within its dtype's tolerance
            if not ok:  # NaN (left unwritten) fails too
                raise SystemExit(f"{name}: {what} off by {errors[what]:.2e} of its "
                                 "largest value")
        print(f"  {name:26s} {us:7.1f} us end to end  "
              f"({'/'.join(errors)} within {max(errors.values()):.1e})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=description(__doc__))
    ap.add_argument("--shape", default="4096x4096", help="MxN of the bf16 LayerNorm")
    ap.add_argument("--configs", default="256x1x8,128x2x16",
                    help="PROGRAMSxROWSxWARPS launches to try, comma-separated")
    ap.add_argument("--flush", choices=FLUSH_MODES, default="read")
    args = ap.parse_args(argv)
    require_cuda("bench_workspace_floor")
    M, N = (int(v) for v in args.shape.split("x"))
    if N & (N - 1):
        raise SystemExit(f"N={N}: this kernel holds a whole row, N must be a power of two")
    torch.manual_seed(0)
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn_like(x)
    w = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    mean = x.float().mean(1)
    rstd = torch.rsqrt(x.float().var(1, unbiased=False) + 1e-5)
    xhat = (x.float() - mean[:, None]) * rstd[:, None]
    ref_dw, ref_db = (dy.float() * xhat).sum(0), dy.float().sum(0)
    wdy = w.float() * dy.float()
    ref_dx = (rstd[:, None] / N) * (wdy * N - wdy.sum(1, keepdim=True)
                                    - xhat * (wdy * xhat).sum(1, keepdim=True))
    del wdy
    dx, dw, db = torch.empty_like(x), torch.empty_like(w), torch.empty_like(w)
    problem = Problem(x, dy, w, mean, rstd, dx, dw, db, ref_dx, ref_dw, ref_db)
    timer = GraphTimer(args.flush)
    line_us = 0.90 ** -1 * min_bytes("ln", M, N, 2) / (copy_tbps(timer) * 1e12) * 1e6
    a, b = x.view(-1), dy.view(-1)
    _, _, graph = timer.run(lambda: torch.add(a, b, out=dx.view(-1)))
    print(f"{args.shape} bf16: 0.90 of copy is {line_us:.1f} us; "
          f"same-size torch add {timer.time_us(graph):.1f} us (end to end, timed graph)")

    for programs, rows, warps in parse_configs(args.configs):
        if M % rows or M < programs * rows:
            raise SystemExit(f"{programs}x{rows}: M={M} needs a multiple of {rows} rows "
                             "and a row block per program")
        time_config(timer, problem, programs, rows, warps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
