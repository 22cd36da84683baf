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

import sympy

from ..compat import FloorDiv, LoopBody, ModularIndexing, index_vars_no_squeeze


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


def split_point(sizes: Sequence[Any], rows: Any) -> int | None:
    """k such that sizes[:k] are the rows (their product is `rows`), else None."""
    product = sympy.Integer(1)
    for k in range(len(sizes) + 1):
        if product == rows:
            return k
        if k < len(sizes):
            product = product * sizes[k]
    return None


def _coords(expr: sympy.Expr, sizes: Sequence[Any]) -> list[sympy.Expr]:
    """The row-major coordinates over `sizes` of a flat index expression `expr`."""
    out: list[sympy.Expr] = []
    for i, size in enumerate(sizes):
        stride = sympy.Mul(*sizes[i + 1:]) if i + 1 < len(sizes) else sympy.Integer(1)
        if size == 1:
            out.append(sympy.Integer(0))
        elif i == 0:
            out.append(expr if stride == 1 else FloorDiv(expr, stride))
        else:
            out.append(ModularIndexing(expr, stride, size))
    return out


def flat_rows_body(body: LoopBody, ranges: Sequence[Sequence[Any]], M: Any, N: Any
                   ) -> tuple[LoopBody, list[list[Any]]] | None:
    """A [rows, columns] node's LoopBody over one row variable (and one column variable):
    (body, its ranges), or None when its sizes do not split into M rows and N columns.
    A reduction body becomes ([M], [N]); a pointwise one ([M, N], []) or ([M], []).
    Index expressions over contiguous dimensions join back (Inductor simplifies
    `16 * (x // 16) + x % 16` to `x`), so kernels that give every body variable an axis of
    its own (torch_npu's) see one row axis and one column axis."""
    iter_sizes, red_sizes = (list(r) for r in ranges)
    if red_sizes:
        if sympy.Mul(*iter_sizes) != M or sympy.Mul(*red_sizes) != N:
            return None
        groups = [iter_sizes, red_sizes]
        new_sizes: list[list[Any]] = [[M], [N]]
    else:
        k = split_point(iter_sizes, M)
        if k is None:
            return None
        rest = iter_sizes[k:]
        groups = [iter_sizes[:k]] + ([rest] if rest else [])
        new_sizes = [[M, N] if rest else [M], []]
        if rest and sympy.Mul(*rest) != N:
            return None
    if [len(g) for g in groups] == [1] * len(groups):
        return None  # already one variable per side
    flat = [size for group in new_sizes for size in group]
    (new_vars,), var_ranges = index_vars_no_squeeze(flat, prefix="f")
    args = [coord for var, group in zip(new_vars, groups) for coord in _coords(var, group)]
    n_iter = len(new_sizes[0])
    old_args = [args[:len(iter_sizes)], args[len(iter_sizes):]]
    swapped = LoopBody(body, old_args, var_ranges, new_vars[:n_iter], new_vars[n_iter:])
    return swapped, new_sizes


def segmented_body(body: LoopBody, iter_sizes: Sequence[Any], red_sizes: Sequence[Any],
                   segments: Any, M: Any, N: Any, interleaved: bool = False
                   ) -> tuple[LoopBody, list[list[Any]]] | None:
    """A segmented column reduction ([B, T, N] -> [B, N]) over the fused kernel's axes:
    (body called as body([row], [column]), [[M], [N]]), its sample b = row // T, its
    reduction index t = row % T, its column n = column; None when its output does not
    split into B samples of N columns (row-major) or its reduction is not T long.
    `interleaved`: b = row % B and t = row // B instead (the row side is Inductor's split
    of longer rows into B pieces: its row r is piece r % B of row r // B).

    Every (b, t, n) is visited once whatever the tensors' layout, so the partials are
    right; with [B, T, N] inputs the indices join back to row * N + column (Inductor
    simplifies (row // T) * T * N + (row % T) * N), the row side's own loads, and so do
    a split row's pieces interleaved ((row // B) * B * N + (row % B) * N)."""
    T = sympy.simplify(M / segments)
    if (sympy.simplify(sympy.Mul(*iter_sizes) - segments * N) != 0
            or sympy.simplify(sympy.Mul(*red_sizes) - T) != 0):
        return None
    (new_vars,), var_ranges = index_vars_no_squeeze([M, N], prefix="g")
    row, col = new_vars
    if interleaved:
        sample, t = ModularIndexing(row, 1, segments), FloorDiv(row, segments)
    else:
        sample, t = FloorDiv(row, T), ModularIndexing(row, 1, T)
    k = split_point(list(iter_sizes), segments)
    if k is not None:
        out = _coords(sample, iter_sizes[:k]) + _coords(col, iter_sizes[k:])
    else:  # samples and columns merged into one loop: the flat index b * N + n
        out = _coords(sample * N + col, iter_sizes)
    step = _coords(t, red_sizes)
    swapped = LoopBody(body, [out, step], var_ranges, [row], [col])
    return swapped, [[M], [N]]
