"""Find mix-order groups: one persistent row reduction plus sibling column reductions.

After Inductor's own fusion, the row reduction (dx of a norm backward) is a node whose group
is (M, N); each column reduction (dw, db) is a sub-node reducing over M for N outputs —
either directly, or split by Inductor into partial sums plus a final sum, which we see
through the unsplit record kept by :mod:`inductor_ext.compat`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import sympy

from .. import compat
from ..compat import BaseSchedulerNode, SchedulerNode, UnsplitReduction, V


@dataclasses.dataclass
class ColumnReduction:
    """One outer reduction, seen as a reduction over M rows for each of N columns."""

    out_node: SchedulerNode  # the node whose buffer receives the final [N] result
    absorbed: tuple[SchedulerNode, ...]  # nodes the fused kernel replaces
    reduction_type: str
    numel: sympy.Expr  # N
    rnumel: sympy.Expr  # M
    unsplit: UnsplitReduction | None  # set when Inductor had split this reduction
    #: The result's only user when it just casts it (dw in bf16): the final step writes
    #: the cast value itself, one launch less (see `cast_consumer`).
    cast: SchedulerNode | None = None

    @property
    def out_name(self) -> str:
        """Name of the buffer the reduction itself writes (fp32 accumulation)."""
        return self.out_node.node.get_name()

    @property
    def final_name(self) -> str:
        """Name of the buffer the final step writes: the cast's output if absorbed."""
        return self.cast.node.get_name() if self.cast is not None else self.out_name

    def reads(self) -> set[str]:
        names: set[str] = set()
        internal = {n.node.get_name() for n in self.absorbed}
        for node in self.absorbed:
            names.update(d.name for d in node.read_writes.reads if d.name not in internal)
        return names

    def operation_names(self) -> set[str]:
        return {n.get_name() for n in self.absorbed}


@dataclasses.dataclass
class Candidate:
    """A row-reduction node with the column reductions that could ride along with it."""

    inner: BaseSchedulerNode
    columns: list[ColumnReduction]
    M: sympy.Expr
    N: sympy.Expr

    def describe(self) -> str:
        return f"{self.inner.get_name()} + [{', '.join(c.out_name for c in self.columns)}]"


def _numels(node: BaseSchedulerNode) -> tuple[sympy.Expr, sympy.Expr] | None:
    """(numel, rnumel) of a node grouped by a SIMD (Triton) backend; None otherwise (the
    C++ backend groups by tuples of sizes)."""
    group = getattr(node, "group", None)
    if not group or len(group) != 2 or len(group[1]) != 2:
        return None
    if not all(isinstance(v, (int, sympy.Expr)) for v in group[1]):
        return None
    return group[1]


def _equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    return V.graph.sizevars.statically_known_equals(a, b)


def column_reductions(nodes: Sequence[BaseSchedulerNode]) -> list[ColumnReduction]:
    """Every sub-node that is (or finishes) a reduction over one long axis."""
    sched = compat.scheduler_of(nodes)
    records = compat.unsplit_records()
    found: list[ColumnReduction] = []
    for node in nodes:
        for sub in node.get_nodes():
            if not isinstance(sub, SchedulerNode) or not sub.is_reduction():
                continue
            rtype = compat.reduction_type_of(sub)
            if rtype is None or sub.get_name() in records:
                continue  # not a plain reduction, or the first stage of a split one
            numels = _numels(sub)
            if numels is None:
                continue
            split_from = _split_source(sub, records, sched)
            if split_from is not None:
                first, record = split_from
                found.append(ColumnReduction(
                    out_node=sub, absorbed=(first, sub), reduction_type=record.reduction_type,
                    numel=sympy.Mul(*record.ranges), rnumel=sympy.Mul(*record.reduction_ranges),
                    unsplit=record))
            else:
                found.append(ColumnReduction(
                    out_node=sub, absorbed=(sub,), reduction_type=rtype,
                    numel=numels[0], rnumel=numels[1], unsplit=None))
    return found


def _split_source(final: SchedulerNode, records: dict[str, UnsplitReduction],
                  sched: Any) -> tuple[SchedulerNode, UnsplitReduction] | None:
    """If `final` sums the partials of a recorded split reduction, its first stage."""
    reads = [d.name for d in final.read_writes.reads]
    if len(reads) != 1 or reads[0] not in records or sched is None:
        return None
    buf = sched.name_to_buf.get(reads[0])
    if buf is None:
        return None
    first = buf.defining_op
    if not isinstance(first, SchedulerNode):
        return None
    users = {u.node.get_name() for u in buf.users if hasattr(u.node, "get_name")}
    if users != {final.get_name()}:
        return None
    return first, records[reads[0]]


def row_reduction_nodes(nodes: Sequence[BaseSchedulerNode]) -> list[BaseSchedulerNode]:
    """Post-fusion nodes that reduce along their last axis (candidates for the inner)."""
    out = []
    for node in nodes:
        if not node.is_reduction() or node.is_template() or node.is_extern():
            continue
        if node.is_foreach():
            continue
        subs = node.get_nodes()
        if not all(isinstance(s, SchedulerNode) for s in subs):
            continue
        if _numels(node) is None:
            continue
        out.append(node)
    # Either orientation is correct. Prefer a static row length (the persistent tile needs
    # it), then rows Inductor sees as contiguous (INNER before DEFAULT before OUTER-hinted
    # reductions), then more rows.
    def preference(n: BaseSchedulerNode) -> tuple[bool, int, int]:
        numel, rnumel = _numels(n)
        hints = {_hint_name(s) for s in n.get_nodes() if s.is_reduction()}
        rank = 2 if hints & {"OUTER", "OUTER_TINY"} else 0 if "INNER" in hints else 1
        return (not isinstance(rnumel, (int, sympy.Integer)), rank, -_hint_of(numel))

    return sorted(out, key=preference)


