"""The final step as one generated Triton kernel: sum (or prod/max/min) the workspace rows
[programs, K, N] of every partial into its [N] output, cast to the output's dtype.

One launch for all K outputs, reading the workspace while it is still in L2, instead of two
ATen ops (reduce, then cast-copy) per output. Columns are spread over programs so the step
stays short at any N; the loop over workspace rows is a fixed-order fold, so results stay
bitwise reproducible. A flavor that cannot run it (or an output we cannot index flat) keeps
the ATen step.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, cast

import torch

from ..compat import Placeholder, V, inductor_metrics, triton_pointer_type, triton_type
from ..groups.combine import COMBINE, TL_REDUCE
from ..plan import FinalizeBlock, LaunchPlan
from ..runtime import autotune

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..compat import TritonScheduling
    from .adapter import KernelAdapter
    from .kernel_base import MixOrderKernelBase

#: Output dtypes the final step writes (a float result of a float accumulation).
_OUTPUT_DTYPES = frozenset({torch.float32, torch.bfloat16, torch.float16, torch.float64})


def _output_ok(name: str) -> bool:
    """Outputs we can write as a flat [N] run: contiguous, offset 0, float dtype."""
    try:
        buf = V.graph.get_buffer(name)
        layout = buf.get_layout()
        return (buf.get_dtype() in _OUTPUT_DTYPES and layout.is_contiguous()
                and int(layout.offset) == 0)
    except Exception:
        return False


def runs_generated(plan: LaunchPlan, out_names: list[str]) -> bool:
    """The plan's final step runs as the generated kernel (else as ATen ops)."""
    return plan.final_step is not None and all(_output_ok(name) for name in out_names)


def _module_header(main_src: str) -> str:
    """The main kernel module's imports: everything before its first decorator line,
    whichever decorator it carries (Inductor's, or ours once autotuned)."""
    decorator = re.search(r"^@", main_src, re.MULTILINE)
    return main_src[:decorator.start() if decorator else len(main_src)].rstrip()


def source(kernel: MixOrderKernelBase, main_src: str,
           block: FinalizeBlock) -> tuple[str, dict[str, Any]]:
    """(kernel source, triton_meta): the main kernel's module header, then our decorator
    and body."""
    K = len(kernel.partials)
    P = kernel.plan.programs
    N = kernel.row_length
    ws = kernel.workspace
    assert ws is not None
    header = _module_header(main_src)
    out_dtypes = [V.graph.get_dtype(p.out_name) for p in kernel.partials]
    acc_dtype = kernel.plan.accumulator_dtype
    signature = {"ws_ptr": triton_pointer_type(acc_dtype)}
    signature.update({f"out_ptr{k}": triton_pointer_type(d) for k, d in enumerate(out_dtypes)})
    signature.update({"xnumel": "i32", "r0_numel": "i32", "XBLOCK": "constexpr",
                      "R0_BLOCK": "constexpr"})
    aligned = list(range(1, K + 1))
    if ws.offset_bytes % 16 == 0:
        aligned.insert(0, 0)
    if N % 4 == 0:
        aligned.append(K + 1)
    assert kernel.triton_meta is not None, "set by the main kernel's codegen_kernel"
    triton_meta = {
        key: value for key, value in kernel.triton_meta.items()
        if key not in ("signature", "constants", "configs")
    }
    if kernel.plan.final_step_pdl:
        triton_meta["launch_pdl"] = True
    triton_meta.update(signature=signature, constants={},
                       configs=[{(i,): [["tt.divisibility", 16]] for i in aligned}])
    inductor_meta = {
        key: value for key, value in kernel.inductor_meta.items()
        if key not in (autotune.PLAN_KEY, autotune.CONFIGS_KEY, "fixed_grid",
                       "precomputed_grids", "num_load", "num_store", "num_reduction",
                       "mutated_arg_names")
    }
    # Segmented partials: one program per (column block, sample), so the samples' folds
    # run side by side, not as a chain of dependent folds in a program's loop.
    samples = max(part.segments for part in kernel.partials)
    inductor_meta.update(grid_type="FixedGrid",
                         fixed_grid=[str(block.programs(N)), str(samples), "1"],
                         mutated_arg_names=[], num_load=K, num_store=K, num_reduction=K)
    config = {"XBLOCK": block.columns, "R0_BLOCK": block.rows,
              **kernel.flavor.finalize_launch_options(block)}
    args = ", ".join(name for name, kind in signature.items() if kind != "constexpr")
    lines = [
        header, "",
        "@triton_heuristics.fixed_config(",
        f"    config={config!r},",
        "    filename=__file__,",
        f"    triton_meta={triton_meta!r},",
        f"    inductor_meta={inductor_meta!r}",
        ")",
        "@triton.jit",
        f"def {Placeholder.KERNEL_NAME}({args}, "
        "XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr):",
        *([f"    {kernel.flavor.pdl_wait_statement()}"] if kernel.plan.final_step_pdl else []),
        f"    xnumel = {N}",
        # A counted workspace: the rows of the programs the main kernel's config launched.
        (f"    r0_numel = tl.load({ws.count_pointer('ws_ptr')}).to(tl.int32)" if ws.counted
         else f"    r0_numel = {P}"),
        "    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[None, :]",
        "    xmask = xindex < xnumel",
        "    r0_base = tl.arange(0, R0_BLOCK)[:, None]",
    ]
    whole = [part for part in kernel.partials if part.segments == 1]
    whole_mask = "xmask"
    if samples > 1:
        # Whole partials are folded by the programs of sample 0 only (their columns end
        # at 0 elsewhere: integer arithmetic, as the interpreter of Triton 3.9 takes no
        # scalar boolean into a mask).
        lines += ["    seg = tl.program_id(1)",
                  "    whole_mask = xindex < xnumel * (1 - tl.minimum(seg, 1))"]
        whole_mask = "whole_mask"
    for part in whole:
        k = part.index
        lines.append(f"    acc{k} = tl.full([R0_BLOCK, XBLOCK], "
                     f"{COMBINE[part.reduction_type][0]}, {triton_type(acc_dtype)})")
    if whole:
        lines += [
            "    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):",
            "        r0_index = r0_offset + r0_base",
            f"        mask = {whole_mask} & (r0_index < r0_numel)",
        ]
    for part in whole:
        k = part.index
        identity, fold = COMBINE[part.reduction_type]
        ptr = ws.pointer("r0_index", k, "xindex", base="ws_ptr")
        lines.append(f"        val{k} = tl.load({ptr}, mask, other={identity})")
        lines.append(f"        acc{k} = "
                     f"{fold.format(acc=f'acc{k}', val=f'val{k}')}")
    for part, dtype in zip(kernel.partials, out_dtypes):
        k = part.index
        if part.segments > 1:
            lines += _segmented_fold(kernel, part.index, part.reduction_type, part.segments,
                                     triton_type(acc_dtype), triton_type(dtype))
            continue
        lines.append(f"    out{k} = {TL_REDUCE[part.reduction_type]}(acc{k}, 0)[None, :]")
        lines.append(f"    tl.store(out_ptr{k} + xindex, out{k}.to({triton_type(dtype)}), "
                     f"{whole_mask})")
    return "\n".join(lines) + "\n", triton_meta


