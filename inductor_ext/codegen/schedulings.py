"""The Triton schedulings the fused kernel is built on: Inductor's own, and the vendor
backends a target registers (Ascend's), each with the adapter that builds on it and the
reason it declines the variants it cannot serve."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from .adapter import INDUCTOR_ADAPTER, KernelAdapter

if TYPE_CHECKING:
    from ..compat import TritonScheduling


@dataclasses.dataclass(frozen=True)
class VendorScheduling:
    """A vendor backend's schedulings, as a target registers them."""

    name: str
    #: The adapter for a scheduling of this vendor's that the target serves; None otherwise.
    adapter_for: Callable[[TritonScheduling], KernelAdapter | None]
    #: Why a scheduling of this vendor's cannot be served (None: it can, or not theirs).
    unsupported: Callable[[object], str | None]


_VENDORS: dict[str, VendorScheduling] = {}


def register(vendor: VendorScheduling) -> VendorScheduling:
    _VENDORS[vendor.name] = vendor
    return vendor


def adapter_for(scheduling: TritonScheduling) -> KernelAdapter:
    """The adapter of a device's Triton scheduling: a vendor's, else Inductor's own."""
    for vendor in _VENDORS.values():
        adapter = vendor.adapter_for(scheduling)
        if adapter is not None:
            return adapter
    return INDUCTOR_ADAPTER


def unsupported(scheduling: object) -> str | None:
    """Why the plugin cannot generate through this device scheduling (None: it can)."""
    for vendor in _VENDORS.values():
        why = vendor.unsupported(scheduling)
        if why is not None:
            return why
    return None
