"""Fused gradients vs a float64 eager reference, through the CPU interpreter."""

import pytest
import torch

import inductor_ext
from tests.support.reference import (
    assert_close,
    autograd_grads,
    float64_grads,
    layer_norm,
    max_rel_err,
    rms_backward,
    rms_norm,
)


@pytest.fixture(autouse=True, params=["cuda", "ascend"])
def flavor(request):
    """Every numerics test runs with both codegen flavors, forced on the CPU device."""
    with inductor_ext.config.patch(target=request.param):
        yield request.param


def _check_norm(fn, x, params, expect_kernels=1):
    dy = torch.randn_like(x)
    inputs = [x, *params]
    grads = autograd_grads(torch.compile(fn), inputs, dy)
    ref = float64_grads(fn, inputs, dy)
    assert_close(grads, ref)
    assert inductor_ext.metrics.mix_order_kernels == expect_kernels


@pytest.mark.parametrize("M,N", [(64, 48), (37, 50)])
def test_rms_norm_backward(plugin, M, N):
    x = torch.randn(M, N, requires_grad=True)
    w = torch.randn(N, requires_grad=True)
    _check_norm(rms_norm, x, [w])


@pytest.mark.parametrize("bias", [True, False])
def test_layer_norm_backward(plugin, bias):
    M, N = 72, 40
    x = torch.randn(M, N, requires_grad=True)
    w = torch.randn(N, requires_grad=True)
    b = torch.randn(N, requires_grad=True) if bias else None
    _check_norm(layer_norm, x, [w, b])


def test_split_column_reduction(plugin):
    """Long M: Inductor splits dw into partial + final sums; we fuse the unsplit form.
    3072 rows: 48 row blocks of 64, more than either flavor's programs (CUDA 8, Ascend 40),
    so programs walk several row blocks."""
    M, N = 3072, 32
    x = torch.randn(M, N, requires_grad=True)
    w = torch.randn(N, requires_grad=True)
    _check_norm(rms_norm, x, [w])


def test_3d_input(plugin):
    B, T, N = 3, 17, 24
    x = torch.randn(B, T, N, requires_grad=True)
    w = torch.randn(N, requires_grad=True)
    b = torch.randn(N, requires_grad=True)
    _check_norm(layer_norm, x, [w, b])


@pytest.mark.parametrize("xdtype,wdtype", [
    (torch.bfloat16, torch.float32),
    (torch.float32, torch.bfloat16),
    (torch.float16, torch.float16),
])
def test_mixed_dtypes(plugin, xdtype, wdtype):
    M, N = 50, 40
    x = torch.randn(M, N, dtype=xdtype, requires_grad=True)
    w = torch.randn(N, dtype=wdtype, requires_grad=True)
    _check_norm(rms_norm, x, [w])


def _explicit_rms_inputs(M, N, x):
    w = torch.randn(N)
    dy = torch.randn(M, N)
    rstd = torch.rand(M, 1) + 0.5
    return x, w, dy, rstd


def _check_explicit(x, w, dy, rstd):
    got = torch.compile(rms_backward)(x, w, dy, rstd)
    ref = rms_backward(x.double(), w.double(), dy.double(), rstd.double())
    assert_close(got, [r.to(torch.float64) for r in ref])
    assert inductor_ext.metrics.mix_order_kernels == 1


def test_permuted_input(plugin):
    M, N = 48, 40
    x = torch.randn(N, M).t()  # non-contiguous [M, N]
    assert not x.is_contiguous()
    _check_explicit(*_explicit_rms_inputs(M, N, x))


def test_row_slice_of_larger_buffer(plugin):
    """Rows outside the slice hold huge values: any read past the mask shows up."""
    M, N = 45, 40
    big = torch.full((M + 9, N), 1e30)
    big[3:M + 3] = torch.randn(M, N)
    _check_explicit(*_explicit_rms_inputs(M, N, big[3:M + 3]))


def test_column_slice_of_wider_buffer(plugin):
    M, N = 45, 40
    big = torch.full((M, N + 7), 1e30)
    big[:, :N] = torch.randn(M, N)
    _check_explicit(*_explicit_rms_inputs(M, N, big[:, :N]))


PAIRS = {
    "sum": (lambda v: v.sum(1), lambda v: v.sum(0)),
    "mean": (lambda v: v.mean(1), lambda v: v.mean(0)),
    "prod": (lambda v: v.prod(1), lambda v: v.prod(0)),
    "max": (lambda v: v.amax(1), lambda v: v.amax(0)),
}


