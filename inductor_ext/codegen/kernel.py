"""The fused kernel: Inductor's persistent row reduction inside a per-program row loop, with
each column reduction turned into a partial accumulation kept in fp32 registers.

We build on Inductor's TritonKernel for everything it already does (indexing, masks, loads,
the row reduction's own ops, argument plumbing, the CachingAutotuner launcher) and own the
parts that differ: the row loop, the accumulators, the workspace store, the final sum.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
from collections.abc import Iterator
from typing import Any

import sympy
import torch

from .. import compat, diagnostics
from ..compat import (
    DisableReduction,
    EnableReduction,
    SIMDKernelFeatures,
    TritonKernel,
    V,
)
from ..ir import bodies as reorder
from ..ir.combine import ATEN_REDUCE, COMBINE, TL_REDUCE
from ..plan import LaunchPlan
from ..runtime import autotune
from . import column_tiles, finalize, precompile, rewrites
from . import prefetch as pf
from .flavor import TargetFlavor, get_flavor
from .workspace import Workspace


@dataclasses.dataclass
class PartialAccumulator:
    """One column reduction's accumulator inside the fused kernel."""

    index: int  # slot k in the workspace [programs, K, N]
    reduction_type: str
    out_name: str  # buffer that receives the final [N] result
    acc: str  # accumulator variable name in the kernel
    #: B of a segmented column reduction (its final [B, N] result sums the workspace rows
    #: of each sample's programs apart); 1: every program's rows.
    segments: int = 1


class MixOrderKernelBase:
    """What every fused kernel carries, whatever Triton kernel class it is mixed into: the
    plan, the partial accumulators, the workspace, and the final step launched after it.
    Subclasses write the row loop in their base class's own terms (`add_partial`,
    `codegen_body`)."""

    def __init__(self, *args: Any, plan: LaunchPlan, flavor: TargetFlavor,
                 **kwargs: Any) -> None:
        # Set first: a vendor base class may analyse the kernel in its constructor.
        self.plan = plan
        self.flavor = flavor
        self.partials: list[PartialAccumulator] = []
        #: Output name -> samples B of each segmented column reduction.
        self.segments_of: dict[str, int] = {}
        #: The partials' layout, placed in Inductor's workspace before the body is written.
        self.workspace: Workspace | None = None
        #: Writes the generated final step's launch; None keeps the ATen step.
        self.finalize_launch: Any = None
        #: The column reductions' scheduler nodes: users of a buffer inside this kernel.
        self.column_nodes: frozenset[str] = frozenset()
        super().__init__(*args, **kwargs)

    def remove_kernel_local_buffers(self) -> None:
        """Inductor drops the store of a buffer whose every user runs in this kernel, but
        counts only nodes that store here; the column reductions, whose partials go to the
        workspace, are users here too. So a buffer the row side wrote only for a column
        (Qwen3's q_norm dy * x_hat) is handed over in registers and never written."""
        with compat.kernel_local_users(self.column_nodes):
            super().remove_kernel_local_buffers()  # type: ignore[misc]

    @property
    def column_tiled(self) -> bool:
        return not self.persistent_reduction

    @property
    def row_length(self) -> int:
        """N: the row reduction's length, the column count of every partial."""
        return int(self.features.reduction_numel)

    @property
    def acc_type(self) -> str:
        """Triton dtype of the partial accumulators and the workspace."""
        return compat.triton_type(self.plan.accumulator_dtype)

    def add_partial(self, reduction_type: str, out_name: str, value: Any) -> str:
        """Fold `value` (one column reduction's input over the current rows) into its
        partial; returns the accumulator's name."""
        raise NotImplementedError

    def accumulated_workspaces(self) -> list[str]:
        """The workspace arguments this kernel adds into (looped column tiles: zeroed per
        call, then read-modify-written). An autotuner must time configs on clones of them,
        or each timing launch adds into the live partials."""
        if self.workspace is None or not self.plan.looped_column_tiles:
            return []
        return [self.workspace.inner]

    # -- launch: the fused kernel, then the tiny final step -----------------------------
    def call_kernel(self, name: str, node: Any = None, deallocate_ws: bool = True) -> None:
        super().call_kernel(name, node, deallocate_ws=False)  # type: ignore[misc]
        if self.finalize_launch is not None:
            self.finalize_launch()
        else:
            self._write_aten_final_step()
        if deallocate_ws:
            self.deallocate_workspaces()  # type: ignore[attr-defined]

    def _write_aten_final_step(self) -> None:
        """Fallback final step: one ATen reduce over the workspace rows per output."""
        wrapper = V.graph.wrapper_code
        assert self.workspace is not None
        for part in self.partials:
            final = ATEN_REDUCE[part.reduction_type]
            rows, dim = self.workspace.aten_rows(part.index, part.segments)
            wrapper.writeline(
                f"{part.out_name}.copy_({rows}.{final}({dim}).view({part.out_name}.shape))")


