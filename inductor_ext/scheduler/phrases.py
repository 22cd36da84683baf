"""Decline details in the user's terms.

A decline's detail says first what depends on what as the user wrote it: the module (else
the forward source line) and the role of each side (a norm's dx, its dw/db, another row or
column reduction, a kernel between them), then Inductor's buffer and op names, in
parentheses, for whoever reads the generated code:

    the dw/db of model.norm (buf8) needs the dx of model.norm2 (op0_op1_op4) through a
    kernel of model.proj (op5)

Where no metadata names a side it is its internal name alone, as before. Names come from
``origin.of_node`` (best effort: a phrase never decides a fusion).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..compat import BaseSchedulerNode, Scheduler
from ..groups.column import ColumnReduction
from . import origin
from .origin import Origin


def ref(phrase: str, internal: str) -> str:
    """`phrase (internal)`; the internal name alone when the phrase is unknown."""
    return f"{phrase} ({internal})" if phrase else internal


def column(col: ColumnReduction) -> str:
    """A column reduction in the user's terms, its buffer after: "the dw/db of model.norm
    (buf8)", "a column sum of model.proj (buf3)", else "buf3"."""
    return ref(column_phrase(origin.of_node(col.out_node), col.reduction_type), col.out_name)


def row(node: BaseSchedulerNode) -> str:
    """A row-reduction kernel in the user's terms, its name after: "the dx of
    model.norm2 (op0_op1_op4)", "a row reduction of model.norm (op7)", else "op7"."""
    return ref(row_phrase(_origins(node.get_nodes(), reductions=True)), node.get_name())


def kernel(nodes: Sequence[BaseSchedulerNode], name: str = "") -> str:
    """A kernel between the two sides (a matmul of the Linear between two norms, say):
    "a kernel of model.proj (op5)", else its name."""
    origins = _origins(nodes, reductions=False)
    where = _join(_unique(o.module for o in origins if o.module)) or _join(
        _unique(o.source for o in origins if o.source))
    internal = name or "_".join(n.get_name() for n in nodes)
    if not where:
        return internal
    at = "of" if any(o.module for o in origins) else "at"
    return ref(f"a kernel {at} {where}", internal)


def kernel_of_ops(sched: Scheduler | None, ops: Iterable[str], name: str) -> str:
    """`kernel` of a unit of ``deps.KernelGraph``, given by its op names."""
    table = getattr(sched, "name_to_node", {}) or {}
    nodes = [table[op] for op in sorted(ops) if op in table]
    return kernel(nodes, name) if nodes else name


def column_phrase(o: Origin, reduction_type: str = "sum") -> str:
    """"the dw/db of model.norm" for a norm's column, "a column sum of model.proj" for
    another one (its reduction type when not a sum), '' when nothing names it."""
    if o.norm:
        return f"the dw/db of {_norm_name(o)}"
    what = "a column sum" if reduction_type == "sum" else f"a column {reduction_type}"
    return _placed(what, o)


def row_phrase(origins: Sequence[Origin]) -> str:
    """"the dx of model.norm2" when the kernel computes norms' row reductions, else "a
    row reduction of model.norm" (a recomputed forward statistic, say); '' if unnamed."""
    norms = _unique(_norm_name(o) for o in origins if o.norm)
    if norms:
        return f"the dx of {_join(norms)}"
    for o in origins:
        placed = _placed("a row reduction", o)
        if placed:
            return placed
    return ""


def _norm_name(o: Origin) -> str:
    return o.module or (f"the norm at {o.source}" if o.source else "a norm")


def _placed(what: str, o: Origin) -> str:
    if o.module:
        return f"{what} of {o.module}"
    return f"{what} at {o.source}" if o.source else ""


def _origins(nodes: Iterable[BaseSchedulerNode], reductions: bool) -> list[Origin]:
    """Origins of the sub-nodes (the reductions only when `reductions`) that have one."""
    out = []
    for node in nodes:
        for sub in node.get_nodes():
            if reductions and not sub.is_reduction():
                continue
            o = origin.of_node(sub)
            if o.module or o.source:
                out.append(o)
    return out


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _join(names: Sequence[str]) -> str:
    """"a", "a and b", "a, b and c"; '' for none."""
    if len(names) <= 1:
        return "".join(names)
    return f"{', '.join(names[:-1])} and {names[-1]}"


def group(inner: BaseSchedulerNode, columns: Sequence[ColumnReduction]) -> str:
    """A fused group in the user's terms, columns of one phrase together: "the dx of
    model.norm (op0_op1) with the dw/db of model.norm (buf2, buf3), a column sum of
    model.proj (buf4)"."""
    named: dict[str, list[str]] = {}
    for col in columns:
        phrase = column_phrase(origin.of_node(col.out_node), col.reduction_type)
        named.setdefault(phrase, []).append(col.out_name)
    parts = [ref(phrase, ", ".join(names)) for phrase, names in named.items()]
    return f"{row(inner)} with {', '.join(parts)}"


def reduction(o: Origin, internal: str) -> str:
    """Either side of a pair, by its origin: "a gradient reduction of model.norm (sum_3)",
    "a reduction of model.proj (sum_3)", else the internal name."""
    if o.norm:
        return ref(f"a gradient reduction of {_norm_name(o)}", internal)
    return ref(_placed("a reduction", o), internal)
