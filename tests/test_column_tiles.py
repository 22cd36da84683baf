"""The text rewrites of Inductor's column-tile loops (codegen/rewrites.py): what they
change, what they leave alone, and that a rewritten loop still computes the same sums."""

import importlib.util
import textwrap

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._inductor.utils import run_and_get_code

import inductor_ext
from inductor_ext.codegen.rewrites import chunk_row_sums, stream_row_stores, unpin_row_loads
from inductor_ext.testing.reference import assert_close, autograd_grads, float64_grads, layer_norm

# Inductor's looped row sum as it writes it (masked form: the last tile is partial).
LOOPED_SUM = textwrap.dedent("""\
    _tmp4 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        tmp0 = tl.load(in_ptr0 + (r0_index + r0_numel * xindex), r0_mask & xmask, other=0.0)
        tmp3 = tl.broadcast_to(tmp0 * tmp0, [XBLOCK, R0_BLOCK])
        tmp5 = _tmp4 + tmp3
        _tmp4 = tl.where(r0_mask & xmask, tmp5, _tmp4)
    tmp4 = tl.sum(_tmp4, 1)[:, None]
""")


def test_chunked_row_sum_text():
    out = chunk_row_sums(LOOPED_SUM, 8)
    assert "_tmp4 = tl.full([XBLOCK, R0_BLOCK // 8], 0, tl.float32)" in out
    assert ("tmp5 = _tmp4 + tl.sum(tl.reshape(tl.where(r0_mask & xmask, tmp3, 0.0)"
            ".to(tl.float32), [XBLOCK, R0_BLOCK // 8, 8]), 2)") in out
    assert "    _tmp4 = tmp5\n" in out
    assert "tmp4 = tl.sum(_tmp4, 1)[:, None]" in out  # the final sum is unchanged


def test_unmasked_row_sum_keeps_its_term():
    text = LOOPED_SUM.replace("tl.where(r0_mask & xmask, tmp5, _tmp4)", "tmp5")
    out = chunk_row_sums(text, 4)
    assert "tmp5 = _tmp4 + tl.sum(tl.reshape(tmp3.to(tl.float32), " \
           "[XBLOCK, R0_BLOCK // 4, 4]), 2)" in out


@pytest.mark.parametrize("change", [
    ("tmp4 = tl.sum(_tmp4, 1)[:, None]", "tmp4 = tl.sum(_tmp4, 1)[:, None] + _tmp4"),
    ("_tmp4 = tl.where(r0_mask & xmask, tmp5, _tmp4)",
     "_tmp4 = tl.where(r0_mask & xmask, tmp5, _tmp4)\n    tmp9 = tmp5 * 2"),
    ("tmp5 = _tmp4 + tmp3", "tmp5 = _tmp4 * tmp3"),
    ("tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)", "tl.full([XBLOCK, R0_BLOCK], 0, tl.int64)"),
    ("tmp4 = tl.sum(_tmp4, 1)[:, None]", "tmp4 = tl.max(_tmp4, 1)[:, None]"),
], ids=["accumulator-read-elsewhere", "combined-value-read-elsewhere", "not-a-sum",
        "int-accumulator", "no-final-sum"])
def test_other_uses_leave_the_loop_as_it_is(change):
    text = LOOPED_SUM.replace(*change)
    assert text != LOOPED_SUM
    assert chunk_row_sums(text, 8) == text


def test_chunk_one_is_off():
    assert chunk_row_sums(LOOPED_SUM, 1) == LOOPED_SUM


def _kernel_from(body: str, tmp_path, name: str):
    src = ("import triton\nimport triton.language as tl\n\n@triton.jit\n"
           "def row_sums(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr, "
           "R0_BLOCK: tl.constexpr):\n"
           "    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]\n"
           "    xmask = xindex < xnumel\n"
           "    r0_base = tl.arange(0, R0_BLOCK)[None, :]\n"
           + textwrap.indent(body, "    ")
           + "    tl.store(out_ptr0 + xindex, tmp4, xmask)\n")
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.row_sums


@settings(max_examples=12, deadline=None)
@given(M=st.integers(1, 9), N=st.integers(1, 70), chunk=st.sampled_from([2, 4, 8]),
       xblock=st.sampled_from([1, 2, 4]))
