"""Coverage on whole models: every norm backward of small transformers models and torch.nn
stacks fuses (plain, activation-checkpointed, dynamic shapes) with gradients that match
eager; the tables and logs name the user's modules; nothing is silent."""

import inspect
import logging
import os
import pathlib

import pytest
import torch
import torch.nn.functional as F

import inductor_ext
from inductor_ext import report
from tests.support import models
from tests.support import tables as tables_
from tests.support.reference import assert_close, autograd_grads, float64_grads, rms_norm
from tests.support.tables import TABLES
from tests.support.tuning import tuned


def _named(expected: str, module: torch.nn.Module, names: set[str]) -> bool:
    """Whether a fused norm of the tables is `expected`. Module paths there are relative to
    the compiled frame (a graph break can make that frame a submodule): 'layers.0.norm'
    names 'model.layers.0.norm'. A frame that is the norm's own forward has no module
    stack: its norm is named by the source line, in the file of the norm's class."""
    source = os.path.basename(inspect.getsourcefile(type(module)) or "?")
    return any(expected == n or expected.endswith("." + n) or n.startswith(source + ":")
               for n in names)


def _check_model(name: str, variant: str) -> None:
    work = models.build(name, checkpointed=variant == "checkpointed")
    ref = models.grads(work.copy(torch.float64))
    eager = models.grads(work)
    compiled = torch.compile(work.model, dynamic=True if variant == "dynamic" else None)
    got = models.grads(work, compiled)
    keys = sorted(ref)
    assert sorted(got) == keys
    assert_close([got[k] for k in keys], [ref[k] for k in keys], names=keys,
                 eager=[eager[k] for k in keys])
    norms = work.norm_modules()
    metrics = inductor_ext.metrics
    assert metrics.norms_declined == {}, metrics.norms_declined
    # Norms are counted per compiled graph: one that Dynamo reuses for several layers
    # (after a graph break) counts its norms once.
    assert metrics.norms["found"] == metrics.norms["fused"] >= 1
    assert metrics.norms["found"] <= len(norms)
    fused_rows = tables_.rows("mix_order_fusion")
    if len({row["graph_id"] for row in fused_rows}) == 1:  # one backward graph: every norm
        assert metrics.norms["found"] == len(norms)
    fused_names = {n for row in fused_rows for n in row["norms"].split()}
    modules = dict(work.model.named_modules())
    missing = [n for n in norms if not _named(n, modules[n], fused_names)]
    assert not missing, (missing, fused_names)
    assert not any(row["kind"] == "norm" for row in tables_.rows("mix_order_reject"))


#: The default run compiles every model plain and Llama under activation checkpointing;
#: the norm stacks below take both norms checkpointed and dynamic, so the other variants
#: are the slow tier (CI's time). T5 under dynamic=True takes minutes in the interpreter
#: (it passes: run `_check_model("t5", "dynamic")` by hand).
_DEFAULT_MODEL_VARIANTS = {("llama", "checkpointed")}


@pytest.mark.parametrize("name,variant", [
    pytest.param(name, variant, marks=() if variant == "plain"
                 or (name, variant) in _DEFAULT_MODEL_VARIANTS else pytest.mark.slow)
    for name in ("llama", "qwen3", "t5", "gpt2", "bert")
    for variant in ("plain", "checkpointed", "dynamic") if (name, variant) != ("t5", "dynamic")])
def test_transformers_model_fuses_every_norm(plugin, tables, name, variant):
    """2-layer models built from configs: every norm's dw/db joins its own dx, including the
    first norm after the embedding (whose dw the next norm's dx also shares a read with, but
    depends on) and, under activation checkpointing, next to the recomputed forward
    statistics; Qwen3's q/k norms and T5's encoder final norm take their dy from an
    elementwise prologue of the dx kernel."""
    _check_model(name, variant)


@pytest.mark.parametrize("variant", ["plain", "checkpointed", "dynamic"])
@pytest.mark.parametrize("name", ["rmsnorm_stack", "layernorm_stack"])
def test_norm_stack_fuses_every_norm(plugin, tables, name, variant):
    """torch.nn norms after an embedding, with Linear biases whose grads ride along: those
    count as other columns, not as norms."""
    _check_model(name, variant)
    assert inductor_ext.metrics.fused_columns["other"] >= 1
    assert not inductor_ext.metrics.rejected_pairs


