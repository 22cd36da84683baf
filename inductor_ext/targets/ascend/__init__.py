"""Ascend NPUs through torch_npu's Inductor backend and triton-ascend: the kernel class built
on torch_npu's, planned for vector cores and their Unified Buffer (ub.py and its calibration
table), the SoC facts torch_npu reports, and the decorator of its launches
(inductor_ext/runtime/npu_autotune.py, where generated code imports it)."""

import torch

from ...codegen import schedulings
from ...codegen.flavor import register as register_flavor
from ...plan import Planner, register_planner
from ...plan.device import register_device_query
from . import device, kernel, npu, plan
from .flavor import AscendFlavor
from .tuning import AscendTuning

# The NPU's vector units have no float64 arithmetic (nor float64 atomics).
register_planner(Planner("ascend", plan.fits, plan.plan, plan.profitable, (torch.float32,),
                         serves=npu.serves, device_types=("npu",),
                         tuning=AscendTuning))
register_flavor(AscendFlavor())
register_device_query(device.device_info)
schedulings.register(schedulings.VendorScheduling(
    "torch_npu", adapter_for=kernel.adapter_for, unsupported=npu.unsupported_detail))