class MixOrderKernelMixin(MixOrderKernelBase):
    """Mixed into Inductor's own Triton kernel class (or a vendor subclass that keeps its
    codegen, prefixes x / r0_ and fixed configs) so the fused kernel keeps that device's
    launcher, with its x (row) axis walked by a loop inside each program."""

    def __init__(self, *args: Any, plan: LaunchPlan, flavor: TargetFlavor,
                 **kwargs: Any) -> None:
        self._row_loop_written = False
        #: Buffer -> its load index; `_row_span` keeps the [M, N] ones for the L2 hint.
        self._l2_row_loads: dict[str, sympy.Expr] = {}
        super().__init__(*args, plan=plan, flavor=flavor, **kwargs)

    @property
    def register_tiles(self) -> int:
        """Static column tiles with partials in registers (0: looped, workspace adds)."""
        return self.plan.register_tiles

    @property
    def row_program(self) -> str:
        """Text of the program's row program (its workspace row): the program id, or its
        quotient by the column groups, which the loop header names."""
        return "tl.program_id(0)" if self.plan.column_groups == 1 else "row_program"

    def load(self, name: str, index: sympy.Expr) -> Any:
        if self.plan.l2_prefetch:
            self._l2_row_loads.setdefault(name, index)
        return super().load(name, index)

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

    def _has_constant_mask(self, tree: Any) -> bool:
        if self.segmented and tree.prefix == "x":
            return False
        return super()._has_constant_mask(tree)  # type: ignore[misc]

    def loop_header(self) -> list[str]:
        """Lines before the row loop (the flavor's, or the per-sample ranges), after the
        row program and column group of a program when the row is split in groups."""
        groups = self.plan.column_groups
        head = [] if groups == 1 else [f"row_program = tl.program_id(0) // {groups}",
                                       f"col_group = tl.program_id(0) % {groups}"]
        if not self.segmented:
            return head + self.flavor.loop_header(self.plan, self.row_program)
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

    def iteration_ranges_codegen_header(self, entry: Any, code: Any) -> None:
        if entry.prefix == "x":
            return  # xindex / xmask are written per row block in codegen_body
        super().iteration_ranges_codegen_header(entry, code)

    def codegen_iteration_ranges_entry(self, entry: Any) -> None:
        if entry.prefix == "x" and not self.column_tiled:
            line = f"{entry.name} = {self.kexpr(self.rename_indexing(entry.expr))}"
            self.indexing_code.writeline(line)
            return
        super().codegen_iteration_ranges_entry(entry)

    def _get_grid_type(self) -> Any:
        from torch._inductor.runtime import triton_heuristics

        return triton_heuristics.FixedGrid

    def inductor_meta_common(self) -> dict[str, Any]:  # type: ignore[override]
        out = dict(super().inductor_meta_common())
        out["fixed_grid"] = [str(self.plan.grid), "1", "1"]
        out[autotune.PLAN_KEY] = self.plan.to_meta()
        if self.autotuned:
            out[autotune.CONFIGS_KEY] = [dict(c) for c in self.plan.configs]
        return out

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

    def add_partial(self, reduction_type: str, out_name: str, value: Any) -> str:
        index = len(self.partials)
        acc = f"_mo_acc{index}"
        self.partials.append(PartialAccumulator(index, reduction_type, out_name, acc,
                                                self.segments_of.get(out_name, 1)))
        default, combine = COMBINE[reduction_type]
        val = f"tl.broadcast_to({value}, [XBLOCK, R0_BLOCK]).to({self.acc_type})"
        mask = self.accumulate_mask()
        if mask:
            val = f"tl.where({mask}, {val}, {default})"
        if self.register_tiles:
            # Unrolled column tiles: fold this tile's rows first, then into the tile's own
            # [1, R0_BLOCK] accumulator (`column_tiles.rewrite_loops` gives each tile its own name).
            fold = combine.format(acc=acc, val=f"{TL_REDUCE[reduction_type]}({val}, 0)[None, :]")
            self.compute.writeline(f"{acc} = {fold}")
        elif self.column_tiled:
            # The row is walked in column tiles: add this tile's column sums into the
            # program's own workspace row (zeroed at launch; no other program touches it).
            assert reduction_type == "sum", "column-tiled partials are sums"
            ptr = f"_mo_ws{index}"
            masked = not self._has_constant_mask(self.range_trees[1])
            load_mask = ", r0_mask, other=0.0" if masked else ""
            store_mask = ", r0_mask" if masked else ""
            self.compute.writeline(f"{ptr} = {self._workspace_pointer(index, 'r0_index')}")
            self.compute.writeline(
                f"tl.store({ptr}, tl.load({ptr}{load_mask}) + "
                f"tl.sum({val}, 0)[None, :]{store_mask})")
        else:
            self.compute.writeline(f"{acc} = {combine.format(acc=acc, val=val)}")
        return acc

    # -- the row loop -----------------------------------------------------------------
    def codegen_kernel(self, name: str | None = None) -> str:
        # Inductor's codegen_kernel flushes the buffers into `body` and reads it; the row
        # loop goes around all of it, so it is written first, once every node is in.
        self.codegen_body()
        self._write_row_loop()
        src = super().codegen_kernel(name)
        if self.autotuned:
            src = rewrites.apply("autotune_decorator", src)
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
        body.writeline(self.loop_statement())
        with body.indent():
            self._write_row_block_indices(body)
            self._write_l2_prefetch(body)
            body.splice(inner)
            if not tiled:
                self._write_buffers(body, split)
        self._write_pdl_trigger(body)
        self._write_workspace_stores(body)
        self.body = body

    def _write_accumulators(self, body: Any) -> None:
        """The partials' identities: [XBLOCK, R0_BLOCK] per partial for a persistent row;
        [1, R0_BLOCK] per unrolled column tile (none when tiles add into the workspace)."""
        for part in self.partials:
            default, _ = COMBINE[part.reduction_type]
            if not self.column_tiled:
                body.writeline(f"{part.acc} = tl.full([XBLOCK, R0_BLOCK], {default}, "
                               f"{self.acc_type})")
                continue
            for tile in range(self.plan.group_tiles):
                body.writeline(f"{part.acc}_t{tile} = tl.full([1, R0_BLOCK], {default}, "
                               f"{self.acc_type})")

    def _write_first_block(self, body: Any, split: pf.RowLoads) -> None:
        """Prologue of a double-buffered loop: the first row block's loads; each iteration
        then loads the next block into fresh registers before computing the current one."""
        constant = self._has_constant_mask(self.range_trees[0])
        body.writeline(f"xoffset = {pf.first_block_offset(constant)}")
        self._write_row_block_indices(body)
        body.splice(self.indexing_code)
        for line in split.row_loads:
            body.writeline(line)

    def _write_buffers(self, body: Any, split: pf.RowLoads | None) -> None:
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

    def _write_pdl_trigger(self, body: Any) -> None:
        """After the row loop: the final step may launch once every program is here (not
        at the start: its programs would then wait beside ours, 3-7 us slower)."""
        if self.plan.final_step_pdl:
            body.writeline(self.flavor.pdl_trigger_statement())

    def _write_workspace_stores(self, body: Any) -> None:
        """After the row loop, the partials into the program's workspace row: reduced over
        the block's rows (persistent), or each unrolled tile's into its columns; looped
        tiles have added theirs inside the loop."""
        masked = not self._has_constant_mask(self.range_trees[1])
        if not self.column_tiled:
            r0_mask = ", r0_mask" if masked else ""
            for part in self.partials:
                reduce_fn = TL_REDUCE[part.reduction_type]
                body.writeline(f"tl.store({self._workspace_pointer(part.index, 'r0_index')}, "
                               f"{reduce_fn}({part.acc}, 0)[None, :]{r0_mask})")
            return
        if not self.register_tiles:
            return
        body.writeline("r0_cols = tl.arange(0, R0_BLOCK)[None, :]")
        per_group = self.plan.group_tiles
        for part in self.partials:
            for tile in range(per_group):
                first = rewrites.own_tile(tile, per_group, self.plan.column_groups)
                cols = f"{first} * R0_BLOCK + r0_cols"
                mask = f", {cols} < r0_numel" if masked else ""
                body.writeline(f"tl.store({self._workspace_pointer(part.index, cols)}, "
                               f"{part.acc}_t{tile}{mask})")

    # -- loads ahead (codegen/prefetch.py) ---------------------------------------------
    def _write_next_block(self, body: Any, split: pf.RowLoads) -> None:
        """Loads of the next row block into `<var>_pf` (double buffering)."""
        x_tree = self.range_trees[0]
        constant = (self.create_constant_mask(x_tree) if self._has_constant_mask(x_tree)
                    else None)
        interleave = self.plan.segments if self.plan.interleaved_segments else 0
        for line in pf.next_block_lines(split, self.indexing_code.getvalue(), constant,
                                        self.row_limit, interleave):
            body.writeline(line)

    def _write_l2_prefetch(self, body: Any) -> None:
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

    def _workspace_pointer(self, index: int, cols: str) -> str:
        """Pointers to columns `cols` of partial `index` in this program's workspace row
        (the partials' three stores and the looped tiles' adds all address it)."""
        assert self.workspace is not None
        return self.workspace.pointer(self.row_program, index, cols, row_length="r0_numel")

    def _write_row_block_indices(self, body: Any) -> None:
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


