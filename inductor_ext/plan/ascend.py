"""Ascend planning (triton-ascend on Atlas A2/A3 NPUs).

The grid is bound to physical cores, so it is the vector-core count and each program walks
row blocks with a stride of the program count. Tiles are sized from the Unified Buffer:
every live [BLOCK_M, R0_BLOCK] tile (the [M, N] inputs and outputs, one fp32 accumulator
per column reduction, fp32 temporaries) must fit in half the UB when multibuffer is on.
"""

from __future__ import annotations

from .device import DEFAULT_VECTOR_CORES, DeviceInfo
from .options import PlanOptions
from .tuning import AscendTuning
from .types import LaunchPlan, ShapeInfo, next_pow2, prev_pow2


def vector_cores(device: DeviceInfo, options: PlanOptions) -> int:
    """The option, else what the NPU reports, else torch_npu's 910B3 fallback (the flavor
    can be forced onto other devices, whose core count says nothing about an NPU)."""
    if options.ascend_vector_cores:
        return options.ascend_vector_cores
    return device.cores if device.type == "npu" else DEFAULT_VECTOR_CORES


def ub_budget_bytes(tuning: AscendTuning, options: PlanOptions) -> int:
    """Unified Buffer bytes one program may fill (halved by multibuffer)."""
    return options.ascend_ub_bytes // (2 if tuning.multibuffer else 1)


def tile_bytes_per_elem(shape: ShapeInfo, tuning: AscendTuning) -> int:
    """Bytes per element of all tiles live at once in one iteration of the row loop."""
    return shape.row_elem_bytes + 4 * shape.num_columns + 4 * tuning.fp32_temps


def padded_row(shape: ShapeInfo, tuning: AscendTuning) -> int:
    """Row length as the tile holds it: a power of two (Triton), 32-byte aligned."""
    align = max(1, tuning.tail_align_bytes // max(1, shape.elem_bytes))
    return max(next_pow2(shape.N), align)


def fits(shape: ShapeInfo, device: DeviceInfo, tuning: AscendTuning,
         options: PlanOptions) -> tuple[bool, str]:
    align = max(1, tuning.tail_align_bytes // max(1, shape.elem_bytes))
    need = align * tile_bytes_per_elem(shape, tuning)
    if need > ub_budget_bytes(tuning, options):
        return False, f"even a {align}-column tile needs {need} B of Unified Buffer"
    return True, ""


def plan(shape: ShapeInfo, device: DeviceInfo, tuning: AscendTuning,
         options: PlanOptions) -> LaunchPlan:
    r0_block = padded_row(shape, tuning)
    per_elem = tile_bytes_per_elem(shape, tuning)
    budget = ub_budget_bytes(tuning, options)
    column_tiled = r0_block * per_elem > budget or shape.N > options.max_persistent_n
    if column_tiled:
        # A row does not fit: one row per block, walked in the widest column tile that
        # fits (two passes: row statistics, then dx and the column partial sums).
        r0_block = prev_pow2(budget // per_elem)
        block_m = 1
    else:
        block_m = prev_pow2(max(1, budget // (r0_block * per_elem)))
        block_m = max(1, min(block_m, tuning.max_block_m, next_pow2(shape.M_hint)))
    per_row = r0_block * per_elem
    programs = vector_cores(device, options)
    if options.split_size is not None:
        block_m = min(block_m, prev_pow2(options.split_size))
    blocks = -(-shape.M_hint // block_m)
    if shape.M_static:
        programs = max(1, min(programs, blocks))
    return LaunchPlan(target="ascend", programs=programs, block_m=block_m,
                      r0_block=r0_block, num_warps=1, num_stages=1, row_loop="strided",
                      extra=(("ub_bytes", per_row * block_m),),
                      column_tiled=column_tiled, accumulator=shape.accumulator)


def profitable(shape: ShapeInfo, plan_: LaunchPlan, device: DeviceInfo,
               tuning: AscendTuning, options: PlanOptions) -> tuple[bool, str]:
    blocks = -(-shape.M_hint // plan_.block_m)
    if blocks < 2 * plan_.programs:
        return False, f"{blocks} row blocks for {plan_.programs} vector cores"
    return True, ""
