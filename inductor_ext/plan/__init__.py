"""Planning: a pure function of (shape, device, tuning, options) per target.

`planner_for(target)` gives the target's `fits` / `plan` / `profitable`; the hook builds
the inputs (`ShapeInfo` from the group, `device_info`, and from the user's config the
options and tuning of `inductor_ext.plan_inputs`) and hands the resulting `LaunchPlan` to
codegen. Each target registers its `Planner` from its package (`inductor_ext.targets`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from . import knobs as tuning_mod
from .device import DeviceInfo, assume_device, assumed_devices, device_info
from .options import PlanOptions
from .types import PROGRAMS_KEY, ROW_VECTOR_KEY, FinalizeBlock, LaunchPlan, ShapeInfo


@dataclasses.dataclass(frozen=True)
class Planner:
    """One target's planning functions and what its codegen can accumulate in."""

    target: str
    fits: Callable[[ShapeInfo, DeviceInfo, Any, PlanOptions], tuple[bool, str]]
    plan: Callable[[ShapeInfo, DeviceInfo, Any, PlanOptions], LaunchPlan]
    profitable: Callable[[ShapeInfo, LaunchPlan, DeviceInfo, Any, PlanOptions],
                         tuple[bool, str]]
    accumulator_dtypes: tuple[torch.dtype, ...]
    #: (plan, B, M hint, interleaved) -> the plan laid out per sample for segmented column
    #: reductions (interleaved: the samples are a split row's pieces); None: the target
    #: has no per-sample row loop (they are declined).
    segments: Callable[[LaunchPlan, int, int, bool], LaunchPlan] | None = None
    #: Whether the target generates this device's kernels whatever its type (Ascend's
    #: backend serving CPU tensors in its emulation); None: by device type only.
    serves: Callable[[torch.device], bool] | None = None
    #: Device types whose target this is when config.target is "auto".
    device_types: tuple[str, ...] = ()
    #: The frozen dataclass of its tuning knobs (`inductor_ext.config.tuning[target]`).
    tuning: type | None = None
    #: Why the target cannot generate kernels for a device at all ("" where it can; None:
    #: every device it is asked about): declined as `unsupported_device`, before any tile.
    device_support: Callable[[DeviceInfo], str] | None = None


#: The targets, in the order they registered (`inductor_ext.targets` registers each).
PLANNERS: dict[str, Planner] = {}
#: The target of any device no target claims.
DEFAULT_TARGET = "cuda"


def register_planner(planner: Planner) -> Planner:
    """Adds a target's planning (from its package under `inductor_ext.targets`)."""
    PLANNERS[planner.target] = planner
    if planner.tuning is not None:
        tuning_mod.TUNINGS[planner.target] = planner.tuning
    return planner


def target_for(device: torch.device, configured: str) -> str:
    """The configured target, or with "auto" the device's: the target that serves it (the
    Ascend one for any device Ascend's Inductor backend generates, its emulation's CPU tensors
    included), else the one registered for its type, else the default."""
    if configured != "auto":
        return configured
    for planner in PLANNERS.values():
        if planner.serves is not None and planner.serves(device):
            return planner.target
    for planner in PLANNERS.values():
        if device.type in planner.device_types:
            return planner.target
    return DEFAULT_TARGET


def planner_for(target: str) -> Planner:
    try:
        return PLANNERS[target]
    except KeyError:
        raise ValueError(f"inductor_ext.config.target: unknown target {target!r}; "
                         f"known: {sorted(PLANNERS)}") from None


def split_rows_reason(shape: ShapeInfo) -> str:
    """Why a group whose rows are pieces of longer rows is not fused, on any target ("" if
    its rows are whole, or if it is a column strip). Inductor splits a reduction over few
    long rows (or over a transposed operand) into partial sums; fused with each program
    on all pieces, the kernel saves only the column kernel's second read while dx still
    waits for the second stage, and the pieces' many short rows pay for a workspace row
    per program: every such case of the H100 sweep (cost_sweep_h100.csv) is slower fused
    than stock. Where the columns reduce per piece (`walks_pieces`) and the row side reads
    a transposed operand, each program walks one piece's rows: the operand is read in runs
    along the original rows, which Inductor's split kernel cannot do, and the strip is
    faster than stock and upstream (cost_sweep_strips_h100.csv). Without a strided operand
    the strip has no such gain: split long rows are no faster fused."""
    if shape.row_pieces <= 1 or (shape.walks_pieces and shape.strided_bytes):
        return ""
    strip = (" (a column strip pays only where the row side reads a transposed operand)"
             if shape.walks_pieces else "")
    return (f"Inductor split each row of {shape.N * shape.row_pieces} into "
            f"{shape.row_pieces} pieces of {shape.N}: the row side holds partial sums, not "
            f"whole rows, so fusing saves only the column kernel's read{strip}")


__all__ = [
    "DEFAULT_TARGET", "PROGRAMS_KEY", "ROW_VECTOR_KEY", "PLANNERS", "DeviceInfo", "FinalizeBlock",
    "LaunchPlan", "PlanOptions", "Planner", "ShapeInfo", "assume_device", "assumed_devices",
    "device_info", "planner_for", "register_planner", "split_rows_reason", "target_for",
]
