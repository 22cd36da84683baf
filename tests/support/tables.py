"""The plugin's metric tables as a test reads them (the `tables` fixture of conftest.py
turns them on in a fresh working directory)."""

from __future__ import annotations

import csv
import os

#: Both tables the plugin writes during a compile.
TABLES = "mix_order_fusion,mix_order_reject"


def read(name: str) -> tuple[list[str] | None, list[dict[str, str]]]:
    """(header, rows) of metric_table_<name>.csv in the working directory; (None, []) when
    the compile wrote none."""
    path = f"metric_table_{name}.csv"
    if not os.path.exists(path):
        return None, []
    with open(path, newline="") as f:
        lines = list(csv.reader(f))
    return lines[0], [dict(zip(lines[0], line, strict=True)) for line in lines[1:]]


def rows(name: str) -> list[dict[str, str]]:
    """The rows of metric_table_<name>.csv ([] when the compile wrote none)."""
    return read(name)[1]
