"""The Ascend cost model: predicted time of the fused kernel, of its final step and of what
torch_npu runs unfused instead, so that `plan.profitable` fuses where the model expects a
gain rather than wherever there are rows enough. Not calibrated on a device: no NPU was
measured; every constant below names its source or says why its value was assumed.

All three kernels stream HBM: a kernel's time is one launch plus its bytes at the
bandwidth its busy vector cores reach. A vector-core-bound kernel with fewer programs than
the cores (few rows, or few 32-byte column blocks) reaches only their share of it
(`busy_bandwidth`): this is what decides small shapes, where fusing puts a handful of rows
on one program while torch_npu spreads its row kernel over every row and its column kernel
over every column block.

- fused: `plan.programs` programs, each walking `rows_per_program` rows (the busiest
  sets the time); it moves the group's bytes once (`total_bytes`) and writes its
  workspace (programs x K x N fp32 partials). Looped column tiles walk each row twice and
  add each row block's partials into the workspace row, priced at `looped_reread_share`;
  their workspace is zeroed per call (one more launch, its bytes written once more). A
  plan whose first config runs without multibuffer pays `unbuffered_slowdown` on its data
  time: each block's vector work waits for its loads instead of overlapping the next's.
- final step: one launch that reads the workspace back and writes the K x N outputs, a
  column reduction spread over the 32-byte column blocks of K x N. The Ascend target keeps
  the ATen final step (`sum(0)` of the workspace), a CANN reduce operator on an NPU:
  assumed, not measured on a device, to spread like torch_npu's column kernel.
- unfused: torch_npu's row kernel (the group's bytes, its rows spread over the cores:
  torch_npu's tile generator splits the row axis toward one program per vector core) and
  one column kernel for all K columns (Inductor fuses column reductions over the same
  ranges: LayerNorm's dw and db came out as one kernel in the emulation, 64x256), which
  reads the shared [M, N] inputs again, spread over N's 32-byte column blocks (torch_npu
  never splits a column reduction over M: its `num_splits` returns 1 when N > 1).
"""

from __future__ import annotations

import dataclasses

from ...plan.device import DeviceInfo
from ...plan.options import PlanOptions
from ...plan.types import LaunchPlan, ShapeInfo
from . import ub as ub_model
from .tuning import AscendTuning

#: HBM bandwidth by SoC class, bytes/s. Atlas A2/A3 (910B): 1.6 TB/s, the figure commonly
#: quoted for the 910B's 64 GB HBM2e (quotes for 910B parts range 1.2-1.8 TB/s; not a
#: Huawei datasheet value; bench/ascend_model.py's default too). Ascend950: 1.6 TB/s, the
#: 950PR's (HiBL 1.0) in Huawei's Ascend roadmap (Huawei Connect 2025), the part the
#: emulation and checks compile for (Ascend950PR_9599); the 950DT's HiZQ 2.0 was
#: announced at 4 TB/s: a device of that kind comes with its own DeviceInfo.
HBM_BYTES_PER_S = {"A2A3": 1.6e12, "950": 1.6e12}  # keyed by ub.UB_CLASSES


def class_hbm_bytes_per_s(ascend950: bool) -> float:
    """The HBM bandwidth of the SoC class (the UB model's classes: A2/A3, Ascend950)."""
    return HBM_BYTES_PER_S[ub_model.ub_class(ascend950)]


