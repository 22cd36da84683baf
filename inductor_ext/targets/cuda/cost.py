"""The CUDA cost model: predicted time of the fused kernel and of what stock
torch.compile would run instead, with constants calibrated on an H100 sweep
(bench/results/cost_sweep_h100.csv, fitted by bench/fit_cost_model.py; the test
tests/test_cost_model.py checks the model's decision against every row of it).

Fused: a fixed overhead (two launches: the fused kernel and the final step) plus its bytes
(the [M, N] traffic, the workspace written and read back) at a calibrated share of the
device's DRAM bandwidth; looped column tiles are latency-bound instead (a few dependent
round trips per column tile of each row block); a row split into column groups pays for
the groups' extra reads of the row. Stock: the better of Inductor's unfused
kernels (the shared [M, N] inputs read twice) and, where its gates let it, upstream's own
mix-order kernel (read once, at a lower efficiency than ours), each with its overhead.

Operands read with a stride along the row (a transposed input) are priced, not ruled out:
the fused row loop pays per contiguous run of such an operand (one 32-byte sector request
per run, so narrow runs cost more than their bytes), Inductor's unfused kernels pay per
strided byte, more in a column kernel that mixes them with coalesced loads, and upstream's
mix-order declines them. Fitted from transposed / contiguous pairs of the same sweep; as
those pairs are few, a strided group fuses only with a margin (`strided_stock_share`).
"""

from __future__ import annotations

import dataclasses

from ...plan.device import DeviceInfo
from ...plan.options import PlanOptions
from ...plan.types import LaunchPlan, ShapeInfo
from .tuning import CudaTuning

#: Bytes of one DRAM sector: the unit a load request of a strided run fetches at least.
SECTOR_BYTES = 32


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Predicted seconds of each way to run a group, and the decision they give."""

    fused_s: float
    unfused_s: float
    upstream_s: float | None  # None: upstream's gates decline the shape
    why_not: str = ""  # a structural reason that overrides the times ("" if none)
    #: Fuse only when the fused time is below this share of stock's (1: any gain);
    #: below 1 where the model's error is larger than usual (strided operands).
    stock_share: float = 1.0

    @property
    def stock_s(self) -> float:
        return min(self.unfused_s, self.upstream_s or self.unfused_s)

    @property
    def fuse(self) -> bool:
        return not self.why_not and self.fused_s < self.stock_share * self.stock_s

    def describe(self) -> str:
        upstream = "declined" if self.upstream_s is None else f"{self.upstream_s * 1e6:.1f} us"
        margin = ("" if self.stock_share == 1.0 else
                  f" (strided operands: fuses below {self.stock_share:.2f} of stock)")
        return (f"fused {self.fused_s * 1e6:.1f} us vs unfused {self.unfused_s * 1e6:.1f} us, "
                f"upstream mix-order {upstream}{margin}"
                + (f": {self.why_not}" if self.why_not else ""))


def upstream_would_fuse(shape: ShapeInfo, gates: str) -> bool:
    """Whether stock torch.compile's own mix-order reduction takes this shape (its gates
    as of each torch release, see compat.upstream_mix_order_gates). It declines strided
    operands (stock times as upstream-off in all 16 transposed cases of the sweep)."""
    if gates == "none" or shape.N > 16384 or not shape.M_static or shape.strided_bytes:
        return False
    M, N = shape.M_hint, shape.N
    big = M * N >= 5 * 2**20 and M >= 4096
    return big and (gates == "relaxed" or M >= 2 * N)


def strided_run_bytes(shape: ShapeInfo, plan: LaunchPlan) -> int:
    """Bytes of a strided operand one row block reads contiguously: block_m elements
    where its rows are adjacent in memory, else one."""
    rows = plan.block_m if shape.strided_rows_adjacent else 1
    return rows * shape.strided_elem_bytes


def strided_fused_s(shape: ShapeInfo, plan: LaunchPlan, device: DeviceInfo,
                    tuning: CudaTuning) -> float:
    """Extra time of the fused row loop for its strided operands (the row side's and those
    only a column reads): a sector request per contiguous run, at `strided_sector_cost`
    times a sector's DRAM time."""
    strided = shape.strided_bytes + shape.strided_column_bytes
    if not strided:
        return 0.0
    requests = strided / strided_run_bytes(shape, plan)
    return tuning.strided_sector_cost * requests * SECTOR_BYTES / device.dram_bytes_per_s


def strided_unfused_s(shape: ShapeInfo, device: DeviceInfo, tuning: CudaTuning) -> float:
    """Extra time of Inductor's unfused kernels for the strided operands: the row kernel
    reads them all, the column kernel those it shares (mixed with coalesced loads)."""
    return ((tuning.strided_row_kernel_cost * shape.strided_bytes
             + tuning.strided_column_kernel_cost * shape.strided_shared_bytes)
            / device.dram_bytes_per_s)


def column_group_s(shape: ShapeInfo, plan: LaunchPlan, device: DeviceInfo,
                   tuning: CudaTuning) -> float:
    """Extra time of a row split into column groups: every group's program reads the
    whole row for its row sums, so the shared [M, N] inputs are read `groups - 1` more
    times (from L2 when the groups keep pace), at `column_group_read_cost` times their
    DRAM time."""
    extra_reads = (plan.column_groups - 1) * shape.shared_bytes
    return tuning.column_group_read_cost * extra_reads / device.dram_bytes_per_s


def estimate(shape: ShapeInfo, plan: LaunchPlan, device: DeviceInfo, tuning: CudaTuning,
             options: PlanOptions) -> Estimate:
    bw = device.dram_bytes_per_s
    workspace = plan.workspace_bytes(shape)
    fused = tuning.fused_overhead_s + ((shape.total_bytes + 2 * workspace)
                                       / (bw * tuning.fused_efficiency))
    rows_per_program = plan.rows_per_program(shape.M_hint)
    blocks_per_program = rows_per_program // plan.block_m
    if plan.looped_column_tiles:
        # Each column tile of each row block: two passes of dependent loads plus the
        # workspace read-modify-write, one row block in flight per program.
        tiles = -(-shape.N // plan.r0_block)
        fused = max(fused, 2 * blocks_per_program * tiles * tuning.looped_tile_s)
    elif plan.register_tiles:
        per_block = tuning.load_round_trip_s
        if not plan.unroll_row_sums:
            # The row sums loop over every tile of the row, one load after the other
            # (the loop is not pipelined), then the group's own tiles: one round trip.
            per_block = plan.register_tiles * tuning.grouped_row_tile_s + per_block
        fused = max(fused, blocks_per_program * per_block)
        fused += column_group_s(shape, plan, device, tuning)
    fused += strided_fused_s(shape, plan, device, tuning)
    if shape.walks_pieces:
        fused += tuning.strip_overhead_s
    unfused = (tuning.unfused_overhead_s + strided_unfused_s(shape, device, tuning)
               + (shape.total_bytes + shape.shared_bytes) / (bw * tuning.unfused_efficiency))
    upstream = None
    if upstream_would_fuse(shape, options.upstream_gates):
        upstream = tuning.upstream_overhead_s + (shape.total_bytes
                                                 / (bw * tuning.upstream_efficiency))
    why_not = ""
    if rows_per_program < tuning.min_rows_per_program:
        why_not = (f"only {rows_per_program} rows per program: a workspace row per program "
                   "and the final step outweigh the second read they save")
    return Estimate(fused_s=fused, unfused_s=unfused, upstream_s=upstream, why_not=why_not,
                    stock_share=(tuning.strided_stock_share
                                 if shape.strided_bytes or shape.strided_column_bytes
                                 else 1.0))
