"""Every edit of the Triton text that Inductor (or a vendor's backend) generates, in one place.

We emit our own lines directly; these rewrites are what is left: edits of lines that
Inductor writes itself. Each one is a `Rewrite` record naming the text it expects. A
torch upgrade can change that text, and a rewrite that no longer finds it would silently
lose speed, so `apply` counts each application (`applied()`) and each miss (`missed()`,
logged once per rewrite at warning). A miss of a `required` rewrite (the kernel would be
wrong without it) raises, and the codegen falls back to Inductor's kernels; any other
miss keeps the text as it is. tests/test_rewrites.py compiles kernels that need every
rewrite of Inductor's text and checks that each applied. A target whose kernel class is a
vendor's registers its edits of that class's text here as well (`register`, from its own
folder), so each is counted alike (tests/ascend/test_npu_adapter.py checks the Ascend one).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from torch._dynamo.utils import counters

from .. import diagnostics

#: Buckets of `torch._dynamo.utils.counters`: applications and misses, by rewrite name.
APPLIED_KEY = "inductor_ext_rewrites"
MISSED_KEY = "inductor_ext_rewrite_misses"


class RewriteMissed(RuntimeError):
    """A required rewrite did not find its text (the codegen falls back on it)."""


@dataclasses.dataclass(frozen=True)
class Rewrite:
    """One edit of generated text: `fn(text, *args)` returns the edited text, and the
    rewrite applied when that differs from `text`."""

    name: str
    expects: str  # the generated text it edits, as Inductor (or the vendor) writes it
    fn: Callable[..., str]
    required: bool = False  # a miss raises RewriteMissed instead of keeping the text
    #: whose text: "inductor", or the name of the vendor scheduling whose kernel class
    #: writes it (`families.SchedulingFamily.name`)
    backend: str = "inductor"


REGISTRY: dict[str, Rewrite] = {}


def register(name: str, expects: str, required: bool = False, backend: str = "inductor"
              ) -> Callable[[Callable[..., str]], Callable[..., str]]:
    def wrap(fn: Callable[..., str]) -> Callable[..., str]:
        REGISTRY[name] = Rewrite(name, expects, fn, required, backend)
        return fn
    return wrap


def apply(name: str, text: str, *args: Any) -> str:
    """`text` through the rewrite `name`, counted as applied or missed."""
    rewrite = REGISTRY[name]
    out = rewrite.fn(text, *args)
    if out != text:
        counters[APPLIED_KEY][name] += 1
        return out
    record_miss(name)
    if rewrite.required:
        raise RewriteMissed(f"rewrite {name!r} found no {rewrite.expects!r}")
    return text


def record_miss(name: str, detail: str = "") -> None:
    """Count a miss of rewrite `name` and warn once: also for callers whose own analysis
    finds the expected text absent before they get to `apply`."""
    counters[MISSED_KEY][name] += 1
    diagnostics.warn_once(
        f"rewrite_miss:{name}",
        "inductor_ext: the generated Triton text no longer has what rewrite %r expects "
        "(%s)%s; the kernel is built without it and may be slower",
        name, REGISTRY[name].expects, f": {detail}" if detail else "")


def applied() -> Counter[str]:
    return Counter(counters[APPLIED_KEY])


def missed() -> Counter[str]:
    return Counter(counters[MISSED_KEY])


def reset() -> None:
    counters[APPLIED_KEY].clear()
    counters[MISSED_KEY].clear()


def _joined_like(lines: list[str], code: str) -> str:
    """`lines` as text, ending in a newline when `code` did (line-wise rewrites keep it)."""
    return "\n".join(lines) + ("\n" if code.endswith("\n") else "")


# -- column-tiled kernels (chosen by the plan; see codegen/column_tiles.py) ----------------

COLUMN_LOOP = "for r0_offset in tl.range(0, r0_numel, R0_BLOCK):"


#: An accumulator of Inductor's looped row reduction (its name) in a column-tile loop.
_ROW_ACCUMULATOR = re.compile(r"\b_tmp\d+\b")


def own_tile(tile: int, per_group: int, groups: int) -> str:
    """Column tile index (text) of the `tile`-th of a program's own `per_group` tiles: its
    partials' tile, which the workspace stores address too."""
    return f"{tile}" if groups == 1 else f"(col_group * {per_group} + {tile})"


