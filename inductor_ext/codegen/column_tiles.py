"""Rewrites of the loops Inductor writes over a row's column tiles (column-tiled kernels).

Inductor emits a row longer than one tile as `for r0_offset in tl.range(...)` loops whose
row sums accumulate into [XBLOCK, R0_BLOCK] fp32 tensors, reduced once after the loop.
Rewrites of that text: `unroll_column_loops` gives each tile its own partial
accumulators and `chunk_row_sums` shrinks the row-sum accumulators to [XBLOCK,
R0_BLOCK // chunk] (both keep registers for the column partials); `stream_row_stores`
marks the output stores as streaming, so they leave the L2 first; `unpin_row_loads`
drops the L2 keep-priority from row loads that are read back from L1.
"""

from __future__ import annotations

import re

COLUMN_LOOP = "for r0_offset in tl.range(0, r0_numel, R0_BLOCK):"


def _joined_like(lines: list[str], code: str) -> str:
    """`lines` as text, ending in a newline when `code` did (line-wise rewrites keep it)."""
    return "\n".join(lines) + ("\n" if code.endswith("\n") else "")


def unroll_column_loops(code: str, tiles: int, accumulators: list[str]) -> str:
    """Replace each loop over column tiles by `tiles` straight-line copies with a constant
    r0_offset, renaming every partial accumulator to its tile's own (`<acc>_t<i>`), so the
    partials of a whole row live in registers across the row loop."""
    renames = [re.compile(rf"\b{re.escape(acc)}\b") for acc in accumulators]
    lines = code.splitlines()
    out: list[str] = []
    unrolled = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.strip() != COLUMN_LOOP:
            out.append(line)
            continue
        indent = line[:len(line) - len(line.lstrip())]
        body = []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(indent + " ")):
            body.append(lines[i])
            i += 1
        body_indent = min(len(b) - len(b.lstrip()) for b in body if b.strip())
        for tile in range(tiles):
            out.append(f"{indent}r0_offset = {tile} * R0_BLOCK")
            for body_line in body:
                text = indent + body_line[body_indent:] if body_line.strip() else ""
                for pattern in renames:
                    text = pattern.sub(lambda m, t=tile: f"{m.group(0)}_t{t}", text)
                out.append(text)
        unrolled += 1
    if not unrolled:
        raise RuntimeError("no column loop to unroll")
    return "\n".join(out) + "\n"


_SUM_INIT = re.compile(r"^(\s*)(_tmp\d+) = tl\.full\(\[XBLOCK, R0_BLOCK\], 0, tl\.float32\)$")


def chunk_row_sums(code: str, chunk: int) -> str:
    """Fold each tile's row-sum terms over runs of `chunk` adjacent columns before adding
    them to the accumulator, which becomes [XBLOCK, R0_BLOCK // chunk].

    A run of 8 columns is what one thread holds of a 16-byte vector load, so the fold is
    register adds in the thread, no shuffles. At LayerNorm 8192x16384 (two row sums over
    tiles of 4096, 16 warps) this frees 14 registers per thread and took the H100 kernel
    from 10 spilled registers to none, 309 -> 290 us (bench/NOTES.md, session 10).

    Only fp32 sums written in Inductor's looped form are rewritten:
        _tmpA = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
        tmpC = _tmpA + tmpB
        _tmpA = tmpC                          (or tl.where(mask, tmpC, _tmpA))
        tmpD = tl.sum(_tmpA, 1)[:, None]
    an accumulator used in any other way is left as it is.
    """
    if chunk <= 1:
        return code
    lines = code.splitlines()
    for i, line in enumerate(list(lines)):
        match = _SUM_INIT.match(line)
        if match is not None:
            lines = _chunk_one(lines, i, match.group(1), match.group(2), chunk)
    return _joined_like(lines, code)


