"""Which reductions matching puts in one fused kernel, and which it declines: stock Inductor
(and the plugin enabled, then disabled) keeps a norm backward's two kernels; a LayerNorm's
dw and db share one fused kernel, two independent norms get one each; a column whose
reduction the row loop cannot take (argmax, or a strict reduction on either side, whose
summation order fusing would change) is declined with its reason while the rest of the
group still fuses, and an argmax row reduction takes a sum column."""

import types

import pytest
import sympy
import torch
from torch._inductor.utils import run_and_get_code

import inductor_ext
from tests.support.fused_kernels import rms_inputs as _inputs
from tests.support.fused_kernels import triton_kernel_count as _triton_kernels
from tests.support.reference import assert_close, rms_backward, rms_norm

#: CI runs this module on every torch it tests: its assertions read the text Inductor
#: generates (.ci/run's torch 2.15 stage: `-m "slow or inductor_text"`).
pytestmark = pytest.mark.inductor_text


def test_stock_inductor_uses_two_kernels(interp):
    out, (code,) = run_and_get_code(torch.compile(rms_backward), *_inputs())
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert _triton_kernels(code) >= 2


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


def test_unsupported_reduction_type_is_declined(plugin):
    """An argmax column cannot join sum(1)'s row; the sum(0) column still does."""
    def fn(a, b):
        v = a * b
        return v.sum(1), v.sum(0), v.argmax(0)

    a, b = torch.randn(33, 29), torch.randn(33, 29)
    got = torch.compile(fn)(a, b)
    ref = fn(a, b)
    torch.testing.assert_close(got[:2], ref[:2])
    assert torch.equal(got[2], ref[2])
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert inductor_ext.metrics.rejected_pairs == {"unsupported_reduction_type": 1}


def test_argmax_row_takes_the_sum_column(plugin):
    """Alone with an argmax over dim 0, sum(1) fuses the other way round: the argmax is the
    row reduction (Inductor's own code), sum(1) its column."""
    def fn(a, b):
        v = a * b
        return v.sum(1), v.argmax(0)

    a, b = torch.randn(33, 29), torch.randn(33, 29)
    got = torch.compile(fn)(a, b)
    ref = fn(a, b)
    torch.testing.assert_close(got[0], ref[0])
    assert torch.equal(got[1], ref[1])
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert not inductor_ext.metrics.rejected_pairs


def _strict_rblock_field():
    """Name of Inductor's strict-reduction field (torch 2.14: strict_sum_rblock, 2.15:
    strict_reduction_rblock); None before 2.14, which has no strict reductions."""
    import dataclasses

    from torch._inductor import ir

    names = {f.name for f in dataclasses.fields(ir.Reduction)}
    return next((f for f in ("strict_reduction_rblock", "strict_sum_rblock") if f in names),
                None)


def test_strict_reductions_are_recognised():
    """compat reads the strict mark under the running torch's field name."""
    from torch._inductor import ir
    from torch._inductor.runtime.hints import ReductionHint

    from inductor_ext import compat

    field = _strict_rblock_field()
    if field is None:
        pytest.skip("this torch (< 2.14) has no strict reductions")

    def snode(**extra):
        data = ir.Reduction(device=torch.device("cpu"), dtype=torch.float32,
                            inner_fn=lambda index, rindex: None, ranges=[4],
                            reduction_ranges=[8], reduction_type="sum",
                            src_dtype=torch.float32, reduction_hint=ReductionHint.INNER,
                            **extra)
        return types.SimpleNamespace(node=types.SimpleNamespace(data=data))

    assert not compat.is_strict_reduction(snode())
    assert compat.is_strict_reduction(snode(**{field: 8}))
    assert not compat.is_strict_reduction(types.SimpleNamespace(node=None))


@pytest.mark.parametrize("side", ["row", "column"])
def test_strict_reductions_are_declined(plugin, monkeypatch, side):
    """A strict reduction keeps eager's summation order, which the fused kernel would
    change: the group is declined on either side and Inductor's kernels run. (Triton
    3.9 has no inner-tree ordering, so Inductor makes none here: the mark is forced.)"""
    from inductor_ext import compat

    M, N = 64, 40

    def forced(snode):  # the row reduction runs over N columns, the column ones over rows
        rsize = snode.node.get_reduction_size()
        if not rsize:
            return False
        return (int(sympy.Mul(*rsize)) == N) == (side == "row")

    monkeypatch.setattr(compat, "is_strict_reduction", forced)
    args = _inputs(M, N)
    got = torch.compile(rms_backward)(*args)
    ref = rms_backward(*(a.double() for a in args))
    for g, r in zip(got, ref):
        torch.testing.assert_close(g.double(), r, rtol=1e-4, atol=1e-4)
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs["unsupported_reduction_type"] >= 1
