"""Which column reduction joins which row reduction, with legality inside the matching.

Each column reduction is offered the row reductions of the swapped shape that read a common
[M, N] buffer, best first: most shared bytes, then ``match.row_preference``. It joins the
first one it can legally join (``legality.check_pair`` / ``check_together``, and no
dependency cycle through another kernel, see ``deps.py``) whose target can generate it
(``legality.check_target``: the row's device decides its planner before matching). A column
that cannot join one row stays in the pool for the next, so a dw that its norm's neighbour
cannot take (layer 0's dw reading the embedding, a recomputed forward statistic under
checkpointing) still reaches its own norm's dx.

Columns are taken in the order of their best row's preference. A norm's dx + dw and its
dw + dx-sum are the same two nodes in the two orientations; the preferred orientation is
tried first and, once fused, leaves the other nothing to do. A column that joins no row is
declined once, against the pair it is really about: the failure of its best legal pair, or
else its best pair's own reason. A column inside a row reduction that ranks better than
every row it could join is the swapped view of a pair (a dx-sum seen from its dw, a
recomputed forward statistic seen from a dw) and is not reported itself. On a backend the
plugin cannot generate for (the C++ CPU backend) nothing joins: each norm's dw/db are
declined together under the norm's name, the other columns once per graph.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import sympy
import torch

from .. import compat
from ..compat import BaseSchedulerNode
from ..plan import Planner
from ..reasons import Reason
from . import legality, origin, phrases
from .deps import KernelGraph
from .match import (
    Candidate,
    ColumnReduction,
    Decline,
    column_reductions,
    nbytes,
    numels,
    row_preference,
    row_reduction_nodes,
    same_size,
    segments_of,
    shared_matrices,
    size_hint,
    split_pieces,
)
from .trivial import shape_class, trivial_declines


@dataclasses.dataclass
class Matching:
    """One graph's groups to fuse (in order) and the declines to record."""

    groups: list[Candidate]
    declines: list[Decline]


@dataclasses.dataclass(eq=False)
class _Row:
    node: BaseSchedulerNode
    index: int
    M: sympy.Expr
    N: sympy.Expr
    rank: tuple[bool, int, bool, int]
    ops: set[str]
    reads: set[str]
    #: Buffers the row side computes: a column reading one of them at the row block's
    #: element is handed its values in registers (legality.row_outputs_read).
    writes: set[str]
    reason: Reason | None  # rules out every pair with this row (check_row)
    detail: str = ""
    #: The target that would generate this row's kernel (None: the row is ruled out).
    planner: Planner | None = None
    _ancestors: set[str] | None = None

    @property
    def name(self) -> str:
        return self.node.get_name()

    @property
    def ancestors(self) -> set[str]:
        if self._ancestors is None:
            self._ancestors = legality.ancestors_of(self.node.get_nodes())
        return self._ancestors


@dataclasses.dataclass(eq=False)
class _Pair:
    row: _Row
    shared_bytes: int
    reason: Reason | None
    detail: str = ""
    #: Samples B of a segmented pair (the column reduces over T = M / B rows per sample).
    segments: int = 1
    #: A segmented pair, fusable or not (its swapped view is never a pair: no row of it
    #: reports this column's decline).
    segmented: bool = False
    #: The samples are the row's pieces (a split row sum): interleaved rows per sample.
    interleaved: bool = False

    def key(self) -> tuple[int, tuple[bool, int, bool, int], int]:
        return (-self.shared_bytes, self.row.rank, self.row.index)


@dataclasses.dataclass(eq=False)
class _Column:
    col: ColumnReduction
    index: int
    ops: set[str]
    pairs: list[_Pair]  # best first
    failure: tuple[_Pair, Reason, str] | None = None  # first legal pair that could not be joined

    @property
    def legal(self) -> list[_Pair]:
        return [p for p in self.pairs if p.reason is None]


def find_candidates(nodes: Sequence[BaseSchedulerNode],
                    planner_of: Callable[[torch.device], Planner]) -> Matching:
    """Groups of one row reduction and the column reductions that legally join it, and a
    decline for every other column reduction that has a row reduction of the swapped shape.
    `planner_of` gives the target of a device's kernels: what a column needs of it is
    checked while it is matched, so a column one target cannot take stays in the pool."""
    rows = _rows(nodes, planner_of)
    by_shape: dict[tuple[int, int], list[_Row]] = {}
    for row in rows:  # compared exactly below; the hints only narrow the search
        by_shape.setdefault((size_hint(row.M), size_hint(row.N)), []).append(row)
    all_columns = column_reductions(nodes)
    columns = [_column(j, col, by_shape.get((size_hint(col.rnumel), size_hint(col.numel)),
                                            []) + _segmented_rows(col, rows))
               for j, col in enumerate(all_columns)]
    unpaired = [c for c in columns if not c.pairs]
    columns = [c for c in columns if c.pairs]
    groups = _assign(nodes, columns)
    declines = _declines(rows, columns, groups)
    decided = {shape_class(g.M, g.N) for g in groups} | {shape_class(d.M, d.N)
                                                          for d in declines}
    declines += trivial_declines(nodes, all_columns, decided)
    declines += _rowless_norms(unpaired, decided)
    return Matching(groups=groups, declines=declines)


