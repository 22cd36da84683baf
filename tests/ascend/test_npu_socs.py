"""Every SoC of the table (tests/support/npu_socs.py) in the torch_npu emulation: what the
emulated device reports is what torch_npu's Inductor config then reads (vector and cube
cores, ub_size, is_ascend950), and the plugin plans with those numbers (a big M gets one
program per vector core, tiles sized to torch_npu's UB). One emulation session per SoC;
on one SoC per (vector cores, UB) class a norm backward is compiled and checked against
float64 too. Runs in the venv of tests/ascend/setup_npu_venv.sh, skips elsewhere (the table
checks run anywhere).

    TRITON_INTERPRET=1 .npu-venv/bin/python -m pytest -q tests/ascend/test_npu_socs.py
"""

from __future__ import annotations

import pytest
import torch
from npu_cases import check_grads, fused_kernels, plugin_on, recorded_kernels, session

from inductor_ext.plan import PlanOptions, ShapeInfo
from inductor_ext.plan.device import device_info
from inductor_ext.targets.ascend import plan as ascend_plan
from inductor_ext.targets.ascend import ub as npu_ub
from inductor_ext.targets.ascend.tuning import AscendTuning
from tests.support import npu_emulation as emu
from tests.support import npu_socs

needs_emulation = pytest.mark.skipif(not emu.can_emulate(),
                                     reason=str(emu.emulation_unavailable_reason()))

#: Rows enough for every program of the largest SoC (72 vector cores) to get blocks.
BIG_M = 1 << 20


def _shape(N: int = 768, M: int = BIG_M) -> ShapeInfo:
    return ShapeInfo(M_hint=M, M_static=True, N=N, num_columns=1, elem_bytes=4,
                     shared_bytes=0, total_bytes=0, unfused_bytes=0, row_elem_bytes=12,
                     device=torch.device("cpu"))


# ---- the table itself (no emulation) -----------------------------------------------------


def test_table_covers_torch_npus_inductor_socs():
    """The A2 (220-225), A3 (250-256) and Ascend950 (260) ids of torch_npu's enum, each
    with a source; only the 910_9363 has no core counts (no primary source)."""
    ids = [s.soc_id for s in npu_socs.SOCS]
    assert ids == [*range(220, 226), *range(250, 257), 260]
    assert [s.name for s in npu_socs.SOCS if not s.known] == ["Ascend910_9363"]
    for soc in npu_socs.known():
        assert soc.vector_cores == 2 * soc.cube_cores, soc  # 1 cube + 2 vector per AI core
        assert soc.bishengir_target and "bishengir-opt" in soc.source
        assert soc.hw_ub_bytes is not None and soc.hw_ub_bytes <= soc.ub_bytes
        assert soc.ub_class == npu_ub.ub_class(soc.ascend950)
    assert npu_socs.get("950").ub_bytes == 256 * 1024 and npu_socs.get("950").ascend950
    assert npu_socs.get("910B3").soc_id == 223 and npu_socs.get(222).name == "Ascend910B2C"


def test_classes_and_their_representatives():
    classes = npu_socs.classes()
    assert set(classes) == {(40, 192 * 1024), (48, 192 * 1024), (72, 256 * 1024)}
    reps = [s.name for s in npu_socs.representatives()]
    assert reps == ["Ascend910B1", "Ascend910B3", "Ascend950"]
    assert [npu_socs.core_count_only(npu_socs.get(r)) for r in reps] == [True, False, False]


def test_unknown_socs_are_clear_errors():
    with pytest.raises(ValueError, match="one of"):
        npu_socs.get("Ascend310P3")
    with pytest.raises(ValueError, match="unknown SoC id 240"):
        npu_socs.get(240)
    with pytest.raises(ValueError, match="no source"):
        emu._soc_id("Ascend910_9363")


def test_ub_classes_key_the_calibration():
    """The calibration's families are keyed by UB class, each measured on the SoC the table
    names for it; an A2/A3 SoC other than the 910B3 plans with the same coefficients."""
    assert {k.split("-")[0] for k in npu_ub.calibration()} == set(npu_ub.UB_CLASSES)
    assert set(npu_socs.CALIBRATED_ON) == set(npu_ub.UB_CLASSES)
    for name in ("Ascend910B1", "Ascend910_9391"):
        info = _device(npu_socs.get(name))
        assert ascend_plan.plan(_shape(), info, AscendTuning(), PlanOptions()).configs == \
            ascend_plan.plan(_shape(), _device(npu_socs.get("910B3")), AscendTuning(),
                             PlanOptions()).configs


def _device(soc: npu_socs.Soc):
    from inductor_ext.plan import DeviceInfo

    assert soc.vector_cores is not None
    return DeviceInfo(type="npu", cores=soc.vector_cores, ub_bytes=soc.ub_bytes,
                      npu_backend="torch_npu", ascend950=soc.ascend950)


# ---- each SoC in the emulation ---------------------------------------------------------


@needs_emulation
@pytest.mark.parametrize("name", [s.name for s in npu_socs.known()])
def test_emulated_soc_is_what_torch_npu_and_the_plan_see(name):
    soc = npu_socs.get(name)
    with session(soc=name):
        from torch_npu._inductor import config as npu_config
        from torch_npu.npu._backends import get_soc_version

        assert get_soc_version() == soc.soc_id
        props = torch.npu.get_device_properties(0)  # type: ignore[attr-defined]
        assert (props.name, props.vector_core_num, props.cube_core_num) == \
            (soc.name, soc.vector_cores, soc.cube_cores)
        assert npu_config.num_vector_core == soc.vector_cores
        assert npu_config.num_cube_core == soc.cube_cores
        # torch_npu 2.11's config has neither fact: the plugin derives both from the name
        # and records that it did.
        reported = hasattr(npu_config, "ub_size") and hasattr(npu_config, "is_ascend950")
        if reported:
            assert npu_config.ub_size == soc.ub_bytes
            assert npu_config.is_ascend950 == soc.ascend950
        info = device_info(torch.device("cpu"))
        assert (info.name, info.cores, info.ub_bytes, info.ascend950, info.npu_backend) == \
            (soc.name, soc.vector_cores, soc.ub_bytes, soc.ascend950, "torch_npu")
        assert bool(info.assumed) is not reported, info.assumed
        for N in (768, 16384):  # persistent and column-tiled
            plan = ascend_plan.plan(_shape(N), info, AscendTuning(), PlanOptions())
            assert plan.programs == soc.vector_cores
            # the compiler's UB, not torch_npu's (Ascend950: 248 of 256 KiB)
            assert dict(plan.extra)["ub_budget"] == soc.hw_ub_bytes
            assert dict(plan.extra)["ub_bytes"] <= soc.hw_ub_bytes


@needs_emulation
@pytest.mark.parametrize("name", [s.name for s in npu_socs.representatives()])
def test_compiled_kernel_runs_on_every_vector_core(name):
    """A norm backward with a row block for every vector core: the fused kernel's fixed
    grid is the SoC's vector cores, and its gradients match float64."""
    soc = npu_socs.get(name)
    assert soc.vector_cores is not None
    with session(soc=name), recorded_kernels() as seen, plugin_on():
        M = soc.vector_cores * AscendTuning().max_block_m
        check_grads("rms", M, 128)
    [(_, kernel, _)] = fused_kernels(seen)
    assert kernel.plan.programs == soc.vector_cores
    assert kernel.inductor_meta["fixed_grid"] == [str(soc.vector_cores), "1", "1"]
    assert dict(kernel.plan.extra)["ub_budget"] == soc.hw_ub_bytes
