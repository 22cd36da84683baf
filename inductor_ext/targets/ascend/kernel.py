"""The fused kernel on torch_npu's own Triton kernel class (NPUIndexTritonKernel, the kernel
of torch_npu's default backend), and how torch_npu's scheduling builds and registers it.

torch_npu's kernel already walks each program's rows in a loop: program p owns rows
[p * X0BLOCK, (p + 1) * X0BLOCK) and visits them X0BLOCK_SUB at a time
(``for loop_x0 in range(loops_x0)``), with the whole row (persistent, R1BLOCK_SUB = N) or a
loop over column tiles inside. The mixin keeps all of that codegen and adds what mix-order
needs:

- ``X0BLOCK`` is not a runtime argument picked by torch_npu's autotuner but the rows each
  of the plan's fixed ``programs`` owns, computed in the kernel from ``x0_numel`` and the
  X0BLOCK_SUB of the config, so the grid and the workspace rows stay fixed;
- one column partial per column reduction: the rows of each block are folded in the loop
  (a [1, R1BLOCK_SUB] accumulator per partial), and the program's workspace row is stored
  after the loop; with column tiles each tile's fold is added into the workspace row;
- the launch metadata through ``create_inductor_meta``: ``FixedGrid`` with the plan's
  programs, no runtime block arguments, the plan and the configs (X0BLOCK_SUB, multibuffer,
  compile_mode) for our decorator, which hands them to torch_npu's ``cached_autotune``.

The column reductions' bodies are put in ``features.node_schedule`` (rows-first copies of
their scheduler nodes), so torch_npu's index analysis (``decide_codegen_dims_in_kernel``)
decides axes, tiling and index rewriting with them in view.
"""

from __future__ import annotations

import copy
import functools
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import sympy

from ... import compat
from ...codegen import rewrites
from ...codegen.adapter import KernelAdapter
from ...codegen.column_body import ColumnBody
from ...codegen.flavor import TargetFlavor, get_flavor
from ...codegen.kernel_base import MixOrderKernelBase
from ...compat import (
    DisableReduction,
    EnableReduction,
    IndentedBuffer,
    LoopBody,
    SchedulerNode,
    TritonScheduling,
    V,
)
from ...groups import bodies
from ...groups.column import size_hint
from ...groups.combine import TL_REDUCE
from ...groups.node import MixOrderNode
from ...plan import LaunchPlan
from ...runtime import autotune
from . import npu, torch_npu_seams

#: The decorator our kernels carry instead of torch_npu's (targets/ascend/npu_autotune.py).
DECORATOR = "npu_mix_order_autotune"
_DECORATOR_IMPORT = f"from inductor_ext.targets.ascend.npu_autotune import {DECORATOR}"
#: The scheduling family of torch_npu's backend (codegen.families), and whose text the
#: `npu_decorator` rewrite edits.
SCHEDULING_NAME = "torch_npu"


class NpuAxis(Protocol):
    """What the mixin reads and sets on torch_npu's axis entries (its range tree nodes)."""

    name: str
    prefix: str
    expr: sympy.Expr
    length: sympy.Expr
    divisor: sympy.Expr
    is_split_axis: bool
    is_tiling_axis: bool
    is_no_loop_axis: bool
    split_order: int
    #: Writes the axis's lines before the loops (offset, base, loop count) into a buffer.
    codegen_header: Callable[[IndentedBuffer], None]

    def symbol(self) -> sympy.Symbol: ...

    def get_axis_direction(self) -> Any: ...  # torch_npu's AxisDirection (untyped)

    def codegen_index(self, direction: Any) -> str: ...


