"""Kernel counts, generated-code structure, declines and the disabled path."""

import contextlib
import dataclasses
import os
import re
import types
from unittest import mock

import pytest
import sympy
import torch
import triton
import triton.language as tl
from torch._inductor.utils import run_and_get_code

import inductor_ext
from inductor_ext.plan import DeviceInfo, PlanOptions, ShapeInfo, assume_device
from inductor_ext.targets.cuda import flavor as cuda_codegen
from inductor_ext.targets.cuda import plan as cuda_plan
from inductor_ext.targets.cuda.tuning import CudaTuning
from tests.support.reference import (
    assert_close,
    autograd_grads,
    float64_grads,
    layer_norm,
    rms_backward,
    rms_norm,
)
from tests.support.tuning import tuned


def _inputs(M=64, N=40):
    return torch.randn(M, N), torch.randn(N), torch.randn(M, N), torch.rand(M, 1) + 0.5


def _triton_kernels(code: str) -> int:
    return code.count("async_compile.triton(")


def test_one_fused_kernel_with_workspace_and_final_sum(plugin):
    out, (code,) = run_and_get_code(torch.compile(rms_backward), *_inputs())
    assert inductor_ext.metrics.mix_order_kernels == 1
    # dx and dw in one kernel, plus the generated final step over the workspace
    assert _triton_kernels(code) == 2
    assert "ws_ptr" in code and "workspace_" in code  # the partial-sum workspace
    assert "_mo_acc0 = tl.full([XBLOCK, R0_BLOCK], 0.0, tl.float32)" in code
    # strided row blocks: block i goes to program i % programs
    assert "row_start = tl.program_id(0) * XBLOCK" in code
    assert "for xoffset in tl.range(row_start, row_end, row_step):" in code
    # the final step folds workspace rows [programs, K, N] into the [N] output
    assert "for r0_offset in tl.range(0, r0_numel, R0_BLOCK):" in code
    assert "tl.store(out_ptr0 + xindex, out0.to(tl.float32), xmask)" in code
    assert ".sum(0)" not in code


def test_aten_final_step_when_the_plan_has_none(plugin, cuda_knobs):
    cuda_knobs(generated_final_step=False)
    args = _inputs()
    out, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert _triton_kernels(code) == 1
    assert ".sum(0)" in code
    assert_close(out, rms_backward(*[a.double() for a in args]))


def test_final_step_of_every_partial_kind(plugin):
    """sum / prod / amax / amin partials, all folded by one final-step kernel."""
    def fn(a, b):
        v = a * b
        return v.sum(1), v.sum(0), (1 + 0.01 * v).prod(0), v.amax(0), v.amin(0)

    a, b = torch.randn(96, 48), torch.randn(96, 48)
    got, (code,) = run_and_get_code(torch.compile(fn), a, b)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert code.count("tl.store(out_ptr") >= 4
    ref = fn(a.double(), b.double())
    for g, r in zip(got, ref):
        torch.testing.assert_close(g.double(), r, rtol=1e-4, atol=1e-4)


def test_cuda_column_tiled_beyond_max_persistent_n(cuda_knobs, plugin):
    """Rows longer than max_persistent_n: Inductor's looped row reduction inside our row
    loop, column sums added into the program's workspace row per tile."""
    args = _inputs(M=64, N=200)
    cuda_knobs(column_tile=64, register_partials_share=0.0)  # no register tiles
    with inductor_ext.config.patch(max_persistent_n=64):
        got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "for r0_offset in" in code and "'R0_BLOCK': 64" in code
    assert "tl.store(_mo_ws0, tl.load(_mo_ws0" in code
    assert "tl.full([XBLOCK, R0_BLOCK // 8], 0, tl.float32)" in code  # chunked row sum
    assert "mix_order_autotune" not in code  # accumulating kernels are never re-run to time
    assert_close(got, rms_backward(*[a.double() for a in args]))


def _register_tiled(cuda_knobs, tile=16):
    cuda_knobs(register_tile=tile)
    return inductor_ext.config.patch(max_persistent_n=tile)


def _fused_kernel_source(code: str) -> str:
    """The fused kernel's Triton source (the first kernel with a row loop)."""
    return next(src for src in code.split("async_compile.triton(")[1:]
                if "for xoffset in" in src)


def test_cuda_register_tiles_unroll_the_column_loops(plugin, cuda_knobs):
    """A row longer than max_persistent_n whose partials fit the register file: the column
    tiles are unrolled, each with its own accumulators, stored once per program."""
    N = 40  # tiles of 16: 3, the last one masked
    args = _inputs(M=64, N=N)
    with _register_tiled(cuda_knobs):
        got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    fused = _fused_kernel_source(code)
    assert "for r0_offset in" not in fused
    assert [f"r0_offset = {t} * R0_BLOCK" in fused for t in range(4)] == [True] * 3 + [False]
    assert fused.count("_mo_acc0_t2 = _mo_acc0_t2 + tl.sum(") == 1
    assert "tl.load(_mo_ws" not in fused  # no read-modify-write of the workspace
    assert "2 * R0_BLOCK + r0_cols < r0_numel" in fused  # the partial last tile
    assert "'R0_BLOCK': 16" in code
    assert_close(got, rms_backward(*[a.double() for a in args]))


