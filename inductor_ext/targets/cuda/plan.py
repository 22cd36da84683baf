"""CUDA planning (the default target): strided row blocks over a few programs per SM, a
bounded set of launch configs timed by Inductor's autotuner, and a bytes-based
profitability model from the device's bandwidth, L2 size and SM count.

Every function is pure: (shape, device, tuning, options) in, a value out."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Literal

from ...plan.device import DeviceInfo
from ...plan.options import PlanOptions
from ...plan.types import (
    PROGRAMS_KEY,
    ROW_VECTOR_KEY,
    WEIGHTS_ONCE_KEY,
    Config,
    FinalizeBlock,
    LaunchPlan,
    ShapeInfo,
    next_pow2,
    prev_pow2,
    workspace_bytes,
)
from . import cost
from .tuning import CudaTuning


def partial_bytes(shape: ShapeInfo) -> int:
    """One program's partials: one value per column per column reduction (its workspace
    row)."""
    return workspace_bytes(1, shape.num_columns, shape.N, shape.accumulator_bytes)


def fused_dram_seconds(shape: ShapeInfo, device: DeviceInfo, programs: int) -> float:
    """The fused kernel's bytes, its workspace included, at the device's DRAM bandwidth."""
    return (shape.total_bytes + programs * partial_bytes(shape)) / device.dram_bytes_per_s


def persistent_fits(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning) -> bool:
    """A persistent row keeps, per row element, the accumulators and the upcast [M, N]
    tiles in registers; past `register_budget` of the SM's register file the kernel
    spills (LayerNorm at N=16384 did), and rows not a whole number of 16-byte vectors
    past `unaligned_register_share` of it. Such rows take the column-tiled path."""
    live = next_pow2(shape.N) * (shape.accumulator_bytes * shape.num_columns
                                 + 2 * shape.row_elem_bytes)
    budget = tuning.register_budget * device.register_file_bytes
    if not shape.rows_on_vectors:
        budget *= tuning.unaligned_register_share
    return live <= budget


def balanced(tuning: CudaTuning, programs: int, blocks: int) -> int:
    """At most `programs` programs for `blocks` row blocks; with `balance_rows`, the
    fewest that keep the most iterations per program unchanged."""
    programs = max(1, min(programs, blocks))
    if not tuning.balance_rows:
        return programs
    return -(-blocks // -(-blocks // programs))


def _programs(shape: ShapeInfo, tuning: CudaTuning, most: int, blocks: int) -> int:
    """`most` programs, balanced over the row blocks when M is known at compile time."""
    return balanced(tuning, most, blocks) if shape.M_static else most


def _rows_to_double_buffer(shape: ShapeInfo, tuning: CudaTuning, programs: int) -> bool:
    """Each program owns enough rows for register double buffering to pay."""
    return shape.M_hint >= tuning.prefetch_min_rows * programs


def programs_for(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning,
                 block_m: int, double_buffered: bool = True) -> int:
    """Programs: SMs x k with k the largest of 4, 2, 1 whose workspace stays within
    `max_workspace_share` of the bytes the kernel moves anyway (or within
    `max_workspace_l2_share` of the L2) and, for rows that may be `double_buffered`,
    whose programs each keep at least `prefetch_min_rows` rows (fewer would turn the
    loads' double buffering off)."""
    budget = max(tuning.max_workspace_share * shape.total_bytes,
                 tuning.max_workspace_l2_share * device.l2_bytes)
    blocks = -(-shape.M_hint // block_m)
    per_sm = tuning.programs_per_sm
    while True:
        programs = _programs(shape, tuning, device.cores * per_sm, blocks)
        if per_sm == 1 or (programs * partial_bytes(shape) <= budget
                           and (not double_buffered
                                or _rows_to_double_buffer(shape, tuning, programs))):
            return programs
        per_sm //= 2


def register_partials_budget(device: DeviceInfo, tuning: CudaTuning) -> float:
    return tuning.register_partials_share * device.register_file_bytes


def rows_in_l1(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning,
               groups: int = 1) -> int:
    """Rows whose [M, N] inputs fit the L1 share the unrolled tiles' second pass reads (a
    column group's program reads back its own share of each row)."""
    row_bytes = max(1, shape.shared_row_bytes // groups)
    return int(tuning.register_rows_l1_share * device.l1_bytes // row_bytes)


def register_tiles_for(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning,
                       groups: int = 1) -> int:
    """Unrolled column tiles for a column-tiled row split into `groups` column groups, or
    0 when one group's partials would take more than `register_partials_share` of an
    SM's register file, the row needs too many tiles (or tiles the groups do not share
    evenly), or one group's share of a row's inputs does not fit the L1 the second pass
    reads it from."""
    tiles = -(-shape.N // min(tuning.register_tile, next_pow2(shape.N)))
    if (tiles > tuning.max_register_tiles or tiles % groups
            or partial_bytes(shape) / groups > register_partials_budget(device, tuning)
            or rows_in_l1(shape, device, tuning, groups) < 1):
        return 0
    return tiles


def column_groups_for(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning) -> int:
    """The fewest column groups (1, 2, 3 ... up to `max_column_groups`) whose share of a
    column-tiled row unrolls into register tiles, or `tuning.column_groups` when set;
    0 when none does (the row loops over its tiles at run time). Only rows with a second
    pass (`rows_after_sums`) split."""
    if not shape.rows_after_sums:
        # One pass holds the row sums and the partials: it cannot be split by columns.
        return 1 if register_tiles_for(shape, device, tuning) else 0
    choices = ([tuning.column_groups] if tuning.column_groups > 0 else
               range(1, max(1, tuning.max_column_groups) + 1))
    return next((groups for groups in choices
                 if register_tiles_for(shape, device, tuning, groups)), 0)


def register_layout(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning
                    ) -> tuple[CudaTuning, int, int]:
    """(tuning with the register tile used, column groups, unrolled tiles) of a
    column-tiled row; (tuning, 1, 0) when no layout fits (looped tiles). A row whose
    tiles no group count shares evenly halves its tile once, down to `min_register_tile`
    (N=20480: 5 tiles of 4096, then 10 of 2048 in 2 groups). Rows off 16-byte vectors
    start from tiles of at most `unaligned_register_tile`."""
    if not shape.rows_on_vectors and tuning.unaligned_register_tile > 0:
        tuning = dataclasses.replace(
            tuning, register_tile=min(tuning.register_tile, tuning.unaligned_register_tile))
    tiles = [tuning.register_tile]
    if tuning.register_tile // 2 >= tuning.min_register_tile:
        tiles.append(tuning.register_tile // 2)
    for tile in tiles:
        tiled = dataclasses.replace(tuning, register_tile=tile)
        groups = column_groups_for(shape, device, tiled)
        if groups:
            return tiled, groups, register_tiles_for(shape, device, tiled, groups)
    return tuning, 1, 0


def _kept_tiles(shape: ShapeInfo, options: PlanOptions, tile: int, max_tiles: int,
                max_elem_bytes: int, same_lanes_tiles: int = 0) -> int:
    """Register tiles of `tile` columns a padded persistent row can keep between its
    passes, or 0: the guards both kept-tile rules share. Rows free to split (not whole
    rows, no split size) with a pass after the row sums, coalesced, of elements of at
    most `max_elem_bytes` starting on 16-byte vectors, of 2 to `max_tiles` tiles that pad
    less than the power of two (or as much, at most `same_lanes_tiles` tiles; never an
    unpadded row)."""
    if (tile <= 0 or options.whole_rows or options.split_size is not None
            or not shape.rows_after_sums
            or shape.strided_bytes or shape.strided_column_bytes
            or shape.elem_bytes > max_elem_bytes or not shape.rows_on_vectors):
        return 0
    tiles = -(-shape.N // tile)
    lanes, padded = tiles * tile, next_pow2(shape.N)
    if (padded == shape.N or not 2 <= tiles <= max_tiles or lanes > padded
            or (lanes == padded and tiles > same_lanes_tiles)):
        return 0
    return tiles


def kept_row_tiles(shape: ShapeInfo, tuning: CudaTuning, options: PlanOptions) -> int:
    """Register tiles of `kept_row_tile` columns a persistent LayerNorm row runs as, its
    row kept in registers between the passes (0: it stays one padded tile): rows of two
    column sums or more, in groups of at least `kept_row_min_elems` elements, that pass
    `_kept_tiles` (at most `kept_row_max_tiles` tiles, `kept_row_same_lanes_tiles` of
    them taking as many lanes as the padded row)."""
    if shape.num_columns < 2 or shape.M_hint * shape.N < tuning.kept_row_min_elems:
        return 0
    return _kept_tiles(shape, options, tuning.kept_row_tile, tuning.kept_row_max_tiles,
                       tuning.kept_row_elem_bytes, tuning.kept_row_same_lanes_tiles)


def vector_warps(shape: ShapeInfo, rows: int, tile: int) -> int:
    """Warps whose threads each hold one 16-byte vector of a [rows, tile] block (at
    least one)."""
    return max(1, rows * tile * shape.elem_bytes // (32 * 16))


def short_row_block(shape: ShapeInfo, tile: int) -> int:
    """Rows per block of a row in kept tiles of `tile` columns: the rows that eight warps
    hold as one 16-byte vector a thread per tile (16-bit elements, tiles of 64: 32)."""
    return max(1, min(64, 8 * 32 * 16 // (shape.elem_bytes * tile)))


def short_row_tiles(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning,
                    options: PlanOptions) -> int:
    """Kept register tiles of `short_row_tile` columns a padded persistent row runs as in
    row blocks (0: it stays one padded tile): rows of at most `short_row_max_columns`
    column sums that pass `_kept_tiles` (at most `short_row_max_tiles` tiles, with fewer
    lanes than the padded row), and at least `short_row_min_rows` rows per planned
    program (the partials are folded over their rows once per program)."""
    if shape.num_columns > tuning.short_row_max_columns:
        return 0
    tile = tuning.short_row_tile
    tiles = _kept_tiles(shape, options, tile, tuning.short_row_max_tiles,
                        tuning.short_row_elem_bytes)
    if not tiles:
        return 0
    programs = programs_for(shape, device, tuning, short_row_block(shape, tile))
    return tiles if shape.M_hint >= tuning.short_row_min_rows * programs else 0


def register_tiled_programs(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning,
                            groups: int = 1) -> int:
    """Row programs: as many programs per SM as their register partials allow (at least
    one), `groups` of them per row program."""
    fitting = int(register_partials_budget(device, tuning) * groups // partial_bytes(shape))
    per_sm = max(1, min(tuning.programs_per_sm, fitting))
    return _programs(shape, tuning, max(1, device.cores * per_sm // groups), shape.M_hint)


def register_tiled_configs(r0_block: int, max_warps: int, max_rows: int = 2
                           ) -> tuple[Config, ...]:
    """Rows per iteration {1, 2} (at most `max_rows`, the rows the L1 holds) x warps
    {max/2, max}; the tile (R0_BLOCK) is fixed, the unrolled code is written for it."""
    return tuple((("XBLOCK", xblock), ("R0_BLOCK", r0_block), ("num_warps", warps),
                  ("num_stages", 1))
                 for xblock in (1, 2) if xblock <= max(1, max_rows)
                 for warps in sorted({max(2, max_warps // 2), max_warps}))


def row_block_configs(block_m: int, max_warps: int, warps_for: Callable[[int], int],
                      r0_block: int | None = None) -> tuple[Config, ...]:
    """At most 9: rows per iteration {block_m, block_m/2, block_m/4} x warps {half, one,
    two} times `warps_for(rows)` (each at least 2, at most `max_warps`). `r0_block` fixes
    R0_BLOCK in each config, for code unrolled for that tile (None: Inductor's own).
    Pipelining stages are not searched: Triton 3.6 does not pipeline this loop's loads
    (stages 1 and 2 time alike)."""
    fixed = () if r0_block is None else (("R0_BLOCK", r0_block),)
    out = []
    for xblock in (block_m, block_m // 2, block_m // 4):
        if xblock < 1:
            continue
        one = warps_for(xblock)
        for warps in sorted({max(2, one // 2), max(2, one), max(2, one * 2)}):
            if warps <= max_warps:
                out.append((("XBLOCK", xblock), *fixed, ("num_warps", warps),
                            ("num_stages", 1)))
    return tuple(dict.fromkeys(out))


def fewer_programs(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning, programs: int,
                   block_m: int, r0_block: int) -> tuple[int, ...]:
    """The other row-program counts the configs are timed at, most first (() for none):
    SMs x `fewer_programs_per_sm`, and for row tiles of `low_residency_r0_block` columns
    or more every count per SM below it, each balanced and fewer than `programs`. A
    config launching fewer programs than the workspace has rows leaves the rest unwritten
    (the final step reads how many it launched) or, for the ATen final step, fills them
    with the partials' identity."""
    if tuning.fewer_programs_per_sm <= 0:
        return ()
    per_sm = [tuning.fewer_programs_per_sm]
    if 0 < tuning.low_residency_r0_block <= r0_block:
        per_sm += range(tuning.fewer_programs_per_sm - 1, 0, -1)
    return _counts_below(shape, device, tuning, programs, per_sm,
                         blocks=-(-shape.M_hint // block_m))


def fewer_register_tiled_programs(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning,
                                  programs: int, groups: int) -> tuple[int, ...]:
    """The other row-program counts a register-tiled plan's configs are timed at, most
    first: every whole number of programs per SM below the plan's, down to one, each
    balanced over the rows. The plan's count is what the partials' registers allow; the
    compiled code may hold fewer blocks an SM (rms 2392x10167 fp16: 3 planned, 255
    registers at 4 warps hold 2, so 342 programs run in two waves)."""
    if not tuning.register_tiled_fewer_programs:
        return ()
    per_sm = -(-programs * groups // device.cores)
    return _counts_below(shape, device, tuning, programs, range(per_sm - 1, 0, -1),
                         blocks=shape.M_hint, groups=groups)


def _counts_below(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning, programs: int,
                  per_sm: Iterable[int], blocks: int, groups: int = 1) -> tuple[int, ...]:
    """Row-program counts at `per_sm` programs per SM (each row program `groups`
    programs), balanced over `blocks` row blocks, those fewer than `programs`, most
    first."""
    counts = {_programs(shape, tuning, max(1, device.cores * k // groups), blocks)
              for k in per_sm}
    return tuple(sorted((count for count in counts if count < programs), reverse=True))


def with_program_counts(configs: tuple[Config, ...], counts: tuple[int, ...],
                        scaled_warps: dict[int, int] | None = None) -> tuple[Config, ...]:
    """Every config at each row-program count (the plan's own first); where
    `scaled_warps` gives a count a factor, also each config at its warps times that factor
    (at most 32)."""
    out: list[Config] = []
    for count in counts:
        factor = (scaled_warps or {}).get(count, 1)
        for config in configs:
            out.append((*config, (PROGRAMS_KEY, count)))
            if factor > 1:
                warps = min(32, int(dict(config)["num_warps"]) * factor)
                out.append(tuple((key, warps if key == "num_warps" else value)
                                 for key, value in config) + ((PROGRAMS_KEY, count),))
    return tuple(dict.fromkeys(out))


def warps_at(device: DeviceInfo, tuning: CudaTuning, programs: int, groups: int) -> int:
    """The most warps a program takes at `programs` row programs (a power of two: Triton
    takes no other warp count; 342 programs gave 12)."""
    return prev_pow2(max(2, min(32, tuning.max_warps_per_sm * device.cores
                                // max(1, programs * groups))))


def use_prefetch(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning, r0_block: int,
                 block_m: int, programs: int, column_tiled: bool) -> bool:
    """Double-buffer the loads of persistent rows when a program has enough iterations:
    `prefetch_min_rows` rows, or `prefetch_min_rows_alone` for one-row blocks at one
    program per SM, where nothing else hides a row's load round trip."""
    if column_tiled or not tuning.prefetch_min_n <= r0_block <= tuning.prefetch_max_n:
        return False
    if block_m == 1 and programs <= device.cores and tuning.prefetch_min_rows_alone > 0:
        return shape.M_hint >= tuning.prefetch_min_rows_alone * programs
    return _rows_to_double_buffer(shape, tuning, programs)


def l2_prefetch_for(device: DeviceInfo, tuning: CudaTuning, double_buffered: bool = False
                    ) -> int:
    """Row blocks ahead for the L2 hint (0: none). Not where the next block is already
    loaded into registers (there the hint makes the loop slower); the bulk prefetch exists
    from sm_90 (Hopper) on; the interpreter has no L2 to hint (tests may turn it on)."""
    if tuning.l2_prefetch_distance <= 0 or double_buffered:
        return 0
    if device.interpreted:
        return tuning.l2_prefetch_distance if tuning.l2_prefetch_on_cpu else 0
    return tuning.l2_prefetch_distance if device.hopper_or_later else 0


def hint_fits_l2(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning, grid: int,
                 block_m: int) -> bool:
    """Whether the row blocks every program hints into L2 ahead (their [M, N] inputs)
    fit `register_tiled_hint_l2_share` of the L2. Register-tiled rows gain from a hint of
    8.4 MB (ln 8192x16384 bf16 on an H100); at 16.8 MB and more the hinted rows push out
    what the programs are reading, and the hint costs more than it saves."""
    hinted = grid * block_m * shape.shared_row_bytes
    return hinted <= tuning.register_tiled_hint_l2_share * device.l2_bytes


def final_step_block(tuning: CudaTuning, N: int, programs: int, partials: int,
                     warps: int = 0) -> FinalizeBlock:
    """Tile of the generated final step: short column runs spread over many programs,
    tall tiles that fold a program's workspace rows in one or two load round trips (the
    step is latency-bound, a few MB mostly still in L2)."""
    columns = min(tuning.final_step_columns, next_pow2(N))
    tile = max(2048, tuning.final_step_tile // max(1, partials))
    rows = max(1, min(next_pow2(programs), prev_pow2(tile // columns)))  # tl.arange: 2^k
    return FinalizeBlock(columns=columns, rows=rows, num_warps=warps or tuning.final_step_warps)


def final_step_warps_for(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning,
                         programs: int) -> int:
    """`final_step_warps`, halved when the final step has more programs than
    `final_step_programs_per_sm` per SM (N=16384: at 1024 programs of 16 columns 4 warps
    are faster than 8; at 256 or 8 programs 8 are)."""
    block = final_step_block(tuning, shape.N, programs, shape.num_columns)
    if block.programs(shape.N) > tuning.final_step_programs_per_sm * device.cores:
        return max(1, tuning.final_step_warps // 2)
    return tuning.final_step_warps


def extra_waves_allowed(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning,
                        programs: int) -> int:
    """Waves beyond the fewest that a timed config may take: each costs about two load
    round trips, allowed while that stays within `wave_cost_share` of the kernel's DRAM
    time (4096x4096 bf16: none; 576000x384 fp32: seven)."""
    seconds = fused_dram_seconds(shape, device, programs)
    return int(tuning.wave_cost_share * seconds // (2 * tuning.load_round_trip_s))


#: How a row is walked: one padded tile ("persistent"; "aligned": one row a block, read
#: and written as whole 16-byte vectors from the boundary before its start), column tiles
#: looped at run time ("looped"), unrolled register tiles one row a block ("unrolled"), a
#: LayerNorm row kept in its register tiles between the passes ("kept"), or short rows
#: kept in their tiles in row blocks ("short").
RowKind = Literal["persistent", "aligned", "looped", "unrolled", "kept", "short"]


@dataclasses.dataclass(frozen=True)
class RowLayout:
    """The row layout a plan is built on, and what differs between the kinds: how the
    programs are counted, the warps, the configs and their fewer program counts, and
    whether the L2 hint must fit. `block_m` is before the cap by M and the split size."""

    kind: RowKind
    tuning: CudaTuning  # the tuning the layout was chosen with (its tile, if it changed)
    r0_block: int
    block_m: int
    groups: int = 1
    register_tiles: int = 0
    #: Elements of a 16-byte vector of an aligned row: its row programs are a multiple of
    #: it, so that every row a program walks starts at the same shift from a vector.
    vector: int = 0

    @property
    def column_tiled(self) -> bool:
        return self.kind not in ("persistent", "aligned")

    @property
    def keep_rows(self) -> bool:
        """The second pass takes the first pass's row values from registers."""
        return self.kind in ("kept", "short")

    @property
    def block_partials(self) -> bool:
        """The partials are whole row blocks, folded once a program (short rows)."""
        return self.kind == "short"

    @property
    def row_registers(self) -> bool:
        """One row a block, its partials spread over a program's registers: the register
        file, not the workspace, bounds the programs, and the plan takes the most warps
        (short rows' row blocks are counted and warped like a persistent row's)."""
        return self.kind in ("unrolled", "kept")

    def programs(self, shape: ShapeInfo, device: DeviceInfo, block_m: int) -> int:
        if self.row_registers:
            return register_tiled_programs(shape, device, self.tuning, self.groups)
        if not self.vector:
            return programs_for(shape, device, self.tuning, block_m)
        return self.on_vectors(programs_for(shape, device, self.tuning, block_m,
                                            double_buffered=False))

    def on_vectors(self, programs: int) -> int:
        """An aligned row's program count: rounded down to a multiple of the vector (at
        least one vector), so each program's rows share one shift."""
        return max(self.vector, programs // self.vector * self.vector)

    def block_warps(self, shape: ShapeInfo, rows: int) -> int:
        """Warps of a block of `rows` rows: one 16-byte vector a thread of each short-row
        tile, else one warp per `elems_per_warp` elements of the tile (at least 2)."""
        if self.block_partials:
            return vector_warps(shape, rows, self.r0_block)
        if self.vector:
            # Eight vectors a thread of x and of dy in flight: at 8192 lanes 4 warps are
            # faster than 8.
            return max(2, rows * self.r0_block // (32 * 8 * self.vector))
        return max(2, rows * self.r0_block // self.tuning.elems_per_warp)

    def num_warps(self, shape: ShapeInfo, block_m: int, max_warps: int) -> int:
        if self.row_registers:
            # The partials' registers are spread over the program's threads: the most
            # warps leaves each thread the fewest, and the most loads in flight.
            return max_warps
        return max(2, min(max_warps, self.block_warps(shape, block_m)))

    def configs(self, shape: ShapeInfo, device: DeviceInfo, block_m: int,
                max_warps: int) -> tuple[Config, ...]:
        """The configs to time; none for looped tiles (Inductor's loop is not tuned)."""
        if self.kind == "looped":
            return ()
        if self.row_registers:
            return register_tiled_configs(self.r0_block, max_warps,
                                          rows_in_l1(shape, device, self.tuning, self.groups))
        # Short rows' code is unrolled for their tile: R0_BLOCK is fixed.
        return row_block_configs(block_m, max_warps,
                                 lambda rows: self.block_warps(shape, rows),
                                 self.r0_block if self.block_partials else None)

    def fewer_program_counts(self, shape: ShapeInfo, device: DeviceInfo, programs: int,
                             block_m: int) -> tuple[int, ...]:
        if self.row_registers:
            return fewer_register_tiled_programs(shape, device, self.tuning, programs,
                                                 self.groups)
        fewer = fewer_programs(shape, device, self.tuning, programs, block_m, self.r0_block)
        if self.vector:
            fewer = tuple(sorted({self.on_vectors(count) for count in fewer} - {programs},
                                 reverse=True))
        return fewer

    def scaled_warps(self, device: DeviceInfo, counts: Iterable[int], max_warps: int
                     ) -> dict[int, int] | None:
        """Warp factors that keep the plan's threads per SM at fewer programs: only for
        register-held partials (`register_tiled_scaled_warps`)."""
        if not (self.row_registers and self.tuning.register_tiled_scaled_warps):
            return None
        return {count: warps_at(device, self.tuning, count, self.groups) // max_warps
                for count in counts}

    def l2_hint_fits(self, shape: ShapeInfo, device: DeviceInfo, programs: int,
                     block_m: int) -> bool:
        """Register-held rows hint into L2 only what fits it (`hint_fits_l2`)."""
        return (not self.row_registers
                or hint_fits_l2(shape, device, self.tuning, programs * self.groups, block_m))


def row_layout(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning,
               options: PlanOptions) -> RowLayout:
    """The row's layout: column tiles (unrolled when a register layout fits, else looped)
    when the row is too long or too large for a persistent row; else kept LayerNorm
    tiles, short rows' kept tiles in row blocks, or one padded tile."""
    pow2_n = next_pow2(shape.N)
    if shape.N > options.max_persistent_n or not persistent_fits(shape, device, tuning):
        tiled, groups, tiles = register_layout(shape, device, tuning)
        if tiles:
            return RowLayout("unrolled", tiled, r0_block=min(tiled.register_tile, pow2_n),
                             block_m=1, groups=groups, register_tiles=tiles)
        return RowLayout("looped", tiled, r0_block=min(tiled.column_tile, pow2_n),
                         block_m=tiled.column_tiled_block_m)
    if kept := kept_row_tiles(shape, tuning, options):
        kept_tuning, groups, tiles = register_layout(
            shape, device, dataclasses.replace(tuning, register_tile=tuning.kept_row_tile))
        if (groups, tiles) == (1, kept):
            return RowLayout("kept", kept_tuning,
                             r0_block=min(kept_tuning.register_tile, pow2_n), block_m=1,
                             register_tiles=kept)
    elif short := short_row_tiles(shape, device, tuning, options):
        return RowLayout("short", tuning, r0_block=tuning.short_row_tile,
                         block_m=short_row_block(shape, tuning.short_row_tile),
                         register_tiles=short)
    if vector := aligned_row_vector(shape, tuning, options):
        return RowLayout("aligned", tuning, r0_block=pow2_n, block_m=1, vector=vector)
    return RowLayout("persistent", tuning, r0_block=pow2_n,
                     block_m=max(1, min(64, tuning.tile_elems // pow2_n)))


def aligned_row_vector(shape: ShapeInfo, tuning: CudaTuning, options: PlanOptions) -> int:
    """Elements of the 16-byte vectors a persistent row is read and written in from the
    boundary before its start (0: none): 16-bit rows off 4 bytes (N odd), whose
    element-wise loads and stores bound the kernel by their instructions, of at least
    `aligned_row_min_n` columns (one row a block) and `aligned_row_min_rows_per_column`
    rows per column sum, contiguous and not split, with weights no wider than the rows
    (wider ones stay element-wise at every row's shifted columns)."""
    vector = 16 // shape.elem_bytes
    if (tuning.aligned_row_min_n <= 0 or shape.N < tuning.aligned_row_min_n
            or shape.elem_bytes != 2 or shape.N % 2 == 0 or shape.M_hint < vector
            or shape.weight_elem_bytes > shape.elem_bytes
            or shape.M_hint < tuning.aligned_row_min_rows_per_column * shape.num_columns
            or options.split_size is not None
            or shape.strided_bytes or shape.strided_column_bytes):
        return 0
    return vector


def aligned_row_extra(shape: ShapeInfo, layout: RowLayout) -> tuple[tuple[str, int], ...]:
    """An aligned row's `extra`: its vector, and its weights loaded once a program (at the
    row's shifted columns they are element-wise: as many load instructions a row as its x
    and dy vectors)."""
    if not layout.vector:
        return ()
    return ((ROW_VECTOR_KEY, layout.vector),) + (
        ((WEIGHTS_ONCE_KEY, 1),) if shape.weight_elem_bytes else ())


def row_sum_unroll(shape: ShapeInfo, tuning: CudaTuning, tiles: int, groups: int) -> int:
    """Unroll factor of a column-grouped row's run-time row-sum loop over its `tiles`: the
    tuning's, where it divides the tiles, they are at least its minimum and the group has
    at most its column sums; else 1."""
    unroll = tuning.grouped_row_sum_unroll
    if (groups == 1 or tiles % unroll or tiles < tuning.grouped_row_sum_unroll_min_tiles
            or shape.num_columns > tuning.grouped_row_sum_unroll_max_columns):
        return 1
    return unroll


def plan(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning,
         options: PlanOptions) -> LaunchPlan:
    if shape.strided_bytes or shape.strided_column_bytes:
        tuning = dataclasses.replace(tuning, tile_elems=tuning.strided_tile_elems,
                                     programs_per_sm=tuning.strided_programs_per_sm)
    layout = row_layout(shape, device, tuning, options)
    tuning, r0_block, groups = layout.tuning, layout.r0_block, layout.groups
    column_tiled = layout.column_tiled
    block_m = min(layout.block_m, next_pow2(shape.M_hint))
    split_size = options.split_size
    if split_size is not None:
        block_m = min(block_m, prev_pow2(split_size))
        rows = max(block_m, -(-split_size // block_m) * block_m)
        programs = max(1, -(-shape.M_hint // rows))
    else:
        programs = layout.programs(shape, device, block_m)
    max_warps = warps_at(device, tuning, programs, groups)
    num_warps = layout.num_warps(shape, block_m, max_warps)
    # An aligned row's loads are not double-buffered: aligned rows are measured only
    # without it.
    prefetch = layout.kind != "aligned" and use_prefetch(shape, device, tuning, r0_block,
                                                         block_m, programs, column_tiled)
    configs: tuple[Config, ...] = ()
    if not device.interpreted or tuning.autotune_on_cpu:
        configs = layout.configs(shape, device, block_m, max_warps)
    if len(configs) == 1:
        # One config is not autotuned: the kernel runs the plan's own XBLOCK and warps, so
        # they must be that config (else a tile_elems of 32768 at N=1024 leaves block_m 32
        # at 8 warps, which no config holds, and the kernel spills).
        fixed = dict(configs[0])
        block_m, num_warps = int(fixed["XBLOCK"]), int(fixed["num_warps"])
    fewer: tuple[int, ...] = ()
    if configs and split_size is None and tuning.row_order == "strided":
        fewer = layout.fewer_program_counts(shape, device, programs, block_m)
    if fewer:
        configs = with_program_counts(configs, (programs, *fewer),
                                      layout.scaled_warps(device, fewer, max_warps))
    l2_prefetch = l2_prefetch_for(device, tuning, double_buffered=prefetch)
    if not layout.l2_hint_fits(shape, device, programs, block_m):
        l2_prefetch = 0
    unrolled_sums = groups == 1 or not tuning.grouped_row_sum_loop
    final_step = None
    if tuning.generated_final_step:
        final_step = final_step_block(
            tuning, shape.N, programs, shape.num_columns,
            warps=final_step_warps_for(shape, device, tuning, programs))
    return LaunchPlan(
        target="cuda", programs=programs, block_m=block_m, r0_block=r0_block,
        extra=aligned_row_extra(shape, layout),
        num_warps=num_warps, num_stages=1, row_loop=tuning.row_order,
        column_tiled=column_tiled, register_tiles=layout.register_tiles,
        column_groups=groups,
        unroll_row_sums=unrolled_sums,
        row_sum_stages=0 if unrolled_sums else tuning.grouped_row_sum_stages,
        row_sum_unroll=1 if unrolled_sums else row_sum_unroll(shape, tuning,
                                                              layout.register_tiles, groups),
        keep_row_tiles=layout.keep_rows, block_partials=layout.block_partials,
        configs=configs,
        prefetch=prefetch, l2_prefetch=l2_prefetch, l2_keep_fraction=tuning.l2_keep_fraction,
        final_step_pdl=tuning.final_step_pdl and device.hopper_or_later,
        max_extra_waves=extra_waves_allowed(shape, device, tuning, programs) if configs else None,
        final_step=final_step, accumulator=shape.accumulator,
        row_sum_chunk=min(tuning.row_sum_chunk, r0_block) if column_tiled else 1,
        stream_stores=column_tiled and tuning.stream_column_tiled_stores,
        unpin_row_loads=bool(layout.register_tiles) and tuning.unpin_register_tiled_rows)


def with_segments(plan_: LaunchPlan, segments: int, M_hint: int,
                  interleaved: bool = False) -> LaunchPlan:
    """The plan with its programs laid out per sample for segmented column reductions:
    about as many programs as planned, a whole number per sample, none with no row block
    of its sample to walk. Samples of contiguous rows leave the register double
    buffering off (adaLN: its next-block loads are written for one row range over all M
    rows); interleaved ones keep it (the next block's rows are t * B + seg) but drop the
    L2 hint (it hints a run of adjacent rows, which is not the next row block)."""
    segmented = dataclasses.replace(plan_, segments=segments,
                                    prefetch=plan_.prefetch and interleaved,
                                    interleaved_segments=interleaved,
                                    l2_prefetch=0 if interleaved else plan_.l2_prefetch)
    blocks = max(1, segmented.row_blocks_per_segment(M_hint))
    per_segment = max(1, min(blocks, -(-plan_.programs // segments)))
    # Per-sample row ranges are laid out for one program count: the configs keep the plan's.
    configs = tuple(dict.fromkeys(tuple(item for item in config if item[0] != PROGRAMS_KEY)
                                  for config in plan_.configs))
    return dataclasses.replace(segmented, programs=segments * per_segment, configs=configs)


def fits(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning,
         options: PlanOptions) -> tuple[bool, str]:
    """Any row fits: too long a row takes the column-tiled path."""
    return True, ""


def profitable(shape: ShapeInfo, plan_: LaunchPlan, device: DeviceInfo, tuning: CudaTuning,
               options: PlanOptions) -> tuple[bool, str]:
    """Fuse when the calibrated cost model (cost.py) predicts the fused kernel faster
    than what stock torch.compile runs instead; the detail gives its times either way."""
    est = cost.estimate(shape, plan_, device, tuning, options)
    return est.fuse, est.describe()
