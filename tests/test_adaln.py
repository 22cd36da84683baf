"""Modulated norms (adaLN, DiT): ``LN(x) * (1 + scale[b]) + shift[b]`` with x [B, T, N]. The
backward's d(scale) / d(shift) reduce over the T rows of each sample ([B, N] results), and
ride the norm's dx kernel as segmented partials next to its own dw / db; gradients match a
float64 reference, on the CUDA and the Ascend flavors; a dynamic batch or a target without a
per-sample loop is declined with its reason and still right."""

import pytest
import torch
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code

import inductor_ext
from tests.support import models
from tests.support.reference import assert_close, autograd_grads, float64_grads


def modulated_ln(x, scale, shift, w=None, b=None):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-6) * (1 + scale) + shift


def _inputs(B, T, N, dtype, affine):
    x = torch.randn(B, T, N, dtype=dtype, requires_grad=True)
    scale = (0.5 * torch.randn(B, 1, N)).to(dtype).requires_grad_()
    shift = torch.randn(B, 1, N, dtype=dtype, requires_grad=True)
    params = [x, scale, shift]
    if affine:
        params += [torch.randn(N, dtype=dtype, requires_grad=True),
                   torch.randn(N, dtype=dtype, requires_grad=True)]
    return params


def _check(fn, inputs, compiled=None):
    dy = torch.randn_like(inputs[0])
    got = autograd_grads(compiled or torch.compile(fn), inputs, dy)
    ref = float64_grads(fn, inputs, dy)
    eager = autograd_grads(fn, inputs, dy)
    assert_close(got, ref, names=["dx", "dscale", "dshift", "dw", "db"][:len(got)],
                 eager=eager)
    return got


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("B", [1, 2, 7])
def test_modulated_layer_norm_fuses(plugin, B, affine, dtype):
    """One kernel: dx, d(scale) and d(shift) per sample, dw / db over all rows. T = 13 is no
    multiple of the row block."""
    _check(modulated_ln, _inputs(B, 13, 32, dtype, affine))
    metrics = inductor_ext.metrics
    assert metrics.rejected_pairs == {}
    assert metrics.mix_order_kernels == 1
    assert sum(metrics.fused_columns.values()) == (4 if affine else 2)


@pytest.mark.parametrize("B", [2, 3])
def test_several_programs_per_sample(plugin, B):
    """split_size 4: each sample's 13 rows over up to 4 programs, the last one short."""
    with inductor_ext.config.patch(split_size=4):
        _check(modulated_ln, _inputs(B, 13, 24, torch.float32, True))
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert inductor_ext.metrics.rejected_pairs == {}


def test_column_tiled_rows(plugin):
    """A row longer than max_persistent_n is walked in column tiles, per sample too."""
    with inductor_ext.config.patch(max_persistent_n=16):
        _check(modulated_ln, _inputs(2, 11, 40, torch.float32, True))
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert inductor_ext.metrics.rejected_pairs == {}


def test_sequence_first_layout(plugin):
    """x [T, B, N] with scale / shift [1, B, N]: a sample's rows are not contiguous in the
    row kernel's order; the per-sample partials walk (b, t) from the row index anyway, so
    they stay right (their loads are just not the row side's)."""
    T, B, N = 11, 3, 32
    x = torch.randn(T, B, N, requires_grad=True)
    scale = torch.randn(1, B, N, requires_grad=True)
    shift = torch.randn(1, B, N, requires_grad=True)
    _check(modulated_ln, [x, scale, shift])
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert inductor_ext.metrics.rejected_pairs == {}
    assert sum(inductor_ext.metrics.fused_columns.values()) == 2


def test_deterministic(plugin):
    inputs = _inputs(3, 13, 32, torch.bfloat16, True)
    dy = torch.randn_like(inputs[0])
    compiled = torch.compile(modulated_ln)
    first = autograd_grads(compiled, inputs, dy)
    second = autograd_grads(compiled, inputs, dy)
    assert inductor_ext.metrics.mix_order_kernels == 1
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_dynamic_batch_declines(plugin):
    """A symbolic B: the segmented columns are declined (dynamic_segments) and computed by
    Inductor; the norm's dw / db still fuse; gradients stay right at another B."""
    compiled = torch.compile(modulated_ln)
    for B in (2, 3):
        inputs = _inputs(B, 13, 32, torch.float32, True)
        for t in inputs[:3]:
            torch._dynamo.mark_dynamic(t, 0)
        _check(modulated_ln, inputs, compiled)
    metrics = inductor_ext.metrics
    assert metrics.rejected_pairs == {"dynamic_segments": 2}
    assert metrics.mix_order_kernels == 1
    assert sum(metrics.fused_columns.values()) == 2


