"""Norm cases the torch_npu checks run with default options (no always_fuse), and what the
roofline says of each: check_npu.py asserts the cost model's decision agrees, and
test_npu_cost.py that the expectation is set for every case.

The roofline (bench/ascend_model.py) prices bytes only. It speaks where its assumption
holds: every vector core busy, where the data time dominates both ways and fusing wins iff
it moves fewer bytes (the [M, N] inputs read once, the workspace written and read back; a
looped column-tiled row's second pass and workspace adds at the share of HBM the cost
model assumes for them); and where the whole group has fewer rows than vector cores,
launch-bound, where both ways are two launches and the fused one has the fewer programs,
a workspace row per program and a final step: fusing loses. Between the two (fewer
programs than cores, though rows enough) it gives no expectation.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

from inductor_ext import plan_inputs
from inductor_ext.plan import DeviceInfo, PlanOptions, ShapeInfo, device_info
from inductor_ext.targets.ascend import plan as ascend_plan
from inductor_ext.targets.ascend.tuning import AscendTuning

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bench"))
from ascend_model import fused_roofline_bytes  # noqa: E402  (the roofline script's)

#: (op, dtype, N, M) of check_npu's default-options subset: 1024 rows (row blocks for
#: every vector core of each SoC: N = 768 takes 2 to 8 rows per block; more rows only
#: slow the interpreter, RMSNorm at 4096 rows takes about 83 s), and 33 rows (fewer than any
#: SoC's vector cores). check_npu runs those whose (op, dtype, N) its selected cases have
#: (--quick: bf16, N 768 / 8192).
COST_CASES = (("rms", "bf16", 768, 1024), ("ln", "bf16", 768, 1024),
              ("ln", "fp32", 768, 1024), ("rms", "bf16", 768, 33),
              ("ln", "bf16", 8192, 33), ("ln_nobias", "fp32", 4096, 33))


#: The cost model's three times, as its detail gives them (targets/ascend/cost.py).
TIMES = re.compile(r"fused ([\d.]+) us \+ final step ([\d.]+) us vs unfused ([\d.]+) us")


def case_name(op: str, dname: str, N: int, M: int) -> str:
    return f"default-options-{op}-{dname}-N{N}-M{M}"


def roofline_expectation(shape: ShapeInfo, device: DeviceInfo,
                         tuning: AscendTuning | None = None,
                         options: PlanOptions | None = None) -> bool | None:
    """Whether the roofline expects fusing to pay (None: it does not say), for a group
    the hook described as `shape` on `device`."""
    tuning, options = tuning or AscendTuning(), options or PlanOptions()
    cores = ascend_plan.vector_cores(device, options)
    if shape.M_hint < cores:
        return False
    plan = ascend_plan.plan(shape, device, tuning, options)
    if plan.programs < cores:
        return None
    return fused_roofline_bytes(shape, plan, tuning) < shape.unfused_bytes



def expectation_for(shape: ShapeInfo) -> bool | None:
    """`roofline_expectation` on the device, tuning and options the hook planned with."""
    return roofline_expectation(shape, device_info(shape.device),
                                plan_inputs.tuning_for("ascend"), plan_inputs.plan_options())


@contextlib.contextmanager
def decisions() -> Iterator[list[tuple[ShapeInfo, Any, Any]]]:
    """Yields a list that fills with (shape, reason, verdict) of every group the hook plans
    inside the block (reason None: fused)."""
    from inductor_ext.scheduler import hook

    seen: list[tuple[ShapeInfo, Any, Any]] = []
    original = hook.plan_candidate

    def record(cand: Any) -> Any:
        out = original(cand)
        if out[1] is not None:
            seen.append((out[1], out[2], out[3]))
        return out

    hook.plan_candidate = record
    try:
        yield seen
    finally:
        hook.plan_candidate = original
