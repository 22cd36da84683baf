"""The Ascend cost model's decisions on a real compile of a realistic-width model: a 2-layer
Llama (hidden 2048, the width of Llama-3.2-1B; bf16 parameters) compiled forward and
backward through torch_npu's real Inductor backend under the torch_npu emulation, with
the plugin's default options (the cost model on, no always_fuse), on each SoC class
(910B3: 40 vector cores, 192 KiB UB; Ascend950: 72, 256 KiB).

Compile only, no kernel runs: the interpreter cannot run kernels of this size in a test's
time. Dynamo's backend here hands the captured graph to Inductor's compile_fx with the
backward lowered at once (torch._functorch.config.force_non_lazy_backward_lowering), so
the hook plans Inductor's scheduler nodes of both graphs and the kernels are generated;
then it raises instead of returning a callable, and nothing runs. Numerics are not checked
here (test_npu_cost.py runs a tiny model's kernels against eager).

What is asserted, per step size:

- 4 x 2048 tokens (8192 rows, a training step): every norm's decision is the roofline's
  (cost_cases.roofline_expectation) where it speaks, and the decide-only table's
  (test_npu_cost.TRAINING_PLANS) for the byte structure the hook recorded, which is
  test_npu_cost.LLAMA_NORMS's in bf16 (checked here: the decide-only tests' premise, on a
  real compile at hidden 2048). All 5 fuse on both SoCs (on the 910B3 the 5-tensor
  norm's row block fits the UB only without multibuffer).
- 4 x 8 tokens (32 rows, fewer than either SoC's vector cores, launch-bound): every norm is
  declined `not_profitable`, as the roofline expects.
- 4 x 1 token (4 rows, a decode step): Inductor unrolls column sums of so few rows
  (torch._inductor.config.unroll_reductions_threshold, 8), so the hook declines the norms
  it finds `trivial_reduction` before any pricing: none fuses, none is priced (both SoCs).

Every priced decision, fused or declined, carries the model's three times (fused kernel,
final step, torch_npu's unfused kernels) in the fusion table's model_detail or the reject
table's detail, and the counters agree with the kernels torch_npu's schedulings emitted.

Runs inside the venv of tests/ascend/setup_npu_venv.sh (about 2.5 minutes on 2 CPU
cores); elsewhere every test skips:

    TRITON_INTERPRET=1 TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 \\
        .npu-venv/bin/python -m pytest -q tests/ascend/test_npu_cost_models.py
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from cost_cases import TIMES, decisions, expectation_for
from npu_cases import Compiled, compile_only, fused_kernels, session
from test_npu_cost import LLAMA_NORMS, TRAINING_PLANS, table_rows, times

import inductor_ext
from inductor_ext import plan_inputs
from inductor_ext.plan import ShapeInfo, device_info
from inductor_ext.reasons import Reason
from inductor_ext.targets.ascend import plan as ascend_plan
from tests.support import npu_emulation as emu

pytestmark = pytest.mark.skipif(not emu.can_emulate(),
                                reason=str(emu.emulation_unavailable_reason()))

#: The SoC classes (the emulation's names): A2/A3 and Ascend950.
SOCS = ("910B3", "950")
HIDDEN = 2048
LAYERS = 2
VOCAB = 1024
#: Per layer the input and post-attention norms, plus the final norm.
NORMS = 2 * LAYERS + 1
BATCH = 4
TRAINING_SEQ, SMALL_SEQ, DECODE_SEQ = 2048, 8, 1


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    """A 2-layer Llama at hidden 2048 (ffn 5632, 16 heads; vocab 1024 to keep memory
    down: 107M parameters, 0.21 GB in bf16), training mode. Built outside the emulation:
    plain CPU tensors, reused by every session."""
    import transformers as tf

    torch.manual_seed(0)
    config = tf.LlamaConfig(hidden_size=HIDDEN, intermediate_size=5632,
                            num_hidden_layers=LAYERS, num_attention_heads=16,
                            num_key_value_heads=16, vocab_size=VOCAB,
                            max_position_embeddings=TRAINING_SEQ, attention_dropout=0.0,
                            use_cache=False)
    model: torch.nn.Module = tf.LlamaForCausalLM(config)
    return model.to(torch.bfloat16).train()


# Ascend950 compiles the steps in the slow tier; its decisions are test_npu_cost.py's.
@pytest.fixture(scope="module", params=[SOCS[0], *(pytest.param(s, marks=pytest.mark.slow)
                                                  for s in SOCS[1:])])
def npu(request: pytest.FixtureRequest) -> Iterator[str]:
    """One emulated session per SoC class (overrides conftest's 910B3-only fixture, which
    `kernels` builds on); yields the SoC's name."""
    with session(soc=request.param):
        yield request.param




