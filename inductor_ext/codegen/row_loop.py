"""The fused kernel on Inductor's own Triton kernel class: its persistent row reduction
inside a per-program row loop, each column reduction a partial accumulation kept in the
plan's accumulator dtype.

We build on Inductor's TritonKernel for everything it already does (indexing, masks, loads,
the row reduction's own ops, argument plumbing, the CachingAutotuner launcher) and own the
parts that differ: the row loop, its prologue and epilogue, and the text hooks through which
kernel_base.py writes the partials in Inductor's [XBLOCK, R0_BLOCK] terms.
"""

from __future__ import annotations

import functools
from typing import Any

import sympy

from .. import compat
from ..compat import (
    FixedGrid,
    IndentedBuffer,
    IterationRangesEntry,
    IterationRangesRoot,
    TritonKernel,
    V,
)
from ..groups.combine import COMBINE, TL_REDUCE
from ..plan import PROGRAMS_KEY, LaunchPlan
from ..runtime import autotune
from . import column_tiles, rewrites
from . import prefetch as pf
from .flavor import TargetFlavor
from .kernel_base import MixOrderKernelBase, PartialAccumulator


class MixOrderKernelMixin(MixOrderKernelBase):
    """Mixed into Inductor's own Triton kernel class (or a vendor subclass that keeps its
    codegen, prefixes x / r0_ and fixed configs) so the fused kernel keeps that device's
    launcher, with its x (row) axis walked by a loop inside each program."""

    def __init__(self, *args: Any, plan: LaunchPlan, flavor: TargetFlavor,
                 **kwargs: Any) -> None:
        self._row_loop_written = False
        #: Buffer -> its load index; `_row_span` keeps the [M, N] ones for the L2 hint.
        self._l2_row_loads: dict[str, sympy.Expr] = {}
        #: The weights' loads under the plan's `weights_once`, written before the row loop.
        self._weight_loads = IndentedBuffer()
        super().__init__(*args, plan=plan, flavor=flavor, **kwargs)

    @property
    def row_program(self) -> str:
        """Text of the program's row program (its workspace row): the program id, or its
        quotient by the column groups, which the loop header names."""
        return "tl.program_id(0)" if self.plan.column_groups == 1 else "row_program"

    def load(self, name: str, index: sympy.Expr) -> Any:
        if self.plan.l2_prefetch:
            self._l2_row_loads.setdefault(name, index)
        return super().load(name, index)

    def get_load_buffer(self, indexing: Any) -> IndentedBuffer:
        """Inductor's buffer for a load, but for a weight's under the plan's `weights_once`
        (an aligned persistent row whose side reads a weight): a load indexed by columns
        alone is the same for every row, so it goes before the row loop, once a program.
        At an aligned row's shifted columns it is element-wise, as many instructions a
        row as the row's own loads."""
        buffer = super().get_load_buffer(indexing)
        if (buffer is self.loads and self._weights_once and indexing.has_rindex()
                and not any(s.name.startswith("x") for s in indexing.index.free_symbols)):
            return self._weight_loads
        return buffer

    @property
    def _weights_once(self) -> bool:
        return bool(self.plan.weights_once and not self.column_tiled and self.row_vector)

    # -- the row axis lives in our loop ------------------------------------------------
    @property
    def segmented(self) -> bool:
        """Programs walk one sample's rows each (plan.segments > 1): the row mask is the
        program's row range, never constant."""
        return self.plan.segments > 1

    @property
    def row_limit(self) -> str:
        """The bound of the current program's rows in the row mask."""
        return "row_end" if self.segmented else "xnumel"

    def _has_constant_mask(self, tree: IterationRangesRoot) -> bool:
        if self.segmented and tree.prefix == "x":
            return False
        if tree.prefix == "x" and self.autotuned:
            # Inductor judges the row mask by the kernel's own config; every timed config
            # runs this text (register tiles plan XBLOCK 1 and time 2: without the mask,
            # an odd M read a row past the end).
            largest = max(int(dict(config).get("XBLOCK", 1)) for config in self.plan.configs)
            if largest > self.plan.block_m:
                return bool(V.graph.sizevars.statically_known_multiple_of(tree.numel, largest))
        return super()._has_constant_mask(tree)

    def loop_header(self) -> list[str]:
        """Lines before the row loop (the flavor's, or the per-sample ranges), after the
        row program and column group of a program when the row is split in groups."""
        groups = self.plan.column_groups
        head = [] if groups == 1 else [f"row_program = tl.program_id(0) // {groups}",
                                       f"col_group = tl.program_id(0) % {groups}"]
        if not self.segmented:
            programs = PROGRAMS_KEY if self.programs_per_config else ""
            return head + self.flavor.loop_header(self.plan, self.row_program, programs)
        S, per = self.plan.segments, self.plan.programs_per_segment
        program = self.row_program
        share = [f"seg_rows = xnumel // {S}",
                 "seg_blocks = (seg_rows + XBLOCK - 1) // XBLOCK",
                 f"rows_per_program = ((seg_blocks + {per - 1}) // {per}) * XBLOCK"]
        if self.plan.interleaved_segments:
            # Sample `seg` is rows seg, seg + S, ...: the loop walks their positions t
            # (row = t * S + seg), this program's share of them.
            return head + share + [
                f"seg = {program} // {per}",
                f"row_start = ({program} % {per}) * rows_per_program",
                "row_end = tl.minimum(row_start + rows_per_program, seg_rows)",
                "row_step = XBLOCK",
            ]
        return head + share + [
            f"seg_start = ({program} // {per}) * seg_rows",
            f"row_start = seg_start + ({program} % {per}) * rows_per_program",
            "row_end = tl.minimum(row_start + rows_per_program, seg_start + seg_rows)",
            "row_step = XBLOCK",
        ]

    def loop_statement(self) -> str:
        if not self.segmented:
            return self.flavor.loop_statement(self.plan)
        return "for xoffset in tl.range(row_start, row_end, row_step):"

    def want_no_x_dim(self) -> bool:
        return False  # our row loop and accumulators are written for a 2-D [XBLOCK, R0] tile

    def iteration_ranges_codegen_header(self, entry: IterationRangesRoot,
                                        code: IndentedBuffer) -> None:
        if entry.prefix == "x":
            return  # xindex / xmask are written per row block in codegen_body
        super().iteration_ranges_codegen_header(entry, code)

    def codegen_iteration_ranges_entry(self, entry: IterationRangesEntry) -> None:
        if entry.prefix == "x" and not self.column_tiled:
            line = f"{entry.name} = {self.kexpr(self.rename_indexing(entry.expr))}"
            self.indexing_code.writeline(line)
            return
        super().codegen_iteration_ranges_entry(entry)

    def _get_grid_type(self) -> type[FixedGrid]:
        return FixedGrid

    # An instance method on purpose (Inductor's is a classmethod): the meta is the plan's.
    def inductor_meta_common(self) -> dict[str, Any]:  # type: ignore[override]
        out = dict(super().inductor_meta_common())
        out["fixed_grid"] = [str(self.plan.grid), "1", "1"]
        if self.programs_per_config:
            # One grid per row-program count: Inductor's per-config grids, matched on the
            # config's count.
            del out["fixed_grid"]
            out["grid_type"] = "PrecomputedGrid"
            out["precomputed_grids"] = [
                {"config": {PROGRAMS_KEY: count},
                 **{mode: [str(count * self.plan.column_groups), "1", "1"]
                    for mode in ("python", "cpp", "python_slow")}}
                for count in self.plan.program_choices]
        out[autotune.PLAN_KEY] = self.plan.to_meta()
        if self.autotuned:
            out[autotune.CONFIGS_KEY] = [dict(c) for c in self.plan.configs]
        return out

    @property
    def programs_per_config(self) -> bool:
        """The configs choose the row-program count (a constexpr of the kernel); a kernel
        that is not autotuned runs the plan's."""
        return self.autotuned and bool(self.plan.program_choices)

    @property
    def autotuned(self) -> bool:
        """Several configs are timed on first launch. Never in deterministic mode (rows per
        iteration and warps change the summation order) nor for column-tiled kernels
        that loop over tiles (they add into the workspace, so a timing run would change
        the result)."""
        return (len(self.plan.configs) > 1
                and not self.plan.looped_column_tiles
                and not compat.deterministic_mode())

    # -- partial accumulation ----------------------------------------------------------
    def accumulate_mask(self) -> str:
        masks = [f"{tree.prefix}mask" for tree in self.range_trees
                 if not self._has_constant_mask(tree)]
        return " & ".join(masks) if masks else ""

    @property
    def accumulates_whole_blocks(self) -> bool:
        """A persistent row keeps [XBLOCK, R0_BLOCK] accumulators and folds their rows once,
        after the loop; column tiles fold each block's rows as they add it."""
        return not self.column_tiled or self.plan.block_partials

    def row_block_shape(self) -> str:
        return "[XBLOCK, R0_BLOCK]"

    def folded_shape(self) -> str:
        return "[1, R0_BLOCK]"

    def fold_rows(self, reduction_type: str, tile: str) -> str:
        return f"{TL_REDUCE[reduction_type]}({tile}, 0)[None, :]"

    def _columns_masked(self) -> bool:
        """The column axis needs a mask (R0_BLOCK does not divide the row)."""
        return not self._has_constant_mask(self.range_trees[1])

    def loop_tile_columns(self) -> tuple[str, str]:
        return "r0_index", "r0_mask" if self._columns_masked() else ""

    def workspace_columns(self, index: int, columns: str, row: str | None = None) -> str:
        """Pointers to columns `columns` of partial `index` in program `row`'s workspace
        row, by default this program's (the partials' three stores and the looped tiles'
        adds all address it)."""
        assert self.workspace is not None
        return self.workspace.pointer(row or self.row_program, index, columns,
                                      row_length="r0_numel")

    def accumulator_names(self, part: PartialAccumulator) -> list[str]:
        """One accumulator per partial for a persistent row; one per unrolled column tile
        of the program's group (`column_tiles.rewrite_loops` gives each tile its name)."""
        if not self.column_tiled:
            return [part.acc]
        return [f"{part.acc}_t{tile}" for tile in range(self.plan.group_tiles)]

    def store_columns_setup(self) -> list[str]:
        return ["r0_cols = tl.arange(0, R0_BLOCK)[None, :]"] if self.column_tiled else []

    @functools.cached_property
    def row_vector(self) -> int:
        """Elements of the whole vectors a persistent row is read and written in from the
        boundary before its start (the plan's `row_vector`; `rewrites.aligned_row_vectors`),
        or 0. Only where every row a program walks has the program's shift: one row a
        block in every config, each launch's program count a multiple of the vector, and
        rows in program-strided order (not per sample, not double-buffered). A plan asking
        for it where a launch would break the shift records a miss of the rewrite, once.
        Cached: the plan does not change once the kernel is built."""
        vector = self.plan.row_vector
        if (not vector or self.column_tiled or self.segmented or self.plan.prefetch
                or self.plan.row_loop != "strided"):
            return 0
        if not self.plan.keeps_row_shift:
            rewrites.record_miss("aligned_row_vectors",
                                 "a launch of several rows a block or of programs not a "
                                 "multiple of the vector: the rows keep Inductor's indexing")
            return 0
        return vector

    def stored_columns(self, tile: int) -> tuple[str, str]:
        """A persistent row's columns (an aligned row's lanes less its shift), or unrolled
        tile `tile`'s (its own tile of the row when the row is split in column groups)."""
        masked = self._columns_masked()
        if not self.column_tiled:
            columns = "(r0_index - _mo_shift)" if self.row_vector else "r0_index"
            return columns, "r0_mask" if masked else ""
        first = rewrites.own_tile(tile, self.plan.group_tiles, self.plan.column_groups)
        cols = f"{first} * R0_BLOCK + r0_cols"
        return cols, f"{cols} < r0_numel" if masked else ""

    # -- the row loop -----------------------------------------------------------------
    def codegen_kernel(self, name: str | None = None) -> str:
        # Inductor's codegen_kernel flushes the buffers into `body` and reads it; the row
        # loop goes around all of it, so it is written first, once every node is in.
        self.codegen_body()
        self._write_row_loop()
        src = super().codegen_kernel(name)
        if self.row_vector:
            src = rewrites.apply("aligned_row_vectors", src, int(self.range_trees[1].numel),
                                 self.row_vector)
        if self.autotuned:
            src = rewrites.apply("autotune_decorator", src)
        if self.programs_per_config:
            src = rewrites.apply("program_count_argument", src, PROGRAMS_KEY)
        return src

    def codegen_body(self) -> None:
        """Column-tiled: Inductor's loops over column tiles, appended to `body` at each
        flush, for the row loop to wrap. Persistent: the buffers wait for the row loop,
        which splits the loads for double buffering."""
        if self.column_tiled:
            super().codegen_body()

    def _write_row_loop(self) -> None:
        """The one row loop of every plan: the loop header, the partials' accumulators,
        the loop over row blocks (row indices, the L2 hint, then the block's code), the
        dependent launch's trigger and the partials' workspace stores. A persistent row's
        block is the buffers (loads double-buffered when the plan prefetches); a column-
        tiled row's block is Inductor's loops over column tiles."""
        if self._row_loop_written:
            return
        tiled = self.column_tiled
        if not tiled and not (self.indexing_code or self.loads or self.stores or self.compute
                              or self.post_loop_combine or self.post_loop_store):
            return
        self._row_loop_written = True
        split = None
        if self.plan.prefetch and not tiled:
            split = pf.split_loads(self.indexing_code.getvalue(), self.loads.getvalue())
            if split is None:
                rewrites.record_miss("prefetch_next_block", "loads left single-buffered")
        if tiled:
            # Everything Inductor wrote, its column-tile loops included, runs per row block.
            inner = column_tiles.rewrite_loops(self.body.getvalue(), self.plan,
                                               [part.acc for part in self.partials])
            body = type(self.body)()
        else:
            # What Inductor wrote is the row's column indices: they stay before the loop.
            inner, body = "", self.body
        for line in self.loop_header():
            body.writeline(line)
        self._write_accumulators(body)
        if split is not None:
            self._write_first_block(body, split)
        body.splice(self._weight_loads)
        body.writeline(self.loop_statement())
        with body.indent():
            self._write_row_block_indices(body)
            self._write_l2_prefetch(body)
            body.splice(inner)
            if not tiled:
                self._write_buffers(body, split)
        self._write_pdl_trigger(body)
        self._write_workspace_stores(body)
        self._write_unlaunched_rows(body)
        self.body = body

    def _write_unlaunched_rows(self, body: IndentedBuffer) -> None:
        """A config launching fewer programs than the workspace has rows: program 0 writes
        how many it launched after the partials, for the generated final step folds only
        theirs; for the ATen final step, which folds every row, program p writes the
        partials' identity into rows p + RPROGRAMS, p + 2 RPROGRAMS ... instead."""
        if not self.programs_per_config or not self.partials:
            return
        assert self.workspace is not None
        if self.workspace.counted:
            body.writeline(f"if {self.row_program} == 0:")
            with body.indent():
                body.writeline(f"tl.store({self.workspace.count_pointer()}, "
                               f"tl.full([], {PROGRAMS_KEY}, {self.acc_type}))")
            return
        rows = self.plan.programs
        body.writeline(f"for fill_program in range({self.row_program} + {PROGRAMS_KEY}, "
                       f"{rows}, {PROGRAMS_KEY}):")

        def identity(part: PartialAccumulator, _name: str) -> str:
            return (f"tl.full({self.folded_shape()}, {COMBINE[part.reduction_type][0]}, "
                    f"{self.acc_type})")

        with body.indent():
            for line in self.workspace_row_stores(identity, row="fill_program"):
                body.writeline(line)

    def _write_first_block(self, body: IndentedBuffer, split: pf.RowLoads) -> None:
        """Prologue of a double-buffered loop: the first row block's loads; each iteration
        then loads the next block into fresh registers before computing the current one."""
        constant = self._has_constant_mask(self.range_trees[0])
        body.writeline(f"xoffset = {pf.first_block_offset(constant)}")
        self._write_row_block_indices(body)
        body.splice(self.indexing_code)
        for line in split.row_loads:
            body.writeline(line)

    def _write_buffers(self, body: IndentedBuffer, split: pf.RowLoads | None) -> None:
        """A persistent row block: Inductor's buffers, the loads of the next block in place
        of this one's when double-buffered; then the buffers are spent."""
        body.splice(self.indexing_code)
        if split is None:
            body.splice(self.loads)
        else:
            self._write_next_block(body, split)
        body.splice(self.compute)
        body.splice(self.stores)
        body.splice(self.post_loop_combine)
        body.splice(self.post_loop_store)
        if split is not None:
            for var in split.variables:
                body.writeline(f"{var} = {var}_pf")
        for buf in (self.indexing_code, self.loads, self.compute, self.stores,
                    self.post_loop_combine, self.post_loop_store):
            buf.clear()

    def _write_pdl_trigger(self, body: IndentedBuffer) -> None:
        """After the row loop: the final step may launch once every program is here (not
        at the start: its programs would then wait beside ours and slow them down)."""
        if self.plan.final_step_pdl:
            body.writeline(self.flavor.pdl_trigger_statement())

    # -- loads ahead (codegen/prefetch.py) ---------------------------------------------
    def _write_next_block(self, body: IndentedBuffer, split: pf.RowLoads) -> None:
        """Loads of the next row block into `<var>_pf` (double buffering)."""
        x_tree = self.range_trees[0]
        constant = (self.create_constant_mask(x_tree) if self._has_constant_mask(x_tree)
                    else None)
        interleave = self.plan.segments if self.plan.interleaved_segments else 0
        for line in pf.next_block_lines(split, self.indexing_code.getvalue(), constant,
                                        self.row_limit, interleave):
            body.writeline(line)

    def _write_l2_prefetch(self, body: IndentedBuffer) -> None:
        """Hint the row block `plan.l2_prefetch` steps ahead into L2: one bulk prefetch per
        [M, N] input whose rows are contiguous runs (index = stride * row + column + c)."""
        spans = [span for name, index in self._l2_row_loads.items()
                 if (span := self._row_span(name, index)) is not None]
        for line in pf.l2_prefetch_lines(spans, self.plan.l2_prefetch, self.flavor,
                                         second_pass=self.column_tiled,
                                         keep_fraction=self.plan.l2_keep_fraction):
            body.writeline(line)

    def _row_span(self, name: str, index: sympy.Expr) -> pf.RowSpan | None:
        """`name`'s rows when `index` runs over this kernel's row and column axes whole."""
        axes: dict[str, sympy.Symbol] = {}
        for sym in index.free_symbols:
            entry = self.range_tree_nodes.get(sym)
            if entry is None or entry.divisor != 1 or entry.length != entry.parent.numel:
                return None
            axes[entry.parent.prefix] = sym
        if set(axes) != {"x", "r0_"}:
            return None
        return pf.row_span(index, axes["x"], axes["r0_"], self.range_trees[1].numel,
                           self.args.input(name), V.graph.get_dtype(name).itemsize)

    def _write_row_block_indices(self, body: IndentedBuffer) -> None:
        """xindex / xmask of the row block the loop is at."""
        if self.plan.interleaved_segments:
            for line in pf.interleaved_row_block(self.plan.segments, self.row_limit):
                body.writeline(line)
            return
        body.writeline("xindex = xoffset + tl.arange(0, XBLOCK)[:, None]")
        x_tree = self.range_trees[0]
        if self._has_constant_mask(x_tree):
            body.writeline(self.create_constant_mask(x_tree))
        else:
            body.writeline(f"xmask = xindex < {self.row_limit}")


@functools.cache
def kernel_class_for(base: type) -> type:
    """The fused-kernel class for a scheduling whose kernels are `base` instances."""
    if not issubclass(base, TritonKernel):
        raise TypeError(f"{base.__name__} is not a TritonKernel; cannot build a fused kernel")
    if base is TritonKernel:
        return MixOrderKernel
    return type(f"MixOrder{base.__name__}", (MixOrderKernelMixin, base), {})


class MixOrderKernel(MixOrderKernelMixin, TritonKernel):
    """The fused kernel on Inductor's own Triton kernel (CUDA, XPU, CPU-Triton)."""

