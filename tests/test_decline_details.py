"""Declines in the user's terms: a detail names the modules and roles (a norm's dx, its
dw/db, the kernel between them) before Inductor's buffer and op names; a norm right after
a frozen embedding is recorded `no_row_reduction`; `config.exclude_modules` keeps the norms
it names unfused, recorded `excluded_by_config`."""

import logging
import os
import re
import types

import pytest
import torch
from torch import nn

import inductor_ext
from inductor_ext import diagnostics, report
from inductor_ext.groups.attribution import Attribution
from inductor_ext.scheduler import hook
from tests.support import tables as tables_
from tests.support.reference import assert_close


def _norms(rows: list[dict[str, str]]) -> dict[str, str]:
    """Each norm a table row names -> that row's reason ('' for the fusion table)."""
    return {n: row.get("reason", "") for row in rows for n in row["norms"].split()}


class FrozenEmbedding(nn.Module):
    """A frozen embedding -> norm -> Linear (residual) -> norm: the first norm's input needs
    no gradient, so its backward is dw/db alone, and they depend on the second norm's dx
    through the Linear's matmul."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, 32)
        self.embed.weight.requires_grad_(False)
        self.norm = nn.LayerNorm(32)
        self.proj = nn.Linear(32, 32)
        self.norm2 = nn.LayerNorm(32)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        return self.norm2(h + self.proj(self.norm(h)))


def _grads(model: nn.Module, fn, ids: torch.Tensor) -> list[torch.Tensor]:
    """The parameters' gradients of a fixed random projection of the output (the sum of a
    layer norm's squares is constant, its gradient rounding noise)."""
    model.zero_grad()
    out = fn(ids)
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    (out * weights).sum().backward()
    return [p.grad.clone() for p in model.parameters() if p.requires_grad]


def test_norm_after_a_frozen_embedding_has_no_row_reduction(plugin, tables):
    """Its dw/db reach the other norm's dx only through the Linear between (a path, once
    `producer_consumer`); what the user needs to know is that it has no dx of its own."""
    model = FrozenEmbedding()
    ids = torch.randint(0, 100, (4, 16))
    eager = _grads(model, model, ids)
    got = _grads(model, torch.compile(model), ids)
    assert_close(got, eager)
    assert set(_norms(tables_.rows("mix_order_fusion"))) == {"norm2"}
    assert _norms(tables_.rows("mix_order_reject")) == {"norm": "no_row_reduction"}
    metrics = inductor_ext.metrics
    assert metrics.norms == {"found": 2, "fused": 1, "declined": 1}
    assert metrics.norms_declined == {"no_row_reduction": 1}
    assert metrics.mix_order_kernels == 1


def test_a_decline_names_modules_before_internal_names(plugin, tables):
    """The frozen norm's dw is declined against the other norm's dx: the detail says which
    module's gradient needs which, through which module's kernel, then the buffers."""
    model = FrozenEmbedding()
    _grads(model, torch.compile(model), torch.randint(0, 100, (4, 16)))
    details = [row["detail"] for row in tables_.rows("mix_order_reject") if row["norms"] == "norm"]
    assert details and all(d.startswith("the dw/db of norm (buf") for d in details), details
    path = [d for d in details if "needs the dx" in d]
    assert len(path) == 1, details
    found = re.search(r"the dw/db of norm \((buf\d+)\) needs the dx of norm2 \((op[\w]+)\) "
                      r"through a kernel of proj \((\w+)\)", path[0])
    assert found, path[0]
    # the internal names come after the user's, in parentheses
    assert path[0].index("norm2") < path[0].index(found.group(2))


def test_without_modules_a_decline_names_source_lines(plugin, tables):
    """A plain function has no modules: its reductions are named by their source lines."""
    def fn(x, w, dy):
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return x * rstd * w, (dy * x * rstd.sum()).sum(0)

    torch.compile(fn)(torch.randn(64, 40), torch.randn(40), torch.randn(64, 40))
    (row,) = tables_.rows("mix_order_reject")
    assert row["reason"] == "producer_consumer"
    here = os.path.basename(__file__)
    assert re.match(rf"a column sum at {here}:\d+ \(buf\d+\) needs a row reduction at "
                    rf"{here}:\d+ \(op\w+\) through a kernel at {here}:\d+ \(op\d+\)",
                    row["detail"]), row["detail"]


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(32)
        self.proj = nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.norm(x))


class TwoBlocks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Block(), Block()])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


