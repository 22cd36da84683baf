"""Summarise inductor_ext metric tables.

    python -m inductor_ext.report metric_table_mix_order_fusion.csv \\
        metric_table_mix_order_reject.csv [--plot out.png]

Files are recognised by their header, so any mix of our three tables can be given. The
report speaks of norms first: one line per norm and graph, with its class and the kernel
that fuses it or why it was declined; then the declined column reductions that are no
norm's; then the kernels and the counts by reason (each with its description,
``inductor_ext.reasons``).
"""

from __future__ import annotations

import argparse
import collections
import csv
import dataclasses
import io
import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from . import coverage, reasons
from .metrics import BENCH_TABLE, FUSION_TABLE, REJECT_TABLE, TABLE_COLUMNS


class ReportError(ValueError):
    """A file the report cannot read as one of our tables, or a chart it cannot write."""


def unique_paths(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """`paths` with each file once (the same file under two names, or a shell pattern that
    overlaps a name, would count its kernels twice), and a note per file left out."""
    seen: dict[object, str] = {}
    kept: list[str] = []
    notes: list[str] = []
    for path in paths:
        try:
            st = os.stat(path)
            key: object = (st.st_dev, st.st_ino)
        except OSError:  # missing or unreadable: read_tables says so
            key = os.path.realpath(path)
        if key in seen:
            same = "" if seen[key] == path else f" (as {seen[key]})"
            notes.append(f"{path}: given twice{same}; read once, so its rows count once")
            continue
        seen[key] = path
        kept.append(path)
    return kept, notes


def _rows(path: str, lines: Iterable[str], header: tuple[str, ...]) -> list[dict[str, str]]:
    """The rows after `header`; a ReportError naming the file and line for a row that is
    not whole: a file cut short (a process killed while writing, a disk full) ends mid-row,
    with fewer fields, inside a quoted field or without its end of line."""
    reader = csv.reader(lines, strict=True)
    rows: list[dict[str, str]] = []
    line = 1  # the header's; the reader counts the lines after it
    while True:
        start = line + 1
        try:
            row = next(reader, None)
        except csv.Error as exc:
            raise ReportError(f"{path}, line {start}: {exc} (a truncated file?)") from None
        if row is None:
            return rows
        line = 1 + reader.line_num
        if not row:
            continue
        if len(row) != len(header):
            raise ReportError(f"{path}, line {start}: {len(row)} fields where the header has "
                              f"{len(header)} (a truncated file?)")
        rows.append(dict(zip(header, row)))


#: Columns added after the tables were first written: a table from an older version lacks
#: them and still reads (its rows give "" for them).
LATER_COLUMNS = frozenset({"norm_classes"})

#: Why a run leaves no table or no rows, as the error says it.
NO_ROWS_CAUSE = (
    "the tables are compile-time records, as Inductor's own: a graph served from a warm "
    "FX-graph cache is not compiled and writes no rows, and no table is written unless "
    "TORCHINDUCTOR_ENABLED_METRIC_TABLES names it; rerun in this folder with "
    "TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 (or torch._inductor.config.force_disable_caches"
    "=True) and TORCHINDUCTOR_ENABLED_METRIC_TABLES=mix_order_fusion,mix_order_reject")


def table_of(header: Sequence[str]) -> str | None:
    """The table a CSV header belongs to: `model_name`, then every column of one of ours
    (those in LATER_COLUMNS may be missing, columns of a newer version may be added)."""
    if not header or header[0] != "model_name":
        return None
    present = set(header[1:])
    for name, cols in TABLE_COLUMNS.items():
        if set(cols) - LATER_COLUMNS <= present:
            return name
    return None


def _missing(path: str) -> str:
    """The error for a file that is not there: a pattern the shell passed on unexpanded
    matched nothing here; either way the likely cause is that no run wrote the table."""
    if any(c in path for c in "*?["):
        return (f"{path}: no file matches this pattern (the shell passed it on as it is), "
                f"so no table was written here; {NO_ROWS_CAUSE}")
    return f"{path}: no such file; unless the path is misspelt, {NO_ROWS_CAUSE}"


def read_tables(paths: Sequence[str]) -> dict[str, list[dict[str, str]]]:
    """Rows of each known table found in `paths` (each file read once), keyed by table
    name; an empty file adds none (`main` says why none were found)."""
    tables: dict[str, list[dict[str, str]]] = collections.defaultdict(list)
    for path in unique_paths(paths)[0]:
        try:
            with open(path, newline="") as f:
                text = f.read()
            if not text:
                continue
            lines = io.StringIO(text)
            header = tuple(next(csv.reader(lines), []))
            name = table_of(header)
            if name is None:
                shown = ",".join(header)[:80] or "an empty line"
                raise ReportError(f"{path}: not an inductor_ext metric table "
                                  f"(first line: {shown})")
            if not text.endswith("\n"):  # Inductor ends every row it writes with one
                last = text.count("\n") + 1
                raise ReportError(f"{path}, line {last}: the file ends mid-row, without an "
                                  f"end of line (a truncated file?)")
            tables[name].extend(_rows(path, lines, header))
        except FileNotFoundError:
            raise ReportError(_missing(path)) from None
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise ReportError(f"{path}: cannot be read as CSV ({exc})") from None
    return tables



#: A decline's detail shown on its norm's line when at most this long (longer ones are in
#: the table's `detail` column and the log).
SHORT_DETAIL = 60


def why(code: str, width: int = 100) -> str:
    """A reason's description cut to one line for a norm's status: its first sentence
    without asides in parentheses, ending in an ellipsis when still over `width`."""
    full = reasons.describe(code)
    text = full
    while True:
        shorter = re.sub(r"\s*\([^()]*\)", "", text)
        if shorter == text:
            break
        text = shorter
    first = re.match(r"(.+?)[.;:](\s|$)", text)
    text = (first.group(1) if first else text) or full
    if len(text) > width:
        cut = text.rfind(" ", 0, width - 1)
        text = text[:cut if cut > 0 else width - 1].rstrip(",;:") + "\u2026"
    return text


@dataclasses.dataclass
class NormStatus:
    """One norm in one graph: the kernels that fuse its gradient reductions and the
    declines that name it (one of its columns declined makes it declined, as in
    `coverage`)."""

    graph: str
    norm: str
    cls: str = "?"
    kernels: list[str] = dataclasses.field(default_factory=list)
    declines: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    @property
    def fused(self) -> bool:
        return bool(self.kernels) and not self.declines

    @property
    def key(self) -> str:
        """"fused" or the first decline's reason code: what the chart colours."""
        return self.declines[0][0] if self.declines else "fused"

    def status(self) -> str:
        if not self.declines:
            return "fused into " + ", ".join(self.kernels)
        reason, detail = self.declines[0]
        text = f"declined: {reason} \u2014 {why(reason)}"
        if reason == reasons.Reason.EXCLUDED_BY_CONFIG and detail:
            # which norm matched which pattern, the detail's first part, whatever its length
            text += f" ({detail.split('; ')[0]})"
        elif detail and len(detail) <= SHORT_DETAIL:
            text += f" ({detail})"
        more = sorted({r for r, _ in self.declines[1:]} - {reason})
        if more:
            text += "; also " + ", ".join(more)
        if self.kernels:
            text += "; other columns fused into " + ", ".join(self.kernels)
        return text


def _natural(text: str) -> list[tuple[int, int | str]]:
    """Sort key that orders `layers.2` before `layers.10`."""
    return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", text)]


def is_norm_decline(row: dict[str, str]) -> bool:
    """A reject row about a norm's dw/db (`kind` norm; a row without `kind`, from an older
    table, when it names norms); the rest are other column reductions."""
    kind = row.get("kind", "")
    return bool(row.get("norms", "").split()) and kind in ("norm", "")


def norm_statuses(fused: Sequence[dict[str, str]],
                  rejected: Sequence[dict[str, str]]) -> list[NormStatus]:
    """One entry per norm and graph, graphs in the order they first appear, norms in
    natural order of their names within a graph."""
    found: dict[tuple[str, str], NormStatus] = {}
    graphs: dict[str, int] = {}

    def entries(row: dict[str, str]) -> list[NormStatus]:
        gid = row.get("graph_id", "") or "?"
        graphs.setdefault(gid, len(graphs))
        names = row.get("norms", "").split()
        classes = row.get("norm_classes", "").split()
        out = []
        for i, name in enumerate(names):
            entry = found.setdefault((gid, name), NormStatus(gid, name))
            cls = classes[i] if len(classes) == len(names) else "?"
            if entry.cls == "?" and cls:
                entry.cls = cls
            out.append(entry)
        return out

    for row in fused:
        kernel = row.get("kernel_name", "") or "?"
        for entry in entries(row):
            if kernel not in entry.kernels:
                entry.kernels.append(kernel)
    for row in rejected:
        if is_norm_decline(row):
            for entry in entries(row):
                entry.declines.append((row.get("reason", ""), row.get("detail", "")))
    return sorted(found.values(), key=lambda e: (graphs[e.graph], _natural(e.norm)))


def print_norms(norms: Sequence[NormStatus], out: TextIO) -> None:
    """The first section: each norm, its class, graph and what happened to it."""
    graphs = len({n.graph for n in norms})
    declined = sum(not n.fused for n in norms)
    print(f"norms: {len(norms)} in {graphs} graph{'s' * (graphs != 1)}, "
          f"{len(norms) - declined} fused, {declined} declined", file=out)
    if not norms:
        return
    rows = [("norm", "class", "graph", "status")]
    rows += [(n.norm, n.cls, n.graph, n.status()) for n in norms]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[3], file=out)


