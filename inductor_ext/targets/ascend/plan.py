"""Ascend planning (triton-ascend on Atlas A2/A3 NPUs).

The grid is bound to physical cores, so it is the vector-core count and each program walks
row blocks with a stride of the program count. Tiles are sized from the Unified Buffer:
every live [BLOCK_M, R0_BLOCK] tile (the [M, N] inputs and outputs, one fp32 accumulator
per column reduction, fp32 temporaries) must fit in half the UB when multibuffer is on.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...plan.device import DeviceInfo
from ...plan.options import PlanOptions
from ...plan.types import LaunchPlan, ShapeInfo, next_pow2, prev_pow2
from . import cost
from . import ub as ub_model
from .npu import DEFAULT_UB_BYTES, DEFAULT_VECTOR_CORES, unsupported_soc
from .tuning import AscendTuning


def vector_cores(device: DeviceInfo, options: PlanOptions) -> int:
    """The option, else what the NPU (or torch_npu) reports, else torch_npu's 910B3
    fallback (the flavor can be forced onto other devices, whose core count says nothing
    about an NPU)."""
    if options.ascend_vector_cores:
        return options.ascend_vector_cores
    return device.cores if device.type == "npu" or device.npu_backend else \
        DEFAULT_VECTOR_CORES


def ub_bytes(device: DeviceInfo, tuning: AscendTuning, options: PlanOptions) -> int:
    """Unified Buffer bytes per core: the option, else the device's (by SoC), capped on
    Ascend950 at what its compiler lets a kernel use (torch_npu reports the whole UB)."""
    if options.ascend_ub_bytes:
        return options.ascend_ub_bytes
    ub = device.ub_bytes or DEFAULT_UB_BYTES
    return min(ub, tuning.ascend950_kernel_ub_bytes) if device.ascend950 else ub


def ub_budget_bytes(device: DeviceInfo, tuning: AscendTuning, options: PlanOptions) -> int:
    """Unified Buffer bytes one program may fill (halved by multibuffer)."""
    return ub_bytes(device, tuning, options) // (2 if tuning.multibuffer else 1)


def tile_bytes_per_elem(shape: ShapeInfo, tuning: AscendTuning) -> int:
    """Bytes per element of all tiles live at once in one iteration of the row loop."""
    return shape.row_elem_bytes + 4 * shape.num_columns + 4 * tuning.fp32_temps


def padded_row(shape: ShapeInfo, tuning: AscendTuning) -> int:
    """Row length as the tile holds it: a power of two (Triton), 32-byte aligned."""
    align = max(1, tuning.tail_align_bytes // max(1, shape.elem_bytes))
    return max(next_pow2(shape.N), align)


def device_support(device: DeviceInfo) -> str:
    """Why the fused kernel cannot be compiled for this SoC ("" where it can): torch_npu
    runs on SoCs that triton-ascend does not target (`npu.unsupported_soc`)."""
    if not unsupported_soc(device.name):
        return ""
    return (f"SoC {device.name} is not a triton-ascend target (it compiles for Atlas A2/A3 "
            "and Ascend950); torch_npu's own kernels run it")


def fits(shape: ShapeInfo, device: DeviceInfo, tuning: AscendTuning,
         options: PlanOptions) -> tuple[bool, str]:
    if device.npu_backend:
        return _torch_npu_fits(shape, device, tuning, options)
    align = max(1, tuning.tail_align_bytes // max(1, shape.elem_bytes))
    need = align * tile_bytes_per_elem(shape, tuning)
    if need > ub_budget_bytes(device, tuning, options):
        return False, f"even a {align}-column tile needs {need} B of Unified Buffer"
    return True, ""


def plan(shape: ShapeInfo, device: DeviceInfo, tuning: AscendTuning,
         options: PlanOptions) -> LaunchPlan:
    if device.npu_backend:
        return _torch_npu_plan(shape, device, tuning, options)
    r0_block = padded_row(shape, tuning)
    per_elem = tile_bytes_per_elem(shape, tuning)
    budget = ub_budget_bytes(device, tuning, options)
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
    """Fuse iff the cost model (cost.py) predicts the fused kernel and its final step
    faster than torch_npu's unfused kernels; the detail gives the three times either way."""
    est = cost.estimate(shape, plan_, device, vector_cores(device, options), tuning, options)
    assumed = f"; SoC facts assumed: {'; '.join(device.assumed)}" if device.assumed else ""
    return est.fuse, est.describe() + assumed


# ----------------------------------------------------------------------------------------
# Kernels built on torch_npu's NPUIndexTritonKernel (inductor_ext.targets.ascend.kernel)
# ----------------------------------------------------------------------------------------