def test_register_tiles_take_every_partial_kind(plugin, cuda_knobs):
    """Register tiles fold with each reduction's own combine (the looped path: sums only)."""
    def fn(a, b):
        v = a * b
        return v.sum(1), v.sum(0), (1 + 0.01 * v).prod(0), v.amax(0), v.amin(0)

    a, b = torch.randn(96, 48), torch.randn(96, 48)
    with _register_tiled(cuda_knobs):
        got, (code,) = run_and_get_code(torch.compile(fn), a, b)
    assert inductor_ext.metrics.mix_order_kernels == 1
    fused = _fused_kernel_source(code)
    assert "triton_helpers.maximum(_mo_acc2_t1, triton_helpers.max2(" in fused
    ref = fn(a.double(), b.double())
    for g, r in zip(got, ref):
        torch.testing.assert_close(g.double(), r, rtol=1e-4, atol=1e-4)


def test_register_tiles_are_autotuned(cuda_knobs, plugin):
    """Register-tiled kernels store their partials (no workspace adds), so the autotuner
    may run them more than once: rows per iteration 1 and 2 are both correct."""
    cuda_knobs(autotune_on_cpu=True)
    args = _inputs(M=64, N=48)
    with _register_tiled(cuda_knobs):
        got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert "@mix_order_autotune(" in code
    configs = code.split("'inductor_ext_configs': ")[1].split("]")[0]
    assert "'XBLOCK': 1," in configs and "'XBLOCK': 2," in configs
    assert configs.count("'R0_BLOCK': 16,") == configs.count("'XBLOCK'")
    assert_close(got, rms_backward(*[a.double() for a in args]))


def test_autotuned_configs_are_attached_and_correct(plugin, cuda_knobs):
    cuda_knobs(autotune_on_cpu=True)
    args = _inputs(M=256, N=40)
    got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "@mix_order_autotune(" in code
    assert "from inductor_ext.runtime.autotune import mix_order_autotune" in code
    configs = code.split("'inductor_ext_configs': ")[1].split("]")[0]
    assert 2 <= configs.count("'XBLOCK'") <= 12
    assert_close(got, rms_backward(*[a.double() for a in args]))


def test_deterministic_mode_keeps_one_config(plugin, cuda_knobs):
    cuda_knobs(autotune_on_cpu=True)
    with torch._inductor.config.patch(deterministic=True):
        _, (code,) = run_and_get_code(torch.compile(rms_backward), *_inputs(M=256))
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "mix_order_autotune" not in code and "@triton_heuristics.fixed_config(" in code


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


def test_column_reading_the_row_statistic_joins_its_row(plugin):
    """dw needs rstd, which the row reduction computes: in the persistent kernel the row
    block's rstd is in registers when dw's partial is accumulated, read at its own row."""

    def fn(x, w, dy):
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        xhat = x * rstd
        dw = (dy * xhat).sum(0)
        return xhat * w, dw

    x, w, dy, _ = _inputs()
    got = torch.compile(fn)(x, w, dy)
    assert_close(got, fn(x.double(), w.double(), dy.double()))
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert not inductor_ext.metrics.rejected_pairs


@pytest.mark.parametrize("path", ["other_row", "through_a_kernel"])
def test_producer_consumer_pair_is_not_fused(plugin, path):
    """dw reads rstd at another row than its own (flipped), or through a reduction over all
    rows (another kernel, which would run both before and after the fused one)."""

    def fn(x, w, dy):
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        scale = rstd.flip(0) if path == "other_row" else rstd.sum()
        return x * rstd * w, (dy * x * scale).sum(0)

    x, w, dy, _ = _inputs()
    got = torch.compile(fn)(x, w, dy)
    assert_close(got, fn(x.double(), w.double(), dy.double()))
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs == {"producer_consumer": 1}


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


def test_cost_model_decline_keeps_inductor_kernels_without_always_fuse(interp):
    """A group the cost model declines (here: fewer rows per program than the tuning asks
    for) keeps Inductor's kernels; `always_fuse` off is the default."""
    with torch._inductor.config.patch(inductor_ext.options()), \
            tuned("cuda", min_rows_per_program=65):
        torch.compile(rms_backward)(*_inputs())
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs["not_profitable"] == 1


def test_small_shape_fuses_by_default(interp):
    """64x40: the model predicts one fused launch cheaper than Inductor's two kernels."""
    with torch._inductor.config.patch(inductor_ext.options()):
        torch.compile(rms_backward)(*_inputs())
    assert inductor_ext.metrics.mix_order_kernels == 1


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
    assert ".sum(0)" in code  # Ascend keeps the ATen final step


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
    # Ascend keeps Inductor's loop accumulators and plain stores (CUDA-measured rewrites).
    assert "R0_BLOCK // " not in code and "cache_modifier='.cs'" not in code
    ref = rms_backward(*[a.double() for a in args])
    assert_close(got, [r.double() for r in ref])


def test_ascend_column_tiled_declines_non_sum_partials(plugin):
    def fn(a, b):
        v = a * b
        return v.sum(1), v.amax(0)

    with inductor_ext.config.patch(target="ascend", ascend_ub_bytes=8192):
        torch.compile(fn)(torch.randn(64, 300), torch.randn(64, 300))
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs == {"tiled_non_sum": 1}


