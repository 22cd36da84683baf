"""The plugin on torch_npu's other configurations, each in its own emulation session
(tests.support.npu_emulation; an emulation: no NPU, kernels in triton-ascend
3.2.0's interpreter): NPU_DEVICE_LIMIT, Ascend950, and the triton_experimental backend,
which is declined. Runs in the venv of tests/ascend/setup_npu_venv.sh, skips elsewhere.

    TRITON_INTERPRET=1 .npu-venv/bin/python -m pytest -q tests/ascend/test_npu_backends.py
"""

from __future__ import annotations

import contextlib
import sys

import pytest
import torch
from npu_cases import boom, check_grads, fused_kernels, plugin_on, recorded_kernels, session

import inductor_ext
from inductor_ext.targets.ascend.tuning import AscendTuning
from tests.support import npu_emulation as emu
from tests.support import reference

pytestmark = pytest.mark.skipif(not emu.can_emulate(),
                                reason=str(emu.emulation_unavailable_reason()))


def test_vector_cores_from_npu_device_limit(monkeypatch):
    monkeypatch.setenv("NPU_DEVICE_LIMIT", "10,20")
    with session():
        from torch_npu._inductor import config as npu_config

        assert npu_config.num_vector_core == 20
        with recorded_kernels() as seen, plugin_on():
            check_grads("rms", 2048, 128)
    [(_, kernel, _)] = fused_kernels(seen)
    assert kernel.plan.programs == 20
    assert kernel.inductor_meta["fixed_grid"] == ["20", "1", "1"]


def test_ascend950_session():
    with session(soc="950"), recorded_kernels() as seen, plugin_on():
        reported_ub = sys.modules["torch_npu._inductor.config"].ub_size
        check_grads("ln", 64, 768, torch.bfloat16)
    [(_, kernel, src)] = fused_kernels(seen)
    # torch_npu's config says 256 KiB; the plan keeps to the 248 KiB bishengir allows.
    assert reported_ub == 256 * 1024
    assert dict(kernel.plan.extra)["ub_budget"] == AscendTuning().ascend950_kernel_ub_bytes
    assert kernel.inductor_meta["npu_kernel_type"] == "simt_template"
    assert all(c["compile_mode"] == "simd_simt_template"
               for c in kernel.inductor_meta["inductor_ext_configs"])


def test_int64_indices_on_ascend950():
    """On Ascend950 torch_npu keeps int64 indices (casting program ids); the fused
    kernel's own index math follows the kernel's index dtype."""
    from torch._inductor.codegen.simd_kernel_features import SIMDKernelFeatures

    select = SIMDKernelFeatures.select_index_dtype
    # As for tensors past 2**31 elements (too large for the interpreter).
    SIMDKernelFeatures.select_index_dtype = lambda self: torch.int64
    try:
        with session(soc="950"), recorded_kernels() as seen, plugin_on():
            check_grads("rms", 33, 128)
    finally:
        SIMDKernelFeatures.select_index_dtype = select
    [(_, _, src)] = fused_kernels(seen)
    assert "x0_offset = tl.program_id(0).to(tl.int64) * X0BLOCK" in src
    assert "(tl.program_id(0).to(tl.int64) * 1 + 0)" in src


# ---- torch_npu backends the plugin does not generate for -----------------------------


def _wrappers(monkeypatch) -> list[str]:
    """Every wrapper module source Inductor generates from here on."""
    from torch._inductor.graph import GraphLowering

    out: list[str] = []
    original = GraphLowering.codegen

    def codegen(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        code = result[0]
        out.append(getattr(code, "value", code))
        return result

    monkeypatch.setattr(GraphLowering, "codegen", codegen)
    return out


def _compile_backward_only() -> None:
    """Compile (and try to run) the written-out RMSNorm backward: under triton_experimental
    triton-ascend 3.2.0 cannot load or run its kernels (no extract_slice), so running may
    fail after the wrapper was generated."""
    M, N = 64, 128
    x, w, dy = torch.randn(M, N), torch.randn(N), torch.randn(M, N)
    rstd = torch.rand(M, 1) + 0.5
    with contextlib.suppress(Exception):
        torch.compile(reference.rms_backward, dynamic=False)(x, w, dy, rstd)


@pytest.mark.parametrize("inject", [False, True])
def test_triton_experimental_declined_with_backend_named(monkeypatch, inject):
    """Declined as a whole graph, with the backend named; the wrapper is torch_npu's own
    (identical to a plugin-off compile), also when the hook itself fails."""
    from inductor_ext import metrics
    from inductor_ext.scheduler import legality

    details = []
    record_reject = metrics.record_reject

    def record(reason, *args, **kwargs):
        details.append((reason, kwargs.get("detail", "")))
        return record_reject(reason, *args, **kwargs)

    monkeypatch.setattr(metrics, "record_reject", record)
    with session(backend="triton_experimental"):
        wrappers = _wrappers(monkeypatch)
        _compile_backward_only()
        baseline = list(wrappers)
        wrappers.clear()
        torch._dynamo.reset()
        inductor_ext.metrics.reset()
        if inject:  # the hook itself fails: recorded, schedule kept
            monkeypatch.setattr(legality, "unsupported_backends", boom)
        with plugin_on():
            _compile_backward_only()
    assert baseline, "no wrapper was generated"
    assert _without_ids(wrappers) == _without_ids(baseline)
    assert inductor_ext.metrics.mix_order_kernels == 0
    if inject:
        assert inductor_ext.metrics.rejected_pairs == {"internal_error": 1}
    else:
        assert inductor_ext.metrics.rejected_pairs == {"unsupported_backend": 1}
        [(reason, detail)] = details
        assert "torch_npu backend 'triton_experimental'" in detail
        assert "TORCHINDUCTOR_NPU_BACKEND=triton_experimental" in detail


def _without_ids(wrappers: list[str]) -> list[str]:
    """Wrapper sources without the compile counter line (`# AOT ID: ['3_inference']`)."""
    return ["\n".join(line for line in w.splitlines() if not line.startswith("# AOT ID"))
            for w in wrappers]


def test_unsupported_backend_details_name_the_backend(monkeypatch):
    from inductor_ext.targets.ascend import npu

    def scheduling_in(module: str) -> type:
        return type("SomeScheduling", (), {"__module__": module})

    monkeypatch.setenv(npu.BACKEND_ENV, "mlir")
    for module, backend in [
            ("torch_npu._inductor.triton_experimental.codegen.triton", "triton_experimental"),
            ("torch_npu._inductor.ascend_npu_ir.ascend_npu_ir.npu.npu_inductor_plugin", "mlir"),
            ("torch_npu._inductor.dvm.mlir_fusion", "dvm"),
            ("torch_npu._inductor.ascendc", "ascendc"),
            ("torch_npu._inductor.future_backend", "mlir")]:  # unknown: named by the env
        detail = npu.unsupported_detail(scheduling_in(module))
        assert detail and f"torch_npu backend {backend!r}" in detail, (module, detail)
    assert npu.unsupported_detail(scheduling_in("torch_npu._inductor.codegen.scheduling")) \
        is None
    assert npu.unsupported_detail(scheduling_in("torch._inductor.codegen.triton")) is None
