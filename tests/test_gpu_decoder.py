"""On a CUDA GPU, at a training width: a transformers Llama decoder layer (Llama-3-8B's
widths, embedding to loss) compiled with the plugin at its defaults fuses every norm,
misses no rewrite of Inductor's text, and its gradients are float64's (bf16, within
eager's own error). The CPU suite's counterpart, on the interpreter's tiny decoders, is
tests/test_rewrites.py::test_a_decoder_misses_no_rewrite.

    TRITON_INTERPRET=0 python -m pytest -q tests/test_gpu_decoder.py   # a CUDA GPU; else skipped

(TRITON_INTERPRET=0: tests/conftest.py turns the interpreter on unless the variable is set.)
"""

import pytest
import torch

import inductor_ext
from inductor_ext.codegen import rewrites
from tests.support.reference import assert_close

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA GPU (the CPU counterpart: "
                                       "test_rewrites.py::test_a_decoder_misses_no_rewrite)")


def _llama(dtype: torch.dtype) -> torch.nn.Module:
    import transformers as tf

    torch.manual_seed(0)
    config = tf.LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=1,
                            num_attention_heads=32, num_key_value_heads=8, vocab_size=2048,
                            max_position_embeddings=4096, use_cache=False)
    return tf.LlamaForCausalLM(config).to(device="cuda", dtype=dtype).train()


def _grads(model: torch.nn.Module, ids: torch.Tensor,
           run: torch.nn.Module | None = None) -> dict[str, torch.Tensor]:
    """Every parameter's gradient of one step, by the model's own names (`run`: the
    compiled module of the model, whose names carry a prefix)."""
    loss = (run if run is not None else model)(input_ids=ids, labels=ids).loss
    params = dict(model.named_parameters())
    return dict(zip(params, torch.autograd.grad(loss, list(params.values()))))


@pytest.mark.parametrize("tokens", [(1, 2048), (2, 1000)], ids=["1x2048", "2x1000"])
def test_llama_decoder_layer_fuses_every_norm_and_misses_no_rewrite(tokens):
    torch._dynamo.reset()
    inductor_ext.metrics.reset()
    rewrites.reset()
    ids = torch.randint(0, 2048, tokens, device="cuda")
    model = _llama(torch.bfloat16)
    reference = _llama(torch.float64)
    reference.load_state_dict(model.state_dict())
    eager = _grads(model, ids)
    with torch._inductor.config.patch(inductor_ext.options()):
        got = _grads(model, ids, torch.compile(model))
    ref = _grads(reference, ids)
    keys = sorted(ref)
    assert_close([got[k] for k in keys], [ref[k] for k in keys], names=keys,
                 eager=[eager[k] for k in keys])
    norms = inductor_ext.metrics.norms
    assert norms["found"] == norms["fused"] == 3, dict(norms)  # 2 in the layer, the final
    assert rewrites.missed() == {}, dict(rewrites.missed())
