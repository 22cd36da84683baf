"""The Ascend width table (bench/ascend_width_table.py, committed under bench/results): it
is what planning decides today, the training widths fuse with default options, and no
width is declined that some plan the target can emit fits and models faster."""

from __future__ import annotations

import csv
import os
import pathlib
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import ascend_width_table as widths  # noqa: E402
from ascend_model import shape_info  # noqa: E402

from inductor_ext.plan import LaunchPlan, PlanOptions  # noqa: E402
from inductor_ext.plan.types import next_pow2, prev_pow2  # noqa: E402
from inductor_ext.targets.ascend import (
    cost,  # noqa: E402
    ub,  # noqa: E402
)
from inductor_ext.targets.ascend import plan as ascend_plan  # noqa: E402
from inductor_ext.targets.ascend.tuning import AscendTuning  # noqa: E402

COMMITTED = pathlib.Path(__file__).resolve().parents[1] / "bench" / "results" / \
    "ascend_width_table.csv"


@pytest.fixture(scope="module")
def rows() -> list[widths.Row]:
    return widths.table()


def test_committed_table_is_current(rows):
    """Regenerating the table gives the committed CSV, row for row (a planning change
    that moves a decision must commit the table it makes)."""
    with COMMITTED.open() as f:
        committed = list(csv.DictReader(f))
    now = [{k: str(v) for k, v in row.record().items()} for row in rows]
    assert len(committed) == len(now)
    for old, new in zip(committed, now):
        assert old == new


def _row(rows, soc, op, N, M=4096, dtype="bf16"):
    (row,) = [r for r in rows if (r.soc, r.op, r.N, r.M, r.dtype) == (soc, op, N, M, dtype)]
    return row


@pytest.mark.parametrize("op,N", [("rms", 3072), ("rms", 4096), ("ln", 2560), ("ln", 3072),
                                  ("ln", 1024)])
def test_training_widths_fuse_on_910b3(rows, op, N):
    row = _row(rows, "Ascend910B3", op, N, M=4096 if N != 1024 else 16384)
    assert row.fused and row.plan == "persistent", row
    assert row.fused_us + row.final_us < row.unfused_us


def test_socs_triton_ascend_does_not_target_are_declined_with_their_reason(rows):
    untargeted = [r for r in rows if r.soc in widths.UNTARGETED_SOCS]
    assert untargeted and all(not r.fused and r.reason == "unsupported_device"
                              for r in untargeted)
    assert all(r.reason != "unsupported_device" for r in rows if r.soc not in
               widths.UNTARGETED_SOCS)


def _every_plan(shape, device, tuning: AscendTuning, options: PlanOptions):
    """Every launch the torch_npu kernel can run the group with that fits the UB,
    enumerated independently of the planner: whole rows or looped tiles of any power of
    two from 256 up, with or without multibuffer, any power-of-two row block."""
    ub_bytes = ascend_plan.ub_bytes(device, tuning, options)
    tiles = [(shape.N, False)] if shape.N <= options.max_persistent_n else []
    cols = ub.MIN_COLUMN_TILE
    while cols <= min(tuning.npu_max_column_tile, max(prev_pow2(shape.N), cols)):
        tiles.append((cols, True))
        cols *= 2
    for cols, looped in tiles:
        for multibuffer in (True, False):
            block_m = 1
            while block_m <= min(tuning.max_block_m, next_pow2(shape.M_hint)):
                layout = ub.Layout(block_m=block_m, cols=cols,
                                   row_elem_bytes=shape.row_elem_bytes,
                                   partials=shape.num_columns, looped=looped,
                                   multibuffer=multibuffer,
                                   ub_class=ub.ub_class(device.ascend950))
                if ub.fits(layout, ub_bytes):
                    programs = min(device.cores, -(-shape.M_hint // block_m))
                    cfg = tuple(sorted({"block_m": block_m, "multibuffer": multibuffer,
                                        **({"cols": cols} if looped else {})}.items()))
                    yield LaunchPlan(target="ascend", programs=programs, block_m=block_m,
                                     r0_block=cols, num_warps=1, num_stages=1,
                                     row_loop="contiguous", column_tiled=looped,
                                     configs=(cfg,))
                block_m *= 2


def test_no_declined_width_has_a_faster_plan_that_fits(rows):
    """For each SoC class: a width declined `not_profitable` has no plan (of all the
    target can emit, enumerated here) that fits the UB and that the cost model prices
    faster than torch_npu's unfused kernels."""
    tuning, options = AscendTuning(), PlanOptions()
    devices = {(d.cores, d.ub_bytes, d.ascend950): d for d in widths.devices()
               if d.name not in widths.UNTARGETED_SOCS}
    checked = 0
    for device in devices.values():
        for row in (r for r in rows if r.soc == device.name and not r.fused):
            assert row.reason == "not_profitable", row
            shape = shape_info(row.op, row.M, row.N, widths.ES[row.dtype])
            for plan in _every_plan(shape, device, tuning, options):
                est = cost.estimate(shape, plan, device, device.cores, tuning, options)
                assert not est.fuse, (row, plan, est.describe())
            checked += 1
    assert checked > 0
