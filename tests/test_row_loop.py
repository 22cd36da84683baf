"""The fused kernel's row loop, generated for CUDA and run on the CPU interpreter: one kernel
computes dx and the column partials into a per-program workspace row, walking strided row
blocks; rows longer than `max_persistent_n` are walked in looped column tiles or unrolled
register tiles (each partial kind folded with its own combine); the next row block's loads
are double-buffered; the kernel class builds on the scheduling's own; and the plan decides
how many programs share the rows (`split_size`, balanced row blocks, a second program per
SM when the workspace is small)."""

import re

import pytest
import torch
from torch._inductor.utils import run_and_get_code

import inductor_ext
from inductor_ext.plan import PlanOptions
from inductor_ext.targets.cuda import plan as cuda_plan
from inductor_ext.targets.cuda.tuning import CudaTuning
from tests.support.fused_kernels import HOPPER
from tests.support.fused_kernels import fused_kernel_source as _fused_kernel_source
from tests.support.fused_kernels import norm_shape as _norm_shape
from tests.support.fused_kernels import register_tiled as _register_tiled
from tests.support.fused_kernels import rms_inputs as _inputs
from tests.support.fused_kernels import triton_kernel_count as _triton_kernels
from tests.support.reference import assert_close, float64_grads, layer_norm, rms_backward


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


def test_split_size_sets_the_program_count(plugin):
    with inductor_ext.config.patch(split_size=16):
        out, (code,) = run_and_get_code(torch.compile(rms_backward), *_inputs(M=64))
    assert "'fixed_grid': ['4', '1', '1']" in code  # 64 rows / 16 rows per program
    assert inductor_ext.metrics.mix_order_kernels == 1


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


# -- program count: balanced row blocks, a second program per SM when the workspace is small --
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
