"""Decide which row/column pairs the fused kernel can compute correctly, with a reason for
each no. Matching (``assign.py``) asks these per pair, so a column that cannot join one row
reduction is still offered to the others.

Every no is a ``Reason`` member (``inductor_ext.reasons``, which describes each code and
renders the README's table); legality gives most of them, the hook the planning ones
(``split_rows``, ``no_tile_fits``, ``tiled_row_reads``, ``tiled_non_sum``,
``not_profitable``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy
import torch

from .. import compat
from ..codegen import families
from ..compat import BaseSchedulerNode, LoopBody, SchedulerNode, V, ir
from ..groups.combine import accumulator_dtype
from ..plan import Planner
from ..reasons import Reason
from . import phrases
from .match import ColumnReduction, column_loop_body, index_symbols, same_size

SUPPORTED_COLUMN_REDUCTIONS = ("sum", "prod", "max", "min")


def check_row(inner: BaseSchedulerNode, N: sympy.Expr) -> Reason | None:
    if V.graph.cpp_wrapper or getattr(V.graph, "aot_mode", False):
        return Reason.CPP_WRAPPER
    if not isinstance(N, (int, sympy.Integer)):
        return Reason.DYNAMIC_N
    for sub in inner.get_nodes():
        node = getattr(sub, "node", None)
        if isinstance(node, ir.ComputedBuffer) and isinstance(node.data, (ir.Scan, ir.Sort)):
            return Reason.UNSUPPORTED_REDUCTION_TYPE
        if compat.is_strict_reduction(sub):
            return Reason.UNSUPPORTED_REDUCTION_TYPE
    return None


def check_segments(col: ColumnReduction, segments: sympy.Expr, M: sympy.Expr,
                   N: sympy.Expr, interleaved: bool = False) -> tuple[Reason, str] | None:
    """(reason, detail) if the segmented column `col` ([B, T, N] -> [B, N], B =
    `segments`) cannot ride an [M, N] row reduction's per-sample row loop (`interleaved`:
    the samples are the pieces of a split row, see bodies.segmented_body)."""
    from ..groups.bodies import segmented_body

    if not isinstance(segments, (int, sympy.Integer)):
        return Reason.DYNAMIC_SEGMENTS, (f"{phrases.column(col)} reduces per sample over "
                                         f"{segments} samples, a symbolic count")
    (iter_sizes, red_sizes), body = column_loop_body(col)
    if segmented_body(body, iter_sizes, red_sizes, segments, M, N, interleaved) is None:
        return Reason.SEGMENTED_UNSUPPORTED, (
            f"{phrases.column(col)} over {list(iter_sizes)} x {list(red_sizes)} does not split "
            f"into {segments} samples of [{sympy.simplify(M / segments)}, {N}]")
    return None


def check_pair(inner: BaseSchedulerNode, col: ColumnReduction, inner_ancestors: set[str],
               col_ancestors: set[str] | None = None, segments: int = 1,
               interleaved: bool = False) -> tuple[Reason, str] | None:
    """(reason, detail) if `col` cannot be computed in the row reduction `inner`'s kernel;
    `inner_ancestors` / `col_ancestors` are ``ancestors_of`` their nodes (callers keep them
    per row and column); `segments`: B of a segmented pair (`interleaved`: its samples are
    the row's pieces)."""
    if col.reduction_type not in SUPPORTED_COLUMN_REDUCTIONS:
        return (Reason.UNSUPPORTED_REDUCTION_TYPE,
                f"{phrases.column(col)} is a {col.reduction_type} reduction; the fused "
                f"kernel takes {'/'.join(SUPPORTED_COLUMN_REDUCTIONS)} only")
    if any(compat.is_strict_reduction(node) for node in col.absorbed):
        return Reason.UNSUPPORTED_REDUCTION_TYPE, f"{phrases.column(col)} is a strict reduction"
    dtype = _column_src_dtype(col)
    if dtype is None or not dtype.is_floating_point:
        return Reason.UNSUPPORTED_DTYPE, f"{phrases.column(col)} accumulates {dtype}"
    if col.operation_names() & inner_ancestors:
        return (Reason.PRODUCER_CONSUMER,
                f"{phrases.row(inner)} needs the result of {phrases.column(col)}")
    if col_ancestors is None:
        col_ancestors = ancestors_of(col.absorbed)
    if inner.get_operation_names() & col_ancestors:
        read, why = _row_outputs(inner, col, segments, interleaved)
        if read is None:
            return (Reason.PRODUCER_CONSUMER,
                    f"{phrases.column(col)} needs {phrases.row(inner)}{why}")
    return None


def row_outputs_read(inner: BaseSchedulerNode, col: ColumnReduction, segments: int = 1,
                     interleaved: bool = False) -> set[str] | None:
    """The buffers through which `col` depends on the row side `inner`, when the fused
    kernel can hand it their values; None when it cannot.

    In the persistent kernel every value the row side computes for a row block is in
    registers when the column partials are accumulated, and Inductor's kernel passes a
    stored value on to a later load of the same buffer (its store cache). That is right
    when `col` reads each such buffer at the element the row block holds: an [M, N] buffer
    written densely in row-major order and read at [row, column] (the column's reduction
    index, its output index), such as a q/k norm's dy from the RoPE backward or gradients
    summed into a norm's dy; or an [M] buffer, a row statistic (a reduction of `inner`, or
    elementwise on one) written per row and read at [row], such as the recomputed rstd of
    an activation-checkpointed norm. Every op of `inner` that `col` depends on must be
    reached through those reads (a path through another kernel is a cycle, refused by
    the caller). A segmented column (`segments` = B > 1) is checked at the kernel's
    (row, column), its sample and step taken from the row (bodies.segmented_body)."""
    return _row_outputs(inner, col, segments, interleaved)[0]


def _row_outputs(inner: BaseSchedulerNode, col: ColumnReduction, segments: int = 1,
                 interleaved: bool = False) -> tuple[set[str] | None, str]:
    """``row_outputs_read``'s answer, and when it is None why, as the end of the decline's
    detail "<column> needs <row>...": the kernel between them, or where it reads."""
    writer = {dep.name: s for s in compat.scheduler_nodes_of(inner)
              for dep in s.read_writes.writes}
    direct = {name for name in col.reads() if name in writer}
    needed = inner.get_operation_names() & ancestors_of(col.absorbed)
    reached = set()
    for name in direct:
        reached |= {writer[name].get_name()} | set(writer[name].ancestors)
    if not needed <= reached:
        missed = set(needed - reached)
        internal = (f"{col.out_name} depends on {', '.join(sorted(missed))} other than "
                    "through buffers it reads")
        between = _kernels_between(inner, col, missed)
        if between:
            return None, (f" through {', '.join(phrases.kernel([n]) for n in between)}, "
                          f"not only through what it reads of it ({internal})")
        return None, f" other than through what it reads of it ({internal})"
    M, N = col.rnumel, col.numel
    if segments > 1:
        M, N = M * segments, sympy.simplify(N / segments)
    for name in sorted(direct):
        why = _row_block_element(writer[name], col, name, M, N, segments, interleaved)
        if why is not None:
            return None, (": it reads what the row side computes away from the row block's "
                          f"own element ({why})")
    return direct, ""


def _kernels_between(inner: BaseSchedulerNode, col: ColumnReduction,
                     missed: set[str]) -> list[BaseSchedulerNode]:
    """The kernels `col` reads from that depend on the ops `missed` of `inner`: the path
    a decline names (the matmul of the Linear between two norms)."""
    sched = compat.scheduler_of([inner])
    ops = inner.get_operation_names() | col.operation_names()
    found: dict[str, BaseSchedulerNode] = {}
    for sub in col.absorbed:
        for dep in sub.read_writes.reads:
            buf = getattr(sched, "name_to_buf", {}).get(dep.name)
            node = getattr(buf, "defining_op", None)
            if node is None or node.get_name() in ops:
                continue
            if node.get_name() in missed or missed & set(getattr(node, "ancestors", ())):
                found.setdefault(node.get_name(), node)
    return list(found.values())


def _row_block_element(producer: SchedulerNode, col: ColumnReduction, name: str,
                       M: sympy.Expr, N: sympy.Expr, segments: int = 1,
                       interleaved: bool = False) -> str | None:
    """None when `col` reads `name` only where `producer`, run inside the row kernel,
    stores the row block's own element: [row, column] of an [M, N] buffer, or [row] of an
    [M] one; else what differs. In the row kernel the producer's iteration runs row-major
    over (row, column), whatever order its buffer is laid out in (a RoPE backward's dy
    stored as [B, H, T, D] while the rows are (b, t, h))."""
    (sizes, red_sizes), body = compat.loop_body_of(producer)
    p_vars = index_symbols("mo_p", len(sizes))
    q_vars = index_symbols("mo_q", len(red_sizes))
    shape = f"{producer.get_name()} writes {name} over {list(sizes)} x {list(red_sizes)}"
    if producer.is_reduction():
        if not (same_size(sympy.Mul(*sizes), M) and same_size(sympy.Mul(*red_sizes), N)):
            return f"{shape}, not a row statistic of [{M}, {N}]"
        stores = compat.memory_indices(body, [p_vars, q_vars], name, "store_reduction")
        per_row = True
    else:
        per_row = same_size(sympy.Mul(*sizes), M) and not same_size(M, M * N)
        if red_sizes or not (per_row or same_size(sympy.Mul(*sizes), M * N)):
            return f"{shape}, neither [{M}, {N}] nor [{M}]"
        stores = compat.memory_indices(body, [p_vars, q_vars], name, "store")
    if len(stores) != 1:
        return f"{shape} at {len(stores)} places"
    (iter_sizes, col_red_sizes), col_body = column_loop_body(col)
    if segments > 1:
        if sympy.expand(stores[0] - _flat(p_vars, sizes)) != 0:
            return f"{shape} at {stores[0]}, not densely in its iteration order"
        if _segmented_reads_element(col_body, iter_sizes, col_red_sizes, segments, name,
                                    M, N, per_row, interleaved):
            return None
        return f"{col.out_name} reads {name} per sample away from the row block's element"
    c_vars = index_symbols("mo_c", len(iter_sizes))
    r_vars = index_symbols("mo_r", len(col_red_sizes))
    loads = compat.memory_indices(col_body, [c_vars, r_vars], name, "load")
    if loads and reads_stored_element(stores[0], p_vars, list(sizes), loads, r_vars,
                                      list(col_red_sizes), c_vars, list(iter_sizes),
                                      per_row):
        return None
    return (f"{col.out_name} (over {list(iter_sizes)} x {list(col_red_sizes)}) reads {name} "
            f"at {loads}; {shape} at {stores[0]}")


def reads_stored_element(store: sympy.Expr, p_vars: Sequence[sympy.Symbol],
                         p_sizes: Sequence[sympy.Expr], loads: Sequence[sympy.Expr],
                         row_vars: Sequence[sympy.Symbol], row_sizes: Sequence[sympy.Expr],
                         col_vars: Sequence[sympy.Symbol], col_sizes: Sequence[sympy.Expr],
                         per_row: bool) -> bool:
    """Whether every load (an index over the column reduction's rows `row_vars` and
    columns `col_vars`) reads the address `store` (over the producer's `p_vars`) writes
    for the same element. The producer iterates its sizes row-major over the flat
    (row * N + column), or over the row alone when `per_row`; both sides are rewritten
    over the finest factorization the two sizes lists share, then compared exactly. With
    no such factorization (symbolic sizes, an uneven split) only the plain row-major
    identity is accepted."""
    row = _flat(row_vars, row_sizes)
    flat = row if per_row else sympy.Mul(*col_sizes) * row + _flat(col_vars, col_sizes)
    if sympy.expand(store - _flat(p_vars, p_sizes)) == 0 and \
            all(sympy.expand(load - flat) == 0 for load in loads):
        return True  # both row-major: holds for symbolic sizes too
    seen = [*row_sizes, *([] if per_row else col_sizes)]
    seen_vars = [*row_vars, *([] if per_row else col_vars)]
    pieces = _common_pieces(list(p_sizes), seen)
    if pieces is None:
        if [sympy.sympify(s) for s in p_sizes] != [sympy.sympify(s) for s in seen]:
            return False
        sub = dict(zip(seen_vars, p_vars))
        ranges = {}
    else:
        piece_vars = index_symbols("mo_k", len(pieces))
        sub = dict(zip(p_vars, _over_pieces(p_sizes, pieces, piece_vars)))
        sub.update(zip(seen_vars, _over_pieces(seen, pieces, piece_vars)))
        ranges = dict(zip(piece_vars, pieces))
    sizevars = compat.sizevars()

    def rewritten(expr: sympy.Expr) -> sympy.Expr:
        return sympy.expand(sizevars.simplify_with_ranges(expr.xreplace(sub), ranges))

    stored = rewritten(store)
    return all(rewritten(load) - stored == 0 for load in loads)


def _common_pieces(a: list[sympy.Expr], b: list[sympy.Expr]) -> list[int] | None:
    """Sizes (outermost first) of the finest row-major factorization that both `a` and
    `b` coarsen to, or None (a symbolic size, different totals, an uneven split)."""
    if not all(isinstance(s, (int, sympy.Integer)) for s in [*a, *b]):
        return None

    def bounds(sizes: list[sympy.Expr]) -> set[int]:
        out, stride = {1}, 1
        for size in reversed(sizes):
            stride *= int(size)
            out.add(stride)
        return out

    total_a, total_b = max(bounds(a)), max(bounds(b))
    if total_a != total_b:
        return None
    edges = sorted(bounds(a) | bounds(b))
    if any(hi % lo for lo, hi in zip(edges, edges[1:])):
        return None
    return [hi // lo for lo, hi in zip(edges, edges[1:])][::-1]


def _over_pieces(sizes: Sequence[sympy.Expr], pieces: list[int],
                 piece_vars: list[sympy.Symbol]) -> list[sympy.Expr]:
    """Each index of a row-major `sizes` written over the finer `pieces`' indices."""
    out: list[sympy.Expr] = []
    j = len(pieces) - 1
    for size in reversed(sizes):
        expr, stride, covered = sympy.Integer(0), 1, 1
        while covered < int(size):
            expr += piece_vars[j] * stride
            stride *= pieces[j]
            covered *= pieces[j]
            j -= 1
        out.append(expr)
    return out[::-1]


def _segmented_reads_element(body: LoopBody, iter_sizes: list[sympy.Expr],
                             red_sizes: list[sympy.Expr], segments: int, name: str,
                             M: sympy.Expr, N: sympy.Expr, per_row: bool,
                             interleaved: bool = False) -> bool:
    """A segmented column's loads of `name`, at the kernel's (row, column) and simplified
    as codegen does, are all [row, column] (or [row])."""
    from ..groups.bodies import segmented_body

    seg = segmented_body(body, iter_sizes, red_sizes, segments, M, N, interleaved)
    if seg is None:
        return False
    row, column = index_symbols("mo_g", 2)
    loads = compat.memory_indices(seg[0], [[row], [column]], name, "load")
    expected = row if per_row else N * row + column
    ranges = {row: M, column: N}
    return bool(loads) and all(
        sympy.expand(V.graph.sizevars.simplify_with_ranges(e, ranges) - expected) == 0
        for e in loads)


def _flat(variables: Sequence[sympy.Expr], sizes: Sequence[sympy.Expr]) -> sympy.Expr:
    """Row-major flat index of `variables` over `sizes`."""
    out, stride = sympy.Integer(0), sympy.Integer(1)
    for var, size in reversed(list(zip(variables, sizes))):
        out += var * stride
        stride *= size
    return out


def check_together(col: ColumnReduction, accepted: list[ColumnReduction],
                   segments: int = 1) -> tuple[Reason, str] | None:
    """(reason, detail) if `col` depends on a column already in the group, or feeds one, or
    reduces per sample over another sample count (`segments`: its B on this row) than a
    segmented column of the group: the programs are laid out for one B."""
    col_ancestors = ancestors_of(col.absorbed)
    col_ops = col.operation_names()
    for other in accepted:
        if other.operation_names() & col_ancestors or col_ops & ancestors_of(other.absorbed):
            first, then = ((col, other) if other.operation_names() & col_ancestors
                           else (other, col))
            return Reason.PRODUCER_CONSUMER, (f"{phrases.column(first)} needs "
                                              f"{phrases.column(then)}, a column of the "
                                              "same group")
    group = next((other.segments for other in accepted if other.segments > 1), 1)
    if segments > 1 and group > 1 and segments != group:
        return Reason.SEGMENTED_UNSUPPORTED, (f"{phrases.column(col)} has {segments} "
                                              f"samples, another column of the group "
                                              f"{group}")
    return None


def check_target(col: ColumnReduction, segments: int,
                 planner: Planner) -> tuple[Reason, str] | None:
    """(reason, detail) when the row's target cannot generate `col` (`segments`: its B on
    that row, 1 if it reduces over all rows): its accumulator dtype, or per-sample partials
    on a target without a per-sample row loop. Asked per pair, so another row's target
    may still take it."""
    bad = check_accumulator(col, planner.target, planner.accumulator_dtypes)
    if bad is None and segments > 1 and planner.segments is None:
        bad = (Reason.SEGMENTED_UNSUPPORTED, f"{phrases.column(col)} reduces per sample; the "
               f"{planner.target} target has no per-sample row loop")
    return bad


def check_accumulator(col: ColumnReduction, flavor: str,
                      supported: Sequence[torch.dtype]) -> tuple[Reason, str] | None:
    """(reason, detail) when the flavor cannot accumulate this column in its dtype."""
    dtype = _column_src_dtype(col)
    acc = accumulator_dtype(dtype) if dtype is not None else None
    if acc not in supported:
        return Reason.UNSUPPORTED_DTYPE, (f"{phrases.column(col)} accumulates in {acc}, "
                                          f"which the {flavor} flavor cannot generate")
    return None


def group_accumulator(columns: Sequence[ColumnReduction]) -> torch.dtype:
    """One workspace holds every partial of a group: the widest accumulator any of its
    columns needs (widening the others is exact)."""
    dtypes = [accumulator_dtype(d) for col in columns
              if (d := _column_src_dtype(col)) is not None]
    return max(dtypes, key=lambda d: d.itemsize, default=torch.float32)


def ancestors_of(nodes: Sequence[BaseSchedulerNode]) -> set[str]:
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


#: What a user on the C++ CPU backend does to have the plugin fuse: the decline's detail
#: and the graph's summary line say it.
CPU_ADVICE = ("to fuse, run on a GPU or an NPU, or on CPU with TRITON_INTERPRET=1 and the "
              "compile inside inductor_ext.interpreter.cpu_interpret()")


def backend_reason(inner: BaseSchedulerNode) -> tuple[Reason, str] | None:
    """(``unsupported_backend``, detail) unless the node's device is generated by a Triton
    scheduling we emit for (the C++ CPU backend is not: its detail says what to do)."""
    sched = compat.scheduler_of([inner])
    device = inner.get_device()
    if sched is None or device is None:
        return Reason.UNSUPPORTED_BACKEND, "no scheduler or device"
    backend = sched.get_backend(device)
    detail = families.unsupported(backend)
    if detail:
        return Reason.UNSUPPORTED_BACKEND, detail
    if compat.triton_scheduling_of(backend) is None:
        if _cpp_cpu(device, backend):
            return (Reason.UNSUPPORTED_BACKEND,
                    f"{type(backend).__name__}: Inductor's C++ CPU backend generates this "
                    f"graph, the plugin fuses only kernels generated as Triton; {CPU_ADVICE}")
        return (Reason.UNSUPPORTED_BACKEND,
                f"{type(backend).__name__} has no Triton scheduling")
    return None


def backend_advice(nodes: Sequence[BaseSchedulerNode]) -> str:
    """What to do where a graph's reductions are generated by the C++ CPU backend
    (`CPU_ADVICE`), for the graph's summary line; '' elsewhere."""
    sched = compat.scheduler_of(nodes)
    if sched is None:
        return ""
    devices = {node.get_device() for node in nodes if node.is_reduction()} - {None}
    return CPU_ADVICE if any(_cpp_cpu(d, sched.get_backend(d))
                             for d in devices if d is not None) else ""


def _cpp_cpu(device: torch.device, backend: object) -> bool:
    """Whether `backend` generates `device`'s kernels as Inductor's C++ CPU backend does:
    a CPU whose scheduling has no Triton one."""
    return device.type == "cpu" and compat.triton_scheduling_of(backend) is None


def unsupported_backends(nodes: Sequence[BaseSchedulerNode]) -> list[str]:
    """Why each device of a graph's reductions is generated by a backend the plugin does
    not handle (one detail per such device): matching may not even read such a backend's
    groups, so the graph is declined as a whole."""
    sched = compat.scheduler_of(nodes)
    if sched is None:
        return []
    devices = {node.get_device() for node in nodes if node.is_reduction()} - {None}
    details = (families.unsupported(sched.get_backend(d))
               for d in sorted(devices, key=str))
    return [d for d in details if d]
