"""The Ascend cost model (inductor_ext/targets/ascend/cost.py), on by default: its decisions
on realistic training and decode shapes (decide-only: the planner called with the ShapeInfo
the hook builds, as the interpreter cannot run kernels of that size), and on a tiny model
compiled and run under the torch_npu emulation with default options (no always_fuse).

The decide-only shapes take their byte structure from what the hook recorded for the tiny
2-layer Qwen3's norms under the emulation (`test_tiny_qwen3_declines_every_norm_with_the_
three_times` checks that structure against the hook), scaled to the model's hidden size and
to the rows of a step: 4 x 2048 tokens (training) or 4 x 1 (a small-batch decode-like
step), in bf16.

The decide-only tests need no emulation; the compiled ones run in the venv of
tests/ascend/setup_npu_venv.sh and skip elsewhere:

    TRITON_INTERPRET=1 TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 \\
        .npu-venv/bin/python -m pytest -q tests/ascend/test_npu_cost.py
"""

from __future__ import annotations

import collections
import csv
import dataclasses
import os

import pytest
import torch
from cost_cases import COST_CASES, TIMES, decisions, roofline_expectation

import inductor_ext
from inductor_ext.plan import DeviceInfo, PlanOptions, ShapeInfo
from inductor_ext.plan import knobs as tuning_mod
from inductor_ext.targets.ascend import cost
from inductor_ext.targets.ascend import plan as ascend_plan
from inductor_ext.targets.ascend.tuning import AscendTuning
from tests.support import models
from tests.support import npu_emulation as emu

#: The SoC facts the emulation reports (torch_npu's Inductor config: vector cores, UB) with
#: the HBM bandwidth the Ascend device query adds by SoC class.
DEVICES = {
    "910B3": DeviceInfo(type="npu", name="Ascend910B3", cores=40, ub_bytes=192 * 1024,
                        dram_bytes_per_s=cost.HBM_BYTES_PER_S["A2A3"],
                        npu_backend="torch_npu"),
    "950": DeviceInfo(type="npu", name="Ascend950", cores=72, ub_bytes=256 * 1024,
                      dram_bytes_per_s=cost.HBM_BYTES_PER_S["950"], npu_backend="torch_npu",
                      ascend950=True),
}

#: Rows of one step: 4 sequences of 2048 tokens (training), 4 of one token (decode-like).
TRAINING_ROWS = 4 * 2048
DECODE_ROWS = 4
#: The decoder norms' byte structure, per [M, N] element: (tensors the row side reads or
#: writes, of which the column reduction reads again), as the hook recorded them for the
#: tiny Qwen3's hidden-size norms (its decoder layers are Llama's and Mistral's): three
#: with six [M, N] tensors on the row side (four of them the column's too), one with five
#: (three), one with three (two: x and dy read, dx written).
LLAMA_NORMS = ((6, 4), (6, 4), (6, 4), (5, 3), (3, 2))
#: Qwen3's q_norm / k_norm (over head_dim, rows tokens x heads), as recorded.
QK_NORMS = ((6, 1), (6, 1), (3, 2), (3, 2))
#: Hidden sizes of public configs (config.json of each checkpoint).
HIDDEN = {"llama-3.2-1b": 2048, "llama-3-8b": 4096, "qwen3-8b": 4096, "qwen3-14b": 5120,
          "mistral-7b": 4096, "mistral-nemo-12b": 5120}

#: The plans per (SoC, hidden) on training rows, per LLAMA_NORMS entry, each fused: "P"
#: whole rows with multibuffer (fused + final step about 0.62 of unfused), "p" whole rows
#: without it (the UB holds a row block only single-buffered: about 0.76-0.80, priced at
#: `unbuffered_slowdown`), "L" looped column tiles (a second pass over the row and
#: workspace adds per row block, at `looped_reread_share`: about 0.84-0.91).
#: 910B3 (192 KiB UB): whole rows up to 4096 but for the 5-tensor norm there, tiles at 5120.
#: Ascend950 (256 KiB): with multibuffer up to 4096, without it at 5120.
TRAINING_PLANS = {
    ("910B3", 2048): "PPPpP",
    ("910B3", 4096): "pppLp",
    ("910B3", 5120): "LLLLL",
    ("950", 2048): "PPPPP",
    ("950", 4096): "PPPLP",
    ("950", 5120): "pppLP",
}
#: The most fused + final step may take of unfused, per plan kind.
MAX_RATIO = {"P": 0.67, "p": 0.82, "L": 0.92}


