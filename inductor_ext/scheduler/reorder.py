"""Loop order of a column reduction inside the fused kernel: rows outer, columns inner.

A column reduction's body is written as (output index = columns, reduction index = rows).
The fused kernel walks rows in its x loop and holds a full row in r0, so the body is run
with its reduction variables bound to x and its output variables bound to r0. Any row-major
linearisation is correct (every (row, column) pair is visited once); matching the row
reduction's own order is what lets both sides share the same loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..compat import LoopBody, index_vars_no_squeeze


def rows_first_body(body: LoopBody, iter_sizes: Sequence[Any], red_sizes: Sequence[Any]
                    ) -> tuple[LoopBody, list[list[Any]]]:
    """The column reduction's LoopBody re-expressed with its row (reduction) variables first:
    (body, [row sizes, column sizes]). Called as `body(row_vars, col_vars)`, it is the
    (x, r) order of the fused kernel, so code that walks a kernel's nodes by their ranges
    (torch_npu's index analysis) sees it like any [M, N] node of the kernel."""
    (row_vars, col_vars), var_ranges = index_vars_no_squeeze(
        list(red_sizes), list(iter_sizes), prefix="p")
    swapped = LoopBody(body, [col_vars, row_vars], var_ranges, row_vars, col_vars)
    return swapped, [list(red_sizes), list(iter_sizes)]