def compile_step(model: torch.nn.Module, seq: int) -> list[tuple[ShapeInfo, Any, Any]]:
    """Compile one training step (forward, loss, backward) of `model` on BATCH x `seq`
    tokens with the plugin's default options; (shape, reason, verdict) of every group the
    hook planned."""
    model.zero_grad(set_to_none=True)
    ids = torch.randint(0, VOCAB, (BATCH, seq),
                        generator=torch.Generator().manual_seed(0))
    compiled = torch.compile(model, backend=compile_only, dynamic=False)
    with torch._inductor.config.patch(inductor_ext.options()), decisions() as seen:
        assert not inductor_ext.config.always_fuse
        with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as failed:
            compiled(input_ids=ids, labels=ids).loss.backward()
        assert isinstance(failed.value.inner_exception, Compiled), failed.value
    return seen


def _structure(shape: ShapeInfo) -> tuple[int, int]:
    """(tensors, shared) of a recorded norm as bf16 [M, N] tensors, as test_npu_cost's
    `norm_shape` takes them: the bytes per row element and the shared bytes (less the
    fp32 statistic per row) in units of a bf16 [M, N] tensor."""
    M, N = shape.M_hint, shape.N
    tensors, rest = divmod(shape.row_elem_bytes, 2)
    shared, left = divmod(shape.shared_bytes - 4 * M, 2 * M * N)
    assert not rest and not left, shape
    return tensors, shared


def check_priced(seen: list[tuple[ShapeInfo, Any, Any]], rows: int
                 ) -> tuple[list[bool], list[ShapeInfo]]:
    """The norms' decisions (in the hook's order) and shapes: each one the hidden-size
    norm of `rows` rows, fused (no reason) or declined `not_profitable`, its verdict the
    cost model's comparison of the three times its detail gives, and the roofline's
    expectation where it has one."""
    norms = [(s, r, v) for s, r, v in seen if s.N == HIDDEN]
    assert len(norms) == NORMS, [(s.M_hint, s.N, r) for s, r, _ in seen]
    fuses = []
    for shape, reason, verdict in norms:
        assert shape.M_hint == rows and shape.M_static
        assert reason in (None, Reason.NOT_PROFITABLE), (reason, verdict)
        fuse = reason is None
        assert verdict.fuses is fuse  # no always_fuse: a fused group is one the model fuses
        fused, final, unfused = times(verdict.detail)
        assert fuse is (fused + final < unfused), verdict.detail
        expect = expectation_for(shape)
        assert expect is None or expect is fuse, (shape, verdict.detail)
        fuses.append(fuse)
    return fuses, [s for s, _, _ in norms]


