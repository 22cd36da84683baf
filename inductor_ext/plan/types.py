"""The values planning works with: what it is given (ShapeInfo) and what it decides
(LaunchPlan, FinalizeBlock). A plan travels typed from the hook through codegen into the
generated kernel's inductor_meta and back (`LaunchPlan.from_meta`) in the runtime."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import torch


def next_pow2(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


def prev_pow2(n: int) -> int:
    return 1 << max(0, int(math.floor(math.log2(max(1, n)))))


def workspace_bytes(programs: int, partials: int, columns: int, itemsize: int) -> int:
    """Bytes of a fused kernel's workspace: [programs, K, N] partials of `itemsize` bytes
    each (codegen.workspace.Workspace is its layout). One formula, so that what planning
    prices is what codegen allocates."""
    return programs * partials * columns * itemsize


@dataclasses.dataclass(frozen=True)
class ShapeInfo:
    """What planning may look at about one group: sizes, bytes, dtypes, device type."""

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
    #: Bytes of [M, N] inputs the row reduction reads with a stride along the row (a
    #: transposed operand): their loads are not coalesced, in the fused kernel as in
    #: Inductor's own row kernel.
    strided_bytes: int = 0
    #: Narrowest element of those operands: a row block reads block_m of them contiguously.
    strided_elem_bytes: int = 0
    #: Bytes of those operands the column reductions read as well: unfused, Inductor's
    #: column kernel then mixes strided and coalesced loads too.
    strided_shared_bytes: int = 0
    #: Bytes of [M, N] inputs only the column reductions read, transposed: Inductor's
    #: column kernel walks them coalesced, the fused row loop a row block at a time.
    strided_column_bytes: int = 0
    #: Whether adjacent rows of those operands are adjacent in memory (a transposed
    #: [M, N] operand: yes; a permuted [N, T, B] read as [B*T, N] rows: no). Where they are
    #: not, a row block reads one element per request instead of a block_m-element run.
    strided_rows_adjacent: bool = True
    #: Pieces Inductor split each row into (1: whole rows). Its split reduction makes the
    #: row side partial sums over M * k rows of N / k; the fused kernel then holds no
    #: whole-row result, and dx needs another pass anyway (see `plan.split_rows_reason`).
    row_pieces: int = 1
    #: The row side writes [M, N] values from its row reductions (dx): the partials then
    #: ride a pass of their own after the row sums, which column groups split.
    rows_after_sums: bool = False
    #: The column reductions' samples are the row's pieces (`row_pieces` of them): a
    #: column sum beside a row sum Inductor split. Each program walks one piece's rows
    #: (a column strip), so the pieces share their loads with the column side and the
    #: strided operands are read in runs along the original rows.
    walks_pieces: bool = False
    #: Widest element of the [N] operands the row side reads at every row (a weight; 0:
    #: none): a row off a vector boundary reads them at shifted columns, element-wise.
    weight_elem_bytes: int = 0

    def to_record(self) -> dict[str, object]:
        """The fields as plain values (the device as its type), for tables and data."""
        out = dataclasses.asdict(self)
        out["device"] = self.device.type
        return out

    @property
    def shared_row_bytes(self) -> int:
        """Bytes of one row of the [M, N] inputs both sides read (what a program re-reads
        from L1 in a second pass, or hints into L2 ahead)."""
        return self.shared_bytes // max(1, self.M_hint)

    @property
    def rows_on_vectors(self) -> bool:
        """Every row starts on a 16-byte vector (N * element bytes a multiple of 16): else
        the compiler cannot prove a row's start aligned, and its loads go 2-4 bytes wide."""
        return (self.N * self.elem_bytes) % 16 == 0

    @property
    def accumulator_bytes(self) -> int:
        """Bytes of one partial (one column of one column reduction)."""
        return getattr(torch, self.accumulator).itemsize