def test_dynamic_tokens_fuse(plugin):
    """A symbolic T with a static B: each program finds its sample's rows at run time
    (xnumel // B); one compile serves both lengths."""
    compiled = torch.compile(modulated_ln)
    for T in (13, 9):
        inputs = _inputs(3, T, 32, torch.float32, True)
        torch._dynamo.mark_dynamic(inputs[0], 1)
        _check(modulated_ln, inputs, compiled)
    metrics = inductor_ext.metrics
    assert metrics.rejected_pairs == {}
    assert metrics.mix_order_kernels == 1
    assert sum(metrics.fused_columns.values()) == 4


def test_dynamic_true_declines(plugin):
    """torch.compile(dynamic=True): N is symbolic too, so every pair, segmented or not, is
    declined as dynamic_n, with Inductor's right gradients at two batch sizes."""
    compiled = torch.compile(modulated_ln, dynamic=True)
    for B, T in ((2, 13), (3, 9)):
        _check(modulated_ln, _inputs(B, T, 32, torch.float32, True), compiled)
    metrics = inductor_ext.metrics
    assert metrics.mix_order_kernels == 0
    assert set(metrics.rejected_pairs) == {"dynamic_n"}


@pytest.mark.parametrize("B,T,N,dtype", [(2, 13, 32, torch.float32),
                                         (3, 9, 48, torch.bfloat16)])
def test_ascend_target_fuses(plugin, B, T, N, dtype):
    """The Ascend flavor walks each sample's rows too (its planner's with_segments, the
    generic per-sample row loop): d(scale) / d(shift) ride the norm's kernel with dw / db."""
    with inductor_ext.config.patch(target="ascend"):
        _check(modulated_ln, _inputs(B, T, N, dtype, True))
    metrics = inductor_ext.metrics
    assert metrics.rejected_pairs == {}
    assert metrics.mix_order_kernels == 1
    assert sum(metrics.fused_columns.values()) == 4
    assert metrics.norms["found"] == metrics.norms["fused"] == 1


def test_target_without_segments_declines(plugin, monkeypatch):
    """A target whose planner has no per-sample layout (segments None): the segmented
    columns are declined while matching as segmented_unsupported (the norm's own dw / db
    fuse, so the norm counts as fused), and Inductor's gradients stay right."""
    import dataclasses

    from inductor_ext import plan as planning

    monkeypatch.setitem(planning.PLANNERS, "ascend",
                        dataclasses.replace(planning.PLANNERS["ascend"], segments=None))
    with inductor_ext.config.patch(target="ascend"):
        _check(modulated_ln, _inputs(2, 13, 32, torch.float32, True))
    metrics = inductor_ext.metrics
    assert metrics.rejected_pairs == {"segmented_unsupported": 2}
    assert metrics.mix_order_kernels == 1
    assert sum(metrics.fused_columns.values()) == 2
    assert metrics.norms["found"] == metrics.norms["fused"] == 1
    assert metrics.norms_declined == {}


def test_ascend_interleaved_samples(plugin):
    """A column strip on the Ascend flavor: Inductor splits each of the 48 rows of
    (x + y).sum(-1) into 4 pieces (y transposed), and x.sum(0) walks them as 4 interleaved
    samples (row r is piece r % 4), the generic per-sample row loop's other layout."""
    from unittest import mock

    from torch._inductor.choices import InductorChoices

    from tests.support.reference import max_rel_err, tolerance

    M, N = 48, 64

    def split_factor(device, reduction_numel_hint, numel_hint, inner_reduction):
        return 4 if (reduction_numel_hint, numel_hint) == (N, M) else 1

    def fn(x, y):
        return (x + y).sum(-1), x.sum(0)

    inputs = [torch.randn(M, N), torch.randn(N, M).t()]
    with inductor_ext.config.patch(target="ascend"), \
            mock.patch.object(InductorChoices, "reduction_split_factor",
                              staticmethod(split_factor)):
        got = torch.compile(fn, dynamic=False)(*inputs)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "segmented_unsupported" not in inductor_ext.metrics.rejected_pairs
    for g, r in zip(got, fn(*[t.double() for t in inputs])):
        assert max_rel_err(g, r) < tolerance(torch.float32)