def test_ascend_declines_a_row_no_column_tile_fits(plugin):
    """Not even the narrowest column tile of a row fits the Unified Buffer (here: many fp32
    temporaries per element in the smallest UB): the target has no tile to walk it in."""
    with inductor_ext.config.patch(target="ascend", ascend_ub_bytes=4096), \
            tuned("ascend", fp32_temps=256):
        torch.compile(rms_backward)(*_inputs(M=64, N=200))
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs == {"no_tile_fits": 1}


def test_fused_kernel_builds_on_the_schedulings_kernel_class():
    """A vendor scheduling (torch_npu's, say) keeps its own Triton kernel class."""
    from inductor_ext.codegen.row_loop import MixOrderKernel, MixOrderKernelMixin, kernel_class_for
    from inductor_ext.compat import TritonKernel

    class VendorKernel(TritonKernel):
        pass

    cls = kernel_class_for(VendorKernel)
    assert issubclass(cls, VendorKernel) and issubclass(cls, MixOrderKernelMixin)
    assert kernel_class_for(VendorKernel) is cls
    assert kernel_class_for(TritonKernel) is MixOrderKernel
    with pytest.raises(TypeError):
        kernel_class_for(object)


@pytest.mark.parametrize("row_order", ["contiguous", "strided"])
@pytest.mark.parametrize("M", [64, 67])  # row count a multiple of XBLOCK, and not
def test_prefetch_double_buffers_the_row_loads(plugin, cuda_knobs, M, row_order):
    """The next row block's loads go to `<var>_pf` registers before the current block is
    computed: clamped in bounds when every block is full, masked when the last is not."""
    cuda_knobs(prefetch_min_n=1)
    cuda_knobs(prefetch_min_rows=1)
    cuda_knobs(row_order=row_order)
    cuda_knobs(tile_elems=512)  # XBLOCK 8: 8-9 blocks, 2 programs
    args = _inputs(M=M, N=40)
    got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "_pf = tl.load(" in code
    if row_order == "contiguous":
        assert "row_step = XBLOCK" in code
    else:  # block i goes to program i % programs: the step spans every program's block
        programs = re.search(r"'fixed_grid': \['(\d+)'", code).group(1)
        assert int(programs) >= 2 and f"row_step = {programs} * XBLOCK" in code
    if M % 8 == 0:
        assert "xoffset_pf = tl.minimum(xoffset + row_step, xnumel - XBLOCK)" in code
    else:
        assert "xmask_pf = xindex_pf < xnumel" in code
    assert_close(got, rms_backward(*[a.double() for a in args]))


def test_prefetch_layer_norm_on_a_sliced_input(plugin, cuda_knobs):
    cuda_knobs(prefetch_min_n=1)
    cuda_knobs(prefetch_min_rows=1)
    def sliced_layer_norm(x_full, w, b):
        return layer_norm(x_full[:, 8:56], w, b)  # rows of stride 80, 48 columns read

    x_full = torch.randn(96, 80, requires_grad=True)
    w, b = torch.randn(48, requires_grad=True), torch.randn(48, requires_grad=True)
    dy = torch.randn(96, 48)
    y = torch.compile(sliced_layer_norm)(x_full, w, b)
    got = torch.autograd.grad(y, [x_full, w, b], dy)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert_close(got, float64_grads(sliced_layer_norm, [x_full, w, b], dy))


def test_inductor_kernel_count_includes_the_final_step(plugin):
    from torch._inductor import metrics as inductor_metrics

    inductor_metrics.reset()
    _, (code,) = run_and_get_code(torch.compile(rms_backward), *_inputs())
    assert inductor_metrics.generated_kernel_count == _triton_kernels(code) == 2


def test_cast_of_the_column_result_is_written_by_the_final_step(plugin):
    """bf16 LayerNorm: dw and db are summed in fp32 and cast to bf16. The casts join the
    group, so the final step writes bf16 directly: two kernels in all, no fp32 [N] buffer."""
    N = 48
    inputs = [torch.randn(*shape, dtype=torch.bfloat16, requires_grad=True)
              for shape in ((64, N), (N,), (N,))]
    dy = torch.randn(64, N, dtype=torch.bfloat16)
    got, codes = run_and_get_code(autograd_grads, torch.compile(layer_norm), inputs, dy)
    backward = codes[-1]
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert _triton_kernels(backward) == 2
    assert "triton_poi" not in backward
    assert "out0.to(tl.bfloat16)" in backward and "out1.to(tl.bfloat16)" in backward
    assert f"empty_strided_cuda(({N}, ), (1, ), torch.float32)" not in backward
    assert f"(({N}, ), (1, ), torch.float32)" not in backward
    assert_close(got, float64_grads(layer_norm, inputs, dy))