class _PartialAccumulateOps(compat.WrapperHandler):
    """Ops handler for a column reduction's body run over (rows=x, cols=r0): its reduction
    becomes an accumulate into the kernel's fp32 accumulator; its store is deferred to the
    final step."""

    def __init__(self, inner: Any, kernel: MixOrderKernelBase, out_name: str) -> None:
        super().__init__(inner)
        self._kernel = kernel
        self._out_name = out_name

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str,
                  value: Any) -> Any:
        return self._kernel.add_partial(reduction_type, self._out_name, value)

    def store_reduction(self, name: str, index: sympy.Expr, value: Any) -> None:
        return None


@dataclasses.dataclass
class ColumnBody:
    """A column reduction's loop body with its row variables first, ready to be run over the
    fused kernel's (row, column) axes."""

    out_name: str
    reduction_type: str
    ranges: list[list[Any]]  # [row sizes, column sizes]
    body: Any  # LoopBody called as body(row_vars, col_vars)
    owner: Any  # SchedulerNode used as the kernel's current node
    segments: int = 1  # B of a segmented column reduction ([B, T, N] -> [B, N])


def column_body(col: Any, M: Any = None, N: Any = None) -> ColumnBody:
    """The column's body over the kernel's (row, column) axes; a segmented one (`M`, `N`:
    the kernel's sizes) with its sample and step taken from the row."""
    if col.unsplit is not None:
        buf = compat.computed_buffer_for(col.unsplit, col.out_name)
    else:
        buf = col.out_node.node
    (iter_sizes, red_sizes), body = compat.default_sizes_body(buf)
    if col.segments > 1:
        seg = reorder.segmented_body(body, iter_sizes, red_sizes, col.segments, M, N,
                                     col.interleaved)
        if seg is None:
            raise RuntimeError(f"{col.out_name}: segmented body does not split")
        swapped, ranges = seg
    else:
        swapped, ranges = reorder.rows_first_body(body, iter_sizes, red_sizes)
    return ColumnBody(col.final_name, col.reduction_type, ranges, swapped, col.out_node,
                      col.segments)


