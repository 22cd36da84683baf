"""Metric tables, counters across the FX graph cache, the log and the report."""

import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch
import torch._inductor.config as inductor_config
from torch._dynamo.utils import counters

import inductor_ext
from inductor_ext import report
from inductor_ext.metrics import TABLE_COLUMNS
from tests.support import tables as tables_
from tests.support.reference import layer_norm, rms_backward
from tests.support.tuning import tuned


def _inputs(M=64, N=40):
    return torch.randn(M, N), torch.randn(N), torch.randn(M, N), torch.rand(M, 1) + 0.5






def test_fusion_row(plugin, tables):
    torch.compile(rms_backward)(*_inputs())
    header, rows = tables_.read("mix_order_fusion")
    assert header == ["model_name", *TABLE_COLUMNS["mix_order_fusion"]]
    assert len(rows) == 1
    row = rows[0]
    assert (row["M"], row["N"]) == ("64", "40")
    assert row["input_dtypes"] == "float32"
    assert row["num_partials"] == "1" and row["target"] == "cuda"
    assert os.path.exists(row["kernel_path"])
    assert row["kernel_name"] in open(row["kernel_path"]).read()
    assert int(row["bytes_unfused"]) > 0 and int(row["workspace_bytes"]) > 0
    assert int(row["programs"]) * int(row["split_size"]) >= 64
    # The cost model fuses it, and its times are recorded for a fused group too.
    assert row["model_fuses"] == "True"
    assert re.fullmatch(r"fused [\d.]+ us vs unfused [\d.]+ us, upstream mix-order "
                        r"(declined|[\d.]+ us)", row["model_detail"]), row["model_detail"]


