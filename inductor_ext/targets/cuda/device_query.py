"""An NVIDIA GPU as planning sees it: SMs, L2, registers, L1 / shared memory, the DRAM
bandwidth from its memory clock and bus, and its compute capability (what the driver
reports, read once per device)."""

from __future__ import annotations

import dataclasses
import functools

import torch

from ...plan.device import DeviceInfo, described_by_inductor


def device_info(device: torch.device) -> DeviceInfo | None:
    """The facts of a CUDA device (ROCm's reports no NVIDIA capability); None for any other."""
    if device.type != "cuda":
        return None
    return _queried(device)


@functools.cache
def _queried(device: torch.device) -> DeviceInfo:
    """Inductor's description of the device, with the facts only the CUDA driver and
    Triton's report: name, L2, L1 / shared memory, DRAM bandwidth, capability."""
    info = described_by_inductor(device)
    try:
        props = torch.cuda.get_device_properties(device)
    except Exception:  # no driver: Inductor's description and defaults
        return info
    return dataclasses.replace(
        info, name=props.name, l2_bytes=int(props.L2_cache_size), l1_bytes=_l1_bytes(device),
        dram_bytes_per_s=dram_bytes_per_s(device) or info.dram_bytes_per_s,
        capability=(0, 0) if torch.version.hip else (int(props.major), int(props.minor)))


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
