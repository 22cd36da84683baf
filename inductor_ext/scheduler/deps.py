"""Which kernel must run before which: the schedule's dependencies at kernel granularity.

A group puts ops that Inductor scheduled in different kernels into one kernel. That is only
schedulable if no path leaves the new kernel and comes back into it through another kernel
(which would have to run both after and before it). Inductor's per-op ``ancestors`` miss
such paths when they pass through a kernel holding several ops (a horizontal fusion, or an
earlier group), so this walks kernels. Inductor's ``topological_sort_schedule`` does not
detect a cycle; it returns an order that reads a buffer before it is written, so a missed
cycle would be a wrong result, not an error.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence

from .. import compat
from ..compat import BaseSchedulerNode


class KernelGraph:
    """Ops, the kernel (unit) each belongs to, and each op's direct consumers."""

    def __init__(self, nodes: Sequence[BaseSchedulerNode]) -> None:
        self.unit_of: dict[str, str] = {}
        self.members: dict[str, set[str]] = {}
        self.consumers: dict[str, set[str]] = collections.defaultdict(set)
        sched = compat.scheduler_of(nodes)
        for node in nodes:
            ops = {sub.get_name() for sub in node.get_nodes()}
            self.members[node.get_name()] = ops
            for op in ops:
                self.unit_of[op] = node.get_name()
        for node in nodes:
            for sub in node.get_nodes():
                for dep in sub.unmet_dependencies:
                    producer = _producer(sched, dep.name)
                    if producer is not None and producer != sub.get_name():
                        self.consumers[producer].add(sub.get_name())

    def cycle_through(self, ops: Iterable[str]) -> str | None:
        """The name of a kernel that would have to run both after and before one kernel made
        of `ops` (None if that kernel is schedulable). Ops keep their current kernels."""
        group = set(ops)
        seen_units: set[str] = set()
        frontier = [c for op in group for c in self.consumers.get(op, ()) if c not in group]
        while frontier:
            op = frontier.pop()
            unit = self.unit_of.get(op)
            if unit is None or unit in seen_units:
                continue
            seen_units.add(unit)
            for member in self.members[unit] - group:
                for consumer in self.consumers.get(member, ()):
                    if consumer in group:
                        return unit
                    frontier.append(consumer)
        return None

    def merge(self, ops: Iterable[str], unit: str) -> None:
        """Move `ops` into kernel `unit` (created if new); what is left of their old kernels
        stays one kernel each, as convert() regroups it."""
        target = self.members.setdefault(unit, set())
        for op in ops:
            old = self.unit_of.get(op)
            if old is not None and old != unit:
                self.members[old].discard(op)
            self.unit_of[op] = unit
            target.add(op)


def _producer(sched: object, buffer_name: str) -> str | None:
    """The op that writes `buffer_name` (None for graph inputs and unknown names)."""
    buf = getattr(sched, "name_to_buf", {}).get(buffer_name)
    if buf is None:
        return None
    try:
        return buf.defining_op_name()
    except Exception:
        return None