#: Bytes of the smallest block torch_npu's tile generator gives an axis: a tail dim is
#: aligned to 32 bytes (torch_npu/_inductor/runtime/tile_generator.py's
#: `aligned_numel_32byte`; ../shared/reference/ascend_facts.md).
BLOCK_ALIGN_BYTES = 32


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Predicted seconds of the fused kernel, its final step and torch_npu's unfused
    kernels, and the decision they give: fuse iff fused + final step < unfused."""

    fused_s: float
    final_s: float
    unfused_s: float

    @property
    def fuse(self) -> bool:
        return self.fused_s + self.final_s < self.unfused_s

    def describe(self) -> str:
        return (f"fused {self.fused_s * 1e6:.1f} us + final step {self.final_s * 1e6:.1f} us "
                f"vs unfused {self.unfused_s * 1e6:.1f} us")


def hbm_bytes_per_s(device: DeviceInfo) -> float:
    """The NPU's HBM bandwidth (DeviceInfo's, which the Ascend device query fills by SoC);
    a device the flavor is forced onto (no NPU: its bandwidth says nothing about one) is
    priced as the SoC class its UB and flags name."""
    if device.type == "npu" or device.npu_backend:
        return device.dram_bytes_per_s
    return class_hbm_bytes_per_s(device.ascend950)


def busy_bandwidth(busy: float, cores: int, bw: float, tuning: AscendTuning) -> float:
    """Bytes/s of a kernel whose work keeps `busy` vector cores streaming: the share of the
    reachable bandwidth (`hbm_efficiency` of the peak) those cores pull, each at most
    1 / (`saturating_core_share` x cores) of it."""
    reachable = bw * tuning.hbm_efficiency
    saturating = max(1.0, tuning.saturating_core_share * cores)
    return reachable * min(1.0, max(1.0, busy) / saturating)


def kernel_s(nbytes: float, busy: float, cores: int, bw: float, tuning: AscendTuning) -> float:
    """One launch plus `nbytes` moved by `busy` cores."""
    return tuning.launch_s + nbytes / busy_bandwidth(busy, cores, bw, tuning)


def column_blocks(columns: int, elem_bytes: int) -> int:
    """32-byte column blocks of `columns` elements: how many programs a column reduction
    can spread over."""
    return max(1, -(-columns * max(1, elem_bytes) // BLOCK_ALIGN_BYTES))


def multibuffered(plan: LaunchPlan) -> bool:
    """Whether the plan's first config (the one it is priced as) runs with multibuffer;
    a plan without configs (Inductor's kernel class) gets triton-ascend's default, on."""
    return not plan.configs or bool(dict(plan.configs[0]).get("multibuffer", True))


def estimate(shape: ShapeInfo, plan: LaunchPlan, device: DeviceInfo, cores: int,
             tuning: AscendTuning, options: PlanOptions) -> Estimate:
    """The three times of one group planned as `plan` on `cores` vector cores."""
    bw = hbm_bytes_per_s(device)
    M = max(1, shape.M_hint)
    workspace = plan.workspace_bytes(shape)
    # The busiest program's rows set the time; programs beyond the cores run in waves.
    rows = max(1, plan.rows_per_program(M))
    waves = -(-plan.grid // max(1, cores))
    busy = M / (rows * waves)
    fused_bytes: float = shape.total_bytes + workspace
    if plan.looped_column_tiles:
        # Two passes over the row (statistics, then dx and the partials), and each row
        # block's partials added into the program's workspace row (read and written; the
        # workspace zeroed at launch is the `workspace` above once more).
        adds = (2 * (-(-M // plan.block_m)) * shape.num_columns * shape.N
                * shape.accumulator_bytes)
        fused_bytes += workspace + tuning.looped_reread_share * (shape.shared_bytes + adds)
    fused = kernel_s(fused_bytes, busy, cores, bw, tuning)
    if not multibuffered(plan):
        fused = tuning.launch_s + (fused - tuning.launch_s) * tuning.unbuffered_slowdown
    if plan.looped_column_tiles:
        fused += tuning.launch_s  # the zeroing of its workspace: a fill launched before it
    outputs = shape.num_columns * shape.N * shape.accumulator_bytes
    final = kernel_s(workspace + outputs,
                     min(cores, column_blocks(shape.num_columns * shape.N,
                                              shape.accumulator_bytes)),
                     cores, bw, tuning)
    row = kernel_s(shape.total_bytes, min(cores, M), cores, bw, tuning)
    column = kernel_s(max(0, shape.unfused_bytes - shape.total_bytes) + outputs,
                      min(cores, column_blocks(shape.N, shape.elem_bytes)), cores, bw, tuning)
    return Estimate(fused_s=fused, final_s=final, unfused_s=row + column)
