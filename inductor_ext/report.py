"""Summarise inductor_ext metric tables.

    python -m inductor_ext.report metric_table_mix_order_fusion.csv \\
        metric_table_mix_order_reject.csv [--plot out.png]

Files are recognised by their header, so any mix of our three tables can be given.
"""

from __future__ import annotations

import argparse
import collections
import csv
import sys
from collections.abc import Sequence
from typing import TextIO

from . import coverage
from .metrics import BENCH_TABLE, FUSION_TABLE, REJECT_TABLE, TABLE_COLUMNS


def read_tables(paths: Sequence[str]) -> dict[str, list[dict[str, str]]]:
    """Rows of each known table found in `paths`, keyed by table name."""
    by_header = {tuple(["model_name", *cols]): name for name, cols in TABLE_COLUMNS.items()}
    tables: dict[str, list[dict[str, str]]] = collections.defaultdict(list)
    for path in paths:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            header = tuple(next(reader, []))
            name = by_header.get(header)
            if name is None:
                raise ValueError(f"{path}: not an inductor_ext metric table (header {header})")
            tables[name].extend(dict(zip(header, row)) for row in reader if row)
    return tables


def _int(v: str) -> int:
    try:
        return int(float(v))
    except ValueError:
        return 0


def summarize(tables: dict[str, list[dict[str, str]]], out: TextIO) -> None:
    fused = tables.get(FUSION_TABLE, [])
    rejected = tables.get(REJECT_TABLE, [])
    saved = sum(_int(r["bytes_unfused"]) - _int(r["bytes_fused"]) for r in fused)
    print(f"fused kernels: {len(fused)}", file=out)
    print(f"declined candidates: {len(rejected)}", file=out)
    for reason, count in sorted(collections.Counter(r["reason"] for r in rejected).items()):
        print(f"  {reason:28s} {count}", file=out)
    print(f"bytes saved (unfused - fused, size hints): {saved} ({saved / 2**20:.1f} MiB)",
          file=out)
    graphs = coverage.from_tables(fused, rejected)
    if graphs:
        print("", file=out)
        coverage.print_summary(graphs, out)
    if fused:
        print("", file=out)
        cols = ["kernel_name", "M", "N", "input_dtypes", "num_partials", "target", "programs",
                "block_m", "bytes_fused", "bytes_unfused"]
        widths = [max(len(c), *(len(r[c]) for r in fused)) for c in cols]
        print("  ".join(c.ljust(w) for c, w in zip(cols, widths)), file=out)
        for r in fused:
            print("  ".join(r[c].ljust(w) for c, w in zip(cols, widths)), file=out)
    bench = tables.get(BENCH_TABLE, [])
    if bench:
        print("", file=out)
        print(f"bench rows: {len(bench)}", file=out)
        for r in bench:
            print(f"  {r['op']:4s} {r['shape']:>12s} {r['dtype']:9s} {r['variant']:18s} "
                  f"{float(r['time_us']):9.1f} us {float(r['tbps']):6.3f} TB/s "
                  f"({float(r['copy_fraction']):.2f} of copy)", file=out)


def plot(tables: dict[str, list[dict[str, str]]], path: str) -> None:
    """Bytes fused vs unfused per kernel, and declines by reason (matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise SystemExit("--plot needs matplotlib: pip install 'inductor_ext[plot]'") from exc
    fused = tables.get(FUSION_TABLE, [])
    reasons = collections.Counter(r["reason"] for r in tables.get(REJECT_TABLE, []))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    names = [f"{r['kernel_name'][-24:]}\n{r['M']}x{r['N']}" for r in fused]
    x = range(len(fused))
    ax1.bar([i - 0.2 for i in x], [_int(r["bytes_unfused"]) / 2**20 for r in fused], 0.4,
            label="unfused")
    ax1.bar([i + 0.2 for i in x], [_int(r["bytes_fused"]) / 2**20 for r in fused], 0.4,
            label="fused")
    ax1.set_xticks(list(x), names, rotation=30, ha="right", fontsize=7)
    ax1.set_ylabel("MiB moved (size hints)")
    ax1.set_title("fused kernels")
    ax1.legend()
    ax2.bar(list(reasons), list(reasons.values()))
    ax2.set_title("declined candidates by reason")
    ax2.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inductor_ext.report", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="metric_table_mix_order_*.csv files")
    ap.add_argument("--plot", metavar="PNG", help="write a chart (needs matplotlib)")
    args = ap.parse_args(argv)
    tables = read_tables(args.files)
    summarize(tables, sys.stdout)
    if args.plot:
        plot(tables, args.plot)
        print(f"\nchart written to {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
