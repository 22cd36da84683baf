"""torch_npu's launch path as a device runs it, under the emulation (an emulation: kernels
run in triton-ascend 3.2.0's interpreter on CPU; the clock is virtual).

On a device, torch_npu's NPUCachingAutotuner compiles every config, launches each on the
call's own arguments (a prerun, then its benchmark), cloning only the arguments listed in
``inductor_meta["mutated_arg_names"]``, picks the fastest and launches it. The emulation
runs that code (tests.support.npu_emulation: the stand-in compiler lowers each config
with triton-ascend's front end, the virtual device's clock times it), so a kernel whose
result depends on what ran before it gives wrong gradients here as it would on the NPU.

    TRITON_INTERPRET=1 .npu-venv/bin/python -m pytest -q tests/ascend/test_npu_launch_path.py
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from npu_cases import check_grads, fused_kernels, plugin_on

import inductor_ext
from tests.support import npu_emulation as emu

pytestmark = pytest.mark.skipif(not emu.can_emulate(),
                                reason=str(emu.emulation_unavailable_reason()))


def _fused_launches(name: str) -> tuple[list[dict], list[dict]]:
    """(timing launches, the real launch) of a kernel, each as its config: torch_npu's
    autotuner launches every config (prerun, then its benchmark) before the real one."""
    launches = [cfg for kernel, cfg, _ in emu.virtual_device().launches if kernel == name]
    return launches[:-1], launches[-1:]


def _launched_kernel_name(kernel) -> str:
    names = {k for k, _, _ in emu.virtual_device().launches
             if k.startswith("triton_") and "fused" in k}
    ours = [n for n in names if n == kernel.kernel_name]
    assert ours, (kernel.kernel_name, names)
    return ours[0]


def _config_key(cfg: dict) -> tuple:
    return tuple(sorted((k, cfg[k]) for k in cfg
                        if k.endswith("BLOCK_SUB") or k == "multibuffer"))


def _check_autotuned(kernel) -> None:
    """The fused kernel went through the whole path: every config timed (prerun and
    benchmark launches), then the fastest by the stand-in timer launched for real."""
    configs = kernel.inductor_meta["inductor_ext_configs"]
    assert len(configs) >= 2, "the case must offer torch_npu's autotuner several configs"
    name = _launched_kernel_name(kernel)
    timed, real = _fused_launches(name)
    assert {_config_key(c) for c in timed} == {_config_key(c) for c in configs}
    # Each timed config: one prerun (timed by events) and BENCH_LAUNCHES benchmark launches.
    assert len(timed) == len(configs) * (1 + emu.BENCH_LAUNCHES)
    benchmarked = [bench for kernel, _, bench in emu.virtual_device().launches
                   if kernel == name]
    assert benchmarked.count(True) == len(configs) * emu.BENCH_LAUNCHES
    assert len(real) == 1
    timer = emu.virtual_device().timer
    best = min(timed, key=lambda cfg: timer(name, cfg))
    assert _config_key(real[0]) == _config_key(best)


#: Each op, width and dtype once by default; the other two, the slow tier.
COLUMN_TILED = [("rms", 33, 16384, torch.bfloat16),
                pytest.param("rms", 40, 12288, torch.float16, marks=pytest.mark.slow),
                ("ln", 40, 12288, torch.float16),
                pytest.param("ln", 33, 16384, torch.bfloat16, marks=pytest.mark.slow)]


@pytest.mark.parametrize("op,M,N,dtype", COLUMN_TILED)
def test_column_tiled_kernels_are_right_after_torch_npus_autotuning(kernels, op, M, N, dtype):
    with plugin_on():
        check_grads(op, M, N, dtype)
    [(_, kernel, _)] = fused_kernels(kernels)
    assert kernel.plan.looped_column_tiles
    # The workspace the kernel adds into is cloned for every timing launch.
    assert kernel.workspace.inner in kernel.inductor_meta["mutated_arg_names"]
    _check_autotuned(kernel)


@pytest.mark.parametrize("op,M,N,dtype", [("rms", 64, 768, torch.bfloat16),
                                          ("ln", 40, 768, torch.float16)])
def test_persistent_kernels_are_right_after_torch_npus_autotuning(kernels, op, M, N, dtype):
    with plugin_on():
        check_grads(op, M, N, dtype)
    [(_, kernel, _)] = fused_kernels(kernels)
    assert not kernel.plan.column_tiled
    assert kernel.workspace.inner not in kernel.inductor_meta["mutated_arg_names"]
    _check_autotuned(kernel)


def test_the_timer_decides_which_config_runs(kernels):
    """A timer that makes the last config the fastest: the real launch uses it."""
    def last_is_fastest(name, cfg):
        return 1.0 if cfg.get("multibuffer") is False else 2.0

    emu.virtual_device().timer = last_is_fastest
    with plugin_on(), torch._inductor.config.patch(force_disable_caches=True):
        check_grads("rms", 33, 16384, torch.bfloat16)
    [(_, kernel, _)] = fused_kernels(kernels)
    _, real = _fused_launches(_launched_kernel_name(kernel))
    assert [c["multibuffer"] for c in real] == [False]


def test_autotune_cache_hit_launches_the_cached_pick_only(kernels, tmp_path, monkeypatch):
    """torch_npu's autotune cache (Inductor's local one): a second compile of the same
    kernel reads the first one's pick and launches it without timing anything."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    with plugin_on(), torch._inductor.config.patch(force_disable_caches=False,
                                                   autotune_local_cache=True):
        check_grads("ln", 40, 12288, torch.bfloat16)
        [(_, kernel, _)] = fused_kernels(kernels)
        name = _launched_kernel_name(kernel)
        _, [first] = _fused_launches(name)
        emu.virtual_device().launches.clear()
        torch._dynamo.reset()
        check_grads("ln", 40, 12288, torch.bfloat16)
    assert [cfg for k, cfg, _ in emu.virtual_device().launches if k == name] == [first]


