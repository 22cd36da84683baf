"""What a user sees of the plugin's decisions (issue 41): the one INFO line per graph, cold
and from a warm FX-graph cache, its grouped module names, and the short plan in DEBUG."""

import logging
import os
import re
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest
import torch

import inductor_ext
from inductor_ext.coverage import LINE_BUDGET, GraphCoverage, group_names, label
from inductor_ext.plan.types import FinalizeBlock, LaunchPlan
from tests.support import tables as tables_
from tests.support.tuning import tuned


def test_plan_summary_is_short_and_names_the_essentials():
    plan = LaunchPlan(target="cuda", programs=132, block_m=4, r0_block=4096, num_warps=8,
                      num_stages=1, row_loop="strided", final_step=FinalizeBlock(16, 8, 4),
                      configs=((("XBLOCK", 4),), (("XBLOCK", 2),)))
    assert plan.summary(8192) == ("cuda: programs=132 block_m=4 split=64 row=4096 configs=2 "
                                  "final=16cols")
    tiled = LaunchPlan(target="cuda", programs=66, block_m=2, r0_block=1024, num_warps=8,
                       num_stages=1, row_loop="strided", column_tiled=True, register_tiles=8,
                       column_groups=2)
    text = tiled.summary()
    assert text == ("cuda: programs=66x2 block_m=2 column tiles=8x1024 in registers "
                    "configs=1 final=aten")
    assert len(repr(tiled)) > 5 * len(text)


# -- names grouped ------------------------------------------------------------------------------
def test_names_differing_in_one_number_are_grouped():
    names = [f"model.layers.{i}.{n}" for i in range(12)
             for n in ("input_layernorm", "post_attention_layernorm")] + ["model.norm"]
    assert group_names(names) == ["model.layers.{0..11}.input_layernorm",
                                  "model.layers.{0..11}.post_attention_layernorm",
                                  "model.norm"]
    assert group_names(["model.layers.1.norm", "model.layers.0.norm"]) == \
        ["model.layers.{0,1}.norm"]
    assert group_names([f"h.{i}.ln_1" for i in (0, 1, 2, 3, 7, 9, 10)]) == \
        ["h.{0..3,7,9,10}.ln_1"]


def test_grouping_keeps_apart_what_differs_elsewhere():
    # a name alone, names differing in a word, and source lines stay as they are
    assert group_names(["final", "models.py:12", "a.0.x", "a.1.y"]) == \
        ["final", "models.py:12", "a.0.x", "a.1.y"]
    # two numbers: the first folds (a T5 block's index, not its sub-layer's)
    t5 = [f"encoder.block.{b}.layer.{s}.layer_norm" for b in range(3) for s in range(2)]
    assert group_names(t5) == ["encoder.block.{0..2}.layer.0.layer_norm",
                               "encoder.block.{0..2}.layer.1.layer_norm"]
    # leading zeros are not numbers to fold; repeats count once
    assert group_names(["x.01.n", "x.1.n", "x.1.n"]) == ["x.01.n", "x.1.n"]


def test_names_of_digits_alone_show_their_class():
    """A top-level nn.Sequential's children are named '3' or '3.2': with their class, and
    grouped only with children of the same class."""
    classes = {"1": "LayerNorm", "3": "LayerNorm", "5": "RMSNorm", "8.1": "LayerNorm",
               "model.norm": "LayerNorm"}
    assert group_names(["1", "3", "5", "8.1", "model.norm"], classes) == \
        ["{1,3} (LayerNorm)", "5 (RMSNorm)", "8.1 (LayerNorm)", "model.norm"]
    assert label("3.2", "?") == "3.2" and label("3.2", "LayerNorm") == "3.2 (LayerNorm)"


def test_summary_line_lists_by_status_and_truncates():
    graph = GraphCoverage("1/0 backward")
    layers = [f"model.layers.{i}.input_layernorm" for i in range(12)]
    graph.add_fused(layers[:10], 2)
    graph.add_declined(layers[10:], "not_profitable")
    for i in range(6):
        graph.add_declined([f"blk{i}.norm"], "producer_consumer")
    graph.add_declined([], "no_shared_input")
    assert graph.line() == (
        "graph 1/0 backward: norms 18 found, 10 fused, 8 declined; "
        "fused: model.layers.{0..9}.input_layernorm; "
        "declined (not_profitable): model.layers.{10,11}.input_layernorm; "
        "declined (producer_consumer): blk0.norm and 5 more; "
        "other columns: 2 fused, 1 declined (no_shared_input 1)")
    # a list names what fits the line's budget, then counts the rest
    many = GraphCoverage("0/0 backward")
    many.add_fused([f"encoder{i}.final_layer_norm" for i in range(20)], 0)
    line = many.line()
    assert len(line) <= LINE_BUDGET < len(line + ", encoder9.final_layer_norm")
    shown = line.split("fused: ")[1].split(" and ")[0].split(", ")
    assert shown == [f"encoder{i}.final_layer_norm" for i in range(len(shown))]
    assert line.endswith(f" and {20 - len(shown)} more") and len(shown) > 2