def rotated_tile(tile: int | str, per_group: int, tiles: int) -> str:
    """Column tile index (text) of step `tile` of a column group's row-sum walk over all
    `tiles`, which starts past the group's own share."""
    return f"(((col_group + 1) * {per_group} + {tile}) % {tiles})"


@register("unroll_column_loops", COLUMN_LOOP, required=True)
def unroll_column_loops(code: str, tiles: int, accumulators: list[str], groups: int = 1,
                        unroll_row_sums: bool = True, row_sum_stages: int = 0,
                        row_sum_unroll: int = 1) -> str:
    """Replace each loop over column tiles by straight-line copies with a constant
    r0_offset, renaming every partial accumulator to its tile's own (`<acc>_t<i>`), so the
    partials of a whole row live in registers across the row loop. Required: the
    register-tiled kernel stores the per-tile accumulators.

    With `groups` > 1 column groups, the program of group `col_group` (a name the loop
    header defines) copies a loop with partials for its own `tiles // groups` tiles only;
    it must then hold no row reduction (whose sum needs every tile). Every other loop
    (the row sums) walks all `tiles`, starting past the group's share so that the share
    is the last read and still in L1 for the second pass; it must store nothing (each
    group's program runs it). Otherwise the text is left as it is: a miss.

    `unroll_row_sums` False keeps the loops without partials as run-time loops (over the
    same rotated tiles): straight-line row sums let the compiler issue every tile's loads
    at once, which spilled registers beside a column group's partials. Such a loop asks
    Triton for `row_sum_stages` pipelining stages and a `row_sum_unroll` factor when
    given (tl.range's num_stages and loop_unroll_factor)."""
    renames = [re.compile(rf"\b{re.escape(acc)}\b") for acc in accumulators]
    per_group = tiles // groups
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
        loop_text = "\n".join(body)
        partials = any(pattern.search(loop_text) for pattern in renames)
        if groups == 1:
            offsets = [f"{tile} * R0_BLOCK" for tile in range(tiles)]
        elif partials and not _ROW_ACCUMULATOR.search(loop_text):
            offsets = [f"{own_tile(tile, per_group, groups)} * R0_BLOCK"
                       for tile in range(per_group)]
        elif not partials and "tl.store(" not in loop_text:
            offsets = [f"{rotated_tile(tile, per_group, tiles)} * R0_BLOCK"
                       for tile in range(tiles)]
        else:
            return code
        if not partials and not unroll_row_sums:
            if groups == 1:
                out.append(line)
                out.extend(body)
                continue
            hints = (f", num_stages={row_sum_stages}" if row_sum_stages else "") + (
                f", loop_unroll_factor={row_sum_unroll}" if row_sum_unroll > 1 else "")
            out.append(f"{indent}for r0_tile in tl.range(0, {tiles}{hints}):")
            indent += "    "
            offsets = [f"{rotated_tile('r0_tile', per_group, tiles)} * R0_BLOCK"]
        for tile, offset in enumerate(offsets):
            out.append(f"{indent}r0_offset = {offset}")
            for body_line in body:
                text = indent + body_line[body_indent:] if body_line.strip() else ""
                for pattern in renames:
                    text = pattern.sub(rf"\g<0>_t{tile}", text)  # the match, then _t<tile>
                out.append(text)
        unrolled += 1
    if not unrolled:
        return code
    return "\n".join(out) + "\n"


_SUM_INIT = re.compile(r"^(\s*)(_tmp\d+) = tl\.full\(\[XBLOCK, R0_BLOCK\], 0, tl\.float32\)$")


