"""Unified Buffer use of the fused kernel built on torch_npu's NPUIndexTritonKernel: our
estimate of a launch config's footprint, calibrated against bishengir-compile's own memory
plan, and the check that a config fits a SoC's UB.

The raw estimate counts what one iteration of the row loop keeps live, in two parts that
scale differently: `tile` bytes of the [rows, columns] tiles (the [M, N] loads and stores,
doubled by multibuffer, and fp32 temporaries) and `vector` bytes of [1, columns] ones (the
partial accumulators, or the workspace tile read back when columns are tiled, and the
weights). bishengir's plan depends on more than that (how many fp32 temporaries the row
math keeps, which buffers it multi-buffers, retries with less when a plan does not fit), so
``ub_calibration.json`` records, per kernel family (UB class, persistent or column-tiled,
partials, bytes per element of the [M, N] tensors, multibuffer), bishengir's planned
high-water at every config tests/ascend/check_npu.py compiled, and the smallest
coefficients (a, b) with a * tile + b * vector + rows >= planned * (1 + MARGIN) at all of
them. A family never measured takes the largest coefficients of its UB class.

The UB class, not the SoC, keys the table: every A2/A3 SoC (910B1..B4, 910_93xx) has the
same 192 KiB UB and its kernels are planned by the same bishengir build, so a footprint
measured on one (the 910B3) holds for all; Ascend950 (torch_npu's ``is_ascend950``) is the
other class (256 KiB by torch_npu, its own -a5 build). Core counts never enter a footprint.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import pathlib
from collections.abc import Iterable, Sequence
from typing import Any

#: Narrowest column tile of a looped (column-tiled) row.
MIN_COLUMN_TILE = 256
#: fp32 temporaries per tile element that the row math keeps live beside the loads.
FP32_TEMPS = 3
#: Headroom of the calibrated estimate over the largest plan it was fitted to.
MARGIN = 0.03
_ALIGN_BYTES = 32
CALIBRATION_FILE = pathlib.Path(__file__).with_name("ub_calibration.json")
#: The UB classes: Atlas A2/A3 (every SoC below torch_npu's Ascend950 id), Ascend950.
UB_CLASSES = ("A2A3", "950")


def ub_class(ascend950: bool) -> str:
    """The calibration class of a device torch_npu reports as Ascend950 or not."""
    return "950" if ascend950 else "A2A3"


@dataclasses.dataclass(frozen=True)
class Layout:
    """What decides one launch config's UB footprint."""

    block_m: int  # rows per block (X0BLOCK_SUB)
    cols: int  # columns per tile (R1BLOCK_SUB; the whole row when persistent)
    row_elem_bytes: int  # bytes per element of every [M, N] tensor loaded or stored
    partials: int  # column reductions (K)
    looped: bool  # column tiles walked by a loop (partials added into the workspace)
    multibuffer: bool  # triton-ascend double-buffers the loads and stores
    ub_class: str = "A2A3"  # UB_CLASSES: "A2A3" (Atlas A2/A3) or "950"

    @property
    def family(self) -> str:
        """Calibration key: kernels whose footprints scale alike."""
        kind = "looped" if self.looped else "persistent"
        return (f"{self.ub_class}-{kind}-k{self.partials}-e{self.row_elem_bytes}"
                f"-mb{int(self.multibuffer)}")


@dataclasses.dataclass(frozen=True)
class Parts:
    """The raw estimate's terms, in bytes."""

    tile: int
    vector: int
    rows: int

    @property
    def total(self) -> int:
        return self.tile + self.vector + self.rows


