"""The fused kernels' generated text, byte for byte, against a committed recording.

A refactor that means to change no behaviour must leave every kernel we emit as it was:
one case per kind of kernel (CUDA and Ascend flavor; RMSNorm and LayerNorm; looped column
tiles, register tiles, column groups, segments, column strips, every partial kind; CUDA's
L2 prefetch hint, autotuned row-program counts, aligned odd 16-bit rows and Hopper's
programmatic dependent launch).
Inductor's text differs between torch releases, so each minor version has its own
recording under tests/golden/torch-<major.minor>/ (tests/support/golden.py); the torch_npu
emulation's cases live in tests/ascend/test_npu_generated_text.py.

An intended change of the emitted code records anew:
    INDUCTOR_EXT_RECORD_GOLDEN=1 TRITON_INTERPRET=1 .venv/bin/python -m pytest -q \
        tests/test_generated_text.py
and the diff of tests/golden/ shows what changed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import traceback
from collections.abc import Callable, Iterator
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from torch._inductor.graph import GraphLowering
from torch._inductor.utils import run_and_get_code

import inductor_ext
from inductor_ext.plan import assume_device
from tests.support.fused_kernels import INTERPRETER
from tests.support.golden import compare_or_record, recording
from tests.support.reference import autograd_grads
from tests.support.tuning import tuned

#: CI runs this module on every torch it tests: its assertions read the text Inductor
#: generates (.ci/run's torch 2.15 stage: `-m "slow or inductor_text"`).
pytestmark = pytest.mark.inductor_text


def fused_kernel_texts(codes: list[str]) -> list[str]:
    """Every Triton kernel of the compiled modules that carries our plan or reads our
    workspace (the final step)."""
    return [source for code in codes for block in code.split("async_compile.triton(")[1:]
            for source in [block.split("''', device_str=")[0]]
            if "inductor_ext" in source or "(ws_ptr, " in source]


def _rms(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, 1e-6)


def _ln(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-6)


def _modulated_ln(x, scale, shift):
    return F.layer_norm(x, (x.shape[-1],), None, None, 1e-6) * (1 + scale) + shift


def _norm_backward(norm: Callable, M: int, N: int, dtype: torch.dtype,
                   params: int) -> tuple[Callable, list[torch.Tensor]]:
    x = torch.randn(M, N, dtype=dtype, requires_grad=True)
    ps = [torch.randn(N, dtype=dtype, requires_grad=True) for _ in range(params)]
    dy = torch.randn(M, N, dtype=dtype)

    def fn(x, *ps):
        return autograd_grads(norm, [x, *ps], dy)

    return fn, [x, *ps]


def _segmented(B: int, T: int, N: int) -> tuple[Callable, list[torch.Tensor]]:
    x = torch.randn(B, T, N, requires_grad=True)
    scale = (0.5 * torch.randn(B, 1, N)).requires_grad_()
    shift = torch.randn(B, 1, N, requires_grad=True)
    dy = torch.randn(B, T, N)

    def fn(*inputs):
        return autograd_grads(_modulated_ln, list(inputs), dy)

    return fn, [x, scale, shift]


def _every_partial_kind() -> tuple[Callable, list[torch.Tensor]]:
    def fn(a, b):
        rows = (a * b).sum(-1, keepdim=True)
        return a * rows, a.sum(0), (a * b).amax(0), b.amin(0), (a - b).sum(0)

    return fn, [torch.randn(48, 40), torch.randn(48, 40)]


def _transposed_sum_pair(M: int, N: int) -> tuple[Callable, list[torch.Tensor]]:
    def fn(x, y):
        return (x + y).sum(-1), x.sum(0)

    return fn, [torch.randn(M, N), torch.randn(N, M).t()]


@contextlib.contextmanager
def _knobs(target: str, config: dict | None = None, **knobs: object) -> Iterator[None]:
    with inductor_ext.config.patch(target=target, **(config or {})), tuned(target, **knobs):
        yield


@contextlib.contextmanager
def _rows_split(target: str, M: int, N: int, pieces: int) -> Iterator[None]:
    """`_knobs(target)`, with Inductor splitting each of the M rows of N into `pieces` (as
    an H100 does on its own for long rows; not at the interpreter's shapes) and no other
    reduction."""
    from torch._inductor.choices import InductorChoices

    def split_factor(device, reduction_numel_hint, numel_hint, inner_reduction):
        return pieces if (reduction_numel_hint, numel_hint) == (N, M) else 1

    with _knobs(target), mock.patch.object(InductorChoices, "reduction_split_factor",
                                           staticmethod(split_factor)):
        yield


#: The interpreter's CPU planned like an sm_90 device (as tests/test_final_step.py does):
#: the plan asks for programmatic dependent launch of the final step.
_HOPPER_CPU = dataclasses.replace(INTERPRETER, capability=(9, 0))


@contextlib.contextmanager
def _on_hopper(target: str) -> Iterator[None]:
    with _knobs(target), assume_device(_HOPPER_CPU):
        yield


#: case -> (inputs' builder, context: target, config and tuning knobs)
Build = Callable[[], tuple[Callable, list]]
Context = Callable[[], contextlib.AbstractContextManager]
CASES: dict[str, tuple[Build, Context]] = {
    "cuda-rms-fp32": (lambda: _norm_backward(_rms, 64, 40, torch.float32, 1),
                      lambda: _knobs("cuda")),
    "cuda-ln-bf16": (lambda: _norm_backward(_ln, 75, 96, torch.bfloat16, 2),
                     lambda: _knobs("cuda")),
    "cuda-rms-column-tiles": (lambda: _norm_backward(_rms, 64, 200, torch.float32, 1),
                              lambda: _knobs("cuda", {"max_persistent_n": 64}, column_tile=64,
                                             register_partials_share=0.0)),
    "cuda-ln-register-tiles": (lambda: _norm_backward(_ln, 64, 40, torch.bfloat16, 2),
                               lambda: _knobs("cuda", {"max_persistent_n": 16},
                                              register_tile=16)),
    "cuda-ln-column-groups": (lambda: _norm_backward(_ln, 75, 500, torch.float32, 2),
                              lambda: _knobs("cuda", {"max_persistent_n": 64}, register_tile=64,
                                             column_groups=2)),
    "cuda-rms-column-groups-3": (lambda: _norm_backward(_rms, 75, 560, torch.bfloat16, 1),
                                 lambda: _knobs("cuda", {"max_persistent_n": 64},
                                                register_tile=64, column_groups=3,
                                                grouped_row_sum_loop=False)),
    "cuda-segments": (lambda: _segmented(2, 13, 32), lambda: _knobs("cuda")),
    "cuda-segments-split": (lambda: _segmented(3, 13, 24),
                            lambda: _knobs("cuda", {"split_size": 4})),
    "cuda-every-partial-kind": (_every_partial_kind, lambda: _knobs("cuda")),
    # (x + y).sum(-1) with y transposed, its rows split into 4 pieces: x.sum(0) walks them
    "cuda-column-strip": (lambda: _transposed_sum_pair(48, 64),
                          lambda: _rows_split("cuda", 48, 64, 4)),
    # M=256: with `low_residency_r0_block` at the 64-column tile, the configs are timed at
    # fewer row-program counts too (RPROGRAMS); the row loads, not double-buffered, carry
    # the L2 hint
    "cuda-rms-autotuned-l2-prefetch": (
        lambda: _norm_backward(_rms, 256, 40, torch.float32, 1),
        lambda: _knobs("cuda", autotune_on_cpu=True, low_residency_r0_block=64,
                       l2_prefetch_on_cpu=True)),
    # bf16 rows of odd N, one row a program: each shifted to a 16-byte vector boundary
    "cuda-rms-aligned-rows-bf16": (lambda: _norm_backward(_rms, 8, 41, torch.bfloat16, 1),
                                   lambda: _knobs("cuda", aligned_row_min_n=41,
                                                  aligned_row_min_rows_per_column=0)),
    # Not run to the end: see _STOPS_AT
    "cuda-rms-final-step-pdl": (lambda: _norm_backward(_rms, 64, 40, torch.float32, 1),
                                lambda: _on_hopper("cuda")),
    "ascend-rms-fp32": (lambda: _norm_backward(_rms, 64, 40, torch.float32, 1),
                        lambda: _knobs("ascend")),
    "ascend-ln-bf16": (lambda: _norm_backward(_ln, 64, 300, torch.bfloat16, 2),
                       lambda: _knobs("ascend")),
    "ascend-ln-column-tiles": (lambda: _norm_backward(_ln, 64, 300, torch.float32, 2),
                               lambda: _knobs("ascend", {"max_persistent_n": 64})),
    "ascend-rms-ub-tiles": (lambda: _norm_backward(_rms, 64, 1024, torch.bfloat16, 1),
                            lambda: _knobs("ascend", {"ascend_ub_bytes": 8192})),
    "ascend-every-partial-kind": (_every_partial_kind, lambda: _knobs("ascend")),
    "ascend-segments": (lambda: _segmented(2, 13, 32), lambda: _knobs("ascend")),
}


#: Cases whose kernels the interpreter cannot run to their end -> the statement it stops at.
#: PDL's `tl.extra.cuda.gdc_launch_dependents()` / `gdc_wait()` are PTX (griddepcontrol)
#: that Triton's interpreter does not run (it binds no semantic to tl.extra.cuda's
#: functions, and refuses inline asm). Inductor still generates and loads the module, and
#: the fused kernel's first program runs its row loop up to the trigger after it; the
#: final step (its `gdc_wait()` first) never runs, and no value is checked. The recorded
#: text is the generated code as is.
_STOPS_AT = {"cuda-rms-final-step-pdl": "tl.extra.cuda.gdc_"}


def _codes_until_stopped(fn: Callable, inputs: list, statement: str) -> list[str]:
    """`run_and_get_code`'s codes of fn(*inputs), which must fail in the interpreter at a
    kernel line holding `statement`."""
    codes: list[str] = []
    torch._dynamo.reset()
    with mock.patch.object(GraphLowering, "save_output_code", codes.append), \
            pytest.raises(Exception) as err:
        fn(*inputs)
    failed: list[str] = []
    chain: BaseException | None = err.value
    while chain is not None:
        failed += [frame.line or "" for frame in traceback.extract_tb(chain.__traceback__)]
        chain = chain.__cause__ or chain.__context__
    assert any(statement in line for line in failed), err.value
    return list(dict.fromkeys(codes))


@pytest.mark.parametrize("case", sorted(CASES))
def test_generated_text_is_unchanged(plugin, case):
    build, context = CASES[case]
    fn, inputs = build()
    with context():
        compiled = torch.compile(fn, dynamic=False)
        if case in _STOPS_AT:
            codes = _codes_until_stopped(compiled, inputs, _STOPS_AT[case])
        else:
            _, codes = run_and_get_code(compiled, *inputs)
    texts = fused_kernel_texts(codes)
    # One kernel a module: the final step's module takes only the main one's imports.
    assert [text.count("@triton.jit") for text in texts] == [1] * len(texts)
    compare_or_record(recording("torch"), case, texts)
