"""Target flavors: the per-hardware choices of the fused kernel, as small descriptors.

A flavor decides the launch plan (programs, rows per block, warps), whether fusing pays,
and how the row loop is written. Adding a target is one new module that subclasses
:class:`TargetFlavor` and calls :func:`register`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import torch

from .finalize import FinalizeBlock


@dataclasses.dataclass(frozen=True)
class LaunchPlan:
    """Everything codegen needs to emit and launch one fused kernel."""

    target: str
    programs: int  # grid size; also the workspace row count
    block_m: int  # rows per loop iteration (XBLOCK)
    r0_block: int  # padded row length (power of two)
    num_warps: int
    num_stages: int
    row_loop: str  # "contiguous": each program owns one chunk; "strided": block i -> i % P
    extra: tuple[tuple[str, Any], ...] = ()
    #: Row longer than one tile: the row reduction loops over column tiles (two passes) and
    #: column partials are added into the program's workspace row per tile (sum only).
    column_tiled: bool = False
    #: Column-tiled only: >0 unrolls the row walk into this many static column tiles, each
    #: with its own partials in registers (the workspace is written once, any combine);
    #: 0 loops over the tiles at run time, adding sums into the workspace per tile.
    register_tiles: int = 0
    #: Alternative launch configs ({XBLOCK <= block_m, num_warps, num_stages} as item
    #: tuples) that Inductor's autotuner times on first launch; empty: the one config above.
    configs: tuple[tuple[tuple[str, int], ...], ...] = ()
    #: Load the next row block into fresh registers while the current one is computed
    #: (register double buffering; the loop's loads were not pipelined by Triton).
    prefetch: bool = False
    #: >0: each iteration hints the row block this many steps ahead into L2 (no registers
    #: held), for every [M, N] input with contiguous rows; 0: no hint.
    l2_prefetch: int = 0
    #: The final step is launched early (programmatic dependent launch): the fused kernel
    #: lets it start once every program has left its row loop, and it waits for the fused
    #: kernel's memory before reading the workspace.
    final_step_pdl: bool = False
    #: With several configs: how many more waves than the fewest any config needs a config
    #: may run the grid in (registers and threads decide how many programs an SM holds);
    #: the autotuner does not time the others. None: no such limit.
    max_extra_waves: int | None = None
    #: Warps per program of the final step; 0: the flavor's `final_step_warps`.
    final_step_warps: int = 0
    #: dtype name of the partial accumulators, the workspace and the final step's fold
    #: (`combine.accumulator_dtype`: float64 for float64 columns, else float32).
    accumulator: str = "float32"

    @property
    def accumulator_dtype(self) -> torch.dtype:
        return getattr(torch, self.accumulator)

    @property
    def looped_column_tiles(self) -> bool:
        """Column tiles walked by a run-time loop: partials are added into a zeroed
        workspace per tile, so only sums, and no timing runs of alternative configs."""
        return self.column_tiled and not self.register_tiles

    def rows_per_program(self, M: int) -> int:
        blocks = -(-M // self.block_m)
        return -(-blocks // self.programs) * self.block_m


@dataclasses.dataclass(frozen=True)
class ShapeInfo:
    """What a flavor may look at when planning: sizes, dtypes, and the device."""

    M_hint: int  # rows (hint for dynamic M)
    M_static: bool
    N: int
    num_columns: int  # partial accumulations in the group
    elem_bytes: int  # widest element read from the [M, N] inputs
    shared_bytes: int  # bytes of [M, N] inputs both sides read (saved by fusing)
    total_bytes: int  # bytes the fused kernel must move at least (workspace excluded)
    unfused_bytes: int  # bytes the unfused kernels move at least
    row_elem_bytes: int  # bytes per element of all [M, N] tiles loaded or stored
    device: torch.device
    accumulator: str = "float32"  # dtype name the column partials accumulate in

    @property
    def accumulator_bytes(self) -> int:
        """Bytes of one partial (one column of one column reduction)."""
        return getattr(torch, self.accumulator).itemsize


class TargetFlavor:
    """Base descriptor. Subclasses override the class attributes and `plan`/`profitable`."""

    name: ClassVar[str] = ""
    device_types: ClassVar[tuple[str, ...]] = ()
    #: Accumulator dtypes the flavor can generate; a column needing another is declined
    #: as `unsupported_dtype`.
    accumulator_dtypes: ClassVar[tuple[torch.dtype, ...]] = (torch.float32, torch.float64)

    def claims(self, device: torch.device) -> bool:
        """`target="auto"` picks this flavor for the device."""
        return device.type in self.device_types

    def fits(self, shape: ShapeInfo) -> tuple[bool, str]:
        """Whether a whole row stays on chip (a persistent tile); (False, why) if not."""
        return True, ""

    def plan(self, shape: ShapeInfo, split_size: int | None) -> LaunchPlan:
        raise NotImplementedError

    def launch_options(self, plan: LaunchPlan) -> dict[str, int]:
        """Compile options besides XBLOCK in the kernel's fixed config."""
        return {"num_warps": plan.num_warps, "num_stages": plan.num_stages}

    def profitable(self, shape: ShapeInfo, plan: LaunchPlan) -> tuple[bool, str]:
        raise NotImplementedError

    #: Column-tiled rows: adjacent columns each row-sum term is folded over before it
    #: joins its accumulator (`column_tiles.chunk_row_sums`); 1 leaves Inductor's loop
    #: accumulators as they are.
    row_sum_chunk: ClassVar[int] = 1
    #: Column-tiled rows: output stores carry the streaming cache hint
    #: (`column_tiles.stream_row_stores`).
    stream_column_tiled_stores: ClassVar[bool] = False
    #: Register-tiled rows: the [M, N] row loads drop Inductor's evict_last
    #: (`column_tiles.unpin_row_loads`), as the second pass reads the row from L1.
    unpin_register_tiled_rows: ClassVar[bool] = False

    #: Final step: columns per program (short runs spread the columns over many
    #: programs), fp32 values per tile over all partials (tall tiles fold a program's
    #: workspace rows in one or two load round trips: the step is latency-bound, a few
    #: MB mostly still in L2), and warps.
    final_step_columns: ClassVar[int] = 16
    final_step_tile: ClassVar[int] = 16384
    final_step_warps: ClassVar[int] = 8

    def finalize_block(self, N: int, programs: int, partials: int,
                       warps: int = 0) -> FinalizeBlock | None:
        """Tile of the generated final step (None: use the ATen step); `warps` is the
        plan's `final_step_warps`."""
        columns = min(self.final_step_columns, next_pow2(N))
        tile = max(2048, self.final_step_tile // max(1, partials))
        rows = max(1, min(next_pow2(programs), prev_pow2(tile // columns)))  # tl.arange: 2^k
        return FinalizeBlock(columns=columns, rows=rows,
                             num_warps=warps or self.final_step_warps)

    def finalize_launch_options(self, block: FinalizeBlock) -> dict[str, int]:
        return {"num_warps": block.num_warps, "num_stages": 1}

    # Hooks the kernel asks while writing the row loop.
    def l2_prefetch_statement(self, pointer: str, nbytes: str, second_pass: bool) -> str:
        """A statement hinting bytes [pointer, pointer + nbytes) into the L2 cache; only
        asked when the flavor's plan set `l2_prefetch`. `second_pass`: the loop reads each
        row twice (column-tiled), so the lines should stay until the second read."""
        raise NotImplementedError

    def pdl_trigger_statement(self) -> str:
        """In the fused kernel: the dependent final step may launch (plan.final_step_pdl)."""
        raise NotImplementedError

    def pdl_wait_statement(self) -> str:
        """First in the final step: wait until the fused kernel's writes are visible."""
        raise NotImplementedError

    def loop_header(self, plan: LaunchPlan) -> list[str]:
        """Lines before the row loop; they define row_step (a prefetching loop loads the
        next block at xoffset + row_step) and whatever loop_statement reads."""
        raise NotImplementedError

    def loop_statement(self, plan: LaunchPlan) -> str:
        raise NotImplementedError


_REGISTRY: dict[str, TargetFlavor] = {}


def register(flavor: TargetFlavor) -> TargetFlavor:
    _REGISTRY[flavor.name] = flavor
    return flavor


def get_flavor(name: str) -> TargetFlavor:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"inductor_ext.config.target: unknown flavor {name!r}; "
                         f"known: {sorted(_REGISTRY)}") from None


def flavor_for(device: torch.device, target: str) -> TargetFlavor:
    """`target` is the config value: "auto" picks the flavor that claims the device, else
    that flavor."""
    if target != "auto":
        return get_flavor(target)
    for flavor in _REGISTRY.values():
        if flavor.claims(device):
            return flavor
    return get_flavor("cuda")


def next_pow2(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


def prev_pow2(n: int) -> int:
    return 1 << max(0, int(math.floor(math.log2(max(1, n)))))
