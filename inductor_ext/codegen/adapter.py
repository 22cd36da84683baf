"""How the fused kernel is built on one family of Triton schedulings: Inductor's own here,
Ascend's in inductor_ext.targets.ascend.kernel. The driver (driver.py) asks the adapter
for the node schedule, the kernel and the kernel's registration, and does the rest itself."""

from __future__ import annotations

from typing import Any

from .. import compat
from ..compat import SIMDKernelFeatures, TritonKernel, TritonScheduling
from ..groups.node import MixOrderNode
from ..plan import LaunchPlan
from .column_body import ColumnBody
from .flavor import get_flavor
from .kernel_base import MixOrderKernelBase
from .row_loop import kernel_class_for


class KernelAdapter:
    """How the fused kernel is built on one family of Triton schedulings: which kernel
    class, axes and launch config, and how a kernel's source is registered. This one is
    Inductor's own TritonScheduling (CUDA, XPU, CPU-Triton, and vendor schedulings that keep
    its codegen); Ascend's lives in inductor_ext.targets.ascend.kernel."""

    name = "inductor"

    def prepare(self, node: MixOrderNode, node_schedule: list[Any], columns: list[ColumnBody]
                ) -> list[Any]:
        """The node schedule the kernel is built from (and its nodes codegen'd in)."""
        return node_schedule

    def make_kernel(self, scheduling: TritonScheduling, node: MixOrderNode,
                    node_schedule: list[Any], columns: list[ColumnBody]) -> MixOrderKernelBase:
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

    def define_kernel(self, scheduling: TritonScheduling, src_code: str, node_schedule: list[Any],
                      kernel: MixOrderKernelBase) -> str:
        """Register the source with the wrapper; returns the kernel's name."""
        return scheduling.define_kernel(src_code, node_schedule, kernel)


INDUCTOR_ADAPTER = KernelAdapter()
