"""What matching asks of a row's target before a column joins it (legality.check_target,
check_together): the accumulator dtype, a per-sample row loop, one sample count per group.
A pair failing them is declined with its reason and the column stays in the pool."""

import dataclasses
from types import SimpleNamespace

import pytest
import sympy
import torch

from inductor_ext import plan as planning
from inductor_ext.scheduler import legality
from inductor_ext.scheduler.match import ColumnReduction


def _column(name: str, dtype: torch.dtype = torch.float32, segments: int = 1):
    node = SimpleNamespace(get_name=lambda: f"op_{name}", ancestors=set(),
                           node=SimpleNamespace(get_name=lambda: name))
    return ColumnReduction(out_node=node, absorbed=(node,), reduction_type="sum",
                           numel=sympy.Integer(32), rnumel=sympy.Integer(64),
                           unsplit=SimpleNamespace(src_dtype=dtype), segments=segments)


@pytest.mark.parametrize("target,dtype,expected", [
    ("cuda", torch.float64, None),
    ("cuda", torch.bfloat16, None),
    ("ascend", torch.float32, None),
    ("ascend", torch.float64, ("unsupported_dtype", "buf0 accumulates in torch.float64, "
                               "which the ascend flavor cannot generate")),
])
def test_accumulator_is_the_targets(target, dtype, expected):
    planner = planning.planner_for(target)
    assert legality.check_target(_column("buf0", dtype), 1, planner) == expected


def test_per_sample_partials_need_a_per_sample_row_loop():
    col = _column("buf1")
    assert legality.check_target(col, 4, planning.planner_for("cuda")) is None
    assert legality.check_target(col, 4, planning.planner_for("ascend")) is None
    # A target registered without a per-sample layout (Planner.segments None).
    bare = dataclasses.replace(planning.planner_for("ascend"), segments=None)
    assert legality.check_target(col, 4, bare) == (
        "segmented_unsupported",
        "buf1 reduces per sample; the ascend target has no per-sample row loop")
    assert legality.check_target(col, 1, bare) is None


def test_one_sample_count_per_group():
    group = [_column("dw"), _column("dscale", segments=2)]
    assert legality.check_together(_column("db"), group) is None
    assert legality.check_together(_column("dshift"), group, segments=2) is None
    assert legality.check_together(_column("dgate"), group, segments=3) == (
        "segmented_unsupported", "dgate has 3 samples, another column of the group 2")
    assert legality.check_together(_column("dgate"), [_column("dw")], segments=3) is None
