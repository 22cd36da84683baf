"""Fit the CUDA cost model's constants to a calibration sweep and check its decisions.

    python bench/fit_cost_model.py bench/results/cost_sweep_h100.csv [more sweeps] \
        [--plot bench/results/cost_sweep_h100.png]

Least squares of time = overhead + bytes / (bandwidth x efficiency) over the rows of each
regime (fused persistent rows; Inductor unfused; upstream's mix-order where its gates take
the shape), printed beside the constants in `inductor_ext.targets.cuda.tuning.CudaTuning`; then the
model's decision with the committed constants for every row, against what was measured
(speedup of fusing over the better of stock and upstream off). No GPU needed.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from common import CPU_ONLY, description  # noqa: E402

from inductor_ext.plan import (  # noqa: E402
    DeviceInfo,
    LaunchPlan,
    PlanOptions,
    ShapeInfo,
    split_rows_reason,
)
from inductor_ext.targets.cuda import cost  # noqa: E402
from inductor_ext.targets.cuda import plan as cuda_plan  # noqa: E402
from inductor_ext.targets.cuda.tuning import CudaTuning  # noqa: E402

#: The H100 the sweep ran on (torch 2.11: 132 SMs, 50 MB L2, 64K registers and 256 KB
#: L1 per SM, HBM3 at 2619 MHz x 5120 bits).
H100 = DeviceInfo(type="cuda", name="NVIDIA H100 80GB HBM3", cores=132, l2_bytes=50 * 2**20,
                  register_file_bytes=4 * 65536, l1_bytes=256 * 1024,
                  dram_bytes_per_s=3.352e12, capability=(9, 0))
#: Fusing within this share of the better stock time is within the timing noise measured
#: by repeating cases (0.5-2.5%): either decision is right there.
NOISE = 0.03


def shape_of(row: dict) -> ShapeInfo:
    info = json.loads(row["shape_info"])
    info["device"] = torch.device("cuda")
    return ShapeInfo(**info)


def measured_speedup(row: dict) -> float:
    best = min(float(row["stock_us"]), float(row["upstream_off_us"]))
    return best / float(row["fused_us"])


def plan_of(shape: ShapeInfo, tuning: CudaTuning, options: PlanOptions) -> LaunchPlan:
    """The hook's plan for a row's shape: a column strip's laid out per piece."""
    plan = cuda_plan.plan(shape, H100, tuning, options)
    if shape.walks_pieces:
        plan = cuda_plan.with_segments(plan, shape.row_pieces, shape.M_hint, True)
    return plan


def decide(row: dict, tuning: CudaTuning | None = None, gates: str = "strict"
           ) -> tuple[bool, cost.Estimate]:
    """The model's decision for a sweep row (torch 2.11: upstream's strict gates)."""
    tuning = tuning or CudaTuning()
    shape = shape_of(row)
    options = PlanOptions(upstream_gates=gates)
    plan = plan_of(shape, tuning, options)
    est = cost.estimate(shape, plan, H100, tuning, options)
    split = split_rows_reason(shape)  # the hook declines these before the model
    if split:
        est = dataclasses.replace(est, why_not=split)
    return est.fuse, est


def agrees(row: dict, fuse: bool) -> bool:
    """A decision matches the measurement, or the case is within noise."""
    speedup = measured_speedup(row)
    return abs(speedup - 1) <= NOISE or fuse == (speedup > 1)


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    n = len(points)
    sx = sum(x for x, _ in points)
    sy = sum(y for _, y in points)
    sxx = sum(x * x for x, _ in points)
    sxy = sum(x * y for x, y in points)
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    return (sy - slope * sx) / n, slope


def fit(rows: list[dict]) -> dict[str, float]:
    """overhead (s) and efficiency per regime, over contiguous rows."""
    bw = H100.dram_bytes_per_s
    regimes: dict[str, list[tuple[float, float]]] = {"fused": [], "unfused": [],
                                                     "upstream": []}
    # Groups of split rows are declined before the model (plan.split_rows_reason), or
    # are column strips, fitted apart (fit_strips).
    all_rows, rows = rows, [row for row in rows if shape_of(row).row_pieces == 1]
    for row in rows:
        shape = shape_of(row)
        if shape.strided_bytes or row["layout"] != "contiguous":
            continue
        plan = cuda_plan.plan(shape, H100, CudaTuning(), PlanOptions())
        if not plan.column_tiled:
            ws = plan.workspace_bytes(shape)
            regimes["fused"].append(((shape.total_bytes + 2 * ws) / bw,
                                     float(row["fused_us"]) * 1e-6))
        best = min(float(row["stock_us"]), float(row["upstream_off_us"])) * 1e-6
        if cost.upstream_would_fuse(shape, "strict"):
            regimes["upstream"].append((shape.total_bytes / bw, best))
        else:
            regimes["unfused"].append(((shape.total_bytes + shape.shared_bytes) / bw, best))
    out = {}
    for name, points in regimes.items():
        # A table of strided or split rows only (a held-out one) fits no regime.
        overhead, slope = _line(points) if len(points) >= 2 else (float("nan"), float("nan"))
        out[f"{name}_overhead_s"] = overhead
        out[f"{name}_efficiency"] = 1 / slope
        out[f"{name}_points"] = len(points)
    out.update(fit_strided(rows))
    out.update(fit_column_groups(rows))
    out.update(fit_strips(all_rows))
    return out