@pytest.mark.parametrize("patterns", [["layers.0.*"], ["*.0.norm", "nothing.*"]])
def test_excluded_modules_stay_unfused(plugin, tables, ext_records, monkeypatch, patterns):
    """One of two norms excluded: the other fuses, the excluded one is declined with its
    own reason, the pattern that matched it first in the detail, and the counters agree
    with the tables. A pattern that matches no norm of the graph is warned about."""
    monkeypatch.setattr(diagnostics, "warned", set())
    model = TwoBlocks()
    x = torch.randn(64, 32, requires_grad=True)
    eager = _grads(model, model, x)
    with inductor_ext.config.patch(exclude_modules=patterns):
        got = _grads(model, torch.compile(model), x)
    assert_close(got, eager)
    assert set(_norms(tables_.rows("mix_order_fusion"))) == {"layers.1.norm"}
    rejected = tables_.rows("mix_order_reject")
    assert _norms(rejected) == {"layers.0.norm": "excluded_by_config"}
    (row,) = [r for r in rejected if r["reason"] == "excluded_by_config"]
    assert row["detail"].startswith(
        f"layers.0.norm matches config.exclude_modules {patterns[0]!r}; "), row["detail"]
    assert re.search(r"; the dx of layers\.0\.norm \(op\w+\) with the dw/db of layers\.0\.norm "
                     r"\(buf\d+, buf\d+\) stays Inductor's$", row["detail"]), row["detail"]
    warned = [r.getMessage() for r in ext_records if r.levelno == logging.WARNING]
    assert [w for w in warned if "matches none" in w] == (
        ["inductor_ext: config.exclude_modules pattern 'nothing.*' matches none of the 2 norms "
         f"of graph {row['graph_id']} (layers.{{0,1}}.norm): names are module paths relative "
         "to the compiled frame, so torch.compile(model) names "
         "model.layers[1].input_layernorm 'layers.1.input_layernorm' (warned once per "
         "pattern)"] if "nothing.*" in patterns else []), warned
    metrics = inductor_ext.metrics
    assert metrics.mix_order_kernels == 1
    assert metrics.rejected_pairs == {"excluded_by_config": 1}
    assert metrics.norms == {"found": 2, "fused": 1, "declined": 1}
    assert metrics.norms_declined == {"excluded_by_config": 1}


def test_no_pattern_matches_every_norm_fuses(plugin, tables):
    model = TwoBlocks()
    with inductor_ext.config.patch(exclude_modules=["layers.2.*", "norm"]):
        _grads(model, torch.compile(model), torch.randn(64, 32, requires_grad=True))
    assert inductor_ext.metrics.mix_order_kernels == 2
    assert not inductor_ext.metrics.rejected_pairs


