"""CUDA flavor (the default): strided row blocks over a few programs per SM, a
bounded set of launch configs timed by Inductor's autotuner, and a bytes-based
profitability model from the device's bandwidth, L2 size and SM count."""

from __future__ import annotations

import functools

import torch

from .. import compat
from .. import config as ext_config
from .flavor import LaunchPlan, ShapeInfo, TargetFlavor, next_pow2, prev_pow2, register


@functools.cache
def _sm_count(device: torch.device) -> int:
    if device.type == "cpu":
        return 2  # the interpreter runs programs one by one: few programs, fast tests
    try:
        return int(compat.device_properties(device).multi_processor_count or 1)
    except Exception:
        return 1


@functools.cache
def _l2_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        try:
            return int(torch.cuda.get_device_properties(device).L2_cache_size)
        except Exception:
            pass
    return 40 * 1024 * 1024


@functools.cache
def _register_file_bytes(device: torch.device) -> int:
    try:
        regs = compat.device_properties(device).regs_per_multiprocessor
    except Exception:
        regs = None
    return 4 * int(regs or 65536)


@functools.cache
def _dram_bytes_per_s(device: torch.device) -> float:
    return compat.dram_bytes_per_s(device) or 2.0e12


def _hopper_or_later(device: torch.device) -> bool:
    """NVIDIA sm_90+: the bulk L2 prefetch and programmatic dependent launch exist."""
    if device.type != "cuda" or torch.version.hip:
        return False
    try:
        return (compat.device_properties(device).major or 0) >= 9
    except Exception:
        return False


def _partial_bytes(shape: ShapeInfo) -> int:
    """One program's partials: one value per column per column reduction."""
    return shape.accumulator_bytes * shape.num_columns * shape.N


def _fused_dram_seconds(shape: ShapeInfo, programs: int) -> float:
    """The fused kernel's bytes, its workspace included, at the device's DRAM bandwidth."""
    return (shape.total_bytes + programs * _partial_bytes(shape)) / _dram_bytes_per_s(
        shape.device)


