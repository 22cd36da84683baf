"""TORCH_TRACE: each decision of the plugin is a structured-trace artifact (inductor_ext.trace)
that tlparse lists beside Inductor's own; with tracing off nothing is built, and a payload
that fails never reaches the compile."""

import json
import logging
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
from torch._logging import _internal as torch_logging

from inductor_ext import metrics, trace
from inductor_ext.metrics import TABLE_COLUMNS
from inductor_ext.reasons import Reason

ROOT = pathlib.Path(__file__).resolve().parents[1]

# A LayerNorm + Linear training step compiled twice: fused (always_fuse), then declined by
# the cost model (a program must get more rows than the 64 there are).
SCRIPT = textwrap.dedent("""
    import torch, inductor_ext
    from inductor_ext.interpreter import cpu_interpret
    from tests.support.tuning import tuned

    model = torch.nn.Sequential(torch.nn.Linear(40, 40), torch.nn.LayerNorm(40))
    x = torch.randn(64, 40)

    def step(m, x):
        m(x).square().sum().backward()

    with cpu_interpret(), torch._inductor.config.patch(inductor_ext.options()):
        with inductor_ext.config.patch(always_fuse=True):
            torch.compile(step)(model, x)
        torch._dynamo.reset()
        with tuned("cuda", min_rows_per_program=65):
            torch.compile(step)(model, x)
    print("kernels", inductor_ext.metrics.mix_order_kernels,
          "declined", dict(inductor_ext.metrics.rejected_pairs))
""")

_ARTIFACT = re.compile(r'\] (\{"artifact": .*\})$')


def _tlparse() -> str:
    """tlparse's binary: the test extras install it beside this interpreter."""
    beside = pathlib.Path(sys.executable).with_name("tlparse")
    found = str(beside) if beside.exists() else shutil.which("tlparse")
    if found is None:
        pytest.fail("tlparse is not installed: install the test extras "
                    "(pip install -e '.[test]'), which include it")
    return found


def _artifacts(log: pathlib.Path) -> list[tuple[str, dict]]:
    """(name, JSON payload) of each of our artifacts in a raw TORCH_TRACE log: a metadata
    line, then the payload's lines, each indented by a tab."""
    out: list[tuple[str, dict]] = []
    lines = log.read_text().splitlines()
    for i, line in enumerate(lines):
        match = _ARTIFACT.search(line)
        if not match:
            continue
        name = json.loads(match.group(1))["artifact"]["name"]
        if not name.startswith("inductor_ext_"):
            continue
        payload = []
        for following in lines[i + 1:]:
            if not following.startswith("\t"):
                break
            payload.append(following[1:])
        out.append((name, json.loads("\n".join(payload))))
    return out


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """The raw trace log of SCRIPT's run, and tlparse's output directory for it."""
    tmp = tmp_path_factory.mktemp("trace")
    env = {"TORCH_TRACE": str(tmp / "raw"), "TRITON_INTERPRET": "1",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp / "cache"), "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
           "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}
    res = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env={**os.environ, **env})
    assert res.returncode == 0, res.stderr[-3000:]
    assert "kernels 1 declined {'not_profitable': 1}" in res.stdout, res.stdout
    logs = sorted((tmp / "raw").glob("*.log"))
    assert len(logs) == 1, logs
    return logs[0], tmp / "tl_out"


