"""Small training workloads built from configs (random weights, nothing downloaded): the
transformers models of the coverage tests and of ``bench/bench_models.py``, plus models in
plain torch (norm stacks after an embedding, a DiT-style block).

``build(name, size)`` returns a :class:`Workload`: the model and a step that runs the
forward and the loss, for the backward to be taken by the caller. Dropout is off so a
compiled step can be compared with eager. Transformers is imported only by the builders
that need it (``pip install transformers``).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

TRANSFORMERS = ("llama", "qwen2", "qwen3", "mistral", "gemma", "gpt2", "bert", "t5")
PLAIN = ("rmsnorm_stack", "layernorm_stack", "dit")
MODELS = TRANSFORMERS + PLAIN


@dataclasses.dataclass(frozen=True)
class Size:
    hidden: int = 32
    layers: int = 2
    heads: int = 2
    kv_heads: int = 1
    ffn: int = 64
    vocab: int = 64
    seq: int = 8
    batch: int = 2


#: The coverage tests' size (the CPU interpreter runs every kernel in Python).
TINY = Size()


@dataclasses.dataclass
class Workload:
    name: str
    model: nn.Module
    #: (model, **inputs) -> scalar loss
    step: Callable[..., torch.Tensor]
    inputs: dict[str, torch.Tensor]

    def loss(self, model: nn.Module | None = None) -> torch.Tensor:
        """One forward and loss of `model` (default: the eager model) on the inputs."""
        return self.step(model if model is not None else self.model, **self.inputs)

    def to(self, device: str | torch.device, dtype: torch.dtype | None = None) -> Workload:
        """Move the model and inputs (floating ones to `dtype`, if given) in place."""
        self.model.to(device=device, dtype=dtype)
        self.inputs = {k: v.to(device=device, dtype=dtype if v.is_floating_point() else None)
                       for k, v in self.inputs.items()}
        return self

    def copy(self, dtype: torch.dtype | None = None) -> Workload:
        """A deep copy with the same weights (a float64 one is the reference)."""
        other = copy.deepcopy(self)
        return other.to(next(other.model.parameters()).device, dtype)

    def norm_modules(self, weighted: bool = True) -> list[str]:
        """Names of the model's norms (leaf modules whose class name has "norm": not a
        container such as NormStack) that have a weight (whose backward has a dw), or with
        `weighted` False every norm: an adaLN-modulated one has no weight, yet its dx
        carries d(scale) / d(shift) to fuse."""
        return [name for name, mod in self.model.named_modules()
                if "norm" in type(mod).__name__.lower() and not any(mod.children())
                and (not weighted or isinstance(getattr(mod, "weight", None), torch.Tensor))]


def build(name: str, size: Size = TINY, checkpointed: bool = False, seed: int = 0,
          tanh: bool | None = None) -> Workload:
    """The named workload at `size`, in fp32 on CPU, training mode, dropout off.

    `tanh`: whether GELUs keep their tanh approximation (GPT-2, Gemma, DiT). The Triton
    interpreter has no tanh, so the default is the exact (erf) GELU under the interpreter,
    the model's own elsewhere."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; one of {', '.join(MODELS)}")
    if tanh is None:
        from inductor_ext.interpreter import interpreter_active

        tanh = not interpreter_active()
    torch.manual_seed(seed)
    if name in TRANSFORMERS:
        work = _transformers_model(name, size, tanh)
        if checkpointed:
            _checkpoint_transformers(work.model)
    elif name == "dit":
        work = _dit(size, checkpointed, tanh)
    else:
        work = _norm_stack(name, size, checkpointed)
    work.model.train()
    return work


# -- transformers -----------------------------------------------------------------------------
def _transformers_model(name: str, s: Size, tanh: bool) -> Workload:
    import transformers as tf

    head_dim = s.hidden // s.heads
    decoder = {"hidden_size": s.hidden, "intermediate_size": s.ffn,
               "num_hidden_layers": s.layers, "num_attention_heads": s.heads,
               "num_key_value_heads": s.kv_heads, "vocab_size": s.vocab,
               "max_position_embeddings": max(64, 2 * s.seq), "attention_dropout": 0.0,
               "use_cache": False}
    if name == "llama":
        model = tf.LlamaForCausalLM(tf.LlamaConfig(**decoder))
    elif name == "qwen2":
        model = tf.Qwen2ForCausalLM(tf.Qwen2Config(**decoder))
    elif name == "qwen3":
        model = tf.Qwen3ForCausalLM(tf.Qwen3Config(**decoder, head_dim=head_dim))
    elif name == "mistral":
        model = tf.MistralForCausalLM(tf.MistralConfig(**decoder, head_dim=head_dim))
    elif name == "gemma":
        act = {} if tanh else {"hidden_act": "gelu_python"}  # "gelu" is read as tanh
        model = tf.GemmaForCausalLM(tf.GemmaConfig(**decoder, head_dim=head_dim, **act))
    elif name == "gpt2":
        model = tf.GPT2LMHeadModel(tf.GPT2Config(
            n_embd=s.hidden, n_layer=s.layers, n_head=s.heads, n_inner=s.ffn,
            vocab_size=s.vocab, n_positions=max(64, 2 * s.seq), resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, bos_token_id=0, eos_token_id=0,
            **({} if tanh else {"activation_function": "gelu"})))
    elif name == "bert":
        model = tf.BertForMaskedLM(tf.BertConfig(
            hidden_size=s.hidden, num_hidden_layers=s.layers, num_attention_heads=s.heads,
            intermediate_size=s.ffn, vocab_size=s.vocab,
            max_position_embeddings=max(64, 2 * s.seq), hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0))
    else:  # t5
        model = tf.T5ForConditionalGeneration(tf.T5Config(
            d_model=s.hidden, d_kv=head_dim, d_ff=s.ffn, num_layers=s.layers,
            num_decoder_layers=s.layers, num_heads=s.heads, vocab_size=s.vocab,
            dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0, use_cache=False))
    ids = torch.randint(1, s.vocab, (s.batch, s.seq))
    inputs = {"input_ids": ids, "labels": ids.clone()}

    def step(model: nn.Module, **kw: torch.Tensor) -> torch.Tensor:
        return model(**kw).loss

    return Workload(name=name, model=model, step=step, inputs=inputs)


