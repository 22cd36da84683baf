"""Ascend flavor (triton-ascend on Atlas A2/A3 NPUs).

The grid is bound to physical cores, so it is the vector-core count and each program walks
row blocks with a stride of the program count. Tiles are sized from the Unified Buffer:
every live [BLOCK_M, R0_BLOCK] tile (the [M, N] inputs and outputs, one fp32 accumulator
per column reduction, fp32 temporaries) must fit in half the UB when double buffering is on.
num_warps / num_stages do not exist there, so the fixed config carries only XBLOCK.
"""

from __future__ import annotations

import functools

import torch

from .. import config as ext_config
from .flavor import LaunchPlan, ShapeInfo, TargetFlavor, next_pow2, prev_pow2, register

#: Vector cores when neither config nor torch_npu says: torch_npu's fallback for 910B3.
DEFAULT_VECTOR_CORES = 40
#: fp32 temporaries per element the row math keeps live besides loads, stores, accumulators.
_FP32_TEMPS = 2
_TAIL_ALIGN_BYTES = 32


@functools.cache
def _runtime_vector_cores() -> int | None:
    """Vector cores reported by torch_npu, when it is importable (it needs CANN)."""
    try:
        import torch_npu  # noqa: F401
    except Exception:
        return None
    try:
        props = torch.npu.get_device_properties(torch.npu.current_device())
        for attr in ("vector_core_num", "cube_core_num"):
            value = getattr(props, attr, None)
            if value:
                return int(value) * (1 if attr == "vector_core_num" else 2)
    except Exception:
        return None
    return None


def vector_cores() -> int:
    return ext_config.ascend_vector_cores or _runtime_vector_cores() or DEFAULT_VECTOR_CORES


def ub_budget_bytes(multibuffer: bool = True) -> int:
    """Unified Buffer bytes one program may fill (halved by double buffering)."""
    return ext_config.ascend_ub_bytes // (2 if multibuffer else 1)


def tile_bytes_per_elem(shape: ShapeInfo) -> int:
    """Bytes per element of all tiles live at once in one iteration of the row loop."""
    return shape.row_elem_bytes + 4 * shape.num_columns + 4 * _FP32_TEMPS


def padded_row(shape: ShapeInfo) -> int:
    """Row length as the tile holds it: a power of two (Triton), 32-byte aligned."""
    align = max(1, _TAIL_ALIGN_BYTES // max(1, shape.elem_bytes))
    return max(next_pow2(shape.N), align)


class AscendFlavor(TargetFlavor):
    name = "ascend"
    device_types = ("npu",)
    #: The vector units have no float64 arithmetic (nor float64 atomics).
    accumulator_dtypes = (torch.float32,)

    #: Rows per block never exceed this (masks and index math stay small).
    max_block_m = 64

    def fits(self, shape: ShapeInfo) -> tuple[bool, str]:
        align = max(1, _TAIL_ALIGN_BYTES // max(1, shape.elem_bytes))
        need = align * tile_bytes_per_elem(shape)
        if need > ub_budget_bytes():
            return False, f"even a {align}-column tile needs {need} B of Unified Buffer"
        return True, ""

    def plan(self, shape: ShapeInfo, split_size: int | None) -> LaunchPlan:
        r0_block = padded_row(shape)
        per_elem = tile_bytes_per_elem(shape)
        budget = ub_budget_bytes()
        column_tiled = (r0_block * per_elem > budget
                        or shape.N > ext_config.max_persistent_n)
        if column_tiled:
            # A row does not fit: one row per block, walked in the widest column tile that
            # fits (two passes: row statistics, then dx and the column partial sums).
            r0_block = prev_pow2(budget // per_elem)
            block_m = 1
        else:
            block_m = prev_pow2(max(1, budget // (r0_block * per_elem)))
            block_m = max(1, min(block_m, self.max_block_m, next_pow2(shape.M_hint)))
        per_row = r0_block * per_elem
        programs = vector_cores()
        if split_size is not None:
            block_m = min(block_m, prev_pow2(split_size))
        blocks = -(-shape.M_hint // block_m)
        if shape.M_static:
            programs = max(1, min(programs, blocks))
        return LaunchPlan(target=self.name, programs=programs, block_m=block_m,
                          r0_block=r0_block, num_warps=1, num_stages=1, row_loop="strided",
                          extra=(("ub_bytes", per_row * block_m),),
                          column_tiled=column_tiled)

    def launch_options(self, plan: LaunchPlan) -> dict[str, int]:
        return {}  # triton-ascend ignores or rejects num_warps / num_stages

    def finalize_block(self, N: int, programs: int, partials: int, warps: int = 0) -> None:
        """The final step stays the ATen reduce on Ascend: the generated one is not yet
        through the triton-ascend lowering check."""
        return None

    def profitable(self, shape: ShapeInfo, plan: LaunchPlan) -> tuple[bool, str]:
        blocks = -(-shape.M_hint // plan.block_m)
        if blocks < 2 * plan.programs:
            return False, f"{blocks} row blocks for {plan.programs} vector cores"
        return True, ""

    def loop_header(self, plan: LaunchPlan) -> list[str]:
        return [f"row_step = {plan.programs} * XBLOCK"]

    def loop_statement(self, plan: LaunchPlan) -> str:
        return "for xoffset in tl.range(tl.program_id(0) * XBLOCK, xnumel, row_step):"


register(AscendFlavor())
