"""A probe of a design the plugin does not generate: an RMSNorm backward whose rows are
split over G programs that exchange their partial row sums through global memory.

The plugin's fused kernel gives each row to one program, which must hold the column
partials of the whole row (registers, or register tiles reading the row twice). At few
rows per SM (M of 1-4 thousand, long rows) that leaves one program per SM whose loads
wait alone, and a workspace of one fp32 row per program (bench/NOTES.md). Here
program (g, r) owns the g-th of G column slices of rows r, r + R, r + 2R ... (R = programs
/ G): it loads only its slice, publishes the slice's share of the row sum, and adds the
G shares (in a fixed order, so dx is deterministic) once all G have arrived. Rows are
loaded and their shares published DEPTH rows (1 or 2) ahead of the row being finished,
so the exchange's round trip hides behind those rows' loads. The partials of dw are then
1/G of a row per program and the workspace has R rows, folded by a second kernel.

Launched cooperatively (all programs resident: they wait for each other). A row's G
share slots hold NaN until published (a fill before each launch, in the timed graph);
a program polls its row's slots until none is NaN, finishes that row, and only then
publishes the share of the row it loaded last, so the poll's round trip and the finish
overlap that row's loads (a NaN share would wait forever: this is a probe, not a kernel
to ship). Timed with the GraphTimer and L2 flush of the other
benchmarks, against the same-size add and torch.compile with inductor_ext, after dx and
dw are checked against float64.

    python bench/probes/bench_row_exchange_floor.py \\
        --cases "rms:1450x28736:fp32@15x255x8x2+15x390x4x2,rms:1254x16256:fp16:fp32@8x528x4x2"
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
    check_rms_grads,
    description,
    fold_workspace_columns,
    parse_rms_case,
    probe_timer,
    rms_problem,
    time_inductor_ext,
)


@triton.jit
def _publish(shares_ptr, row, g, G: tl.constexpr, share):
    """This program's share of `row`'s sum into its slot (NaN until then)."""
    tl.atomic_xchg(shares_ptr + row * G + g, share, sem="relaxed")


@triton.jit
def _poll(shares_ptr, row, G: tl.constexpr, G_P2: tl.constexpr):
    slots = tl.arange(0, G_P2)
    return tl.load(shares_ptr + row * G + slots, slots < G, other=0.0, volatile=True)


@triton.jit
def _row_total(shares_ptr, row, G: tl.constexpr, G_P2: tl.constexpr, first):
    """`row`'s sum once no slot is NaN (`first`: a poll issued earlier), added in a fixed
    order."""
    shares = first
    while tl.sum((shares != shares).to(tl.int32), 0) > 0:
        shares = _poll(shares_ptr, row, G, G_P2)
    return tl.sum(shares, 0)


@triton.jit
def _load_row(x_ptr, dy_ptr, row, cols, cmask, M, N: tl.constexpr):
    # Rows past M load nothing; a lane-wise compare (Triton 3.9's interpreter takes a
    # lane mask & a scalar compare as int32, not a mask).
    ok = cmask & (cols < tl.where(row < M, N, 0))
    x = tl.load(x_ptr + row * N + cols, ok, other=0.0, eviction_policy="evict_first")
    dy = tl.load(dy_ptr + row * N + cols, ok, other=0.0, eviction_policy="evict_first")
    return x, dy


@triton.jit
def _share(x, dy, w):
    return tl.sum(dy.to(tl.float32) * w * x.to(tl.float32), 0)


@triton.jit
def _finish_row(x, dy, w, total, rstd_ptr, dx_ptr, row, cols, cmask, N: tl.constexpr):
    """dx of this slice of `row`; returns its dw partial."""
    rstd = tl.load(rstd_ptr + row)
    xf = x.to(tl.float32)
    dyf = dy.to(tl.float32)
    dx = rstd * w * dyf - xf * (rstd * rstd * rstd * total / N)
    tl.store(dx_ptr + row * N + cols, dx.to(dx_ptr.dtype.element_ty), cmask,
             cache_modifier=".cs")
    return dyf * xf * rstd


@triton.jit
def _rms_backward_exchange(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, ws_ptr, shares_ptr,
                           M, N: tl.constexpr, G: tl.constexpr,
                           G_P2: tl.constexpr, SLICE: tl.constexpr, BLOCK: tl.constexpr,
                           DEPTH: tl.constexpr):
    """Program (g, r): slice g of rows r, r + R, ... Rows are loaded and their shares
    published DEPTH rows ahead of the row being finished (1 or 2)."""
    pid = tl.program_id(0)
    g = pid % G
    r = pid // G
    R = tl.num_programs(0) // G
    lanes = tl.arange(0, BLOCK)
    cols = g * SLICE + lanes
    cmask = (lanes < SLICE) & (cols < N)
    w = tl.load(w_ptr + cols, cmask, other=0.0).to(tl.float32)
    acc = tl.zeros([BLOCK], tl.float32)
    x0, dy0 = _load_row(x_ptr, dy_ptr, r, cols, cmask, M, N)
    if G > 1:
        _publish(shares_ptr, r, g, G, _share(x0, dy0, w))
    if DEPTH == 1:
        for nxt in range(r + R, M + R, R):
            x1, dy1 = _load_row(x_ptr, dy_ptr, nxt, cols, cmask, M, N)
            if G > 1:
                total = _row_total(shares_ptr, nxt - R, G, G_P2,
                                   _poll(shares_ptr, nxt - R, G, G_P2))
            else:
                total = _share(x0, dy0, w)
            acc += _finish_row(x0, dy0, w, total, rstd_ptr, dx_ptr, nxt - R, cols, cmask, N)
            if G > 1:
                if nxt < M:
                    _publish(shares_ptr, nxt, g, G, _share(x1, dy1, w))
            x0, dy0 = x1, dy1
    else:
        x1, dy1 = _load_row(x_ptr, dy_ptr, r + R, cols, cmask, M, N)
        if G > 1:
            if r + R < M:
                _publish(shares_ptr, r + R, g, G, _share(x1, dy1, w))
        for nxt in range(r + 2 * R, M + 2 * R, R):
            x2, dy2 = _load_row(x_ptr, dy_ptr, nxt, cols, cmask, M, N)
            if G > 1:
                total = _row_total(shares_ptr, nxt - 2 * R, G, G_P2,
                                   _poll(shares_ptr, nxt - 2 * R, G, G_P2))
            else:
                total = _share(x0, dy0, w)
            acc += _finish_row(x0, dy0, w, total, rstd_ptr, dx_ptr, nxt - 2 * R, cols,
                               cmask, N)
            if G > 1:
                if nxt < M:
                    _publish(shares_ptr, nxt, g, G, _share(x2, dy2, w))
            x0, dy0 = x1, dy1
            x1, dy1 = x2, dy2
    tl.store(ws_ptr + r * N + cols, acc, cmask)


def parse_configs(spec: str) -> list[tuple[int, int, int, int]]:
    """'GxPxWxD+...': column groups, programs, warps, rows ahead (1 or 2)."""
    out = []
    for item in spec.split("+"):
        try:
            groups, programs, warps, depth = (int(v) for v in item.split("x"))
        except ValueError:
            raise SystemExit(f"{item!r} is not GROUPSxPROGRAMSxWARPSxDEPTH") from None
        if depth not in (1, 2) or programs % groups:
            raise SystemExit(f"{item!r}: depth is 1 or 2, programs a multiple of groups")
        out.append((groups, programs, warps, depth))
    return out


def rule_configs(N: int, sms: int) -> list[tuple[int, int, int, int]]:
    """`auto`: slices of at most 2048 lanes (G = ceil(N / 2040)), 4 warps, two rows
    ahead, as many programs as 4 then 3 an SM allow (a whole number of groups); the rule
    the probe's best launches at 20K+ columns followed, for shapes it was not tuned on."""
    groups = -(-N // 2040)
    return [(groups, per_sm * sms // groups * groups, 4, 2) for per_sm in (4, 3)]


def run_case(timer: GraphTimer, spec: str, tbps: float) -> None:
    case = parse_rms_case(spec)
    M, N = case.M, case.N
    config_spec = spec.partition("@")[2]
    configs = (rule_configs(N, torch.cuda.get_device_properties(0).multi_processor_count)
               if config_spec == "auto" else parse_configs(config_spec))
    problem = rms_problem(M, N, case.dtype, case.wdtype)
    x, w, dy, rstd32 = problem.x, problem.w, problem.dy, problem.rstd
    nbytes = problem.min_bytes
    print(f"{spec}:")
    ext_us = time_inductor_ext(timer, problem, tbps)

    dx = torch.empty_like(x)
    dw = torch.empty_like(w)
    for groups, programs, warps, depth in configs:
        rows = programs // groups
        if rows * depth > M:
            raise SystemExit(f"{groups}x{programs}x{warps}x{depth}: more rows ahead than M")
        slice_ = triton.cdiv(triton.cdiv(N, groups), 8) * 8  # slices on 16-byte vectors
        block = triton.next_power_of_2(slice_)
        ws = torch.empty(rows, N, device="cuda")
        shares = torch.empty(M, groups, device="cuda")

        def backward(groups=groups, programs=programs, warps=warps, rows=rows, ws=ws,
                     shares=shares, slice_=slice_, block=block, depth=depth):
            shares.fill_(float("nan"))
            _rms_backward_exchange[(programs,)](
                dy, x, w, rstd32, dx, ws, shares, M, N=N, G=groups,
                G_P2=triton.next_power_of_2(groups), SLICE=slice_, BLOCK=block, DEPTH=depth,
                num_warps=warps, launch_cooperative_grid=True)
            fold_workspace_columns[(triton.cdiv(N, 16),)](
                ws, dw, None, rows, N=N, COLS=16, ROWS_P2=triton.next_power_of_2(rows),
                OUTPUTS=1, num_warps=4)

        dx.fill_(float("nan"))
        dw.fill_(float("nan"))
        try:
            _, _, graph = timer.run(backward)
        except RuntimeError as exc:  # a cooperative launch of more programs than fit
            print(f"  {groups}x{programs}x{warps}x{depth}: not launched: "
                  f"{str(exc).splitlines()[0][:100]}")
            continue
        us = timer.time_us(graph)
        check_rms_grads(problem, f"{groups}x{programs}x{warps}x{depth}", dx, dw)
        print(f"  G={groups:2d} P={programs:4d} W={warps:2d} D={depth} lanes={block:5d}"
              f"  {us:7.1f} us  "
              f"{nbytes / us / 1e6 / tbps:.3f} of copy  x{ext_us / us:.3f} over inductor_ext "
              f"(workspace {rows} rows)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=description(__doc__))
    ap.add_argument("--cases", default="rms:1450x28736:fp32@15x390x4x2,"
                                       "rms:3862x21504:bf16:fp32@21x1050x2x2",
                    help="rms:MxN:dtype[:wdtype]@GxPxWxD+...,... (RMSNorm only): the "
                         "launches to try per case, column groups x programs x warps x "
                         "rows ahead (1 or 2); @auto: the rule of rule_configs")
    ap.add_argument("--flush", choices=FLUSH_MODES, default="read")
    args = ap.parse_args(argv)
    timer, tbps = probe_timer("bench_row_exchange_floor", args.flush)
    for spec in args.cases.split(","):
        run_case(timer, spec, tbps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
