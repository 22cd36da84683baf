"""Ascend flavor (triton-ascend on Atlas A2/A3 NPUs).

The grid is bound to physical cores, so it is the vector-core count and each program walks
row blocks with a stride of the program count. Tiles are sized from the Unified Buffer:
every live [BLOCK_M, R0_BLOCK] tile (the [M, N] inputs and outputs, one fp32 accumulator
per column reduction, fp32 temporaries) must fit in half the UB when double buffering is on.
num_warps / num_stages do not exist there, so the fixed config carries only XBLOCK.
"""

from __future__ import annotations

from typing import Any

import torch

from .. import compat
from .. import config as ext_config
from ..backends import npu, npu_ub
from .flavor import LaunchPlan, ShapeInfo, TargetFlavor, next_pow2, prev_pow2, register

#: fp32 temporaries per element the row math keeps live besides loads, stores, accumulators.
_FP32_TEMPS = 2
_TAIL_ALIGN_BYTES = 32


def vector_cores() -> int:
    """The grid: `config.ascend_vector_cores`, else torch_npu's count (NPU_DEVICE_LIMIT
    applied), else 40 (910B3)."""
    return npu.soc_facts().vector_cores


def ub_budget_bytes(multibuffer: bool = True) -> int:
    """Unified Buffer bytes one program may fill (halved by double buffering)."""
    return npu.soc_facts().ub_bytes // (2 if multibuffer else 1)


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

    def claims(self, device: torch.device) -> bool:
        """NPU devices, and any device whose kernels torch_npu's backend generates (the
        emulation registers it for CPU tensors)."""
        return super().claims(device) or npu.serves(device)

    def fits(self, shape: ShapeInfo) -> tuple[bool, str]:
        if npu.serves(shape.device):
            return _torch_npu_fits(shape)
        align = max(1, _TAIL_ALIGN_BYTES // max(1, shape.elem_bytes))
        need = align * tile_bytes_per_elem(shape)
        if need > ub_budget_bytes():
            return False, f"even a {align}-column tile needs {need} B of Unified Buffer"
        return True, ""

    def plan(self, shape: ShapeInfo, split_size: int | None) -> LaunchPlan:
        if npu.serves(shape.device):
            return _torch_npu_plan(shape, split_size)  # built on torch_npu's kernel class
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


# ----------------------------------------------------------------------------------------
# Kernels built on torch_npu's NPUIndexTritonKernel (inductor_ext.backends.npu_kernel)
# ----------------------------------------------------------------------------------------

#: Column tile (R1BLOCK_SUB) of rows too long for a persistent tile: at most this.
MAX_COLUMN_TILE = 8192
#: Launch configs torch_npu's autotuner may time, at most.
MAX_NPU_CONFIGS = 3


def _npu_layout(shape: ShapeInfo, block_m: int, cols: int, looped: bool,
                multibuffer: bool) -> npu_ub.Layout:
    return npu_ub.Layout(block_m=block_m, cols=cols, row_elem_bytes=shape.row_elem_bytes,
                         partials=shape.num_columns, looped=looped, multibuffer=multibuffer,
                         soc="950" if npu.soc_facts().ascend950 else "910B3")


def _fitting_block_m(shape: ShapeInfo, cols: int, looped: bool, multibuffer: bool,
                     ub: int) -> int:
    """Largest power-of-two rows per block whose calibrated UB estimate fits (0: none)."""
    block_m = AscendFlavor.max_block_m
    while block_m >= 1:
        if npu_ub.fits(_npu_layout(shape, block_m, cols, looped, multibuffer), ub):
            return block_m
        block_m //= 2
    return 0


def _torch_npu_fits(shape: ShapeInfo) -> tuple[bool, str]:
    """Some one-row column tile fits the UB (the looped path takes any N)."""
    ub = npu.soc_facts().ub_bytes
    cols = npu_ub.MIN_COLUMN_TILE
    if _fitting_block_m(shape, cols, True, False, ub):
        return True, ""
    need = npu_ub.estimate(_npu_layout(shape, 1, cols, True, False))
    return False, f"even a 1x{cols} tile needs {need} B of Unified Buffer (UB {ub} B)"


def _torch_npu_plan(shape: ShapeInfo, split_size: int | None) -> LaunchPlan:
    """Programs = vector cores (a fixed grid; each owns a contiguous run of rows, walked in
    blocks of `block_m` rows); whole rows (persistent) when a block of full rows fits with
    multibuffer, else the widest column tile that does; configs for torch_npu's autotuner:
    the largest fitting block with multibuffer and half of it, and the largest without.
    "Fitting" is our UB estimate calibrated against bishengir's plans (npu_ub)."""
    facts = npu.soc_facts()
    ub = facts.ub_bytes
    N = shape.N
    looped = (N > ext_config.max_persistent_n
              or not _fitting_block_m(shape, N, False, True, ub))
    cols = N
    if looped:
        cols = min(MAX_COLUMN_TILE, max(prev_pow2(N), npu_ub.MIN_COLUMN_TILE))
        while cols > npu_ub.MIN_COLUMN_TILE and not _fitting_block_m(shape, cols, True,
                                                                      True, ub):
            cols //= 2
    configs: list[tuple[tuple[str, Any], ...]] = []
    for multibuffer, halves in ((True, (1, 2)), (False, (1,))):
        best = _fitting_block_m(shape, cols, looped, multibuffer, ub)
        if best and split_size is not None:
            best = min(best, prev_pow2(split_size))
        if best:
            best = min(best, next_pow2(shape.M_hint))
        for block_m in (best // h for h in halves):
            if block_m >= 1:
                configs.append(_npu_config(block_m, cols, looped, multibuffer))
    if not configs:
        raise ValueError(f"no NPU tile of {cols} columns fits {ub} B of UB")
    configs = list(dict.fromkeys(configs))[:MAX_NPU_CONFIGS]
    if compat.deterministic_mode():
        configs = configs[:1]  # configs differ in summation order
    first = dict(configs[0])
    block_m = first["block_m"]
    programs = facts.vector_cores
    if shape.M_static:
        programs = max(1, min(programs, -(-shape.M_hint // block_m)))
    estimate = npu_ub.estimate(_npu_layout(shape, block_m, cols, looped,
                                           first["multibuffer"]))
    return LaunchPlan(target=AscendFlavor.name, programs=programs, block_m=block_m,
                      r0_block=cols, num_warps=1, num_stages=1, row_loop="contiguous",
                      extra=(("ub_bytes", estimate), ("ub_budget", ub),
                             ("row_elem_bytes", shape.row_elem_bytes),
                             ("backend", "torch_npu")),
                      column_tiled=looped, configs=tuple(configs))


def _npu_config(block_m: int, cols: int, looped: bool, multibuffer: bool
                ) -> tuple[tuple[str, Any], ...]:
    """One launch config in axis-neutral names (hashable); the kernel writes it in its own
    axis names (`block_m` -> X0BLOCK_SUB, `cols` -> R1BLOCK_SUB)."""
    cfg: dict[str, Any] = {"block_m": block_m, "multibuffer": multibuffer}
    if looped:
        cfg["cols"] = cols
    return tuple(sorted(cfg.items()))


register(AscendFlavor())