def fit_strips(rows: list[dict]) -> dict[str, float]:
    """The column strips' overhead: the mean of their measured fused time over the
    model's without that term (the transposed sum pairs Inductor split into pieces)."""
    base = dataclasses.replace(CudaTuning(), strip_overhead_s=0.0)
    residuals = []
    for row in rows:
        shape = shape_of(row)
        if not (shape.walks_pieces and shape.strided_bytes and row.get("fused_us")):
            continue
        est = cost.estimate(shape, plan_of(shape, base, PlanOptions()), H100, base,
                            PlanOptions())
        residuals.append(float(row["fused_us"]) * 1e-6 - est.fused_s)
    if not residuals:
        return {"strip_overhead_s": float("nan"), "strip_points": 0}
    return {"strip_overhead_s": sum(residuals) / len(residuals),
            "strip_points": len(residuals)}


def fit_column_groups(rows: list[dict]) -> dict[str, float]:
    """The column groups' extra read cost: each grouped row's measured fused time over
    the model's without that term, per (groups - 1) x shared bytes at DRAM bandwidth
    (least squares through zero)."""
    points = []
    base = dataclasses.replace(CudaTuning(), column_group_read_cost=0.0)
    for row in rows:
        shape = shape_of(row)
        if row["layout"] != "contiguous" or not row.get("fused_us"):
            continue
        plan = cuda_plan.plan(shape, H100, CudaTuning(), PlanOptions())
        if plan.column_groups == 1:
            continue
        est = cost.estimate(shape, plan, H100, base, PlanOptions())
        x = (plan.column_groups - 1) * shape.shared_bytes / H100.dram_bytes_per_s
        points.append((x, float(row["fused_us"]) * 1e-6 - est.fused_s))
    if not points:
        return {"column_group_read_cost": float("nan"), "column_group_points": 0}
    slope = sum(x * y for x, y in points) / sum(x * x for x, _ in points)
    return {"column_group_read_cost": slope, "column_group_points": len(points)}


def _strided_pairs(rows: list[dict]) -> list[tuple[dict, dict]]:
    """(transposed row, its coalesced twin: same op, shape and dtypes, contiguous or
    else sliced) for every transposed row the hook fused."""
    by_key = {(r["op"], r["M"], r["N"], r["dtype"], r["wdtype"], r["layout"]): r
              for r in rows}
    pairs = []
    for row in rows:
        key = (row["op"], row["M"], row["N"], row["dtype"], row["wdtype"])
        twin = by_key.get((*key, "contiguous")) or by_key.get((*key, "sliced"))
        if row["layout"] == "transposed" and twin is not None:
            pairs.append((row, twin))
    return pairs


def fit_strided(rows: list[dict]) -> dict[str, float]:
    """The strided costs from each transposed row's extra time over its twin: the fused
    kernel's per sector request (least squares through zero), the unfused kernels' per
    strided byte of the row kernel and per shared one of the column kernel."""
    bw = H100.dram_bytes_per_s
    fused_points, unfused_rows, unfused_extra = [], [], []
    for row, twin in _strided_pairs(rows):
        shape = shape_of(row)
        plan = cuda_plan.plan(shape, H100, CudaTuning(), PlanOptions())
        requests = shape.strided_bytes / cost.strided_run_bytes(shape, plan)
        fused_points.append((requests * cost.SECTOR_BYTES / bw,
                             (float(row["fused_us"]) - float(twin["fused_us"])) * 1e-6))
        unfused_rows.append((shape.strided_bytes / bw, shape.strided_shared_bytes / bw))
        unfused_extra.append((float(row["upstream_off_us"])
                              - float(twin["upstream_off_us"])) * 1e-6)
    if len(fused_points) < 2:  # no transposed / coalesced pairs in these tables
        return {"strided_sector_cost": float("nan"), "strided_row_kernel_cost": float("nan"),
                "strided_column_kernel_cost": float("nan"),
                "strided_stock_share": float("nan"), "strided_points": len(fused_points)}
    sector = (sum(x * y for x, y in fused_points) / sum(x * x for x, _ in fused_points))
    # Two unknowns, no intercept: the 2x2 normal equations.
    aa = sum(a * a for a, _ in unfused_rows)
    ab = sum(a * b for a, b in unfused_rows)
    bb = sum(b * b for _, b in unfused_rows)
    ay = sum(a * y for (a, _), y in zip(unfused_rows, unfused_extra, strict=True))
    by = sum(b * y for (_, b), y in zip(unfused_rows, unfused_extra, strict=True))
    det = aa * bb - ab * ab
    costs = {"strided_sector_cost": sector,
             "strided_row_kernel_cost": (ay * bb - by * ab) / det,
             "strided_column_kernel_cost": (aa * by - ab * ay) / det}
    # The margin: fuse a strided group below the lowest predicted fused / stock ratio of
    # any transposed row measured slower fused (beyond the noise band); 1 (any predicted
    # gain) while none was. Since strided groups run 2 programs per SM with twice the rows
    # per tile (CudaTuning.strided_*), every measured pair fuses faster.
    tuning = dataclasses.replace(CudaTuning(), **costs, strided_stock_share=1.0)
    predicted_at_losses = [est.fused_s / est.stock_s for est in
                           (decide(row, tuning)[1] for row, _ in _strided_pairs(rows)
                            if measured_speedup(row) < 1 - NOISE)]
    return {**costs, "strided_stock_share": min([1.0, *predicted_at_losses]),
            "strided_points": len(fused_points)}