class EmbedNorm(nn.Module):
    """An embedding's LayerNorm before a layer's RMSNorm (the two dx Inductor computes in
    one row kernel: one group) and a final RMSNorm, as in issue 63."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(32, 32)
        self.embed_norm = nn.LayerNorm(32)
        self.layers = nn.ModuleList([nn.ModuleDict({"input_layernorm": nn.RMSNorm(32),
                                                    "proj": nn.Linear(32, 32)})])
        self.norm = nn.RMSNorm(32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed_norm(self.embed(x))
        for layer in self.layers:
            x = x + layer["proj"](layer["input_layernorm"](x))
        return self.norm(x)


def _lines(records: list, level: int, text: str) -> list[str]:
    return [r.getMessage() for r in records if r.levelno == level and text in r.getMessage()]


def test_an_excluded_group_names_the_norm_that_matched_and_the_pattern(
        plugin, tables, ext_records, capsys, monkeypatch):
    """Issue 63: excluding `embed_norm` declined `layers.0.input_layernorm and 1 more`. The
    group's detail, the INFO line and the report's line of each of its norms name the
    norm that matched and the pattern. `model.layers.0.*`, as README once wrote it,
    matches nothing in a compile of `model` (names are relative to the compiled frame):
    warned once, however many graphs compile, with the pattern that would match."""
    monkeypatch.setattr(diagnostics, "warned", set())
    model = EmbedNorm()
    x = torch.randn(64, 32, requires_grad=True)
    eager = _grads(model, model, x)
    with inductor_ext.config.patch(exclude_modules=["embed_norm", "model.layers.0.*"]):
        got = _grads(model, torch.compile(model), x)
    assert_close(got, eager)
    (row,) = [r for r in tables_.rows("mix_order_reject") if r["reason"] == "excluded_by_config"]
    group = row["norms"].split()
    assert group[0] == "embed_norm" and "layers.0.input_layernorm" in group, row
    assert row["detail"].startswith(
        "embed_norm matches config.exclude_modules 'embed_norm'; the dx of "), row["detail"]
    assert "norm" in _norms(tables_.rows("mix_order_fusion"))

    [line] = _lines(ext_records, logging.INFO, "backward: norms")
    assert "declined (excluded_by_config): embed_norm" in line, line
    assert "; config.exclude_modules 'embed_norm' matched embed_norm;" in line, line
    assert report.main(["metric_table_mix_order_reject.csv",
                        "metric_table_mix_order_fusion.csv"]) == 0
    out = capsys.readouterr().out
    for norm in group:
        [status] = [ln for ln in out.splitlines() if ln.split()[:1] == [norm]]
        assert status.endswith("declined: excluded_by_config \u2014 A norm of the group "
                               "matches an opt-out pattern (embed_norm matches "
                               "config.exclude_modules 'embed_norm')"), status

    warning = ("inductor_ext: config.exclude_modules pattern 'model.layers.0.*' matches none "
               "of the 3 norms of graph ")
    [first] = _lines(ext_records, logging.WARNING, warning)
    assert "names are module paths relative to the compiled frame" in first, first
    assert first.endswith("; 'layers.0.*' would match layers.0.input_layernorm (warned once "
                          "per pattern)"), first
    assert not _lines(ext_records, logging.WARNING, "'embed_norm' matches none")
    torch._dynamo.reset()  # a second compile of the same graph: no second warning
    with inductor_ext.config.patch(exclude_modules=["embed_norm", "model.layers.0.*"]):
        _grads(model, torch.compile(model), x)
    assert len(_lines(ext_records, logging.WARNING, warning)) == 1
    assert len(_lines(ext_records, logging.DEBUG, warning)) == 1  # the repeat, at debug


class NormsApart(nn.Module):
    """A LayerNorm and an RMSNorm with a Linear between: two groups."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(32, 32)
        self.ln = nn.LayerNorm(32)
        self.mid = nn.Linear(32, 32)
        self.rms = nn.RMSNorm(32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rms(self.mid(self.ln(self.proj(x))))


def test_exclude_norm_classes_leaves_one_kind_of_norm_to_inductor(
        plugin, tables, ext_records, monkeypatch):
    """`exclude_norm_classes=["LayerNorm"]` (Liger's `rms_norm=False`, by class): the RMSNorm
    fuses, the LayerNorm is declined `excluded_by_config` naming its class and the
    pattern; a class pattern matching no norm's class is warned about, with the classes."""
    monkeypatch.setattr(diagnostics, "warned", set())
    model = NormsApart()
    x = torch.randn(64, 32, requires_grad=True)
    eager = _grads(model, model, x)
    with inductor_ext.config.patch(exclude_norm_classes=["LayerNorm", "RMSnorm"]):
        got = _grads(model, torch.compile(model), x)
    assert_close(got, eager)
    assert set(_norms(tables_.rows("mix_order_fusion"))) == {"rms"}
    (row,) = tables_.rows("mix_order_reject")
    assert (row["reason"], row["norms"], row["norm_classes"]) == \
        ("excluded_by_config", "ln", "LayerNorm")
    assert row["detail"].startswith(
        "ln (LayerNorm) matches config.exclude_norm_classes 'LayerNorm'; "), row["detail"]
    metrics = inductor_ext.metrics
    assert metrics.norms == {"found": 2, "fused": 1, "declined": 1}
    assert metrics.norms_declined == {"excluded_by_config": 1}
    [line] = _lines(ext_records, logging.INFO, "backward: norms")
    assert "fused: rms; declined (excluded_by_config): ln; config.exclude_norm_classes " \
        "'LayerNorm' matched ln;" in line, line
    [warned] = _lines(ext_records, logging.WARNING, "matches")
    assert warned.startswith("inductor_ext: config.exclude_norm_classes pattern 'RMSnorm' "
                             "matches the class of none of the 2 norms of graph "), warned
    assert "(classes: LayerNorm, RMSNorm)" in warned, warned


@pytest.mark.parametrize("modules,classes,matched", [
    ([], ["LayerNorm"], {"m.ln": "config.exclude_norm_classes 'LayerNorm'"}),
    ([], ["*RMSNorm"], {"m.rms": "config.exclude_norm_classes '*RMSNorm'",
                        "m.q_norm": "config.exclude_norm_classes '*RMSNorm'"}),
    ([], ["RMSNorm"], {}),  # a whole class name: LlamaRMSNorm is not RMSNorm
    (["*.rms"], ["*RMSNorm"], {"m.rms": "config.exclude_modules '*.rms'",
                               "m.q_norm": "config.exclude_norm_classes '*RMSNorm'"}),
    (["m.*"], [], {n: "config.exclude_modules 'm.*'" for n in ("m.ln", "m.rms", "m.q_norm",
                                                               "m.py:3")}),
])
def test_which_pattern_excludes_which_norm(modules, classes, matched):
    """Names before classes, the first pattern that matches; a norm of unknown class (by
    its source line) matches no class pattern."""
    attribution = Attribution(norms=["m.ln", "m.rms", "m.q_norm", "m.py:3"], modules=[],
                              sources=[], classes={"m.ln": "LayerNorm", "m.rms": "LlamaRMSNorm",
                                                   "m.q_norm": "Qwen3RMSNorm"})
    cand = types.SimpleNamespace(attribution=attribution)
    with inductor_ext.config.patch(exclude_modules=modules, exclude_norm_classes=classes):
        assert hook.excluded_norms(cand) == matched  # type: ignore[arg-type]