def test_cast_is_not_absorbed_when_the_fp32_result_has_other_users(plugin):
    """The fp32 sum is also returned: it must still be written, so the cast stays Inductor's."""
    def fn(a, b):
        v = a * b
        col = v.sum(0)
        return v.sum(1), col, col.to(torch.bfloat16)

    a, b = torch.randn(64, 40), torch.randn(64, 40)
    got, (code,) = run_and_get_code(torch.compile(fn), a, b)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "out0.to(tl.float32)" in code
    assert "triton_poi" in code  # the cast, still its own kernel
    assert_close(got, [r.double() for r in fn(a.double(), b.double())])


# -- L2 prefetch of row blocks ahead (Hopper's cp.async.bulk.prefetch.L2) -------------------
_L2_HINT = re.compile(
    r"tl\.inline_asm_elementwise\('[^']*cp\.async\.bulk\.prefetch\.L2\.global[^']*', "
    r"\"=r,l,r\", \[(in_ptr\d+) \+ \((\d+) \* xoffset_l2(?: \+ (\d+))?\), "
    r"xrows_l2 \* (\d+)(?: - (\d+))?\], dtype=tl\.int32, is_pure=False, pack=1\)")


def _l2_hints(fused: str) -> list[tuple[str, int, int, int, int]]:
    """(pointer, row stride, offset, bytes per row, gap) of each L2 hint, in source order."""
    hints = [(p, int(s), int(o or 0), int(b), int(g or 0)) for p, s, o, b, g in
             _L2_HINT.findall(fused)]
    assert len(hints) == fused.count("cp.async.bulk.prefetch.L2.global")  # all well formed
    return hints


def _row_loaded_pointers(fused: str, stride: int) -> set[str]:
    """The pointers loaded at `r0 + stride * x` (the [M, N] inputs)."""
    return set(re.findall(rf"tl\.load\((in_ptr\d+) \+ \([\d +]*r0_1 \+ {stride}\*x0\)", fused))


def _l2_hint_asms(fused: str) -> set[str]:
    """The asm strings of the L2 hints: rows read twice (column-tiled) keep their lines."""
    return set(re.findall(r"tl\.inline_asm_elementwise\('([^']*)'", fused))


@pytest.mark.parametrize("distance", [1, 2])
def test_l2_prefetch_in_register_tiled_row_loop(cuda_knobs, plugin, distance):
    """Register tiles are not double-buffered: each iteration hints the row block
    `distance` steps ahead of x and dy into L2 (not the [M, 1] rstd nor the [N] weight),
    before the tiles' loads; the interpreter runs the hint as a no-op."""
    cuda_knobs(l2_prefetch_on_cpu=True)
    cuda_knobs(l2_prefetch_distance=distance)
    args = _inputs(M=64, N=40)
    with _register_tiled(cuda_knobs):
        got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert f"'prefetch': False, 'l2_prefetch': {distance}" in code
    fused = _fused_kernel_source(code)
    ahead = (f"xoffset_l2 = tl.maximum(tl.minimum(xoffset + {distance} * row_step, "
             "xnumel - XBLOCK), 0)")
    assert fused.count(ahead) == 1
    assert fused.count("xrows_l2 = tl.minimum(xnumel - xoffset_l2, XBLOCK)") == 1
    hints = _l2_hints(fused)
    assert len(hints) == 2  # x and dy
    assert [h[1:] for h in hints] == [(40, 0, 160, 0)] * 2  # 40 fp32 columns, whole rows
    pointers = {h[0] for h in hints}
    assert len(pointers) == 2 and pointers == _row_loaded_pointers(fused, 40)
    # column-tiled: the plain hint by default (keeping lines for the second pass is a knob)
    assert "'column_tiled': True" in code
    assert _l2_hint_asms(fused) == {cuda_codegen.L2_PREFETCH_ASM}
    # inside the row loop, at its indentation, before the first column tile's loads
    lines = fused.splitlines()
    loop = next(i for i, line in enumerate(lines) if "for xoffset in" in line)
    hint = next(i for i, line in enumerate(lines) if "xoffset_l2 = " in line)
    tile0 = next(i for i, line in enumerate(lines) if "r0_offset = 0 * R0_BLOCK" in line)
    first_load = next(i for i, line in enumerate(lines) if i > loop and "tl.load(" in line)
    indent = lines[loop + 1][:len(lines[loop + 1]) - len(lines[loop + 1].lstrip())]
    assert lines[hint].startswith(indent) and not lines[hint].startswith(indent + " ")
    assert loop < hint < first_load < tile0
    assert max(i for i, line in enumerate(lines) if "cp.async.bulk" in line) < first_load
    assert_close(got, rms_backward(*[a.double() for a in args]))


def _double_buffered(cuda_knobs):
    cuda_knobs(prefetch_min_n=1)
    cuda_knobs(prefetch_min_rows=1)
    cuda_knobs(tile_elems=512)  # XBLOCK 8: 8 blocks, 2 programs


def test_no_l2_prefetch_when_the_row_loads_are_double_buffered(cuda_knobs, plugin):
    """The next block already sits in `_pf` registers: no L2 hint on top."""
    _double_buffered(cuda_knobs)
    cuda_knobs(l2_prefetch_on_cpu=True)
    args = _inputs(M=64, N=40)
    got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "_pf = tl.load(" in code and "'prefetch': True, 'l2_prefetch': 0" in code
    assert "xoffset_l2" not in code and "cp.async.bulk" not in code
    assert "inline_asm" not in code
    assert_close(got, rms_backward(*[a.double() for a in args]))