class NpuMixOrderKernelMixin(MixOrderKernelBase):
    """Mixed into torch_npu's NPUIndexTritonKernel (see the module docstring). The partials'
    folds, workspace adds and stores are the base's; this class supplies their text in
    torch_npu's axes (tile dims in its order, its masks, a constant-N workspace row)."""

    #: Set by `_fused_axes`: the row and the column axes of torch_npu's analysis.
    row_axes: list[NpuAxis]
    col_axes: list[NpuAxis]
    #: Set by `_fused_axes`: the row axis counting the samples of a segmented plan, if any.
    sample_axis: NpuAxis | None

    if TYPE_CHECKING:
        # Set by torch_npu's NPUIndexTritonKernel, which is untyped (not installed for type
        # checking): what this mixin reads of it.
        sorted_axis: list[NpuAxis]
        split_axis: list[NpuAxis]
        tiling_axis: list[NpuAxis]
        golden_var_list: list[sympy.Symbol]
        vectorized_welford_axis: NpuAxis | None
        npu_kernel_type: Any  # torch_npu's NPUKernelType enum
        first_node: bool

        def select_golden_varlist(self) -> None: ...

        def is_unified_simt_kernel(self) -> bool: ...

    def __init__(self, *args: Any, plan: LaunchPlan, flavor: TargetFlavor,
                 **kwargs: Any) -> None:
        super().__init__(*args, plan=plan, flavor=flavor, **kwargs)
        if self.sorted_axis:  # else later: torch_npu_seams.npu_decide_axes (< 2.13)
            self.row_axis, self.col_axis = self._fused_axes()

    # -- the axes torch_npu's analysis chose --------------------------------------------
    def _fused_axes(self) -> tuple[NpuAxis, NpuAxis]:
        """(row entry split across programs, column entry); also sets `row_axes` and
        `col_axes`. torch_npu gives the kernel one row axis and one column axis when the
        nodes' indices are over one row and one column variable; layouts whose row (or
        column) dimensions do not join (Qwen3's q/k norms: dy read as [B, H, T, D] for
        rows [B, T, H], RoPE's cos per t, inv_freq per d % (D/2)) keep several, the
        sub-axes of the x (r) root. Then the longest row axis is the one split across the
        fixed grid's programs and the other row axes are walked whole inside each program
        (every row still visited once, by one program), the tile has a dimension per axis
        and a partial folds all the row dimensions. Several column axes need a persistent
        row. Anything else is declined (the hook falls back to torch_npu's kernels)."""
        rows = [a for a in self.sorted_axis if a.prefix != "r"]
        cols = [a for a in self.sorted_axis if a.prefix == "r"]
        names = [a.name for a in self.sorted_axis]
        if not rows or not cols or (len(cols) > 1 and not (
                self.persistent_reduction
                and all(_is_static(a.length) and _is_static(a.divisor) for a in cols))):
            raise NotImplementedError(
                f"torch_npu laid the fused kernel out on axes {names}; row and column axes "
                "are needed, several column axes only with a static persistent row")
        for side, axes, numel in (("row", rows, self.numels["x"]),
                                  ("column", cols, self.numels["r"])):
            if not _decompose(axes, numel):
                raise NotImplementedError(
                    f"torch_npu's {side} axes {[(a.name, str(a.expr)) for a in axes]} do "
                    f"not split the {side}s ({numel}) into disjoint dimensions")
        if (any(a.is_split_axis for a in cols) or not all(a.is_tiling_axis for a in rows + cols)
                or (len(rows) == 1 and (list(self.split_axis) != rows
                                        or torch_npu_seams.npu_axis_is_no_loop(rows[0])))):
            raise NotImplementedError(
                f"torch_npu split {[a.name for a in self.split_axis]} and tiled "
                f"{[a.name for a in self.tiling_axis]}; the fused kernel needs the row axes "
                f"{[a.name for a in rows]} split or looped and every axis tiled")
        # Kernel types (vectorized Welford, SIMT) exist from torch_npu 2.13.0 on.
        if (getattr(self, "vectorized_welford_axis", None) is not None
                or getattr(self, "is_unified_simt_kernel", lambda: False)()):
            raise NotImplementedError(f"torch_npu kernel type {self.npu_kernel_type} "
                                      "(vectorized Welford / SIMT) is not supported")
        self.row_axes, self.col_axes = rows, cols
        self.sample_axis = self._sample_axis(rows)
        split = rows[0]
        if len(rows) > 1:
            split = max(rows, key=lambda a: _hint(a.length))  # the first of the longest
            if self.sample_axis is not None:  # programs split a sample's T rows
                split = next(a for a in rows if a is not self.sample_axis)
                self.sample_axis.is_no_loop_axis = False
            for axis in rows:  # one split axis: the fixed grid is one-dimensional
                axis.is_split_axis = axis is split
            split.is_no_loop_axis = False
            split.split_order = 0
            self.split_axis[:] = [split]
        return split, cols[0]

    def _sample_axis(self, rows: list[NpuAxis]) -> NpuAxis | None:
        """With B > 1 samples (plan.segments) over two row axes [B, T] (torch_npu splits
        the rows so where the row side reads a per-sample tensor, adaLN's scale[b]): the
        one of length B and stride T. Each program then takes one sample on it, and its
        share of that sample's rows on the other (`_segmented_row_header`)."""
        S = self.plan.segments
        if S <= 1 or len(rows) != 2:
            return None
        known = V.graph.sizevars.statically_known_equals
        T = sympy.simplify(self.numels["x"] / S)
        for sample, steps in (rows, rows[::-1]):
            if (known(sample.length, S) and known(sample.divisor, T)
                    and known(steps.length, T) and known(steps.divisor, 1)):
                return sample
        return None

    def _block(self, axis: NpuAxis, sub: bool = True) -> str:
        return f"{axis.name.upper()}BLOCK" + ("_SUB" if sub else "")

    def _program_id(self) -> str:
        cast = ".to(tl.int64)" if self.index_dtype == "tl.int64" else ""
        return f"tl.program_id(0){cast}"

    def _tile_axes(self) -> list[NpuAxis]:
        """The tile's axes, one per dimension, in the order torch_npu gives its index
        variables (its golden variable order, as `get_axis_direction` reads it)."""
        if not self.golden_var_list:
            self.select_golden_varlist()
        by_symbol = {a.symbol(): a for a in self.tiling_axis}
        axes = [by_symbol[v] for v in reversed(self.golden_var_list) if v in by_symbol]
        if sorted(a.name for a in axes) != sorted(a.name for a in self.row_axes + self.col_axes):
            raise NotImplementedError(f"unexpected tile axes {[a.name for a in axes]}")
        return axes

    def _dense(self) -> list[str]:
        """Tile dims in torch_npu's order (its golden variable order decides which of the
        row and column axes comes first)."""
        return [self._block(a) for a in self._tile_axes()]

    def _row_dims(self) -> list[int]:
        row_names = {a.name for a in self.row_axes}
        return [i for i, a in enumerate(self._tile_axes()) if a.name in row_names]

    def _looped_rows(self) -> list[NpuAxis]:
        """Row axes whose block is a launch config's (a static no-loop axis has its
        length written by torch_npu)."""
        return [a for a in self.row_axes
                if not (torch_npu_seams.npu_axis_is_no_loop(a) and _is_static(a.length))]

    def _row_blocks(self, block_m: int) -> dict[str, int]:
        """The plan's `block_m` rows per block as each row axis's X*BLOCK_SUB: one axis
        takes them all. Several share them: the split axis at most its length over the
        programs (each program gets blocks of it), the others innermost first (powers of
        two up to each axis's length), so a block holds at most `block_m` rows beside
        static no-loop axes (torch_npu keeps those within 4 KiB)."""
        looped = self._looped_rows()
        if len(self.row_axes) == 1:
            return {self._block(looped[0]): block_m}
        if self.sample_axis is not None:  # one sample per program, its rows in blocks
            return {self._block(self.row_axis): block_m, self._block(self.sample_axis): 1}
        whole = functools.reduce(lambda n, a: n * _hint(a.length),
                                 [a for a in self.row_axes if a not in looped], 1)
        left = max(1, block_m // whole)
        per_program = -(-_hint(self.row_axis.length) // self.plan.programs)
        split = max(1, min(left, 1 << (per_program.bit_length() - 1)))
        out: dict[str, int] = {self._block(self.row_axis): split}
        left = max(1, left // split)
        for axis in reversed([a for a in self._tile_axes() if a in looped]):
            if axis is self.row_axis:
                continue
            sub = max(1, min(left, _next_pow2(_hint(axis.length))))
            out[self._block(axis)] = sub
            left = max(1, left // sub)
        return out

    # -- signature, launch metadata, decorator -----------------------------------------
    def add_autotune_args(self, argdefs: list[Any], signature: list[Any] | None = None,
                          triton_meta_signature: dict[str, Any] | None = None) -> None:
        """Only the block constexprs: X0BLOCK is computed in the kernel (fixed grid), a
        persistent row's R1BLOCK_SUB is written as a constant by torch_npu (so is a static
        no-loop row axis's block)."""
        for axis in self._looped_rows():
            argdefs.append(compat.ArgName(self._block(axis), is_constexpr=True))
        if self.column_tiled:
            argdefs.append(compat.ArgName(self._block(self.col_axis), is_constexpr=True))

    def codegen_static_numels(self, code: IndentedBuffer) -> None:
        super().codegen_static_numels(code)
        sub = self._block(self.row_axis)
        # Segmented: the row axis is a sample's T rows, shared by its programs.
        blocks = f"({self.row_axis.name}_numel + {sub} - 1) // {sub}"
        P = self.plan.programs_per_segment
        code.writeline(f"{self._block(self.row_axis, sub=False)} = "
                       f"(({blocks} + {P - 1}) // {P}) * {sub}")

    def _segmented_row_header(self, code: IndentedBuffer) -> None:
        """The split row axis's header (offset, base, loop count: torch_npu's names) when
        the programs walk one sample each (plan.segments > 1): the axis is a sample's T
        rows (the sample axis's header picks the sample), program p = sample * per + j
        starts at j's share of them, and its X0BLOCK is cut at T (0 for a program left
        without rows), so torch_npu's row mask (x0 < X0BLOCK + x0_offset) and its loop
        count keep it inside its share; the partials it stores at workspace row p are then
        that sample's alone."""
        axis = self.row_axis
        if (not axis.is_split_axis or torch_npu_seams.npu_axis_is_no_loop(axis)
                or getattr(axis, "is_sub_kernel", False)
                or getattr(axis, "is_vectorized_split", False)):
            raise NotImplementedError(f"segmented rows on torch_npu's axis {axis.name} "
                                      "(not a plain split axis)")
        block, sub = self._block(axis, sub=False), self._block(axis)
        pid, per = self._program_id(), self.plan.programs_per_segment
        cast = ".to(tl.int64)" if self.index_dtype == "tl.int64" else ""
        offset = f"{axis.symbol()}_offset"
        code.writelines([
            f"{offset} = ({pid} % {per}) * {block}",
            f"{block} = tl.maximum(tl.minimum({block}, {axis.name}_numel - {offset}), 0)",
            f"base_{axis.name}= tl.arange(0, {sub}){cast}",
            f"loops_{axis.name} = ({block} + {sub} - 1) // {sub}",
        ])

    def _sample_header(self, code: IndentedBuffer) -> None:
        """The sample axis's header: its one-row block (X*BLOCK_SUB = 1) is the program's
        sample, walked once."""
        axis = self.sample_axis
        assert axis is not None
        cast = ".to(tl.int64)" if self.index_dtype == "tl.int64" else ""
        sample = f"{self._program_id()} // {self.plan.programs_per_segment}"
        code.writelines([f"base_{axis.name}= {sample} + tl.arange(0, {self._block(axis)}){cast}",
                         f"loops_{axis.name} = 1"])

    def create_inductor_meta(self) -> dict[str, Any]:
        meta = dict(super().create_inductor_meta())  # type: ignore[misc]
        if not hasattr(self, "row_axis"):  # torch_npu < 2.13's __init__, before its analysis
            return meta
        meta.update({
            "grid_type": torch_npu_seams.npu_fixed_grid_type(),
            "fixed_grid": [str(self.plan.programs), "1", "1"],
            "runtime_block_arg_names": (),
            "group_enabled": False,
            autotune.PLAN_KEY: self.plan.to_meta(),
            autotune.CONFIGS_KEY: self.launch_configs(),
            # torch_npu's autotuner launches every config on the call's own arguments
            # before the real launch, cloning only these: a workspace the kernel adds into
            # (zeroed per call) must be one, as Inductor marks it in its own kernels.
            "mutated_arg_names": sorted({*meta.get("mutated_arg_names", ()),
                                         *self.accumulated_workspaces()}),
        })
        return meta

    def compilable_configs(self) -> list[dict[str, Any]]:
        """The plan's configs torch_npu will compile as planned: where it does not pass a
        config's multibuffer on (torch_npu_seams.npu_compiles_config_multibuffer), only those whose
        multibuffer is triton-ascend's default (on, but off on Ascend950), since the UB
        estimate of the others does not hold. None left: NotImplementedError (fallback)."""
        configs = [dict(c) for c in self.plan.configs]
        if torch_npu_seams.npu_compiles_config_multibuffer():
            return configs
        default = not npu.soc_facts().ascend950
        kept = [c for c in configs if bool(c["multibuffer"]) == default]
        if not kept:
            raise NotImplementedError(
                f"this torch_npu compiles every config with multibuffer={default}, and the "
                "plan has no such config (none fits the UB that way)")
        return kept

    def launch_configs(self) -> list[dict[str, Any]]:
        """The plan's configs in this kernel's names, for torch_npu's autotuner."""
        # The kernel type's compile mode: torch_npu 2.13.0 on (none before).
        kind = getattr(self, "npu_kernel_type", None)
        mode = {"compile_mode": kind.compile_mode()} if kind is not None else {}
        out = []
        # Configs differ in summation order: one under Inductor's deterministic mode
        # (torch_npu's autotuner itself keeps the first under deterministic algorithms).
        configs = self.compilable_configs()
        configs = configs[:1] if compat.deterministic_mode() else configs
        for config in configs:
            cfg = dict(config)
            named: dict[str, Any] = dict(self._row_blocks(cfg["block_m"]))
            if "cols" in cfg:
                named[self._block(self.col_axis)] = cfg["cols"]
            named.update(multibuffer=bool(cfg["multibuffer"]), **mode)
            out.append(named)
        return out

    @classmethod
    # Inductor's own is typed as its lru_cache wrapper, which no plain method matches.
    def gen_common_triton_imports(cls) -> str:  # type: ignore[override]
        return super().gen_common_triton_imports() + _DECORATOR_IMPORT + "\n"

    def codegen_kernel(self, name: str | None = None) -> str:
        # torch_npu's codegen_kernel flushes the last buffers into `body` and reads it; the
        # workspace stores follow that last flush, so it is done here first, once every
        # node is in (torch_npu's own call then finds nothing left to flush).
        self.codegen_body()
        self._write_workspace_stores(self.body)
        src = super().codegen_kernel(name)
        return use_mix_order_decorator(src, self._get_heuristic())

    # -- the partials' text (written by MixOrderKernelBase) ------------------------------
    def row_block_shape(self) -> str:
        return f"[{', '.join(self._dense())}]"

    def folded_shape(self) -> str:
        """The tile with its rows folded: [1, R1BLOCK_SUB] (or transposed; a 1 for every
        row dimension)."""
        dense = self._dense()
        for dim in self._row_dims():
            dense[dim] = "1"
        return f"[{', '.join(dense)}]"

    def fold_rows(self, reduction_type: str, tile: str) -> str:
        """`tile` reduced over every row dimension (the last first), reshaped to
        `folded_shape` (a reduction drops the dimension)."""
        for dim in sorted(self._row_dims(), reverse=True):
            tile = f"{TL_REDUCE[reduction_type]}({tile}, {dim})"
        return f"{tile}.reshape({self.folded_shape()[1:-1]})"

    def accumulate_mask(self) -> str:
        """The masks torch_npu writes for the row axes (none for a static no-loop axis,
        whose block is its whole length), and the column tile's."""
        masks = [f"{a.name}_mask" for a in self.row_axes
                 if not (torch_npu_seams.npu_axis_is_no_loop(a) and _is_static(a.length))]
        if self.column_tiled:
            masks.append(f"{self.col_axis.name}_mask")
        return " & ".join(masks)

    def loop_tile_columns(self) -> tuple[str, str]:
        return self.col_axis.name, f"{self.col_axis.name}_mask"

    def workspace_columns(self, index: int, columns: str, row: str | None = None) -> str:
        """Columns `columns` past the start of partial `index`'s row of program `row`
        (None: this program's; N a constant)."""
        assert self.workspace is not None
        return f"{self.workspace.pointer(row or self._program_id(), index)} + {columns}"

    def store_columns_setup(self) -> list[str]:
        """`_mo_cols`: a persistent row's columns; with several column axes (sub-axes of
        the row), column = sum of axis * divisor, each within its length."""
        index = {a.name: a.codegen_index(a.get_axis_direction()) for a in self.col_axes}
        if len(self.col_axes) == 1:
            return [f"_mo_cols = {index[self.col_axis.name]}"]
        in_range = " & ".join(f"(({index[a.name]}) < {a.name}_numel)" for a in self.col_axes)
        cols = " + ".join(f"({index[a.name]}) * {a.divisor}" for a in self.col_axes)
        return [f"_mo_cols_mask = {in_range}", f"_mo_cols = {cols}"]

    def stored_columns(self, tile: int) -> tuple[str, str]:
        if len(self.col_axes) == 1:
            return "_mo_cols", f"_mo_cols < {self.col_axis.name}_numel"
        return "_mo_cols", "_mo_cols_mask"

    def codegen_body(self) -> None:
        """The accumulators go before torch_npu's row loop, written at its first flush."""
        if self.first_node and (self.loads or self.compute or self.stores):
            self._write_accumulators(self.body)
            if self.plan.segments > 1:  # torch_npu writes the axes' headers next
                self.row_axis.codegen_header = self._segmented_row_header
                if self.sample_axis is not None:
                    self.sample_axis.codegen_header = self._sample_header
        super().codegen_body()


@rewrites.register("npu_decorator",
                   "one `@triton_heuristics.<heuristic>(` line and our decorator's import "
                   "(torch_npu's NPUIndexTritonKernel.codegen_kernel)", required=True,
                   backend=SCHEDULING_NAME)
def _npu_decorator(src: str, heuristic: str, decorator: str, decorator_import: str) -> str:
    """Our decorator in place of torch_npu's one on the kernel: its codegen_kernel writes
    the heuristic's name inline, so there is no hook to emit ours. The import is emitted
    by the kernel class itself."""
    for prefix in torch_npu_seams.npu_decorator_prefixes():  # the module's name by release
        expected = f"{prefix}{heuristic}("
        if src.count(expected) == 1 and decorator_import in src:
            return src.replace(expected, f"@{decorator}(")
    return src


def use_mix_order_decorator(src: str, heuristic: str) -> str:
    """Our decorator in place of torch_npu's one on the kernel (the only edit of torch_npu's
    output, the `npu_decorator` rewrite: its codegen_kernel writes the heuristic's name
    inline). A kernel without exactly one such line raises RewriteMissed (a fallback)."""
    return rewrites.apply("npu_decorator", src, heuristic, DECORATOR, _DECORATOR_IMPORT)


@functools.cache
def kernel_class_for(base: type) -> type:
    """The fused-kernel class on torch_npu's kernel class `base`."""
    return type(f"MixOrder{base.__name__}", (NpuMixOrderKernelMixin, base), {})


def _with_body(snode: SchedulerNode, body: LoopBody, ranges: list[list[sympy.Expr]]
               ) -> SchedulerNode:
    """A copy of a scheduler node running `body` over `ranges` (the node itself, its
    buffers and dependencies are shared; only what the kernel walks differs)."""
    entry = copy.copy(snode)
    entry._body = body
    entry._sizes = tuple(ranges)
    return entry


def _one_var_per_axis(snode: SchedulerNode, M: sympy.Expr, N: sympy.Expr) -> SchedulerNode:
    """The node, or a copy whose body has one row and one column variable where its
    indices allow (bodies.flat_rows_body): torch_npu gives every body variable an axis
    of its own; dimensions that do not join stay the kernel's sub-axes."""
    flat = bodies.flat_rows_body(snode._body, snode.get_ranges(), M, N)
    return snode if flat is None else _with_body(snode, *flat)


def _hint(expr: int | sympy.Expr) -> int:
    return int(expr) if isinstance(expr, (int, sympy.Integer)) else size_hint(expr)


def _is_static(expr: sympy.Expr) -> bool:
    return isinstance(V.graph.sizevars.simplify(expr), (int, sympy.Integer))


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _decompose(axes: list[NpuAxis], numel: sympy.Expr) -> bool:
    """Whether the entries `axes` of one root split its index into disjoint dimensions
    (index = sum of axis * divisor, each divisor the product of the lengths below it),
    so that every row (column) is one point of the axes."""
    known = V.graph.sizevars.statically_known_equals
    stride: sympy.Expr = sympy.Integer(1)
    for axis in sorted(axes, key=lambda a: _hint(a.divisor)):
        if not known(axis.divisor, stride):
            return False
        stride = stride * axis.length
    return bool(known(stride, numel))


class NpuKernelAdapter(KernelAdapter):
    """Builds the fused kernel through torch_npu's NPUTritonScheduling."""

    name = "torch_npu"

    def prepare(self, node: MixOrderNode, node_schedule: list[Any], columns: list[ColumnBody]
                ) -> list[Any]:
        """Rows and columns as one variable each where the indices join (otherwise the
        node's own dimensions, which torch_npu makes sub-axes), for the row reduction's
        nodes and the column bodies (whose node copies join the schedule torch_npu
        analyses)."""
        schedule = [item if item in (DisableReduction, EnableReduction)
                    else _one_var_per_axis(item, node.M, node.N) for item in node_schedule]
        for cb in columns:
            flat = bodies.flat_rows_body(cb.body, cb.ranges, node.M, node.N)
            if flat is not None:
                cb.body, cb.ranges = flat
            cb.owner = _with_body(cb.owner, cb.body, cb.ranges)
        return schedule

    def make_kernel(self, scheduling: Any, node: MixOrderNode, node_schedule: list[Any],
                    columns: list[ColumnBody]) -> MixOrderKernelBase:
        plan: LaunchPlan = node.plan
        features_mod = importlib.import_module("torch_npu._inductor.codegen.npu_kernel_features")
        analysed = [*node_schedule, *(cb.owner for cb in columns)]
        features = features_mod.NPUKernelFeatures(analysed, node.M, node.N)
        kernel_cls = kernel_class_for(scheduling.kernel_type)
        kernel = kernel_cls({"x": node.M, "r": node.N}, features=features,
                            override_persistent_reduction=not plan.column_tiled,
                            plan=plan, flavor=get_flavor(plan.target))
        if not hasattr(kernel, "row_axis"):
            torch_npu_seams.npu_decide_axes(scheduling, analysed, kernel)
            kernel.row_axis, kernel.col_axis = kernel._fused_axes()
        kernel.compilable_configs()  # declines before codegen when none compiles as planned
        if plan.segments > 1 and kernel.sample_axis is None:
            # A segmented partial's programs each hold rows of one sample: torch_npu must
            # have split the rows into a sample axis and a T axis (it does where the row
            # side reads a per-sample tensor, adaLN's scale[b]).
            raise NotImplementedError("a segmented column reduction over row axes "
                                      f"{[a.name for a in kernel.row_axes]}, none of "
                                      f"{plan.segments} samples of stride M / B")
        if plan.interleaved_segments:
            # Sample b's rows are b, b + B, ...: torch_npu's row loop walks runs of rows.
            raise NotImplementedError("interleaved samples (a split row's pieces) on "
                                      "torch_npu's row loop")
        return kernel

    def define_kernel(self, scheduling: Any, src_code: str, node_schedule: list[Any],
                      kernel: MixOrderKernelBase) -> str:
        """torch_npu's front-end check first (triton-ascend parses the kernel, as for its
        own kernels; a failure falls back), then its define_kernel, which returns
        (name, source) and keys the wrapper's cache by (source, graph hash)."""
        torch_npu_seams.npu_check_frontend(scheduling, src_code)
        name, _ = scheduling.define_kernel(src_code, node_schedule, kernel, None)
        return name


ADAPTER = NpuKernelAdapter()


def adapter_for(scheduling: TritonScheduling) -> KernelAdapter | None:
    """The adapter for a device's Triton scheduling, when it is torch_npu's."""
    return ADAPTER if npu.backend_of(scheduling) in npu.SUPPORTED_BACKENDS else None
