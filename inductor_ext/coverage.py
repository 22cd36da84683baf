"""Coverage in the user's terms: per graph, the norms found, fused and declined (with the
reason), and the other column reductions that rode along or were declined.

A norm is named by its module (``model.layers.0.input_layernorm``), else the source line of
its forward code. It counts as fused when a fused kernel computes its gradient reductions
and no decline of the graph names it; one decline (a dw fused, its db not) makes it
declined. Where a graph had more than one decision the hook logs one summary line from
this at the end of its pass (debug level, ``TORCH_LOGS="+inductor_ext"``; each decision
has its own line already); ``python -m inductor_ext.report`` prints the same summary
from the metric tables.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence
from typing import TextIO

#: Declined norms listed by name in the report, beyond which they are only counted.
MAX_LISTED = 12


def label(name: str, cls: str = "") -> str:
    """A module as a log line shows it: a name without letters (a top-level nn.Sequential's
    children are "3" or "3.2") with its class, "3.2 (LayerNorm)"; others as they are."""
    if cls and cls != "?" and not any(ch.isalpha() for ch in name):
        return f"{name} ({cls})"
    return name


class GraphCoverage:
    """What happened to the norms and other column reductions of one graph."""

    def __init__(self, graph_id: str) -> None:
        self.graph_id = graph_id
        self._fused: dict[str, None] = {}
        self.declined: dict[str, str] = {}  # norm -> reason of its first decline
        self.other_fused = 0
        self.other_declined: collections.Counter[str] = collections.Counter()
        self._decisions = 0  # fused groups and declines, each logged on its own line

    def decisions(self) -> int:
        return self._decisions

    def add_fused(self, norms: Iterable[str], other_columns: int) -> None:
        self._decisions += 1
        self._fused.update(dict.fromkeys(norms))
        self.other_fused += other_columns

    def add_declined(self, norms: Iterable[str], reason: str) -> None:
        self._decisions += 1
        norms = list(norms)
        for norm in norms:
            self.declined.setdefault(norm, reason)
        if not norms:
            self.other_declined[reason] += 1

    def demote(self, norms: Iterable[str], other_columns: int, reason: str) -> None:
        """A fused group whose kernel was not emitted after all (its codegen or compile
        failed): its norms and other columns count as declined for `reason`, as the
        tables show them (a reject row, no fusion row)."""
        norms = list(norms)
        for norm in norms:
            self._fused.pop(norm, None)
        self.other_fused -= other_columns
        self.add_declined(norms, reason)

    @property
    def found(self) -> list[str]:
        return list(dict.fromkeys([*self._fused, *self.declined]))

    @property
    def fused(self) -> list[str]:
        return [n for n in self._fused if n not in self.declined]

    def declined_by_reason(self) -> collections.Counter[str]:
        return collections.Counter(self.declined.values())

    def empty(self) -> bool:
        return not (self.found or self.other_fused or self.other_declined)

    def line(self) -> str:
        """The one-line summary the hook logs."""
        text = (f"graph {self.graph_id or '?'}: norms {len(self.found)} found, "
                f"{len(self.fused)} fused, {len(self.declined)} declined"
                f"{_reasons(self.declined_by_reason())}; other columns {self.other_fused} "
                f"fused, {sum(self.other_declined.values())} declined"
                f"{_reasons(self.other_declined)}")
        if self.declined:
            names = [f"{n} ({r})" for n, r in self.declined.items()]
            more = len(names) - 4
            text += "; declined: " + ", ".join(names[:4]) + (f" and {more} more"
                                                              if more > 0 else "")
        return text


def _reasons(counts: collections.Counter[str]) -> str:
    if not counts:
        return ""
    return " (" + ", ".join(f"{r} {n}" for r, n in sorted(counts.items())) + ")"


def from_tables(fused: Sequence[dict[str, str]],
                rejected: Sequence[dict[str, str]]) -> list[GraphCoverage]:
    """Per-graph coverage from mix_order_fusion and mix_order_reject rows, in the order the
    graphs first appear."""
    graphs: dict[str, GraphCoverage] = {}

    def graph(row: dict[str, str]) -> GraphCoverage:
        gid = row.get("graph_id", "")
        return graphs.setdefault(gid, GraphCoverage(gid))

    for row in fused:
        graph(row).add_fused(row.get("norms", "").split(), _int(row.get("other_columns", "")))
    for row in rejected:
        graph(row).add_declined(row.get("norms", "").split(), row.get("reason", ""))
    return list(graphs.values())


def _int(value: str) -> int:
    try:
        return int(float(value))
    except ValueError:
        return 0


def print_summary(graphs: Sequence[GraphCoverage], out: TextIO) -> None:
    """One screen: one line per graph, then the declined norms by name and reason."""
    if not graphs:
        return
    print("coverage per graph: norms found / fused / declined; other columns fused / "
          "declined", file=out)
    width = max(len(g.graph_id or "?") for g in graphs)
    for g in graphs:
        print(f"  {g.graph_id or '?':{width}s}  norms {len(g.found):3d} / {len(g.fused):3d} / "
              f"{len(g.declined):3d}   other {g.other_fused:3d} / "
              f"{sum(g.other_declined.values()):3d}{_reasons(g.other_declined)}", file=out)
    declined = [(g.graph_id or "?", n, r) for g in graphs for n, r in g.declined.items()]
    if declined:
        print("declined norms:", file=out)
        for gid, name, reason in declined[:MAX_LISTED]:
            print(f"  {gid:{width}s}  {name}  {reason}", file=out)
        if len(declined) > MAX_LISTED:
            print(f"  ... and {len(declined) - MAX_LISTED} more", file=out)
