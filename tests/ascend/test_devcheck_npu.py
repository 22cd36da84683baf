"""`python -m inductor_ext --check`'s check inside the torch_npu emulation: the CPU device
served by torch_npu's backend, as a user's NPU would be (kernels in triton-ascend's
interpreter, so the times are no measurements and the report says so).

    TRITON_INTERPRET=1 .npu-venv/bin/python -m pytest -q tests/ascend/test_devcheck_npu.py
"""

from __future__ import annotations

import csv

import pytest
import torch

from inductor_ext import devcheck
from tests.support import npu_emulation as emu

pytestmark = pytest.mark.skipif(not emu.can_emulate(),
                                reason=str(emu.emulation_unavailable_reason()))

SHAPES = [devcheck.Shape("rms", 64, 128, torch.bfloat16),
          devcheck.Shape("ln", 64, 96, torch.float32)]


def test_the_emulated_npu_is_found_and_named(npu):
    assert devcheck.default_device() == "cpu"
    at = devcheck.where("cpu")
    assert at.emulated_npu and at.interpreted
    assert "NOT a measurement" in at.timing and "triton-ascend" in at.interpreter


def test_check_on_the_emulated_npu(npu, tmp_path):
    """always_fuse: each shape fused on the Ascend target, gradients within tolerance,
    positive times marked as no measurement, the report naming torch_npu as "off"."""
    rows = devcheck.run_check("cpu", SHAPES, always_fuse=True)
    for row in rows:
        assert row.error == "" and row.plugin == "fused", row
        assert row.target == "ascend", row
        assert row.ok, row.errors
        assert row.off_us > 0 and row.on_us > 0
    assert rows[1].errors["db"] is not None and rows[0].errors["db"] is None
    at = devcheck.where("cpu")
    out = "\n".join(devcheck.report(rows, at, always_fuse=True))
    assert "off: torch_npu's backend" in out
    assert "NOTE: the emulated NPU runs the kernels in triton-ascend's interpreter" in out
    assert "2 of 2 shapes within tolerance; 2 fused" in out
    path = tmp_path / "check.csv"
    devcheck.write_csv(str(path), rows, at)
    with open(path, newline="") as f:
        written = list(csv.DictReader(f))
    assert [(r["op"], r["plugin"], r["target"], r["ok"]) for r in written] == [
        ("rms", "fused", "ascend", "True"), ("ln", "fused", "ascend", "True")]
    assert all("triton-ascend" in r["timing"] for r in written)


def test_default_options_say_what_the_cost_model_decided(npu):
    """Without always_fuse the Ascend cost model decides: fused, or declined with its
    reason and the three times it compared."""
    [row] = devcheck.run_check("cpu", SHAPES[:1])
    assert row.error == "" and row.ok, row
    assert row.plugin in ("fused", "declined"), row
    if row.plugin == "declined":
        assert row.reason == "not_profitable" and " us" in row.detail, row
    else:
        assert row.detail, row  # the model's verdict
