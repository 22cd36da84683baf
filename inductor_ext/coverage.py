"""Coverage in the user's terms: per graph, the norms found, fused and declined (with the
reason), and the other column reductions that rode along or were declined.

A norm is named by its module (``model.layers.0.input_layernorm``), else the source line of
its forward code. It counts as fused when a fused kernel computes its gradient reductions
and no decline of the graph names it; one decline (a dw fused, its db not) makes it
declined. Every graph with a decision gets one summary line from this at the end of the
hook's pass (info level, ``TORCH_LOGS="inductor_ext"``, where `tells_the_user`, else debug;
each decision has its own debug line, ``TORCH_LOGS="+inductor_ext"``), names grouped
(``model.layers.{0..11}.norm``). The same summary rides the FX-graph cache in the graph's
counters (`encode` / `decode`), so a warm cache hit logs it too; ``python -m
inductor_ext.report`` prints it from the metric tables."""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

from .reasons import Reason

#: Declined norms listed by name in the report, beyond which they are only counted.
MAX_LISTED = 12
#: Characters of a summary line beyond which its lists of names stop (each list names one
#: group at least) and count the rest: "and 3 more".
LINE_BUDGET = 200
#: The parts of a training compile (which share one compile id) a graph id may end in.
PARTS = ("forward", "backward")

_NUMBER = re.compile(r"0|[1-9][0-9]*")


def label(name: str, cls: str = "") -> str:
    """A module as a log line shows it: a name without letters (a top-level nn.Sequential's
    children are "3" or "3.2") with its class, "3.2 (LayerNorm)"; others as they are."""
    if cls and cls != "?" and not any(ch.isalpha() for ch in name):
        return f"{name} ({cls})"
    return name


def group_names(names: Iterable[str], classes: Mapping[str, str] | None = None) -> list[str]:
    """`names` with those that differ in one numeric component only folded into one
    (``model.layers.{0,1}.input_layernorm``, runs as ``{0..11}``), in the order of their
    first member, each `label`led with its class from `classes`."""
    return [text for text, _ in _grouped(names, classes or {})]


def _grouped(names: Iterable[str], classes: Mapping[str, str]) -> list[tuple[str, int]]:
    """(label, number of names) of each group of `group_names`. Among names of one length
    (in components), the numeric position that leaves the fewest groups is folded, the
    first on a tie (the layer index of ``encoder.block.0.layer.1.layer_norm``); a class
    tells apart names of digits alone, which show it."""
    names = list(dict.fromkeys(names))
    parts = {name: name.split(".") for name in names}

    def cls(name: str) -> str:
        return "" if any(ch.isalpha() for ch in name) else classes.get(name, "")

    def key(name: str, at: int | None) -> tuple[object, ...]:
        p = parts[name]
        if at is None or not _NUMBER.fullmatch(p[at]):
            return (name,)
        return (len(p), at, *p[:at], None, *p[at + 1:], cls(name))

    chosen: dict[int, int | None] = {}
    for length in {len(p) for p in parts.values()}:
        same = [n for n in names if len(parts[n]) == length]
        numeric = [i for i in range(length) if any(_NUMBER.fullmatch(parts[n][i]) for n in same)]
        chosen[length] = min(numeric, key=lambda i: (len({key(n, i) for n in same}), i),
                             default=None)
    groups: dict[tuple[object, ...], list[str]] = {}
    for name in names:
        groups.setdefault(key(name, chosen[len(parts[name])]), []).append(name)
    out = []
    for members in groups.values():
        first = members[0]
        if len(members) == 1:
            out.append((label(first, classes.get(first, "")), 1))
            continue
        at = chosen[len(parts[first])]
        assert at is not None
        p = list(parts[first])
        p[at] = number_set(int(parts[m][at]) for m in members)
        out.append((label(".".join(p), cls(first)), len(members)))
    return out


def number_set(values: Iterable[int]) -> str:
    """{0,1,5} / {0..11} / {0..3,7}: a run of three or more as its ends."""
    runs: list[list[int]] = []
    for v in sorted(set(values)):
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    items = [f"{a}..{b}" if b - a >= 2 else ",".join(map(str, range(a, b + 1)))
             for a, b in runs]
    return "{" + ",".join(items) + "}"


