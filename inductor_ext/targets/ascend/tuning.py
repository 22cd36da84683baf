"""The Ascend target's tuning knobs: frozen defaults, each with the reason for it (the
cost model's are assumed, not measured on a device; a user changes one through
`inductor_ext.config.tuning`, part of the cache key). Each knob declares the range its
planner needs beside its default (`knob`: block rows and column tiles a power of two,
shares in (0, 1]); `Tuning` checks it when set, so a cost-model knob out of range cannot
invert decisions silently."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ...plan.knobs import Tuning, knob
from .ub import MIN_COLUMN_TILE


@dataclasses.dataclass(frozen=True)
class AscendTuning(Tuning):
    """The Ascend target's planning choices."""

    TARGET: ClassVar[str] = "ascend"

    #: Rows per block never exceed this (masks and index math stay small).
    max_block_m: int = knob(64, pow2=True)
    #: fp32 temporaries per element the row math keeps live besides loads, stores and
    #: accumulators.
    fp32_temps: int = knob(2, low=0)
    #: Tail dims are padded to 32 bytes.
    tail_align_bytes: int = knob(32, pow2=True)
    #: Ascend950: Unified Buffer bytes a kernel may plan. torch_npu's config reports 256 KiB,
    #: but bishengir-opt-a5's device spec for Ascend950PR_9599 gives 248 KiB
    #: (`--hacc-append-device-spec=target=Ascend950PR_9599`), and bishengir-compile refused
    #: a kernel of ours planned at 261,248 B; plans stay within the compiler's figure.
    ascend950_kernel_ub_bytes: int = knob(253_952, low=4096)
    #: Multibuffer (on by default in triton-ascend) doubles what a kernel holds. Kernels
    #: on torch_npu's class offer configs with it and without; False: without only.
    multibuffer: bool = knob(True)
    #: Kernels on torch_npu's class: launch configs its autotuner may time, at most
    #: (the largest fitting block with multibuffer, half of it, the largest without).
    npu_max_configs: int = knob(3, low=1)
    #: ...and the widest column tile of rows too long for a persistent tile.
    npu_max_column_tile: int = knob(8192, low=MIN_COLUMN_TILE, pow2=True)
    # The cost model (cost.py). Not measured on a device (no NPU was available): each
    # value says why it was assumed; `config.tuning = {"ascend": {...}}` sets measured ones.
    #: Seconds of one kernel launch, the same for every kernel the model prices (fused,
    #: final step, torch_npu's row and column kernels). Assumed, not measured on a device:
    #: a few microseconds, as a launch costs on GPUs; the fused pair and the unfused pair
    #: are two launches each, so it decides only against unequal counts.
    launch_s: float = knob(5e-6, low=0)
    #: Share of the SoC's peak HBM bandwidth a streaming kernel reaches with every vector
    #: core busy. Assumed, not measured on a device: streaming kernels on HBM2e reach
    #: 80-90% of the peak on GPUs; the low end, as the NPU was not measured.
    hbm_efficiency: float = knob(0.8, above=0, high=1)
    #: Share of the vector cores that must stream for that bandwidth; with fewer busy
    #: cores a kernel reaches their part of it. Assumed, not measured on a device: 1 (each
    #: core's data mover pulls 1/cores of it), as triton-ascend binds the grid to the
    #: physical cores to reach the bandwidth.
    saturating_core_share: float = knob(1.0, above=0, high=1)
    #: Looped column tiles: the share of HBM's price paid for the second pass over the row
    #: and for the workspace adds (each row block's fold loaded from and stored to the
    #: program's workspace row: K x N fp32 per block, codegen/kernel_base.add_partial).
    #: Assumed, not measured on a device: half, as both were touched moments before (L2
    #: may serve them) but still pass through the core's data mover.
    looped_reread_share: float = knob(0.5, low=0)
    #: A kernel without multibuffer: the factor on its data time. Assumed, not measured on
    #: a device: a block's vector work (some ten fp32 operations an element for a norm
    #: backward) no longer overlaps the next block's loads and adds about a quarter to a
    #: streaming kernel whose loads dominate.
    unbuffered_slowdown: float = knob(1.25, low=1)
