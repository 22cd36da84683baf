"""Fixtures of the torch_npu emulation tests (tests/ascend): one emulated 910B3 session per
module, and per test a clean compile state with the kernels torch_npu's schedulings emit."""

from __future__ import annotations

import pytest
import torch
from npu_cases import recorded_kernels, session

import inductor_ext
from tests.support import npu_emulation as emu


@pytest.fixture(scope="module")
def npu():
    """One 910B3 session for the module (importing torch_npu's backend takes seconds)."""
    with session() as package:
        yield package


@pytest.fixture
def kernels(npu):
    """[(class, kernel object, source)] of every Triton kernel torch_npu's schedulings
    generate (ours included: it subclasses NPUIndexTritonKernel), after a dynamo reset,
    zeroed counters and an emptied launch record of the emulated device (its timer back
    to the default)."""
    torch._dynamo.reset()
    inductor_ext.metrics.reset()
    device = emu.virtual_device()
    device.launches.clear()
    device.timer = emu.hashed_timer
    try:
        with recorded_kernels() as seen:
            yield seen
    finally:
        device.timer = emu.hashed_timer
        torch._dynamo.reset()


@pytest.fixture
def tables(tmp_path, monkeypatch):
    """The plugin's metric tables on, written to a fresh working directory (read them with
    test_npu_cost.table_rows)."""
    monkeypatch.chdir(tmp_path)
    with torch._inductor.config.patch(
            enabled_metric_tables="mix_order_fusion,mix_order_reject"):
        yield tmp_path
