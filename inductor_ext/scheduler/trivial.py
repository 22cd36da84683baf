"""Reductions Inductor computes without a reduction loop, so that a norm backward at such a
shape leaves a record instead of nothing.

Inductor lowers a reduction over one element, or over at most
``unroll_reductions_threshold`` elements, as pointwise code: RMSNorm backward at 1x1000 has
no dw reduction (one row), at 1000x1 no dx reduction, at 3x7 neither. Those reductions are
only visible as FX reduction ops among the ``origins`` of pointwise nodes. When one faces a
reduction (real or not) of the swapped shape that reads a common [M, N] buffer, the graph
records ``trivial_reduction`` once for that shape.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence
from typing import Any

import sympy
import torch

from ..compat import BaseSchedulerNode
from ..reasons import Reason
from . import origin, phrases
from .match import ColumnReduction, Decline, is_full_matrix, numels, same_size


@dataclasses.dataclass
class TrivialReduction:
    """A reduction FX node that no scheduler node computes with a reduction loop."""

    fx: torch.fx.Node
    numel: int
    rnumel: int
    holders: list[str]  # scheduler ops whose pointwise code computes it
    reads: set[str]

    @property
    def M_N(self) -> tuple[int, int]:
        """The pair's [M, N]: a reduction over the last dim is the row side (dx), one over
        leading dims the column side (dw)."""
        return (self.numel, self.rnumel) if _reduces_last_dim(self.fx) else \
            (self.rnumel, self.numel)


def trivial_reductions(nodes: Sequence[BaseSchedulerNode]) -> list[TrivialReduction]:
    looped: set[torch.fx.Node] = set()
    holders: dict[torch.fx.Node, list[BaseSchedulerNode]] = collections.defaultdict(list)
    for node in nodes:
        for sub in node.get_nodes():
            fx_nodes = [fx for fx in getattr(sub.node, "origins", ()) or ()
                        if origin.is_reduction_op(fx)]
            sizes = numels(sub) if sub.is_reduction() else None
            for fx in fx_nodes:
                # A reduction node also lists the reductions inlined into its body (a
                # recomputed mean over one element): only its own shape has a loop.
                fx_sizes = _static_sizes(fx)
                if sizes is not None and (fx_sizes is None or (
                        same_size(sizes[0], fx_sizes[0]) and same_size(sizes[1], fx_sizes[1]))):
                    looped.add(fx)
                else:
                    holders[fx].append(sub)
    found = []
    for fx, subs in holders.items():
        if fx in looped:
            continue
        sizes = _static_sizes(fx)
        if sizes is None:
            continue
        reads = {dep.name for sub in subs for dep in sub.read_writes.reads}
        found.append(TrivialReduction(fx=fx, numel=sizes[0], rnumel=sizes[1],
                                      holders=[sub.get_name() for sub in subs], reads=reads))
    return sorted(found, key=lambda t: t.fx.name)


def _static_sizes(fx: Any) -> tuple[int, int] | None:
    """(output elements, elements reduced per output) of a reduction FX node, if static."""
    try:
        out = fx.meta["val"]
        out = out[0] if isinstance(out, (tuple, list)) else out
        inp = fx.args[0].meta["val"]
        numel, total = out.numel(), inp.numel()
    except Exception:
        return None
    if not isinstance(numel, int) or not isinstance(total, int) or numel < 1 or total < 1:
        return None
    return numel, total // numel


def _reduces_last_dim(fx: Any) -> bool:
    try:
        ndim = fx.args[0].meta["val"].dim()
        dims = fx.args[1] if len(fx.args) > 1 else None
    except Exception:
        return True
    if not isinstance(dims, (list, tuple)) or not dims:
        return True
    return ndim == 0 or (ndim - 1) in {d % ndim for d in dims if isinstance(d, int)}


def trivial_declines(nodes: Sequence[BaseSchedulerNode], columns: list[ColumnReduction],
                     decided: set[tuple[str, str]]) -> list[Decline]:
    """One ``trivial_reduction`` decline per shape with no other outcome in `decided`
    (shape classes, see `shape_class`), for a loop-less reduction facing a reduction of the
    swapped shape over a common [M, N] buffer."""
    trivial = trivial_reductions(nodes)
    if not trivial:
        return []
    sides = []  # (name, numel, rnumel, reads, origin) of every reduction, looped or not
    for node in nodes:
        sizes = numels(node) if node.is_reduction() else None
        if sizes is not None:
            reads = {dep.name for dep in node.read_writes.reads}
            sides.append((node.get_name(), *sizes, reads,
                          [origin.of_node(s) for s in node.get_nodes() if s.is_reduction()]))
    for col in columns:
        sides.append((col.out_name, col.numel, col.rnumel, col.reads(),
                      [origin.of_node(col.out_node)]))
    out = []
    for t in trivial:
        cls = shape_class(t.numel, t.rnumel)
        if cls in decided:
            continue
        t_origin = origin.of_fx(t.fx)
        partners = [(s[0], s[3], s[4]) for s in sides
                    if same_size(s[1], t.rnumel) and same_size(s[2], t.numel)]
        partners += [("+".join(u.holders), u.reads, [origin.of_fx(u.fx)]) for u in trivial
                     if u is not t and u.numel == t.rnumel and u.rnumel == t.numel]
        for name, reads, origins in partners:
            shared = any(is_full_matrix(b, sympy.Integer(t.numel * t.rnumel))
                         for b in reads & t.reads)
            if not shared:
                continue
            decided.add(cls)
            attribution = origin.attribute([], [t_origin, *origins])
            M, N = t.M_N
            out.append(Decline(
                names=f"{'+'.join(t.holders)}+{name}", M=M, N=N,
                reason=Reason.TRIVIAL_REDUCTION,
                detail=f"{phrases.reduction(t_origin, t.fx.name)} reduces {t.rnumel} "
                       "element(s) per output; Inductor computes it without a reduction "
                       "loop", attribution=attribution))
            break
    return out


def shape_class(a: int | sympy.Expr, b: int | sympy.Expr) -> tuple[str, str]:
    """Both orientations of an [a, b] pair as one key."""
    return tuple(sorted((str(a), str(b))))  # type: ignore[return-value]