def test_unlisted_workspace_gives_wrong_partials(kernels, monkeypatch):
    """Negative control: without the workspace in mutated_arg_names (as before the fix),
    torch_npu's timing launches add into the live partials and dw comes out wrong. The
    emulation must show it, or the tests above prove nothing."""
    from inductor_ext.codegen.kernel_base import MixOrderKernelBase

    monkeypatch.setattr(MixOrderKernelBase, "accumulated_workspaces", lambda self: [])
    with plugin_on(), pytest.raises(AssertionError, match="dw"):
        check_grads("rms", 33, 16384, torch.bfloat16)


def test_fused_kernel_that_fails_to_compile_falls_back(kernels, monkeypatch, ext_records,
                                                        norm_views):
    """The toolchain rejects the fused kernel (a compile error, as a UB overflow is on a
    device): it was compiled during codegen, so torch_npu's own kernels run instead, with
    right gradients, one warning and one internal_error decline; the counters, the hook's
    summary line and the report all say declined."""
    import logging

    from inductor_ext import diagnostics
    from tests.support import reference

    def reject(self, src, target=None, options=None):
        raise RuntimeError("ub overflow, requires 3145728 bits while 1572864 bits "
                           "available (injected)")

    monkeypatch.setattr(emu._EmulatedCompiler, "compile", reject)
    monkeypatch.setattr(diagnostics, "warned", set())
    M, N = 40, 12288
    norm = torch.nn.LayerNorm(N, dtype=torch.float16)  # a module: counted as a norm
    with torch.no_grad():
        norm.weight.normal_(1.0, 0.1)
        norm.bias.normal_(0.0, 0.1)
    x = torch.randn(M, N, dtype=torch.float16, requires_grad=True)
    dy = torch.randn(M, N, dtype=torch.float16)
    with plugin_on(), torch._inductor.config.patch(force_disable_caches=True):
        torch.compile(norm, dynamic=False)(x).backward(dy)
    got = [x.grad, norm.weight.grad, norm.bias.grad]
    fn = lambda x, w, b: torch.nn.functional.layer_norm(x, (N,), w, b)  # noqa: E731
    inputs = [x, norm.weight, norm.bias]
    reference.assert_close(got, reference.float64_grads(fn, inputs, dy), ["dx", "dw", "db"])
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs == {"internal_error": 1}
    assert not inductor_ext.metrics.fused_columns
    views = norm_views()
    assert set(views.values()) == {(1, 0, 1)}, views
    warnings = [r for r in ext_records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "ub overflow" in warnings[0].getMessage()
    # Only our kernels take the device path; none of them was launched.
    assert fused_kernels(kernels) and not emu.virtual_device().launches


def test_one_element_masked_store_stays_in_bounds(npu):
    """triton-ascend 3.2.0's interpreter read a one-element False mask as no mask and
    stored past the tensor (torch_npu's LayerNorm forward at X0BLOCK_SUB=1 corrupted the
    heap); the emulation keeps the mask, as the compiled path does."""
    big = torch.full((10,), -7.0)
    for sub in (1, 2):
        _store_rows_from_5[(1,)](big, 5, SUB=sub)  # rows 5.. are masked off
        assert big[5:].tolist() == [-7.0] * 5
    _store_rows_from_5[(1,)](big, 6, SUB=1)  # row 5 is in: stored
    assert big[5].item() == 3.0
    assert isinstance(_store_rows_from_5, triton.runtime.interpreter.InterpretedFunction)



@triton.jit
def _store_rows_from_5(out_ptr, n, SUB: tl.constexpr):
    x0 = 5 + tl.arange(0, SUB)[:, None]
    tl.store(out_ptr + x0, tl.full([SUB, 1], 3.0, tl.float32), x0 < n)