class CudaFlavor(TargetFlavor):
    name = "cuda"
    device_types = ("cuda", "xpu", "cpu")

    #: Elements of one [BLOCK_M, R0_BLOCK] tile at the largest config (configs also try a
    #: half and a quarter of it): loads in flight per program vs fp32 accumulators.
    tile_elems = 8192
    #: Resident programs per SM at most (the workspace has one row per program).
    programs_per_sm = 4
    #: Workspace bytes written may cost at most this share of the kernel's own bytes;
    #: fewer programs per SM are used when they would (large N, few rows). Few rows per
    #: program are not compensated with more programs: with strided rows and double
    #: buffering, 132 programs of 31 rows beat 528 of 8 at 4096x4096 (bench/NOTES.md).
    max_workspace_share = 0.02
    #: ...or this share of the L2, when larger: a workspace that small is read back by the
    #: final step from L2, so a second program per SM (twice the loads in flight) costs
    #: next to no DRAM bytes (4096x4096 bf16: 256 programs instead of 128, bench/NOTES.md).
    max_workspace_l2_share = 0.25
    #: Tile elements per warp for the middle num_warps choice.
    elems_per_warp = 512
    #: Warps per SM the configs may fill when every program is resident (64 regs/thread).
    max_warps_per_sm = 32
    #: Column-tiled kernels (rows longer than max_persistent_n): row tile and rows per block.
    column_tile = 2048
    column_tiled_block_m = 2
    #: Column-tiled rows whose partials fit this share of the register file unroll their
    #: tiles (`register_tile` columns each, at most `max_register_tiles`) and keep every
    #: partial in registers across the row loop; the second pass re-reads the row from L1.
    register_partials_share = 0.5
    register_tile = 4096
    max_register_tiles = 16
    #: Row sums of column-tiled rows fold runs of 8 columns (a thread's 16-byte vector of
    #: bf16) in registers before accumulating: [XBLOCK, R0_BLOCK / 8] fp32 instead of
    #: [XBLOCK, R0_BLOCK] across the tiles (LayerNorm 8192x16384: 10 spills -> 0, -6%).
    row_sum_chunk = 8
    #: ...and their dx stores stream (`.cs`): they no longer evict the rows hinted into L2
    #: for the next iteration nor the workspace (LayerNorm 8192x16384: -2%).
    stream_column_tiled_stores = True
    #: ...and the row loads of register-tiled kernels (the second pass reads L1) lose
    #: Inductor's evict_last, which also pinned the rows in L2 (LayerNorm 8192x16384: -2 us).
    unpin_register_tiled_rows = True
    #: The interpreter would time every config by running it: off unless a test asks.
    autotune_on_cpu = False
    #: One dependent DRAM load round trip under load (H100: about a microsecond).
    load_round_trip_s = 1e-6
    #: Rows (padded) whose loads are double-buffered in registers: past 8192 a second row
    #: block no longer fits beside the partials; 128 is the shortest row measured.
    prefetch_min_n = 128
    prefetch_max_n = 8192
    #: ...in programs that own at least this many rows.
    prefetch_min_rows = 16
    #: Live bytes of one persistent row (see `fits`) allowed per SM register file.
    register_budget = 1.125
    #: Spread the row blocks evenly: the fewest programs that still need the same number of
    #: iterations (4096 rows: 128 programs of 32 rows, not 4 of 32 and 128 of 31), so no
    #: program runs an iteration alone at the end while the rest of the GPU idles.
    balance_rows = True
    #: A config whose registers leave room for fewer programs per SM runs the grid in more
    #: waves, each paying a row load's latency at its start and the workspace store at its
    #: end (about two load round trips). Configs whose extra waves would cost more than
    #: this share of the kernel's DRAM time are not timed: Inductor's timings of them came
    #: within 3% of the resident ones and were sometimes picked (LayerNorm 4096x4096: 256
    #: programs in two waves, 0.83 -> 0.74 of copy; bench/NOTES.md, session 12).
    wave_cost_share = 0.02
    #: Final steps with more programs than this per SM run them at half the warps: at
    #: N=16384 (1024 programs of 16 columns) 4 warps took 8.4-8.9 us against 9.3-9.5 (ln)
    #: and 5.7 against 6.4-6.5 (rms); at 256 or 8 programs 8 warps were faster (rms
    #: 32768x4096 5.5 vs 6.2, ln 262144x128 3.7 vs 5.2; bench/NOTES.md, session 12).
    final_step_programs_per_sm = 4
    #: Fixed cost of the extra launch of the final step, in seconds.
    finalize_launch_s = 3e-6
    #: "contiguous": each program owns one chunk of rows; "strided": row block i goes to
    #: program i % programs, so the programs' loads advance through memory side by side.
    row_order = "strided"
    #: Row blocks ahead that each iteration hints into L2 with one bulk prefetch per [M, N]
    #: input (Hopper's `cp.async.bulk.prefetch.L2`, issued by one thread); 0: none. Only in
    #: loops whose loads are not double-buffered in registers: the hint holds no
    #: registers, so it reaches rows with no room for a second block (bench/NOTES.md).
    l2_prefetch_distance = 1
    #: Off on CPU (no L2 to hint; the interpreter runs the hint as a no-op): tests turn it
    #: on to read the generated source and run the kernel that carries it.
    l2_prefetch_on_cpu = False
    #: Launch the final step early with programmatic dependent launch (sm_90 and later):
    #: its launch latency then overlaps the fused kernel's last stores (bench/NOTES.md,
    #: session 8: ln 65536x1024 -4.5%, 4096x4096 -0.6 us).
    final_step_pdl = True

    #: One thread of the program prefetches [$1, $1 + $2) into L2, start and size rounded
    #: down to the 16 bytes the instruction needs (so the range never passes the block).
    L2_PREFETCH_ASM = (
        "{ .reg .pred p; .reg .u32 t, n; .reg .u64 a; mov.u32 t, %tid.x; "
        "setp.eq.u32 p, t, 0; and.b64 a, $1, -16; and.b32 n, $2, -16; "
        "@p cp.async.bulk.prefetch.L2.global [a], n; mov.u32 $0, 0; }")
    #: The same for rows read twice (column-tiled: the second pass re-reads the row), with
    #: the lines entering L2 as evict_last so that streaming traffic does not push them out
    #: before that second pass. Off by default (`l2_keep_fraction`): at ln 8192x16384 it
    #: gained 6.5% with a clean L2 before the kernel but lost 6.6% with a dirty one
    #: (bench/NOTES.md, session 8).
    L2_PREFETCH_ASM_KEEP = (
        "{ .reg .pred p; .reg .u32 t, n; .reg .u64 a, pol; mov.u32 t, %tid.x; "
        "setp.eq.u32 p, t, 0; and.b64 a, $1, -16; and.b32 n, $2, -16; "
        "createpolicy.fractional.L2::evict_last.b64 pol, 1.0; "
        "@p cp.async.bulk.prefetch.L2.global.L2::cache_hint [a], n, pol; mov.u32 $0, 0; }")
    #: Share of a second-pass hint's lines that enter L2 as evict_last (0: the plain hint).
    l2_keep_fraction = 0.0

    def persistent_fits(self, shape: ShapeInfo) -> bool:
        """A persistent row keeps, per row element, the fp32 accumulators and the upcast
        [M, N] tiles in registers; past `register_budget` of the SM's register file the
        kernel spills (LayerNorm at N=16384 did: 2 fp32 accumulators + x, dy, dx). Such rows
        take the column-tiled path, which the profitability model then weighs."""
        live = next_pow2(shape.N) * (shape.accumulator_bytes * shape.num_columns
                                     + 2 * shape.row_elem_bytes)
        return live <= self.register_budget * _register_file_bytes(shape.device)

    def programs_for(self, shape: ShapeInfo, block_m: int) -> int:
        """Programs: SMs x k with k the largest of 4, 2, 1 whose workspace stays within
        `max_workspace_share` of the bytes the kernel moves anyway (or within
        `max_workspace_l2_share` of the L2) and whose programs each keep at least
        `prefetch_min_rows` rows (fewer would turn the loads' double buffering off)."""
        sms = _sm_count(shape.device)
        budget = max(self.max_workspace_share * shape.total_bytes,
                     self.max_workspace_l2_share * _l2_bytes(shape.device))
        blocks = -(-shape.M_hint // block_m)
        per_sm = self.programs_per_sm
        while True:
            programs = self._programs(shape, sms * per_sm, blocks)
            if per_sm == 1 or (programs * _partial_bytes(shape) <= budget
                               and self._rows_to_double_buffer(shape, programs)):
                return programs
            per_sm //= 2

    def _programs(self, shape: ShapeInfo, most: int, blocks: int) -> int:
        """`most` programs, balanced over the row blocks when M is known at compile time."""
        return self.balanced(most, blocks) if shape.M_static else most

    def _rows_to_double_buffer(self, shape: ShapeInfo, programs: int) -> bool:
        """Each program owns enough rows for register double buffering to pay."""
        return shape.M_hint >= self.prefetch_min_rows * programs

    def balanced(self, programs: int, blocks: int) -> int:
        """At most `programs` programs for `blocks` row blocks; with `balance_rows`, the
        fewest that keep the most iterations per program unchanged."""
        programs = max(1, min(programs, blocks))
        if not self.balance_rows:
            return programs
        return -(-blocks // -(-blocks // programs))

    def register_tiles_for(self, shape: ShapeInfo) -> int:
        """Unrolled column tiles for a column-tiled row, or 0 when its partials (one fp32
        per column per partial) would take more than `register_partials_share` of the
        register file of one SM, or the row needs too many tiles."""
        tiles = -(-shape.N // min(self.register_tile, next_pow2(shape.N)))
        if (tiles > self.max_register_tiles
                or _partial_bytes(shape) > self.register_partials_budget(shape)):
            return 0
        return tiles

    def plan(self, shape: ShapeInfo, split_size: int | None) -> LaunchPlan:
        column_tiled = shape.N > ext_config.max_persistent_n or not self.persistent_fits(shape)
        register_tiles = self.register_tiles_for(shape) if column_tiled else 0
        if register_tiles:
            r0_block = min(self.register_tile, next_pow2(shape.N))
            block_m = 1
        elif column_tiled:
            r0_block = min(self.column_tile, next_pow2(shape.N))
            block_m = self.column_tiled_block_m
        else:
            r0_block = next_pow2(shape.N)
            block_m = max(1, min(64, self.tile_elems // r0_block))
        block_m = min(block_m, next_pow2(shape.M_hint))
        if split_size is not None:
            block_m = min(block_m, prev_pow2(split_size))
        if split_size is not None:
            rows = max(block_m, -(-split_size // block_m) * block_m)
            programs = max(1, -(-shape.M_hint // rows))
        elif register_tiles:
            programs = self.register_tiled_programs(shape)
        else:
            programs = self.programs_for(shape, block_m)
        sms = _sm_count(shape.device)
        max_warps = max(2, min(32, self.max_warps_per_sm * sms // max(1, programs)))
        if register_tiles:
            # The partials' registers are spread over the program's threads: the most warps
            # leaves each thread the fewest, and the most loads in flight.
            num_warps = max_warps
        else:
            num_warps = max(2, min(max_warps, block_m * r0_block // self.elems_per_warp))
        prefetch = self.use_prefetch(shape, r0_block, programs, column_tiled)
        configs: tuple[tuple[tuple[str, int], ...], ...] = ()
        if ((not column_tiled or register_tiles)
                and (shape.device.type != "cpu" or self.autotune_on_cpu)):
            if register_tiles:
                configs = self.register_tiled_configs(r0_block, max_warps)
            else:
                configs = self.candidate_configs(block_m, r0_block, max_warps)
        return LaunchPlan(target=self.name, programs=programs, block_m=block_m,
                          r0_block=r0_block, num_warps=num_warps, num_stages=1,
                          row_loop=self.row_order, column_tiled=column_tiled,
                          register_tiles=register_tiles, configs=configs,
                          prefetch=prefetch,
                          l2_prefetch=self.l2_prefetch_for(shape, double_buffered=prefetch),
                          final_step_pdl=self.final_step_pdl and _hopper_or_later(shape.device),
                          max_extra_waves=self.extra_waves_allowed(shape, programs)
                          if configs else None,
                          final_step_warps=self.final_step_warps_for(shape, programs),
                          accumulator=shape.accumulator)

    def final_step_warps_for(self, shape: ShapeInfo, programs: int) -> int:
        """`final_step_warps`, halved when the final step (over the workspace of `programs`
        rows) has more programs than `final_step_programs_per_sm` per SM."""
        block = self.finalize_block(shape.N, programs, shape.num_columns)
        if block is not None and (block.programs(shape.N)
                                  > self.final_step_programs_per_sm * _sm_count(shape.device)):
            return max(1, self.final_step_warps // 2)
        return self.final_step_warps

    def extra_waves_allowed(self, shape: ShapeInfo, programs: int) -> int:
        """Waves beyond the fewest that a timed config may take: each costs about two load
        round trips, allowed while that stays within `wave_cost_share` of the kernel's
        DRAM time (4096x4096 bf16: none; 576000x384 fp32: seven)."""
        seconds = _fused_dram_seconds(shape, programs)
        return int(self.wave_cost_share * seconds // (2 * self.load_round_trip_s))

    def register_partials_budget(self, shape: ShapeInfo) -> float:
        return self.register_partials_share * _register_file_bytes(shape.device)

    def register_tiled_programs(self, shape: ShapeInfo) -> int:
        """As many programs per SM as their register partials allow (at least one)."""
        fitting = int(self.register_partials_budget(shape) // _partial_bytes(shape))
        per_sm = max(1, min(self.programs_per_sm, fitting))
        programs = _sm_count(shape.device) * per_sm
        return self._programs(shape, programs, shape.M_hint)

    def register_tiled_configs(self, r0_block: int,
                               max_warps: int) -> tuple[tuple[tuple[str, int], ...], ...]:
        """Rows per iteration {1, 2} x warps {max/2, max}; the tile (R0_BLOCK) is fixed, the
        unrolled code is written for it."""
        out = [(("XBLOCK", xblock), ("R0_BLOCK", r0_block), ("num_warps", warps),
                ("num_stages", 1))
               for xblock in (1, 2) for warps in sorted({max(2, max_warps // 2), max_warps})]
        return tuple(out)

    def use_prefetch(self, shape: ShapeInfo, r0_block: int, programs: int,
                     column_tiled: bool) -> bool:
        """Double-buffer the loads of persistent rows when a program has enough iterations.
        Measured on H100 with strided rows (bench/NOTES.md): LayerNorm 16384x8192 -13%,
        N=128 -4..6%, 4096x4096 (31 rows per program) -3..12%."""
        return (not column_tiled and self.prefetch_min_n <= r0_block <= self.prefetch_max_n
                and self._rows_to_double_buffer(shape, programs))

    def l2_prefetch_for(self, shape: ShapeInfo, double_buffered: bool = False) -> int:
        """Row blocks ahead for the L2 hint (0: none). Not where the next block is already
        loaded into registers (it cost 0.3-1.3% there); the bulk prefetch exists from sm_90
        (Hopper) on; CPU has no L2 to hint (tests may turn it on)."""
        if self.l2_prefetch_distance <= 0 or double_buffered:
            return 0
        if shape.device.type == "cpu":
            return self.l2_prefetch_distance if self.l2_prefetch_on_cpu else 0
        return self.l2_prefetch_distance if _hopper_or_later(shape.device) else 0

    def l2_prefetch_statement(self, pointer: str, nbytes: str, second_pass: bool) -> str:
        asm = self.L2_PREFETCH_ASM
        if second_pass and self.l2_keep_fraction > 0:
            asm = self.L2_PREFETCH_ASM_KEEP.replace(
                "evict_last.b64 pol, 1.0;", f"evict_last.b64 pol, {self.l2_keep_fraction!r};")
        return (f"tl.inline_asm_elementwise({asm!r}, \"=r,l,r\", "
                f"[{pointer}, {nbytes}], dtype=tl.int32, is_pure=False, pack=1)")

    def pdl_trigger_statement(self) -> str:
        return "tl.extra.cuda.gdc_launch_dependents()"

    def pdl_wait_statement(self) -> str:
        return "tl.extra.cuda.gdc_wait()"

    def candidate_configs(self, block_m: int, r0_block: int,
                          max_warps: int) -> tuple[tuple[tuple[str, int], ...], ...]:
        """At most 9: rows per iteration {block_m, block_m/2, block_m/4} x warps {half, one,
        two} per `elems_per_warp` tile elements. Pipelining stages are not searched: the
        loads of this loop were not pipelined by Triton 3.6 (stages 1 and 2 timed alike)."""
        out = []
        for xblock in (block_m, block_m // 2, block_m // 4):
            if xblock < 1:
                continue
            mid = max(2, (xblock * r0_block) // self.elems_per_warp)
            for warps in sorted({max(2, mid // 2), mid, mid * 2}):
                if warps <= max_warps:
                    out.append((("XBLOCK", xblock), ("num_warps", warps), ("num_stages", 1)))
        return tuple(dict.fromkeys(out))

    def profitable(self, shape: ShapeInfo, plan: LaunchPlan) -> tuple[bool, str]:
        """Fuse when the bytes saved beat the bytes and launch added.

        Unfused, the column kernels read the shared [M, N] inputs a second time, but what
        still sits in L2 after the row kernel (about half of L2) costs no DRAM traffic.
        Fused, every program writes one workspace row per column reduction (read back from
        L2 by the final step) and the final step is one more launch.
        """
        rows_per_program = plan.rows_per_program(shape.M_hint)
        if rows_per_program < 4 * plan.block_m and plan.block_m < 64:
            return False, f"only {rows_per_program} rows per program"
        bw = _dram_bytes_per_s(shape.device)
        l2 = _l2_bytes(shape.device)
        second_read = max(0, shape.shared_bytes - l2 // 2)
        t_unfused = (shape.total_bytes + second_read) / bw
        t_fused = _fused_dram_seconds(shape, plan.programs) + self.finalize_launch_s
        if plan.register_tiles:
            # Unrolled tiles: a row block's loads are independent, one DRAM round trip per
            # row block; the second pass re-reads the block from L1.
            trips = rows_per_program // plan.block_m
            t_fused = max(t_fused, trips * self.load_round_trip_s)
        elif plan.column_tiled:
            # Two passes over each row block in column tiles, one dependent load round trip
            # per tile and a single row block in flight per program: latency-bound.
            tiles = -(-shape.N // plan.r0_block)
            trips = 2 * (rows_per_program // plan.block_m) * tiles
            t_fused = max(t_fused, trips * self.load_round_trip_s)
        if t_fused >= t_unfused:
            return False, (f"fused {t_fused * 1e6:.1f} us >= unfused {t_unfused * 1e6:.1f} us "
                           f"(second read {second_read} B after {l2 // 2} B of L2 reuse)")
        return True, ""

    def loop_header(self, plan: LaunchPlan) -> list[str]:
        P = plan.programs
        if plan.row_loop == "strided":
            return ["row_start = tl.program_id(0) * XBLOCK", "row_end = xnumel",
                    f"row_step = {P} * XBLOCK"]
        return [
            "row_blocks = (xnumel + XBLOCK - 1) // XBLOCK",
            f"rows_per_program = ((row_blocks + {P - 1}) // {P}) * XBLOCK",
            "row_start = tl.program_id(0) * rows_per_program",
            "row_end = tl.minimum(row_start + rows_per_program, xnumel)",
            "row_step = XBLOCK",
        ]

    def loop_statement(self, plan: LaunchPlan) -> str:
        return "for xoffset in tl.range(row_start, row_end, row_step):"


register(CudaFlavor())