def test_chunked_loop_computes_the_same_sums(tmp_path_factory, M, N, chunk, xblock):
    """Run the loop before and after the rewrite under the interpreter (masked rows and
    columns, a partial last tile) against a float64 reference."""
    tmp = tmp_path_factory.mktemp("loops")
    x = torch.randn(M, N)
    ref = (x.double() ** 2).sum(1)
    for name, body in (("plain", LOOPED_SUM), ("chunked", chunk_row_sums(LOOPED_SUM, chunk))):
        out = torch.empty(M)
        kernel = _kernel_from(body, tmp, name)
        kernel[(-(-M // xblock),)](x, out, M, N, XBLOCK=xblock, R0_BLOCK=16)
        torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


def test_stream_row_stores_text():
    code = textwrap.dedent("""\
        tl.store(out_ptr2 + (r0_1 + 300*x0), tmp27, r0_mask)
        tl.store(out_ptr3 + (x0), tmp9, None, eviction_policy='evict_first')
        tl.store(ws_ptr + (r0_cols), _mo_acc0_t0)
    """)
    out = stream_row_stores(code)
    assert "tl.store(out_ptr2 + (r0_1 + 300*x0), tmp27, r0_mask, cache_modifier='.cs')" in out
    assert "tl.store(out_ptr3 + (x0), tmp9, None, eviction_policy='evict_first')\n" in out
    assert "tl.store(ws_ptr + (r0_cols), _mo_acc0_t0)\n" in out


def test_unpin_row_loads_text():
    """Only loads indexed by a row and a column lose evict_last; the rest of the line stays."""
    code = textwrap.dedent("""\
        tmp0 = tl.load(in_ptr0 + (r0_1 + 300*x0), r0_mask, eviction_policy='evict_last', other=0.0).to(tl.float32)
        tmp8 = tl.load(in_ptr2 + (r0_1 + 16384*x0), None, eviction_policy='evict_last').to(tl.float32)
        tmp2 = tl.load(in_ptr1 + (r0_1), r0_mask, eviction_policy='evict_last', other=0.0)
        tmp10 = tl.load(in_ptr3 + (x0), None, eviction_policy='evict_last')
        tmp23 = tl.load(in_ptr0 + (r0_1 + 300*x0), r0_mask, eviction_policy='evict_first', other=0.0)
    """)  # noqa: E501
    out = unpin_row_loads(code).splitlines()
    assert out[0] == ("tmp0 = tl.load(in_ptr0 + (r0_1 + 300*x0), r0_mask, other=0.0)"
                      ".to(tl.float32)")
    assert out[1] == "tmp8 = tl.load(in_ptr2 + (r0_1 + 16384*x0), None).to(tl.float32)"
    assert out[2:] == code.splitlines()[2:]  # weight, per-row scalar, second-pass load


def _pinned_row_loads(fused: str) -> list[str]:
    return [line for line in fused.splitlines() if "tl.load(" in line and "*x0" in line
            and "evict_last" in line]


def _register_tiled_layer_norm_kernel(cuda_knobs, **knobs):
    cuda_knobs(register_tile=64, **knobs)
    N = 300
    x = torch.randn(48, N, requires_grad=True)
    w = torch.randn(N, requires_grad=True)
    b = torch.randn(N, requires_grad=True)
    dy = torch.randn(48, N)

    def fn(x, w, b, dy):
        return autograd_grads(layer_norm, [x, w, b], dy)

    with inductor_ext.config.patch(max_persistent_n=64, target="cuda"):
        got, codes = run_and_get_code(torch.compile(fn), x, w, b, dy)
    fused = next(src for code in codes for src in code.split("async_compile.triton(")[1:]
                 if "for xoffset in" in src)
    assert_close(got, float64_grads(layer_norm, [x, w, b], dy), names=["dx", "dw", "db"])
    return fused


def test_register_tiled_kernel_chunks_its_row_sums_and_streams_dx(plugin, cuda_knobs):
    """LayerNorm's two row sums over 5 tiles of 64 (the last one partial): [XBLOCK, 8]
    accumulators, and dx stored with the streaming hint; the numbers still match."""
    fused = _register_tiled_layer_norm_kernel(cuda_knobs)
    assert fused.count("tl.full([XBLOCK, R0_BLOCK // 8], 0, tl.float32)") == 2
    assert fused.count("tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)") == 0
    assert fused.count("[XBLOCK, R0_BLOCK // 8, 8]), 2)") == 2 * 5
    assert fused.count("cache_modifier='.cs')") == 5  # dx, once per tile
    assert "_mo_acc0_t0, cache_modifier" not in fused  # workspace stores stay plain
    # x and dy are read again from L1, not L2: their loads lose evict_last; w keeps it.
    assert _pinned_row_loads(fused) == []
    assert fused.count("tl.load(in_ptr1 + (r0_1), r0_mask, eviction_policy='evict_last'") == 2 * 5


def test_rewrites_follow_the_tuning_knobs(plugin, cuda_knobs):
    fused = _register_tiled_layer_norm_kernel(cuda_knobs, row_sum_chunk=1,
                                              stream_column_tiled_stores=False,
                                              unpin_register_tiled_rows=False)
    assert fused.count("tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)") == 2
    assert "R0_BLOCK // " not in fused and "cache_modifier" not in fused
    assert len(_pinned_row_loads(fused)) == 2 * 5  # x and dy in each first-pass tile
