"""The UB model of kernels on torch_npu's class (inductor_ext.targets.ascend.ub) against the
calibration table measured with bishengir-compile (ub_calibration.json, written by
tests/ascend/check_npu.py --calibration). Pure Python: runs in any venv."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from inductor_ext.plan import DeviceInfo, PlanOptions, ShapeInfo
from inductor_ext.targets.ascend import plan as ascend_plan
from inductor_ext.targets.ascend import ub as npu_ub
from inductor_ext.targets.ascend.tuning import AscendTuning

UB = {"A2A3": 192 * 1024, "950": 256 * 1024}


def _points():
    return [(family, point) for family, entry in npu_ub.calibration().items()
            for point in entry["points"]]


def test_calibration_table_is_there_and_covers_both_ub_classes():
    families = npu_ub.calibration()
    assert families, f"no calibration table at {npu_ub.CALIBRATION_FILE}"
    assert {key.split("-")[0] for key in families} == set(npu_ub.UB_CLASSES)
    assert sum(len(e["points"]) for e in families.values()) >= 100


def test_estimate_is_conservative_against_bishengir():
    """At every config bishengir planned (or refused, with the bytes it asked for), our
    calibrated estimate is at least that much."""
    under = []
    for family, point in _points():
        layout = npu_ub.Layout(**point["layout"])
        assert layout.family == family
        if npu_ub.estimate(layout) < point["planned"]:
            under.append((point["case"], family, npu_ub.estimate(layout), point["planned"]))
    assert not under, under


def test_configs_bishengir_refused_are_not_planned():
    """A config that overflowed in bishengir estimates over its SoC's UB, so the planner
    never offers it again."""
    overflowed = [p for _, p in _points() if p.get("overflow")]
    for point in overflowed:
        layout = npu_ub.Layout(**point["layout"])
        assert not npu_ub.fits(layout, UB[layout.ub_class]), point


def test_fit_is_the_tight_conservative_envelope():
    parts = [npu_ub.Parts(tile=1000 * k, vector=100, rows=0) for k in (1, 2, 4)]
    planned = [2000, 3800, 7600]
    a, b = npu_ub.fit(list(zip(parts, planned)), margin=0.0)
    estimates = [a * p.tile + b * p.vector for p in parts]
    assert all(e >= want for e, want in zip(estimates, planned))
    assert a >= 1.0 and max(e - want for e, want in zip(estimates, planned)) <= 300


def test_unmeasured_family_takes_its_socs_largest_coefficients():
    known = npu_ub.Layout(block_m=4, cols=768, row_elem_bytes=12, partials=1, looped=False,
                          multibuffer=True, ub_class="A2A3")
    unknown = dataclasses.replace(known, partials=7)
    assert unknown.family not in npu_ub.calibration()
    a, b = npu_ub.coefficients(unknown)
    soc = [e for k, e in npu_ub.calibration().items() if k.startswith("A2A3-")
           and len({p["layout"]["cols"] for p in e["points"]}) >= 2]
    assert a == max(1.0, *(e["tile"] for e in soc)) and b == max(1.0, *(e["vector"] for e in soc))
    assert 1.0 <= b < 5  # not the vector term of a family seen at one short row only


@pytest.mark.parametrize("N,es,columns", [(128, 2, 1), (768, 4, 2), (4096, 2, 2),
                                          (16384, 2, 1), (8192, 4, 2)])
def test_plans_on_torch_npu_fit_the_calibrated_estimate(N, es, columns):
    shape = ShapeInfo(M_hint=8192, M_static=True, N=N, num_columns=columns, elem_bytes=es,
                      shared_bytes=0, total_bytes=0, unfused_bytes=0, row_elem_bytes=3 * es,
                      device=torch.device("cpu"))
    device = DeviceInfo(type="npu", cores=40, ub_bytes=UB["A2A3"], npu_backend="torch_npu")
    plan = ascend_plan.plan(shape, device, AscendTuning(), PlanOptions())
    assert 1 <= len(plan.configs) <= AscendTuning().npu_max_configs
    layouts = [npu_ub.Layout(block_m=cfg["block_m"], cols=cfg.get("cols", N),
                             row_elem_bytes=3 * es, partials=columns,
                             looped=plan.column_tiled, multibuffer=cfg["multibuffer"])
               for cfg in map(dict, plan.configs)]
    assert all(npu_ub.fits(layout, UB["A2A3"]) for layout in layouts)
    first = layouts[0]  # the largest block that fits with multibuffer: twice its rows do not
    assert first.multibuffer and plan.block_m == first.block_m
    assert first.block_m == 64 or not npu_ub.fits(
        dataclasses.replace(first, block_m=2 * first.block_m), UB["A2A3"])


def test_the_plugin_options_win_over_the_device():
    device = DeviceInfo(type="npu", cores=40, ub_bytes=UB["950"], npu_backend="torch_npu",
                        ascend950=True)
    shape = ShapeInfo(M_hint=8192, M_static=True, N=768, num_columns=1, elem_bytes=4,
                      shared_bytes=0, total_bytes=0, unfused_bytes=0, row_elem_bytes=12,
                      device=torch.device("cpu"))
    plan = ascend_plan.plan(shape, device, AscendTuning(), PlanOptions())
    # torch_npu reports 256 KiB on Ascend950; plans keep to the 248 KiB its compiler allows.
    assert dict(plan.extra)["ub_budget"] == AscendTuning().ascend950_kernel_ub_bytes == 253_952
    assert plan.programs == 40
    whole = ascend_plan.plan(shape, device, AscendTuning(ascend950_kernel_ub_bytes=UB["950"]),
                             PlanOptions())
    assert dict(whole.extra)["ub_budget"] == UB["950"]
    small = ascend_plan.plan(shape, device, AscendTuning(),
                             PlanOptions(ascend_ub_bytes=65536, ascend_vector_cores=3))
    assert dict(small.extra)["ub_budget"] == 65536 and small.programs == 3
    assert small.block_m < plan.block_m
    no_mb = ascend_plan.plan(shape, device, AscendTuning(multibuffer=False), PlanOptions())
    assert not any(dict(c)["multibuffer"] for c in no_mb.configs)