def print_other_declines(rejected: Sequence[dict[str, str]], out: TextIO) -> None:
    """Declined column reductions that are no norm's (a forward graph's, a loss's): apart
    from the norms, one line per graph and reason with where they come from."""
    others = [r for r in rejected if not is_norm_decline(r)]
    if not others:
        return
    print(f"other column reductions declined (not a norm's dw/db): {len(others)}", file=out)
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for r in others:
        groups.setdefault((r.get("graph_id", "") or "?", r.get("reason", "")), []).append(r)
    width = max(len(g) for g, _ in groups)
    for (gid, reason), rows in groups.items():
        where = list(dict.fromkeys(w for r in rows
                                   for w in (r.get("modules", "") or r.get("source", "")).split()))
        shown = " ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")
        print(f"  {gid:{width}s}  {reason} x{len(rows)} \u2014 {why(reason)}"
              + (f" [{shown}]" if shown else ""), file=out)


def summarize(tables: dict[str, list[dict[str, str]]], out: TextIO) -> None:
    """The report: the norms first, then other declines, then the kernels and counts."""
    fused = tables.get(FUSION_TABLE, [])
    rejected = tables.get(REJECT_TABLE, [])
    if fused or rejected:
        print_norms(norm_statuses(fused, rejected), out)
        if any(not is_norm_decline(r) for r in rejected):
            print("", file=out)
            print_other_declines(rejected, out)
        print("", file=out)
    saved = sum(coverage.table_int(r["bytes_unfused"]) - coverage.table_int(r["bytes_fused"])
                for r in fused)
    print(f"fused kernels: {len(fused)}", file=out)
    print(f"declined candidates: {len(rejected)}", file=out)
    for reason, count in sorted(collections.Counter(r["reason"] for r in rejected).items()):
        print(f"  {reason:28s} {count:4d}  {reasons.describe(reason)}", file=out)
    print(f"bytes saved (unfused - fused, size hints): {saved} ({saved / 2**20:.1f} MiB)",
          file=out)
    graphs = coverage.from_tables(fused, rejected)
    if graphs:
        print("", file=out)
        coverage.print_summary(graphs, out, names=False)
    if fused:
        print("", file=out)
        cols = ["#", "graph_id", "kernel_name", "M", "N", "input_dtypes", "num_partials",
                "target", "programs", "block_m", "bytes_fused", "bytes_unfused"]
        numbered = [{"#": str(i), **r} for i, r in enumerate(fused, 1)]
        widths = [max(len(c), *(len(r[c]) for r in numbered)) for c in cols]
        print("  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip(), file=out)
        for r in numbered:
            print("  ".join(r[c].ljust(w) for c, w in zip(cols, widths)).rstrip(), file=out)
    bench = tables.get(BENCH_TABLE, [])
    if bench:
        print("", file=out)
        print(f"bench rows: {len(bench)}", file=out)
        for r in bench:
            print(f"  {r['op']:4s} {r['shape']:>12s} {r['dtype']:9s} {r['variant']:18s} "
                  f"{float(r['time_us']):9.1f} us {float(r['tbps']):6.3f} TB/s "
                  f"({float(r['copy_fraction']):.2f} of copy)", file=out)


def short_kernel_name(name: str, width: int = 44) -> str:
    """A kernel name for a chart label: without Inductor's `triton_<kind>_` prefix, cut at
    a word (`_`) boundary with an ellipsis when longer than `width`."""
    parts = name.split("_")
    if parts[:1] == ["triton"] and len(parts) > 2:
        parts = parts[2:]
    text = "_".join(parts)
    if len(text) <= width:
        return text
    cut = text.rfind("_", 0, width - 1)
    return text[:cut if cut > 0 else width - 1] + "\u2026"


def kernel_labels(fused: Sequence[dict[str, str]]) -> list[str]:
    """One distinct label per fused kernel: its row number (as in the summary table), the
    graph, the shape and a readable name (kernel names repeat across graphs)."""
    return [f"#{i} [{r['graph_id'] or '-'}] {r['M']}x{r['N']} {short_kernel_name(r['kernel_name'])}"
            for i, r in enumerate(fused, 1)]


def group_norms(norms: Sequence[NormStatus]) -> list[tuple[str, str, int]]:
    """Norms whose names differ only in numbers (`model.layers.{0..11}.input_layernorm`)
    and that share a status ("fused" or a reason) as one chart row, so a declined layer
    shows by its number: the row's label, status and count. Rows of a name
    follow its first appearance, fused first."""
    groups: dict[tuple[str, str, str], list[tuple[int, ...]]] = {}
    first: dict[str, int] = {}
    for n in norms:
        parts = n.norm.split(".")
        pattern = ".".join("#" if p.isdigit() else p for p in parts)
        first.setdefault(pattern, len(first))
        groups.setdefault((pattern, n.cls, n.key), []).append(
            tuple(int(p) for p in parts if p.isdigit()))
    out = []
    for pattern, cls, key in sorted(groups, key=lambda g: (first[g[0]], g[2] != "fused", g)):
        numbers = groups[pattern, cls, key]
        slots = iter(zip(*numbers))
        label = short_label([_slot(next(slots)) if p == "#" else p
                             for p in pattern.split(".")])
        label += "" if cls == "?" else f" ({cls})"
        out.append((label, key, len(numbers)))
    return out


def _slot(values: tuple[int, ...]) -> str:
    return str(values[0]) if len(set(values)) == 1 else coverage.number_set(values)


def short_label(text: str | Sequence[str], width: int = 56) -> str:
    """A module name (or its dotted parts) for a tick label: whole when it fits, else its
    first part and as many of its last parts (those that tell norms apart) as fit
    (`encoder.\u2026.final_layer_norm`)."""
    parts = text.split(".") if isinstance(text, str) else list(text)
    whole = ".".join(parts)
    if len(whole) <= width:
        return whole
    tail = parts[-1:]
    for part in reversed(parts[1:-1]):
        if len(parts[0]) + len(part) + sum(len(p) + 1 for p in tail) + 3 > width:
            break
        tail.insert(0, part)
    label = ".".join([parts[0], "\u2026", *tail])
    return label if len(parts) > 2 and len(label) <= width else "\u2026" + whole[1 - width:]


#: Chart colours: fused green, each decline reason its own (never green).
_FUSED_COLOR = "tab:green"
_REASON_COLORS = ("tab:red", "tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:gray",
                  "tab:olive", "tab:cyan", "tab:blue", "gold", "black")


def mib(bytes_cell: str) -> float:
    return coverage.table_int(bytes_cell) / 2**20


def figure(tables: dict[str, list[dict[str, str]]]) -> Any:
    """The chart (matplotlib), one panel per part that has rows: the norms by module and
    status (fused, or declined by reason), the other declined columns by reason, and the
    bytes each fused kernel moves. A ReportError when there is nothing to draw."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError as exc:
        raise SystemExit("--plot needs matplotlib: pip install 'inductor_ext[plot]'") from exc
    fused = tables.get(FUSION_TABLE, [])
    rejected = tables.get(REJECT_TABLE, [])
    norms = norm_statuses(fused, rejected)
    groups = group_norms(norms)
    others = collections.Counter(r["reason"] for r in rejected if not is_norm_decline(r))
    panels = [(name, rows) for name, rows in (("norms", len(groups)), ("other", len(others)),
                                              ("kernels", len(fused))) if rows]
    if not panels:
        raise ReportError("nothing to chart: no norm, decline or fused kernel in the tables")
    # Each row gets the same height in every panel, so tick labels never overlap.
    heights = [rows + 2.5 for _, rows in panels]
    fig, axes = plt.subplots(len(panels), 1, squeeze=False,
                             figsize=(12, 0.6 + 0.28 * sum(heights)),
                             gridspec_kw={"height_ratios": heights})
    codes = sorted({key for _, key, _ in groups} - {"fused"} | set(others))
    colors = {code: _REASON_COLORS[i % len(_REASON_COLORS)] for i, code in enumerate(codes)}
    colors["fused"] = _FUSED_COLOR
    for (name, _), ax in zip(panels, axes[:, 0]):
        ax.set_label(name)  # the tests find a panel by it
        if name == "norms":
            _norms_panel(ax, groups, norms, colors)
        elif name == "other":
            keys = sorted(others)
            ax.barh(keys, [others[k] for k in keys], 0.6, color=[colors[k] for k in keys])
            ax.set_ylim(len(keys) - 0.5, -0.5)
            ax.set_xlabel("declined column reductions that are no norm's")
            ax.set_title(f"other declines by reason: {sum(others.values())}")
        else:
            y = list(range(len(fused)))
            ax.barh([i - 0.2 for i in y], [mib(r["bytes_unfused"]) for r in fused],
                    0.4, label="unfused (stock kernels)", color="tab:gray")
            ax.barh([i + 0.2 for i in y], [mib(r["bytes_fused"]) for r in fused],
                    0.4, label="fused (workspace included)", color=_FUSED_COLOR)
            ax.set_yticks(y, kernel_labels(fused))
            ax.set_ylim(len(fused) - 0.5, -0.5)  # first kernel on top, as in the table
            ax.set_xlabel("MiB moved (size hints)")
            ax.set_title(f"fused kernels: {len(fused)}")
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
        if name != "kernels":
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(axis="y", labelsize=8)
    fig.tight_layout()
    return fig


def _norms_panel(ax: Any, groups: Sequence[tuple[str, str, int]],
                 norms: Sequence[NormStatus], colors: dict[str, str]) -> None:
    """One bar per group of norms, as long as its count, coloured by its status."""
    keys = ["fused", *sorted({key for _, key, _ in groups} - {"fused"})]
    for key in keys:
        rows = [(i, count) for i, (_, k, count) in enumerate(groups) if k == key]
        if rows:
            ax.barh([i for i, _ in rows], [c for _, c in rows], 0.6, color=colors[key],
                    label="fused" if key == "fused" else f"declined: {key}")
    ax.set_xlim(0, max(c for _, _, c in groups) * 1.05)  # the longest bar clear of the frame
    ax.set_yticks(range(len(groups)), [label for label, _, _ in groups])
    ax.set_ylim(len(groups) - 0.5, -0.5)  # first norm on top, as in the report
    ax.set_xlabel("norms (one per module and graph)")
    declined = sum(not n.fused for n in norms)
    ax.set_title(f"norms: {len(norms)}, {len(norms) - declined} fused, {declined} declined")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)


def plot(tables: dict[str, list[dict[str, str]]], path: str) -> None:
    """Write the chart to `path`, creating its folder; a ReportError naming `path` where
    it cannot be written (no permission, a format matplotlib does not know)."""
    import matplotlib.pyplot as plt

    fig = figure(tables)
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        fig.savefig(path, dpi=120, bbox_inches="tight")
    except (OSError, ValueError) as exc:
        raise ReportError(f"--plot {path}: cannot write the chart ({exc})") from None
    finally:
        plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inductor_ext.report", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="metric_table_mix_order_*.csv files")
    ap.add_argument("--plot", metavar="PNG", help="write a chart (needs matplotlib)")
    ap.add_argument("--reasons", action="store_true",
                    help="print the table of decline reasons (README.md's) and exit")
    args = ap.parse_args(argv)
    if args.reasons:
        sys.stdout.write(reasons.render_table())
        return 0
    if not args.files:
        ap.error("the following arguments are required: files")
    files, notes = unique_paths(args.files)
    for note in notes:
        print(f"{ap.prog}: note: {note}", file=sys.stderr)
    try:
        tables = read_tables(files)
    except ReportError as exc:
        print(f"{ap.prog}: error: {exc}", file=sys.stderr)
        return 2
    if not any(tables.values()):
        print(f"{ap.prog}: error: {', '.join(files)}: no rows; {NO_ROWS_CAUSE}",
              file=sys.stderr)
        return 2
    summarize(tables, sys.stdout)
    if args.plot:
        try:
            plot(tables, args.plot)
        except ReportError as exc:
            print(f"{ap.prog}: error: {exc}", file=sys.stderr)
            return 2
        print(f"\nchart written to {args.plot}")
    return 0


def run() -> int:
    """`main` as a command: a reader that stops early (`| head`) ends it quietly, exit 0."""
    try:
        return main()
    except BrokenPipeError:
        # Whatever still sits in stdout's buffer would fail again at exit: point it at
        # /dev/null (the reader has what it asked for).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(run())