def _checkpoint_transformers(model: nn.Module) -> None:
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


# -- plain torch ------------------------------------------------------------------------------
class NormStack(nn.Module):
    """Embedding -> [norm -> Linear (bias) -> GELU -> Linear -> residual] x layers -> norm ->
    head: the norm after the embedding is the one the old matching left unfused."""

    def __init__(self, norm: type[nn.Module], s: Size, checkpointed: bool) -> None:
        super().__init__()
        self.embed = nn.Embedding(s.vocab, s.hidden)
        self.norms = nn.ModuleList(norm(s.hidden) for _ in range(s.layers))
        self.ups = nn.ModuleList(nn.Linear(s.hidden, s.ffn) for _ in range(s.layers))
        self.downs = nn.ModuleList(nn.Linear(s.ffn, s.hidden) for _ in range(s.layers))
        self.final = norm(s.hidden)
        self.head = nn.Linear(s.hidden, s.vocab, bias=False)
        self.checkpointed = checkpointed

    def layer(self, i: int, h: torch.Tensor) -> torch.Tensor:
        return h + self.downs[i](F.gelu(self.ups[i](self.norms[i](h))))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        for i in range(len(self.norms)):
            if self.checkpointed:
                h = checkpoint(self.layer, i, h, use_reentrant=False)
            else:
                h = self.layer(i, h)
        return self.head(self.final(h))


def _norm_stack(name: str, s: Size, checkpointed: bool) -> Workload:
    norm = nn.RMSNorm if name == "rmsnorm_stack" else nn.LayerNorm
    model = NormStack(norm, s, checkpointed)
    ids = torch.randint(0, s.vocab, (s.batch, s.seq))

    def step(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
        logits = model(ids)
        return F.cross_entropy(logits.flatten(0, 1), ids.flatten())

    return Workload(name=name, model=model, step=step, inputs={"ids": ids})


class DiTBlock(nn.Module):
    """A DiT-style block: LayerNorm without affine, modulated by the conditioning (adaLN:
    ``LN(x) * (1 + scale) + shift`` with a gate on each branch), attention, MLP."""

    def __init__(self, s: Size, tanh: bool = True) -> None:
        super().__init__()
        self.approximate = "tanh" if tanh else "none"
        self.heads = s.heads
        self.norm1 = nn.LayerNorm(s.hidden, elementwise_affine=False, eps=1e-6)
        self.norm2 = nn.LayerNorm(s.hidden, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(s.hidden, 3 * s.hidden)
        self.proj = nn.Linear(s.hidden, s.hidden)
        self.fc1 = nn.Linear(s.hidden, s.ffn)
        self.fc2 = nn.Linear(s.ffn, s.hidden)
        self.ada = nn.Linear(s.hidden, 6 * s.hidden)

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        shift1, scale1, gate1, shift2, scale2, gate2 = \
            self.ada(F.silu(c)).unsqueeze(1).chunk(6, dim=-1)
        h = self.norm1(x) * (1 + scale1) + shift1
        q, k, v = self.qkv(h).view(B, T, 3, self.heads, D // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2))
        x = x + gate1 * self.proj(a.transpose(1, 2).reshape(B, T, D))
        h = self.norm2(x) * (1 + scale2) + shift2
        return x + gate2 * self.fc2(F.gelu(self.fc1(h), approximate=self.approximate))


class DiT(nn.Module):
    def __init__(self, s: Size, checkpointed: bool, tanh: bool = True) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(DiTBlock(s, tanh) for _ in range(s.layers))
        self.out = nn.LayerNorm(s.hidden)
        self.checkpointed = checkpointed

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = checkpoint(block, x, c, use_reentrant=False) if self.checkpointed \
                else block(x, c)
        return self.out(x)


def _dit(s: Size, checkpointed: bool, tanh: bool) -> Workload:
    model = DiT(s, checkpointed, tanh)
    x = torch.randn(s.batch, s.seq, s.hidden)
    c = torch.randn(s.batch, s.hidden)
    target = torch.randn(s.batch, s.seq, s.hidden)

    def step(model: nn.Module, x: torch.Tensor, c: torch.Tensor,
             target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(model(x, c), target)

    return Workload(name="dit", model=model, step=step,
                    inputs={"x": x, "c": c, "target": target})


def grads(work: Workload, model: nn.Module | None = None) -> dict[str, torch.Tensor]:
    """Every parameter's gradient after one step of `model` (default: the eager model)."""
    model = model if model is not None else work.model
    params = dict(work.model.named_parameters())
    for p in params.values():
        p.grad = None
    work.loss(model).backward()
    return {name: p.grad.detach().clone() for name, p in params.items() if p.grad is not None}


def describe(work: Workload) -> dict[str, Any]:
    return {"model": work.name, "params": sum(p.numel() for p in work.model.parameters()),
            "norms": len(work.norm_modules())}
