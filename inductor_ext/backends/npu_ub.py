"""Unified Buffer use of the fused kernel built on torch_npu's NPUIndexTritonKernel: our
estimate of a launch config's footprint, and the check that it fits a SoC's UB.

The estimate counts the tiles one iteration of the row loop keeps live; the calibration
table (``npu_ub_calibration.json``, measured by ``tests/ascend/check_npu.sh`` from
bishengir-compile's memory plan) records, per kernel family, how the planned high-water
compares with it, and the estimate is scaled by the worst ratio seen so it stays
conservative.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib

#: Narrowest column tile of a looped (column-tiled) row.
MIN_COLUMN_TILE = 256
#: fp32 temporaries per tile element that the row math keeps live beside the loads.
FP32_TEMPS = 3
_ALIGN_BYTES = 32
CALIBRATION_FILE = pathlib.Path(__file__).with_name("npu_ub_calibration.json")


@dataclasses.dataclass(frozen=True)
class Layout:
    """What decides one launch config's UB footprint."""

    block_m: int  # rows per block (X0BLOCK_SUB)
    cols: int  # columns per tile (R1BLOCK_SUB; the whole row when persistent)
    row_elem_bytes: int  # bytes per element of every [M, N] tensor loaded or stored
    partials: int  # column reductions (K)
    looped: bool  # column tiles walked by a loop (partials added into the workspace)
    multibuffer: bool  # triton-ascend double-buffers the loads and stores

    @property
    def family(self) -> str:
        """Calibration key: kernels whose footprints scale alike."""
        kind = "looped" if self.looped else "persistent"
        return f"{kind}-k{self.partials}-e{self.row_elem_bytes}"


def _aligned(cols: int, elem_bytes: int) -> int:
    per = max(1, _ALIGN_BYTES // max(1, elem_bytes))
    return -(-cols // per) * per


def raw_estimate(layout: Layout) -> int:
    """Bytes of the tiles live in one iteration, before calibration."""
    cols = _aligned(layout.cols, 4)
    io = layout.block_m * cols * layout.row_elem_bytes * (2 if layout.multibuffer else 1)
    temps = layout.block_m * cols * 4 * FP32_TEMPS
    # Partials: a [1, cols] fp32 accumulator each (persistent), or the workspace tile read
    # back and the sum added to it (looped).
    partials = layout.partials * cols * 4 * (2 if layout.looped else 1)
    rows = layout.block_m * 4 * 4  # per-row statistics (sums, rstd, mean)
    return io + temps + partials + rows


@functools.cache
def calibration() -> dict[str, dict[str, float]]:
    """family -> {"ratio": worst planned / raw estimate seen, ...} (empty when absent)."""
    if not CALIBRATION_FILE.is_file():
        return {}
    return json.loads(CALIBRATION_FILE.read_text()).get("families", {})


def scale(family: str) -> float:
    """Factor applied to the raw estimate: the family's worst measured ratio, else the
    worst over all families, never below 1."""
    table = calibration()
    entry = table.get(family)
    if entry is not None:
        return max(1.0, float(entry["ratio"]))
    return max([1.0, *(float(e["ratio"]) for e in table.values())])


def estimate(layout: Layout) -> int:
    """Our UB estimate of a launch config, calibrated to be at least bishengir's plan."""
    return int(raw_estimate(layout) * scale(layout.family))


def fits(layout: Layout, ub_bytes: int) -> bool:
    return estimate(layout) <= ub_bytes