@pytest.mark.parametrize("B,M,programs,per", [
    (2, 2 * 4096, 40, 20),    # 20 programs per sample: all 40 vector cores, one wave
    (4, 4 * 64, 32, 8),       # 16 row blocks per sample: 8 programs of 2 blocks each
    (16, 16 * 256, 40, 5),    # 80 programs, two full waves of 13 blocks (2 each: 1 x 32)
    (3, 3 * 13, 3, 1),        # few rows: the plan's programs were already cut to 3
    (64, 64 * 256, 40, 5),    # B above the cores: 8 waves of 13 blocks (1 each: 2 x 64)
    (2, 2 * 3, 40, 1),        # a sample's 3 rows are one block: one program each
])
def test_ascend_segment_layout(B, M, programs, per):
    """Ascend's with_segments: the same whole number of programs per sample, the one that
    takes the fewest row-block times in waves of the planned (vector-core) programs,
    never more than SEGMENT_MAX_WAVES waves nor a program without a row block."""
    from inductor_ext.plan import LaunchPlan
    from inductor_ext.targets.ascend import plan as ascend_plan

    base = LaunchPlan(target="ascend", programs=programs, block_m=4, r0_block=64,
                      num_warps=1, num_stages=1, row_loop="contiguous", prefetch=True,
                      l2_prefetch=1)
    got = ascend_plan.with_segments(base, B, M)
    assert (got.segments, got.programs, got.programs_per_segment) == (B, B * per, per)
    assert got.programs <= max(ascend_plan.SEGMENT_MAX_WAVES * programs, B)
    assert not got.prefetch and not got.l2_prefetch and not got.interleaved_segments
    blocks = got.row_blocks_per_segment(M)
    assert blocks >= per

    def block_times(p: int) -> int:
        return -(-B * p // programs) * -(-blocks // p)
    assert block_times(per) == min(block_times(p) for p in range(1, blocks + 1)
                                   if B * p <= max(8 * programs, B))


def test_dit_block_modulated_norms_fuse(plugin):
    """A DiT (adaLN, LayerNorm without affine): every modulated norm with a dx fuses its
    d(scale) / d(shift); gradients match eager."""
    work = models.build("dit", models.Size(batch=2, seq=12, hidden=32))
    ref = models.grads(work.copy(torch.float64))
    eager = models.grads(work)
    got = models.grads(work, torch.compile(work.model))
    keys = sorted(ref)
    assert_close([got[k] for k in keys], [ref[k] for k in keys], names=keys,
                 eager=[eager[k] for k in keys])
    metrics = inductor_ext.metrics
    # The norms with a dx (blocks.0.norm1 has none: the input needs no grad) all fuse.
    assert metrics.norms["found"] == metrics.norms["fused"] == 4
    assert metrics.mix_order_kernels == 4
    # d(scale) / d(shift) / d(gate) ride the norms, also those reading the dx the norm's
    # kernel computes (d(gate1) of blocks.0 sums dx * proj(a) per sample); the out norm's
    # dw / db. Only blocks.0.norm1's d(scale) / d(shift) have no dx to join (its input
    # needs no grad), and reach blocks.0.norm2's through the attention backward.
    assert metrics.fused_columns["other"] >= 10
    assert metrics.fused_columns["norm"] == 2
    assert sum(metrics.rejected_pairs.values()) <= 1
    assert set(metrics.rejected_pairs) <= {"producer_consumer"}


def test_segmented_rows_stay_whole(plugin, cuda_knobs):
    """A padded row that would run as kept register tiles (3 tiles of 16 for N=40 with
    these knobs) stays one persistent row when the column sums are per sample: the hook
    asks for whole rows (`PlanOptions.whole_rows`)."""
    cuda_knobs(kept_row_tile=16, kept_row_elem_bytes=4, kept_row_min_elems=0)
    inputs = _inputs(2, 11, 40, torch.float32, True)
    dy = torch.randn_like(inputs[0])

    def fn(*args):
        return autograd_grads(modulated_ln, list(args[:-1]), args[-1])

    got, codes = run_and_get_code(torch.compile(fn), *inputs, dy)
    assert_close(got, float64_grads(modulated_ln, inputs, dy),
                 names=["dx", "dscale", "dshift", "dw", "db"])
    assert inductor_ext.metrics.mix_order_kernels == 1
    fused = "\n".join(codes)
    assert "'segments': 2" in fused and "'keep_row_tiles': False" in fused
    assert "_mo_row" not in fused and "'column_tiled': False" in fused