def _scheduled_nodes(kernel: Any, node_schedule: list[Any]) -> Iterator[Any]:
    """The scheduler nodes of an Inductor node schedule, each yielded inside the
    reduction on/off scope its markers call for."""
    with contextlib.ExitStack() as stack:
        for item in node_schedule:
            if item is DisableReduction:
                stack.enter_context(kernel.disable_reduction())
            elif item is EnableReduction:
                stack.close()
            else:
                yield item


class KernelAdapter:
    """How the fused kernel is built on one family of Triton schedulings: which kernel
    class, axes and launch config, and how a kernel's source is registered. This one is
    Inductor's own TritonScheduling (CUDA, XPU, CPU-Triton, and vendor schedulings that keep
    its codegen); torch_npu's lives in inductor_ext.targets.ascend.kernel."""

    name = "inductor"

    def prepare(self, node: Any, node_schedule: list[Any], columns: list[ColumnBody]
                ) -> list[Any]:
        """The node schedule the kernel is built from (and its nodes codegen'd in)."""
        return node_schedule

    def make_kernel(self, scheduling: Any, node: Any, node_schedule: list[Any],
                    columns: list[ColumnBody]) -> MixOrderKernelBase:
        plan: LaunchPlan = node.plan
        flavor = get_flavor(plan.target)
        features = SIMDKernelFeatures(node_schedule, node.M, node.N)
        fixed = {"XBLOCK": plan.block_m, **flavor.launch_options(plan)}
        if plan.column_tiled:
            fixed["R0_BLOCK"] = plan.r0_block
        kernel_cls = kernel_class_for(getattr(scheduling, "kernel_type", TritonKernel))
        return compat.make_kernel(
            lambda *a, **k: kernel_cls(*a, plan=plan, flavor=flavor, **k),
            {"x": node.M, "r0_": node.N}, features, fixed, persistent=not plan.column_tiled)

    def define_kernel(self, scheduling: Any, src_code: str, node_schedule: list[Any],
                      kernel: Any) -> str:
        """Register the source with the wrapper; returns the kernel's name."""
        return scheduling.define_kernel(src_code, node_schedule, kernel)


