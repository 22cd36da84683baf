"""Loop order of a column reduction inside the fused kernel: rows outer, columns inner.

A column reduction's body is written as (output index = columns, reduction index = rows).
The fused kernel walks rows in its x loop and holds a full row in r0, so the body is run
with its reduction variables bound to x and its output variables bound to r0. Any row-major
linearisation is correct (every (row, column) pair is visited once); matching the row
reduction's own order is what lets both sides share the same loads.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy

from ..compat import FloorDiv, LoopBody, ModularIndexing, index_vars_no_squeeze


def rows_first_body(body: LoopBody, iter_sizes: Sequence[sympy.Expr],
                    red_sizes: Sequence[sympy.Expr]) -> tuple[LoopBody, list[list[sympy.Expr]]]:
    """The column reduction's LoopBody re-expressed with its row (reduction) variables first:
    (body, [row sizes, column sizes]). Called as `body(row_vars, col_vars)`, it is the
    (x, r) order of the fused kernel, so code that walks a kernel's nodes by their ranges
    (the Ascend backend's index analysis) sees it like any [M, N] node of the kernel."""
    (row_vars, col_vars), var_ranges = index_vars_no_squeeze(
        list(red_sizes), list(iter_sizes), prefix="p")
    swapped = LoopBody(body, [col_vars, row_vars], var_ranges, row_vars, col_vars)
    return swapped, [list(red_sizes), list(iter_sizes)]


def split_point(sizes: Sequence[sympy.Expr], rows: sympy.Expr) -> int | None:
    """k such that sizes[:k] are the rows (their product is `rows`), else None."""
    product = sympy.Integer(1)
    for k in range(len(sizes) + 1):
        if product == rows:
            return k
        if k < len(sizes):
            product = product * sizes[k]
    return None


def _coords(expr: sympy.Expr, sizes: Sequence[sympy.Expr]) -> list[sympy.Expr]:
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


def flat_rows_body(body: LoopBody, ranges: Sequence[Sequence[sympy.Expr]], M: sympy.Expr,
                   N: sympy.Expr) -> tuple[LoopBody, list[list[sympy.Expr]]] | None:
    """A [rows, columns] node's LoopBody with its row variables joined into one (and its
    column variables into one) where the index expressions allow it: (body, its ranges),
    or None when its sizes do not split into M rows and N columns or nothing joins.
    A reduction body becomes ([M], [N]); a pointwise one ([M, N], []) or ([M], []).

    Index expressions over contiguous dimensions join back (Inductor simplifies
    `16 * (x // 16) + x % 16` to `x`), so kernels that give every body variable an axis of
    its own (Ascend's) see one row axis and one column axis. A side whose dimensions
    do not join in every index (a transposed load, a broadcast over some of them: Qwen3's
    q/k norms read dy as [B, H, T, D] and RoPE's cos per t, of rows [B, T, H]) keeps its
    own variables: joined, its variable would appear under // and %, which Ascend's
    index analysis splits again into axes of its own (`rebuild_flattened_dims`), and not
    always into the dimensions they came from; kept, they become the kernel's sub-axes
    of that side as in Ascend's own kernels."""
    iter_sizes, red_sizes = (list(r) for r in ranges)
    if red_sizes:
        if sympy.Mul(*iter_sizes) != M or sympy.Mul(*red_sizes) != N:
            return None
        groups = [iter_sizes, red_sizes]
        reduction = True
    else:
        k = split_point(iter_sizes, M)
        if k is None:
            return None
        rest = iter_sizes[k:]
        if rest and sympy.Mul(*rest) != N:
            return None
        groups = [iter_sizes[:k]] + ([rest] if rest else [])
        reduction = False
    join = [len(g) > 1 for g in groups]
    while any(join):
        swapped, sides = _joined_body(body, groups, join, reduction)
        split = [i for i, (joined, var) in enumerate(zip(join, sides))
                 if joined and _under_div_or_mod(swapped, var)]
        if not split:
            return swapped, _ranges(groups, join, reduction)
        for i in split:
            join[i] = False
    return None  # already one variable per side, or no side joins


def _side_sizes(group: Sequence[sympy.Expr], joined: bool) -> list[sympy.Expr]:
    return [sympy.Mul(*group)] if joined else list(group)


def _ranges(groups: Sequence[Sequence[sympy.Expr]], join: Sequence[bool], reduction: bool
            ) -> list[list[sympy.Expr]]:
    sides = [_side_sizes(g, j) for g, j in zip(groups, join)]
    if reduction:
        return [sides[0], sides[1]]
    return [[size for side in sides for size in side], []]


def _joined_body(body: LoopBody, groups: Sequence[Sequence[sympy.Expr]], join: Sequence[bool],
                 reduction: bool) -> tuple[LoopBody, list[sympy.Symbol | None]]:
    """The body over new variables, one per joined group and one per dimension of the
    others; with each group's joined variable (None where not joined)."""
    new_sizes = _ranges(groups, join, reduction)
    flat = [size for side in new_sizes for size in side]
    (new_vars,), var_ranges = index_vars_no_squeeze(flat, prefix="f")
    args: list[sympy.Expr] = []
    sides: list[sympy.Symbol | None] = []
    pos = 0
    for group, joined in zip(groups, join):
        if joined:
            var = new_vars[pos]
            args += _coords(var, group)
            sides.append(var)
            pos += 1
        else:
            args += new_vars[pos:pos + len(group)]
            sides.append(None)
            pos += len(group)
    n_iter = len(new_sizes[0])
    n_old_iter = len(groups[0]) if reduction else sum(len(g) for g in groups)
    old_args = [args[:n_old_iter], args[n_old_iter:]]
    swapped = LoopBody(body, old_args, var_ranges, new_vars[:n_iter], new_vars[n_iter:])
    return swapped, sides


def _under_div_or_mod(body: LoopBody, var: sympy.Symbol) -> bool:
    """Whether an index expression of `body` still takes `var` through // or %."""
    return any(var in atom.free_symbols
               for expr in body.indexing_exprs.values()
               for atom in sympy.sympify(expr).atoms(FloorDiv, ModularIndexing))


def segmented_body(body: LoopBody, iter_sizes: Sequence[sympy.Expr],
                   red_sizes: Sequence[sympy.Expr], segments: sympy.Expr, M: sympy.Expr,
                   N: sympy.Expr, interleaved: bool = False
                   ) -> tuple[LoopBody, list[list[sympy.Expr]]] | None:
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
