"""Every rewrite of generated Triton text (codegen/rewrites.py) still finds its text on the
running torch: compiled kernels that need each one apply it, and none misses. A new
rewrite without a case here fails `test_every_rewrite_has_a_case`."""

import logging

import pytest
import torch
from torch._inductor.utils import run_and_get_code

import inductor_ext
from inductor_ext import diagnostics
from inductor_ext.codegen import rewrites
from inductor_ext.logs import log
from tests.support.reference import (
    assert_close,
    autograd_grads,
    float64_grads,
    layer_norm,
    rms_norm,
)

#: CI runs this module on every torch it tests: its assertions read the text Inductor
#: generates (.ci/run's torch 2.15 stage: `-m "slow or inductor_text"`).
pytestmark = pytest.mark.inductor_text


def _compile_norm(norm, M: int, N: int, **options) -> str:
    """Compile and check a norm's backward; returns the generated code."""
    x = torch.randn(M, N, requires_grad=True)
    w = torch.randn(N, requires_grad=True)
    inputs = [x, w, torch.randn(N, requires_grad=True)] if norm is layer_norm else [x, w]
    dy = torch.randn(M, N)

    def fn(*args):
        return autograd_grads(norm, list(args[:-1]), args[-1])

    with inductor_ext.config.patch(**options):
        got, codes = run_and_get_code(torch.compile(fn), *inputs, dy)
    assert_close(got, float64_grads(norm, inputs, dy), names=["dx", "dw", "db"][:len(got)])
    assert inductor_ext.metrics.mix_order_kernels == 1
    return "\n".join(codes)


def register_tiled(cuda_knobs) -> None:
    """LayerNorm over 5 unrolled column tiles: unrolled, row sums chunked, dx streamed,
    row loads unpinned."""
    cuda_knobs(register_tile=64)
    _compile_norm(layer_norm, 48, 300, target="cuda", max_persistent_n=64)


def kept_rows(cuda_knobs) -> None:
    """A padded LayerNorm row (300 columns) as 5 tiles of 64 kept in registers: the second
    pass takes the first pass's row values."""
    cuda_knobs(kept_row_tile=64, kept_row_elem_bytes=4, kept_row_min_elems=0)
    code = _compile_norm(layer_norm, 48, 300, target="cuda")
    assert "= _mo_row" in code


def looped_tiles(cuda_knobs) -> None:
    """LayerNorm over looped column tiles (workspace adds): chunked and streamed."""
    cuda_knobs(register_tile=64, max_register_tiles=1)
    _compile_norm(layer_norm, 48, 300, target="cuda", max_persistent_n=64)


def double_buffered(cuda_knobs) -> None:
    """RMSNorm in one tile with the next row block's loads issued ahead."""
    cuda_knobs(prefetch_min_n=1, prefetch_min_rows=1, tile_elems=512)
    code = _compile_norm(rms_norm, 67, 40, target="cuda")
    assert "_pf = tl.load(" in code


def autotuned(cuda_knobs) -> None:
    """RMSNorm with several launch configs: our autotuner's decorator."""
    cuda_knobs(autotune_on_cpu=True)
    code = _compile_norm(rms_norm, 256, 40, target="cuda")
    assert "@mix_order_autotune(" in code


def program_counts(cuda_knobs) -> None:
    """RMSNorm whose configs are timed at two row-program counts: the count's constexpr."""
    cuda_knobs(autotune_on_cpu=True)
    code = _compile_norm(rms_norm, 3072, 40, target="cuda")
    assert "RPROGRAMS : tl.constexpr" in code


def aligned_rows(cuda_knobs) -> None:
    """RMSNorm of 16-bit rows off 4 bytes (N odd) read and written as whole 16-byte
    vectors from the boundary before each row's start, its weights loaded once."""
    from tests.test_column_tiles import compiled_cuda_rms

    cuda_knobs(aligned_row_min_rows_per_column=0)  # 37 rows
    assert "_mo_shift" in compiled_cuda_rms(37, 2051, torch.bfloat16, torch.bfloat16)


def ascend(cuda_knobs) -> None:
    """The Ascend flavor on stock Inductor, one tile and column-tiled: it needs none of the
    rewrites, and must not miss any either."""
    _compile_norm(layer_norm, 64, 300, target="ascend")
    torch._dynamo.reset()
    inductor_ext.metrics.reset()
    _compile_norm(layer_norm, 64, 300, target="ascend", max_persistent_n=64)


#: Each rewrite run on stock Inductor -> the case that needs it. torch_npu's rewrites are
#: checked under its emulation (tests/ascend/test_npu_adapter.py, CI's npu venv).
CASES = {
    "unroll_column_loops": register_tiled,
    "chunk_row_sums": looped_tiles,
    "stream_row_stores": looped_tiles,
    "unpin_row_loads": register_tiled,
    "keep_row_tiles": kept_rows,
    "prefetch_next_block": double_buffered,
    "autotune_decorator": autotuned,
    "program_count_argument": program_counts,
    "aligned_row_vectors": aligned_rows,
}


