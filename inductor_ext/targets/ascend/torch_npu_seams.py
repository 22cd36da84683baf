"""Where torch_npu's default Inductor backend differs between the releases the Ascend
target supports (2.11.0.post3 - 2.14.0), and the torch_npu names the target reads.

torch_npu is never imported here (it needs CANN): its modules are read from sys.modules,
where the generated kernel module (or the backend's registration) put them. The rest of
the package reaches torch_npu only through this folder."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

#: torch_npu's module of Triton heuristics (kernel decorators, cached_autotune,
#: NPUCachingAutotuner) -> the name its generated decorator line uses for it:
#: runtime/triton_heuristics from 2.13.0 on, npu_triton_heuristics in 2.11.0.post3 and
#: 2.12.0.post3 (where `_inductor.runtime` is a module).
NPU_HEURISTICS_MODULES = {"torch_npu._inductor.runtime.triton_heuristics": "triton_heuristics",
                          "torch_npu._inductor.npu_triton_heuristics": "npu_triton_heuristics"}


def npu_heuristics() -> ModuleType:
    """torch_npu's loaded heuristics module (a kernel module imports it before it runs)."""
    for name in NPU_HEURISTICS_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            return module
    raise RuntimeError(f"none of torch_npu's heuristics modules {list(NPU_HEURISTICS_MODULES)} "
                       "is loaded")


def npu_decorator_prefixes() -> tuple[str, ...]:
    """How torch_npu's NPUIndexTritonKernel.codegen_kernel starts its decorator line, per
    release (`@triton_heuristics.` from 2.13.0, `@npu_triton_heuristics.` before)."""
    return tuple(f"@{alias}." for alias in NPU_HEURISTICS_MODULES.values())


def npu_fixed_grid_type() -> str:
    """The grid type name a fixed grid is launched with. torch_npu 2.13.0 / 2.14.0's
    GridExprNpu builds a type that is not a GridNpu (upstream's FixedGrid) the upstream way;
    2.11.0.post3 / 2.12.0.post3 accept GridNpu subclasses only, and have FixedGridNpu
    (the same `fixed_grid` meta key)."""
    return "FixedGridNpu" if hasattr(npu_heuristics(), "FixedGridNpu") else "FixedGrid"


def npu_decide_axes(scheduling: Any, node_schedule: list[Any], kernel: Any) -> None:
    """Run torch_npu's axis analysis on a new kernel where its constructor did not:
    2.13.0 / 2.14.0's NPUIndexTritonKernel decides split, tiling and no-loop axes in
    __init__; 2.11.0.post3 / 2.12.0.post3's scheduling does it after constructing the kernel
    (NPUTritonScheduling.decide_codegen_dims_in_kernel(node_schedule, kernel)), and leave
    short row axes untiled, which the fused kernel then tiles (`_npu_tile_row_axes`)."""
    if not kernel.sorted_axis:
        kernel.node_schedule = node_schedule  # as their codegen_node_schedule sets it
        scheduling.decide_codegen_dims_in_kernel(node_schedule, kernel)
        _npu_tile_row_axes(kernel)


def _npu_tile_row_axes(kernel: Any) -> None:
    """Tile every row axis of a fused kernel on 2.11.0.post3 / 2.12.0.post3, as 2.13.0's
    analysis does. Their tiling selection stops once the tiled axes' lengths make 80% of
    all axes' lengths (summed), so a short row axis beside a long row, adaLN's sample axis
    B (split ['x1', 'x0'], tiled ['x0', 'r2']) or Qwen3's per-head q/k rows, stays untiled:
    torch_npu then walks it one scalar index at a time, a loop the fused kernel's row
    blocks and partial folds are not written for. Tiled, the axis gets a block dimension
    of its own (X*BLOCK_SUB, masked); what torch_npu derives from the tiling is redone: the
    tiling order, the golden variable order (the tile's dimensions), the reduction's
    dimension in the tile, and the axes' cached broadcast directions."""
    untiled = [a for a in kernel.sorted_axis if a.prefix != "r" and not a.is_tiling_axis]
    if not untiled:
        return
    split_tiling = sys.modules["torch_npu._inductor.codegen.split_tiling"]
    analysis = sys.modules["torch_npu._inductor.codegen.kernel_analysis"]
    for axis in untiled:
        axis.is_tiling_axis = True
        kernel.tiling_axis.append(axis)
    kernel.tiling_axis.sort(reverse=True, key=split_tiling.SplitTiling.key)
    for axis in kernel.sorted_axis:
        axis.directions = []
    kernel.golden_var_list = None
    kernel.select_golden_varlist()
    # Their reduction's tile shape lists the tiled axes in tiling order (the reduction
    # axes last), the loads' broadcasts follow the golden order: the row axes go in the
    # tile's order (Qwen3's q/k rows, golden (r3, x1, x0, x2): x2, x0, x1), or a fused
    # tile's reshape would not match its loads (torch_npu's own kernel of that group
    # fails so on 2.12.0.post3).
    tile = list(reversed(kernel.golden_var_list))
    kernel.tiling_axis.sort(key=lambda a: (a.prefix == "r", tile.index(a.symbol())
                                           if a.prefix != "r" and a.symbol() in tile else 0))
    for order, axis in enumerate(kernel.tiling_axis):
        axis.tiling_order = order
    if getattr(kernel, "reduce_analysis", None) is not None:
        kernel.reduce_analysis = analysis.ReductionAnalysis(kernel)


def npu_check_frontend(scheduling: Any, src_code: str) -> None:
    """torch_npu's codegen-time front-end check of a kernel (make_ttir_for_check: from 2.13.0,
    a failure falls back). 2.11.0.post3 / 2.12.0.post3 have none: their kernels are first
    compiled at launch."""
    check = getattr(scheduling, "make_ttir_for_check", None)
    if check is not None:
        check(src_code)


def npu_axis_is_no_loop(axis: Any) -> bool:
    """Whether torch_npu walks a static axis whole in one block (no loop, no mask):
    `is_no_loop_axis` from 2.13.0; 2.11.0.post3 / 2.12.0.post3 have no such axes."""
    return bool(getattr(axis, "is_no_loop_axis", False))


def npu_compiles_config_multibuffer() -> bool:
    """Whether torch_npu's autotuner hands a config's `multibuffer` to triton-ascend
    (NPUCachingAutotuner.parse_triton_ascend_options, 2.13.0 on). 2.11.0.post3 / 2.12.0.post3
    pass num_warps / num_stages / debug only: every config compiles with triton-ascend's
    default (multibuffer on Atlas A2/A3, off on Ascend950)."""
    return hasattr(npu_heuristics().NPUCachingAutotuner, "parse_triton_ascend_options")