def _aligned(cols: int, elem_bytes: int) -> int:
    per = max(1, _ALIGN_BYTES // max(1, elem_bytes))
    return -(-cols // per) * per


def parts(layout: Layout) -> Parts:
    cols = _aligned(layout.cols, 4)
    io = layout.row_elem_bytes * (2 if layout.multibuffer else 1)
    tile = layout.block_m * cols * (io + 4 * FP32_TEMPS)
    vector = cols * 4 * (layout.partials * (2 if layout.looped else 1) + 2)
    rows = layout.block_m * 4 * 4  # per-row statistics (sums, rstd, mean)
    return Parts(tile, vector, rows)


def raw_estimate(layout: Layout) -> int:
    """Bytes of the buffers live in one iteration, before calibration."""
    return parts(layout).total


class CalibrationMissing(RuntimeError):
    """The calibration table is missing or unreadable: every estimate would otherwise
    silently use coefficients 1.0. Planning turns it into an ``internal_error`` decline."""


@functools.cache
def calibration() -> dict[str, dict[str, Any]]:
    """family -> {"tile": a, "vector": b, "points": [...]}; CalibrationMissing when the
    table is missing or unreadable."""
    path = CALIBRATION_FILE
    try:
        families = json.loads(path.read_text())["families"]
        if not isinstance(families, dict):
            raise TypeError(f"'families' is a {type(families).__name__}, not an object")
    except FileNotFoundError:
        raise CalibrationMissing(
            f"NPU UB calibration table {path} is missing: reinstall inductor_ext; the "
            "wheel must ship it") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CalibrationMissing(
            f"NPU UB calibration table {path} is unreadable ({exc!r}): reinstall "
            "inductor_ext; the wheel must ship it") from exc
    return families


def coefficients(layout: Layout) -> tuple[float, float]:
    """(a, b) for the layout's family; unmeasured: the largest of each over its UB class's
    families measured at two row lengths or more (at a single short row the vector term
    also soaks up fixed overheads, which would make b meaningless elsewhere), else 1."""
    table = calibration()
    entry = table.get(layout.family)
    if entry is not None:
        return float(entry["tile"]), float(entry["vector"])
    same_class = [e for key, e in table.items() if key.startswith(f"{layout.ub_class}-")
                  and len({p["layout"]["cols"] for p in e["points"]}) >= 2]
    if not same_class:
        return 1.0, 1.0
    return (max(1.0, *(float(e["tile"]) for e in same_class)),
            max(1.0, *(float(e["vector"]) for e in same_class)))


def estimate(layout: Layout) -> int:
    """Our UB estimate of a launch config, calibrated to cover bishengir's plan."""
    a, b = coefficients(layout)
    p = parts(layout)
    return int(a * p.tile + b * p.vector + p.rows)


def fits(layout: Layout, ub_bytes: int) -> bool:
    return estimate(layout) <= ub_bytes


def fit(points: Sequence[tuple[Parts, int]], margin: float = MARGIN
        ) -> tuple[float, float]:
    """Smallest (a, b) in 1/100 steps with a * tile + b * vector + rows >= planned *
    (1 + margin) at every point, minimising the estimates' sum: a grid over a, the least
    b each a allows. a stays >= 1 (the raw tile bytes are a floor: the [M, N] tiles exist
    at any block size), so a family measured at few block sizes does not extrapolate to
    larger blocks on a vector term alone."""
    if not points:
        return 1.0, 1.0
    best: tuple[float, float, float] | None = None
    for step in range(100, 801):
        a = step / 100
        need = max((planned * (1 + margin) - p.rows - a * p.tile) / max(1, p.vector)
                   for p, planned in points)
        b = max(0.0, math.ceil(need * 100) / 100)
        total = sum(a * p.tile + b * p.vector for p, _ in points)
        if best is None or total < best[0]:
            best = (total, a, b)
    assert best is not None
    return best[1], best[2]


def fit_families(points: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The calibration table from measured points ({"layout": Layout fields,
    "planned": bytes, ...}), one entry per family."""
    families: dict[str, list[dict[str, Any]]] = {}
    for point in points:
        layout = Layout(**point["layout"])
        families.setdefault(layout.family, []).append(point)
    out = {}
    for family, group in sorted(families.items()):
        a, b = fit([(parts(Layout(**p["layout"])), int(p["planned"])) for p in group])
        out[family] = {"tile": a, "vector": b, "points": group}
    return out