def test_modulated_layernorms_sharing_one_table(plugin):
    """Upstream issue 193061: two adaLN-modulated LayerNorms chained, both taking shift and
    scale from one scale_shift_table, batch 1 (so a scale's grad, summed over the tokens,
    has the swapped shape of the LayerNorm's rows). The first block's columns depend on the
    second block's dx, which Inductor computes in the same row kernel: they join it only
    by reading the row block's own values, and every gradient must match eager."""
    T, D = 16, 32

    def blocks(x, emb, table):
        for _ in range(2):
            shift, scale = (table[None] + emb).chunk(2, dim=1)
            x = F.layer_norm(x, (D,), eps=1e-6) * (1 + scale) + shift
        return x

    inputs = [torch.randn(1, T, D, requires_grad=True), torch.randn(1, 2, D, requires_grad=True),
              (torch.randn(2, D) / D**0.5).requires_grad_()]
    dy = torch.randn(1, T, D)
    got = autograd_grads(torch.compile(blocks), inputs, dy)
    assert_close(got, float64_grads(blocks, inputs, dy), names=["x", "emb", "table"],
                 eager=autograd_grads(blocks, inputs, dy))
    assert inductor_ext.metrics.mix_order_kernels >= 1
    assert inductor_ext.metrics.fused_columns["other"] >= 3  # shift and scale grads
    assert not inductor_ext.metrics.rejected_pairs


# -- nothing silent (issue 19) -----------------------------------------------------------------
@pytest.mark.parametrize("M,N", [(1, 1), (3, 7), (1, 1000), (1000, 1), (4, 70000)])
def test_rmsnorm_backward_without_a_reduction_pair_records_why(plugin, tables, M, N):
    """At these shapes Inductor computes dw or dx (or both) without a reduction loop: there
    is nothing to fuse, and the graph says so once."""
    x = torch.randn(M, N, requires_grad=True)
    w = torch.randn(N, requires_grad=True)
    dy = torch.randn(M, N)
    got = autograd_grads(torch.compile(rms_norm), [x, w], dy)
    # (with one column, dx is 0 up to rounding: the bar is eager's own error)
    assert_close(got, float64_grads(rms_norm, [x, w], dy),
                 eager=autograd_grads(rms_norm, [x, w], dy))
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs == {"trivial_reduction": 1}
    (row,) = tables_.rows("mix_order_reject")
    assert row["reason"] == "trivial_reduction" and row["graph_id"].endswith("backward")
    assert (row["M"], row["N"]) == (str(M), str(N))