INDUCTOR_ADAPTER = KernelAdapter()


def codegen_mix_order(scheduling: Any, node: Any,
                      adapter: KernelAdapter = INDUCTOR_ADAPTER) -> None:
    """Emit the fused kernel for a MixOrderNode through a device's Triton scheduling."""
    from .. import metrics

    plan: LaunchPlan = node.plan
    sched = scheduling.scheduler
    inner_nodes = [n for n in node.inner_nodes if n.get_name() not in sched.removed_ops]
    node_schedule = scheduling.generate_node_schedule(inner_nodes, node.M, node.N)
    columns = [column_body(col, node.M, node.N) for col in node.columns]
    node_schedule = adapter.prepare(node, node_schedule, columns)
    kernel = adapter.make_kernel(scheduling, node, node_schedule, columns)
    K = len(columns)
    kernel.segments_of = {cb.out_name: cb.segments for cb in columns if cb.segments > 1}
    kernel.column_nodes = frozenset(n.get_name() for col in node.columns for n in col.absorbed)
    layout = Workspace(plan.programs, K, int(node.N), plan.accumulator_dtype)
    # Looped column-tiled kernels add into their workspace rows, so those start zeroed.
    kernel.workspace = layout.placed(*kernel.args.workspace(
        sympy.Integer(layout.numel), plan.looped_column_tiles, dtype=layout.dtype))

    with kernel:
        all_indexing: dict[Any, None] = {}
        for item in _scheduled_nodes(kernel, node_schedule):
            item.decide_inplace_update()
            index_vars = kernel.split_and_set_ranges(item.get_ranges())
            all_indexing.update(dict.fromkeys(item._body.indexing_from_args(index_vars).values()))
        for cb in columns:
            kernel_vars = kernel.split_and_set_ranges(cb.ranges)
            all_indexing.update(dict.fromkeys(cb.body.indexing_from_args(kernel_vars).values()))
        kernel.finalize_indexing(all_indexing.keys())

        for item in _scheduled_nodes(kernel, node_schedule):
            compat.prepare_body_for_codegen(item._body)
            item.codegen(kernel.split_and_set_ranges(item.get_ranges()))
        for cb in columns:
            compat.prepare_body_for_codegen(cb.body)
            kernel_vars = kernel.split_and_set_ranges(cb.ranges)
            handler = compat.simplify_indexing(
                _PartialAccumulateOps(V.get_ops_handler(), kernel, cb.out_name),
                compat.ranges_of(kernel_vars, cb.ranges))
            with V.set_ops_handler(handler), kernel.set_current_node(cb.owner):
                cb.body(*kernel_vars)

    assert len(kernel.partials) == K, "every column reduction became one partial"
    with V.set_kernel_handler(kernel):
        src_code = kernel.codegen_kernel()
    final_step = finalize.prepare(kernel, src_code)
    # Compiled before anything reaches the wrapper: a kernel that does not compile falls
    # back here (codegen/backend.py) instead of failing when the wrapper loads.
    precompile.compile_now(src_code)
    if final_step is not None:
        precompile.compile_now(final_step[0])
    kernel_name = adapter.define_kernel(scheduling, src_code, node_schedule, kernel)
    kernel.kernel_name = kernel_name
    kernel.finalize_launch = (None if final_step is None else
                              finalize.define(kernel, adapter, scheduling, node_schedule,
                                              *final_step))
    # Everything that can still fail runs before the first irrevocable wrapper line below,
    # so a failure here falls back cleanly to Inductor's own kernels.
    fusion_row = _fusion_row(node, kernel, kernel_name, src_code)

    for col in node.columns:
        for absorbed in col.absorbed:
            if absorbed is not col.out_node or col.cast is not None:
                V.graph.removed_buffers.add(absorbed.node.get_name())
    with V.set_kernel_handler(kernel):
        for snode in node.get_nodes():
            snode.mark_run()

    scheduling.codegen_comment(list(node.get_nodes()), kernel_name)
    kernel.call_kernel(kernel_name)
    V.graph.removed_buffers |= kernel.removed_buffers
    V.graph.inplaced_to_remove |= kernel.inplaced_to_remove
    scheduling.free_buffers_in_scheduler()
    metrics.record_kernel(fusion_row)
    metrics.record_columns(*node.column_counts()[1:])