def _npu_layout(shape: ShapeInfo, device: DeviceInfo, block_m: int, cols: int, looped: bool,
                multibuffer: bool) -> ub_model.Layout:
    return ub_model.Layout(block_m=block_m, cols=cols, row_elem_bytes=shape.row_elem_bytes,
                         partials=shape.num_columns, looped=looped, multibuffer=multibuffer,
                         ub_class=ub_model.ub_class(device.ascend950))


def _fitting_block_m(shape: ShapeInfo, device: DeviceInfo, tuning: AscendTuning, cols: int,
                     looped: bool, multibuffer: bool, ub: int) -> int:
    """Largest power-of-two rows per block whose calibrated UB estimate fits (0: none)."""
    block_m = tuning.max_block_m
    while block_m >= 1:
        layout = _npu_layout(shape, device, block_m, cols, looped, multibuffer)
        if ub_model.fits(layout, ub):
            return block_m
        block_m //= 2
    return 0


def _torch_npu_fits(shape: ShapeInfo, device: DeviceInfo, tuning: AscendTuning,
                    options: PlanOptions) -> tuple[bool, str]:
    """Some one-row column tile fits the UB (the looped path takes any N)."""
    ub = ub_bytes(device, tuning, options)
    cols = ub_model.MIN_COLUMN_TILE
    if _fitting_block_m(shape, device, tuning, cols, True, False, ub):
        return True, ""
    need = ub_model.estimate(_npu_layout(shape, device, 1, cols, True, False))
    return False, f"even a 1x{cols} tile needs {need} B of Unified Buffer (UB {ub} B)"