class _CppNorms(torch.nn.Module):
    """Four norms of two classes: an embedding's LayerNorm, a norm in each of two layers
    (their names differ in one number), a final RMSNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(40, 40)
        self.embed_norm = torch.nn.LayerNorm(40)
        self.layers = torch.nn.ModuleList(
            torch.nn.ModuleDict({"norm": torch.nn.RMSNorm(40), "proj": torch.nn.Linear(40, 40)})
            for _ in range(2))
        self.final = torch.nn.RMSNorm(40)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed_norm(self.embed(x))
        for layer in self.layers:
            x = x + layer["proj"](layer["norm"](x))
        return self.final(x)


def test_cpp_backend_declines_every_norm_and_says_what_to_do(norm_views, ext_records, capsys):
    """enable() and a compile on the C++ CPU backend (no cpu_interpret): our codegen does not
    run there. Every norm of the graph is declined `unsupported_backend` in its module's
    name, once each (issue 63: one per graph before, `norms 1 found`), in the counters,
    the tables, the report and the INFO line, which says what to do."""
    from inductor_ext.scheduler.legality import CPU_ADVICE

    torch._dynamo.reset()
    inductor_ext.metrics.reset()
    model = _CppNorms()
    x = torch.randn(64, 40)
    expected = ["embed_norm", "final", "layers.0.norm", "layers.1.norm"]

    def grads(fn):
        model.zero_grad()
        (fn(x) * torch.randn(64, 40, generator=torch.Generator().manual_seed(1))).sum().backward()
        return [p.grad.clone() for p in model.parameters()]

    eager = grads(model)
    inductor_ext.enable()
    try:
        with inductor_ext.config.patch(always_fuse=True):
            got = grads(torch.compile(model))
    finally:
        inductor_ext.disable()
        torch._dynamo.reset()
    assert_close(got, eager)
    metrics = inductor_ext.metrics
    assert metrics.mix_order_kernels == 0
    assert (metrics.norms["found"], metrics.norms["fused"], metrics.norms["declined"]) == \
        (4, 0, 4)
    assert metrics.norms_declined == {"unsupported_backend": 4}
    assert set(metrics.rejected_pairs) == {"unsupported_backend"}
    assert norm_views() == {place: (4, 0, 4) for place in ("counters", "log summary", "report")}
    norm_rows = [r for r in tables_.rows("mix_order_reject") if r["kind"] == "norm"]
    assert sorted(n for r in norm_rows for n in r["norms"].split()) == expected  # once each
    assert {r["reason"] for r in norm_rows} == {"unsupported_backend"}
    assert all(r["detail"].endswith(CPU_ADVICE) and "C++ CPU backend" in r["detail"]
               for r in norm_rows), norm_rows
    classes = {n: c for r in norm_rows for n, c in zip(r["norms"].split(),
                                                        r["norm_classes"].split())}
    assert classes == {"embed_norm": "LayerNorm", "final": "RMSNorm", "layers.0.norm": "RMSNorm",
                       "layers.1.norm": "RMSNorm"}

    [line] = [r.getMessage() for r in ext_records
              if r.levelno == logging.INFO and "backward: norms" in r.getMessage()]
    assert "backward: norms 4 found, 0 fused, 4 declined; declined (unsupported_backend): " \
        in line, line
    listed = line.split("declined (unsupported_backend): ")[1].split(";")[0].split(", ")
    assert sorted(listed) == ["embed_norm", "final", "layers.{0,1}.norm"], line
    assert line.endswith("; " + CPU_ADVICE), line
    assert "TRITON_INTERPRET=1" in CPU_ADVICE and "cpu_interpret()" in CPU_ADVICE

    tables = sorted(str(p) for p in pathlib.Path().glob("metric_table_mix_order_*.csv"))
    assert report.main(tables) == 0
    out = capsys.readouterr().out
    assert out.startswith("norms: 4 in 1 graph, 0 fused, 4 declined\n"), out
    for norm in expected:
        [row] = [ln for ln in out.splitlines() if ln.split()[:1] == [norm]]
        assert "declined: unsupported_backend" in row, row
    assert "inductor_ext.interpreter.cpu_interpret()" in out  # the reason, described


# -- tables, report and log in the user's terms ------------------------------------------------
def test_tables_report_and_log_name_the_modules(plugin, tables, capsys, ext_records):
    work = models.build("rmsnorm_stack")
    models.grads(work, torch.compile(work.model))
    fused = tables_.rows("mix_order_fusion")
    assert sorted(n for row in fused for n in row["norms"].split()) == \
        ["final", "norms.0", "norms.1"]
    assert sum(int(r["norm_columns"]) for r in fused) == 3  # one dw per RMSNorm
    assert sum(int(r["other_columns"]) for r in fused) == 2  # the two downs' bias grads
    assert all("models.py:" in row["source"] for row in fused)
    with_bias = next(row for row in fused if row["other_columns"] == "1")
    assert "downs." in with_bias["modules"]
    assert inductor_ext.metrics.fused_columns == {"norm": 3, "other": 2}
    summaries = [r.getMessage() for r in ext_records if ": norms " in r.getMessage()]
    # One summary for the backward graph (five decisions); the forward graph decides nothing.
    assert len(summaries) == 1
    assert any("backward: norms 3 found, 3 fused, 0 declined" in s for s in summaries)

    files = [f"metric_table_{t}.csv" for t in TABLES.split(",") if os.path.exists(
        f"metric_table_{t}.csv")]
    assert report.main(files) == 0
    out = capsys.readouterr().out
    assert "coverage per graph" in out
    per_graph = out.split("coverage per graph")[1].splitlines()
    line = next(ln for ln in per_graph if "backward" in ln and "norms" in ln)
    assert line.split("norms")[1].split()[:5] == ["3", "/", "3", "/", "0"]


def test_declined_norm_is_named_in_the_report(plugin, tables, capsys):
    """Without always_fuse, groups the cost model declines (here: fewer rows per program
    than the tuning asks for) are not_profitable: the reject rows and the report name each
    norm and the reason."""
    with inductor_ext.config.patch(always_fuse=False), \
            tuned("cuda", min_rows_per_program=1 << 20):
        work = models.build("layernorm_stack")
        models.grads(work, torch.compile(work.model))
    rejected = tables_.rows("mix_order_reject")
    assert {row["reason"] for row in rejected} == {"not_profitable"}
    assert {n for row in rejected for n in row["norms"].split()} == \
        {"final", "norms.0", "norms.1"}
    assert all(row["kind"] == "norm" for row in rejected)
    assert inductor_ext.metrics.norms_declined == {"not_profitable": 3}
    assert report.main(["metric_table_mix_order_reject.csv"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("norms: 3 in 1 graph, 0 fused, 3 declined\n"), out
    for norm in ("final", "norms.0", "norms.1"):  # one line each, in the first section
        [line] = [ln for ln in out.splitlines() if ln.split()[:1] == [norm]]
        assert "declined: not_profitable \u2014 The cost model expects" in line, line


def test_module_paths_are_relative_to_the_compiled_frame():
    from inductor_ext.scheduler.origin import clean_module_path

    assert clean_module_path("L['self'].model.layers.0.input_layernorm") == \
        "model.layers.0.input_layernorm"
    assert clean_module_path("L['self']._modules['model']._modules['norm']") == "model.norm"
    assert clean_module_path("L['mod'].blocks[1].norm2") == "blocks.1.norm2"
    assert clean_module_path("L['self']") == ""
    # a frame that wraps forward(*args): transformers 5.24's models
    assert clean_module_path("L['args'][0].model.layers.1.input_layernorm") == \
        "model.layers.1.input_layernorm"
    assert clean_module_path("L['args'][0]") == ""


def test_coverage_from_tables_counts_a_norm_declined_once_anywhere():
    """A norm with one column fused and another declined is declined; other columns are
    counted apart."""
    from inductor_ext.coverage import from_tables

    fused = [{"graph_id": "0/0 backward", "norms": "ln_a ln_b", "other_columns": "1"},
             {"graph_id": "1/0 backward", "norms": "ln_c", "other_columns": "0"}]
    rejected = [{"graph_id": "0/0 backward", "norms": "ln_b", "reason": "producer_consumer"},
                {"graph_id": "0/0 backward", "norms": "", "reason": "no_shared_input"}]
    first, second = from_tables(fused, rejected)
    assert (first.found, first.fused, first.declined) == \
        (["ln_a", "ln_b"], ["ln_a"], {"ln_b": "producer_consumer"})
    assert first.other_fused == 1 and first.other_declined == {"no_shared_input": 1}
    assert first.line() == (
        "graph 0/0 backward: norms 2 found, 1 fused, 1 declined; fused: ln_a; "
        "declined (producer_consumer): ln_b; other columns: 1 fused, 1 declined "
        "(no_shared_input 1)")
    assert (second.found, second.fused, second.declined) == (["ln_c"], ["ln_c"], {})


@pytest.mark.parametrize("width_out", [32, 48])
def test_norm_without_dx_is_declined_by_name(plugin, tables, width_out):
    """A norm over an input that needs no gradient has only dw/db columns. With another
    norm of its width (32) they pair with that norm's dx only, sharing no buffer (a Linear
    lies between); with none (48) with no row at all. Either way the norm is named as
    declined `no_row_reduction`, not folded into one per-shape line or left out."""

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm_in = torch.nn.LayerNorm(32)
            self.proj = torch.nn.Linear(32, width_out)
            self.norm_out = torch.nn.LayerNorm(width_out)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.norm_out(self.proj(self.norm_in(x)))

    net = Net()
    x = torch.randn(64, 32)  # no gradient: norm_in's backward is dw and db alone
    torch.compile(net)(x).pow(2).sum().backward()
    fused = {n for row in tables_.rows("mix_order_fusion") for n in row["norms"].split()}
    rejected = tables_.rows("mix_order_reject")
    declined = {n: row["reason"] for row in rejected for n in row["norms"].split()}
    assert "norm_out" in fused
    assert declined == {"norm_in": "no_row_reduction"}
    assert all("needs no gradient" in row["detail"] for row in rejected
               if row["reason"] == "no_row_reduction")
    assert inductor_ext.metrics.norms_declined == {"no_row_reduction": 1}