def norm_shape(M: int, N: int, elem_bytes: int, tensors: int, shared: int,
               columns: int = 1) -> ShapeInfo:
    """The ShapeInfo the hook builds for a norm backward whose row side reads or writes
    `tensors` [M, N] tensors, `shared` of which the column reductions (dw, db) read again;
    plus per row the fp32 statistic (rstd), per column the weight and the column sums."""
    total = tensors * M * N * elem_bytes + 2 * M * 4 + (1 + columns) * N * elem_bytes
    shared_bytes = shared * M * N * elem_bytes + M * 4
    return ShapeInfo(M_hint=M, M_static=True, N=N, num_columns=columns,
                     elem_bytes=elem_bytes,
                     shared_bytes=shared_bytes, total_bytes=total,
                     unfused_bytes=total + shared_bytes, row_elem_bytes=tensors * elem_bytes,
                     device=torch.device("cpu"))  # planning does not look at it


def decide(shape: ShapeInfo, soc: str, tuning: AscendTuning | None = None
           ) -> tuple[bool, str, cost.Estimate]:
    """(fuse, detail, estimate) as the hook gets them: fits, plan, profitable."""
    device, tuning = DEVICES[soc], tuning or AscendTuning()
    options = PlanOptions()
    assert ascend_plan.fits(shape, device, tuning, options)[0]
    plan = ascend_plan.plan(shape, device, tuning, options)
    fuse, detail = ascend_plan.profitable(shape, plan, device, tuning, options)
    est = cost.estimate(shape, plan, device, ascend_plan.vector_cores(device, options),
                        tuning, options)
    return fuse, detail, est


def times(detail: str) -> tuple[float, float, float]:
    match = TIMES.search(detail)
    assert match, detail
    fused, final, unfused = map(float, match.groups())
    return fused, final, unfused


def plan_kind(shape: ShapeInfo, soc: str) -> str:
    plan = ascend_plan.plan(shape, DEVICES[soc], AscendTuning(), PlanOptions())
    if plan.column_tiled:
        return "L"
    return "P" if dict(plan.configs[0])["multibuffer"] else "p"


# ---- decide-only: realistic shapes ------------------------------------------------------


@pytest.mark.parametrize("model", sorted(HIDDEN))
@pytest.mark.parametrize("soc", sorted(DEVICES))
def test_training_step_decisions(model, soc):
    """A 2-layer model's norm backwards on 4 x 2048 tokens in bf16: each fused, with the
    plan of the table and its three times in the detail (the decision: fused + final step
    < unfused), gaining at least what its plan kind gains."""
    N = HIDDEN[model]
    for structure, kind in zip(LLAMA_NORMS, TRAINING_PLANS[(soc, N)]):
        shape = norm_shape(TRAINING_ROWS, N, 2, *structure)
        fuse, detail, est = decide(shape, soc)
        assert fuse and plan_kind(shape, soc) == kind, (structure, kind, detail)
        fused, final, unfused = times(detail)
        assert est.fuse is fuse and est.describe() == detail
        ratio = (est.fused_s + est.final_s) / est.unfused_s
        assert ratio < MAX_RATIO[kind], (structure, ratio)
        assert fused + final < unfused


@pytest.mark.parametrize("model", sorted(HIDDEN))
@pytest.mark.parametrize("soc", sorted(DEVICES))
def test_decode_like_step_declines(model, soc):
    """4 rows (batch 4, one token each): the fused kernel has at most 4 programs for the
    whole group and writes a workspace row per program (as large as the rows themselves)
    plus a final step, while torch_npu spreads its column kernel over N's column blocks:
    fusing loses on every norm."""
    for structure in LLAMA_NORMS:
        fuse, detail, est = decide(norm_shape(DECODE_ROWS, HIDDEN[model], 2, *structure), soc)
        assert not fuse, detail
        assert est.fused_s + est.final_s >= est.unfused_s
        # Launch-bound: two launches either way, the data a small part.
        assert est.unfused_s < 3 * AscendTuning().launch_s