def _listed(names: Iterable[str], classes: Mapping[str, str], room: int) -> str:
    """Grouped names: the first group, then the next while the list and its count of the
    names left out ("and 3 more") fit `room` characters."""
    groups = _grouped(names, classes)

    def text(k: int) -> str:
        more = sum(n for _, n in groups[k:])
        return ", ".join(g for g, _ in groups[:k]) + (f" and {more} more" if more else "")

    shown = 1
    while shown < len(groups) and len(text(shown + 1)) <= room:
        shown += 1
    return text(shown)


def listed(names: Iterable[str], classes: Mapping[str, str] | None = None,
           room: int = LINE_BUDGET) -> str:
    """`names` grouped as the summary line lists them, cut to about `room` characters
    ("and 3 more")."""
    return _listed(names, classes or {}, room)


def split_graph_id(graph_id: str) -> tuple[str, str]:
    """("0/0", "backward") of "0/0 backward"; the part is '' where the id names none."""
    head, _, last = graph_id.rpartition(" ")
    return (head, last) if last in PARTS else (graph_id, "")


class GraphCoverage:
    """What happened to the norms and other column reductions of one graph."""

    def __init__(self, graph_id: str) -> None:
        self.graph_id = graph_id
        self._fused: dict[str, None] = {}
        self.declined: dict[str, str] = {}  # norm -> reason of its first decline
        self.classes: dict[str, str] = {}  # norm -> its module's class, where known
        self.other_fused = 0
        self.other_declined: collections.Counter[str] = collections.Counter()
        #: The norms a pattern of the config's opt-outs matched, by the pattern as the line
        #: names it ("config.exclude_modules 'embed_norm'").
        self.excluded: dict[str, list[str]] = {}
        #: What to do about the graph's declines, where one line can say it (the C++ CPU
        #: backend: how to run where the plugin fuses); ends the summary line.
        self.notes: list[str] = []
        self._decisions = 0  # fused groups and declines, each logged on its own line

    def decisions(self) -> int:
        return self._decisions

    def tells_the_user(self) -> bool:
        """Whether the graph's summary is worth an info line: it found a norm, fused a
        column, or could not run the pass (another backend's kernels, an internal error).
        A graph whose only decisions declined other reductions (a forward graph's
        recomputed statistics) is summarised at debug."""
        return bool(self.found or self.other_fused
                    or {Reason.UNSUPPORTED_BACKEND, Reason.INTERNAL_ERROR}
                & set(self.other_declined))

    def _add_classes(self, norms: Iterable[str], classes: Mapping[str, str] | None) -> None:
        for norm in norms:
            if classes and classes.get(norm, "?") != "?":
                self.classes.setdefault(norm, classes[norm])

    def add_fused(self, norms: Iterable[str], other_columns: int,
                  classes: Mapping[str, str] | None = None) -> None:
        self._decisions += 1
        norms = list(norms)
        self._fused.update(dict.fromkeys(norms))
        self._add_classes(norms, classes)
        self.other_fused += other_columns

    def add_declined(self, norms: Iterable[str], reason: str,
                     classes: Mapping[str, str] | None = None) -> None:
        self._decisions += 1
        norms = list(norms)
        for norm in norms:
            self.declined.setdefault(norm, reason)
        self._add_classes(norms, classes)
        if not norms:
            self.other_declined[reason] += 1

    def add_excluded(self, pattern: str, norms: Iterable[str]) -> None:
        """`norms` matched `pattern` of an opt-out ("config.exclude_modules 'x'")."""
        matched = self.excluded.setdefault(pattern, [])
        matched += [n for n in norms if n not in matched]

    def add_note(self, note: str) -> None:
        if note and note not in self.notes:
            self.notes.append(note)

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
        """The one-line summary the hook logs: counts, then the norms fused and declined
        (by reason) by name, grouped, as many as LINE_BUDGET leaves room for, then other
        columns where there were any."""
        text = (f"graph {self.graph_id or '?'}: norms {len(self.found)} found, "
                f"{len(self.fused)} fused, {len(self.declined)} declined")
        sections = [("fused", self.fused)] if self.fused else []
        by_reason: dict[str, list[str]] = {}
        for norm, reason in self.declined.items():
            by_reason.setdefault(reason, []).append(norm)
        sections += [(f"declined ({reason})", norms) for reason, norms in by_reason.items()]
        for title, norms in sections:
            text += f"; {title}: "
            text += _listed(norms, self.classes, LINE_BUDGET - len(text))
        for pattern, norms in self.excluded.items():
            text += f"; {pattern} matched "
            text += _listed(norms, self.classes, LINE_BUDGET - len(text))
        others = [f"{self.other_fused} fused"] if self.other_fused else []
        if self.other_declined:
            others.append(f"{sum(self.other_declined.values())} declined"
                          f"{_reasons(self.other_declined)}")
        if others:
            text += "; other columns: " + ", ".join(others)
        for note in self.notes:
            text += f"; {note}"
        return text

    def trace_record(self) -> dict[str, object]:
        """The graph for its trace artifact: compile id, forward or backward, and each
        norm by module name (fused; declined with its reason; its class where known)."""
        compile_id, part = split_graph_id(self.graph_id)
        return {"graph_id": compile_id, "graph": part, "fused": self.fused,
                "declined": dict(self.declined),
                "classes": {n: c for n, c in self.classes.items() if n in self.found}}

    def encode(self) -> str:
        """The summary as text that survives the FX-graph cache in a counter key (`decode`
        reads it back): the graph's part (forward / backward), not its compile id, which a
        warm compile gives anew."""
        record: dict[str, Any] = {
            "part": split_graph_id(self.graph_id)[1], "fused": list(self._fused),
            "declined": list(self.declined.items()),
            "classes": {n: c for n, c in self.classes.items() if n in self.declined
                        or n in self._fused},
            "other_fused": self.other_fused, "other_declined": dict(self.other_declined),
            "excluded": self.excluded, "notes": self.notes, "decisions": self._decisions}
        return json.dumps(record, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str, compile_id: str = "") -> GraphCoverage:
        """The coverage `encode` wrote, as a graph of `compile_id`; ValueError (or
        KeyError / TypeError) if `text` is not one."""
        record = json.loads(text)
        part = str(record["part"])
        graph = cls(f"{compile_id} {part}".strip())
        graph._fused = dict.fromkeys(map(str, record["fused"]))
        graph.declined = {str(n): str(r) for n, r in record["declined"]}
        graph.classes = {str(n): str(c) for n, c in record["classes"].items()}
        graph.other_fused = int(record["other_fused"])
        graph.other_declined = collections.Counter(
            {str(r): int(n) for r, n in record["other_declined"].items()})
        graph.excluded = {str(p): [str(n) for n in norms]
                          for p, norms in record.get("excluded", {}).items()}
        graph.notes = [str(n) for n in record.get("notes", [])]
        graph._decisions = int(record["decisions"])
        return graph


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
        norms = row.get("norms", "").split()
        graph(row).add_fused(norms, table_int(row.get("other_columns", "")), _classes(norms, row))
    for row in rejected:
        norms = row.get("norms", "").split()
        graph(row).add_declined(norms, row.get("reason", ""), _classes(norms, row))
    return list(graphs.values())


def _classes(norms: list[str], row: dict[str, str]) -> dict[str, str]:
    """Each norm's class from a row's norm_classes column (absent in older tables)."""
    return dict(zip(norms, row.get("norm_classes", "").split()))


def table_int(value: str) -> int:
    try:
        return int(float(value))
    except ValueError:
        return 0


def print_summary(graphs: Sequence[GraphCoverage], out: TextIO, names: bool = True) -> None:
    """One screen: one line per graph, then (`names`) the declined norms by name and
    reason; the report lists every norm before, so it leaves them out."""
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
    if declined and names:
        print("declined norms:", file=out)
        for gid, name, reason in declined[:MAX_LISTED]:
            print(f"  {gid:{width}s}  {name}  {reason}", file=out)
        if len(declined) > MAX_LISTED:
            print(f"  ... and {len(declined) - MAX_LISTED} more", file=out)
