"""A probe of a load layout the plugin does not generate: RMSNorm backward rows that do
not start on 16-byte vectors, read as whole 16-byte vectors anyway.

When N x element bytes is not a multiple of 16, row r starts (r * N) % VEC elements past
a 16-byte boundary (VEC = 16 / element bytes), and Triton, which cannot prove the start
aligned, loads such a row 2-4 bytes at a time. On the H100 those rows are the grid's
family furthest from the copy bar, bound by load instructions rather than DRAM
(bench/NOTES.md). Here each row is read from the 16-byte boundary at or before
its start, lane l holding column l - shift, over whole vectors up to the one that holds
its last element (every vector read holds at least one of the row's elements, so no
read leaves the tensor's pages); lanes outside the row are zeroed after the load. With
a program count P such that P * N is a multiple of VEC, every row a program walks (r,
r + P, ...) has the same shift, so the weights, the dw partials and the workspace row
stay in the program's lane order and are shifted once, at the program's start and end.
dx is stored as whole vectors over the row's aligned middle, and its at most 2 * VEC
edge elements by a small second computation (a vector store would overwrite the
neighbouring rows).

Every layout runs in the same kernel (`--modes`: plain, aligned, and two partial forms
a rewrite of generated code could reach: aligned loads with dx stored element-wise, and
dx's edges gathered from the row's lanes instead of recomputed), persistent rows of ROWS
rows an iteration, so the difference is the layout alone. Every launch is checked against
float64 first, then timed with the GraphTimer and L2 flush of the other benchmarks,
against the same-size add and torch.compile with inductor_ext in the same run.

    python bench/probes/bench_unaligned_rows_floor.py \\
        --cases "rms:17693x4918:bf16:fp32,rms:20019x778:fp16,rms:2605x3454:fp16"
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import re
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from common import (  # noqa: E402
    FLUSH_MODES,
    GraphTimer,
    check_rms_grads,
    description,
    fold_workspace_columns,
    parse_rms_case,
    probe_timer,
    rms_problem,
    time_inductor_ext,
)


@triton.jit
def _row_values(x_ptr, dy_ptr, w, rstd, total, offsets, mask, N: tl.constexpr):
    """dx at `offsets` of rows whose rstd and sum of dy * w * x are given."""
    x = tl.load(x_ptr + offsets, mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + offsets, mask, other=0.0).to(tl.float32)
    return rstd * w * dy - x * (rstd * rstd * rstd * total / N)


@triton.jit
def _rms_backward_rows(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, ws_ptr, M,
                       N: tl.constexpr, BLOCK: tl.constexpr, ROWS: tl.constexpr,
                       VEC: tl.constexpr, ALIGNED: tl.constexpr):
    """Program p walks rows p, p + P, ... ROWS at a time (rows j * P apart), each row one
    BLOCK of lanes; its dw partials go to workspace row p. ALIGNED: 0 the plain layout,
    1 the aligned one, 2 aligned loads with dx stored element-wise (what a plugin
    rewrite of the loads alone would give), 3 aligned with the edges' dx gathered from
    the row's lanes (`tl.gather`) instead of recomputed (what a rewrite of the store
    could emit without the pointwise code that made dx)."""
    pid = tl.program_id(0)
    P = tl.num_programs(0)
    lanes = tl.arange(0, BLOCK)[None, :]
    if ALIGNED:
        shift = (pid * N) % VEC
    else:
        shift = 0
    cols = lanes - shift
    in_row = (cols >= 0) & (cols < N)
    w = tl.load(w_ptr + cols, in_row, other=0.0).to(tl.float32)
    acc = tl.zeros([ROWS, BLOCK], tl.float32)
    # Whole vectors: [first, end) of the block's lanes, divisible by VEC.
    first = (shift + VEC - 1) // VEC * VEC
    end = (shift + N) // VEC * VEC
    read_end = (shift + N + VEC - 1) // VEC * VEC
    step = tl.arange(0, ROWS)[:, None] * P
    for row0 in range(pid, M, P * ROWS):
        rows = row0 + step
        live = rows < M
        if ALIGNED:
            starts = rows * N // VEC * VEC
            offsets = starts + lanes
            x = tl.load(x_ptr + offsets, live & (lanes < read_end), other=0.0)
            dy = tl.load(dy_ptr + offsets, live & (lanes < read_end), other=0.0)
            x = tl.where(in_row, x, 0.0)
            dy = tl.where(in_row, dy, 0.0)
        else:
            offsets = rows * N + lanes
            x = tl.load(x_ptr + offsets, live & in_row, other=0.0)
            dy = tl.load(dy_ptr + offsets, live & in_row, other=0.0)
        rstd = tl.load(rstd_ptr + rows, live, other=0.0)
        xf = x.to(tl.float32)
        dyf = dy.to(tl.float32)
        total = tl.sum(dyf * w * xf, 1)[:, None]
        dx = rstd * w * dyf - xf * (rstd * rstd * rstd * total / N)
        if ALIGNED == 1 or ALIGNED == 3:
            tl.store(dx_ptr + offsets, dx.to(dx_ptr.dtype.element_ty),
                     live & (lanes >= first) & (lanes < end))
            # The row's first and last partial vectors, element by element.
            edge = tl.arange(0, 2 * VEC)[None, :]
            edge_lanes = tl.minimum(tl.where(edge < VEC, edge, end + edge - VEC), BLOCK - 1)
            edge_cols = edge_lanes - shift
            edge_mask = (live & (edge_cols >= 0) & (edge_cols < N)
                         & ((edge_lanes < first) | (edge_lanes >= end)))
            edge_offsets = starts + edge_lanes
            if ALIGNED == 1:
                # Recomputed from the inputs (in L1: just loaded).
                edge_w = tl.load(w_ptr + edge_cols, edge_mask, other=0.0).to(tl.float32)
                edge_dx = _row_values(x_ptr, dy_ptr, edge_w, rstd, total, edge_offsets,
                                      edge_mask, N)
            else:
                # Taken from the row's own dx lanes.
                edge_dx = tl.gather(dx, tl.broadcast_to(edge_lanes, [ROWS, 2 * VEC]), 1)
            tl.store(dx_ptr + edge_offsets, edge_dx.to(dx_ptr.dtype.element_ty), edge_mask)
        else:
            # Plain, or aligned loads with dx stored at its own (unaligned) addresses.
            tl.store(dx_ptr + rows * N + cols, dx.to(dx_ptr.dtype.element_ty), live & in_row)
        acc += dyf * xf * rstd
    tl.store(ws_ptr + pid * N + cols, tl.sum(acc, 0)[None, :], in_row)


def global_access_widths(ptx: str) -> str:
    """The compiled kernel's global loads and stores by width, e.g. 'ld v4.b32 x4, ld
    b16 x8, st ...': whether the rows were read as 16-byte vectors."""
    counts: collections.Counter[str] = collections.Counter()
    for op, suffix in re.findall(r"\b(ld|st)\.global(\S*)", ptx):
        width = re.search(r"(\.v[248])?\.[bfsu]\d+$", suffix)
        counts[f"{op} {width.group(0).lstrip('.') if width else suffix}"] += 1
    return ", ".join(f"{key} x{n}" for key, n in sorted(counts.items()))