def check_tables(fuses: list[bool], seen: list[tuple[ShapeInfo, Any, Any]],
                 kernels: list[Any]) -> None:
    """The counters, the kernels emitted and the two tables agree with the decisions, and
    every table row gives the three times of its decision."""
    fused = sum(fuses)
    declined = len(fuses) - fused
    assert dict(inductor_ext.metrics.norms) == {
        k: v for k, v in (("found", NORMS), ("fused", fused), ("declined", declined)) if v}
    assert dict(inductor_ext.metrics.norms_declined) == (
        {"not_profitable": declined} if declined else {})
    rejected = inductor_ext.metrics.rejected_pairs
    assert rejected["not_profitable"] == declined and "internal_error" not in rejected
    assert inductor_ext.metrics.mix_order_kernels == fused == len(fused_kernels(kernels))
    assert inductor_ext.metrics.fused_columns["norm"] == fused  # RMSNorm: one column, dw
    fusion = table_rows("mix_order_fusion")
    assert len(fusion) == fused
    modules = set()
    for row in fusion:
        assert row["target"] == "ascend" and row["model_fuses"] == "True", row
        assert row["graph_id"].endswith("backward"), row  # planned in the backward graph
        assert (row["M"], row["N"]) == (str(seen[0][0].M_hint), str(HIDDEN))
        f, final, unfused = times(row["model_detail"])
        assert f + final < unfused, row["model_detail"]
        modules.add(row["norms"])
    rejects = [row for row in table_rows("mix_order_reject") if row["reason"] == "not_profitable"]
    assert len(rejects) == declined
    for row in rejects:
        assert row["graph_id"].endswith("backward"), row
        f, final, unfused = times(row["detail"])
        assert f + final >= unfused, row["detail"]
        modules.add(row["norms"])
    # Every decision names its norm module: the final one and both of each layer's.
    named = " ".join(modules)
    assert "model.norm" in named
    for layer in range(LAYERS):
        for norm in ("input_layernorm", "post_attention_layernorm"):
            assert f"model.layers.{layer}.{norm}" in named, sorted(modules)


def test_training_step_fuses_where_the_model_says(npu, kernels, tables, llama):
    """4 x 2048 tokens: every norm fused (test_npu_cost.TRAINING_PLANS for the structures
    the hook recorded), the roofline's expectation where it speaks, the three times in
    every row."""
    seen = compile_step(llama, TRAINING_SEQ)
    fuses, shapes = check_priced(seen, BATCH * TRAINING_SEQ)
    structures = [_structure(s) for s in shapes]
    assert collections.Counter(structures) == collections.Counter(LLAMA_NORMS)
    assert all(fuses), list(zip(structures, fuses))
    # The roofline speaks for every norm, whole rows or looped column tiles, as every
    # vector core has rows.
    assert all(expectation_for(s) is True for s in shapes)
    tuning, options = plan_inputs.tuning_for("ascend"), plan_inputs.plan_options()
    kinds = dict(zip(LLAMA_NORMS, TRAINING_PLANS[(npu, HIDDEN)]))
    for shape, structure in zip(shapes, structures):
        plan = ascend_plan.plan(shape, device_info(shape.device), tuning, options)
        assert plan.column_tiled is (kinds[structure] == "L"), (structure, plan)
    check_tables(fuses, seen, kernels)


def test_small_step_declines_every_norm(npu, kernels, tables, llama):
    """4 x 8 tokens: 32 rows, fewer than the SoC's vector cores; fusing would put the
    whole group on at most 32 programs with a workspace row each and a final step, while
    torch_npu spreads its column kernel over N's column blocks: the roofline and the model
    decline every norm, each reject row giving the three times."""
    seen = compile_step(llama, SMALL_SEQ)
    fuses, shapes = check_priced(seen, BATCH * SMALL_SEQ)
    assert all(expectation_for(s) is False for s in shapes)
    assert not any(fuses)
    check_tables(fuses, seen, kernels)


def test_decode_step_never_reaches_the_model(npu, kernels, tables, llama):
    """4 x 1 token: Inductor unrolls column sums over 4 rows into pointwise code
    (unroll_reductions_threshold) before the hook runs: the norms the hook finds are
    declined `trivial_reduction`, none is priced or fused, the stock kernels stay, on
    either SoC (the unrolling does not depend on it)."""
    assert torch._inductor.config.unroll_reductions_threshold >= BATCH * DECODE_SEQ
    seen = compile_step(llama, DECODE_SEQ)
    assert not [s for s, _, _ in seen if s.N == HIDDEN]
    assert not fused_kernels(kernels) and inductor_ext.metrics.mix_order_kernels == 0
    assert not table_rows("mix_order_fusion")
    norms = inductor_ext.metrics.norms
    assert norms["found"] > 0 and norms["declined"] == norms["found"], dict(norms)
    assert dict(inductor_ext.metrics.norms_declined) == {"trivial_reduction": norms["found"]}
    assert "not_profitable" not in inductor_ext.metrics.rejected_pairs
    rejects = table_rows("mix_order_reject")
    assert rejects and all(row["reason"] == "trivial_reduction" for row in rejects), rejects
    assert not any(TIMES.search(row["detail"]) for row in rejects)