@pytest.mark.parametrize("soc", sorted(DEVICES))
def test_qwen3_qk_norms_fuse_in_training(soc):
    """Qwen3-8B's q_norm (32 heads) and k_norm (8 heads) over head_dim 128: rows tokens x
    heads. torch_npu's column kernel has only N's 8 column blocks of 32 bytes to spread
    over, the fused kernel every vector core: it wins by more than 1.5x."""
    for heads, structure in zip((32, 32, 8, 8), QK_NORMS):
        fuse, detail, est = decide(norm_shape(TRAINING_ROWS * heads, 128, 2, *structure), soc)
        assert fuse, detail
        assert 1.5 * (est.fused_s + est.final_s) < est.unfused_s, detail


def test_the_socs_unified_buffer_decides_hidden_4096():
    """The same Llama-3-8B norm fuses on both SoCs, but only Ascend950's 256 KiB holds a
    4096-wide row block with multibuffer; the 910B3's 192 KiB holds it single-buffered,
    priced slower (the bandwidth is the same)."""
    shape = norm_shape(TRAINING_ROWS, 4096, 2, 3, 2)
    fuse_b3, _, est_b3 = decide(shape, "910B3")
    fuse_950, _, est_950 = decide(shape, "950")
    assert fuse_b3 and fuse_950
    assert (plan_kind(shape, "910B3"), plan_kind(shape, "950")) == ("p", "P")
    assert est_b3.unfused_s == pytest.approx(est_950.unfused_s)
    assert est_b3.fused_s > 1.2 * est_950.fused_s


def test_roofline_agrees_on_large_persistent_shapes():
    """Where the plan holds whole rows and every core has rows, the decision is the
    roofline's (bench/ascend_model.py): fused moves fewer bytes, and the model's ratio of
    fused to unfused times is that of the bytes within the final step's launch."""
    shape = norm_shape(TRAINING_ROWS, 2048, 2, 3, 2)
    for soc in DEVICES:
        fuse, _, est = decide(shape, soc)
        device = DEVICES[soc]
        plan = ascend_plan.plan(shape, device, AscendTuning(), PlanOptions())
        assert not plan.column_tiled and plan.programs == device.cores
        fused_bytes = shape.total_bytes + 2 * plan.workspace_bytes(shape)
        assert fuse is (fused_bytes < shape.unfused_bytes) is True
        launch = AscendTuning().launch_s
        data = (est.fused_s + est.final_s - 2 * launch) / (est.unfused_s - 2 * launch)
        assert data == pytest.approx(fused_bytes / shape.unfused_bytes, rel=0.02)


def test_hbm_bandwidth_and_cores_come_from_the_device():
    """A faster HBM (the 950DT's announced 4 TB/s) shortens every data time by the
    bandwidth ratio; fewer vector cores (NPU_DEVICE_LIMIT) lengthen a kernel spread over
    all of them."""
    shape = norm_shape(TRAINING_ROWS, 2048, 2, 3, 2)
    tuning, options = AscendTuning(), PlanOptions()
    base = DEVICES["950"]
    plan = ascend_plan.plan(shape, base, tuning, options)
    est = cost.estimate(shape, plan, base, 72, tuning, options)
    fast = cost.estimate(shape, plan, dataclasses.replace(base, dram_bytes_per_s=4e12), 72,
                         tuning, options)
    assert (fast.fused_s - tuning.launch_s) == pytest.approx(
        (est.fused_s - tuning.launch_s) * 1.6 / 4)
    assert cost.busy_bandwidth(18, 72, 1.6e12, tuning) == pytest.approx(
        cost.busy_bandwidth(72, 72, 1.6e12, tuning) / 4)
    # A device the flavor is forced onto (no NPU) is priced as the SoC class it names.
    cpu = DeviceInfo(type="cpu", dram_bytes_per_s=9e12)
    assert cost.hbm_bytes_per_s(cpu) == cost.HBM_BYTES_PER_S["A2A3"]


