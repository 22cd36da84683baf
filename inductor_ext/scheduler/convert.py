"""Rewrite the scheduler's node list: one MixOrderNode per accepted group.

Everything is computed before anything is mutated, so a failure leaves Inductor's own
schedule intact.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..compat import BaseSchedulerNode, FusedSchedulerNode, Scheduler
from ..coverage import GraphCoverage
from ..groups.node import MixOrderNode, Verdict
from ..plan.types import LaunchPlan, ShapeInfo
from .match import Candidate


def _regroup(sched: Scheduler, members: list[BaseSchedulerNode]) -> BaseSchedulerNode:
    if len(members) == 1:
        return members[0]
    return FusedSchedulerNode(sched, members)


def convert(sched: Scheduler, nodes: Sequence[BaseSchedulerNode], cand: Candidate,
            plan: LaunchPlan, shape: ShapeInfo, verdict: Verdict | None = None,
            coverage: GraphCoverage | None = None) -> list[BaseSchedulerNode]:
    """Return a new node list where the candidate's inner node and the column reductions
    are one MixOrderNode; leftovers of partly absorbed fused nodes stay as their own nodes."""
    absorbed = {id(n) for col in cand.columns for n in col.absorbed}
    absorbed |= {id(col.cast) for col in cand.columns if col.cast is not None}
    fused = MixOrderNode(sched, cand.inner, cand.columns, cand.M, cand.N, plan, shape,
                         attribution=cand.attribution, coverage=coverage)
    fused.verdict = verdict if verdict is not None else Verdict()

    new_nodes: list[BaseSchedulerNode] = []
    replaced: list[tuple[BaseSchedulerNode, BaseSchedulerNode]] = []
    placed = False
    for node in nodes:
        members = list(node.get_nodes())
        hit = [m for m in members if id(m) in absorbed]
        if node is cand.inner:
            if not placed:
                new_nodes.append(fused)
                placed = True
            continue
        if not hit:
            new_nodes.append(node)
            continue
        rest = [m for m in members if id(m) not in absorbed]
        if rest:
            regrouped = _regroup(sched, rest)
            new_nodes.append(regrouped)
            replaced.append((node, regrouped))
    if not placed:
        raise RuntimeError("inner node not found in the node list")

    for node in fused.get_nodes():
        sched.name_to_fused_node[node.get_name()] = fused
    for _, regrouped in replaced:
        for node in regrouped.get_nodes():
            sched.name_to_fused_node[node.get_name()] = regrouped
    return sched.topological_sort_schedule(new_nodes)
