"""Device facts for planning, as one value (`DeviceInfo`), read from the device once.

Planning sees only this value, so tests and benches describe a device by building one
(`DeviceInfo(...)`, or `assume_device(...)` for a whole compile) instead of patching the
queries; `device_info` is the one place that asks the driver."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
from collections.abc import Callable, Iterator

import torch

from .. import compat


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """What a planner may know about the device a group's kernels run on."""

    type: str  # torch device type: "cuda", "cpu" (Triton interpreter), "npu", "xpu"
    name: str = ""
    cores: int = 1  # SMs (NVIDIA) / vector cores (Ascend)
    l2_bytes: int = 40 * 2**20
    register_file_bytes: int = 4 * 65536  # per SM
    l1_bytes: int = 256 * 1024  # L1 / shared memory per SM (NVIDIA)
    dram_bytes_per_s: float = 2.0e12
    capability: tuple[int, int] = (0, 0)  # NVIDIA compute capability; (0, 0) elsewhere
    ub_bytes: int = 0  # Ascend Unified Buffer per core; 0 elsewhere
    #: The name of the vendor scheduling that generates this device's kernels (the fused
    #: kernel is then built on its kernel class); "" otherwise.
    npu_backend: str = ""
    ascend950: bool = False  # Ascend950 (256 KiB UB, int64 indices), else A2/A3
    #: The kernels run in Triton's CPU interpreter, one program after another.
    interpreted: bool = False
    #: Facts the device's runtime did not report, each with the value taken instead: a
    #: planner records them with its decision, so a plan built on a default says so.
    assumed: tuple[str, ...] = ()

    @property
    def hopper_or_later(self) -> bool:
        """NVIDIA sm_90+: the bulk L2 prefetch and programmatic dependent launch exist
        (`capability` is (0, 0) on every other device)."""
        return self.capability >= (9, 0)


#: Programs the CPU plans for: the interpreter runs them one by one, so few keep tests fast.
CPU_INTERPRETER_CORES = 2

_ASSUMED: contextvars.ContextVar[tuple[tuple[str, DeviceInfo], ...]] = contextvars.ContextVar(
    "inductor_ext_assumed_devices", default=())


@contextlib.contextmanager
def assume_device(info: DeviceInfo) -> Iterator[None]:
    """Plan every group on a device of `info.type` as if it were `info` (tests: a CPU
    compile planned like an H100; benches: a what-if device). Part of the pass's cache
    key while active."""
    token = _ASSUMED.set((*((t, i) for t, i in _ASSUMED.get() if t != info.type),
                          (info.type, info)))
    try:
        yield
    finally:
        _ASSUMED.reset(token)


def assumed_devices() -> dict[str, DeviceInfo]:
    return dict(_ASSUMED.get())


def device_info(device: torch.device) -> DeviceInfo:
    """The facts of `device` (or what `assume_device` set for its type)."""
    assumed = dict(_ASSUMED.get()).get(device.type)
    if assumed is not None:
        return assumed
    for query in _TARGET_QUERIES:  # not cached: an emulation session may come and go
        info = query(device)
        if info is not None:
            return info
    return described_by_inductor(device)


#: The targets' own queries (registered from their packages): the facts of a device only
#: the target's runtime can report (an NPU's SoC), None for any other device.
_TARGET_QUERIES: list[Callable[[torch.device], DeviceInfo | None]] = []


def register_device_query(query: Callable[[torch.device], DeviceInfo | None]) -> None:
    if query not in _TARGET_QUERIES:
        _TARGET_QUERIES.append(query)


@functools.cache
def described_by_inductor(device: torch.device) -> DeviceInfo:
    """What any device's facts start from: the CPU in the interpreter, or what Inductor's
    DeviceProperties say (cores, registers), with defaults for the rest. A target's query
    adds what only its runtime reports."""
    if device.type == "cpu":
        return DeviceInfo(type="cpu", name="cpu (Triton interpreter)",
                          cores=CPU_INTERPRETER_CORES, interpreted=True)
    try:
        props = compat.device_properties(device)
    except Exception:  # an unknown backend: defaults, planning still works
        return DeviceInfo(type=device.type)
    return DeviceInfo(
        type=device.type,
        cores=int(getattr(props, "multi_processor_count", 0) or 1),
        register_file_bytes=4 * int(getattr(props, "regs_per_multiprocessor", 0) or 65536))
