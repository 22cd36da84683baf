"""The CUDA target's tuning knobs: frozen defaults, each with the reason for it (the
measurements behind them are in bench/NOTES.md; a user changes a knob through
`inductor_ext.config.tuning`, part of the cache key). Each knob declares the range its
planner needs beside its default (`knob`: tiles and warps a power of two, counts and
times >= 0, efficiencies in (0, 1]); `Tuning` checks it when set."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ...plan.knobs import Tuning, knob


@dataclasses.dataclass(frozen=True)
class CudaTuning(Tuning):
    """The CUDA target's planning choices (measurements in bench/NOTES.md)."""

    TARGET: ClassVar[str] = "cuda"

    #: Elements of one [BLOCK_M, R0_BLOCK] tile at the largest config (configs also try a
    #: half and a quarter of it): loads in flight per program vs fp32 accumulators.
    tile_elems: int = knob(8192, pow2=True)
    #: Resident programs per SM at most (the workspace has one row per program).
    programs_per_sm: int = knob(4, low=1)
    #: Persistent rows' configs are also timed at this many programs per SM (0: never),
    #: each config at both counts: a config whose registers let only 3 blocks of 4 reside
    #: runs `programs_per_sm` in 1.3 waves, and can be faster at 3. The register count is
    #: known only once compiled, so the autotuner picks.
    fewer_programs_per_sm: int = knob(3, low=0)
    #: Register-tiled rows' configs are also timed at every whole number of programs per
    #: SM below the plan's, down to one (False: the plan's count only): their count comes
    #: from the partials' registers, but the compiled code may hold fewer blocks an SM
    #: and run the grid in two waves.
    register_tiled_fewer_programs: bool = knob(True)
    #: At those fewer counts the configs are also timed at the warps that keep the
    #: threads per SM of the plan's count (the partials then spread over more threads,
    #: fewer registers a thread); False: the plan's warps only.
    register_tiled_scaled_warps: bool = knob(True)
    #: Persistent row tiles of at least this many columns are also timed at every count
    #: per SM below `fewer_programs_per_sm`, down to one (0: never): such a tile leaves
    #: registers for only 1-2 blocks per SM, and more programs than fit run in extra
    #: waves with more workspace rows to fold; shorter tiles are slower at fewer programs.
    low_residency_r0_block: int = knob(8192, low=0)
    #: The same two for groups with an operand read with a stride along the row (a
    #: transposed input): a row block then reads it in runs of XBLOCK elements, so fewer,
    #: larger programs (twice the rows per tile, twice the warps) read longer runs and
    #: are faster than 4 per SM; one per SM at 32768 elements gains nothing over 2.
    strided_tile_elems: int = knob(16384, pow2=True)
    strided_programs_per_sm: int = knob(2, low=1)
    #: Workspace bytes written may cost at most this share of the kernel's own bytes;
    #: fewer programs per SM are used when they would (large N, few rows). Few rows per
    #: program are not compensated with more programs: with strided rows and double
    #: buffering, 132 programs of 31 rows are faster than 528 of 8 at 4096x4096.
    max_workspace_share: float = knob(0.02, low=0)
    #: ...or this share of the L2, when larger: a workspace that small is read back by the
    #: final step from L2, so a second program per SM (twice the loads in flight) costs
    #: next to no DRAM bytes (4096x4096 bf16: 256 programs instead of 128).
    max_workspace_l2_share: float = knob(0.25, low=0, high=1)
    #: Tile elements per warp for the middle num_warps choice.
    elems_per_warp: int = knob(512, pow2=True)
    #: Warps per SM the configs may fill when every program is resident (64 regs/thread).
    max_warps_per_sm: int = knob(32, low=1)
    #: Looped column-tiled kernels: row tile and rows per block.
    column_tile: int = knob(2048, pow2=True)
    column_tiled_block_m: int = knob(2, pow2=True)
    #: Column-tiled rows whose partials fit this share of the register file unroll their
    #: tiles (`register_tile` columns each, at most `max_register_tiles`) and keep every
    #: partial in registers across the row loop; the second pass re-reads the row from L1.
    register_partials_share: float = knob(0.5, low=0, high=1)
    register_tile: int = knob(4096, pow2=True)
    max_register_tiles: int = knob(16, low=1)
    #: LayerNorm rows (two column sums) that fit whole in registers but pad to a power of
    #: two run as register tiles of `kept_row_tile` columns instead, the second pass
    #: taking the first pass's row values: read once and padded less. Only rows of 2 to
    #: `kept_row_max_tiles` tiles with fewer lanes than the padded row, of elements of at
    #: most `kept_row_elem_bytes` bytes, starting on 16-byte vectors, in groups of at
    #: least `kept_row_min_elems` elements (smaller groups, fp32 and unaligned rows are
    #: slower as kept tiles); 0: never.
    kept_row_tile: int = knob(1024, low=0, pow2=True)
    kept_row_max_tiles: int = knob(5, low=2)
    kept_row_elem_bytes: int = knob(2, low=1)
    kept_row_min_elems: int = knob(16 * 2**20, low=0)
    #: ...and rows of at most this many tiles taking as many lanes as the padded row
    #: (N=1408: two tiles of 1024, one of 2048) too; 0: only rows the tiles pad less.
    #: Two such tiles are faster than the padded row; four are not, nor are unpadded rows
    #: (N=4096).
    kept_row_same_lanes_tiles: int = knob(2, low=0)
    #: Padded persistent rows that run as kept register tiles of this many columns in
    #: row blocks, their partials whole blocks: a row's sum stays inside one warp (no
    #: barrier) and pads to a whole tile, not the power of two (N=320: 5 tiles of 64);
    #: 0: never. They pay for 16-bit RMSNorm rows; LayerNorm, fp32, 14 tiles or more and
    #: fewer rows a program are slower...
    short_row_tile: int = knob(64, low=0, pow2=True)
    #: ...so only rows of at most this many tiles, this many column sums and elements of
    #: at most this many bytes, in programs of at least this many rows.
    short_row_max_tiles: int = knob(11, low=2)
    short_row_max_columns: int = knob(1, low=1)
    short_row_elem_bytes: int = knob(2, low=1)
    short_row_min_rows: int = knob(192, low=0)
    #: Persistent rows of 16-bit elements that start off 4 bytes (N odd) and of at least
    #: this many columns (one row a block), with weights no wider, are read and written
    #: as whole 16-byte vectors from the boundary before each row's start, every
    #: program's rows at one shift (row programs a multiple of 8; no double buffering);
    #: 0: never. Whole vectors are faster than element-wise accesses; fp32 weights would
    #: be read element-wise at every row's shifted columns, which costs more than the
    #: vectors save, so the weights may be no wider than the rows.
    aligned_row_min_n: int = knob(2049, low=0)
    #: ...and groups of at least this many rows per column sum: each program writes a
    #: workspace row per column sum, which LayerNorm's few rows (ln 1827x2451 and
    #: 1996x3089 fp16) do not repay at any program count; ln 2945 and 3098 rows do.
    aligned_row_min_rows_per_column: int = knob(1024, low=0)
    #: ...and rows whose partials or L1 bytes are too many for one program split their
    #: tiles over up to this many programs (column groups; each reads the whole row for
    #: the row sums, the second read of the row in L2 shared by the group); 1: never.
    #: `column_groups` > 0 takes that many wherever they fit (0: the fewest that fit;
    #: more only where fewer do not: 4 are slower than 2 at N=32768, and faster than
    #: looped tiles at 65536, where 2 do not fit).
    max_column_groups: int = knob(4, low=1)
    column_groups: int = knob(0, low=0)
    #: A row whose tiles no group count shares evenly halves its tile once, down to this.
    min_register_tile: int = knob(2048, pow2=True)
    #: Largest register tile of rows not a whole number of 16-byte vectors (0: no limit):
    #: their loads keep an address per element, and at 4096 every config spills.
    unaligned_register_tile: int = knob(2048, low=0, pow2=True)
    #: Rows split into column groups sum the row in a run-time loop over the tiles; the
    #: partials' tiles stay unrolled: unrolled row sums spill registers beside the
    #: partials. Rows in one group keep them unrolled, where the loop is the slower.
    grouped_row_sum_loop: bool = knob(True)
    #: ...and that loop's software-pipelining stages (0: not asked; Triton then issues a
    #: tile's loads only once the previous tile is summed; 2 stages through shared memory
    #: were slower at every measured shape) ...
    grouped_row_sum_stages: int = knob(0, low=0)
    #: ...and its unroll factor (1: none), taken only by rows of a multiple of it and at
    #: least `grouped_row_sum_unroll_min_tiles` tiles, with at most
    #: `grouped_row_sum_unroll_max_columns` column sums: two tiles' loads in flight gain
    #: at 8-16 tiles of RMSNorm; a remainder iteration (9 tiles) and 6 tiles lose, and so
    #: does LayerNorm, whose loop (two sums, three loads) spills more once unrolled.
    grouped_row_sum_unroll: int = knob(2, low=1)
    grouped_row_sum_unroll_min_tiles: int = knob(8, low=0)
    grouped_row_sum_unroll_max_columns: int = knob(1, low=0)
    #: Row sums of column-tiled rows fold runs of 8 columns (a thread's 16-byte vector of
    #: bf16) in registers before accumulating: a smaller accumulator, fewer registers
    #: (`rewrites.chunk_row_sums`).
    row_sum_chunk: int = knob(8, pow2=True)
    #: ...and their dx stores stream (`.cs`), leaving L2 to the rows still to be read
    #: (`rewrites.stream_row_stores`).
    stream_column_tiled_stores: bool = knob(True)
    #: ...and the row loads of register-tiled kernels lose Inductor's evict_last, which
    #: also pins in L2 rows that are read again only from L1 (`rewrites.unpin_row_loads`).
    unpin_register_tiled_rows: bool = knob(True)
    #: The interpreter would time every config by running it: off unless a test asks.
    autotune_on_cpu: bool = knob(False)
    #: One dependent DRAM load round trip under load (H100: about a microsecond).
    load_round_trip_s: float = knob(1e-6, above=0)
    #: A column-grouped row's row sums loop over the row's tiles at run time, one
    #: dependent load per tile: time per tile and row (the fused time over rows per
    #: program x (tiles + 1), at two grouped LayerNorm rows on an H100).
    grouped_row_tile_s: float = knob(0.6e-6, low=0)
    #: Rows (padded) whose loads are double-buffered in registers: past 8192 a second row
    #: block does not fit beside the partials; 128 is the shortest row it is known to pay
    #: at...
    prefetch_min_n: int = knob(128, low=1)
    prefetch_max_n: int = knob(8192, low=1)
    #: ...in programs that own at least this many rows.
    prefetch_min_rows: int = knob(16, low=0)
    #: ...or this many for row blocks of one row at one program per SM (few rows; 0:
    #: the rule above): one resident block has nothing else to hide a row's load round
    #: trip behind. Blocks of two LayerNorm rows are slower with it.
    prefetch_min_rows_alone: int = knob(2, low=0)
    #: Live bytes of one persistent row allowed per SM register file (past it: column
    #: tiles; LayerNorm at N=16384 spills).
    register_budget: float = knob(1.125, above=0)
    #: ...times this for rows of a length that is not a whole number of 16-byte vectors:
    #: their rows start unaligned, so the loads go element by element and each element
    #: keeps its own address (rms 2392x10167 fp16 spills as one persistent row, slower
    #: than stock; rms 17693x4918 bf16 at a padded 8192 fits).
    unaligned_register_share: float = knob(0.5, above=0, high=1)
    #: Spread the row blocks evenly: the fewest programs that still need the same number
    #: of iterations, so no program runs an iteration alone at the end.
    balance_rows: bool = knob(True)
    #: Configs whose extra waves would cost more than this share of the kernel's DRAM
    #: time are not timed (at LayerNorm 4096x4096 a second wave costs a tenth of the
    #: kernel's speed).
    wave_cost_share: float = knob(0.02, low=0)
    #: Final steps with more programs than this per SM run at half the warps.
    final_step_programs_per_sm: int = knob(4, low=0)
    #: Cost model (cost.py), fitted on the H100 sweep bench/results/
    #: cost_sweep_h100.csv by bench/fit_cost_model.py: fixed time and share of DRAM
    #: bandwidth of the fused kernel with its final step, of Inductor's unfused kernels,
    #: and of upstream's own mix-order kernel.
    fused_overhead_s: float = knob(3.2e-6, low=0)
    fused_efficiency: float = knob(0.881, above=0, high=1)
    unfused_overhead_s: float = knob(8.0e-6, low=0)
    unfused_efficiency: float = knob(0.747, above=0, high=1)
    upstream_overhead_s: float = knob(16.4e-6, low=0)
    upstream_efficiency: float = knob(0.801, above=0, high=1)
    #: Looped column tiles: one pass over one column tile of one row block (ln
    #: 2048x32768 bf16's time on an H100 over its 8 row blocks x 16 tiles x 2 passes per
    #: program).
    looped_tile_s: float = knob(2.4e-6, low=0)
    #: Rows split into column groups: each extra group's read of the shared [M, N] inputs
    #: (for its row sums), as a multiple of their DRAM time (fitted on the sweep's 4
    #: grouped rows: 0.55, most of it from L2).
    column_group_read_cost: float = knob(0.55, low=0)
    #: Fewer rows per program than this: a workspace row per program and the final step
    #: cost more than the second read saves (at 128x8192 one row a program is slower than
    #: stock, 16 rows a program faster).
    min_rows_per_program: int = knob(4, low=0)
    #: Strided operands (cost.py), fitted by bench/fit_cost_model.py on the sweep's
    #: transposed / contiguous pairs: the fused loop's time per contiguous run of one, as
    #: a multiple of a 32-byte sector's DRAM time (at the strided tiles above) ...
    strided_sector_cost: float = knob(0.96, low=0)
    #: ... and Inductor's unfused kernels' time per strided byte, as a multiple of its DRAM
    #: time, in the row kernel and, for the bytes it shares, in the column kernel as well.
    strided_row_kernel_cost: float = knob(0.20, low=0)
    strided_column_kernel_cost: float = knob(2.22, low=0)
    #: Strided groups fuse only when predicted below this share of stock: the lowest
    #: predicted ratio of a transposed pair measured slower fused, 1 while none is (every
    #: transposed pair of the H100 sweeps is faster fused at the strided tiles).
    strided_stock_share: float = knob(1.0, above=0)
    #: Column strips (split rows walked one piece per program, `ShapeInfo.walks_pieces`):
    #: their measured time over the fused model's on the transposed sum pairs, fitted on
    #: cost_sweep_strips_h100.csv. A program walks only 8-16 row blocks of one piece, so
    #: the loop's first loads and its tail are not hidden, and Inductor's second stage
    #: follows.
    strip_overhead_s: float = knob(11.6e-6, low=0)
    #: Unrolled column tiles read a row block's [M, N] inputs a second time from L1; they
    #: are used only when the block fits this share of the L1 (fp32 rows of 32768 do not,
    #: and run slower than stock), and two rows per iteration only when two do.
    register_rows_l1_share: float = knob(0.75, above=0, high=1)
    #: "contiguous": each program owns one chunk of rows; "strided": row block i goes to
    #: program i % programs, so the programs' loads advance through memory side by side.
    row_order: str = knob("strided", choices=("strided", "contiguous"))
    #: Row blocks ahead that each iteration hints into L2 (Hopper bulk prefetch); 0: none.
    #: Only in loops whose loads are not double-buffered in registers.
    l2_prefetch_distance: int = knob(1, low=0)
    #: ...in register-tiled row loops only while every program's hinted row block fits
    #: this share of the L2 together (`hint_fits_l2` in plan.py says why).
    register_tiled_hint_l2_share: float = knob(0.25, low=0)
    #: Off on CPU (no L2 to hint; the interpreter runs the hint as a no-op): tests turn it
    #: on to read the generated source and run the kernel that carries it.
    l2_prefetch_on_cpu: bool = knob(False)
    #: Share of a second-pass hint's lines that enter L2 as evict_last (0: the plain
    #: hint). Off: it gains with a clean L2 about what it loses with a dirty one.
    l2_keep_fraction: float = knob(0.0, low=0, high=1)
    #: Launch the final step early with programmatic dependent launch (sm_90 and later).
    final_step_pdl: bool = knob(True)
    #: Final step: columns per program, fp32 values per tile over all partials, warps.
    final_step_columns: int = knob(16, pow2=True)
    final_step_tile: int = knob(16384, low=1)
    final_step_warps: int = knob(8, pow2=True, high=32)
    #: Use the generated final step (False: one ATen reduce per output).
    generated_final_step: bool = knob(True)