def test_l2_prefetch_in_persistent_loop_without_double_buffering(cuda_knobs, plugin):
    _double_buffered(cuda_knobs)
    cuda_knobs(prefetch_min_n=4096)  # above R0_BLOCK: off
    cuda_knobs(l2_prefetch_on_cpu=True)
    args = _inputs(M=64, N=40)
    got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "'column_tiled': False" in code and "'prefetch': False, 'l2_prefetch': 1" in code
    fused = _fused_kernel_source(code)
    assert "_pf = tl.load(" not in fused
    assert fused.count("xoffset_l2 = tl.maximum(tl.minimum(xoffset + 1 * row_step, "
                       "xnumel - XBLOCK), 0)") == 1
    hints = _l2_hints(fused)
    assert len(hints) == 2 and {h[0] for h in hints} == _row_loaded_pointers(fused, 40)
    assert [h[1:] for h in hints] == [(40, 0, 160, 0)] * 2
    assert _l2_hint_asms(fused) == {cuda_codegen.L2_PREFETCH_ASM}  # one pass: no evict_last
    assert_close(got, rms_backward(*[a.double() for a in args]))


@pytest.mark.parametrize("register_tiles", [False, True])
def test_no_l2_prefetch_on_cpu_by_default(plugin, cuda_knobs, register_tiles):
    args = _inputs(M=64, N=40)
    with _register_tiled(cuda_knobs) if register_tiles else contextlib.nullcontext():
        got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "'prefetch': False, 'l2_prefetch': 0" in code  # a loop the hint would suit
    assert "xoffset_l2" not in code and "inline_asm" not in code
    assert_close(got, rms_backward(*[a.double() for a in args]))


@pytest.mark.parametrize("first_column,sliced_in", [(0, "graph"), (8, "graph"), (8, "input")])
def test_l2_prefetch_of_a_sliced_input_ends_at_the_last_row(plugin, cuda_knobs,
                                                            first_column, sliced_in):
    """x = big[:, c:c + 40] of a [64, 48] tensor: rows 192 bytes apart. The hint starts at
    the block's first element and stops after its last row's 40th column, not at the end
    of the gap after it. Sliced in the graph, c is an offset of the index; sliced before,
    the input pointer already starts c columns in."""
    cuda_knobs(l2_prefetch_on_cpu=True)
    N, stride = 40, 48
    big = torch.randn(64, stride)
    _, w, dy, rstd = _inputs(M=64, N=N)
    if sliced_in == "graph":
        def fn(big, w, dy, rstd):
            return rms_backward(big[:, first_column:first_column + N], w, dy, rstd)
        args, offset = (big, w, dy, rstd), first_column
    else:
        fn, args, offset = rms_backward, (big[:, first_column:first_column + N], w, dy, rstd), 0
    got, (code,) = run_and_get_code(torch.compile(fn), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    fused = _fused_kernel_source(code)
    hints = {h[0]: h[1:] for h in _l2_hints(fused)}
    (x_ptr,) = _row_loaded_pointers(fused, stride)
    (dy_ptr,) = _row_loaded_pointers(fused, N)
    assert hints == {x_ptr: (stride, offset, stride * 4, (stride - N) * 4),
                     dy_ptr: (N, 0, N * 4, 0)}
    start = f"{stride} * xoffset_l2" + (f" + {offset}" if offset else "")
    assert f"[{x_ptr} + ({start}), xrows_l2 * 192 - 32]" in fused
    assert _l2_hint_asms(fused) == {cuda_codegen.L2_PREFETCH_ASM}
    assert_close(got, fn(*[a.double() for a in args]))


@triton.jit
def _inline_asm_kernel(x_ptr, out_ptr, ASM: tl.constexpr):
    offsets = tl.arange(0, 16)
    x = tl.load(x_ptr + offsets)
    tl.inline_asm_elementwise(ASM, "=r,l,r", [x_ptr + offsets, offsets], dtype=tl.int32,
                              is_pure=False, pack=1)
    tl.store(out_ptr + offsets, x + 1)


@pytest.mark.parametrize("hint", ["L2_PREFETCH_ASM", "L2_PREFETCH_ASM_KEEP"])
def test_interpreter_runs_the_l2_hint_as_a_no_op_and_no_other_asm(hint):
    from triton.runtime.errors import InterpreterError

    from inductor_ext.interpreter import cpu_interpret

    asm = getattr(cuda_codegen, hint)
    x, out = torch.arange(16, dtype=torch.float32), torch.zeros(16)
    with cpu_interpret():
        _inline_asm_kernel[(1,)](x, out, ASM=asm)
        assert torch.equal(out, x + 1)
        with pytest.raises(InterpreterError, match="inline_asm not supported") as err:
            _inline_asm_kernel[(1,)](x, out, ASM="mov.u32 $0, 0;")
        assert isinstance(err.value.__cause__, NotImplementedError)
    # the patch ends with the context: the hint is unsupported again
    with pytest.raises(InterpreterError, match="inline_asm not supported"):
        _inline_asm_kernel[(1,)](x, out, ASM=asm)


_COMPILE_FOR_SM = """
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
sys.path.insert(0, sys.argv[1])
from l2_hint_kernel import l2_hint_kernel
src = ASTSource(fn=l2_hint_kernel, constexprs={"BLOCK": 1024},
                signature={"x_ptr": "*bf16", "y_ptr": "*bf16", "n": "i32", "BLOCK": "constexpr"})
try:
    c = triton.compile(src, target=GPUTarget("cuda", int(sys.argv[2]), 32))
except Exception as e:
    print(json.dumps({"error": str(e)}))
else:
    print(json.dumps({"ptx": c.asm["ptx"], "cubin_bytes": len(c.asm["cubin"])}))
"""


@pytest.mark.parametrize("second_pass", [False, True])
def test_l2_prefetch_asm_assembles_for_hopper_only(tmp_path, second_pass):
    """Triton's bundled ptxas (no GPU needed) takes the hint for sm_90 and rejects it for
    sm_80, so the asm string is checked, not just passed through. Rows read twice get the
    variant that enters L2 as evict_last (a cache policy on the bulk prefetch)."""
    import json
    import subprocess
    import sys
    import textwrap

    hint = cuda_codegen.CudaFlavor().l2_prefetch_statement(
        "x_ptr + off", "nbytes", second_pass, keep_fraction=1.0)  # the kept variant
    asm = cuda_codegen.L2_PREFETCH_ASM_KEEP if second_pass else cuda_codegen.L2_PREFETCH_ASM
    assert hint.startswith(f"tl.inline_asm_elementwise({asm!r}, ")
    (tmp_path / "l2_hint_kernel.py").write_text(textwrap.dedent(f"""
        import triton
        import triton.language as tl

        @triton.jit
        def l2_hint_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            off = tl.program_id(0) * BLOCK
            nbytes = tl.minimum(n - off, BLOCK) * 2
            {hint}
            idx = off + tl.arange(0, BLOCK)
            tl.store(y_ptr + idx, tl.load(x_ptr + idx, idx < n), idx < n)
    """))
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(tmp_path / "cache")}

    def compile_for(sm: int) -> dict:
        res = subprocess.run([sys.executable, "-c", _COMPILE_FOR_SM, str(tmp_path), str(sm)],
                             env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout.strip().splitlines()[-1])

    hopper = compile_for(90)
    assert "error" not in hopper, hopper.get("error")
    if second_pass:
        assert "createpolicy.fractional.L2::evict_last.b64 pol, 1.0;" in hopper["ptx"]
        assert "@p cp.async.bulk.prefetch.L2.global.L2::cache_hint [a], n, pol;" in hopper["ptx"]
    else:
        assert "@p cp.async.bulk.prefetch.L2.global [a], n;" in hopper["ptx"]
        assert "createpolicy" not in hopper["ptx"]
    assert hopper["cubin_bytes"] > 0
    ampere = compile_for(80)
    assert "cp.async.bulk.prefetch" in ampere.get("error", "")
    assert "sm_90" in ampere["error"]