def test_looped_workspace_adds_are_priced():
    """The looped column-tiled kernel adds each row block's fold into its workspace row
    (codegen/kernel_base.add_partial): on the 910B3's hidden-8192 norm the planner takes
    a narrower tile than the widest that fits, whose blocks hold more rows and so add
    less; the widest (one-row blocks) is priced slower. The decision rests on the share
    of HBM's price the second pass and the adds pay: at full price the norm declines."""
    shape = norm_shape(TRAINING_ROWS, 8192, 2, 3, 2)
    device, tuning, options = DEVICES["910B3"], AscendTuning(), PlanOptions()
    plan = ascend_plan.plan(shape, device, tuning, options)
    candidates = ascend_plan.torch_npu_candidates(shape, device, tuning, options)
    widest = candidates[0]
    assert plan.column_tiled and widest.column_tiled and widest.block_m == 1
    assert plan.r0_block < widest.r0_block and plan.block_m > 1

    def total(p):
        est = cost.estimate(shape, p, device, device.cores, tuning, options)
        return est.fused_s + est.final_s

    assert total(plan) < total(widest)
    assert decide(shape, "910B3")[0]
    assert not decide(shape, "910B3", AscendTuning(looped_reread_share=1.0))[0]


@pytest.mark.parametrize("soc", sorted(DEVICES))
@pytest.mark.parametrize("case", COST_CASES, ids=lambda c: "-".join(map(str, c)))
def test_the_check_cases_have_a_roofline_expectation_the_model_meets(case, soc):
    """check_npu's default-options subset (cost_cases.COST_CASES) as plain norms (x and dy
    read, dx written; LayerNorm with bias has two columns): the roofline expects a
    decision for each, and the model's agrees."""
    op, dname, N, M = case
    es = {"bf16": 2, "fp32": 4}[dname]
    shape = norm_shape(M, N, es, 3, 2, columns=2 if op == "ln" else 1)
    expect = roofline_expectation(shape, DEVICES[soc])
    assert expect is not None
    fuse, detail, _ = decide(shape, soc)
    assert fuse is expect, detail


@pytest.mark.parametrize("knob,value", [("hbm_efficiency", 0.0), ("hbm_efficiency", 1.5),
                                        ("saturating_core_share", -1.0), ("launch_s", -1e-6),
                                        ("looped_reread_share", -0.5)])
def test_bad_cost_knob_is_a_clear_error(knob, value):
    with pytest.raises(ValueError, match=rf"tuning\['ascend'\]\['{knob}'\]"):
        tuning_mod.make("ascend", {knob: value})


def test_a_failing_cost_model_keeps_the_stock_kernels(request, monkeypatch):
    """The model raising inside the hook, default options: the group is declined
    `internal_error` and the stock kernels compute the gradients (float64's). Under the
    torch_npu emulation where it runs (an interpreted run before it would leave
    triton.language patched for its front-end checks), else on the Ascend flavor forced
    onto the CPU interpreter."""
    from tests.support.reference import rms_backward

    def boom(*args, **kwargs):
        raise RuntimeError("cost model failed")

    monkeypatch.setattr(cost, "estimate", boom)
    if emu.can_emulate():
        from npu_cases import check_grads, fused_kernels

        kernels = request.getfixturevalue("kernels")
        with torch._inductor.config.patch(inductor_ext.options()):
            check_grads("rms", 1024, 64)
        assert not fused_kernels(kernels)
    else:
        request.getfixturevalue("interp")
        M, N = 64, 40
        args = [torch.randn(M, N), torch.randn(N), torch.randn(M, N), torch.rand(M, 1) + 0.5]
        with torch._inductor.config.patch(inductor_ext.options()), \
                inductor_ext.config.patch(target="ascend"):
            got = torch.compile(rms_backward)(*args)
        for g, r in zip(got, rms_backward(*[a.double() for a in args])):
            torch.testing.assert_close(g.double(), r, rtol=1e-4, atol=1e-4)
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert dict(inductor_ext.metrics.rejected_pairs) == {"internal_error": 1}


# ---- compiled under the torch_npu emulation, default options ----------------------------

needs_emulation = pytest.mark.skipif(not emu.can_emulate(),
                                     reason=str(emu.emulation_unavailable_reason()))
#: test_npu_qk_norms' 2-layer Qwen3 and its norms (per layer input, post-attention,
#: q_norm, k_norm; plus the final norm).
QWEN3 = models.Size(hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, vocab=128, seq=16)
QWEN3_NORMS = 2 * 4 + 1


def table_rows(name: str) -> list[dict[str, str]]:
    path = f"metric_table_{name}.csv"
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def shapes():
    """(shape, reason, verdict) of every group the hook planned."""
    with decisions() as seen:
        yield seen