def test_every_rewrite_has_a_case():
    on_inductor = {name for name, r in rewrites.REGISTRY.items() if r.backend == "inductor"}
    assert set(CASES) == on_inductor
    assert {r.backend for r in rewrites.REGISTRY.values()} <= {"inductor", "torch_npu"}


@pytest.mark.parametrize("name", sorted(n for n, r in rewrites.REGISTRY.items()
                                        if r.backend == "inductor"))
def test_rewrite_applies(plugin, cuda_knobs, name):
    rewrites.reset()
    CASES[name](cuda_knobs)
    assert rewrites.applied()[name] > 0
    assert rewrites.missed() == {}


@pytest.mark.parametrize("case", [register_tiled, ascend], ids=["register_tiled", "ascend"])
def test_no_rewrite_misses(plugin, cuda_knobs, case):
    rewrites.reset()
    case(cuda_knobs)
    assert rewrites.missed() == {}
    if case is register_tiled:  # all four of the column-tile rewrites in one kernel
        assert {"unroll_column_loops", "chunk_row_sums", "stream_row_stores",
                "unpin_row_loads"} <= set(rewrites.applied())


def test_a_scalar_argument_keeps_the_row_loads_double_buffered(plugin, cuda_knobs):
    """A 0-d tensor Inductor passes by value (here the loss's gradient, on the CPU) is
    loaded as `tmpN = in_ptrK`: loop-invariant, it stays in the loop and the row loads
    are still issued a block ahead (it once left them single-buffered, a counted miss)."""
    cuda_knobs(prefetch_min_n=1, prefetch_min_rows=1)
    rewrites.reset()
    x = torch.randn(48, 64, requires_grad=True)
    w = torch.randn(64, requires_grad=True)

    def fn(x, w):
        return torch.autograd.grad(rms_norm(x, w).pow(2).sum(), [x, w])

    with inductor_ext.config.patch(target="cuda"):
        got, codes = run_and_get_code(torch.compile(fn), x, w)
    assert_close(list(got), float64_grads(lambda x, w: rms_norm(x, w).pow(2).sum(), [x, w],
                                          torch.tensor(1.0)), names=["dx", "dw"])
    fused = next(src for code in codes for src in code.split("async_compile.triton(")[1:]
                 if "for xoffset in" in src)
    lines = [line.strip() for line in fused.splitlines()]
    scalar = next(line for line in lines if line.startswith("tmp") and line.endswith(
        " = in_ptr0"))
    assert "_pf = tl.load(" in fused and f"{scalar.split()[0]}_pf" not in fused
    assert rewrites.missed() == {} and rewrites.applied()["prefetch_next_block"] == 1


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_a_decoder_misses_no_rewrite(plugin, cuda_knobs, name):
    """A whole transformers decoder (2 layers, embedding to loss) on the CUDA flavor with
    double buffering and our autotuner on every fused kernel: every norm fused, the
    gradients float64's, and no rewrite of Inductor's text missed (a miss would leave a
    kernel slower, silently but for a warning)."""
    from tests.support import models

    cuda_knobs(prefetch_min_n=1, prefetch_min_rows=1, autotune_on_cpu=True)
    rewrites.reset()
    work = models.build(name)
    ref = models.grads(work.copy(torch.float64))
    with inductor_ext.config.patch(target="cuda"):
        got = models.grads(work, torch.compile(work.model))
    keys = sorted(ref)
    assert_close([got[k] for k in keys], [ref[k] for k in keys], names=keys)
    assert inductor_ext.metrics.norms["found"] == inductor_ext.metrics.norms["fused"] >= 3
    assert rewrites.missed() == {}
    assert {"prefetch_next_block", "autotune_decorator"} <= set(rewrites.applied())


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def warnings_logged():
    handler = _Records()
    log.addHandler(handler)
    diagnostics.warned.difference_update({f"rewrite_miss:{n}" for n in rewrites.REGISTRY})
    rewrites.reset()
    try:
        yield handler.records
    finally:
        log.removeHandler(handler)
        rewrites.reset()


def test_a_rewrite_facing_other_text_records_a_miss(warnings_logged):
    text = "tl.store(ws_ptr0 + (r0_cols), _mo_acc0_t0)\n"  # no out_ptr store to stream
    assert rewrites.apply("stream_row_stores", text) == text
    assert rewrites.apply("stream_row_stores", text) == text
    assert rewrites.missed() == {"stream_row_stores": 2} and rewrites.applied() == {}
    warned = [r for r in warnings_logged if r.levelno == logging.WARNING]
    assert len(warned) == 1  # once per rewrite; the second goes to debug
    assert "stream_row_stores" in warned[0].getMessage()


def test_a_required_rewrite_facing_other_text_raises(warnings_logged):
    """Without its decorator an autotuned kernel would be wrong: the codegen falls back."""
    with pytest.raises(rewrites.RewriteMissed):
        rewrites.apply("autotune_decorator", "@triton.jit\ndef kernel():\n    pass\n")
    assert rewrites.missed() == {"autotune_decorator": 1}
    assert [r.levelno for r in warnings_logged] == [logging.WARNING]
