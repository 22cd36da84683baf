"""Ascend roofline model for the bench shapes: bytes moved, roofline time at a given HBM
bandwidth and core count, and the Unified Buffer footprint of the tiles the Ascend flavor
chooses. No NPU needed: this is the plan the flavor would make, priced at the roofline.

    python bench/ascend_model.py [--hbm-tbps 1.6] [--cores 40] [--ub-kib 192]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from inductor_ext.plan import AscendTuning, DeviceInfo, PlanOptions, ShapeInfo  # noqa: E402
from inductor_ext.plan import ascend as ascend_plan  # noqa: E402

# The baseline's shapes (../shared/reference/baseline_h100.csv).
SHAPES = [(32768, 4096, "bf16"), (65536, 1024, "bf16"), (16384, 8192, "bf16"),
          (8192, 16384, "bf16"), (576000, 384, "fp32"), (32768, 768, "fp32"),
          (4096, 4096, "bf16"), (262144, 128, "bf16")]
ES = {"bf16": 2, "fp16": 2, "fp32": 4}


def min_bytes(op: str, M: int, N: int, es: int) -> int:
    if op == "rms":
        return 3 * M * N * es + 4 * M + 2 * N * es
    return 3 * M * N * es + 8 * M + 4 * N * es


def shape_info(op: str, M: int, N: int, es: int) -> ShapeInfo:
    columns = 1 if op == "rms" else 2
    total = min_bytes(op, M, N, es)
    return ShapeInfo(M_hint=M, M_static=True, N=N, num_columns=columns, elem_bytes=es,
                     shared_bytes=2 * M * N * es, total_bytes=total,
                     unfused_bytes=total + 2 * M * N * es, row_elem_bytes=3 * es,
                     device=torch.device("cpu"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hbm-tbps", type=float, default=1.6)
    ap.add_argument("--cores", type=int, default=40)
    ap.add_argument("--ub-kib", type=int, default=192)
    args = ap.parse_args()
    tuning = AscendTuning()
    options = PlanOptions(ascend_vector_cores=args.cores, ascend_ub_bytes=args.ub_kib * 1024)
    device = DeviceInfo(type="npu", cores=args.cores, ub_bytes=args.ub_kib * 1024)
    print(f"HBM {args.hbm_tbps} TB/s, {args.cores} vector cores, UB {args.ub_kib} KiB "
          "(half usable with double buffering)")
    print(f"{'op':4s} {'M x N':>13s} {'dtype':5s} {'BLOCK_M':>7s} {'UB B':>7s} "
          f"{'fused MB':>9s} {'unfused MB':>10s} {'roof us':>8s} {'unfused roof':>12s}  note")
    for M, N, dt in SHAPES:
        for op in ("rms", "ln"):
            es = ES[dt]
            shape = shape_info(op, M, N, es)
            ok, why = ascend_plan.fits(shape, device, tuning, options)
            unfused_us = shape.unfused_bytes / (args.hbm_tbps * 1e12) * 1e6
            if not ok:
                row_bytes = (ascend_plan.padded_row(shape, tuning)
                             * ascend_plan.tile_bytes_per_elem(shape, tuning))
                print(f"{op:4s} {M:>7d}x{N:<5d} {dt:5s} {'-':>7s} "
                      f"{row_bytes:>7d} "
                      f"{'-':>9s} {shape.unfused_bytes / 1e6:>10.1f} {'-':>8s} "
                      f"{unfused_us:>12.1f}  declined: {why}")
                continue
            plan = ascend_plan.plan(shape, device, tuning, options)
            ws = plan.programs * shape.num_columns * N * 4
            fused = shape.total_bytes + 2 * ws
            roof_us = fused / (args.hbm_tbps * 1e12) * 1e6
            print(f"{op:4s} {M:>7d}x{N:<5d} {dt:5s} {plan.block_m:>7d} "
                  f"{dict(plan.extra)['ub_bytes']:>7d} {fused / 1e6:>9.1f} "
                  f"{shape.unfused_bytes / 1e6:>10.1f} {roof_us:>8.1f} {unfused_us:>12.1f}")


if __name__ == "__main__":
    main()
