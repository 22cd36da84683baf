"""The scheduling families the fused kernel is built on: Inductor's own Triton scheduling,
and a vendor's (Ascend's) that a target registers, each with the adapter that builds on
it and the reason it declines the variants it cannot serve.

A family is the second axis beside the target: the target (targets/, planning and the
code flavor) is chosen once per group by the scheduler hook and carried in the plan; the
family is whatever scheduling Inductor gave the device, and decides which kernel class
the fused kernel is mixed into."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from .adapter import INDUCTOR_ADAPTER, KernelAdapter

if TYPE_CHECKING:
    from ..compat import TritonScheduling


@dataclasses.dataclass(frozen=True)
class SchedulingFamily:
    """A vendor's family of Triton schedulings, as a target registers it."""

    name: str
    #: The adapter for a scheduling of this vendor's that the target serves; None otherwise.
    adapter_for: Callable[[TritonScheduling], KernelAdapter | None]
    #: Why a scheduling of this vendor's cannot be served (None: it can, or not theirs).
    unsupported: Callable[[object], str | None]


_FAMILIES: dict[str, SchedulingFamily] = {}


def register(family: SchedulingFamily) -> SchedulingFamily:
    _FAMILIES[family.name] = family
    return family


def adapter_for(scheduling: TritonScheduling) -> KernelAdapter:
    """The adapter of a device's Triton scheduling: a vendor's, else Inductor's own."""
    for family in _FAMILIES.values():
        adapter = family.adapter_for(scheduling)
        if adapter is not None:
            return adapter
    return INDUCTOR_ADAPTER


def unsupported(scheduling: object) -> str | None:
    """Why the plugin cannot generate through this device scheduling (None: it can)."""
    for family in _FAMILIES.values():
        why = family.unsupported(scheduling)
        if why is not None:
            return why
    return None
