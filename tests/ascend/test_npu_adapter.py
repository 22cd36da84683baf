"""The plugin through torch_npu's real Inductor backend (inductor_ext.targets.ascend.npu*), under
the CPU emulation of tests.support.npu_emulation (an emulation: kernels run in
triton-ascend 3.2.0's interpreter; no NPU, no CANN, no UB at run time).

Runs inside the venv of tests/ascend/setup_npu_venv.sh; elsewhere every test skips with the
reason. Kernel sources, classes and launch metadata are asserted as torch_npu produces
them; gradients against float64.

    TRITON_INTERPRET=1 .npu-venv/bin/python -m pytest -q tests/ascend/test_npu_adapter.py
"""

from __future__ import annotations

import ast
import contextlib
import re

import pytest
import torch
from npu_cases import boom, check_grads, fused_kernels, plugin_on

import inductor_ext
from tests.support import npu_emulation as emu
from tests.support import reference

pytestmark = pytest.mark.skipif(not emu.can_emulate(),
                                reason=str(emu.emulation_unavailable_reason()))


def test_fused_kernel_on_torch_npu_classes(kernels):
    from torch_npu._inductor.codegen.triton import NPUIndexTritonKernel

    from inductor_ext.targets.ascend.kernel import NpuMixOrderKernelMixin

    with plugin_on():
        check_grads("rms", 64, 128)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert not inductor_ext.metrics.rejected_pairs
    [(cls, kernel, src)] = fused_kernels(kernels)
    assert issubclass(cls, NPUIndexTritonKernel) and issubclass(cls, NpuMixOrderKernelMixin)
    # torch_npu's axis names; X0BLOCK is no argument but the rows each program owns.
    signature = re.search(r"def \S+\((.*)\):", src).group(1)
    assert "x0_numel, r1_numel, X0BLOCK_SUB : tl.constexpr" in signature
    assert "X0BLOCK," not in signature and "XBLOCK" not in src and "R0_BLOCK" not in src
    P = kernel.plan.programs
    assert f"X0BLOCK = (((x0_numel + X0BLOCK_SUB - 1) // X0BLOCK_SUB + {P - 1}) // {P})" in src
    assert "for loop_x0 in range(loops_x0):" in src
    assert "x0_mask" in src and "_mo_acc0 = tl.full([1, R1BLOCK_SUB]" in src
    # Launch metadata through create_inductor_meta, triton_meta as torch_npu writes it.
    meta = kernel.inductor_meta
    assert meta["grid_type"] == "FixedGrid" and meta["fixed_grid"] == [str(P), "1", "1"]
    assert meta["runtime_block_arg_names"] == () and meta["axis_names"] == ["x0", "r1"]
    assert kernel.triton_meta["mix_mode"] == "aiv"
    configs = meta["inductor_ext_configs"]
    assert configs and all(c["compile_mode"] == "simd" and "X0BLOCK_SUB" in c
                           and isinstance(c["multibuffer"], bool) for c in configs)
    assert "@npu_mix_order_autotune(" in src and "@triton_heuristics." not in src
    ast.parse(src.replace("Placeholder.KERNEL_NAME", "k"))


def test_index_analysis_sees_the_column_bodies(npu):
    """The rows-first column bodies are in the kernel's node_schedule, and torch_npu's
    decide_codegen_dims_in_kernel transformed their indexing (indexing_map is set by it)."""
    from inductor_ext.targets.ascend import kernel as npu_kernel

    made = []
    original = npu_kernel.NpuKernelAdapter.make_kernel

    def make_kernel(self, scheduling, node, node_schedule, columns):
        kernel = original(self, scheduling, node, node_schedule, columns)
        made.append((kernel, columns))
        return kernel

    npu_kernel.NpuKernelAdapter.make_kernel = make_kernel
    try:
        torch._dynamo.reset()
        with plugin_on():
            check_grads("ln", 33, 256)
    finally:
        npu_kernel.NpuKernelAdapter.make_kernel = original
    [(kernel, columns)] = made
    assert len(columns) == 2  # dw, db
    for cb in columns:
        assert any(entry is cb.owner for entry in kernel.node_schedule)
        assert cb.owner._body is cb.body and cb.owner.get_ranges() == tuple(cb.ranges)
        assert cb.body.indexing_map, "torch_npu's analysis did not index the column body"
        assert set(map(str, cb.body.indexing_map)) <= {"x0", "r1"}


def test_column_tiled_row(kernels):
    with plugin_on():
        check_grads("ln", 33, 16384, torch.bfloat16)
    [(cls, kernel, src)] = fused_kernels(kernels)
    assert kernel.plan.column_tiled
    assert "X0BLOCK_SUB : tl.constexpr, R1BLOCK_SUB : tl.constexpr" in src
    assert src.count("for loop_r1 in range(loops_r1):") == 2  # statistics, then dx
    assert "tl.store(_mo_ws0, tl.load(_mo_ws0, r1_mask, other=0.0) +" in src
    assert all("R1BLOCK_SUB" in c for c in kernel.inductor_meta["inductor_ext_configs"])


@pytest.mark.parametrize("op,N,M,dtype", [("rms", 768, 33, torch.float16),
                                          ("ln_nobias", 4096, 64, torch.float32),
                                          ("ln", 128, 33, torch.bfloat16)])
def test_norm_backward_numerics(kernels, op, N, M, dtype):
    with plugin_on():
        check_grads(op, M, N, dtype)
    assert len(fused_kernels(kernels)) == 1


