"""Loads ahead of the row loop: register double buffering of the next row block's loads
(`<name>_pf`, CUDA plans with `prefetch`) and the L2 hint of the row block `l2_prefetch`
steps ahead (one bulk prefetch statement of the flavor per [M, N] input).

Both are text the row loop splices in; they depend on the kernel only through what it
passes (its indexing and load lines, its row mask, the rows' layout), so the row loop
stays one writer and these decisions stay testable on their own.
"""

from __future__ import annotations

import dataclasses
import re

import sympy

from . import rewrites
from .flavor import TargetFlavor

_ASSIGN = re.compile(r"^(\w+) = ")
_LOAD = re.compile(r"^(tmp\d+) = (tl\.load\(.*)$")
#: A 0-d tensor Inductor passes by value (a CPU scalar beside device tensors): the load of
#: it is the argument itself, `tmpN = in_ptrK`, the same for every row block.
_SCALAR_ARGUMENT = re.compile(r"^tmp\d+ = in_ptr\d+$")
_TMP = re.compile(r"\btmp\d+\b")


@dataclasses.dataclass
class RowLoads:
    """The row loop's loads, split for double buffering."""

    row_loads: list[str]  # loads that depend on the row block
    other_loads: list[str]  # loop-invariant loads (weights), left in the loop
    variables: list[str]  # the row loads' variables
    index_names: list[str]  # row-block index variables, renamed `<name>_pf` for the next


def split_loads(indexing: str, loads: str) -> RowLoads | None:
    """The loads that depend on the row block, if every load is a plain one-line
    `tmpN = tl.load(...)` of index variables only (or a scalar argument's `tmpN = in_ptrK`,
    loop-invariant); None leaves the loop as it is."""
    index_names = {"xindex", "xmask", "xoffset"}
    for line in indexing.splitlines():
        match = _ASSIGN.match(line.strip())
        if match is None:
            return None
        index_names.add(match.group(1))
    row_loads, other_loads, variables = [], [], []
    for line in filter(None, (ln.strip() for ln in loads.splitlines())):
        if _SCALAR_ARGUMENT.match(line):
            other_loads.append(line)
            continue
        match = _LOAD.match(line)
        if match is None or _TMP.search(match.group(2)):
            return None
        if any(re.search(rf"\b{name}\b", match.group(2)) for name in index_names):
            row_loads.append(line)
            variables.append(match.group(1))
        else:
            other_loads.append(line)
    if not row_loads:
        return None
    return RowLoads(row_loads, other_loads, variables, sorted(index_names))


def first_block_offset(constant_row_mask: bool) -> str:
    """The prologue's row block: kept in bounds where the row mask is constant (none)."""
    if constant_row_mask:
        return "tl.minimum(row_start, xnumel - XBLOCK)"
    return "row_start"


def interleaved_row_block(pieces: int, row_limit: str, suffix: str = "") -> list[str]:
    """xindex / xmask of the row block at `xoffset<suffix>` for a program walking one
    piece's rows: positions t below `row_limit`, rows t * pieces + seg (a column strip)."""
    return [f"xstep{suffix} = xoffset{suffix} + tl.arange(0, XBLOCK)[:, None]",
            f"xindex{suffix} = xstep{suffix} * {pieces} + seg",
            f"xmask{suffix} = xstep{suffix} < {row_limit}"]


def next_block_lines(split: RowLoads, indexing: str, constant_mask: str | None,
                     row_limit: str, interleave: int = 0) -> list[str]:
    """Loads of the next row block (clamped in bounds when `constant_mask`, the kernel's
    constant row-mask line, is given; else masked below `row_limit`) into `<var>_pf`.
    `interleave` B > 0: the loop walks positions t of sample `seg`, rows t * B + seg."""
    out = list(split.other_loads)
    nxt = "xoffset + row_step"
    if constant_mask is not None:
        nxt = f"tl.minimum({nxt}, xnumel - XBLOCK)"
    out.append(f"xoffset_pf = {nxt}")
    lines = []
    if interleave:
        out += interleaved_row_block(interleave, row_limit, "_pf")
    else:
        out.append("xindex_pf = xoffset_pf + tl.arange(0, XBLOCK)[:, None]")
        if constant_mask is not None:
            lines.append(constant_mask)
        else:
            out.append(f"xmask_pf = xindex_pf < {row_limit}")
    lines += [ln.strip() for ln in indexing.splitlines() if ln.strip()]
    lines += split.row_loads
    renamed = rewrites.apply("prefetch_next_block", "\n".join(lines),
                             [*split.index_names, *split.variables])
    return out + renamed.splitlines()


@dataclasses.dataclass(frozen=True)
class RowSpan:
    """An [M, N] input's rows in memory, for the L2 hint of a row block ahead."""

    pointer: str  # kernel argument
    stride: int  # elements from one row to the next
    offset: int  # elements before the first row's first column
    stride_bytes: int
    gap_bytes: int  # bytes after a row's last column up to the next row


def row_span(index: sympy.Expr, x: sympy.Symbol, r0: sympy.Symbol, width: sympy.Expr,
             pointer: str, itemsize: int) -> RowSpan | None:
    """Where the rows lie when `index` is `stride * x + r0 + offset` over whole rows of
    `width` columns; else None (no hint for that load)."""
    expanded = sympy.expand(index)
    stride, offset = expanded.coeff(x, 1), expanded.subs({x: 0, r0: 0})
    if not all(isinstance(v, sympy.Integer) for v in (stride, offset, width)):
        return None
    if sympy.expand(expanded - stride * x - r0 - offset) != 0 or stride < width:
        return None
    return RowSpan(pointer=pointer, stride=int(stride), offset=int(offset),
                   stride_bytes=int(stride) * itemsize,
                   gap_bytes=int(stride - width) * itemsize)


def l2_prefetch_lines(spans: list[RowSpan], ahead: int, flavor: TargetFlavor,
                      second_pass: bool, keep_fraction: float) -> list[str]:
    """Hint the row block `ahead` steps on into L2: one flavor statement per span.
    `second_pass`: the loop reads each row twice (column-tiled)."""
    if not spans:
        return []
    out = [f"xoffset_l2 = tl.maximum(tl.minimum(xoffset + {ahead} * row_step, "
           "xnumel - XBLOCK), 0)",
           "xrows_l2 = tl.minimum(xnumel - xoffset_l2, XBLOCK)"]
    for span in spans:
        offset = f" + {span.offset}" if span.offset else ""
        gap = f" - {span.gap_bytes}" if span.gap_bytes else ""
        start = f"{span.pointer} + ({span.stride} * xoffset_l2{offset})"
        nbytes = f"xrows_l2 * {span.stride_bytes}{gap}"
        out.append(flavor.l2_prefetch_statement(start, nbytes, second_pass=second_pass,
                                                keep_fraction=keep_fraction))
    return out
