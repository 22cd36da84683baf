"""`python -m inductor_ext.report` speaks in norms: one line per norm and graph first, the
declines that are no norm's apart, then the kernels; the chart draws no empty panel; a run
that left no rows is told why (a warm FX-graph cache)."""

import csv
import itertools
import pathlib

import pytest
import torch

from inductor_ext import report
from inductor_ext.metrics import FUSION_TABLE, REJECT_TABLE, TABLE_COLUMNS

K1 = "triton_per_fused_native_layer_norm_backward_sum_0"
K2 = "triton_per_fused_native_layer_norm_backward_sum_1"


def _columns(table: str, classes: bool = True) -> list[str]:
    """The table's columns, with `norm_classes` (added later) or without it (an old table)."""
    cols = [c for c in TABLE_COLUMNS[table] if c != "norm_classes"]
    return [*cols, "norm_classes"] if classes else cols


def _write(folder: pathlib.Path, table: str, rows: list[dict[str, str]],
           classes: bool = True) -> str:
    """A table as Inductor writes it: `model_name`, then our columns, one line per row."""
    cols = _columns(table, classes)
    path = folder / f"metric_table_{table}.csv"
    with open(path, "w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(["model_name", *cols])
        for row in rows:
            out.writerow(["", *(row.get(c, "") for c in cols)])
    return str(path)


def _fused(kernel: str, norms: str, classes: str, graph: str = "0/0 backward",
           **extra: str) -> dict[str, str]:
    return {"graph_id": graph, "kernel_name": kernel, "M": "512", "N": "96",
            "bytes_fused": "600000", "bytes_unfused": "1000000", "norms": norms,
            "norm_classes": classes, "norm_columns": str(2 * len(norms.split())),
            "other_columns": "0", "modules": norms, **extra}


def _declined(reason: str, norms: str = "", classes: str = "", kind: str = "norm",
              graph: str = "0/0 backward", detail: str = "", **extra: str) -> dict[str, str]:
    return {"graph_id": graph, "nodes": "buf1+buf2", "M": "512", "N": "96",
            "reason": reason, "detail": detail, "norms": norms, "norm_classes": classes,
            "kind": kind, "modules": norms, **extra}


def _report(capsys, files: list[str]) -> list[str]:
    assert report.main(files) == 0
    return capsys.readouterr().out.splitlines()


def _norm_line(lines: list[str], norm: str) -> str:
    """The one line of the norms section that names `norm`."""
    section = list(itertools.takewhile(bool, lines))
    [line] = [ln for ln in section if ln.split()[:1] == [norm]]
    return line


@pytest.fixture
def sample(tmp_path) -> list[str]:
    """Two identical LayerNorms fused by two kernels, an RMSNorm declined, and a forward
    graph's reduction that is no norm's, declined."""
    return [
        _write(tmp_path, FUSION_TABLE, [_fused(K1, "blocks.0.ln", "LayerNorm"),
                                        _fused(K2, "blocks.1.ln", "LayerNorm")]),
        _write(tmp_path, REJECT_TABLE, [
            _declined("not_profitable", "final", "RMSNorm",
                      detail="fused 9.0 us vs unfused 7.0 us"),
            _declined("no_shared_input", kind="other", graph="0/0 forward",
                      modules="head", source="model.py:12",
                      detail="no [512, 96] buffer is read by both sides")]),
    ]


def test_norms_come_first_each_named_with_class_graph_and_status(sample, capsys):
    lines = _report(capsys, sample)
    assert lines[0] == "norms: 3 in 1 graph, 2 fused, 1 declined"
    assert lines[1].split() == ["norm", "class", "graph", "status"]
    # Two identical LayerNorms, fused by two kernels: two lines, told apart by module name.
    assert _norm_line(lines, "blocks.0.ln").split() == \
        ["blocks.0.ln", "LayerNorm", "0/0", "backward", "fused", "into", K1]
    assert _norm_line(lines, "blocks.1.ln").split() == \
        ["blocks.1.ln", "LayerNorm", "0/0", "backward", "fused", "into", K2]
    final = _norm_line(lines, "final")
    assert final.split()[:4] == ["final", "RMSNorm", "0/0", "backward"]
    assert final.endswith("declined: not_profitable \u2014 The cost model expects the unfused "
                          "kernels to be faster (fused 9.0 us vs unfused 7.0 us)"), final
    # The norms section is the report's first block: the kernels come after it.
    assert lines.index("") == 5 and lines.index("fused kernels: 2") > 5


def test_declines_that_are_no_norms_have_their_own_section(sample, capsys):
    lines = _report(capsys, sample)
    norms_end = lines.index("")
    assert not any("no_shared_input" in ln or "head" in ln for ln in lines[:norms_end])
    assert lines[norms_end + 1] == "other column reductions declined (not a norm's dw/db): 1"
    other = lines[norms_end + 2]
    assert other.split()[:4] == ["0/0", "forward", "no_shared_input", "x1"], other
    assert "The shapes match" in other and other.endswith("[head]"), other
    assert lines[norms_end + 3] == "" and lines[norms_end + 4] == "fused kernels: 2"


def test_a_norm_appears_once_per_graph_however_many_rows_name_it(tmp_path, capsys):
    """A norm whose dw and db two kernels fuse is one line naming both; the same module in
    a second graph is a line of its own; a norm with one column declined is declined, its
    other column's kernel said; a long detail stays in the table."""
    files = [
        _write(tmp_path, FUSION_TABLE, [
            _fused(K1, "ln", "LayerNorm"), _fused(K2, "ln", "LayerNorm"),
            _fused(K1, "ln", "LayerNorm", graph="1/0 backward"),
            _fused(K2, "norm2", "LayerNorm")]),
        _write(tmp_path, REJECT_TABLE, [
            _declined("producer_consumer", "norm2", "LayerNorm", detail="x" * 200)]),
    ]
    lines = _report(capsys, files)
    assert lines[0] == "norms: 3 in 2 graphs, 2 fused, 1 declined"
    ln = [line.split() for line in lines if line.split()[:1] == ["ln"]]
    assert ln == [["ln", "LayerNorm", "0/0", "backward", "fused", "into", f"{K1},", K2],
                  ["ln", "LayerNorm", "1/0", "backward", "fused", "into", K1]]
    norm2 = _norm_line(lines, "norm2")
    assert "declined: producer_consumer \u2014 A path connects" in norm2, norm2
    assert norm2.endswith(f"; other columns fused into {K2}") and "xxx" not in norm2, norm2


def test_a_table_without_norm_classes_still_reads(tmp_path, capsys):
    """Tables written before `norm_classes` existed: the class shows as "?"."""
    files = [_write(tmp_path, FUSION_TABLE, [_fused(K1, "ln", "")], classes=False),
             _write(tmp_path, REJECT_TABLE, [_declined("dynamic_n", "final")], classes=False)]
    lines = _report(capsys, files)
    assert _norm_line(lines, "ln").split()[:2] == ["ln", "?"]
    assert "declined: dynamic_n \u2014 The row length is symbolic" in _norm_line(lines, "final")


def test_no_tables_or_no_rows_names_the_warm_cache(tmp_path, capsys, monkeypatch):
    """The likely cause of no rows, plainly: tables are compile-time records, which a warm
    FX-graph cache does not write."""
    monkeypatch.chdir(tmp_path)
    assert report.main(["metric_table_mix_order_*.csv"]) == 2  # the shell matched nothing
    [err] = capsys.readouterr().err.splitlines()
    assert "metric_table_mix_order_*.csv: no file matches this pattern" in err
    for says in ("warm FX-graph cache", "TORCHINDUCTOR_FORCE_DISABLE_CACHES=1",
                 "force_disable_caches=True",
                 "TORCHINDUCTOR_ENABLED_METRIC_TABLES=mix_order_fusion,mix_order_reject"):
        assert says in err, err
    files = [_write(tmp_path, FUSION_TABLE, []), _write(tmp_path, REJECT_TABLE, [])]
    assert report.main(files) == 2  # headers only
    [err] = capsys.readouterr().err.splitlines()
    assert f"{files[0]}, {files[1]}: no rows; " in err and "warm FX-graph cache" in err, err


# -- the chart ----------------------------------------------------------------------------
@pytest.fixture
def plt():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot

    yield matplotlib.pyplot
    matplotlib.pyplot.close("all")


def _assert_drawn(fig) -> None:
    """Every panel has bars with length, and tick labels that do not overlap."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        assert any(p.get_width() > 0 for p in ax.patches), ax.get_label()
        labels = [t for t in ax.get_yticklabels() if t.get_text()]
        assert labels, ax.get_label()
        boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.y0)
        assert all(a.y1 <= b.y0 + 0.5 for a, b in zip(boxes, boxes[1:])), ax.get_label()


def test_chart_norms_by_module_without_empty_panels(plt):
    """No declines: no declines panel. Twelve numbered layers' norms are one row per
    module of the layer (`model.layers.{0..11}.x`); the kernels' bytes are a second
    panel."""
    fused = [_fused(f"triton_per_fused_{i}", f"model.layers.{i}.input_layernorm "
                    f"model.layers.{i}.post_attention_layernorm", "LlamaRMSNorm LlamaRMSNorm")
             for i in range(12)]
    fig = report.figure({FUSION_TABLE: fused})
    assert [ax.get_label() for ax in fig.axes] == ["norms", "kernels"]
    _assert_drawn(fig)
    norms = fig.axes[0]
    assert [t.get_text() for t in norms.get_yticklabels()] == [
        "model.layers.{0..11}.input_layernorm (LlamaRMSNorm)",
        "model.layers.{0..11}.post_attention_layernorm (LlamaRMSNorm)"]
    assert [p.get_width() for p in norms.patches] == [12, 12]
    assert [t.get_text() for t in norms.get_legend().get_texts()] == ["fused"]


def test_chart_colours_norms_by_reason_and_cuts_long_names(plt):
    """Declined layers and a long module name: the declined layers are a row of their own,
    coloured by reason; the long name keeps its first and last parts. Declines with no
    norm get their own panel; no fused kernel, no kernels panel."""
    long = "encoder.transformer_blocks_with_a_very_long_container_name.final_layer_norm"
    rejected = [_declined("not_profitable", f"layers.{i}.norm", "LayerNorm") for i in (0, 3)]
    rejected += [_declined("extern_norm", long, "LayerNorm"),
                 _declined("no_shared_input", kind="other", graph="0/0 forward")]
    fused = [_fused(f"k{i}", f"layers.{i}.norm", "LayerNorm") for i in (1, 2, 4)]
    fig = report.figure({FUSION_TABLE: fused, REJECT_TABLE: rejected})
    assert [ax.get_label() for ax in fig.axes] == ["norms", "other", "kernels"]
    _assert_drawn(fig)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    # One row per name and status: the declined layers show by their numbers.
    assert labels == ["encoder.\u2026.final_layer_norm (LayerNorm)",
                      "layers.{1,2,4}.norm (LayerNorm)", "layers.{0,3}.norm (LayerNorm)"]
    assert [p.get_width() for p in fig.axes[0].patches] == [3, 1, 2]  # fused first
    assert report.short_label("a." + "b" * 40 + ".c" * 10) == "a.\u2026" + ".c" * 10
    assert report.short_label(["m", "layers", "{0..4,6..11}", "x" * 60]).startswith("\u2026")
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["fused", "declined: extern_norm", "declined: not_profitable"]
    fig = report.figure({REJECT_TABLE: rejected})
    assert [ax.get_label() for ax in fig.axes] == ["norms", "other"]
    fig = report.figure({REJECT_TABLE: rejected[:2]})
    assert [ax.get_label() for ax in fig.axes] == ["norms"]


def test_plot_writes_the_chart(sample, tmp_path, capsys, plt):
    chart = tmp_path / "chart.png"
    assert report.main([*sample, "--plot", str(chart)]) == 0
    assert chart.stat().st_size > 1000
    assert capsys.readouterr().out.splitlines()[-1] == f"chart written to {chart}"


# -- from a real compile ------------------------------------------------------------------
class _TwoLayerNorms(torch.nn.Module):
    """Two identical LayerNorms, a Linear between them."""

    def __init__(self, n: int = 32) -> None:
        super().__init__()
        self.first_norm = torch.nn.LayerNorm(n)
        self.proj = torch.nn.Linear(n, n)
        self.second_norm = torch.nn.LayerNorm(n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second_norm(self.proj(self.first_norm(x)))


def test_report_of_a_compiled_model_names_both_norms(plugin, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    model = _TwoLayerNorms()
    x = torch.randn(64, 32, requires_grad=True)
    with torch._inductor.config.patch(enabled_metric_tables=f"{FUSION_TABLE},{REJECT_TABLE}"):
        torch.compile(model)(x).sum().backward()
    files = sorted(str(p) for p in tmp_path.glob("metric_table_mix_order_*.csv"))
    lines = _report(capsys, files)
    assert lines[0] == "norms: 2 in 1 graph, 2 fused, 0 declined", lines
    kernels = []
    for norm in ("first_norm", "second_norm"):
        words = _norm_line(lines, norm).split()
        assert words[1] in ("LayerNorm", "?") and words[3] == "backward", words
        assert words[4:6] == ["fused", "into"] and words[6].startswith("triton_"), words
        kernels.append(words[6])
    assert kernels[0] != kernels[1]



def test_a_reader_that_stops_early_ends_it_quietly(tmp_path):
    """`report ... | head -1`: exit 0, no BrokenPipeError traceback (2,000 norms: more
    output than the pipe's buffer holds)."""
    import subprocess
    import sys

    table = _write(tmp_path, FUSION_TABLE, [_fused(f"k{i}", f"blocks.{i}.ln", "LayerNorm")
                                             for i in range(2000)])
    res = subprocess.run(
        f"{sys.executable} -m inductor_ext.report {table} | head -1; exit ${{PIPESTATUS[0]}}",
        shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("norms: 2000 in 1 graph")
    assert "Traceback" not in res.stderr and "BrokenPipeError" not in res.stderr
