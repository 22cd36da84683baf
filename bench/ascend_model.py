"""Ascend roofline model for the bench shapes: the plan of the fused kernel built on
torch_npu's NPUIndexTritonKernel (rows per block, column tile, multibuffer), its Unified
Buffer footprint, the bytes moved and the roofline time at a given HBM bandwidth and core
count. No NPU needed: this is the plan the Ascend flavor would make, priced at the roofline.

`model` columns: the plugin's Ascend cost model (inductor_ext/targets/ascend/cost.py) on
the same plan and HBM bandwidth: the fused kernel + its final step vs torch_npu's unfused
kernels, in us, and its decision (what `profitable` returns with default options).

UB columns: `est` is our estimate, scaled by the calibration table
(inductor_ext/targets/ascend/ub_calibration.json, from bishengir's plans); `planned` is
bishengir-compile's own plan of the generated kernel (the high-water of its UB offsets),
with `--plan-ub`, which needs the venv of tests/ascend/setup_npu_venv.sh: each (op, N,
dtype) is then compiled through the emulated torch_npu backend (M = 256 rows: the tile
does not depend on M once M exceeds 64 rows), lowered with triton-ascend and planned.

    python bench/ascend_model.py [--hbm-tbps 1.6] [--soc 910B3] [--cores N] [--plan-ub]

`--soc` is any SoC of tests/support/npu_socs.py whose cores are known (Ascend910B1 ...
Ascend950, or 910B1 / 910B3 / 950): its vector cores (`--cores` overrides them) and the UB
torch_npu's config reports for it, which is what the plugin plans with.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
import inductor_ext  # noqa: E402
from inductor_ext.plan import DeviceInfo, LaunchPlan, PlanOptions, ShapeInfo  # noqa: E402
from inductor_ext.targets.ascend import cost as ascend_cost  # noqa: E402
from inductor_ext.targets.ascend import plan as ascend_plan  # noqa: E402
from inductor_ext.targets.ascend import ub as npu_ub  # noqa: E402
from inductor_ext.targets.ascend.tuning import AscendTuning  # noqa: E402
from tests.support import npu_socs  # noqa: E402

# The baseline's shapes (../shared/reference/baseline_h100.csv).
SHAPES = [(32768, 4096, "bf16"), (65536, 1024, "bf16"), (16384, 8192, "bf16"),
          (8192, 16384, "bf16"), (576000, 384, "fp32"), (32768, 768, "fp32"),
          (4096, 4096, "bf16"), (262144, 128, "bf16")]
ES = {"bf16": 2, "fp16": 2, "fp32": 4}
#: Rows compiled for --plan-ub (tiles stop depending on M past 64 rows).
PLAN_ROWS = 256


def shape_info(op: str, M: int, N: int, es: int) -> ShapeInfo:
    """What the hook describes for the norm backward (tests/ascend/test_npu_widths.py
    compares the two): the fused kernel reads x, dy, the weight and the saved fp32 row
    statistics (rstd; LayerNorm's mean too), writes dx, a fp32 row sum per row reduction
    of the row side and the fp32 [N] column sums; unfused, the column kernel reads x, dy
    and rstd again (LayerNorm's dw and db in one kernel)."""
    columns = 1 if op == "rms" else 2
    row_stats = 2 if op == "rms" else 3  # fp32 [M] buffers: saved statistics, row sums
    total = 3 * M * N * es + 4 * row_stats * M + N * es + 4 * columns * N
    shared = 2 * M * N * es + 4 * M
    # x and dy read, dx written: the [M, N] tiles the row loop holds.
    return ShapeInfo(M_hint=M, M_static=True, N=N, num_columns=columns, elem_bytes=es,
                     shared_bytes=shared, total_bytes=total, unfused_bytes=total + shared,
                     row_elem_bytes=3 * es, device=torch.device("cpu"))


def fused_roofline_bytes(shape: ShapeInfo, plan: LaunchPlan, tuning: AscendTuning) -> float:
    """Bytes the fused kernel and its final step move: the group's once, the workspace
    written and read back; a looped column-tiled row also walks the row a second time and
    adds each row block's partials into its zeroed workspace row, bytes the roofline
    prices at the share of HBM the model assumes for them (`looped_reread_share`: both
    were touched moments before)."""
    workspace = plan.workspace_bytes(shape)
    fused = shape.total_bytes + 2 * workspace
    if plan.looped_column_tiles:
        blocks = -(-max(1, shape.M_hint) // plan.block_m)
        adds = 2 * blocks * shape.num_columns * shape.N * shape.accumulator_bytes
        fused += workspace + tuning.looped_reread_share * (shape.shared_bytes + adds)
    return fused


def planned_ub(soc: str, cases: list[tuple[str, int, str]]) -> dict[tuple, int | str]:
    """(op, N, dtype) -> bishengir's planned UB bytes of the plan's first config (or why
    not), through the emulated torch_npu backend; needs the npu venv."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    sys.path.insert(0, os.path.join(ROOT, "tests", "ascend"))
    import concurrent.futures

    import check_npu  # tests/ascend: capture, lower, plan

    out: dict[tuple, int | str] = {}
    workdir = tempfile.mkdtemp(prefix="ascend_model_")
    with concurrent.futures.ThreadPoolExecutor(2) as pool, \
            check_npu.emu.npu_emulation(soc=soc), \
            torch._inductor.config.patch(inductor_ext.options()), \
            inductor_ext.config.patch(always_fuse=True):
        for op, N, dt in cases:
            torch._dynamo.reset()
            records: list = []
            with check_npu.capture(records):
                check_npu.run_norm(op, dt, N, PLAN_ROWS)
            if not records:
                out[(op, N, dt)] = "not fused"
                continue
            kernel = check_npu.make_kernel(f"{op}-{N}", soc, records[0])
            kernel.configs = kernel.configs[:1]
            check_npu.lower_and_plan(kernel, pool, tempfile.mkdtemp(dir=workdir))
            kernel.resolve()
            result = kernel.plans[0]
            out[(op, N, dt)] = result["high_water"] if kernel.planned_ok(0) else (
                f"overflow {result['overflow_bits'] // 8}" if result["overflow_bits"]
                else result["error"] or f"{result['high_water']} B > UB")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=f"{__doc__.rstrip()}\n\nCPU only: no GPU or NPU needed (--plan-ub "
        "needs the npu venv of tests/ascend/setup_npu_venv.sh).",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hbm-tbps", type=float, default=1.6,
                    help="HBM bandwidth the roofline and the cost model price bytes at, in "
                    "TB/s (default 1.6)")
    ap.add_argument("--soc", default="910B3",
                    choices=sorted({*(s.name for s in npu_socs.known()), *npu_socs.ALIASES}),
                    help="the SoC whose vector cores and UB the plans are made for (default "
                    "910B3)")
    ap.add_argument("--cores", type=int, help="vector cores (default: the SoC's)")
    ap.add_argument("--plan-ub", action="store_true",
                    help="also bishengir's plan of each kernel (npu venv only)")
    args = ap.parse_args(argv)
    if args.plan_ub:
        from tests.support.npu_emulation import emulation_unavailable_reason

        os.environ.setdefault("TRITON_INTERPRET", "1")  # as planned_ub sets it
        reason = emulation_unavailable_reason()
        if reason:
            print(f"ascend_model.py --plan-ub: {reason}", file=sys.stderr)
            return 2
    soc = npu_socs.get(args.soc)
    ub = soc.ub_bytes
    cores = args.cores or soc.vector_cores
    assert cores is not None  # known() SoCs only
    planned: dict[tuple, int | str] = {}
    if args.plan_ub:
        planned = planned_ub(args.soc, sorted({(op, N, dt) for _, N, dt in SHAPES
                                               for op in ("rms", "ln")}))
    # The fused kernel on torch_npu's class, on this SoC (what the hook plans there).
    device = DeviceInfo(type="npu", name=soc.name, cores=cores, ub_bytes=ub,
                        npu_backend="torch_npu", ascend950=soc.ascend950,
                        dram_bytes_per_s=args.hbm_tbps * 1e12)
    tuning, options = AscendTuning(), PlanOptions()
    print(f"{soc.name}: HBM {args.hbm_tbps} TB/s, {cores} vector cores, UB {ub} B; "
          f"UB estimates calibrated to bishengir ({len(npu_ub.calibration())} families)")
    print(f"{'op':4s} {'M x N':>13s} {'dtype':5s} {'kernel':9s} {'BLOCK_M':>7s} "
          f"{'cols':>5s} {'mb':>2s} {'est UB':>7s} {'planned':>8s} {'fused MB':>9s} "
          f"{'unfused MB':>10s} {'roof us':>8s} {'unfused':>8s} "
          f"{'model us: fused + final / unfused':>33s} {'model':>7s}")
    for M, N, dt in SHAPES:
        for op in ("rms", "ln"):
            es = ES[dt]
            shape = shape_info(op, M, N, es)
            unfused_us = shape.unfused_bytes / (args.hbm_tbps * 1e12) * 1e6
            ok, why = ascend_plan.fits(shape, device, tuning, options)
            if not ok:
                print(f"{op:4s} {M:>7d}x{N:<5d} {dt:5s} declined: {why}")
                continue
            plan = ascend_plan.plan(shape, device, tuning, options)
            first = dict(plan.configs[0])
            fused = fused_roofline_bytes(shape, plan, tuning)
            roof_us = fused / (args.hbm_tbps * 1e12) * 1e6
            # The cost model's three times and decision (targets/ascend/cost.py).
            est = ascend_cost.estimate(shape, plan, device,
                                       ascend_plan.vector_cores(device, options), tuning,
                                       options)
            model = (f"{est.fused_s * 1e6:>9.1f} + {est.final_s * 1e6:>5.1f} / "
                     f"{est.unfused_s * 1e6:>9.1f}")
            kind = "tiled" if plan.column_tiled else "persist"
            top = planned.get((op, N, dt), "-")
            print(f"{op:4s} {M:>7d}x{N:<5d} {dt:5s} {kind:9s} {plan.block_m:>7d} "
                  f"{plan.r0_block:>5d} {int(first['multibuffer']):>2d} "
                  f"{dict(plan.extra)['ub_bytes']:>7d} {top!s:>8s} "
                  f"{fused / 1e6:>9.1f} {shape.unfused_bytes / 1e6:>10.1f} "
                  f"{roof_us:>8.1f} {unfused_us:>8.1f} {model:>33s} "
                  f"{'fuse' if est.fuse else 'decline':>7s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
