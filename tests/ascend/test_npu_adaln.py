"""adaLN (DiT's modulated LayerNorm: ``LN(x) * (1 + scale[b]) + shift[b]``, x [B, T, N])
through torch_npu's emulated default backend with the plugin on: d(scale) / d(shift) reduce
over each sample's T rows ([B, N] results) and ride the norm's dx kernel as per-sample
(segmented) partials, on torch_npu's NPUIndexTritonKernel.

torch_npu's index analysis splits the rows into a sample axis (length B, stride T: the
row side reads scale[b]) and a T axis. Each program of the fixed grid takes one sample on
the first and a share of its T rows on the second (Ascend's plan.with_segments: B groups of
programs, as many per sample as take the fewest row-block times in waves of the vector
cores), so its workspace row holds one sample's partials; the final step sums each
sample's rows.

Runs inside the venv of tests/ascend/setup_npu_venv.sh; elsewhere every test skips:

    TRITON_INTERPRET=1 TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 \\
        .npu-venv/bin/python -m pytest -q tests/ascend/test_npu_adaln.py
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from npu_cases import fused_kernels, plugin_on

import inductor_ext
from tests.support import models, reference
from tests.support import npu_emulation as emu

pytestmark = pytest.mark.skipif(not emu.can_emulate(),
                                reason=str(emu.emulation_unavailable_reason()))

#: The emulated 910B3's vector cores (the fixed grid's bound).
CORES = 40


def modulated_ln(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """DiT's adaLN: LayerNorm without affine, then the per-sample modulation."""
    return F.layer_norm(x, (x.shape[-1],), None, None, 1e-6) * (1 + scale) + shift


