"""Kernel counts, generated-code structure, declines and the disabled path."""

import pytest
import torch
from torch._inductor.utils import run_and_get_code

import inductor_ext
from inductor_ext.testing.reference import assert_close, rms_backward, rms_norm


def _inputs(M=64, N=40):
    return torch.randn(M, N), torch.randn(N), torch.randn(M, N), torch.rand(M, 1) + 0.5


def _triton_kernels(code: str) -> int:
    return code.count("async_compile.triton(")


def test_one_fused_kernel_with_workspace_and_final_sum(plugin):
    out, (code,) = run_and_get_code(torch.compile(rms_backward), *_inputs())
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert _triton_kernels(code) == 1  # dx and dw in one kernel
    assert "ws_ptr" in code and "workspace_" in code  # the partial-sum workspace
    assert "_mo_acc0 = tl.full([XBLOCK, R0_BLOCK], 0.0, tl.float32)" in code
    assert "for xoffset in tl.range(row_start, row_end, XBLOCK):" in code
    assert ".sum(0)" in code  # the final step over the workspace rows


def test_stock_inductor_uses_two_kernels(interp):
    out, (code,) = run_and_get_code(torch.compile(rms_backward), *_inputs())
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert _triton_kernels(code) >= 2


def test_layer_norm_dw_and_db_share_one_kernel(plugin):
    N = 40
    x = torch.randn(64, N, requires_grad=True)
    w = torch.randn(N, requires_grad=True)
    b = torch.randn(N, requires_grad=True)
    y = torch.compile(lambda x, w, b: torch.nn.functional.layer_norm(x, (N,), w, b))(x, w, b)
    torch.autograd.grad(y, (x, w, b), torch.randn_like(x))
    assert inductor_ext.metrics.mix_order_kernels == 1


def test_two_independent_norms_give_two_kernels(plugin):
    N = 32

    def two(x1, x2, w1, w2):
        return rms_norm(x1, w1) + rms_norm(x2, w2).sum()

    xs = [torch.randn(48, N, requires_grad=True) for _ in range(2)]
    ws = [torch.randn(N, requires_grad=True) for _ in range(2)]
    dy = torch.randn(48, N)
    y = torch.compile(two)(*xs, *ws)
    grads = torch.autograd.grad(y, [*xs, *ws], dy)
    assert inductor_ext.metrics.mix_order_kernels == 2
    up = [t.detach().double().requires_grad_() for t in xs + ws]
    ref = torch.autograd.grad(two(*up), up, dy.double())
    assert_close(grads, ref)


def test_producer_consumer_pair_is_not_fused(plugin):
    """dw needs rstd, which the row reduction computes: they cannot share a kernel."""

    def fn(x, w, dy):
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        xhat = x * rstd
        dw = (dy * xhat).sum(0)
        return xhat * w, dw

    x, w, dy, _ = _inputs()
    got = torch.compile(fn)(x, w, dy)
    ref = fn(x.double(), w.double(), dy.double())
    for g, r in zip(got, ref):
        torch.testing.assert_close(g.double(), r, rtol=1e-4, atol=1e-4)
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs["producer_consumer"] >= 1


def test_unsupported_reduction_type_is_declined(plugin):
    def fn(a, b):
        v = a * b
        return v.sum(1), v.argmax(0)

    a, b = torch.randn(33, 29), torch.randn(33, 29)
    got = torch.compile(fn)(a, b)
    ref = fn(a, b)
    torch.testing.assert_close(got[0], ref[0])
    assert torch.equal(got[1], ref[1])
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs["unsupported_reduction_type"] >= 1


def test_small_shape_is_not_profitable_without_always_fuse(interp):
    with torch._inductor.config.patch(inductor_ext.options()):
        torch.compile(rms_backward)(*_inputs())
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs["not_profitable"] == 1


def test_disabled_matches_stock_inductor(interp):
    args = _inputs()
    out_stock, (code_stock,) = run_and_get_code(torch.compile(rms_backward), *args)
    inductor_ext.enable()
    inductor_ext.disable()
    torch._dynamo.reset()
    out_off, (code_off,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert _triton_kernels(code_off) == _triton_kernels(code_stock)
    for a, b in zip(out_stock, out_off):
        assert torch.equal(a, b)
    assert inductor_ext.metrics.mix_order_kernels == 0


def test_split_size_sets_the_program_count(plugin):
    with inductor_ext.config.patch(split_size=16):
        out, (code,) = run_and_get_code(torch.compile(rms_backward), *_inputs(M=64))
    assert "'fixed_grid': ['4', '1', '1']" in code  # 64 rows / 16 rows per program
    assert inductor_ext.metrics.mix_order_kernels == 1


def test_ascend_flavor_structure(plugin):
    """Ascend: strided row loop over vector-core programs, no num_warps/num_stages."""
    with inductor_ext.config.patch(target="ascend", ascend_vector_cores=3):
        out, (code,) = run_and_get_code(torch.compile(rms_backward), *_inputs(M=640))
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "row_step = 3 * XBLOCK" in code
    assert "for xoffset in tl.range(tl.program_id(0) * XBLOCK, xnumel, row_step):" in code
    assert "'fixed_grid': ['3', '1', '1']" in code
    assert "num_warps" not in code.split("fixed_config(")[1].split("triton_meta")[0]


def test_ascend_column_tiled_when_a_row_exceeds_the_unified_buffer(plugin):
    """A row that does not fit the UB budget is walked in column tiles (two passes), its
    column partials added into the program's workspace row per tile."""
    args = _inputs(M=64, N=200)
    with inductor_ext.config.patch(target="ascend", ascend_ub_bytes=8192):
        got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "for r0_offset in" in code  # looped over column tiles
    assert "'R0_BLOCK': 128" in code
    assert "tl.store(_mo_ws0, tl.load(_mo_ws0" in code
    ref = rms_backward(*[a.double() for a in args])
    assert_close(got, [r.double() for r in ref])


def test_ascend_column_tiled_declines_non_sum_partials(plugin):
    def fn(a, b):
        v = a * b
        return v.sum(1), v.amax(0)

    with inductor_ext.config.patch(target="ascend", ascend_ub_bytes=8192):
        torch.compile(fn)(torch.randn(64, 300), torch.randn(64, 300))
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs["not_persistent"] == 1


def test_fused_kernel_builds_on_the_schedulings_kernel_class():
    """A vendor scheduling (torch_npu's, say) keeps its own Triton kernel class."""
    from inductor_ext.codegen.kernel import MixOrderKernel, MixOrderKernelMixin, kernel_class_for
    from inductor_ext.compat import TritonKernel

    class VendorKernel(TritonKernel):
        pass

    cls = kernel_class_for(VendorKernel)
    assert issubclass(cls, VendorKernel) and issubclass(cls, MixOrderKernelMixin)
    assert kernel_class_for(VendorKernel) is cls
    assert kernel_class_for(TritonKernel) is MixOrderKernel
    with pytest.raises(TypeError):
        kernel_class_for(object)