def _torch_npu_launch(shape: ShapeInfo, device: DeviceInfo, tuning: AscendTuning,
                      options: PlanOptions, cols: int, looped: bool, ub: int
                      ) -> LaunchPlan | None:
    """One candidate: rows of `cols` columns (the whole row unless `looped`), with the
    launch configs torch_npu's autotuner times (the largest fitting block with multibuffer
    and half of it, the largest without); None when no block fits the UB either way."""
    multibuffers = (True, False) if tuning.multibuffer else (False,)
    configs: list[tuple[tuple[str, Any], ...]] = []
    for multibuffer in multibuffers:
        best = _fitting_block_m(shape, device, tuning, cols, looped, multibuffer, ub)
        if best and options.split_size is not None:
            best = min(best, prev_pow2(options.split_size))
        if best:
            best = min(best, next_pow2(shape.M_hint))
        for block_m in (best, best // 2) if multibuffer else (best,):
            if block_m >= 1:
                configs.append(_npu_config(block_m, cols, looped, multibuffer))
    if not configs:
        return None
    configs = list(dict.fromkeys(configs))[:tuning.npu_max_configs]
    first = dict(configs[0])
    block_m = first["block_m"]
    programs = vector_cores(device, options)
    if shape.M_static:
        programs = max(1, min(programs, -(-shape.M_hint // block_m)))
    estimate = ub_model.estimate(_npu_layout(shape, device, block_m, cols, looped,
                                             first["multibuffer"]))
    return LaunchPlan(target="ascend", programs=programs, block_m=block_m, r0_block=cols,
                      num_warps=1, num_stages=1, row_loop="contiguous",
                      extra=(("ub_bytes", estimate), ("ub_budget", ub),
                             ("row_elem_bytes", shape.row_elem_bytes),
                             ("backend", "torch_npu")),
                      column_tiled=looped, configs=tuple(configs),
                      accumulator=shape.accumulator)


def _looped_tile(shape: ShapeInfo, device: DeviceInfo, tuning: AscendTuning, ub: int) -> int:
    """The widest column tile of a looped row: a power of two up to the row and the
    `npu_max_column_tile` knob, narrowed until a one-row block fits with the first
    multibuffer setting the configs try (with it when the knob allows, else without)."""
    cols = min(tuning.npu_max_column_tile,
               max(prev_pow2(shape.N), ub_model.MIN_COLUMN_TILE))
    while cols > ub_model.MIN_COLUMN_TILE and not _fitting_block_m(
            shape, device, tuning, cols, True, tuning.multibuffer, ub):
        cols //= 2
    return cols


def torch_npu_candidates(shape: ShapeInfo, device: DeviceInfo, tuning: AscendTuning,
                         options: PlanOptions) -> list[LaunchPlan]:
    """Every plan the kernel on torch_npu's class can run this group with, where it fits
    the UB: whole rows (persistent; with multibuffer where a block fits with it, else
    without) when N is at most `max_persistent_n`, and looped column tiles (any N) of
    each power-of-two width from the widest that fits down to `MIN_COLUMN_TILE` (a
    narrower tile holds more rows, so fewer row blocks add into the workspace); widest
    first."""
    ub = ub_bytes(device, tuning, options)
    candidates = []
    if shape.N <= options.max_persistent_n:
        candidates.append(_torch_npu_launch(shape, device, tuning, options, shape.N,
                                            False, ub))
    cols = _looped_tile(shape, device, tuning, ub)
    while cols >= ub_model.MIN_COLUMN_TILE:  # narrower tiles take more rows a block
        candidates.append(_torch_npu_launch(shape, device, tuning, options, cols, True, ub))
        cols //= 2
    return [c for c in candidates if c is not None]


def _torch_npu_plan(shape: ShapeInfo, device: DeviceInfo, tuning: AscendTuning,
                    options: PlanOptions) -> LaunchPlan:
    """The candidate (`torch_npu_candidates`) the cost model prices fastest, fused kernel
    and final step together; on a tie whole rows, which read the row once, then the wider
    tile; whole rows wherever they fit when the group needs them (`whole_rows`).
    Programs = vector cores (a fixed grid; each owns a contiguous run of rows, walked in
    blocks of `block_m` rows). "Fitting" is our UB estimate calibrated against
    bishengir's plans (ub.py)."""
    candidates = torch_npu_candidates(shape, device, tuning, options)
    if not candidates:
        raise ValueError(f"no NPU tile fits {ub_bytes(device, tuning, options)} B of UB")
    whole = [c for c in candidates if not c.column_tiled]
    if options.whole_rows and whole:  # a column reads the row side's values, or segments
        candidates = whole
    cores = vector_cores(device, options)

    def modeled_s(candidate: LaunchPlan) -> tuple[float, bool]:
        est = cost.estimate(shape, candidate, device, cores, tuning, options)
        return est.fused_s + est.final_s, candidate.column_tiled

    return min(candidates, key=modeled_s)


#: Segmented plans: the most waves of programs over the planned (vector-core) ones that
#: with_segments considers. It bounds the workspace rows (B x programs per sample), not a
#: measured optimum (no NPU here): 8 x 40 programs on the 910B3.
SEGMENT_MAX_WAVES = 8


def with_segments(plan_: LaunchPlan, segments: int, M_hint: int,
                  interleaved: bool = False) -> LaunchPlan:
    """The plan laid out per sample for segmented column reductions (adaLN's d(scale) /
    d(shift), `segments` = B): each sample gets the same whole number of programs `per`,
    each walking a contiguous share of that sample's row blocks; a program's workspace row
    is sample * per + j, so a sample's partials never mix with another's.

    The grid is bound to the vector cores C (the planned programs): a launch of more
    programs runs in waves of C. So `per` is the one (1 up to the sample's row blocks, and
    at most SEGMENT_MAX_WAVES waves) that minimises waves x row blocks per program,
    ceil(B * per / C) * ceil(blocks / per), the fewest programs on a tie: with B <= C
    usually floor(C / B) in one wave; B = 16 samples of 64 row blocks on 40 cores take 5
    programs each, two full waves of 13 blocks (26 block times; 2 per sample, one wave:
    32); B = 48 does not run a second wave of 8 programs that each walk a whole sample
    (with 64 blocks: 5 per sample, 78 block times against 128). Interleaved samples (a
    split row's pieces) are walked by the generic row loop only; torch_npu's kernel
    declines them at codegen."""
    segmented = dataclasses.replace(plan_, segments=segments, interleaved_segments=interleaved,
                                    prefetch=False, l2_prefetch=0)
    blocks = max(1, segmented.row_blocks_per_segment(M_hint))
    cores = max(1, plan_.programs)
    limit = max(1, min(blocks, SEGMENT_MAX_WAVES * cores // segments))

    def time(per: int) -> tuple[int, int]:
        return -(-segments * per // cores) * -(-blocks // per), per

    per = min(range(1, limit + 1), key=time)
    return dataclasses.replace(segmented, programs=segments * per)


def _npu_config(block_m: int, cols: int, looped: bool, multibuffer: bool
                ) -> tuple[tuple[str, Any], ...]:
    """One launch config in axis-neutral names (hashable); the kernel writes it in its own
    axis names (`block_m` -> X0BLOCK_SUB, `cols` -> R1BLOCK_SUB)."""
    cfg: dict[str, Any] = {"block_m": block_m, "multibuffer": multibuffer}
    if looped:
        cfg["cols"] = cols
    return tuple(sorted(cfg.items()))