def _inputs(B: int, T: int, N: int, dtype: torch.dtype) -> list[torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(B, T, N, dtype=dtype, requires_grad=True)
    scale = (0.5 * torch.randn(B, 1, N)).to(dtype).requires_grad_()
    shift = torch.randn(B, 1, N, dtype=dtype, requires_grad=True)
    return [x, scale, shift]


def adaln_case(B: int, T: int, N: int, dtype: torch.dtype):
    """(fn, inputs, dy) of one modulated norm (test_npu_generated_text's cases)."""
    inputs = _inputs(B, T, N, dtype)
    return modulated_ln, inputs, torch.randn_like(inputs[0])


def _check_numerics(got, inputs, dy) -> None:
    reference.assert_close(got, reference.float64_grads(modulated_ln, inputs, dy),
                           ["dx", "dscale", "dshift"],
                           eager=reference.autograd_grads(modulated_ln, inputs, dy))


def _segmented_kernel(seen, B: int):
    """The one fused kernel, checked to be torch_npu's class with a per-sample layout."""
    from torch_npu._inductor.codegen.triton import NPUIndexTritonKernel

    from inductor_ext.targets.ascend.kernel import NpuMixOrderKernelMixin

    metrics = inductor_ext.metrics
    assert metrics.rejected_pairs == {}, dict(metrics.rejected_pairs)
    assert metrics.mix_order_kernels == 1
    assert dict(metrics.fused_columns) == {"other": 2}  # d(scale), d(shift)
    [(cls, kernel, src)] = fused_kernels(seen)
    assert issubclass(cls, NPUIndexTritonKernel) and issubclass(cls, NpuMixOrderKernelMixin)
    plan = kernel.plan
    assert plan.segments == B and plan.programs % B == 0
    assert kernel.inductor_meta["fixed_grid"] == [str(plan.programs), "1", "1"]
    # Waves of the vector cores' programs: at most SEGMENT_MAX_WAVES of them.
    from inductor_ext.targets.ascend.plan import SEGMENT_MAX_WAVES
    assert plan.programs <= max(SEGMENT_MAX_WAVES * CORES, B)
    # The sample axis: length B, one sample per program (its block is 1 in every config).
    axis = kernel.sample_axis
    assert axis is not None and int(axis.length) == B, [a.name for a in kernel.row_axes]
    assert not axis.is_split_axis and kernel.row_axis.is_split_axis
    sample_block = kernel._block(axis)
    assert all(cfg[sample_block] == 1 for cfg in kernel.inductor_meta["inductor_ext_configs"])
    per = plan.programs_per_segment
    assert f"base_{axis.name}= tl.program_id(0) // {per} + tl.arange(0, {sample_block})" in src
    assert f"{kernel.row_axis.name}_offset = (tl.program_id(0) % {per}) * " in src
    return kernel, src


@pytest.mark.parametrize("B,T,N,dtype,tiled", [
    (2, 13, 128, torch.float32, False),    # odd T, a short last block
    (3, 11, 768, torch.bfloat16, False),
    (2, 64, 256, torch.float32, False),    # several programs per sample
    pytest.param(2, 9, 8192, torch.float32, True,  # N = 8192 is column-tiled on the 910B3
                 marks=pytest.mark.slow),
    (2, 9, 8192, torch.bfloat16, True),
    (48, 16, 128, torch.float32, False),   # B above the 40 vector cores: several waves
], ids=["2x13x128-fp32", "3x11x768-bf16", "2x64x256-fp32", "2x9x8192-fp32-tiled",
        "2x9x8192-bf16-tiled", "48x16x128-fp32"])
def test_adaln_fuses_per_sample(kernels, B, T, N, dtype, tiled):
    inputs = _inputs(B, T, N, dtype)
    dy = torch.randn_like(inputs[0])
    with plugin_on(target="ascend"):
        got = reference.autograd_grads(torch.compile(modulated_ln, dynamic=False), inputs, dy)
    kernel, src = _segmented_kernel(kernels, B)
    assert kernel.plan.column_tiled == tiled
    per = kernel.plan.programs_per_segment
    if B > CORES:
        assert kernel.plan.programs > CORES
    elif T >= 64:
        assert per > 1 and kernel.plan.programs <= CORES
    _check_numerics(got, inputs, dy)


def test_sequence_first_layout_falls_back(kernels):
    """x [T, B, N] (scale [1, B, N]): a sample's rows are every B-th row, and torch_npu's
    axes for them do not split the rows into disjoint dimensions: the fused codegen fails
    and falls back to torch_npu's own kernels (internal_error, logged once), still right."""
    T, B, N = 11, 3, 32
    torch.manual_seed(0)
    x = torch.randn(T, B, N, requires_grad=True)
    scale = torch.randn(1, B, N, requires_grad=True)
    shift = torch.randn(1, B, N, requires_grad=True)
    dy = torch.randn_like(x)
    with plugin_on(target="ascend"):
        got = reference.autograd_grads(torch.compile(modulated_ln, dynamic=False),
                                       [x, scale, shift], dy)
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert dict(inductor_ext.metrics.rejected_pairs) == {"internal_error": 1}
    assert fused_kernels(kernels) == []
    _check_numerics(got, [x, scale, shift], dy)


@pytest.mark.parametrize("dtype", [pytest.param(torch.float32, marks=pytest.mark.slow),
                                   torch.bfloat16], ids=["fp32", "bf16"])
def test_dit_block_fuses_every_modulated_norm(kernels, dtype):
    """A 2-block DiT (tests/support/models.py): every norm with a dx fuses on torch_npu's
    class, the modulated ones with their per-sample d(scale) / d(shift) (and d(gate) where
    it reads the kernel's dx); gradients match float64."""
    work = models.build("dit", models.Size(batch=2, seq=12, hidden=32))
    if dtype != torch.float32:
        work = work.copy(dtype)
    ref = models.grads(work.copy(torch.float64))
    eager = models.grads(work)
    with plugin_on(target="ascend"):
        got = models.grads(work, torch.compile(work.model, dynamic=False))
    metrics = inductor_ext.metrics
    # blocks.0.norm1 has no dx (the input needs no grad); the other four fuse.
    assert dict(metrics.norms) == {"found": 4, "fused": 4}
    assert metrics.mix_order_kernels == 4
    assert dict(metrics.rejected_pairs) == {}
    fused = fused_kernels(kernels)
    assert len(fused) == 4
    assert sum(k.plan.segments == 2 for _, k, _ in fused) == 3
    assert metrics.fused_columns["other"] >= 10
    keys = sorted(ref)
    reference.assert_close([got[k] for k in keys], [ref[k] for k in keys], names=keys,
                           eager=[eager[k] for k in keys])
