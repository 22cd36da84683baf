"""SoC facts the Ascend plan is built on: what torch_npu's Inductor config reports, else
what the SoC name says (torch_npu 2.11's config has no `ub_size` nor `is_ascend950`),
said once and recorded with the decision; SoCs triton-ascend does not target declined
with a reason of their own."""

from __future__ import annotations

import pathlib
import sys
import types

import pytest

from inductor_ext.plan import DeviceInfo, PlanOptions
from inductor_ext.reasons import Reason
from inductor_ext.targets.ascend import npu
from inductor_ext.targets.ascend import plan as ascend_plan
from inductor_ext.targets.ascend.tuning import AscendTuning

CONFIG = "torch_npu._inductor.config"


def _config(name: str, **facts: object) -> types.ModuleType:
    cfg = types.ModuleType(CONFIG)
    cfg.prop = types.SimpleNamespace(name=name)  # type: ignore[attr-defined]
    for key, value in facts.items():
        setattr(cfg, key, value)
    return cfg


def test_facts_torch_npu_reports_are_taken_as_they_are(monkeypatch):
    monkeypatch.setitem(sys.modules, CONFIG, _config(
        "Ascend910B3", ub_size=192 * 1024, is_ascend950=False, num_vector_core=40))
    facts = npu.soc_facts()
    assert (facts.ub_bytes, facts.ascend950, facts.vector_cores) == (196608, False, 40)
    assert facts.assumed == ()


def test_ascend950_facts_come_from_the_name_where_the_config_lacks_them(monkeypatch):
    """torch_npu 2.11 on an Ascend950: the 950's UB and class, not the A2/A3 default;
    the plan's budget is then the 950's compiler limit."""
    monkeypatch.setitem(sys.modules, CONFIG, _config("Ascend950PR_9599", num_vector_core=72))
    facts = npu.soc_facts()
    assert facts.ascend950 and facts.ub_bytes == 256 * 1024
    assert len(facts.assumed) == 2
    assert all("Ascend950PR_9599" in line for line in facts.assumed)
    device = DeviceInfo(type="npu", name=facts.name, cores=facts.vector_cores,
                        ub_bytes=facts.ub_bytes, npu_backend="torch_npu",
                        ascend950=facts.ascend950, assumed=facts.assumed)
    tuning = AscendTuning()
    assert ascend_plan.ub_bytes(device, tuning, PlanOptions()) == \
        tuning.ascend950_kernel_ub_bytes


def test_a2_facts_from_the_name_are_recorded_with_the_decision(monkeypatch):
    monkeypatch.setitem(sys.modules, CONFIG, _config("Ascend910B3", num_vector_core=40))
    facts = npu.soc_facts()
    assert not facts.ascend950 and facts.ub_bytes == 192 * 1024
    assert facts.assumed and "ub_size" in facts.assumed[-1]
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
    from ascend_model import shape_info

    device = DeviceInfo(type="npu", name=facts.name, cores=40, ub_bytes=facts.ub_bytes,
                        npu_backend="torch_npu", assumed=facts.assumed)
    shape = shape_info("rms", 4096, 4096, 2)
    tuning, options = AscendTuning(), PlanOptions()
    plan = ascend_plan.plan(shape, device, tuning, options)
    _, detail = ascend_plan.profitable(shape, plan, device, tuning, options)
    assert "SoC facts assumed: " in detail and "ub_size" in detail


@pytest.mark.parametrize("name", ["Ascend310P3", "Ascend310P1", "Ascend310B1",
                                  "Ascend310B4", "Ascend910A", "Ascend910PremiumA"])
def test_socs_triton_ascend_does_not_target_are_unsupported(name):
    why = ascend_plan.device_support(DeviceInfo(type="npu", name=name,
                                                npu_backend="torch_npu"))
    assert name in why and "triton-ascend" in why
    assert Reason.UNSUPPORTED_DEVICE.value == "unsupported_device"


@pytest.mark.parametrize("name", ["Ascend910B1", "Ascend910B3", "Ascend910B4_1",
                                  "Ascend910_9391", "Ascend950", "Ascend950PR_9599"])
def test_targeted_socs_are_supported(name):
    assert ascend_plan.device_support(DeviceInfo(type="npu", name=name)) == ""