def _rowless_norms(unpaired: list[_Column], decided: set[tuple[str, str]]
                   ) -> list[Decline]:
    """A norm's dw/db with no row reduction of its shape at all: its input needs no
    gradient. Named, so the user sees which norm runs unfused (a shape whose dx Inductor
    computes without a loop is `trivial_reduction`'s, recorded before)."""
    out = []
    for c in unpaired:
        col_origin = origin.of_node(c.col.out_node)
        M, N = c.col.rnumel, c.col.numel
        if not col_origin.norm or shape_class(M, N) in decided:
            continue
        reason, detail = (legality.backend_reason(c.col.out_node)
                          or (Reason.NO_ROW_REDUCTION, _rowless_detail(c, M, N)))
        out.append(Decline(names=c.col.out_name, M=M, N=N, reason=reason, detail=detail,
                           attribution=origin.attribute([], [col_origin])))
    return out


def _rowless_detail(c: _Column, M: sympy.Expr, N: sympy.Expr) -> str:
    return (f"{phrases.column(c.col)} has no dx of its own over [{M}, {N}] to ride: the "
            "norm's input needs no gradient, so no per-row loop runs for it")


def _rows(nodes: Sequence[BaseSchedulerNode],
          planner_of: Callable[[torch.device], Planner]) -> list[_Row]:
    rows = []
    for i, node in enumerate(row_reduction_nodes(nodes)):
        sizes = numels(node)
        assert sizes is not None, "row_reduction_nodes keeps nodes with numels only"
        M, N = sizes
        if same_size(N, 1):
            continue
        reason = legality.check_row(node, N)
        reason, detail = legality.backend_reason(node) or (reason, "")
        rows.append(_Row(node=node, index=i, M=M, N=N, rank=row_preference(node),
                         ops=set(node.get_operation_names()),
                         reads={d.name for d in node.read_writes.reads},
                         writes={d.name for sub in node.get_nodes()
                                 for d in sub.read_writes.writes}, reason=reason,
                         detail=detail,
                         planner=planner_of(compat.device_of(node)) if reason is None else None))
    return rows


