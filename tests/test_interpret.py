"""The CPU harness itself: Inductor's Triton kernels that call libdevice run in the
interpreter (tanh-GELU of GPT-2 / Gemma, nan_to_num, isnan / isinf, LayerNorm with N=1)."""

import pytest
import torch
import torch.nn.functional as F

from inductor_ext import interpreter as interpret


def _special(x: torch.Tensor) -> torch.Tensor:
    x = x.clone()
    x[0, 0], x[1, 1], x[2, 2] = float("nan"), float("inf"), -float("inf")
    return x


CASES = {
    "gelu_tanh": (lambda t: F.gelu(t, approximate="tanh"), False),
    "nan_to_num": (torch.nan_to_num, True),
    "isnan_isinf": (lambda t: torch.isnan(t) | torch.isinf(t), True),
    "tanh_expm1_log1p": (lambda t: torch.tanh(t) + torch.expm1(t) * torch.log1p(t.abs()),
                         False),
    "layer_norm_n1": (lambda t: F.layer_norm(t[:, :1], (1,)), False),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", sorted(CASES))
def test_libdevice_kernels_run_in_the_interpreter(interp, case, dtype):
    fn, special = CASES[case]
    x = torch.randn(32, 24, dtype=dtype)
    if special:
        x = _special(x)
    got = torch.compile(fn)(x)
    torch.testing.assert_close(got, fn(x), equal_nan=True, rtol=1e-6, atol=1e-6)


def test_layer_norm_n1_backward(interp):
    """LayerNorm over one element compiles and runs forward + backward. dx is 0 in exact
    math; both sides leave rounding residue of x - mean times rstd (316 at eps 1e-5)."""
    x = torch.randn(16, 1, requires_grad=True)
    w = torch.randn(1, requires_grad=True)
    dy = torch.randn(16, 1)

    def fn(x, w):
        return F.layer_norm(x, (1,), w)

    got = torch.autograd.grad(torch.compile(fn)(x, w), (x, w), dy)
    ref = torch.autograd.grad(fn(x, w), (x, w), dy)
    for g, r in zip(got, ref):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("symbol,name", [("__nv_tanhf", "tanh"), ("__nv_isnand", "isnan"),
                                         ("__nv_fast_expf", "exp"), ("__nv_fmodf", "fmod")])
def test_libdevice_symbols_map_to_numpy(symbol, name):
    import numpy as np

    fn = interpret._libdevice_function(symbol)
    assert fn is getattr(np, name)


def test_unknown_extern_symbol_is_named():
    assert interpret._libdevice_function("__nv_j0f") is None
    run = interpret._extern_calls_with_numpy(None)
    with pytest.raises(NotImplementedError, match="'__nv_j0f'"):
        run(None, "", "", "__nv_j0f", [], None, True)


def test_without_triton_the_demo_and_harness_say_so(monkeypatch):
    import sys

    from inductor_ext import demo
    from inductor_ext.interpreter import cpu_interpret

    monkeypatch.setitem(sys.modules, "triton.language", None)  # import fails as if absent
    monkeypatch.setattr(sys, "argv", ["demo"])
    with pytest.raises(SystemExit, match="inductor_ext demo: Triton is not installed"):
        demo.main()
    with pytest.raises(RuntimeError, match="Triton is not installed"):
        with cpu_interpret():
            pass


def _welford_merge_kernel():
    """A kernel that merges [4, R] partials along dim 1 with one of two welford functions:
    Inductor's pairwise `triton_helpers.welford` as imported (before cpu_interpret replaces
    it) or the interpreter's `interpreter_kernels.welford`."""
    import triton
    import triton.language as tl

    from inductor_ext import interpreter_kernels
    from inductor_ext.compat import triton_helpers

    globals().update(tl=tl, _PAIRWISE=triton_helpers.welford,
                     _SUMS=interpreter_kernels.welford)

    @triton.jit
    def merge(mean_ptr, m2_ptr, weight_ptr, out_ptr, R: tl.constexpr, SUMS: tl.constexpr):
        offsets = tl.arange(0, 4)[:, None] * R + tl.arange(0, R)[None, :]
        mean = tl.load(mean_ptr + offsets)
        m2 = tl.load(m2_ptr + offsets)
        weight = tl.load(weight_ptr + offsets)
        if SUMS:
            merged, spread, total = _SUMS(mean, m2, weight, 1)  # noqa: F821
        else:
            merged, spread, total = _PAIRWISE(mean, m2, weight, 1)  # noqa: F821
        rows = tl.arange(0, 4)
        tl.store(out_ptr + rows, merged)
        tl.store(out_ptr + 4 + rows, spread)
        tl.store(out_ptr + 8 + rows, total)

    return merge


@pytest.mark.parametrize("case", ["random", "empty_partials", "infinite_means", "one_row"])
def test_welford_merge_as_sums_matches_inductors_pairwise_merge(case):
    """`interpreter_kernels.welford` (the interpreter's stand-in) gives the statistics of
    Inductor's pairwise `triton_helpers.welford` on the same partials, empty partials and
    infinite means included."""
    merge = _welford_merge_kernel()
    R = 16
    weight = torch.randint(1, 5, (4, R)).float()
    mean, m2 = torch.randn(4, R), torch.rand(4, R) * weight
    if case == "empty_partials":
        weight[:, ::3], mean[:, ::3], m2[:, ::3] = 0, 0, 0
        weight[3], mean[3], m2[3] = 0, 0, 0
    elif case == "infinite_means":
        mean[1] = float("inf")
        mean[2] = float("-inf")  # (a row of mixed infinite and finite means has no
        # variance: both give a non-finite row there, not the same one)
    elif case == "one_row":
        weight[:, 1:], mean[:, 1:], m2[:, 1:] = 0, 0, 0
    got, want = torch.empty(12), torch.empty(12)
    merge[(1,)](mean, m2, weight, got, R=R, SUMS=True)
    merge[(1,)](mean, m2, weight, want, R=R, SUMS=False)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
