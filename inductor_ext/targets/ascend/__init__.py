"""Ascend NPUs through torch_npu's Inductor backend and triton-ascend: the kernel class built
on torch_npu's, planned for vector cores and their Unified Buffer (ub.py and its calibration
table), the SoC facts torch_npu reports, and the decorator of its launches
(inductor_ext/targets/ascend/npu_autotune.py, where generated code imports it)."""

import torch

from ... import on_enable
from ...codegen import families
from ...codegen.flavor import register as register_flavor
from ...plan import Planner, register_planner
from ...plan.device import register_device_query
from ...scheduler import externs
from . import device_query, kernel, npu, plan, rms_norm_decomp
from .flavor import AscendFlavor
from .tuning import AscendTuning

# The NPU's vector units have no float64 arithmetic (nor float64 atomics).
register_planner(Planner("ascend", plan.fits, plan.plan, plan.profitable, (torch.float32,),
                         segments=plan.with_segments, serves=npu.serves, device_types=("npu",),
                         tuning=AscendTuning, device_support=plan.device_support))
register_flavor(AscendFlavor())
register_device_query(device_query.device_info)
families.register(families.SchedulingFamily(
    kernel.SCHEDULING_NAME, adapter_for=kernel.adapter_for, unsupported=npu.unsupported_detail))
externs.register_hint(rms_norm_decomp.OP_NAME, rms_norm_decomp.extern_hint)
# torch_npu loaded first: config.decompose_npu_rms_norm can act from the first compile; else
# turning the plugin on (after `import torch_npu`) installs it.
rms_norm_decomp.install()
on_enable.register(rms_norm_decomp.install)