def _shape(device: str = "cuda") -> ShapeInfo:
    return ShapeInfo(M_hint=4096, M_static=True, N=4096, num_columns=1, elem_bytes=2,
                     shared_bytes=1 << 25, total_bytes=1 << 26, unfused_bytes=1 << 27,
                     row_elem_bytes=6, device=torch.device(device))


HOPPER = DeviceInfo(type="cuda", name="H100-like", cores=132, l2_bytes=50 * 2**20,
                    dram_bytes_per_s=3.35e12, capability=(9, 0))
AMPERE = DeviceInfo(type="cuda", name="A100-like", cores=108, capability=(8, 0))
INTERPRETER = DeviceInfo(type="cpu", cores=2, interpreted=True)


def test_l2_prefetch_distance_by_device():
    two = CudaTuning(l2_prefetch_distance=2)
    assert cuda_plan.l2_prefetch_for(HOPPER, two) == 2  # Hopper and later
    assert cuda_plan.l2_prefetch_for(AMPERE, two) == 0  # no bulk prefetch before sm_90
    assert cuda_plan.l2_prefetch_for(DeviceInfo(type="meta"), two) == 0
    assert cuda_plan.l2_prefetch_for(INTERPRETER, two) == 0  # l2_prefetch_on_cpu off
    on_cpu = CudaTuning(l2_prefetch_distance=2, l2_prefetch_on_cpu=True)
    assert cuda_plan.l2_prefetch_for(INTERPRETER, on_cpu) == 2
    off = CudaTuning(l2_prefetch_distance=0, l2_prefetch_on_cpu=True)
    assert cuda_plan.l2_prefetch_for(INTERPRETER, off) == 0
    assert cuda_plan.l2_prefetch_for(HOPPER, off) == 0
    assert cuda_plan.l2_prefetch_for(HOPPER, two, double_buffered=True) == 0