def _fusion_row(node: Any, kernel: MixOrderKernelBase, kernel_name: str,
                src_code: str) -> dict[str, Any]:
    """The mix_order_fusion table row of one generated kernel."""
    plan: LaunchPlan = node.plan
    K = len(kernel.partials)
    assert kernel.workspace is not None
    ws_bytes = kernel.workspace.nbytes
    dtypes = sorted({str(V.graph.get_dtype(name)).replace("torch.", "")
                     for name in kernel.args.input_buffers})
    return {
        "graph_id": diagnostics.graph_id(),
        "kernel_name": kernel_name,
        "kernel_path": compat.kernel_path(src_code, kernel_name),
        "inner_node": "+".join(n.get_name() for n in node.inner_nodes),
        "outer_nodes": " ".join(col.out_name for col in node.columns),
        "M": node.M,
        "N": node.N,
        "input_dtypes": " ".join(dtypes),
        "num_partials": K,
        "target": plan.target,
        "programs": plan.programs,
        "block_m": plan.block_m,
        "split_size": plan.rows_per_program(node.shape.M_hint),
        "workspace_bytes": ws_bytes,
        "bytes_fused": node.shape.total_bytes + 2 * ws_bytes,
        "bytes_unfused": node.shape.unfused_bytes,
        "model_fuses": not node.verdict,
        "model_detail": node.verdict,
        "shape_info": json.dumps(node.shape.to_record(), sort_keys=True),
        **node.table_fields,
    }