def _segmented_rows(col: ColumnReduction, rows: list[_Row]) -> list[_Row]:
    """Rows [M = B*T, N] whose samples `col` could reduce segment-wise ([B, T, N] ->
    [B, N]: numel B*N, rnumel T, B > 1), by size hints; `_column` checks them exactly."""
    numel, rnumel = size_hint(col.numel), size_hint(col.rnumel)
    out = []
    for row in rows:
        n, m = size_hint(row.N), size_hint(row.M)
        if n and numel != n and numel % n == 0 and (numel // n) * rnumel == m:
            out.append(row)
    return out


def _contiguous_rows(row: _Row, names: set[str]) -> bool:
    """Whether `row` reads each of `names` with stride 1 along its rows. The transpose of
    a segmented pair is again one (rows [B*N, T] of the per-sample sums, the row sums
    over [B*T] as a column with B samples); only the view with contiguous rows is ours."""
    deps = [dep for sub in row.node.get_nodes() for dep in sub.read_writes.reads
            if dep.name in names]
    return bool(deps) and all(compat.reads_rows_contiguously(dep) for dep in deps)


def _column(index: int, col: ColumnReduction, rows: list[_Row]) -> _Column:
    ops = col.operation_names()
    col_ancestors: set[str] | None = None
    pairs = []
    for row in rows:
        if ops & row.ops:
            continue
        segments: sympy.Expr | None = None
        if not (same_size(col.numel, row.N) and same_size(col.rnumel, row.M)):
            segments = segments_of(col, row.M, row.N)
            if segments is None:
                continue
        shared = shared_matrices(row.reads, col, row.M, row.N)
        if segments is not None and not (shared and _contiguous_rows(row, shared)):
            # No common input: numel B*N over M / B rows is only a coincidence of sizes.
            # Strided rows: the swapped view of a segmented pair ([B*N, T] rows).
            continue
        # An [M, N] buffer the row side writes and the column reads again (Qwen3's q_norm:
        # dy * x_hat stored for the dw kernel alone) is a read the fusion saves as well.
        handed = set() if segments is not None else shared_matrices(row.writes, col,
                                                                    row.M, row.N)
        if not shared | handed:
            pairs.append(_Pair(row, 0, Reason.NO_SHARED_INPUT,
                               f"{phrases.row(row.node)} and {phrases.column(col)} share "
                               "no [M, N] buffer (none read by both, none the row side "
                               "writes)"))
            continue
        pair = _Pair(row, sum(nbytes(name) for name in shared | handed), row.reason,
                     row.detail, segmented=segments is not None)
        if pair.reason is None and segments is not None:
            pair.interleaved = split_pieces(row.node, row.N) == size_hint(segments)
            bad = legality.check_segments(col, segments, row.M, row.N, pair.interleaved)
            if bad:
                pair.reason, pair.detail = bad
            else:
                pair.segments = int(segments)
        if pair.reason is None:
            if col_ancestors is None:
                col_ancestors = legality.ancestors_of(col.absorbed)
            bad = legality.check_pair(row.node, col, row.ancestors, col_ancestors,
                                      segments=pair.segments, interleaved=pair.interleaved)
            if bad:
                pair.reason, pair.detail = bad
        pairs.append(pair)
    pairs.sort(key=_Pair.key)
    return _Column(col=col, index=index, ops=ops, pairs=pairs)


def _assign(nodes: Sequence[BaseSchedulerNode], columns: list[_Column]) -> list[Candidate]:
    """Greedy: each column, in the order of its best row's preference, joins the first legal
    row whose target can generate it and whose group it can join without a dependency
    cycle."""
    candidates = [c for c in columns if c.legal]
    if not candidates:
        return []
    order = sorted(candidates, key=lambda c: (min(p.row.rank for p in c.legal),
                                               c.legal[0].key(), c.index))
    graph = KernelGraph(nodes)
    groups: dict[int, tuple[_Row, list[_Column]]] = {}
    inner_ops: set[str] = set()
    absorbed_ops: set[str] = set()
    for c in order:
        if c.ops & inner_ops:
            continue  # its node is a group's row side already (the other orientation)
        for pair in c.legal:
            row = pair.row
            assert row.planner is not None  # a legal pair's row is not ruled out
            bad = legality.check_target(c.col, pair.segments, row.planner)
            if bad:
                _fail(c, pair, *bad)
                continue
            if row.ops & absorbed_ops:
                _fail(c, pair, Reason.PARTNER_TAKEN,
                      f"{phrases.row(row.node)} went into another group as its column "
                      f"({row.name} lost {sorted(row.ops & absorbed_ops)})")
                continue
            members = groups.get(row.index, (row, []))[1]
            bad = legality.check_together(c.col, [m.col for m in members], pair.segments)
            if bad:
                _fail(c, pair, *bad)
                continue
            ops = row.ops | c.ops | {op for m in members for op in m.ops}
            via = graph.cycle_through(ops)
            if via is not None:
                between = phrases.kernel_of_ops(compat.scheduler_of(nodes),
                                                graph.members.get(via, ()), via)
                _fail(c, pair, Reason.PRODUCER_CONSUMER,
                      f"{phrases.row(row.node)} and {phrases.column(c.col)} would run both "
                      f"before and after {between}")
                continue
            c.col.segments = pair.segments
            c.col.interleaved = pair.interleaved
            c.col.row_reads = frozenset(
                legality.row_outputs_read(row.node, c.col, pair.segments,
                                          pair.interleaved) or ())
            groups.setdefault(row.index, (row, []))[1].append(c)
            inner_ops |= row.ops
            absorbed_ops |= c.ops
            graph.merge(ops, f"mix_order:{row.name}")
            break
    out = []
    for row, members in groups.values():
        cols = sorted(members, key=lambda m: m.index)  # Inductor's order, as before
        cand = Candidate(inner=row.node, columns=[m.col for m in cols], M=row.M, N=row.N,
                         planner=row.planner)
        cand.attribution = origin.attribute(
            [origin.of_node(s) for s in row.node.get_nodes() if s.is_reduction()],
            [origin.of_node(m.col.out_node) for m in cols])
        out.append(cand)
    return out


def _fail(c: _Column, pair: _Pair, reason: Reason, detail: str) -> None:
    if c.failure is None:
        c.failure = (pair, reason, detail)


def _declines(rows: list[_Row], columns: list[_Column],
              groups: list[Candidate]) -> list[Decline]:
    inner_ops = {op for g in groups for op in g.inner.get_operation_names()}
    absorbed = {op for g in groups for col in g.columns for op in col.operation_names()}
    row_of = {op: row for row in rows for op in row.ops}
    declines: list[Decline] = []
    reported_row_ops: set[str] = set()
    no_shared: dict[tuple[str, str], Decline] = {}
    backend_reported = False
    # The norms of a graph no group can be generated for (the C++ CPU backend): each one
    # declined by name, its dw/db together, as a group of it would be elsewhere.
    backend_norms: dict[str, tuple[_Pair, list[_Column], str]] = {}
    order = sorted(columns, key=lambda c: (min(p.row.rank for p in c.pairs),
                                           c.pairs[0].key(), c.index))
    for c in order:
        if c.ops & (inner_ops | absorbed | reported_row_ops):
            continue  # fused, the row side of a group, or the other side of a reported pair
        own = next((row_of[op] for op in c.ops if op in row_of), None)
        if (own is not None and not any(p.segmented for p in c.pairs)
                and own.rank < min(p.row.rank for p in c.pairs)):
            continue  # the swapped view of a pair whose preferred view is reported
        pair, reason, detail = c.failure or (c.pairs[0], c.pairs[0].reason, c.pairs[0].detail)
        norm_column = origin.of_node(c.col.out_node).norm  # a norm's dw/db: always named
        backend = legality.backend_reason(c.col.out_node) if norm_column else None
        if backend is not None:
            key = origin.of_node(c.col.out_node).key
            own_pair = next((p for p in c.pairs if _own_row(c, p)), pair)
            backend_norms.setdefault(key, (own_pair, [], backend[1]))[1].append(c)
            continue
        if reason == Reason.UNSUPPORTED_BACKEND:
            if backend_reported:
                continue
            backend_reported = True
        if norm_column and not _own_row_among(c):
            # Whatever kept it from the other rows (no common input, or a path through the
            # Linear between: a norm right after a frozen embedding), it had no dx to join.
            reason, detail = Reason.NO_ROW_REDUCTION, (
                _rowless_detail(c, pair.row.M, pair.row.N)
                + f" (rows of other reductions only: {reason}: {detail})")
        decline = _decline(pair, c, reason or Reason.INTERNAL_ERROR, detail)
        if reason == Reason.NO_SHARED_INPUT and not norm_column:
            no_shared.setdefault(shape_class(pair.row.M, pair.row.N), decline)
            continue
        declines.append(decline)
        if reason in (Reason.NO_SHARED_INPUT, Reason.NO_ROW_REDUCTION):
            continue  # the row is not what this decline is about
        reported_row_ops |= pair.row.ops
    for pair, cols, detail in backend_norms.values():
        declines.append(_backend_decline(pair, cols, detail))
    decided = {shape_class(g.M, g.N) for g in groups} | {shape_class(d.M, d.N)
                                                          for d in declines}
    # Other reductions of a shape that share no input are reported once, and only when
    # nothing else happened at that shape (a square forward graph's row reductions all
    # match it).
    declines += [d for cls, d in no_shared.items() if cls not in decided]
    return declines


def _own_row_among(c: _Column) -> bool:
    """Whether a row reduction `c` pairs with is its own norm's (its dx): a norm column
    without one has nothing of its own to join, whichever reason its pairs with other
    norms' rows gave."""
    return any(_own_row(c, p) for p in c.pairs)


def _own_row(c: _Column, pair: _Pair) -> bool:
    """Whether `pair`'s row reduction is the dx of `c`'s own norm."""
    key = origin.of_node(c.col.out_node).key
    return any(o.norm and o.key == key for s in pair.row.node.get_nodes()
               if s.is_reduction() for o in [origin.of_node(s)])


def _backend_decline(pair: _Pair, cols: list[_Column], detail: str) -> Decline:
    """One norm on a backend the plugin cannot generate for: its dw/db (`cols`) and, where
    `pair` is its own, its dx, declined together under the norm's name."""
    key = origin.of_node(cols[0].col.out_node).key
    rows = [o for s in pair.row.node.get_nodes() if s.is_reduction()
            for o in [origin.of_node(s)] if o.norm and o.key == key]
    attribution = origin.attribute(rows, [origin.of_node(c.col.out_node) for c in cols])
    names = ", ".join(c.col.out_name for c in cols)
    return Decline(names=f"{pair.row.name} + [{names}]" if rows else names, M=pair.row.M,
                   N=pair.row.N, reason=Reason.UNSUPPORTED_BACKEND, detail=detail,
                   attribution=attribution)


def _decline(pair: _Pair, c: _Column, reason: Reason, detail: str) -> Decline:
    col_origin = origin.of_node(c.col.out_node)
    attribution = origin.attribute([], [col_origin])
    row_origins = [origin.of_node(s) for s in pair.row.node.get_nodes() if s.is_reduction()]
    attribution.modules = list(dict.fromkeys([*attribution.modules,
                                              *(o.module for o in row_origins if o.module)]))
    attribution.classes = {**origin.classes(row_origins), **attribution.classes}
    return Decline(names=f"{pair.row.name}+{c.col.out_name}", M=pair.row.M, N=pair.row.N,
                   reason=reason, detail=detail, attribution=attribution)
