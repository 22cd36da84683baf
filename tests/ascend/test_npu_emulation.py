"""torch_npu 2.13's own Inductor backend on CPU through tests.support.npu_emulation.

Runs inside the venv of tests/ascend/setup_npu_venv.sh (triton-ascend 3.2.0 interpreter,
unpacked torch_npu wheel); elsewhere every test skips with the reason. The plugin is off:
this checks that norm forward+backward compile through torch_npu's classes and that the
interpreted kernels match a float64 eager reference.

    TRITON_INTERPRET=1 .npu-venv/bin/python -m pytest -q tests/ascend/test_npu_emulation.py
"""

from __future__ import annotations

import os

import pytest
import torch
from npu_cases import recorded_kernels

from tests.support import npu_emulation as emu
from tests.support import reference

pytestmark = pytest.mark.skipif(not emu.can_emulate(),
                                reason=str(emu.emulation_unavailable_reason()))

OPS = ("rms", "ln", "ln_nobias")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
NS = (128, 768, 4096)
MS = (33, 64)  # odd and even row counts


@pytest.fixture(scope="module")
def emulation():
    """One emulation for the module: importing torch_npu's backend takes seconds."""
    with emu.npu_emulation(soc=os.environ.get("NPU_EMULATION_SOC", "910B3"),
                           backend="default") as package:
        yield package


@pytest.fixture
def kernels(emulation):
    """(kernel class, kernel, source) of every Triton kernel torch_npu's scheduling emits."""
    torch._dynamo.reset()
    try:
        with recorded_kernels() as seen:
            yield seen
    finally:
        torch._dynamo.reset()


def _case(op: str, M: int, N: int, dtype: torch.dtype):
    x = torch.randn(M, N, dtype=dtype, requires_grad=True)
    w = (1 + 0.1 * torch.randn(N, dtype=dtype)).requires_grad_()
    if op == "rms":
        return reference.rms_norm, [x, w]
    b = torch.randn(N, dtype=dtype, requires_grad=True) if op == "ln" else None
    return reference.layer_norm, [x, w, b]


@pytest.mark.parametrize("N", NS)
@pytest.mark.parametrize("M", MS)
@pytest.mark.parametrize("dname", list(DTYPES))
@pytest.mark.parametrize("op", OPS)
def test_norm_fwd_bwd_through_torch_npu(kernels, op: str, dname: str, M: int, N: int):
    dtype = DTYPES[dname]
    fn, inputs = _case(op, M, N, dtype)
    dy = torch.randn(M, N, dtype=dtype)
    compiled = torch.compile(fn, dynamic=False)
    y = compiled(*inputs)
    got = torch.autograd.grad(y, [t for t in inputs if t is not None], dy)
    ref = reference.float64_grads(fn, inputs, dy)
    eager = reference.autograd_grads(fn, inputs, dy)
    reference.assert_close([y], [fn(*[None if t is None else t.detach().double()
                                      for t in inputs])], ["y"], eager=[fn(*inputs)])
    reference.assert_close(got, ref, ["dx", "dw", "db"][:len(got)], eager=eager)

    assert kernels, "no Triton kernel was generated"
    classes = {cls.__name__ for cls, _, _ in kernels}
    assert classes <= {"NPUIndexTritonKernel", "NPUTritonKernel"}, classes
    # torch_npu's index kernel is the normal path; NPUTritonKernel is its own fallback.
    assert "NPUIndexTritonKernel" in classes, classes
    for cls, _, src in kernels:
        assert "'mix_mode': 'aiv'" in src
        assert "torch_npu._inductor.runtime import triton_heuristics" in src
        if cls == "NPUIndexTritonKernel":
            assert "'grid_type': 'GridNpu'" in src and "X0BLOCK_SUB" in src


def test_device_stand_in(emulation):
    from torch_npu._inductor import config as npu_config

    assert npu_config.num_vector_core == emu.VECTOR_CORES
    assert npu_config.num_cube_core == emu.CUBE_CORES
    assert not npu_config.is_ascend950
    assert npu_config.ub_size == 192 * 1024


def test_tiny_llama_training_step(kernels):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=128,
                                      max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config).float()
    ids = torch.randint(0, config.vocab_size, (2, 16))
    eager_loss = model(input_ids=ids, labels=ids).loss
    eager_grads = torch.autograd.grad(eager_loss, list(model.parameters()))
    compiled = torch.compile(model, dynamic=False)
    # Max-with-index kernels (cross entropy) need the emulation's get_int1_ty shim.
    loss = compiled(input_ids=ids, labels=ids).loss
    grads = torch.autograd.grad(loss, list(model.parameters()))
    assert abs(loss.item() - eager_loss.item()) < 1e-4
    for g, e in zip(grads, eager_grads):
        assert reference.max_rel_err(g, e) < 1e-3
    assert any(cls.__name__ == "NPUIndexTritonKernel" for cls, _, _ in kernels)
