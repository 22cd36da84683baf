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
    #: Ascend950: Unified Buffer bytes a kernel may plan. torch_npu's config reports 256 KiB,
    #: but bishengir-opt-a5's device spec for Ascend950PR_9599 gives 248 KiB
    #: (`--hacc-append-device-spec=target=Ascend950PR_9599`), and bishengir-compile refused
    #: a kernel of ours planned at 261,248 B; plans stay within the compiler's figure.
    ascend950_kernel_ub_bytes: int = 253_952
    #: Multibuffer (on by default in triton-ascend) doubles what a kernel holds. Kernels
    #: on torch_npu's class offer configs with it and without; False: without only.
    multibuffer: bool = True
    #: Kernels on torch_npu's class: launch configs its autotuner may time, at most
    #: (the largest fitting block with multibuffer, half of it, the largest without).
    npu_max_configs: int = 3
    #: ...and the widest column tile of rows too long for a persistent tile.
    npu_max_column_tile: int = 8192
    # The cost model (cost.py). Not measured on a device (no NPU was available): each
    # value says why it was assumed; `config.tuning = {"ascend": {...}}` sets measured ones.
    #: Seconds of one kernel launch, the same for every kernel the model prices (fused,
    #: final step, torch_npu's row and column kernels). Assumed, not measured on a device:
    #: a few microseconds, as a launch costs on GPUs; the fused pair and the unfused pair
    #: are two launches each, so it decides only against unequal counts.
    launch_s: float = 5e-6
    #: Share of the SoC's peak HBM bandwidth a streaming kernel reaches with every vector
    #: core busy. Assumed, not measured on a device: streaming kernels on HBM2e reach
    #: 80-90% of the peak on GPUs; the low end, as the NPU was not measured.
    hbm_efficiency: float = 0.8
    #: Share of the vector cores that must stream for that bandwidth; with fewer busy
    #: cores a kernel reaches their part of it. Assumed, not measured on a device: 1 (each
    #: core's data mover pulls 1/cores of it), as triton-ascend binds the grid to the
    #: physical cores to reach the bandwidth.
    saturating_core_share: float = 1.0
    #: Looped column tiles: the share of HBM's price paid for the second pass over the row
    #: and for the workspace adds (each row block's fold loaded from and stored to the
    #: program's workspace row: K x N fp32 per block, codegen/kernel_base.add_partial).
    #: Assumed, not measured on a device: half, as both were touched moments before (L2
    #: may serve them) but still pass through the core's data mover.
    looped_reread_share: float = 0.5

    def __post_init__(self) -> None:
        """A cost-model knob out of its range would invert decisions silently: say which."""
        for name, low, high in (("launch_s", 0.0, None), ("hbm_efficiency", 0.0, 1.0),
                                ("saturating_core_share", 0.0, 1.0),
                                ("looped_reread_share", 0.0, None)):
            value = getattr(self, name)
            if value < low or (high is not None and value > high) or (
                    name in ("hbm_efficiency", "saturating_core_share") and value == 0):
                bounds = f"in (0, {high}]" if high is not None else f">= {low}"
                raise ValueError(f"inductor_ext.config.tuning['ascend'][{name!r}] must be "
                                 f"{bounds}, got {value!r}")