@dataclasses.dataclass(frozen=True)
class FinalizeBlock:
    """Tile of the final step: `columns` outputs per program, `rows` workspace rows per
    fold, and its warps."""

    columns: int
    rows: int
    num_warps: int

    def programs(self, N: int) -> int:
        return -(-N // self.columns)


Config = tuple[tuple[str, int], ...]

#: A config's key for its row-program count, where a plan offers several (the kernel's
#: constexpr of the same name; the workspace keeps `LaunchPlan.programs` rows).
PROGRAMS_KEY = "RPROGRAMS"
#: A CUDA plan's `extra` key of an aligned row's vector: rows read and written as whole
#: vectors of this many elements from the boundary before their start (absent: as
#: Inductor indexes them).
ROW_VECTOR_KEY = "row_vector"
#: ...and its key of weights loaded once a program, before the row loop (absent: Inductor
#: loads them in the loop, once a row).
WEIGHTS_ONCE_KEY = "weights_once"


@dataclasses.dataclass(frozen=True)
class LaunchPlan:
    """Everything codegen needs to emit and launch one fused kernel."""

    target: str
    programs: int  # row programs: the workspace row count (the grid: x column_groups)
    block_m: int  # rows per loop iteration (XBLOCK)
    r0_block: int  # padded row length (power of two), or the column tile when tiled
    num_warps: int
    num_stages: int
    row_loop: str  # "contiguous": each program owns one chunk; "strided": block i -> i % P
    extra: tuple[tuple[str, int | str], ...] = ()
    #: Row longer than one tile: the row reduction loops over column tiles (two passes).
    column_tiled: bool = False
    #: Column-tiled only: >0 unrolls the row walk into this many static column tiles, each
    #: with its own partials in registers (the workspace is written once, any combine);
    #: 0 loops over the tiles at run time, adding sums into the workspace per tile.
    register_tiles: int = 0
    #: Register-tiled only: each row program is this many programs, one per equal share
    #: of the row's column tiles. Each reads the whole row for the row sums, then writes
    #: dx and keeps partials for its own share only, so a row whose partials or L1 bytes
    #: are too many for one program still keeps them in registers (1: no split).
    column_groups: int = 1
    #: Register-tiled only: the row-sum pass is straight-line code per tile too (False:
    #: a run-time loop over the tiles; only the partials need static tiles).
    unroll_row_sums: bool = True
    #: Row sums in a run-time loop only: Triton's software-pipelining stages for that loop
    #: (the next tiles' loads in flight while one tile is summed; 0: none asked), and
    #: its unroll factor (1: none). Each tile is otherwise one dependent load round trip.
    row_sum_stages: int = 0
    row_sum_unroll: int = 1
    #: Register-tiled only, one column group: the second pass takes the row values the
    #: first pass loaded (`keep_row_tiles` rewrite): a row read once, as a persistent row
    #: is, in tiles that pad it less than one power-of-two tile.
    keep_row_tiles: bool = False
    #: Register-tiled only: the partials are whole row blocks ([XBLOCK, R0_BLOCK] per
    #: tile), folded over their rows once at the workspace store, not per block (short
    #: rows in row blocks: a fold per block is a cross-warp reduction per tile).
    block_partials: bool = False
    #: Alternative launch configs ({XBLOCK, num_warps, num_stages}, and a row-program
    #: count under PROGRAMS_KEY at most `programs`, as item tuples) that Inductor's
    #: autotuner times on first launch; empty: the one config above. XBLOCK is at most
    #: block_m, except register tiles, which plan 1 and may time 2 (the kernel keeps the
    #: row mask for it).
    configs: tuple[Config, ...] = ()
    #: Load the next row block into fresh registers while the current one is computed.
    prefetch: bool = False
    #: >0: each iteration hints the row block this many steps ahead into L2; 0: no hint.
    l2_prefetch: int = 0
    #: Share of a second-pass (column-tiled) L2 hint's lines kept as evict_last (0: plain).
    l2_keep_fraction: float = 0.0
    #: The final step is launched early (programmatic dependent launch).
    final_step_pdl: bool = False
    #: With several configs: how many more waves than the fewest any config needs a config
    #: may run the grid in; the autotuner does not time the others. None: no such limit.
    max_extra_waves: int | None = None
    #: The generated final step's tile; None: the ATen final step.
    final_step: FinalizeBlock | None = None
    #: dtype name of the partial accumulators, the workspace and the final step's fold.
    accumulator: str = "float32"
    #: Column-tiled rows: each row-sum term folds this many adjacent columns before it
    #: joins its accumulator (1: Inductor's accumulators as they are).
    row_sum_chunk: int = 1
    #: Column-tiled rows: output stores carry the streaming cache hint.
    stream_stores: bool = False
    #: Register-tiled rows: the [M, N] row loads drop Inductor's evict_last.
    unpin_row_loads: bool = False
    #: Samples B of segmented column reductions (adaLN: [B, T, N] -> [B, N]); >1: the
    #: programs are B groups of `programs // segments`, each group walking one sample's
    #: T = M / B rows, so a program's partials belong to one sample. 1: no segments.
    segments: int = 1
    #: Segmented only: sample b's rows are b, b + B, b + 2B, ... (the pieces of a split
    #: row, Inductor's row r being piece r % B of row r // B), not one run of M / B rows.
    interleaved_segments: bool = False

    @property
    def accumulator_dtype(self) -> torch.dtype:
        return getattr(torch, self.accumulator)

    @property
    def looped_column_tiles(self) -> bool:
        """Column tiles walked by a run-time loop: partials are added into a zeroed
        workspace per tile, so only sums, and no timing runs of alternative configs."""
        return self.column_tiled and not self.register_tiles

    @property
    def grid(self) -> int:
        """Programs launched: every row program's column groups."""
        return self.programs * self.column_groups

    def programs_of(self, config: Config) -> int:
        """Row programs a config launches: its own count, or the plan's."""
        return int(dict(config).get(PROGRAMS_KEY, self.programs))

    @property
    def row_vector(self) -> int:
        """`ROW_VECTOR_KEY` of `extra` (0: absent)."""
        return int(dict(self.extra).get(ROW_VECTOR_KEY, 0))

    @property
    def weights_once(self) -> bool:
        """`WEIGHTS_ONCE_KEY` of `extra`."""
        return bool(dict(self.extra).get(WEIGHTS_ONCE_KEY, 0))

    @property
    def keeps_row_shift(self) -> bool:
        """Every launch keeps all rows a program walks at the program's shift from a
        vector boundary (what `row_vector` needs): one row a block in every config, and
        every program count a multiple of the vector."""
        vector = self.row_vector
        rows = {self.block_m} | {int(dict(c).get("XBLOCK", self.block_m)) for c in self.configs}
        counts = {self.programs} | {self.programs_of(c) for c in self.configs}
        return vector > 0 and rows == {1} and all(count % vector == 0 for count in counts)

    @property
    def program_choices(self) -> tuple[int, ...]:
        """Row-program counts the configs choose between, most first; () when every config
        launches `programs` (the workspace's rows: a config launching fewer leaves the rest
        to be skipped by the generated final step, or filled with the partials' identity
        for the ATen one)."""
        counts = sorted({self.programs_of(c) for c in self.configs}, reverse=True)
        return tuple(counts) if len(counts) > 1 else ()

    @property
    def group_tiles(self) -> int:
        """Register tiles whose dx and partials one program of a column group owns."""
        return self.register_tiles // self.column_groups

    @property
    def final_step_warps(self) -> int:
        return self.final_step.num_warps if self.final_step is not None else 0

    @property
    def programs_per_segment(self) -> int:
        """Programs that share one sample's rows (all programs when unsegmented)."""
        return self.programs // self.segments

    def row_blocks_per_segment(self, M: int) -> int:
        """Row blocks of `block_m` rows in one sample's M / segments rows (in all M rows
        when unsegmented): what `programs_per_segment` programs share."""
        return -(-(M // self.segments) // self.block_m)

    def workspace_bytes(self, shape: ShapeInfo) -> int:
        """Bytes of the workspace this plan's programs write for `shape`'s partials."""
        return workspace_bytes(self.programs, shape.num_columns, shape.N,
                               shape.accumulator_bytes)

    def rows_per_program(self, M: int) -> int:
        """Rows one program walks at most, in whole row blocks."""
        blocks = -(-self.row_blocks_per_segment(M) // self.programs_per_segment)
        return blocks * self.block_m

    def summary(self, M: int | None = None) -> str:
        """The plan's essentials in one short phrase, for log lines (the repr runs to ~700
        characters): programs, rows per block and per program (`M` given), how the row is
        walked, segments, the configs the autotuner times, the final step."""
        grid = f"{self.programs}x{self.column_groups}" if self.column_groups > 1 else (
            str(self.programs))
        parts = [f"{self.target}: programs={grid}", f"block_m={self.block_m}"]
        if M is not None:
            parts.append(f"split={self.rows_per_program(M)}")
        if not self.column_tiled:
            parts.append(f"row={self.r0_block}")
        elif self.register_tiles:
            parts.append(f"column tiles={self.register_tiles}x{self.r0_block} in registers")
        else:
            parts.append(f"column tiles of {self.r0_block}, looped")
        if self.segments > 1:
            parts.append(f"segments={self.segments}"
                         + (" interleaved" if self.interleaved_segments else ""))
        parts.append(f"configs={len(self.configs) or 1}")
        if self.program_choices:
            parts.append("programs in {" + ",".join(map(str, self.program_choices)) + "}")
        parts.append("final=aten" if self.final_step is None
                     else f"final={self.final_step.columns}cols")
        return " ".join(parts)

    def to_meta(self) -> dict[str, Any]:
        """A plain dict (written into the kernel's inductor_meta by repr)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> LaunchPlan:
        """The plan a kernel's inductor_meta carries (the inverse of `to_meta`)."""
        fields = dict(meta)
        block = fields.get("final_step")
        if isinstance(block, Mapping):
            fields["final_step"] = FinalizeBlock(**block)
        fields["configs"] = tuple(tuple(tuple(item) for item in c)
                                  for c in fields.get("configs", ()))
        fields["extra"] = tuple(tuple(item) for item in fields.get("extra", ()))
        return cls(**fields)