def plot(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 6))
    markers = {"rms": "o", "ln": "s", "sum": "^"}
    for row in rows:
        fuse, _ = decide(row)
        speedup = measured_speedup(row)
        mn = int(row["M"]) * int(row["N"])
        face = "tab:green" if fuse else "white"
        edge = "tab:red" if not agrees(row, fuse) else ("tab:green" if fuse else "tab:gray")
        ax.scatter(mn, speedup, marker=markers[row["op"]], facecolors=face, edgecolors=edge,
                   s=36 if row["layout"] == "contiguous" else 60, linewidths=1.2)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("M x N (elements)")
    ax.set_ylabel("fused time speedup over the better of stock and upstream off")
    ax.set_title(f"Cost-model calibration on {H100.name}: filled = the model fuses "
                 "(o rms, s ln, ^ sum pair; large = sliced/transposed)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def load(paths: list[str]) -> list[dict]:
    """The rows of sweep CSVs, in order; a case measured again in a later table replaces
    its earlier row (a re-measure after a kernel change, e.g. cost_sweep_strips_h100.csv
    after cost_sweep_h100.csv), so each case is fitted and checked once, as last run."""
    rows: dict[str, dict] = {}
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                rows.pop(row["case"], None)
                rows[row["case"]] = row
    return list(rows.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=description(__doc__, CPU_ONLY))
    ap.add_argument("csv", nargs="+", help="sweep CSVs, fitted together (a --grid strided "
                    "sweep pairs with its --grid twins; a case in a later CSV replaces its "
                    "row in an earlier one)")
    ap.add_argument("--plot", default="", metavar="PNG",
                    help="plot each row's measured speedup of fusing against M x N, "
                    "marked by the model's decision, here (needs matplotlib)")
    args = ap.parse_args(argv)
    rows = [r for r in load(args.csv) if r.get("shape_info")]
    if not rows:
        ap.exit(2, f"{ap.prog}: error: no row of {', '.join(args.csv)} has shape_info (the "
                "hook's shape facts, which the calibration sweeps of sweep_cost_model.py "
                "record, e.g. bench/results/cost_sweep_h100.csv)\n")
    fitted = fit(rows)
    tuning = CudaTuning()
    print(f"{len(rows)} rows with the hook's shape facts")
    for name in ("fused", "unfused", "upstream"):
        print(f"  {name:9s} fitted overhead {fitted[f'{name}_overhead_s'] * 1e6:5.1f} us, "
              f"efficiency {fitted[f'{name}_efficiency']:.3f} over "
              f"{fitted[f'{name}_points']} rows; committed "
              f"{getattr(tuning, f'{name}_overhead_s') * 1e6:5.1f} us, "
              f"{getattr(tuning, f'{name}_efficiency'):.3f}")
    for name in ("strided_sector_cost", "strided_row_kernel_cost",
                 "strided_column_kernel_cost", "strided_stock_share"):
        print(f"  {name:27s} fitted {fitted[name]:.3f} over {fitted['strided_points']} "
              f"transposed pairs; committed {getattr(tuning, name):.3f}")
    print(f"  {'column_group_read_cost':27s} fitted {fitted['column_group_read_cost']:.3f} "
          f"over {fitted['column_group_points']} grouped rows; committed "
          f"{tuning.column_group_read_cost:.3f}")
    print(f"  {'strip_overhead_s':27s} fitted {fitted['strip_overhead_s'] * 1e6:.1f} us over "
          f"{fitted['strip_points']} column strips; committed "
          f"{tuning.strip_overhead_s * 1e6:.1f} us")
    misses = 0
    for row in rows:
        fuse, est = decide(row)
        speedup = measured_speedup(row)
        mark = "ok  " if agrees(row, fuse) else "MISS"
        misses += mark == "MISS"
        print(f"{mark} {row['case']:42s} measured x{speedup:5.2f} -> "
              f"{'fuse   ' if fuse else 'decline'} ({est.describe()})")
    print(f"{len(rows) - misses} of {len(rows)} decisions agree with the measurement "
          f"(noise band {NOISE:.0%})")
    if args.plot:
        plot(rows, args.plot)
        print(f"wrote {args.plot}")
    return 0 if not misses else 1


if __name__ == "__main__":
    raise SystemExit(main())