def _chunk_one(lines: list[str], init: int, indent: str, acc: str, chunk: int) -> list[str]:
    """`lines` with accumulator `acc` (initialised at line `init`) chunked, or unchanged
    when any use of it or of its combined values is not of the looped-sum form."""
    a = re.escape(acc)
    combine = re.compile(rf"^(\s*)(tmp\d+) = {a} \+ (tmp\d+)$")
    final = re.compile(rf"^\s*tmp\d+ = tl\.sum\({a}, 1\)\[:, None\]$")
    uses = re.compile(rf"\b{a}\b")
    rewrites: dict[int, str] = {
        init: f"{indent}{acc} = tl.full([XBLOCK, R0_BLOCK // {chunk}], 0, tl.float32)"}
    totals: set[str] = set()
    finals = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        if i == init or not uses.search(line):
            i += 1
            continue
        if final.match(line):
            finals += 1
            i += 1
            continue
        match = combine.match(line)
        if match is None or i + 1 >= len(lines):
            return lines
        pad, total, term = match.groups()
        update = lines[i + 1].strip()
        t = re.escape(total)
        masked = re.fullmatch(rf"{a} = tl\.where\((.+), {t}, {a}\)", update)
        if update == f"{acc} = {total}":
            value = term
        elif masked is not None:
            value = f"tl.where({masked.group(1)}, {term}, 0.0)"
        else:
            return lines
        rewrites[i] = (f"{pad}{total} = {acc} + tl.sum(tl.reshape({value}.to(tl.float32), "
                       f"[XBLOCK, R0_BLOCK // {chunk}, {chunk}]), 2)")
        rewrites[i + 1] = f"{pad}{acc} = {total}"
        totals.add(total)
        i += 2
    if not finals or not totals:
        return lines
    # The combined values must feed the accumulator only.
    for j, line in enumerate(lines):
        if j not in rewrites and any(re.search(rf"\b{t}\b", line) for t in totals):
            return lines
    return [rewrites.get(j, line) for j, line in enumerate(lines)]


_ROW_STORE = re.compile(r"^(\s*tl\.store\(out_ptr\d+ \+ .*)\)$")


def stream_row_stores(code: str) -> str:
    """Give the kernel's output stores (`out_ptr*`: dx and the like, written once and not
    read back here) the streaming cache hint `.cs`, so that they leave the L2 first.

    A column-tiled row is read twice (the second pass from L1 or L2) and its successor is
    hinted into L2 ahead of time; the streaming dx lines then stop pushing those rows and
    the workspace out. LayerNorm 8192x16384 on H100: 297 -> 292 us (bench/NOTES.md,
    session 10). Stores that already carry a cache hint are left as they are."""
    out = []
    for line in code.splitlines():
        match = _ROW_STORE.match(line)
        if match is not None and "cache_modifier" not in line and "eviction_policy" not in line:
            line = f"{match.group(1)}, cache_modifier='.cs')"
        out.append(line)
    return _joined_like(out, code)


#: A load of [M, N] rows (its index names a column and a row variable) that Inductor
#: marked `evict_last` because the row is read again later in the kernel.
_PINNED_ROW_LOAD = re.compile(
    r"^(\s*tmp\d+ = tl\.load\(in_ptr\d+ \+ \((?=[^)]*\br0_\d)(?=[^)]*\bx\d)[^)]*\), [^,()]+)"
    r", eviction_policy='evict_last'(?=[,)])")


def unpin_row_loads(code: str) -> str:
    """Drop Inductor's `evict_last` from the loads of [M, N] rows in register-tiled kernels.

    Inductor marks the first pass's row loads evict_last for the second pass. Triton turns
    that into an L1 *and* an L2 priority, but in a register-tiled kernel the second pass
    reads the row back from L1: the L2 copy is never read again, yet each row time pins
    another 8.4 MB of x and dy there (LayerNorm 8192x16384 on H100; Nsight Compute shows
    these loads as L2 HIT_LAST), ahead of the lines hinted for the next row. With the
    default policy: 290.5 -> 288.5 us end to end (bench/NOTES.md, session 11). The weight
    (a column-only index) and per-row scalars (row-only) keep their hint."""
    out = [_PINNED_ROW_LOAD.sub(r"\1", line) for line in code.splitlines()]
    return _joined_like(out, code)
