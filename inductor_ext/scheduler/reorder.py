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


def rows_outer_ranges(iter_sizes: Sequence[Any], red_sizes: Sequence[Any]
                      ) -> list[list[Any]]:
    """Ranges in the kernel's (x, r0) order for a body sized (columns, rows)."""
    return [list(red_sizes), list(iter_sizes)]


def body_args(kernel_vars: Sequence[Sequence[Any]]) -> tuple[list[Any], list[Any]]:
    """Kernel (x vars, r0 vars) -> the body's (output vars, reduction vars)."""
    row_vars, col_vars = kernel_vars
    return list(col_vars), list(row_vars)
