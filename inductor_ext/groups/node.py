"""The fused scheduler node handed to our codegen."""

from __future__ import annotations

import dataclasses

import sympy

from ..compat import BaseSchedulerNode, FusedSchedulerNode, Scheduler
from ..coverage import GraphCoverage
from ..plan.types import LaunchPlan, ShapeInfo
from .attribution import Attribution
from .column import ColumnReduction


@dataclasses.dataclass(frozen=True)
class Verdict:
    """The target's cost model on a fused group: whether it expects fusing to pay (a group
    fused under `always_fuse` may be one it would decline) and its times, which the fusion
    table records either way (model_fuses / model_detail), so a sweep can hold the model's
    prediction against what it measures."""

    fuses: bool = True
    detail: str = ""


class MixOrderNode(FusedSchedulerNode):
    """A persistent row reduction plus column reductions computed as partial accumulations.

    It is a FusedSchedulerNode so the scheduler's dependency tracking, memory planning and
    codegen dispatch treat it like any fused kernel; our backend wrapper recognises it.
    """

    def __init__(self, scheduler: Scheduler, inner: BaseSchedulerNode,
                 columns: list[ColumnReduction], M: sympy.Expr, N: sympy.Expr,
                 plan: LaunchPlan, shape: ShapeInfo, attribution: Attribution | None = None,
                 coverage: GraphCoverage | None = None) -> None:
        absorbed = [n for col in columns for n in col.absorbed]
        casts = [col.cast for col in columns if col.cast is not None]
        super().__init__(scheduler, [*inner.get_nodes(), *absorbed, *casts])
        self.inner_nodes = list(inner.get_nodes())
        self.columns = columns
        self.M = M
        self.N = N
        #: The target's launch plan, typed from the hook to the runtime (its inductor_meta).
        self.plan = plan
        self.shape = shape  # the shape the plan was made from (bytes, dtypes, device)
        #: The cost model's verdict (a fused group the model declines: under always_fuse).
        self.verdict = Verdict()
        self.group = inner.group
        self.attribution = attribution
        #: The graph's norm counts, which a codegen fallback corrects (`demote`).
        self.coverage = coverage

    def column_counts(self) -> tuple[list[str], int, int]:
        """(norms, norm columns, other columns) this kernel computes; every column counts
        as other when its origins are unknown."""
        if self.attribution is None:
            return [], 0, len(self.columns)
        a = self.attribution
        return a.norms, a.norm_columns, a.other_columns

    @property
    def table_fields(self) -> dict[str, str | int]:
        """The mix_order_fusion columns that name the user's modules (origin.py)."""
        if self.attribution is None:
            return {"norms": "", "norm_columns": 0, "other_columns": len(self.columns),
                    "modules": "", "source": "", "norm_classes": ""}
        return self.attribution.fusion_fields()

    def debug_str_extra(self) -> str:
        cols = ", ".join(f"{c.reduction_type}->{c.final_name}" for c in self.columns)
        return f"{super().debug_str_extra()}\n  mix_order: M={self.M} N={self.N} [{cols}]"