def test_summary_survives_its_encoding():
    graph = GraphCoverage("0/3 backward")
    graph.add_fused(["3.2", "ln"], 1, {"3.2": "LayerNorm", "ln": "LayerNorm", "4": "Linear"})
    graph.add_declined(["rms"], "tiled_row_reads", {"rms": "RMSNorm"})
    graph.add_declined([], "no_shared_input")
    again = GraphCoverage.decode(graph.encode(), "2/0")
    assert again.graph_id == "2/0 backward"
    assert again.line() == graph.line().replace("0/3", "2/0")
    assert "fused: 3.2 (LayerNorm), ln;" in again.line()
    assert (again.found, again.fused, again.declined, again.classes) == \
        (graph.found, graph.fused, graph.declined, {"3.2": "LayerNorm", "ln": "LayerNorm",
                                                    "rms": "RMSNorm"})
    assert (again.other_fused, again.other_declined, again.decisions()) == \
        (1, {"no_shared_input": 1}, 3)
    with pytest.raises(ValueError):
        GraphCoverage.decode("not json")


def test_summary_names_what_an_opt_out_matched_and_what_to_do():
    """Issue 63: the norms a pattern matched, after the declined lists; a note (the C++
    backend's advice) last; both survive the encoding a warm cache replays."""
    graph = GraphCoverage("0/0 backward")
    graph.add_fused([f"layers.{i}.post_attention_layernorm" for i in range(12)], 0)
    graph.add_declined(["embed_norm", "layers.0.input_layernorm"], "excluded_by_config")
    graph.add_excluded("config.exclude_modules 'embed_norm'", ["embed_norm"])
    graph.add_excluded("config.exclude_norm_classes 'LayerNorm'", ["ln"])
    graph.add_declined([], "unsupported_backend")
    graph.add_note("to fuse, do this")
    graph.add_note("to fuse, do this")  # once
    assert graph.line() == (
        "graph 0/0 backward: norms 14 found, 12 fused, 2 declined; "
        "fused: layers.{0..11}.post_attention_layernorm; "
        "declined (excluded_by_config): embed_norm, layers.0.input_layernorm; "
        "config.exclude_modules 'embed_norm' matched embed_norm; "
        "config.exclude_norm_classes 'LayerNorm' matched ln; "
        "other columns: 1 declined (unsupported_backend 1); to fuse, do this")
    again = GraphCoverage.decode(graph.encode(), "0/0")
    assert again.line() == graph.line()
    assert (again.excluded, again.notes) == (graph.excluded, ["to fuse, do this"])


