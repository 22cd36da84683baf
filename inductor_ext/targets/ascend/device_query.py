"""The Ascend device as planning sees it: what torch_npu reports for a device its default
Inductor backend serves (the SoC's UB and vector cores), or for an NPU without it."""

from __future__ import annotations

import functools

import torch

from ... import diagnostics
from ...plan.device import DeviceInfo
from . import npu
from .cost import class_hbm_bytes_per_s


def device_info(device: torch.device) -> DeviceInfo | None:
    """The facts of `device` when it is torch_npu's; None for any other device."""
    if npu.serves(device):
        return _torch_npu_info(device)
    if device.type == "npu":
        return _npu_info()
    return None


def _torch_npu_info(device: torch.device) -> DeviceInfo:
    """What torch_npu's Inductor config reports (vector cores after NPU_DEVICE_LIMIT, UB
    by SoC), for a device whose kernels its default backend generates."""
    facts = npu.soc_facts()
    name = facts.name or ("Ascend950" if facts.ascend950 else "Ascend A2/A3")
    if facts.assumed:
        diagnostics.warn_once(f"soc-facts-{name}",
                       "inductor_ext: torch_npu's Inductor config does not report every SoC "
                       "fact the Ascend plan needs; assumed %s", "; ".join(facts.assumed))
    return DeviceInfo(type=device.type, name=name,
                      cores=facts.vector_cores, ub_bytes=facts.ub_bytes,
                      dram_bytes_per_s=class_hbm_bytes_per_s(facts.ascend950),
                      npu_backend="torch_npu", ascend950=facts.ascend950,
                      interpreted=device.type == "cpu", assumed=facts.assumed)


@functools.cache
def _npu_info() -> DeviceInfo:
    """Vector cores reported by torch_npu, when it is importable (it needs CANN)."""
    cores = npu.DEFAULT_VECTOR_CORES
    try:
        import torch_npu  # noqa: F401

        # torch_npu adds `torch.npu` when imported; torch's own stubs have no such module.
        npu_mod = torch.npu  # type: ignore[attr-defined]
        props = npu_mod.get_device_properties(npu_mod.current_device())
        vector = getattr(props, "vector_core_num", None)
        cube = getattr(props, "cube_core_num", None)
        cores = int(vector) if vector else (2 * int(cube) if cube else cores)
    except Exception:
        pass
    return DeviceInfo(type="npu", cores=cores, ub_bytes=npu.DEFAULT_UB_BYTES,
                      dram_bytes_per_s=class_hbm_bytes_per_s(False))
