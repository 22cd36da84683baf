"""The CUDA cost model: predicted time of the fused kernel and of what stock
torch.compile would run instead, with constants calibrated on an H100 sweep
(bench/results/cost_sweep_h100.csv, fitted by bench/fit_cost_model.py; the test
tests/test_cost_model.py checks the model's decision against every row of it).

Fused: a fixed overhead (two launches: the fused kernel and the final step) plus its bytes
(the [M, N] traffic, the workspace written and read back) at a calibrated share of the
device's DRAM bandwidth; looped column tiles are latency-bound instead (a few dependent
round trips per column tile of each row block). Stock: the better of Inductor's unfused
kernels (the shared [M, N] inputs read twice) and, where its gates let it, upstream's own
mix-order kernel (read once, at a lower efficiency than ours), each with its overhead.
"""

from __future__ import annotations

import dataclasses

from .device import DeviceInfo
from .options import PlanOptions
from .tuning import CudaTuning
from .types import LaunchPlan, ShapeInfo


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Predicted seconds of each way to run a group, and the decision they give."""

    fused_s: float
    unfused_s: float
    upstream_s: float | None  # None: upstream's gates decline the shape
    why_not: str = ""  # a structural reason that overrides the times ("" if none)

    @property
    def stock_s(self) -> float:
        return min(self.unfused_s, self.upstream_s or self.unfused_s)

    @property
    def fuse(self) -> bool:
        return not self.why_not and self.fused_s < self.stock_s

    def describe(self) -> str:
        upstream = "declined" if self.upstream_s is None else f"{self.upstream_s * 1e6:.1f} us"
        return (f"fused {self.fused_s * 1e6:.1f} us vs unfused {self.unfused_s * 1e6:.1f} us, "
                f"upstream mix-order {upstream}" + (f": {self.why_not}" if self.why_not else ""))


def upstream_would_fuse(shape: ShapeInfo, gates: str) -> bool:
    """Whether stock torch.compile's own mix-order reduction takes this shape (its gates
    as of each torch release, see compat.upstream_mix_order_gates)."""
    if gates == "none" or shape.N > 16384 or not shape.M_static:
        return False
    M, N = shape.M_hint, shape.N
    big = M * N >= 5 * 2**20 and M >= 4096
    return big and (gates == "relaxed" or M >= 2 * N)


def strided_run_bytes(shape: ShapeInfo, plan: LaunchPlan) -> int:
    """Bytes of a strided operand one row block reads contiguously (its rows are adjacent
    in memory): what one 32-byte sector of such a load carries at most."""
    return plan.block_m * shape.elem_bytes


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
        fused = max(fused, blocks_per_program * tuning.load_round_trip_s)
    unfused = tuning.unfused_overhead_s + ((shape.total_bytes + shape.shared_bytes)
                                           / (bw * tuning.unfused_efficiency))
    upstream = None
    if upstream_would_fuse(shape, options.upstream_gates):
        upstream = tuning.upstream_overhead_s + (shape.total_bytes
                                                 / (bw * tuning.upstream_efficiency))
    why_not = ""
    if rows_per_program < tuning.min_rows_per_program:
        why_not = (f"only {rows_per_program} rows per program: a workspace row per program "
                   "and the final step outweigh the second read they save")
    elif shape.strided_bytes and strided_run_bytes(shape, plan) < tuning.strided_min_run_bytes:
        why_not = (f"{shape.strided_bytes} B of operands read with a stride along the row, "
                   f"{strided_run_bytes(shape, plan)} contiguous bytes per row block: "
                   "uncoalesced loads in the fused row loop")
    return Estimate(fused_s=fused, unfused_s=unfused, upstream_s=upstream, why_not=why_not)