def test_layer_norm_row_has_two_partials_and_bf16(plugin, tables):
    N = 40
    x = torch.randn(64, N, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(N, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(N, dtype=torch.bfloat16, requires_grad=True)
    y = torch.compile(layer_norm)(x, w, b)
    torch.autograd.grad(y, (x, w, b), torch.randn_like(x))
    _, rows = tables_.read("mix_order_fusion")
    assert len(rows) == 1
    assert rows[0]["num_partials"] == "2"
    assert "bfloat16" in rows[0]["input_dtypes"].split()


def test_reject_rows(plugin, tables):
    def producer_consumer(x, w, dy):
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return x * rstd * w, (dy * x * rstd.flip(0)).sum(0)

    def argmax_pair(a, b):
        v = a * b
        return v.sum(1), v.sum(0), v.argmax(0)

    x, w, dy, _ = _inputs()
    torch.compile(producer_consumer)(x, w, dy)
    torch.compile(argmax_pair)(torch.randn(33, 29), torch.randn(33, 29))
    # The cost model fuses a 64x40 group (one launch saved); asking for more rows per
    # program than it has makes the model decline it.
    with inductor_ext.config.patch(always_fuse=False), tuned("cuda", min_rows_per_program=65):
        torch._dynamo.reset()
        torch.compile(rms_backward)(*_inputs())
    header, rows = tables_.read("mix_order_reject")
    assert header == ["model_name", *TABLE_COLUMNS["mix_order_reject"]]
    reasons = [r["reason"] for r in rows]
    assert "producer_consumer" in reasons
    flipped = next(r for r in rows if r["reason"] == "producer_consumer")
    # why the row's rstd cannot be handed on: the column reads it at the flipped row
    assert "at [63 - mo_r0]" in flipped["detail"] and "writes" in flipped["detail"]
    assert "unsupported_reduction_type" in reasons
    assert "not_profitable" in reasons
    small = next(r for r in rows if r["reason"] == "not_profitable")
    assert (small["M"], small["N"]) == ("64", "40")
    assert "only 64 rows per program" in small["detail"]
    assert inductor_ext.metrics.rejected_pairs["not_profitable"] == 1


def test_no_table_written_when_not_enabled(plugin, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch.compile(rms_backward)(*_inputs())
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert not list(tmp_path.glob("metric_table_*.csv"))


def test_enabling_after_inductor_parsed_the_setting(plugin, tmp_path, monkeypatch):
    from torch._inductor import metrics as inductor_metrics

    monkeypatch.chdir(tmp_path)
    assert not inductor_metrics.is_metric_table_enabled("mix_order_fusion")  # parsed, cached
    with inductor_config.patch(enabled_metric_tables="mix_order_fusion"):
        torch.compile(rms_backward)(*_inputs())
    assert len(tables_.read("mix_order_fusion")[1]) == 1


def test_counters_survive_a_warm_fx_graph_cache(plugin, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))

    def fused_and_declined(x, w, dy, rstd):
        dx, dw = rms_backward(x, w, dy, rstd)
        v = x * dy
        return dx, dw, v.sum(1), v.argmax(0)

    args = _inputs()
    with inductor_config.patch(fx_graph_cache=True, force_disable_caches=False):
        torch.compile(fused_and_declined)(*args)
        cold = (inductor_ext.metrics.mix_order_kernels, inductor_ext.metrics.rejected_pairs)
        hits = counters["inductor"]["fxgraph_cache_hit"]
        torch._dynamo.reset()
        inductor_ext.metrics.reset()
        torch.compile(fused_and_declined)(*args)
        warm = (inductor_ext.metrics.mix_order_kernels, inductor_ext.metrics.rejected_pairs)
        assert counters["inductor"]["fxgraph_cache_hit"] == hits + 1
    assert cold[0] >= 1 and sum(cold[1].values()) >= 1
    assert warm == cold


def test_report_summary_and_plot(plugin, tables, capsys):
    torch.compile(rms_backward)(*_inputs())
    torch.compile(lambda a, b: ((a * b).sum(1), (a * b).sum(0), (a * b).argmax(0)))(
        torch.randn(33, 29), torch.randn(33, 29))
    files = ["metric_table_mix_order_fusion.csv", "metric_table_mix_order_reject.csv"]
    argv = [*files]
    plot = pytest.importorskip("matplotlib") and "chart.png"
    argv += ["--plot", plot]
    assert report.main(argv) == 0
    out = capsys.readouterr().out
    assert "fused kernels: 2" in out
    assert "declined candidates: 1" in out
    assert "unsupported_reduction_type" in out
    assert "bytes saved" in out and "kernel_name" in out
    assert os.path.getsize("chart.png") > 1000


def test_report_rejects_other_csv(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not an inductor_ext metric table"):
        report.read_tables([str(bad)])


def test_torch_logs_prints_decisions(tmp_path):
    code = textwrap.dedent("""
        import torch, inductor_ext
        from inductor_ext.interpreter import cpu_interpret
        from tests.support.tuning import tuned
        from tests.support.reference import rms_backward
        args = torch.randn(64, 40), torch.randn(40), torch.randn(64, 40), torch.rand(64, 1)
        with cpu_interpret(), torch._inductor.config.patch(inductor_ext.options()):
            with tuned("cuda", min_rows_per_program=65):  # the cost model declines
                torch.compile(rms_backward)(*args)
            with inductor_ext.config.patch(always_fuse=True):
                torch._dynamo.reset()
                torch.compile(rms_backward)(*args)
    """)
    env = {**os.environ, "TORCH_LOGS": "+inductor_ext", "TRITON_INTERPRET": "1",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = [ln for ln in res.stderr.splitlines() if "inductor_ext" in ln]
    # One decision, one line, then the graph's summary: a decline, then a fusion (two
    # handlers printed each twice).
    assert len(lines) == 4, lines
    assert "declined" in lines[0] and "not_profitable" in lines[0], lines
    assert "other columns: 1 declined (not_profitable 1)" in lines[1], lines
    assert "fused" in lines[2] and "M=64" in lines[2], lines
    assert "norms 0 found" in lines[3] and "other columns: 1 fused" in lines[3], lines


def test_torch_logs_a_fused_kernel_and_a_cache_hit(tmp_path):
    """A cold compile logs its one decision and the graph's summary; a warm FX-graph cache,
    which replays the counters without running the pass, logs the summary it replayed."""
    code = textwrap.dedent("""
        import torch, inductor_ext
        from inductor_ext.interpreter import cpu_interpret
        from tests.support.reference import rms_backward
        args = torch.randn(64, 40), torch.randn(40), torch.randn(64, 40), torch.rand(64, 1)
        with cpu_interpret(), torch._inductor.config.patch(inductor_ext.options()), \\
                torch._inductor.config.patch(fx_graph_cache=True, force_disable_caches=False), \\
                inductor_ext.config.patch(always_fuse=True):
            torch.compile(rms_backward)(*args)
        print("kernels", inductor_ext.metrics.mix_order_kernels)
    """)
    # The FX-graph cache on whatever the environment says (the variable overrides config).
    env = {**os.environ, "TORCH_LOGS": "+inductor_ext", "TRITON_INTERPRET": "1",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1"}
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=600) for _ in range(2)]
    for res in runs:
        assert res.returncode == 0, res.stderr[-2000:]
        assert "kernels 1" in res.stdout
    cold, warm = ([ln for ln in r.stderr.splitlines() if "inductor_ext" in ln] for r in runs)
    assert len(cold) == 2 and "inductor_ext: fused" in cold[0], cold
    summary = cold[1].split("inductor_ext: ", 1)[1]
    assert summary.startswith("graph ") and "other columns: 1 fused" in summary, cold
    assert len(warm) == 1 and f"inductor_ext: FX graph cache replay of {summary} (" in warm[0]
    assert "TORCHINDUCTOR_FORCE_DISABLE_CACHES=1" in warm[0], warm


@pytest.mark.parametrize("content", [None, "a,b\n1,2\n", "", b"\x7fELF\xd0\x00"])
def test_report_bad_input_is_one_line_and_nonzero(tmp_path, capsys, content):
    """A missing file (a shell pattern that matched nothing), a non-table CSV, an empty or
    binary file: one error line naming the file, exit 2, no traceback."""
    path = tmp_path / ("metric_table_mix_order_*.csv" if content is None else "t.csv")
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    assert report.main([str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("python -m inductor_ext.report: error: ")
    assert str(path) in err[0]
    if content is None:  # the pattern matched nothing: likely no run wrote the table
        assert "no file matches this pattern" in err[0], err
    if content in (None, ""):
        assert "warm FX-graph cache" in err[0] and "FORCE_DISABLE_CACHES=1" in err[0], err
        assert "TORCHINDUCTOR_ENABLED_METRIC_TABLES" in err[0], err


def test_report_on_a_missing_file_exits_without_traceback():
    res = subprocess.run([sys.executable, "-m", "inductor_ext.report", "/no/such.csv"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0
    err = res.stderr.strip()
    assert err.startswith("python -m inductor_ext.report: error: /no/such.csv: no such file; "
                          "unless the path is misspelt, the tables are compile-time records"), err
    assert "\n" not in err and "warm FX-graph cache" in err


def _fusion_row(i: int, name: str, graph: str) -> dict[str, str]:
    return {"kernel_name": name, "graph_id": graph, "M": "512", "N": str(64 + i),
            "bytes_fused": "1000", "bytes_unfused": "3000"}


def test_chart_labels_are_whole_words_distinct_and_counts_integral():
    """Kernel names repeat across graphs and run long: each bar gets a distinct label cut at
    a word boundary; the decline axis counts in whole numbers."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    long = "triton_per_fused_native_layer_norm_native_layer_norm_backward_mul_sum_0"
    fused = [_fusion_row(i, long, g) for i, g in enumerate(["0/0", "1/0", "1/0"])]
    labels = report.kernel_labels(fused)
    assert len(set(labels)) == 3
    assert labels[0].startswith("#1 [0/0] 512x64 fused_native_layer_norm")
    for label in labels:
        name = label.split(" ", 3)[3]
        assert name.endswith("\u2026")
        assert f"triton_per_{name[:-1]}_" in long  # cut before an underscore: no half words
    assert report.short_kernel_name("triton_poi_fused_add_0") == "fused_add_0"
    rejects = [{"reason": r} for r in ["not_profitable"] * 3 + ["producer_consumer"]]
    fig = report.figure({inductor_ext.metrics.FUSION_TABLE: fused,
                         inductor_ext.metrics.REJECT_TABLE: rejects})
    panels = {ax.get_label(): ax for ax in fig.axes}
    assert set(panels) == {"other", "kernels"}  # no norms named: no norms panel
    counts = panels["other"].get_xticks()
    assert all(float(t).is_integer() for t in counts)
    assert [t.get_text() for t in panels["kernels"].get_yticklabels()] == labels


def _table_file(path, rows: int = 2) -> str:
    """A fusion table as Inductor writes it: the header, `rows` whole rows, each ending in
    a newline."""
    cols = TABLE_COLUMNS[inductor_ext.metrics.FUSION_TABLE]
    lines = [",".join(["model_name", *cols])]
    for i in range(rows):
        row = {**{c: "" for c in cols}, **_fusion_row(i, f"triton_per_fused_{i}", "0/0"),
               "model_detail": '"fused 3.2 us, vs unfused 8.0 us"'}
        lines.append(",".join(["", *(row[c] for c in cols)]))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("cut, line", [
    # the last row cut to 3 fields
    (lambda text: text[:text.rindex("\n", 0, -1) + 8] + "\n", 3),
    # a cut row, then the whole table again (a run appended to a file cut short)
    (lambda text: text[:text.index("\n", text.index("\n") + 1) + 8] + "\n" + text, 3),
    # cut inside a quoted field
    (lambda text: text[:text.rindex('"fused')] + '"fused 3.2\n', 3),
    # cut in the last field: no end of line
    (lambda text: text[:-1], 3),
])
def test_report_on_a_truncated_table_names_the_file_and_line(tmp_path, capsys, cut, line):
    """A table cut short (a process killed while writing it): one error line naming the
    file and the line, exit 2, no traceback and no summary."""
    path = tmp_path / "metric_table_mix_order_fusion.csv"
    _table_file(path)
    path.write_text(cut(path.read_text()))
    assert report.main([str(path)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"python -m inductor_ext.report: error: {path}, line {line}: "), err
    assert "truncated" in err[0] and captured.out == ""


def test_report_reads_a_file_given_twice_once(tmp_path, capsys, monkeypatch):
    """The same table under its name, another spelling of it and a link to it counts its
    kernels once, with a note per repeat; two distinct files both count."""
    monkeypatch.chdir(tmp_path)
    path = _table_file(tmp_path / "metric_table_mix_order_fusion.csv")
    (tmp_path / "link.csv").symlink_to(path)
    assert report.main([path, "./metric_table_mix_order_fusion.csv", "link.csv", path]) == 0
    captured = capsys.readouterr()
    assert "fused kernels: 2" in captured.out
    notes = captured.err.strip().splitlines()
    assert len(notes) == 3 and all(n.startswith("python -m inductor_ext.report: note: ")
                                   for n in notes)
    assert f"link.csv: given twice (as {path}); read once" in notes[1]
    assert notes[2].endswith(f"{path}: given twice; read once, so its rows count once")
    (tmp_path / "other").mkdir()
    other = _table_file(tmp_path / "other" / "metric_table_mix_order_fusion.csv")
    assert report.main([path, other]) == 0
    assert "fused kernels: 4" in capsys.readouterr().out


def test_report_plot_into_a_missing_folder_creates_it(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = _table_file(tmp_path / "t.csv")
    chart = tmp_path / "charts" / "run1" / "report.png"
    assert report.main([path, "--plot", str(chart)]) == 0
    assert chart.stat().st_size > 1000
    assert report.main([path, "--plot", str(tmp_path / "report.nosuchformat")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--plot" in err[0] and "cannot write the chart" in err[0]
