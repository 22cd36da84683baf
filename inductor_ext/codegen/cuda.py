"""CUDA flavor (the default): contiguous row chunks per program, several programs per SM."""

from __future__ import annotations

import functools

import torch

from .. import compat
from .flavor import LaunchPlan, ShapeInfo, TargetFlavor, next_pow2, prev_pow2, register


@functools.cache
def _sm_count(device: torch.device) -> int:
    if device.type == "cpu":
        return 2  # the interpreter runs programs one by one: few programs, fast tests
    try:
        return int(compat.device_properties(device).multi_processor_count or 1)
    except Exception:
        return 1


@functools.cache
def _l2_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        try:
            return int(torch.cuda.get_device_properties(device).L2_cache_size)
        except Exception:
            pass
    return 40 * 1024 * 1024


class CudaFlavor(TargetFlavor):
    name = "cuda"
    device_types = ("cuda", "xpu", "cpu")

    #: Elements of one [BLOCK_M, R0_BLOCK] tile: enough loads in flight per program
    #: without spilling the fp32 accumulators (one tile per column reduction stays live).
    tile_elems = 4096
    #: Resident programs per SM the grid aims for (the workspace has one row per program).
    programs_per_sm = 4
    #: Tile elements per warp when choosing num_warps.
    elems_per_warp = 512

    def plan(self, shape: ShapeInfo, split_size: int | None) -> LaunchPlan:
        r0_block = next_pow2(shape.N)
        block_m = max(1, min(64, self.tile_elems // r0_block))
        block_m = min(block_m, next_pow2(shape.M_hint))
        if split_size is not None:
            block_m = min(block_m, prev_pow2(split_size))
        tile = block_m * r0_block
        num_warps = max(2, min(16, tile // self.elems_per_warp))
        max_programs = _sm_count(shape.device) * self.programs_per_sm
        if split_size is not None:
            rows = max(block_m, -(-split_size // block_m) * block_m)
            programs = max(1, -(-shape.M_hint // rows))
        else:
            blocks = -(-shape.M_hint // block_m)
            programs = max(1, min(max_programs, blocks))
            if not shape.M_static:
                programs = max_programs
        return LaunchPlan(target=self.name, programs=programs, block_m=block_m,
                          r0_block=r0_block, num_warps=num_warps, num_stages=1,
                          row_loop="contiguous")

    def profitable(self, shape: ShapeInfo, plan: LaunchPlan) -> tuple[bool, str]:
        rows_per_program = plan.rows_per_program(shape.M_hint)
        if rows_per_program < 4 * plan.block_m and plan.block_m < 64:
            return False, f"only {rows_per_program} rows per program"
        if shape.shared_bytes < _l2_bytes(shape.device) // 2:
            return False, (f"{shape.shared_bytes} shared bytes fit in L2 "
                           f"({_l2_bytes(shape.device)}): the second pass hits cache")
        return True, ""

    def loop_header(self, plan: LaunchPlan) -> list[str]:
        P = plan.programs
        return [
            "row_blocks = (xnumel + XBLOCK - 1) // XBLOCK",
            f"rows_per_program = ((row_blocks + {P - 1}) // {P}) * XBLOCK",
            "row_start = tl.program_id(0) * rows_per_program",
            "row_end = tl.minimum(row_start + rows_per_program, xnumel)",
        ]

    def loop_statement(self, plan: LaunchPlan) -> str:
        return "for xoffset in tl.range(row_start, row_end, XBLOCK):"


register(CudaFlavor())