@pytest.mark.parametrize("kind", sorted(PAIRS))
@pytest.mark.parametrize("inner_first", [True, False])
def test_reduction_pairs(plugin, kind, inner_first):
    rows, cols = PAIRS[kind]

    def fn(a, b):
        v = a * b if kind != "prod" else 1 + 0.01 * a * b
        if inner_first:
            r = rows(v)
            c = cols(v)
        else:
            c = cols(v)
            r = rows(v)
        return r, c

    a = torch.randn(33, 29)
    b = torch.randn(33, 29)
    got = torch.compile(fn)(a, b)
    ref = fn(a.double(), b.double())
    assert_close(got, ref)
    assert inductor_ext.metrics.mix_order_kernels == 1


def test_dynamic_m(plugin):
    N = 24
    fn = torch.compile(rms_backward, dynamic=False)
    for M in (1, 3, 130):
        x, w, dy, rstd = _explicit_rms_inputs(M, N, torch.randn(M, N))
        torch._dynamo.mark_dynamic(x, 0)
        torch._dynamo.mark_dynamic(dy, 0)
        torch._dynamo.mark_dynamic(rstd, 0)
        got = fn(x, w, dy, rstd)
        ref = rms_backward(x.double(), w.double(), dy.double(), rstd.double())
        assert_close(got, [r.double() for r in ref])
    assert inductor_ext.metrics.mix_order_kernels == 1  # compiled once for all M


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_column_tiled_layer_norm(plugin, flavor, dtype):
    """With a tiny Unified Buffer the Ascend flavor walks each row in column tiles."""
    N = 300
    x = torch.randn(96, N, dtype=dtype, requires_grad=True)
    w = torch.randn(N, dtype=dtype, requires_grad=True)
    b = torch.randn(N, dtype=dtype, requires_grad=True)
    with inductor_ext.config.patch(ascend_ub_bytes=8192):
        _check_norm(layer_norm, x, [w, b])


def test_column_tiled_rows_that_divide_the_tile(plugin, flavor):
    """Column tiles that divide N exactly (no r0 mask) on the column-tiled path."""
    N = 256
    x = torch.randn(64, N, requires_grad=True)
    w = torch.randn(N, requires_grad=True)
    with inductor_ext.config.patch(ascend_ub_bytes=8192):
        _check_norm(rms_norm, x, [w])


@pytest.mark.parametrize("flavor", ["cuda"], indirect=True)  # the CUDA flavor's own tiles
@pytest.mark.parametrize("N", [300, 256])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_register_tiled_layer_norm(plugin, cuda_knobs, flavor, N, dtype):
    """Rows beyond max_persistent_n on the CUDA flavor: unrolled column tiles (masked last
    tile at N=300, exact at 256) with the dw and db partials in registers."""
    cuda_knobs(register_tile=64)
    x = torch.randn(80, N, dtype=dtype, requires_grad=True)
    w = torch.randn(N, dtype=dtype, requires_grad=True)
    b = torch.randn(N, dtype=dtype, requires_grad=True)
    with inductor_ext.config.patch(max_persistent_n=64):
        _check_norm(layer_norm, x, [w, b])


@pytest.mark.parametrize("op", ["rms", "ln"])
def test_float64_accumulates_in_float64(plugin, flavor, op):
    """float64 column partials stay float64 through the workspace and the final step (fp32
    partials cost 9 digits: dw 1.3e-7 over 1024 rows); the Ascend flavor, without float64
    vector math, declines them and stock Inductor keeps full precision. 512 rows: CUDA's 8
    programs, each with its workspace row, and Inductor's split dw on the Ascend flavor."""
    M, N = 512, 64
    x = torch.randn(M, N, dtype=torch.float64, requires_grad=True)
    params = [torch.randn(N, dtype=torch.float64, requires_grad=True)]
    if op == "ln":
        params.append(torch.randn(N, dtype=torch.float64, requires_grad=True))
    fn = rms_norm if op == "rms" else layer_norm
    dy = torch.randn_like(x)
    grads = autograd_grads(torch.compile(fn), [x, *params], dy)
    ref = autograd_grads(fn, [x, *params], dy)  # float64 eager
    for name, got, want in zip(["dx", "dw", "db"], grads, ref):
        assert max_rel_err(got, want) <= 1e-12, (name, max_rel_err(got, want))
    if flavor == "cuda":
        assert inductor_ext.metrics.mix_order_kernels == 1
    else:
        assert inductor_ext.metrics.mix_order_kernels == 0
        assert inductor_ext.metrics.rejected_pairs == {"unsupported_dtype": len(params)}
