"""Declines in the user's terms: a detail names the modules and roles (a norm's dx, its
dw/db, the kernel between them) before Inductor's buffer and op names; a norm right after
a frozen embedding is recorded `no_row_reduction`; `config.exclude_modules` keeps the norms
it names unfused, recorded `excluded_by_config`."""

import os
import re

import pytest
import torch
from torch import nn

import inductor_ext
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
def test_excluded_modules_stay_unfused(plugin, tables, patterns):
    """One of two norms excluded: the other fuses, the excluded one is declined with its
    own reason, and the counters agree with the tables."""
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
    assert re.match(r"the dx of layers\.0\.norm \(op\w+\) with the dw/db of layers\.0\.norm "
                    r"\(buf\d+, buf\d+\): ", row["detail"]), row["detail"]
    assert "layers.0.norm matches config.exclude_modules" in row["detail"]
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