@register("chunk_row_sums",
           "_tmpA = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32); tmpC = _tmpA + tmpB; "
           "_tmpA = tmpC (or tl.where(mask, tmpC, _tmpA)); tmpD = tl.sum(_tmpA, 1)[:, None]")
def chunk_row_sums(code: str, chunk: int) -> str:
    """Fold each tile's row-sum terms over runs of `chunk` adjacent columns before adding
    them to the accumulator, which becomes [XBLOCK, R0_BLOCK // chunk].

    A run of 8 columns is what one thread holds of a 16-byte vector load, so the fold is
    register adds in the thread, no shuffles. At LayerNorm 8192x16384 (two row sums over
    tiles of 4096, 16 warps) this frees 14 registers per thread, enough that the kernel
    does not spill.

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


@register("stream_row_stores", "tl.store(out_ptrN + (...), value, mask) without a cache hint")
def stream_row_stores(code: str) -> str:
    """Give the kernel's output stores (`out_ptr*`: dx and the like, written once and not
    read back here) the streaming cache hint `.cs`, so that they leave the L2 first.

    A column-tiled row is read twice (the second pass from L1 or L2) and its successor is
    hinted into L2 ahead of time; the streaming dx lines then stop pushing those rows and
    the workspace out. Stores that already carry a cache hint are left as they are."""
    out = []
    for line in code.splitlines():
        match = _ROW_STORE.match(line)
        if match is not None and "cache_modifier" not in line and "eviction_policy" not in line:
            line = f"{match.group(1)}, cache_modifier='.cs')"
        out.append(line)
    return _joined_like(out, code)


#: The pointer of an [M, N] row tile's load: its index names a column (r0_) and a row (x).
_ROW_TILE_POINTER = r"tl\.load\(in_ptr\d+ \+ \((?=[^)]*\br0_\d)(?=[^)]*\bx\d)[^)]*\)"
#: A load of [M, N] rows that Inductor marked `evict_last` because the row is read again
#: later in the kernel.
_PINNED_ROW_LOAD = re.compile(
    rf"^(\s*tmp\d+ = {_ROW_TILE_POINTER}, [^,()]+), eviction_policy='evict_last'(?=[,)])")


@register("unpin_row_loads",
           "tmpN = tl.load(in_ptrN + (<r0_ and x index>), mask, eviction_policy='evict_last'")
def unpin_row_loads(code: str) -> str:
    """Drop Inductor's `evict_last` from the loads of [M, N] rows in register-tiled kernels.

    Inductor marks the first pass's row loads evict_last for the second pass. Triton turns
    that into an L1 *and* an L2 priority, but in a register-tiled kernel the second pass
    reads the row back from L1: the L2 copy is never read again, yet each row time pins
    another 8.4 MB of x and dy there (LayerNorm 8192x16384 on H100; Nsight Compute shows
    these loads as L2 HIT_LAST), ahead of the lines hinted for the next row. The weight
    (a column-only index) and per-row scalars (row-only) keep their hint."""
    out = [_PINNED_ROW_LOAD.sub(r"\1", line) for line in code.splitlines()]
    return _joined_like(out, code)


#: A load of an [M, N] row tile: its index names a column and a row variable.
_ROW_TILE_LOAD = re.compile(rf"^(\s*)(tmp\d+) = ({_ROW_TILE_POINTER}.*)$")
#: The first line of an unrolled column tile (`unroll_column_loops`).
_TILE_START = re.compile(r"^\s*r0_offset = (\d+) \* R0_BLOCK$")
_EVICTION = re.compile(r", eviction_policy='[a-z_]+'")


@register("keep_row_tiles",
           "unrolled tiles (`r0_offset = <t> * R0_BLOCK`) whose row loads "
           "`tmpN = tl.load(in_ptrN + (<r0_ and x index>), ...)` repeat a tile's earlier load")
def keep_row_tiles(code: str) -> str:
    """A row tile loaded again by a later pass over the same tile takes the first load's
    value (held in `_mo_row<k>`) instead: the row is read once and kept in registers, as a
    persistent row is, but in tiles of the plan's own (fewer padded lanes, or two tiles
    where they take as many as one power-of-two tile).
    Loads that differ in anything but their eviction hint are left as they are."""
    lines = code.splitlines()
    # Per line, for a row-tile load inside a tile: (indent, variable, (tile, load text)).
    loads: list[tuple[str, str, tuple[int, str]] | None] = []
    tile: int | None = None
    for line in lines:
        start = _TILE_START.match(line)
        if start is not None:
            tile = int(start.group(1))
        load = _ROW_TILE_LOAD.match(line)
        loads.append(None if load is None or tile is None
                     else (load.group(1), load.group(2),
                           (tile, _EVICTION.sub("", load.group(3)))))
    seen: set[tuple[int, str]] = set()
    repeated: set[tuple[int, str]] = set()
    for key in (found[2] for found in loads if found is not None):
        (repeated if key in seen else seen).add(key)
    if not repeated:
        return code  # no tile loaded twice: a miss
    held: dict[tuple[int, str], str] = {}  # only loads a later pass takes get a name
    out: list[str] = []
    for line, load_found in zip(lines, loads):
        if load_found is None or load_found[2] not in repeated:
            out.append(line)
            continue
        indent, var, key = load_found
        if key in held:
            out.append(f"{indent}{var} = {held[key]}")
        else:
            held[key] = f"_mo_row{len(held)}"
            out += [line, f"{indent}{held[key]} = {var}"]
    return _joined_like(out, code)


# -- persistent kernels: register double buffering of the row loads (CUDA) --------------

@register("prefetch_next_block",
           "index lines `name = expr` and one-line row loads `tmpN = tl.load(...)` whose "
           "index reads no tmp")
def prefetch_next_block(code: str, names: list[str]) -> str:
    """The next row block's version of Inductor's indexing and row-load lines: every
    whole-word `name` in `names` (row-block index variables, load results) renamed
    `<name>_pf`, so the loads of block i + 1 are issued before block i is computed."""
    out = []
    for line in code.splitlines():
        for name in names:
            line = re.sub(rf"\b{name}\b", f"{name}_pf", line)
        out.append(line)
    return _joined_like(out, code)


# -- persistent kernels: rows read and written as whole 16-byte vectors (CUDA) -------------

#: Inductor's column mask of a padded persistent row, and its column index variable.
_PADDED_COLUMN_MASK = re.compile(r"^(\s*)r0_mask = r0_index < r0_numel$")
_PADDED_COLUMN_INDEX = re.compile(r"^(\s*)(r0_\d+) = r0_index$")
#: A one-line access of an [M, N] row at `(<column> + <N>*<row>)`: the pointer, column and
#: row variables, the mask, and (loads) the keyword arguments.
_ROW_ACCESS_LOAD = re.compile(
    r"tl\.load\((\w+) \+ \((r0_\d+) \+ (\d+)\*(x\d+)\), ([^(),]+), ([^()]*)\)")
_ROW_ACCESS_STORE = re.compile(
    r"^(\s*)tl\.store\((\w+) \+ \((r0_\d+) \+ (\d+)\*(x\d+)\), (\w+), ([^(),]+)\)$")


def aligned_row_setup(indent: str, vector: int) -> list[str]:
    """The shift of this program's rows from a vector boundary (every row it walks: the
    row programs are a multiple of `vector`), the row's lanes under it, the whole vectors
    read, the whole vectors written, and the lanes of the row's first and last vectors
    (its edges, written apart: a whole vector there would overwrite the next row's)."""
    v = vector
    return [f"{indent}{line}" for line in (
        f"_mo_shift = (tl.program_id(0) * r0_numel) % {v}",
        "r0_mask = (r0_index >= _mo_shift) & (r0_index < _mo_shift + r0_numel)",
        f"_mo_read = r0_index < (_mo_shift + r0_numel + {v - 1}) // {v} * {v}",
        f"_mo_first = (_mo_shift + {v - 1}) // {v} * {v}",
        f"_mo_end = (_mo_shift + r0_numel) // {v} * {v}",
        "_mo_body = (r0_index >= _mo_first) & (r0_index < _mo_end)",
        f"_mo_lanes = tl.arange(0, {v})[None, :]",
        f"_mo_vec = tl.arange(0, R0_BLOCK // {v})[None, :, None]",
        "_mo_head_mask = ((_mo_lanes >= _mo_shift) & (_mo_lanes < _mo_first)"
        " & (_mo_lanes < _mo_shift + r0_numel))",
        "_mo_tail_mask = ((_mo_end + _mo_lanes >= _mo_first)"
        " & (_mo_end + _mo_lanes < _mo_shift + r0_numel))",
    )]


def aligned_row_edges(indent: str, ptr: str, start: str, value: str, mask: str,
                      vector: int) -> list[str]:
    """Stores of a row's first and last vectors' lanes (under `mask` with the row's lanes
    in place of `r0_mask`): each vector picked out of the row's [XBLOCK, R0_BLOCK / v, v]
    view by a sum that keeps one vector (the others zero; exact). Not `tl.gather`, which
    Triton lowers to tens of thousands of warp shuffles at 8192 lanes (seconds to build
    a config)."""
    v = vector
    vectors = (f"tl.reshape(tl.broadcast_to({value}, [XBLOCK, R0_BLOCK]), "
               f"[XBLOCK, R0_BLOCK // {v}, {v}])")
    return [f"{indent}{line}" for line in (
        f"_mo_vectors = {vectors}",
        f"tl.store({ptr} + ({start} + _mo_lanes), "
        f"tl.sum(tl.where(_mo_vec == 0, _mo_vectors, 0.0), 1), "
        f"{mask.replace('r0_mask', '_mo_head_mask')})",
        f"tl.store({ptr} + ({start} + _mo_end + _mo_lanes), "
        f"tl.sum(tl.where(_mo_vec == _mo_end // {v}, _mo_vectors, 0.0), 1), "
        f"{mask.replace('r0_mask', '_mo_tail_mask')})",
    )]


@register("aligned_row_vectors",
           "`r0_mask = r0_index < r0_numel`, `r0_<k> = r0_index` and row accesses "
           "`tl.load(in_ptrN + (r0_<k> + <N>*x<j>), <mask>, ...)` / "
           "`tl.store(out_ptrN + (r0_<k> + <N>*x<j>), tmpN, <mask>)`",
           required=True)
def aligned_row_vectors(code: str, N: int, vector: int) -> str:
    """A persistent row of N columns starting off a `vector`-element boundary, read and
    written in whole vectors: its lanes shifted by the program's `_mo_shift` (column
    `r0_<k>` is lane minus shift, under the shifted mask), each row load from the
    boundary before the row's start under a whole-vector mask then zeroed outside the
    row, each row store as whole vectors over the row's aligned middle plus the lanes of
    its first and last vectors picked out of the stored value. Every edit keeps the
    accessed elements: the text is unchanged (a miss) unless the mask, the column and
    at least one load and one store of the row are found."""
    lines = code.splitlines()
    masks = [i for i, line in enumerate(lines) if _PADDED_COLUMN_MASK.match(line)]
    columns = [i for i, line in enumerate(lines) if _PADDED_COLUMN_INDEX.match(line)]
    if len(masks) != 1 or len(columns) != 1:
        return code
    column = _PADDED_COLUMN_INDEX.match(lines[columns[0]]).group(2)  # type: ignore[union-attr]
    v = vector

    def load(match: re.Match[str]) -> str:
        ptr, col, n, row, mask, kwargs = match.groups()
        if col != column or int(n) != N or "r0_mask" not in mask:
            return match.group(0)
        read = mask.replace("r0_mask", "_mo_read")
        return (f"tl.where(r0_mask, tl.load({ptr} + (({n}*{row}) // {v} * {v} + r0_index), "
                f"{read}, {kwargs}), 0.0)")

    out: list[str] = []
    loads = stores = 0
    for i, line in enumerate(lines):
        if i == masks[0]:
            out += aligned_row_setup(_PADDED_COLUMN_MASK.match(line).group(1), v)  # type: ignore[union-attr]
            continue
        if i == columns[0]:
            out.append(f"{line} - _mo_shift")
            continue
        store = _ROW_ACCESS_STORE.match(line)
        if store is not None:
            indent, ptr, col, n, row, value, mask = store.groups()
            if col == column and int(n) == N and "r0_mask" in mask:
                start = f"({n}*{row}) // {v} * {v}"
                out.append(f"{indent}tl.store({ptr} + ({start} + r0_index), {value}, "
                           f"{mask.replace('r0_mask', '_mo_body')})")
                out += aligned_row_edges(indent, ptr, start, value, mask, v)
                stores += 1
                continue
        rewritten = _ROW_ACCESS_LOAD.sub(load, line)
        loads += rewritten != line
        out.append(rewritten)
    if not loads or not stores:
        return code
    return _joined_like(out, code)


#: A weight's load in the row loop: indexed by the column variable alone, under the column
#: mask (nothing of the row block), so every row loads the same values.
# -- kernel headers ------------------------------------------------------------------------

FIXED_DECORATOR = "@triton_heuristics.fixed_config("
HEURISTICS_IMPORT = "from torch._inductor.runtime import triton_helpers, triton_heuristics"
AUTOTUNE_IMPORT = "from inductor_ext.runtime.autotune import mix_order_autotune"


@register("autotune_decorator", f"one {FIXED_DECORATOR!r} line and {HEURISTICS_IMPORT!r}",
           required=True)
def autotune_decorator(src: str) -> str:
    """Swap Inductor's one-config decorator for ours (same arguments, the config list is in
    inductor_meta) and import it in the kernel module. Inductor writes the decorator as
    `@triton_heuristics.<name>(`, a module we do not own, so it cannot be emitted as ours."""
    if src.count(FIXED_DECORATOR) != 1 or HEURISTICS_IMPORT not in src:
        return src
    src = src.replace(FIXED_DECORATOR, "@mix_order_autotune(")
    return src.replace(HEURISTICS_IMPORT, f"{HEURISTICS_IMPORT}\n{AUTOTUNE_IMPORT}", 1)


BLOCK_PARAMETER = "XBLOCK : tl.constexpr"
BLOCK_SIGNATURE = "'XBLOCK': 'constexpr'"


@register("program_count_argument",
           f"one kernel `def` line with {BLOCK_PARAMETER!r} (and {BLOCK_SIGNATURE!r} in "
           "triton_meta's signature, where Triton lists constexprs there)", required=True)
def program_count_argument(src: str, name: str) -> str:
    """Add the configs' row-program count to the kernel as a constexpr after XBLOCK.
    Inductor writes a kernel's parameters itself (its constexprs only for the block sizes
    and its own reductions' counts), so ours joins its text."""
    lines = src.split("\n")
    defs = [i for i, line in enumerate(lines)
            if line.startswith("def ") and BLOCK_PARAMETER in line]
    if len(defs) != 1:
        return src
    lines[defs[0]] = lines[defs[0]].replace(BLOCK_PARAMETER,
                                            f"{BLOCK_PARAMETER}, {name} : tl.constexpr", 1)
    return "\n".join(lines).replace(BLOCK_SIGNATURE, f"{BLOCK_SIGNATURE}, '{name}': 'constexpr'",
                                    1)