def program_counts(N: int, vec: int, sms: int, per_sm: tuple[int, ...]) -> list[int]:
    """Programs near `per_sm` an SM that keep every program's rows at one shift: P * N a
    multiple of VEC, so P a multiple of VEC / gcd(N, VEC)."""
    unit = vec // math.gcd(N, vec)
    return sorted({max(unit, sms * k // unit * unit) for k in per_sm})


#: The layouts by ALIGNED value.
MODES = ("plain", "aligned", "loads", "gather")


def run_case(timer: GraphTimer, spec: str, tbps: float, warps: tuple[int, ...],
             per_sm: tuple[int, ...], modes: tuple[int, ...] = (0, 1)) -> None:
    p = parse_rms_case(spec)
    M, N, dtype = p.M, p.N, p.dtype
    problem = rms_problem(M, N, dtype, p.wdtype)
    vec = 16 // dtype.itemsize
    print(f"{spec}: row start off 16 bytes every {vec // math.gcd(N, vec)} rows "
          f"(N % {vec} = {N % vec})")
    ext_us = time_inductor_ext(timer, problem, tbps)
    block = triton.next_power_of_2(N + vec - 1)
    rows_per_iter = max(1, min(16, 4096 // block))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    dx = torch.empty_like(problem.x)
    dw = torch.empty_like(problem.w)
    results: dict[tuple[int, int, int], float] = {}
    for programs in program_counts(N, vec, sms, per_sm):
        ws = torch.empty(programs, N, device="cuda")
        for num_warps in warps:
            for aligned in modes:
                def backward(programs=programs, ws=ws, num_warps=num_warps, aligned=aligned):
                    _rms_backward_rows[(programs,)](
                        problem.dy, problem.x, problem.w, problem.rstd, dx, ws, M, N=N,
                        BLOCK=block, ROWS=rows_per_iter, VEC=vec, ALIGNED=aligned,
                        num_warps=num_warps)
                    fold_workspace_columns[(triton.cdiv(N, 16),)](
                        ws, dw, None, programs, N=N, COLS=16,
                        ROWS_P2=triton.next_power_of_2(programs), OUTPUTS=1, num_warps=4)

                dx.fill_(float("nan"))
                dw.fill_(float("nan"))
                _, _, graph = timer.run(backward)
                if (programs, num_warps) == (min(program_counts(N, vec, sms, per_sm)),
                                             warps[0]):
                    compiled = _rms_backward_rows[(programs,)](
                        problem.dy, problem.x, problem.w, problem.rstd, dx, ws, M, N=N,
                        BLOCK=block, ROWS=rows_per_iter, VEC=vec, ALIGNED=aligned,
                        num_warps=num_warps)
                    print(f"  {MODES[aligned]} kernel's global "
                          f"accesses: {global_access_widths(compiled.asm['ptx'])}; "
                          f"{getattr(compiled, 'n_regs', '?')} registers, "
                          f"{getattr(compiled, 'n_spills', '?')} spilled")
                check_rms_grads(problem, f"P={programs} W={num_warps} {MODES[aligned]}",
                                dx, dw)
                us = timer.time_us(graph)
                results[(programs, num_warps, aligned)] = us
                print(f"  P={programs:4d} W={num_warps:2d} rows={rows_per_iter:2d} "
                      f"{MODES[aligned]:7s} {us:7.1f} us  "
                      f"{problem.min_bytes / us / 1e6 / tbps:.3f} of copy  "
                      f"x{ext_us / us:.3f} over inductor_ext")
    for aligned in modes:
        best = min((us, key) for key, us in results.items() if key[2] == aligned)
        print(f"  best {MODES[aligned]}: {best[0]:.1f} us "
              f"(P={best[1][0]}, W={best[1][1]}), "
              f"{problem.min_bytes / best[0] / 1e6 / tbps:.3f} of copy, "
              f"x{ext_us / best[0]:.3f} over inductor_ext")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=description(__doc__))
    ap.add_argument("--cases", default="rms:17693x4918:bf16:fp32,rms:20019x778:fp16,"
                                       "rms:2605x3454:fp16,rms:1682x3033:bf16",
                    help="rms:MxN:dtype[:wdtype],... (RMSNorm only)")
    ap.add_argument("--warps", default="4,8,16", help="warp counts to time, comma-separated")
    ap.add_argument("--per-sm", default="1,2,4",
                    help="programs an SM to time (rounded to keep one shift a program)")
    ap.add_argument("--modes", default="plain,aligned",
                    help=f"layouts to time, of {','.join(MODES)} (loads: aligned loads, "
                         "dx stored element-wise; gather: the dx edges gathered from the "
                         "row's lanes)")
    ap.add_argument("--flush", choices=FLUSH_MODES, default="read")
    args = ap.parse_args(argv)
    timer, tbps = probe_timer("bench_unaligned_rows_floor", args.flush)
    warps = tuple(int(v) for v in args.warps.split(","))
    per_sm = tuple(int(v) for v in args.per_sm.split(","))
    try:
        modes = tuple(MODES.index(m) for m in args.modes.split(","))
    except ValueError:
        raise SystemExit(f"--modes {args.modes!r}: each of {', '.join(MODES)}") from None
    for spec in args.cases.split(","):
        run_case(timer, spec, tbps, warps, per_sm, modes)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