@pytest.mark.parametrize("partials", [1, 2, 3, 5, 6])
@pytest.mark.parametrize("programs", [2, 132, 528, 1000])
def test_final_step_rows_are_a_power_of_two(partials, programs):
    """The final step's row chunk is a tl.arange: a power of two for any partial count
    (3 partials used to give 341 rows at 528 programs, a compile error on the GPU)."""
    tuning = CudaTuning()
    for N in (40, 1024, 4096, 16384):
        block = cuda_plan.final_step_block(tuning, N, programs, partials)
        assert block.rows & (block.rows - 1) == 0 and block.columns & (block.columns - 1) == 0
        assert block.rows <= max(1, tuning.final_step_tile // partials // block.columns) \
            or block.rows == 1
        assert block.rows <= 1 << (programs - 1).bit_length()  # no taller than the workspace


# -- programmatic dependent launch of the final step (Hopper) ------------------------------
def test_final_step_pdl_by_device():
    """PDL needs sm_90: the plan asks for it on Hopper and later only, never on CPU."""
    def pdl(device, **knobs):
        return cuda_plan.plan(_shape(), device, CudaTuning(**knobs), PlanOptions()).final_step_pdl

    assert HOPPER.hopper_or_later and not AMPERE.hopper_or_later
    assert not INTERPRETER.hopper_or_later
    assert pdl(HOPPER) and not pdl(AMPERE) and not pdl(INTERPRETER)
    assert not pdl(HOPPER, final_step_pdl=False)


class _CodegenOnly(Exception):
    """Raised once Inductor has written a graph's code: nothing is compiled or run."""


def _generated_code(fn, *args) -> str:
    """The wrapper code Inductor writes for fn(*args), without compiling or running any
    kernel (for code the interpreter cannot run: griddepcontrol is GPU-only asm)."""
    from torch._inductor.graph import GraphLowering

    codes = []

    def compile_to_module(self):
        codes.append(self.codegen()[0].value)
        raise _CodegenOnly

    torch._dynamo.reset()
    with mock.patch.object(GraphLowering, "compile_to_module", compile_to_module), \
            pytest.raises(Exception) as err:
        torch.compile(fn)(*args)
    chain, exc = [], err.value
    while exc is not None:
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    assert any(isinstance(e, _CodegenOnly) for e in chain), err.value
    (code,) = codes
    return code


@pytest.mark.parametrize("register_tiles", [False, True])
def test_final_step_pdl_code(cuda_knobs, plugin, register_tiles):
    """With PDL the fused kernel lets the final step launch once every program has left
    its row loop (before its workspace stores), and the final step, launched with the
    PDL attribute, first waits for the fused kernel's memory."""
    patches = {}
    if register_tiles:
        cuda_knobs(register_tile=16)
        patches["max_persistent_n"] = 16
    hopper_cpu = dataclasses.replace(INTERPRETER, capability=(9, 0))  # planned like sm_90
    with inductor_ext.config.patch(**patches), assume_device(hopper_cpu):
        code = _generated_code(rms_backward, *_inputs())
    kernels = code.split("async_compile.triton(")[1:]
    assert len(kernels) == 2
    fused = next(k for k in kernels if "for xoffset in" in k)
    final = next(k for k in kernels if "for xoffset in" not in k)
    assert f"'register_tiles': {3 if register_tiles else 0}" in fused
    assert "'final_step_pdl': True" in fused and "'launch_pdl': False" in fused
    lines = fused.splitlines()
    (trigger,) = [i for i, line in enumerate(lines)
                  if line == "    tl.extra.cuda.gdc_launch_dependents()"]
    loop = next(i for i, line in enumerate(lines) if "for xoffset in" in line)
    ws_store = next(i for i, line in enumerate(lines) if "tl.store(ws_ptr" in line)
    assert loop < trigger < ws_store  # top level (4 spaces): after the loop, not in it
    assert fused.count("tl.extra.cuda.gdc") == 1
    assert "'launch_pdl': True" in final
    body = final.split("):\n", 1)[1].splitlines()
    assert body[0] == "    tl.extra.cuda.gdc_wait()"
    assert final.count("tl.extra.cuda.gdc") == 1


@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_l2_hint_keeps_lines_for_the_second_pass_when_asked(plugin, cuda_knobs, fraction):
    """l2_keep_fraction > 0: a column-tiled loop's hint enters L2 as evict_last (that share
    of its lines), a persistent loop's hint stays plain; the kernel still runs."""
    cuda_knobs(l2_prefetch_on_cpu=True)
    cuda_knobs(l2_keep_fraction=fraction)
    cuda_knobs(register_tile=16)
    args = _inputs()
    with inductor_ext.config.patch(max_persistent_n=16):
        got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    keep = cuda_codegen.L2_PREFETCH_ASM_KEEP.replace("pol, 1.0;", f"pol, {fraction!r};")
    assert _l2_hint_asms(_fused_kernel_source(code)) == {keep}
    assert f"createpolicy.fractional.L2::evict_last.b64 pol, {fraction!r};" in keep
    assert_close(got, rms_backward(*[a.double() for a in args]))
    hint = cuda_codegen.CudaFlavor().l2_prefetch_statement("p", "n", second_pass=False,
                                                            keep_fraction=fraction)
    assert cuda_codegen.L2_PREFETCH_ASM in hint and "createpolicy" not in hint


# -- program count: balanced row blocks, a second program per SM when the workspace is small --
def _norm_shape(M: int, N: int, partials: int) -> ShapeInfo:
    nbytes = 3 * M * N * 2
    return ShapeInfo(M_hint=M, M_static=True, N=N, num_columns=partials, elem_bytes=2,
                     shared_bytes=2 * M * N * 2, total_bytes=nbytes, unfused_bytes=2 * nbytes,
                     row_elem_bytes=6, device=torch.device("cuda:9"))


@pytest.mark.parametrize("M,N,partials,settings,programs", [
    # 2048 blocks of 2 rows: two programs per SM (8 MB of workspace or less, inside a
    # quarter of the L2), balanced to 8 blocks each.
    (4096, 4096, 1, {}, 256),
    (4096, 4096, 2, {}, 256),
    # Workspace bounded by the kernel's bytes only: one per SM, 128 programs of 16 blocks
    # rather than 132 of which 68 run a 16th block alone.
    (4096, 4096, 1, {"max_workspace_l2_share": 0.0}, 128),
    (4096, 4096, 1, {"max_workspace_l2_share": 0.0, "balance_rows": False}, 132),
    # More programs per SM would leave fewer than prefetch_min_rows rows each.
    (2048, 4096, 1, {}, 128),
    (32768, 4096, 1, {}, 512),
    # LayerNorm at N=8192: 2 x 64 KB of partials per program; one program per SM.
    (16384, 8192, 2, {}, 132),
])
def test_program_count(M, N, partials, settings, programs):
    tuning = CudaTuning(**settings)
    plan = cuda_plan.plan(_norm_shape(M, N, partials), HOPPER, tuning, PlanOptions())
    assert plan.programs == programs
    if N <= tuning.prefetch_max_n:
        assert plan.prefetch == (M >= tuning.prefetch_min_rows * programs)


@pytest.mark.parametrize("M,N,warps", [
    (8192, 16384, 4),  # 1024 final-step programs of 16 columns: more than 4 per SM
    (16384, 8192, 8),  # 512: within 4 per SM
    (4096, 4096, 8),
    (262144, 128, 8),  # 8 programs
])
def test_final_step_warps_follow_its_program_count(M, N, warps):
    tuning = CudaTuning()
    plan = cuda_plan.plan(_norm_shape(M, N, 2), HOPPER, tuning, PlanOptions())
    assert plan.final_step_warps == warps == plan.final_step.num_warps
    assert cuda_plan.final_step_block(tuning, N, plan.programs, 2).num_warps \
        == tuning.final_step_warps


def test_generated_final_step_launches_with_the_plan_warps(plugin):
    """On CPU the plan counts 2 SMs: 256 columns are 16 final-step programs, more than 4
    per SM, so the final step's config carries half of `final_step_warps`."""
    args = _inputs(M=32, N=256)
    got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    final = next(src for src in code.split("async_compile.triton(")[1:]
                 if "for r0_offset in tl.range(0, r0_numel, R0_BLOCK):" in src)
    config = final.split("config=")[1].split("}")[0]
    assert f"'num_warps': {CudaTuning().final_step_warps // 2}," in config
    assert_close(got, rms_backward(*[a.double() for a in args]))


@pytest.mark.parametrize("programs", [1, 7, 132, 528])
@pytest.mark.parametrize("blocks", [1, 5, 131, 132, 133, 2048, 4096, 65536])
def test_balanced_programs_keep_the_longest_program(programs, blocks):
    """Balancing never adds programs nor iterations to the busiest program, and leaves
    no program without a block."""
    balanced = cuda_plan.balanced(CudaTuning(), programs, blocks)
    most = -(-blocks // min(programs, blocks))
    assert 1 <= balanced <= min(programs, blocks)
    assert -(-blocks // balanced) == most
    assert blocks - (balanced - 1) * most >= 1  # the last program still has a block


@pytest.mark.parametrize("layout", ["persistent", "register_tiled", "looped_tiles"])
def test_float64_partials_workspace_and_final_step(plugin, cuda_knobs, layout):
    """float64 columns: float64 accumulators in every row-loop layout, a float64
    workspace and final step, and results equal to float64 math to 1e-12."""
    x = torch.randn(96, 40, dtype=torch.float64, requires_grad=True)
    w = torch.randn(40, dtype=torch.float64, requires_grad=True)
    dy = torch.randn_like(x)
    ctx = contextlib.nullcontext()
    if layout != "persistent":
        cuda_knobs(register_tile=16)
        cuda_knobs(column_tile=16)
        if layout == "looped_tiles":
            cuda_knobs(register_partials_share=0.0)
        ctx = inductor_ext.config.patch(max_persistent_n=16)
    with ctx:
        got, codes = run_and_get_code(autograd_grads, torch.compile(rms_norm), [x, w], dy)
    assert inductor_ext.metrics.mix_order_kernels == 1
    code = next(c for c in codes if "for xoffset in" in c)
    fused = _fused_kernel_source(code)
    assert "float32" not in fused and "fp32" not in fused
    assert ".to(tl.float64)" in fused
    assert "'ws_ptr': '*fp64'" in code  # the generated final step folds float64
    for g, r in zip(got, autograd_grads(rms_norm, [x, w], dy)):
        assert float((g - r).abs().max() / r.abs().max()) <= 1e-12
