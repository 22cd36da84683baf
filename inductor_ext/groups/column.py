"""A column reduction as the scheduler found it and codegen computes it: a reduction over
M rows for each of N columns, with the nodes the fused kernel replaces."""

from __future__ import annotations

import dataclasses

import sympy

from .. import compat
from ..compat import LoopBody, SchedulerNode, V
from .unsplit import UnsplitReduction


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
    #: [M, N] buffers this reduction reads that its group's row side computes elementwise
    #: (legality.row_outputs_read): the fused kernel hands it the row block's values.
    row_reads: frozenset[str] = frozenset()
    #: Samples B of a segmented column reduction ([B, T, N] -> [B, N] over the row side's
    #: B*T rows, adaLN's d(scale)/d(shift)); 1 for a reduction over all M rows.
    segments: int = 1
    #: Segmented by the row side's pieces: sample b is rows b, b + B, ... of a row
    #: reduction Inductor split into B pieces per row (bodies.segmented_body).
    interleaved: bool = False

    @property
    def out_name(self) -> str:
        """Name of the buffer the reduction itself writes (fp32 accumulation)."""
        return compat.computed_buffer_of(self.out_node).get_name()

    @property
    def final_name(self) -> str:
        """Name of the buffer the final step writes: the cast's output if absorbed."""
        return (compat.computed_buffer_of(self.cast).get_name() if self.cast is not None
                else self.out_name)

    def reads(self) -> set[str]:
        names: set[str] = set()
        internal = {compat.computed_buffer_of(n).get_name() for n in self.absorbed}
        for node in self.absorbed:
            names.update(d.name for d in node.read_writes.reads if d.name not in internal)
        return names

    def operation_names(self) -> set[str]:
        return {n.get_name() for n in self.absorbed}


def column_loop_body(col: ColumnReduction
                     ) -> tuple[tuple[list[sympy.Expr], list[sympy.Expr]], LoopBody]:
    """((iteration sizes, reduction sizes), LoopBody) the fused kernel runs for `col`: the
    unsplit reduction when Inductor split it."""
    if col.unsplit is not None:
        buf = compat.computed_buffer_for(col.unsplit, col.out_name)
    else:
        buf = compat.computed_buffer_of(col.out_node)
    return compat.default_sizes_body(buf)


def size_hint(expr: sympy.Expr) -> int:
    try:
        return int(V.graph.sizevars.optimization_hint(expr))
    except Exception:
        return 1 << 62
