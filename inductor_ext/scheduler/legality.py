"""Decide which candidates the fused kernel can compute correctly, with a reason for each no.

Reason codes (a closed set, mirrored in ``inductor_ext.metrics.REASONS``):

- ``producer_consumer``: a path connects the row and the column reduction, so one must
  finish before the other starts.
- ``unsupported_reduction_type``: the column reduction is not sum/prod/max/min (welford,
  argmax, scans...), or the row side holds a scan/sort.
- ``unsupported_dtype``: the column reduction accumulates a non-floating dtype.
- ``not_persistent``: the row does not fit on chip (longer than ``config.max_persistent_n``,
  or the Ascend Unified Buffer) and the column-tiled path cannot take a non-sum partial.
- ``dynamic_n``: the row length is symbolic; the persistent tile needs it static.
- ``no_shared_input``: shapes match but no [M, N] buffer is read by both sides.
- ``not_profitable``: the cost model expects the unfused kernels to be faster.
- ``unsupported_backend``: the device is not generated through Inductor's Triton backend.
- ``cpp_wrapper``: cpp_wrapper / AOTInductor output; our final step is emitted in Python.
- ``internal_error``: the hook or the fused codegen raised; Inductor's schedule was kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import sympy
import torch

from .. import compat
from ..codegen.combine import accumulator_dtype
from ..compat import BaseSchedulerNode, V, ir
from .match import Candidate, ColumnReduction

SUPPORTED_COLUMN_REDUCTIONS = ("sum", "prod", "max", "min")


@dataclasses.dataclass
class Decline:
    names: str
    M: sympy.Expr
    N: sympy.Expr
    reason: str
    detail: str


def check_graph(candidate: Candidate) -> str | None:
    """Reasons that apply to the whole group."""
    if V.graph.cpp_wrapper or getattr(V.graph, "aot_mode", False):
        return "cpp_wrapper"
    if not isinstance(candidate.N, (int, sympy.Integer)):
        return "dynamic_n"
    for sub in candidate.inner.get_nodes():
        node = getattr(sub, "node", None)
        if isinstance(node, ir.ComputedBuffer) and isinstance(node.data, (ir.Scan, ir.Sort)):
            return "unsupported_reduction_type"
    return None


def check_column(candidate: Candidate, col: ColumnReduction,
                 accepted: list[ColumnReduction]) -> tuple[str, str] | None:
    """(reason, detail) if this column reduction cannot join the group."""
    if col.reduction_type not in SUPPORTED_COLUMN_REDUCTIONS:
        return "unsupported_reduction_type", f"{col.out_name} is a {col.reduction_type}"
    dtype = _column_src_dtype(col)
    if dtype is None or not dtype.is_floating_point:
        return "unsupported_dtype", f"{col.out_name} accumulates {dtype}"
    return check_dependency(candidate.inner, col, accepted)


def check_dependency(inner: BaseSchedulerNode, col: ColumnReduction,
                     accepted: Sequence[ColumnReduction]) -> tuple[str, str] | None:
    """("producer_consumer", detail) when a path links `col` with the row reduction or
    with a column already in the group: one kernel cannot both produce and consume it.
    The matcher asks this too, so such a column stays free for the row it can join."""
    col_ops = col.operation_names()
    inner_ops = inner.get_operation_names()
    col_ancestors = _ancestors(col.absorbed)
    if col_ops & _ancestors(inner.get_nodes()) or inner_ops & col_ancestors:
        return "producer_consumer", f"{inner.get_name()} <-> {col.out_name}"
    for other in accepted:
        if other.operation_names() & col_ancestors or col_ops & _ancestors(other.absorbed):
            return "producer_consumer", f"{other.out_name} <-> {col.out_name}"
    return None


def check_accumulator(col: ColumnReduction, flavor: str,
                      supported: Sequence[torch.dtype]) -> tuple[str, str] | None:
    """(reason, detail) when the flavor cannot accumulate this column in its dtype."""
    dtype = _column_src_dtype(col)
    acc = accumulator_dtype(dtype) if dtype is not None else None
    if acc not in supported:
        return "unsupported_dtype", (f"{col.out_name} accumulates in {acc}, which the "
                                     f"{flavor} flavor cannot generate")
    return None


def group_accumulator(columns: Sequence[ColumnReduction]) -> torch.dtype:
    """One workspace holds every partial of a group: the widest accumulator any of its
    columns needs (widening the others is exact)."""
    dtypes = [accumulator_dtype(d) for col in columns
              if (d := _column_src_dtype(col)) is not None]
    return max(dtypes, key=lambda d: d.itemsize, default=torch.float32)


def _ancestors(nodes: Sequence[BaseSchedulerNode]) -> set[str]:
    """Every operation some node of `nodes` transitively depends on."""
    out: set[str] = set()
    for sub in nodes:
        out |= set(sub.ancestors)
    return out


def _column_src_dtype(col: ColumnReduction) -> torch.dtype | None:
    if col.unsplit is not None:
        return col.unsplit.src_dtype
    node = col.out_node.node
    if isinstance(node, ir.ComputedBuffer) and isinstance(node.data, ir.Reduction):
        return node.data.src_dtype
    return None


def check_backend(candidate: Candidate) -> str | None:
    sched = compat.scheduler_of([candidate.inner])
    device = candidate.inner.get_device()
    if sched is None or device is None:
        return "unsupported_backend"
    if compat.triton_scheduling_of(sched.get_backend(device)) is None:
        return "unsupported_backend"
    return None
