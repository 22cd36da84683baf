"""Find the pieces of mix-order groups: persistent row reductions and column reductions.

After Inductor's own fusion, the row reduction (dx of a norm backward) is a node whose group
is (M, N); each column reduction (dw, db) is a sub-node reducing over M for N outputs —
either directly, or split by Inductor into partial sums plus a final sum, which we see
through the unsplit record kept by :mod:`inductor_ext.groups.unsplit`. Which column joins which
row is decided in ``assign.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import sympy

from .. import compat
from ..compat import BaseSchedulerNode, Scheduler, SchedulerNode, V
from ..groups import unsplit
from ..groups.attribution import Attribution
from ..groups.column import ColumnReduction, column_loop_body, size_hint
from ..groups.unsplit import UnsplitReduction
from ..plan import Planner
from ..reasons import Reason


@dataclasses.dataclass
class Candidate:
    """A row-reduction node with the column reductions that could ride along with it."""

    inner: BaseSchedulerNode
    columns: list[ColumnReduction]
    M: sympy.Expr
    N: sympy.Expr
    #: Module names, source lines and kinds of the group's reductions (for tables, logs).
    attribution: Attribution | None = None
    #: The target matching checked the columns against (the row's device's); it plans them.
    planner: Planner | None = None

    def describe(self) -> str:
        return f"{self.inner.get_name()} + [{', '.join(c.out_name for c in self.columns)}]"


@dataclasses.dataclass
class Decline:
    """A column reduction (or a group) that stays Inductor's, and why."""

    names: str  # "<row node>+<column>" as in the logs and the reject table
    M: sympy.Expr
    N: sympy.Expr
    reason: Reason
    detail: str
    attribution: Attribution


def index_symbols(prefix: str, n: int) -> list[sympy.Symbol]:
    """n loop indices (nonnegative integers) to evaluate a LoopBody's index expressions."""
    return [sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True) for i in range(n)]


def loop_step(index: sympy.Expr, var: sympy.Symbol, loop_vars: Sequence[sympy.Symbol]
              ) -> int | None:
    """Elements `index` moves when loop index `var` advances by one from the origin (every
    loop index 0): a transposed read's stride, or a split axis's jump. None where it is
    not a number (a symbolic size)."""
    origin = {v: sympy.Integer(0) for v in loop_vars}
    step = sympy.expand(index.xreplace({**origin, var: sympy.Integer(1)})
                        - index.xreplace(origin))
    return int(step) if step.is_Integer else None


@dataclasses.dataclass(frozen=True)
class StridedColumnReads:
    """What a column reduction reads with a stride other than 1 along its columns."""

    names: frozenset[str]
    #: Whether every such read's rows are adjacent (a step of one element per row): a row
    #: block then reads a run of block_m elements of it.
    rows_adjacent: bool


def strided_column_reads(col: ColumnReduction, M: sympy.Expr, N: sympy.Expr
                         ) -> StridedColumnReads:
    """The [M, N] buffers `col` reads with a stride other than 1 along its columns (the
    fused kernel's contiguous axis): a transposed operand Inductor's own column kernel
    walks coalesced, but the fused row loop reads a few elements per row at a time. A
    stride Inductor's algebra cannot tell counts as 1, as for the row side's reads."""
    (iter_sizes, red_sizes), body = column_loop_body(col)
    if not iter_sizes or not red_sizes:
        return StridedColumnReads(frozenset(), True)
    c_vars, r_vars = index_symbols("mo_c", len(iter_sizes)), index_symbols("mo_r", len(red_sizes))
    names, adjacent = set(), True
    for name in col.reads():
        if not is_full_matrix(name, M * N):
            continue
        for index in compat.memory_indices(body, [c_vars, r_vars], name, "load"):
            step = loop_step(index, c_vars[-1], [*c_vars, *r_vars])
            if step is not None and step not in (0, 1):
                names.add(name)
                adjacent &= abs(loop_step(index, r_vars[-1], [*c_vars, *r_vars]) or 1) == 1
    return StridedColumnReads(frozenset(names), adjacent)


def row_steps(node: SchedulerNode, names: set[str], N: int) -> list[int]:
    """Elements each read of `names` by one of the row side's nodes moves from one row to
    the next: the step of its row index (the loop index whose inner sizes make up N
    elements). Steps the algebra cannot tell are left out."""
    (iter_sizes, red_sizes), body = compat.loop_body_of(node)
    sizes = [int(V.graph.sizevars.optimization_hint(s)) for s in [*iter_sizes, *red_sizes]]
    loop_vars = index_symbols("mo_x", len(sizes))
    inner = 1
    row_var = None
    for var, size in zip(reversed(loop_vars), reversed(sizes), strict=True):
        if inner == N:
            row_var = var
            break
        inner *= size
    if row_var is None:
        return []
    args = [loop_vars[:len(iter_sizes)], loop_vars[len(iter_sizes):]]
    steps = []
    for name in names:
        for index in compat.memory_indices(body, args, name, "load"):
            step = loop_step(index, row_var, loop_vars)
            if step is not None:
                steps.append(step)
    return steps


def numels(node: BaseSchedulerNode) -> tuple[sympy.Expr, sympy.Expr] | None:
    """(numel, rnumel) of a node: a SIMD (Triton) backend groups by them (Ascend's by
    NumelLists, compat.simd_numels); the C++ backend groups by tuples of sizes, whose
    products they are (such graphs are only matched to record that the backend is not
    ours)."""
    group = getattr(node, "group", None)
    simd = compat.simd_numels(group)
    if simd is not None:
        return simd
    if group and len(group) == 2 and len(group[1]) == 2 and all(
            isinstance(v, tuple) for v in group[1]):
        return sympy.Mul(*group[1][0]), sympy.Mul(*group[1][1])
    return None


