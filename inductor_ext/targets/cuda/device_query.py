"""An NVIDIA GPU as planning sees it: SMs, L2, registers, L1 / shared memory, the DRAM
bandwidth from its memory clock and bus, and its compute capability (what the driver
reports, read once per device)."""

from __future__ import annotations

import functools

import torch

from ... import compat
from ...plan.device import DeviceInfo


def device_info(device: torch.device) -> DeviceInfo | None:
    """The facts of a CUDA device (ROCm's reports no NVIDIA capability); None for any other."""
    if device.type != "cuda":
        return None
    return _queried(device)


@functools.cache
def _queried(device: torch.device) -> DeviceInfo:
    try:
        props = compat.device_properties(device)
    except Exception:  # no driver: defaults, planning still works
        return DeviceInfo(type=device.type)
    l2 = 40 * 2**20
    name = ""
    try:
        cuda_props = torch.cuda.get_device_properties(device)
        l2, name = int(cuda_props.L2_cache_size), cuda_props.name
    except Exception:
        pass
    return DeviceInfo(
        type=device.type, name=name,
        cores=int(getattr(props, "multi_processor_count", 0) or 1),
        l2_bytes=l2,
        register_file_bytes=4 * int(getattr(props, "regs_per_multiprocessor", 0) or 65536),
        l1_bytes=_l1_bytes(device),
        dram_bytes_per_s=dram_bytes_per_s(device) or 2.0e12,
        capability=((int(props.major or 0), int(getattr(props, "minor", 0) or 0))
                    if not torch.version.hip else (0, 0)))


def _l1_bytes(device: torch.device) -> int:
    """Combined L1 / shared memory per SM: what the driver reports as the most shared
    memory one SM can give, plus the L1 that stays (256 KB on sm_90, 192 KB on sm_80)."""
    try:
        props = torch.cuda.get_device_properties(device)
        smem = int(getattr(props, "shared_memory_per_multiprocessor", 0) or 0)
        return max(smem + 32 * 1024, 128 * 1024) if smem else 256 * 1024
    except Exception:
        return 256 * 1024


def dram_bytes_per_s(device: torch.device) -> float | None:
    """Peak DRAM bandwidth from Triton's driver: memory clock and bus width (None if
    unknown)."""
    try:
        from triton.runtime import driver

        props = driver.active.utils.get_device_properties(device.index or 0)
        return 2.0 * props["mem_clock_rate"] * 1e3 * props["mem_bus_width"] / 8
    except Exception:
        return None
