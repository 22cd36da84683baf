"""The Ascend target's tuning knobs: frozen defaults, each with the measurement behind it (a
user changes one through `inductor_ext.config.tuning`, part of the cache key)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class AscendTuning:
    """The Ascend target's planning choices."""

    #: Rows per block never exceed this (masks and index math stay small).
    max_block_m: int = 64
    #: fp32 temporaries per element the row math keeps live besides loads, stores and
    #: accumulators.
    fp32_temps: int = 2
    #: Tail dims are padded to 32 bytes.
    tail_align_bytes: int = 32
    #: Multibuffer (on by default in triton-ascend) doubles what a kernel holds. Kernels
    #: on torch_npu's class offer configs with it and without; False: without only.
    multibuffer: bool = True
    #: Kernels on torch_npu's class: launch configs its autotuner may time, at most
    #: (the largest fitting block with multibuffer, half of it, the largest without).
    npu_max_configs: int = 3
    #: ...and the widest column tile of rows too long for a persistent tile.
    npu_max_column_tile: int = 8192