def test_trace_log_holds_each_decision(traced):
    log, _ = traced
    found = _artifacts(log)
    names = [name for name, _ in found]
    assert names.count(trace.FUSED) == 1, names
    assert names.count(trace.DECLINED) == 1, names
    assert names.count(trace.GRAPH) == 2, names  # each backward graph's norms

    fused = next(p for n, p in found if n == trace.FUSED)
    assert set(TABLE_COLUMNS[metrics.FUSION_TABLE]) <= set(fused), fused
    assert (fused["M"], fused["N"]) == (64, 40)
    assert fused["kernel_name"] and fused["graph_id"].endswith("backward")
    assert fused["model_fuses"] in (True, False) and "us" in fused["model_detail"]
    assert fused["shape_info"]["N"] == 40  # nested, not JSON text
    assert fused["norms"] == "1" and fused["norm_columns"] == 2  # Sequential's LayerNorm

    declined = next(p for n, p in found if n == trace.DECLINED)
    assert set(TABLE_COLUMNS[metrics.REJECT_TABLE]) <= set(declined), declined
    assert declined["reason"] == Reason.NOT_PROFITABLE.value
    assert (declined["M"], declined["N"]) == (64, 40)
    assert declined["norms"] == "1" and declined["kind"] == "norm" and declined["detail"]

    graphs = [p for n, p in found if n == trace.GRAPH]
    for graph in graphs:  # the compile id ("0/0"), the part, the norms by module name
        assert re.fullmatch(r"\d+/\d+", graph.pop("graph_id")), graph
    assert graphs == [
        {"graph": "backward", "fused": ["1"], "declined": {}, "classes": {"1": "LayerNorm"},
         "norms_found": 1, "norms_fused": 1, "norms_declined": {}},
        {"graph": "backward", "fused": [], "declined": {"1": Reason.NOT_PROFITABLE.value},
         "classes": {"1": "LayerNorm"}, "norms_found": 1, "norms_fused": 0,
         "norms_declined": {Reason.NOT_PROFITABLE.value: 1}}]


def test_tlparse_lists_our_artifacts(traced):
    log, out = traced
    res = subprocess.run([_tlparse(), str(log), "-o", str(out), "--overwrite", "--no-browser"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    index = (out / "index.html").read_text()
    for name in (trace.FUSED, trace.DECLINED, trace.GRAPH):
        assert re.search(rf'href="[^"]*/{name}_\d+\.json"', index), name
        files = list(out.glob(f"*/{name}_*.json"))
        assert files, name
    written = next(out.glob(f"*/{trace.DECLINED}_*.json"))
    assert json.loads(written.read_text())["reason"] == Reason.NOT_PROFITABLE.value


@pytest.fixture
def trace_handler():
    """A handler on torch's trace log, as TORCH_TRACE attaches one: its artifact records
    (outside a compile torch also logs the interned strings of the caller's stack)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: (records.append(record)
                                   if "artifact" in getattr(record, "metadata", {}) else None)
    torch_logging.trace_log.addHandler(handler)
    try:
        yield records
    finally:
        torch_logging.trace_log.removeHandler(handler)


def test_nothing_is_built_with_tracing_off(monkeypatch):
    monkeypatch.setattr(torch_logging.trace_log, "handlers", [])  # as without TORCH_TRACE
    assert not trace.enabled()

    def payload():
        raise AssertionError("built with tracing off")

    trace.artifact(trace.FUSED, payload)


def test_a_failing_payload_never_reaches_the_compile(trace_handler):
    def payload():
        raise RuntimeError("broken row")

    trace.artifact(trace.FUSED, payload)  # logged at debug, not raised
    trace.artifact(trace.DECLINED, lambda: {"M": object()})  # json cannot take it: str()
    assert len(trace_handler) == 1
    assert json.loads(trace_handler[0].payload)["M"].startswith("<object")


def test_rows_become_json_values():
    import sympy

    s0 = sympy.Symbol("s0")
    row = trace.jsonable({"M": s0 * 2, "N": sympy.Integer(40), "shape_info": '{"N": 40}',
                          "detail": "x", "ratio": float("inf"), "fuses": True,
                          "dtypes": {"float32"}})
    assert row == {"M": "2*s0", "N": 40, "shape_info": {"N": 40}, "detail": "x",
                   "ratio": "inf", "fuses": True, "dtypes": ["float32"]}
    json.dumps(row)


def test_metrics_rows_are_traced(trace_handler):
    """The decline path (metrics.record_reject) emits the reject row as an artifact, also
    with the metric tables off."""
    metrics.record_reject(Reason.NOT_PROFITABLE, nodes="a + [b]", M=64, N=40, detail="d",
                          norms="ln", kind="norm", modules="ln", source="f.py:1")
    metrics.reset()
    (record,) = trace_handler
    assert record.metadata["artifact"] == {"name": trace.DECLINED, "encoding": "json"}
    payload = json.loads(record.payload)
    assert payload["reason"] == "not_profitable" and payload["modules"] == "ln"
