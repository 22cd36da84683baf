"""torch_npu's Inductor backend as the plugin sees it: which of its backends serves a device
(and why the others are declined), and what the SoC offers (Unified Buffer, vector cores,
Ascend950) as torch_npu reports it.

torch_npu is never imported here: it needs CANN, and importing it installs its backend. Its
modules are read from ``sys.modules`` once the user (or the emulation in
``tests.support.npu_emulation``) has loaded them.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

import torch

from ... import compat

#: torch_npu backends (TORCHINDUCTOR_NPU_BACKEND) whose kernels the plugin generates.
SUPPORTED_BACKENDS = ("default",)
BACKEND_ENV = "TORCHINDUCTOR_NPU_BACKEND"
_PACKAGE = "torch_npu."
#: Where each torch_npu backend's scheduling class lives (module prefix -> backend).
_BACKEND_MODULES = (
    ("torch_npu._inductor.triton_experimental", "triton_experimental"),
    ("torch_npu._inductor.dvm", "dvm"),
    ("torch_npu._inductor.ascend_npu_ir", "mlir"),
    ("torch_npu._inductor.ascendc", "ascendc"),
    ("torch_npu._inductor.codegen", "default"),
)
_WHY_NOT = {
    "triton_experimental": "its kernels wrap the body in their own per-core loop, launch "
                           "through its own heuristics module (no fixed grid, no fixed "
                           "config) and need tl.extra.cann.extract_slice",
    "mlir": "it generates MLIR, not Triton",
    "dvm": "it generates DVM/MLIR kernels, not Triton",
    "ascendc": "it generates AscendC, not Triton",
}

#: Unified Buffer bytes when torch_npu does not say (Atlas A2/A3, torch_npu's own default).
DEFAULT_UB_BYTES = 192 * 1024
#: Vector cores when torch_npu does not say: only a fallback (torch_npu not loaded, or a
#: device forced onto the Ascend flavor); torch_npu's own fallback is the 910B3's 40
#: (triton_experimental/device_props.py), bishengir-compile's spec of Ascend910B3 agrees.
DEFAULT_VECTOR_CORES = 40


def backend_of(scheduling: Any) -> str | None:
    """The torch_npu backend a scheduling (instance or class) belongs to; None when it is
    not torch_npu's."""
    cls = scheduling if isinstance(scheduling, type) else type(scheduling)
    module = getattr(cls, "__module__", "") or ""
    if not module.startswith(_PACKAGE):
        return None
    for prefix, name in _BACKEND_MODULES:
        if module.startswith(prefix):
            return name
    return os.environ.get(BACKEND_ENV, "default")


def unsupported_detail(scheduling: Any) -> str | None:
    """Why the plugin declines a torch_npu scheduling (None: not torch_npu's, or
    supported)."""
    backend = backend_of(scheduling)
    if backend is None or backend in SUPPORTED_BACKENDS:
        return None
    cls = scheduling if isinstance(scheduling, type) else type(scheduling)
    env = os.environ.get(BACKEND_ENV, "default")
    why = _WHY_NOT.get(backend, "the plugin has no adapter for it")
    return (f"torch_npu backend {backend!r} ({BACKEND_ENV}={env}, scheduling "
            f"{cls.__module__}.{cls.__qualname__}) is not supported: {why}; the fused kernel "
            f"is generated for torch_npu's {'/'.join(SUPPORTED_BACKENDS)} backend")


def serves(device: torch.device | None) -> bool:
    """torch_npu's supported backend generates this device's kernels."""
    if device is None:
        return False
    scheduling = compat.scheduling_class_for(device.type)
    return scheduling is not None and backend_of(scheduling) in SUPPORTED_BACKENDS


#: Unified Buffer bytes of Ascend950 parts (torch_npu's `ub_size` when `is_ascend950`).
ASCEND950_UB_BYTES = 256 * 1024
#: SoC names of Ascend950 parts (torch_npu's `is_ascend950`: its SoC id 260 and above).
ASCEND950_PREFIX = "Ascend950"
#: SoCs torch_npu knows whose kernels triton-ascend does not generate: the inference parts
#: (310P, 310B) and the first-generation 910 (its release covers Atlas A2/A3 and Ascend950
#: only; bishengir-compile has no target for them).
UNSUPPORTED_SOC_PREFIXES = ("Ascend310P", "Ascend310B")
UNSUPPORTED_SOCS = ("Ascend910A", "Ascend910B", "Ascend910ProA", "Ascend910ProB",
                    "Ascend910PremiumA")


def unsupported_soc(name: str) -> bool:
    """A SoC the fused kernel cannot be compiled for (`UNSUPPORTED_SOC_PREFIXES`)."""
    return name.startswith(UNSUPPORTED_SOC_PREFIXES) or name in UNSUPPORTED_SOCS


@dataclasses.dataclass(frozen=True)
class SocFacts:
    """What the plugin plans with, as torch_npu reports it for the current SoC."""

    ub_bytes: int
    vector_cores: int  # after NPU_DEVICE_LIMIT
    ascend950: bool
    name: str = ""  # the device's name in torch_npu's properties ("Ascend910B3"), if any
    #: Facts torch_npu's config did not report, each with what was taken instead
    #: ("ub_size: 262144 B from the SoC name Ascend950"); empty when it reported them all.
    assumed: tuple[str, ...] = ()


def soc_facts() -> SocFacts:
    """From torch_npu's Inductor config when it is loaded. A fact the config lacks
    (torch_npu 2.11 has no `ub_size` nor `is_ascend950`) is derived from the SoC name its
    properties give, else the A2/A3 default, and listed in `assumed` (the plugin's options
    ascend_ub_bytes / ascend_vector_cores override them in planning)."""
    cfg = sys.modules.get("torch_npu._inductor.config")
    name = getattr(getattr(cfg, "prop", None), "name", "")
    name = name if isinstance(name, str) else ""
    assumed = []
    reported = getattr(cfg, "is_ascend950", None)
    if reported is not None:
        ascend950 = bool(reported)
    else:
        ascend950 = name.startswith(ASCEND950_PREFIX)
        assumed.append(f"is_ascend950: {ascend950} from the SoC name {name!r}" if name
                       else "is_ascend950: False (no SoC name reported)")
    ub = int(getattr(cfg, "ub_size", 0) or 0)
    if not ub:
        ub = ASCEND950_UB_BYTES if ascend950 else DEFAULT_UB_BYTES
        assumed.append(f"ub_size: {ub} B from the SoC name {name!r}" if name
                       else f"ub_size: {ub} B (the A2/A3 default)")
    cores = int(getattr(cfg, "num_vector_core", 0) or 0)
    if not cores:
        cores = DEFAULT_VECTOR_CORES
        assumed.append(f"num_vector_core: {cores} (torch_npu's 910B3 fallback)")
    return SocFacts(ub_bytes=ub, vector_cores=cores, ascend950=ascend950, name=name,
                    assumed=tuple(assumed) if cfg is not None else ())
