"""Wrap a device's scheduling backend so our fused nodes reach our codegen.

The wrapper is installed on the Scheduler's backend instance (not its class), so other
compiles and other devices are untouched. A codegen failure falls back to generating the
group's original nodes with Inductor's own kernels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from . import compat
from .codegen import families
from .codegen.driver import codegen_mix_order
from .compat import FusedSchedulerNode, Scheduler, TritonScheduling
from .diagnostics import decline, warn_once
from .groups.node import MixOrderNode
from .reasons import Reason


def install_backend_wrapper(sched: Scheduler, device: torch.device) -> None:
    backend = sched.get_backend(device)
    if getattr(backend, "_inductor_ext_wrapped", False):
        return
    triton_sched = compat.triton_scheduling_of(backend)
    if triton_sched is None:
        raise RuntimeError(f"no Triton scheduling for device {device}")
    original = backend.codegen_node

    def codegen_node(node: Any) -> Any:
        if isinstance(node, MixOrderNode):
            return _codegen_or_fallback(sched, triton_sched, original, node)
        return original(node)

    # On this instance only: other compiles and devices keep the class's method.
    backend.codegen_node = codegen_node  # type: ignore[method-assign]  # ours, on purpose
    backend._inductor_ext_wrapped = True  # type: ignore[attr-defined]  # our marker


def _codegen_or_fallback(sched: Scheduler, triton_sched: TritonScheduling,
                         original: Callable[..., None],
                         node: MixOrderNode) -> None:
    try:
        adapter = families.adapter_for(triton_sched)
        codegen_mix_order(triton_sched, node, adapter)
        return
    except Exception as exc:
        warn_once("codegen", "inductor_ext: fused codegen failed for %s, emitting "
                   "Inductor's kernels instead: %s", node.get_name(), exc)
        attribution = getattr(node, "attribution", None)
        decline(node.get_name(), node.M, node.N, Reason.INTERNAL_ERROR, f"codegen: {exc!r}",
                attribution.shown_modules() if attribution is not None else "",
                **(attribution.reject_fields() if attribution is not None else {}))
        if node.coverage is not None:
            norms, _, other_columns = node.column_counts()
            node.coverage.demote(norms, other_columns, Reason.INTERNAL_ERROR)
    # Emit the group's original kernels. Buffers whose last use was the fused node must
    # stay alive until every one of them has run, so hold the frees until the end.
    pending = set(sched.buffer_names_to_free)
    sched.buffer_names_to_free.clear()
    inner = node.inner_nodes
    original(inner[0] if len(inner) == 1 else FusedSchedulerNode(sched, inner))
    for col in node.columns:
        # The column's nodes, then the cast the final step would have written.
        for absorbed in [*col.absorbed, *([col.cast] if col.cast is not None else [])]:
            compat.V.graph.removed_buffers.discard(
                compat.computed_buffer_of(absorbed).get_name())
            original(absorbed)
    sched.buffer_names_to_free.update(pending)
    triton_sched.free_buffers_in_scheduler()
