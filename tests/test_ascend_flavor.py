"""The fused kernel on the Ascend flavor, generated on CPU (`config.target = "ascend"`, no
torch_npu): a row loop strided over the vector-core programs, no num_warps / num_stages,
and ATen's final step; a row that exceeds the Unified Buffer walked in column tiles, whose
partials must be sums; a row that no column tile fits declined. The same kernels through
torch_npu's emulated backend are tested under tests/ascend/."""

import torch
from torch._inductor.utils import run_and_get_code

import inductor_ext
from tests.support.fused_kernels import rms_inputs as _inputs
from tests.support.reference import assert_close, rms_backward
from tests.support.tuning import tuned


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
    """Rows of 300 fp32 walked in column tiles (8 KB UB) with an amax column: declined. 16
    rows, not fewer (Inductor unrolls a column reduction over at most 8 into pointwise code),
    nor many more: the declined amax runs in Inductor's kernel, which the interpreter
    reduces element by element."""
    def fn(a, b):
        v = a * b
        return v.sum(1), v.amax(0)

    with inductor_ext.config.patch(target="ascend", ascend_ub_bytes=8192):
        torch.compile(fn)(torch.randn(16, 300), torch.randn(16, 300))
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
