"""CUDA (and any device whose kernels Inductor's own Triton scheduling writes: XPU, the CPU
interpreter): Inductor's kernel class, planned for NVIDIA SMs."""

import torch

from ...codegen.flavor import register as register_flavor
from ...plan import Planner, register_planner
from ...plan.device import register_device_query
from . import device_query, plan
from .flavor import CudaFlavor
from .tuning import CudaTuning

register_planner(Planner("cuda", plan.fits, plan.plan, plan.profitable,
                         (torch.float32, torch.float64), plan.with_segments,
                         device_types=("cuda",), tuning=CudaTuning))
register_flavor(CudaFlavor())
register_device_query(device_query.device_info)
