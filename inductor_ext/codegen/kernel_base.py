"""What every fused kernel shares, whatever Triton kernel class it is mixed into (Inductor's
or a vendor's): the plan, the partial accumulators, the workspace, the partials' folds and
stores, and the final step launched after the kernel.

The partials are written once here, as template methods; a kernel class supplies only the
text that differs between Triton kernel classes (tile shape, masks, the row fold, the
address of a workspace row's columns) through small hooks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import compat
from ..compat import IndentedBuffer, V, ir
from ..groups.combine import ATEN_REDUCE, COMBINE
from ..plan import LaunchPlan
from .flavor import TargetFlavor
from .workspace import Workspace

if TYPE_CHECKING:
    # Type checkers see the kernel class this is always mixed into (Inductor's TritonKernel
    # or a vendor subclass of it); at run time the mixin's only base stays `object`.
    from ..compat import TritonKernel as _KernelBase
else:
    _KernelBase = object


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


class MixOrderKernelBase(_KernelBase):
    """What every fused kernel carries, whatever Triton kernel class it is mixed into: the
    plan, the partial accumulators, the workspace, and the final step launched after it.
    Subclasses write the row loop in their base class's own terms and fill in the text
    hooks of the partials (`row_block_shape` ... `stored_columns`)."""

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
        self.finalize_launch: Callable[[], None] | None = None
        #: The column reductions' scheduler nodes: users of a buffer inside this kernel.
        self.column_nodes: frozenset[str] = frozenset()
        super().__init__(*args, **kwargs)

    def remove_kernel_local_buffers(self) -> None:
        """Inductor drops the store of a buffer whose every user runs in this kernel, but
        counts only nodes that store here; the column reductions, whose partials go to the
        workspace, are users here too. So a buffer the row side wrote only for a column
        (Qwen3's q_norm dy * x_hat) is handed over in registers and never written."""
        with compat.kernel_local_users(self.column_nodes):
            super().remove_kernel_local_buffers()

    @property
    def column_tiled(self) -> bool:
        return not self.persistent_reduction

    @property
    def register_tiles(self) -> int:
        """Static column tiles with partials in registers (0: looped, workspace adds)."""
        return self.plan.register_tiles

    @property
    def programs_per_config(self) -> bool:
        """The timed configs choose the row-program count (only the CUDA row loop's do)."""
        return False

    @property
    def adds_into_workspace(self) -> bool:
        """Looped column tiles: each tile's fold is added into the program's workspace row
        inside the loop, so there are no accumulators and no stores after it."""
        return self.column_tiled and not self.register_tiles

    @property
    def accumulates_whole_blocks(self) -> bool:
        """The accumulators hold whole row blocks, folded over their rows only when they
        are stored; False: each block's rows are folded as it is added."""
        return False

    @property
    def row_length(self) -> int:
        """N: the row reduction's length, the column count of every partial."""
        return int(self.features.reduction_numel)

    @property
    def acc_type(self) -> str:
        """Triton dtype of the partial accumulators and the workspace."""
        return compat.triton_type(self.plan.accumulator_dtype)

    def accumulated_workspaces(self) -> list[str]:
        """The workspace arguments this kernel adds into (looped column tiles: zeroed per
        call, then read-modify-written). An autotuner must time configs on clones of them,
        or each timing launch adds into the live partials."""
        if self.workspace is None or not self.plan.looped_column_tiles:
            return []
        return [self.workspace.inner]

    # -- text hooks: what differs between the Triton kernel classes ----------------------
    def row_block_shape(self) -> str:
        """Text of one row block's tile shape (rows and columns)."""
        raise NotImplementedError

    def folded_shape(self) -> str:
        """Text of a row block's shape with its rows folded (one row)."""
        raise NotImplementedError

    def fold_rows(self, reduction_type: str, tile: str) -> str:
        """Text of `tile` reduced over its rows, in `folded_shape`."""
        raise NotImplementedError

    def accumulate_mask(self) -> str:
        """Text of the mask of the elements a partial takes from a block ("" for none)."""
        raise NotImplementedError

    def loop_tile_columns(self) -> tuple[str, str]:
        """(columns, mask) text of the column tile the loop is at, where looped tiles add
        into the workspace ("" mask for none)."""
        raise NotImplementedError

    def workspace_columns(self, index: int, columns: str, row: str | None = None) -> str:
        """Text of the pointers to columns `columns` of partial `index` in the workspace
        row of program `row` (None: this program's)."""
        raise NotImplementedError

    def accumulator_names(self, part: PartialAccumulator) -> list[str]:
        """The variables of one partial's accumulator (one per tile it is kept in)."""
        return [part.acc]

    def store_columns_setup(self) -> list[str]:
        """Lines before the workspace stores that name the columns they write."""
        return []

    def stored_columns(self, tile: int) -> tuple[str, str]:
        """(columns, mask) text where accumulator `tile` of a partial is stored ("" mask
        for none)."""
        raise NotImplementedError

    # -- the partials, written once for every kernel class -------------------------------
    def add_partial(self, reduction_type: str, out_name: str, value: Any) -> str:
        """Fold `value` (one column reduction's input over the current rows) into its
        partial; returns the accumulator's name."""
        index = len(self.partials)
        acc = f"_mo_acc{index}"
        self.partials.append(PartialAccumulator(index, reduction_type, out_name, acc,
                                                self.segments_of.get(out_name, 1)))
        identity, combine = COMBINE[reduction_type]
        tile = f"tl.broadcast_to({value}, {self.row_block_shape()}).to({self.acc_type})"
        mask = self.accumulate_mask()
        if mask:
            tile = f"tl.where({mask}, {tile}, {identity})"
        if self.adds_into_workspace:
            # The row is walked in column tiles: add this tile's column sums into the
            # program's own workspace row (zeroed at launch; no other program touches it).
            assert reduction_type == "sum", "column-tiled partials are sums"
            ptr = f"_mo_ws{index}"
            columns, col_mask = self.loop_tile_columns()
            load_mask = f", {col_mask}, other=0.0" if col_mask else ""
            store_mask = f", {col_mask}" if col_mask else ""
            self.compute.writeline(f"{ptr} = {self.workspace_columns(index, columns)}")
            self.compute.writeline(f"tl.store({ptr}, tl.load({ptr}{load_mask}) + "
                                   f"{self.fold_rows(reduction_type, tile)}{store_mask})")
        elif self.accumulates_whole_blocks:
            self.compute.writeline(f"{acc} = {combine.format(acc=acc, val=tile)}")
        else:
            folded = self.fold_rows(reduction_type, tile)
            self.compute.writeline(f"{acc} = {combine.format(acc=acc, val=folded)}")
        return acc

    def _write_accumulators(self, body: IndentedBuffer) -> None:
        """The partials' identities before the row loop: whole row blocks, or blocks with
        their rows folded (none when the tiles add into the workspace)."""
        if self.adds_into_workspace:
            return
        shape = self.row_block_shape() if self.accumulates_whole_blocks else self.folded_shape()
        for part in self.partials:
            identity = COMBINE[part.reduction_type][0]
            for name in self.accumulator_names(part):
                body.writeline(f"{name} = tl.full({shape}, {identity}, {self.acc_type})")

    def _write_workspace_stores(self, body: IndentedBuffer) -> None:
        """After the row loop, the partials into the program's workspace row (whole blocks
        folded over their rows first); looped tiles have added theirs inside the loop."""
        if self.adds_into_workspace or not self.partials:
            return
        for line in self.store_columns_setup():
            body.writeline(line)

        def folded(part: PartialAccumulator, name: str) -> str:
            return (self.fold_rows(part.reduction_type, name)
                    if self.accumulates_whole_blocks else name)

        for line in self.workspace_row_stores(folded):
            body.writeline(line)

    def workspace_row_stores(self, value_of: Callable[[PartialAccumulator, str], str],
                             row: str | None = None) -> list[str]:
        """One store per partial and accumulator tile into the workspace row of program
        `row` (None: this program's): `value_of(partial, accumulator name)` at the tile's
        columns."""
        lines = []
        for part in self.partials:
            for tile, name in enumerate(self.accumulator_names(part)):
                columns, mask = self.stored_columns(tile)
                lines.append(f"tl.store({self.workspace_columns(part.index, columns, row)}, "
                             f"{value_of(part, name)}{f', {mask}' if mask else ''})")
        return lines

    # -- launch: the fused kernel, then the tiny final step -----------------------------
    def call_kernel(self, name: str, node: ir.IRNode | None = None,
                    deallocate_ws: bool = True) -> None:
        super().call_kernel(name, node, deallocate_ws=False)
        if self.finalize_launch is not None:
            self.finalize_launch()
        else:
            self._write_aten_final_step()
        if deallocate_ws:
            self.deallocate_workspaces()

    def _write_aten_final_step(self) -> None:
        """Fallback final step: one ATen reduce over the workspace rows per output."""
        wrapper = V.graph.wrapper_code
        assert self.workspace is not None
        for part in self.partials:
            final = ATEN_REDUCE[part.reduction_type]
            rows, dim = self.workspace.aten_rows(part.index, part.segments)
            wrapper.writeline(
                f"{part.out_name}.copy_({rows}.{final}({dim}).view({part.out_name}.shape))")