# -- the info line of a compile -----------------------------------------------------------------
class TwoNorms(torch.nn.Module):
    """A LayerNorm and an RMSNorm after a Linear (so both norms need dx)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(32, 32)
        self.ln = torch.nn.LayerNorm(32)
        self.rms = torch.nn.RMSNorm(32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rms(self.ln(self.proj(x)))


def _info_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "inductor_ext" and r.levelno == logging.INFO]


@pytest.mark.parametrize("fused", [True, False])
def test_info_line_names_both_norms_with_their_status(plugin, tables, caplog, fused):
    """At INFO (TORCH_LOGS="inductor_ext") a graph with decisions logs one line: the norms
    by module, fused or declined with the reason; the tables name their classes."""
    with caplog.at_level(logging.INFO, logger="inductor_ext"), \
            inductor_ext.config.patch(always_fuse=fused), \
            tuned("cuda", min_rows_per_program=1 << 20):  # the cost model declines
        torch.compile(TwoNorms())(torch.randn(64, 32)).pow(2).sum().backward()
    (line,) = _info_lines(caplog)
    assert re.fullmatch(r"inductor_ext: graph \d+/\d+ backward: norms 2 found, .*", line), line
    if fused:
        assert "norms 2 found, 2 fused, 0 declined; fused: rms, ln;" in line, line
    else:
        assert "norms 2 found, 0 fused, 2 declined; declined (not_profitable): rms, ln" in line
    assert len(line) < 200
    rows = tables_.rows("mix_order_fusion" if fused else "mix_order_reject")
    classes = {n: c for row in rows
               for n, c in zip(row["norms"].split(), row["norm_classes"].split(), strict=True)}
    assert classes == {"ln": "LayerNorm", "rms": "RMSNorm"}


def test_sequential_children_are_named_with_their_class(plugin, tables, caplog):
    """A top-level nn.Sequential names its children by position: the LayerNorm at index 3
    (whose dw/db fuse with the bias grad of the Linear at 2) shows as '3 (LayerNorm)',
    never as a bare '[3 2]'."""
    L = torch.nn
    model = L.Sequential(L.Linear(32, 32), L.GELU(), L.Linear(32, 32), L.LayerNorm(32))
    with caplog.at_level(logging.DEBUG, logger="inductor_ext"):
        torch.compile(model)(torch.randn(64, 32)).pow(2).sum().backward()
    (line,) = _info_lines(caplog)
    assert "fused: 3 (LayerNorm);" in line, line
    (fused,) = [r.getMessage() for r in caplog.records if "inductor_ext: fused" in r.getMessage()]
    assert "[3 (LayerNorm), 2 (Linear)]" in fused, fused
    assert "plan: cuda: programs=" in fused and "LaunchPlan(" not in fused, fused
    (row,) = tables_.rows("mix_order_fusion")
    assert (row["norms"], row["norm_classes"], row["modules"]) == ("3", "LayerNorm", "3 2")


_TWO_NORMS_SCRIPT = textwrap.dedent('''
    import torch, inductor_ext
    from inductor_ext.interpreter import cpu_interpret

    class TwoNorms(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(32, 32)
            self.ln = torch.nn.LayerNorm(32)
            self.rms = torch.nn.RMSNorm(32)

        def forward(self, x):
            return self.rms(self.ln(self.proj(x)))

    with cpu_interpret(), torch._inductor.config.patch(inductor_ext.options()), \\
            torch._inductor.config.patch(fx_graph_cache=True, force_disable_caches=False), \\
            inductor_ext.config.patch(always_fuse=True):
        torch.compile(TwoNorms())(torch.randn(64, 32)).pow(2).sum().backward()
    print("norms", sorted(inductor_ext.metrics.norms.items()))
''')


def test_warm_cache_replays_the_info_line(tmp_path):
    """Twice the same script on one cache directory: the warm process, whose FX-graph (and
    AOTAutograd) cache hit runs no pass, logs the cold line's summary from the counters
    the cache kept, marked as a replay that writes no tables, and counts the same norms."""
    env = {**os.environ, "TORCH_LOGS": "inductor_ext", "TRITON_INTERPRET": "1",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
           "TORCHINDUCTOR_AUTOGRAD_CACHE": "1"}
    runs = [subprocess.run([sys.executable, "-c", _TWO_NORMS_SCRIPT], env=env,
                           capture_output=True, text=True, timeout=600) for _ in range(2)]
    for res in runs:
        assert res.returncode == 0, res.stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout
    assert "norms [('found', 2), ('fused', 2)]" in runs[0].stdout
    cold, warm = ([ln[ln.index("inductor_ext: "):] for ln in r.stderr.splitlines()
                   if "inductor_ext: " in ln] for r in runs)
    summary = "graph 0/0 backward: norms 2 found, 2 fused, 0 declined; fused: rms, ln"
    assert len(cold) == 1 and cold[0].startswith(f"inductor_ext: {summary};"), cold
    assert len(warm) == 1, warm
    assert warm[0].startswith(f"inductor_ext: FX graph cache replay of {summary};"), warm
    assert warm[0].endswith("(a cache hit writes no metric tables; "
                            "TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 to get them)"), warm


def test_origin_names_the_module_class():
    """The class comes from the module stack (a class, or the dotted name Dynamo may keep),
    is kept per module and norm, and fills the tables' norm_classes in the order of norms
    ('?' where unknown)."""
    from inductor_ext.scheduler import origin

    def fx(path: str, cls: object) -> SimpleNamespace:
        return SimpleNamespace(meta={"fwd_nn_module_stack": {"k": (path, cls)},
                                     "original_aten": ""})

    qk = origin.of_fx(fx("L['self'].model.layers.0.self_attn.q_norm",
                         "transformers.models.qwen3.modeling_qwen3.Qwen3RMSNorm"))
    ln = origin.of_fx(fx("L['self']._modules['3']", torch.nn.LayerNorm))
    bias = origin.of_fx(fx("L['self']._modules['2']", torch.nn.Linear))
    assert (qk.module, qk.cls, qk.norm) == ("model.layers.0.self_attn.q_norm", "Qwen3RMSNorm",
                                            True)
    assert (ln.module, ln.cls, ln.norm, bias.cls, bias.norm) == ("3", "LayerNorm", True,
                                                                 "Linear", False)
    unknown = origin.Origin(module="", source="f.py:3", norm=True)
    attribution = origin.attribute([ln, unknown], [bias, qk])
    assert attribution.norms == ["model.layers.0.self_attn.q_norm", "3", "f.py:3"]
    assert attribution.fusion_fields()["norm_classes"] == "Qwen3RMSNorm LayerNorm ?"
    assert attribution.reject_fields()["norm_classes"] == "Qwen3RMSNorm LayerNorm ?"
    assert attribution.shown_modules() == \
        "2 (Linear), model.layers.0.self_attn.q_norm, 3 (LayerNorm)"


_FROZEN_EMBEDDING_SCRIPT = textwrap.dedent('''
    import torch, inductor_ext
    from inductor_ext.interpreter import cpu_interpret

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(100, 32).requires_grad_(False)
            self.embed_norm = torch.nn.LayerNorm(32)
            self.proj = torch.nn.Linear(32, 32)
            self.out_norm = torch.nn.RMSNorm(32)

        def forward(self, ids):
            return self.out_norm(self.proj(self.embed_norm(self.embed(ids))))

    torch.manual_seed(0)
    with cpu_interpret(), torch._inductor.config.patch(inductor_ext.options()), \\
            torch._inductor.config.patch(fx_graph_cache=True, force_disable_caches=False), \\
            inductor_ext.config.patch(always_fuse=True):
        torch.compile(Model())(torch.randint(0, 100, (4, 16))).pow(2).sum().backward()
''')


def test_a_training_step_names_its_norms_cold_warm_and_in_the_report(tmp_path):
    """The user's view end to end (issue 41): a LayerNorm after a frozen embedding and an
    RMSNorm after a Linear, one training step under TORCH_LOGS="inductor_ext" in two
    processes on one cache directory. Cold and warm, one INFO line names both modules with
    their status (the frozen one no_row_reduction); the report of the cold run's tables
    names both, norms first."""
    cache, cold_dir, warm_dir = (tmp_path / d for d in ("cache", "cold", "warm"))
    env = {**os.environ, "TORCH_LOGS": "inductor_ext", "TRITON_INTERPRET": "1",
           "TORCHINDUCTOR_CACHE_DIR": str(cache),
           "TORCHINDUCTOR_ENABLED_METRIC_TABLES": "mix_order_fusion,mix_order_reject"}
    lines = []
    for cwd in (cold_dir, warm_dir):
        cwd.mkdir()
        res = subprocess.run([sys.executable, "-c", _FROZEN_EMBEDDING_SCRIPT], env=env,
                             cwd=cwd, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-2000:]
        lines.append([ln[ln.index("inductor_ext: "):] for ln in res.stderr.splitlines()
                      if "inductor_ext: " in ln])
    summary = ("graph 0/0 backward: norms 2 found, 1 fused, 1 declined; fused: out_norm; "
               "declined (no_row_reduction): embed_norm")
    cold, warm = lines
    assert len(cold) == 1 and cold[0].startswith(f"inductor_ext: {summary}"), cold
    assert len(warm) == 1 and warm[0].startswith(
        f"inductor_ext: FX graph cache replay of {summary}"), warm
    assert not list(warm_dir.glob("*.csv"))  # a hit writes no tables, as the line says
    tables = sorted(str(p) for p in cold_dir.glob("metric_table_mix_order_*.csv"))
    report = subprocess.run([sys.executable, "-m", "inductor_ext.report", *tables], env=env,
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    head = report.stdout.splitlines()[:4]
    assert head[0] == "norms: 2 in 1 graph, 1 fused, 1 declined", head
    rows = {ln.split()[0]: ln.split(None, 3)[1:] for ln in head[2:]}
    assert rows["embed_norm"][:2] == ["LayerNorm", "0/0"], rows
    assert "declined: no_row_reduction" in rows["embed_norm"][2], rows
    assert rows["out_norm"][:2] == ["RMSNorm", "0/0"], rows
    assert rows["out_norm"][2].startswith("backward  fused into triton_"), rows


def test_only_graphs_that_tell_the_user_something_log_at_info():
    """A graph with a norm, a fused column, or a pass that could not run logs at INFO; a
    forward graph whose only decisions declined recomputed statistics logs at DEBUG."""
    forward = GraphCoverage("0/0 forward")
    forward.add_declined([], "producer_consumer")
    assert forward.decisions() and not forward.tells_the_user()
    with_norm = GraphCoverage("0/0 backward")
    with_norm.add_declined(["ln"], "not_profitable")
    cpu = GraphCoverage("0/0 backward")
    cpu.add_declined([], "unsupported_backend")
    assert with_norm.tells_the_user() and cpu.tells_the_user()