def same_size(a: sympy.Expr, b: sympy.Expr) -> bool:
    return V.graph.sizevars.statically_known_equals(a, b)


def segments_of(col: ColumnReduction, M: sympy.Expr, N: sympy.Expr) -> sympy.Expr | None:
    """B when `col` reduces [B, T, N] -> [B, N] over the rows of an [M = B*T, N] row
    reduction (numel B*N, rnumel T, B > 1); None when it is no such segmented reduction.
    B may be symbolic (a dynamic batch): the caller declines that."""
    if same_size(col.numel, N) or same_size(col.rnumel, 1):
        return None
    B = sympy.simplify(col.numel / N)
    if sympy.fraction(sympy.together(B))[1] != 1:
        return None  # N does not divide the output's numel
    try:
        if not same_size(B * col.rnumel, M):
            return None
    except Exception:
        return None
    return B


def column_reductions(nodes: Sequence[BaseSchedulerNode]) -> list[ColumnReduction]:
    """Every sub-node that is (or finishes) a reduction over one long axis."""
    sched = compat.scheduler_of(nodes)
    records = unsplit.unsplit_records()
    found: list[ColumnReduction] = []
    for node in nodes:
        for sub in node.get_nodes():
            if not isinstance(sub, SchedulerNode) or not sub.is_reduction():
                continue
            rtype = compat.reduction_type_of(sub)
            if rtype is None or unsplit.split_record_of(sub) is not None:
                # Not a plain reduction, or the first stage of a split one (keyed by its
                # buffer; its partial sums over row segments would also look segmented).
                continue
            sizes = numels(sub)
            if sizes is None:
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
                    numel=sizes[0], rnumel=sizes[1], unsplit=None))
    return found


def _split_source(final: SchedulerNode, records: dict[str, UnsplitReduction],
                  sched: Scheduler | None) -> tuple[SchedulerNode, UnsplitReduction] | None:
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
        if numels(node) is None:
            continue
        out.append(node)
    return sorted(out, key=row_preference)


def row_preference(node: BaseSchedulerNode) -> tuple[bool, int, bool, int]:
    """Sort key of row reductions, best first. Either orientation of a pair is correct.
    Prefer a static row length (the persistent tile needs it), then rows Inductor sees as
    contiguous (INNER before DEFAULT before OUTER-hinted reductions), then rows whose node
    also computes elementwise over [M, N] (a norm's dx: fused with it, the kernel reads x
    and dy once for everything; fused the other way, dx stays a kernel that reads them
    again), then more rows."""
    sizes = numels(node)
    assert sizes is not None, "row_reduction_nodes keeps nodes with numels only"
    numel, rnumel = sizes
    hints = {_hint_name(s) for s in compat.scheduler_nodes_of(node) if s.is_reduction()}
    rank = 2 if hints & {"OUTER", "OUTER_TINY"} else 0 if "INNER" in hints else 1
    return (not isinstance(rnumel, (int, sympy.Integer)), rank,
            not _has_matrix_epilogue(node, numel * rnumel), -size_hint(numel))


def _has_matrix_epilogue(node: BaseSchedulerNode, matrix: sympy.Expr) -> bool:
    """Whether `node` computes something elementwise over all [M, N] elements."""
    for sub in compat.scheduler_nodes_of(node):
        if sub.is_reduction():
            continue
        try:
            if same_size(sympy.Mul(*sub.get_ranges()[0]), matrix):
                return True
        except Exception:
            continue
    return False


def split_pieces(node: BaseSchedulerNode, N: sympy.Expr) -> int:
    """Pieces Inductor split each row of the row side `node` into (1: whole rows): its
    split reduction's first stage reduces M * k rows of N / k, and unsplit.unsplit_records
    keeps what it was split from. Row r of such a stage is piece r % k of row r // k."""
    pieces = 1
    for sub in node.get_nodes():
        record = unsplit.split_record_of(sub)
        if record is not None and sub.is_reduction():
            whole = size_hint(sympy.Mul(*record.reduction_ranges))
            pieces = max(pieces, whole // size_hint(N))
    return pieces


def _hint_name(snode: SchedulerNode) -> str:
    """Inductor's ReductionHint name for a reduction node ('' if none)."""
    return compat.reduction_hint_name(snode)


def shared_matrices(row_reads: set[str], col: ColumnReduction, M: sympy.Expr,
                    N: sympy.Expr) -> set[str]:
    """The [M, N] buffers read by both the row side and the column reduction."""
    return {name for name in row_reads & col.reads() if is_full_matrix(name, M * N)}


def nbytes(name: str) -> int:
    """Bytes of a graph buffer at its size hint (0 if unknown)."""
    try:
        buf = V.graph.get_buffer(name)
        return size_hint(sympy.Mul(*buf.get_size())) * buf.get_dtype().itemsize
    except Exception:
        return 0


def is_full_matrix(name: str, numel: sympy.Expr) -> bool:
    try:
        buf = V.graph.get_buffer(name)
        if buf is None:
            return False
        size = sympy.Mul(*buf.get_size())
    except Exception:
        return False
    return same_size(size, numel)


#: Loop-body operations of a node that only casts one buffer elementwise.
_CAST_OPS = frozenset({"get_index", "load", "to_dtype", "store"})


def cast_consumer(sched: Scheduler | None, col: ColumnReduction) -> SchedulerNode | None:
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
            or not same_size(sympy.Mul(*node.get_ranges()[0]), col.numel)):
        return None
    body = getattr(node, "_body", None)
    if body is None or getattr(body, "subblocks", None):
        return None
    ops = {n.target for n in body.root_block.graph.nodes if n.op in ("call_method",
                                                                   "call_module")}
    return node if ops <= _CAST_OPS else None