def _structure(shape: ShapeInfo) -> tuple[int, int]:
    """(tensors, shared) of a recorded norm, as `norm_shape` takes them."""
    es = shape.elem_bytes
    return shape.row_elem_bytes // es, shape.shared_bytes // (shape.M_hint * shape.N * es)


@needs_emulation
@pytest.mark.slow  # test_npu_cost_models.py's small step declines every norm by default
def test_tiny_qwen3_declines_every_norm_with_the_three_times(kernels, tables, shapes):
    """The 2-layer Qwen3 of test_npu_qk_norms (hidden 64, 32 tokens) with default options:
    every norm backward is a few rows on one or two programs, launch-bound, and the model
    declines all 9, each reject row giving the three times (fused + final step >=
    unfused). The loss still matches eager (torch_npu's own kernels ran). The hook's
    shapes of the hidden-size norms are `norm_shape`'s structure exactly."""
    from npu_cases import fused_kernels

    from tests.support import reference

    work = models.build("qwen3", QWEN3)
    eager_loss = work.loss()
    eager = models.grads(work)
    compiled = torch.compile(work.model, dynamic=False)
    with torch._inductor.config.patch(inductor_ext.options()):
        assert not inductor_ext.config.always_fuse
        loss = work.loss(compiled)
        got = models.grads(work, compiled)
    assert abs(loss.item() - eager_loss.item()) < 1e-4
    assert max(reference.max_rel_err(got[name], eager[name]) for name in eager) < 1e-3
    assert dict(inductor_ext.metrics.norms) == {"found": QWEN3_NORMS,
                                                "declined": QWEN3_NORMS}
    assert dict(inductor_ext.metrics.rejected_pairs) == {"not_profitable": QWEN3_NORMS}
    assert not fused_kernels(kernels) and not table_rows("mix_order_fusion")
    rejects = table_rows("mix_order_reject")
    assert len(rejects) == QWEN3_NORMS
    for row in rejects:
        assert row["reason"] == "not_profitable"
        fused, final, unfused = times(row["detail"])
        assert fused + final >= unfused, row["detail"]
    hidden = [s for s, _, _ in shapes if s.N == QWEN3.hidden]
    assert collections.Counter(map(_structure, hidden)) == collections.Counter(LLAMA_NORMS)
    for shape in hidden:
        built = norm_shape(shape.M_hint, shape.N, 4, *_structure(shape))
        fields = ("total_bytes", "shared_bytes", "unfused_bytes", "row_elem_bytes",
                  "num_columns", "elem_bytes")
        assert [getattr(shape, f) for f in fields] == [getattr(built, f) for f in fields]
    heads = [s for s, _, _ in shapes if s.N != QWEN3.hidden]
    assert collections.Counter(map(_structure, heads)) == collections.Counter(QK_NORMS)


@needs_emulation
def test_enough_rows_fuse_by_default(kernels, tables):
    """RMSNorm 1024x64 fp32 with default options: 32 programs of 32 rows, and torch_npu's
    column kernel over 8 column blocks: the model fuses it, the fusion row records its
    decision and its three times, and the gradients match float64."""
    from npu_cases import check_grads, fused_kernels

    with torch._inductor.config.patch(inductor_ext.options()):
        check_grads("rms", 1024, 64)
    assert len(fused_kernels(kernels)) == 1
    assert not inductor_ext.metrics.rejected_pairs
    (row,) = table_rows("mix_order_fusion")
    assert row["target"] == "ascend" and row["model_fuses"] == "True"
    fused, final, unfused = times(row["model_detail"])
    assert fused + final < unfused


@needs_emulation
def test_always_fuse_records_the_declining_verdict(kernels, tables):
    """LayerNorm 64x256 under always_fuse: fused although the model declines it; the
    fusion row says so (model_fuses False) with the times that decline it."""
    from npu_cases import check_grads, fused_kernels, plugin_on

    with plugin_on():
        check_grads("ln", 64, 256)
    assert len(fused_kernels(kernels)) == 1
    (row,) = table_rows("mix_order_fusion")
    assert row["model_fuses"] == "False"
    fused, final, unfused = times(row["model_detail"])
    assert fused + final >= unfused
