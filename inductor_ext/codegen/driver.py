"""Emit one MixOrderNode: build the fused kernel through its scheduling's adapter, run the
row reduction's nodes and the column bodies in it, compile it and its final step, then hand
both to the wrapper and record the kernel's metrics row."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any, cast

import sympy

from .. import compat, diagnostics, metrics
from ..compat import (
    DisableReduction,
    EnableReduction,
    Scheduler,
    SchedulerNode,
    TritonScheduling,
    V,
)
from ..groups.node import MixOrderNode
from ..plan import LaunchPlan
from . import finalize, precompile
from .adapter import INDUCTOR_ADAPTER, KernelAdapter
from .column_body import column_body
from .kernel_base import MixOrderKernelBase
from .partial_ops import PartialAccumulateOps
from .workspace import Workspace


def _scheduled_nodes(kernel: MixOrderKernelBase, node_schedule: list[Any]
                     ) -> Iterator[SchedulerNode]:
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


def codegen_mix_order(scheduling: TritonScheduling, node: MixOrderNode,
                      adapter: KernelAdapter = INDUCTOR_ADAPTER) -> None:
    """Emit the fused kernel for a MixOrderNode through a device's Triton scheduling."""
    plan: LaunchPlan = node.plan
    sched = cast("Scheduler", scheduling.scheduler)  # set on every scheduling that codegens
    inner_nodes = [n for n in node.inner_nodes if n.get_name() not in sched.removed_ops]
    node_schedule = scheduling.generate_node_schedule(inner_nodes, node.M, node.N)
    columns = [column_body(col, node.M, node.N) for col in node.columns]
    node_schedule = adapter.prepare(node, node_schedule, columns)
    kernel = adapter.make_kernel(scheduling, node, node_schedule, columns)
    K = len(columns)
    kernel.segments_of = {cb.out_name: cb.segments for cb in columns if cb.segments > 1}
    kernel.column_nodes = frozenset(n.get_name() for col in node.columns for n in col.absorbed)
    generated_final = finalize.runs_generated(plan, [cb.out_name for cb in columns])
    # Configs that launch fewer programs than the plan's tell the generated final step
    # how many they launched.
    counted = kernel.programs_per_config and generated_final
    layout = Workspace(plan.programs, K, int(node.N), plan.accumulator_dtype,
                       counted=counted)
    # Looped column-tiled kernels add into their workspace rows, so those start zeroed.
    kernel.workspace = layout.placed(*kernel.args.workspace(
        sympy.Integer(layout.allocated), plan.looped_column_tiles, dtype=layout.dtype))

    with kernel:
        all_indexing: dict[sympy.Expr, None] = {}
        for item in _scheduled_nodes(kernel, node_schedule):
            item.decide_inplace_update()
            index_vars = kernel.split_and_set_ranges(item.get_ranges())
            all_indexing.update(dict.fromkeys(item._body.indexing_from_args(index_vars).values()))
        for cb in columns:
            kernel_vars = kernel.split_and_set_ranges(cb.ranges)
            all_indexing.update(dict.fromkeys(cb.body.indexing_from_args(kernel_vars).values()))
        kernel.finalize_indexing(list(all_indexing))

        for item in _scheduled_nodes(kernel, node_schedule):
            compat.prepare_body_for_codegen(item._body)
            item.codegen(kernel.split_and_set_ranges(item.get_ranges()))
        for cb in columns:
            compat.prepare_body_for_codegen(cb.body)
            kernel_vars = kernel.split_and_set_ranges(cb.ranges)
            handler = compat.simplify_indexing(
                PartialAccumulateOps(V.get_ops_handler(), kernel, cb.out_name),
                compat.ranges_of(kernel_vars, cb.ranges))
            with V.set_ops_handler(handler), kernel.set_current_node(cb.owner):
                cb.body(*kernel_vars)

    assert len(kernel.partials) == K, "every column reduction became one partial"
    with V.set_kernel_handler(kernel):
        src_code = kernel.codegen_kernel()
    final_step = finalize.prepare(kernel, src_code) if generated_final else None
    # Compiled before anything reaches the wrapper: a kernel that does not compile falls
    # back here (inductor_ext/backend_wrapper.py's `_codegen_or_fallback`) instead of failing
    # when the wrapper loads.
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
                V.graph.removed_buffers.add(compat.computed_buffer_of(absorbed).get_name())
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


def _fusion_row(node: MixOrderNode, kernel: MixOrderKernelBase, kernel_name: str,
                src_code: str) -> dict[str, object]:
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
        "model_fuses": node.verdict.fuses,
        "model_detail": node.verdict.detail,
        "shape_info": json.dumps(node.shape.to_record(), sort_keys=True),
        **node.table_fields,
    }