def test_ub_budget_and_configs_follow_the_calibrated_estimate(kernels):
    from inductor_ext.targets.ascend import ub as npu_ub

    with plugin_on():
        check_grads("rms", 64, 768)
    [(cls, kernel, src)] = fused_kernels(kernels)
    extra = dict(kernel.plan.extra)
    assert extra["ub_budget"] == 192 * 1024 and extra["backend"] == "torch_npu"
    for cfg in kernel.plan.configs:
        cfg = dict(cfg)
        layout = npu_ub.Layout(block_m=cfg["block_m"], cols=768,
                               row_elem_bytes=extra["row_elem_bytes"], partials=1,
                               looped=False, multibuffer=cfg["multibuffer"])
        assert npu_ub.estimate(layout) <= 192 * 1024
        bigger = npu_ub.Layout(**{**layout.__dict__, "block_m": 4 * cfg["block_m"]})
        assert cfg["block_m"] >= 64 or npu_ub.estimate(bigger) > 192 * 1024 or \
            any(dict(c)["block_m"] > cfg["block_m"] for c in kernel.plan.configs)


# ---- plugin off, declines, fallbacks -----------------------------------------------------


def _sources(kernels) -> list[str]:
    return [src for _, _, src in kernels]


def test_plugin_off_kernels_are_torch_npus_own(kernels):
    check_grads("ln", 64, 256)
    baseline = _sources(kernels)
    assert baseline and all(not cls.__name__.startswith("MixOrder") for cls, _, _ in kernels)
    kernels.clear()
    torch._dynamo.reset()
    inductor_ext.enable()
    inductor_ext.disable()
    check_grads("ln", 64, 256)
    assert _sources(kernels) == baseline
    kernels.clear()
    torch._dynamo.reset()
    # On, but declining (not profitable at this size): torch_npu's kernels, unchanged.
    with torch._inductor.config.patch(inductor_ext.options()):
        check_grads("ln", 64, 256)
    assert inductor_ext.metrics.rejected_pairs["not_profitable"] == 1
    assert _sources(kernels) == baseline


def test_float64_declined_with_reason(kernels):
    """float64 partials need float64 vector math, which Ascend lacks: declined before
    codegen. torch_npu's own kernels cannot run float64 in triton-ascend's interpreter
    either, so the (written-out) backward is compiled and its run's failure ignored."""
    M, N = 33, 128
    args = [torch.randn(M, N), torch.randn(N), torch.randn(M, N), torch.rand(M, 1) + 0.5]
    with plugin_on(), contextlib.suppress(Exception):
        torch.compile(reference.rms_backward, dynamic=False)(*[a.double() for a in args])
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs["unsupported_dtype"] >= 1
    assert not fused_kernels(kernels)


@pytest.mark.parametrize("stage", ["add_partial", "after_define_kernel", "make_kernel"])
def test_codegen_failure_falls_back_to_torch_npu_kernels(kernels, monkeypatch, stage):
    from inductor_ext import diagnostics
    from inductor_ext.targets.ascend import kernel as npu_kernel

    if stage == "add_partial":
        monkeypatch.setattr(npu_kernel.NpuMixOrderKernelMixin, "add_partial", boom)
    elif stage == "make_kernel":
        monkeypatch.setattr(npu_kernel.NpuKernelAdapter, "make_kernel", boom)
    else:  # the kernel is already in the wrapper when this fails
        original = npu_kernel.NpuKernelAdapter.define_kernel

        def define_then_fail(self, *args, **kwargs):
            original(self, *args, **kwargs)
            raise RuntimeError("injected failure")

        monkeypatch.setattr(npu_kernel.NpuKernelAdapter, "define_kernel", define_then_fail)
    monkeypatch.setattr(diagnostics, "warned", set())
    with plugin_on():
        check_grads("ln", 64, 256)
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs["internal_error"] == 1
    launched = [cls for cls, _, _ in kernels if not cls.__name__.startswith("MixOrder")]
    assert launched and {c.__name__ for c in launched} <= {"NPUIndexTritonKernel",
                                                           "NPUTritonKernel"}


@pytest.mark.parametrize("stage", ["unsupported_backends", "find_candidates",
                                   "check_accumulator"])
def test_hook_failure_keeps_torch_npu_kernels(kernels, monkeypatch, stage):
    """A failure in the hook's own stages on the default backend (the backend check before
    matching, the matching, the accumulator check inside it): recorded as
    internal_error, the wrapper is torch_npu's and the gradients are right."""
    from inductor_ext import diagnostics
    from inductor_ext.scheduler import hook, legality

    target = hook if stage == "find_candidates" else legality
    monkeypatch.setattr(target, stage, boom)
    monkeypatch.setattr(diagnostics, "warned", set())
    with plugin_on():
        check_grads("ln", 64, 256)
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs["internal_error"] >= 1
    assert set(inductor_ext.metrics.rejected_pairs) == {"internal_error"}
    launched = [cls for cls, _, _ in kernels]
    assert launched and {c.__name__ for c in launched} <= {"NPUIndexTritonKernel",
                                                           "NPUTritonKernel"}


def test_every_torch_npu_rewrite_applies(kernels):
    """torch_npu's kernel text still has what our rewrites of it expect (tests/test_rewrites.py
    checks the rewrites of Inductor's text)."""
    from inductor_ext.codegen import rewrites

    rewrites.reset()
    with plugin_on():
        check_grads("ln", 33, 128)
    names = {name for name, r in rewrites.REGISTRY.items() if r.backend == "torch_npu"}
    assert names and all(rewrites.applied()[name] > 0 for name in names)
    assert rewrites.missed() == {}
