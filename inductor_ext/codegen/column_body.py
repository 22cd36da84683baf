"""A column reduction's loop body bound to the fused kernel's (row, column) axes, so that it
runs inside the row loop beside the row reduction (the reordering itself: groups/bodies.py)."""

from __future__ import annotations

import dataclasses

import sympy

from .. import compat
from ..compat import LoopBody, SchedulerNode
from ..groups import bodies
from ..groups.column import ColumnReduction


@dataclasses.dataclass
class ColumnBody:
    """A column reduction's loop body with its row variables first, ready to be run over the
    fused kernel's (row, column) axes."""

    out_name: str
    reduction_type: str
    ranges: list[list[sympy.Expr]]  # [row sizes, column sizes]
    body: LoopBody  # called as body(row_vars, col_vars)
    owner: SchedulerNode  # used as the kernel's current node
    segments: int = 1  # B of a segmented column reduction ([B, T, N] -> [B, N])


def column_body(col: ColumnReduction, M: sympy.Expr | None = None,
                N: sympy.Expr | None = None) -> ColumnBody:
    """The column's body over the kernel's (row, column) axes; a segmented one (`M`, `N`:
    the kernel's sizes) with its sample and step taken from the row."""
    if col.unsplit is not None:
        buf = compat.computed_buffer_for(col.unsplit, col.out_name)
    else:
        buf = compat.computed_buffer_of(col.out_node)
    (iter_sizes, red_sizes), body = compat.default_sizes_body(buf)
    if col.segments > 1:
        seg = bodies.segmented_body(body, iter_sizes, red_sizes, col.segments, M, N,
                                     col.interleaved)
        if seg is None:
            raise RuntimeError(f"{col.out_name}: segmented body does not split")
        swapped, ranges = seg
    else:
        swapped, ranges = bodies.rows_first_body(body, iter_sizes, red_sizes)
    return ColumnBody(col.final_name, col.reduction_type, ranges, swapped, col.out_node,
                      col.segments)
