"""Norm backwards that reach the scheduler as one extern kernel, so that they are counted.

A norm whose backward op has no decomposition (Ascend's ``npu_rms_norm_backward`` under
its default backend: one aclnnRmsNormGrad; a norm backward the user put in Ascend's
``NPU_INDUCTOR_FALLBACK_LIST``) is no Inductor reduction: the matcher never sees it, and
without this scan the norm would vanish from the counts. Each such extern kernel is
recorded as ``extern_norm``, named by the user's module from its FX node's metadata (the
extern kernel's origins), like any decline.

A norm backward op is one whose name says so, the rule ``origin.py`` applies to decomposed
ones (``norm_backward`` with ``layer_norm`` or ``rms_norm``: ATen's
``native_layer_norm_backward`` and ``_fused_rms_norm_backward``, Ascend's
``npu_rms_norm_backward``, ``npu_add_layer_norm_backward``...). Targets add what a user can
do about an op (`register_hint`). The scan reads one attribute per extern node and never
raises: a failure is logged once and the graph goes on as Inductor scheduled it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import sympy

from ..compat import BaseSchedulerNode
from ..diagnostics import warn_once
from ..groups.attribution import Attribution
from . import origin

#: Per op name ("npu::npu_rms_norm_backward"): what the user can do about it, asked at each
#: record (targets fill it; the answer may depend on their options).
HINTS: dict[str, Callable[[], str]] = {}


def register_hint(op_name: str, hint: Callable[[], str]) -> None:
    """Add `hint()` to the detail of every extern_norm record of `op_name`
    ("namespace::name")."""
    HINTS[op_name] = hint


@dataclasses.dataclass(frozen=True)
class ExternNorm:
    """One norm backward run as an extern kernel: the decline's fields."""

    names: str  # the extern node's name
    op: str  # "namespace::name"
    M: sympy.Expr | int | str
    N: sympy.Expr | int | str
    detail: str
    attribution: Attribution


def is_norm_backward(op_name: str) -> bool:
    """Whether an op ("namespace::name") is a layer / RMS norm's backward."""
    name = op_name.rsplit("::", 1)[-1]
    return "norm_backward" in name and ("layer_norm" in name or "rms_norm" in name)


def op_name_of(snode: BaseSchedulerNode) -> str | None:
    """"namespace::name" of the op an extern scheduler node calls; None for other nodes
    (and for extern nodes without an op: a MultiOutput's getitem, a template)."""
    if not snode.is_extern():
        return None
    op = getattr(getattr(snode, "node", None), "op_overload", None)
    packet = getattr(op, "overloadpacket", op)
    name = getattr(packet, "_qualified_op_name", None)
    return name if isinstance(name, str) else None


def _rows_and_columns(snode: BaseSchedulerNode
                      ) -> tuple[sympy.Expr | int | str, sympy.Expr | int | str]:
    """(M, N) of the norm as the reject table writes them: its first input (dy) read as
    rows over its last dimension; "?" when the input has no size."""
    try:
        size = list(snode.node.inputs[0].get_size())  # type: ignore[union-attr]
        return sympy.simplify(math.prod(size[:-1], start=sympy.Integer(1))), size[-1]
    except Exception:
        return "?", "?"


def scan(nodes: Sequence[BaseSchedulerNode]) -> list[ExternNorm]:
    """The norm backwards among `nodes` that are extern kernels; [] if the scan fails."""
    try:
        found = []
        for snode in nodes:
            op = op_name_of(snode)
            if op is None or not is_norm_backward(op):
                continue
            where = origin.of_node(snode)
            detail = (f"{op} runs as one extern kernel (no decomposition here), so its dx and "
                      f"weight gradient are not Inductor reductions")
            if op in HINTS:
                detail += f"; {HINTS[op]()}"
            M, N = _rows_and_columns(snode)
            attribution = Attribution(
                norms=[where.key], modules=[where.module] if where.module else [],
                sources=[where.source] if where.source else [],
                classes=origin.classes([where]))
            found.append(ExternNorm(snode.get_name(), op, M, N, detail, attribution))
        return found
    except Exception as exc:  # counting must never break a compile
        warn_once("externs", "inductor_ext: could not scan the graph's extern kernels for "
                  "norm backwards (they go uncounted): %s", exc)
        return []