def _hint_of(expr: sympy.Expr) -> int:
    try:
        return int(V.graph.sizevars.optimization_hint(expr))
    except Exception:
        return 1 << 62


def _hint_name(snode: SchedulerNode) -> str:
    """Inductor's ReductionHint name for a reduction node ('' if none)."""
    hint = getattr(getattr(snode.node, "data", None), "reduction_hint", None)
    return getattr(hint, "name", "")


#: Whether a column reduction is linked by a dependency path to a row reduction or to the
#: columns already paired with it (legality.check_dependency, passed in by the hook).
Linked = Callable[[BaseSchedulerNode, ColumnReduction, Sequence[ColumnReduction]], object]


def find_candidates(nodes: Sequence[BaseSchedulerNode],
                    linked: Linked | None = None) -> list[Candidate]:
    """Pair each row reduction with the column reductions over the swapped shape that
    read at least one of the same [M, N] buffers.

    With `linked`, a column that a dependency path ties to a row is left for a later row:
    two norms can read one [M, N] buffer (a layer's input is the input norm's x and, when
    the partitioner recomputes the residual add, an operand of the next norm's x too, as
    at every FSDP2 layer boundary), and the earlier norm's dx must not claim the dw of a
    norm whose dy it produces. A column no row can take is still offered to the first row
    it was linked to (once per pair of reductions, not again transposed), where the
    legality check declines it as producer_consumer."""
    columns = column_reductions(nodes)
    taken: set[str] = set()
    taken_ops: set[str] = set()
    used_inner_ops: set[str] = set()
    candidates: list[Candidate] = []
    deferred: dict[str, tuple[BaseSchedulerNode, ColumnReduction, sympy.Expr, sympy.Expr]] = {}
    for inner in row_reduction_nodes(nodes):
        inner_ops = inner.get_operation_names()
        if any(op in taken_ops for op in inner_ops):
            continue  # already a column reduction of an earlier group
        M, N = _numels(inner)
        if _equal(N, 1):
            continue
        inner_reads = {d.name for d in inner.read_writes.reads}
        matched: list[ColumnReduction] = []
        for col in columns:
            if col.out_name in taken or col.operation_names() & (inner_ops | used_inner_ops):
                continue
            if not (_equal(col.numel, N) and _equal(col.rnumel, M)):
                continue
            shared = inner_reads & col.reads()
            if not any(_is_full_matrix(name, M * N) for name in shared):
                continue
            if linked is not None and linked(inner, col, matched):
                deferred.setdefault(col.out_name, (inner, col, M, N))
                continue
            matched.append(col)
        if matched:
            taken.update(c.out_name for c in matched)
            for c in matched:
                taken_ops.update(c.operation_names())
            used_inner_ops.update(inner_ops)
            candidates.append(Candidate(inner=inner, columns=matched, M=M, N=N))
    declined_ops: set[str] = set()
    for name, (inner, col, M, N) in deferred.items():
        if name in taken or col.operation_names() & used_inner_ops:
            continue  # joined a later row, or fused as a row itself
        ops = set(inner.get_operation_names()) | col.operation_names()
        if ops <= declined_ops:
            continue  # the same two reductions, seen in the other orientation
        declined_ops |= ops
        group = next((c for c in candidates if c.inner is inner), None)
        if group is None:
            candidates.append(Candidate(inner=inner, columns=[col], M=M, N=N))
        else:
            group.columns.append(col)
    return candidates


def _is_full_matrix(name: str, numel: sympy.Expr) -> bool:
    try:
        buf = V.graph.get_buffer(name)
        if buf is None:
            return False
        size = sympy.Mul(*buf.get_size())
    except Exception:
        return False
    return _equal(size, numel)


#: Loop-body operations of a node that only casts one buffer elementwise.
_CAST_OPS = frozenset({"get_index", "load", "to_dtype", "store"})


def cast_consumer(sched: Any, col: ColumnReduction) -> SchedulerNode | None:
    """The pointwise node that only casts `col`'s result to another dtype, elementwise over
    the same [N], if it is that result's only user (a graph output has another user)."""
    buf = sched.name_to_buf.get(col.out_name) if sched is not None else None
    if buf is None or len(buf.users) != 1:
        return None
    node = buf.users[0].node
    if not isinstance(node, SchedulerNode) or node.is_reduction():
        return None
    reads, writes = list(node.read_writes.reads), list(node.read_writes.writes)
    if len(reads) != 1 or len(writes) != 1 or reads[0].name != col.out_name:
        return None
    read, write = reads[0], writes[0]
    if (getattr(read, "index", None) != getattr(write, "index", None)
            or getattr(read, "ranges", None) != getattr(write, "ranges", None)
            or not _equal(sympy.Mul(*node.get_ranges()[0]), col.numel)):
        return None
    body = getattr(node, "_body", None)
    if body is None or getattr(body, "subblocks", None):
        return None
    ops = {n.target for n in body.root_block.graph.nodes if n.op in ("call_method",
                                                                   "call_module")}
    return node if ops <= _CAST_OPS else None