def _segmented_fold(kernel: MixOrderKernelBase, k: int, reduction_type: str, segments: int,
                    acc_type: str, out_type: str) -> list[str]:
    """A segmented partial's fold: program (column block, b) folds sample b's programs'
    workspace rows (the kernel lays them out b * per + j) into out[b, :], in a fixed
    order."""
    N = kernel.row_length
    per = kernel.plan.programs // segments
    identity, fold = COMBINE[reduction_type]
    ws = kernel.workspace
    assert ws is not None
    ptr = ws.pointer(ws.segment_program(segments, "seg", "r0_index"), k, "xindex", base="ws_ptr")
    return [
        f"    acc{k} = tl.full([R0_BLOCK, XBLOCK], {identity}, {acc_type})",
        f"    for r0_offset in tl.range(0, {per}, R0_BLOCK):",
        "        r0_index = r0_offset + r0_base",
        f"        mask = xmask & (r0_index < {per})",
        f"        val{k} = tl.load({ptr}, mask, other={identity})",
        f"        acc{k} = {fold.format(acc=f'acc{k}', val=f'val{k}')}",
        f"    out{k} = {TL_REDUCE[reduction_type]}(acc{k}, 0)[None, :]",
        f"    tl.store(out_ptr{k} + seg * {N} + xindex, out{k}.to({out_type}), xmask)",
    ]


def prepare(kernel: MixOrderKernelBase, main_src: str) -> tuple[str, dict[str, Any]]:
    """The final-step kernel's (source, triton_meta), where `runs_generated` holds (else
    the ATen step is used). Nothing is defined yet: codegen compiles it first
    (codegen/precompile.py)."""
    block = kernel.plan.final_step
    assert block is not None, "runs_generated: the plan has a final-step block"
    return source(kernel, main_src, block)


def define(kernel: MixOrderKernelBase, adapter: KernelAdapter, scheduling: TritonScheduling,
           node_schedule: list[Any], src: str, triton_meta: dict[str, Any]
           ) -> Callable[[], None]:
    """Define the final-step kernel; returns a callable that writes its launch."""
    P = kernel.plan.programs
    N = kernel.row_length
    name = adapter.define_kernel(scheduling, src, node_schedule, kernel)
    # Inductor counts a kernel when its Kernel object is built; this one has none.
    inductor_metrics.generated_kernel_count += 1
    out_dtypes = [V.graph.get_dtype(p.out_name) for p in kernel.partials]

    def launch() -> None:
        assert kernel.workspace is not None
        call_args = [kernel.workspace.outer, *(p.out_name for p in kernel.partials), N, P]
        arg_types = [kernel.plan.accumulator_dtype, *out_dtypes, int, int]
        V.graph.wrapper_code.generate_kernel_call(
            # triton_meta: a TypedDict (TritonMeta) in torch 2.15, a plain dict before.
            name, call_args, triton=True, arg_types=arg_types, triton_meta=cast(Any, triton_meta),
            inductor_meta={"grid_type": "FixedGrid"})

    return launch
