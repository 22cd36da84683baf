"""Test setup: Triton's interpreter must be on before triton is first imported."""

import contextlib
import glob
import logging
import os
import re
import tempfile

os.environ.setdefault("TRITON_INTERPRET", "1")
# Each run compiles from scratch, so counters reflect this code, not a warm cache. The cache
# directory is removed at exit: a suite leaves ~20 MB of generated code per run otherwise.
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    _cache_dir = tempfile.TemporaryDirectory(prefix="inductor_ext_", ignore_cleanup_errors=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _cache_dir.name
os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE_DEFAULT", "0")  # a test may turn it on
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import pytest  # noqa: E402
import torch  # noqa: E402

import inductor_ext  # noqa: E402
from inductor_ext.interpreter import cpu_interpret  # noqa: E402
from tests.support.tables import TABLES  # noqa: E402


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true",
                     help="also run the slow tier (tests marked slow: further variants of "
                          "checks the default run makes once)")


def pytest_collection_modifyitems(config, items):
    """Without --slow, tests marked slow are skipped with a reason that names the option."""
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow tier: `pytest --slow` runs it (CONTRIBUTING.md, "
                                   "\"Test tiers\")")
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(skip)


@pytest.fixture
def interp():
    """CPU interpreter on, a clean dynamo state and zeroed counters."""
    torch._dynamo.reset()
    inductor_ext.metrics.reset()
    with cpu_interpret():
        yield
    torch._dynamo.reset()


@pytest.fixture
def plugin(interp):
    """The plugin on (always_fuse: interpreter shapes are far below the profitable size)."""
    with torch._inductor.config.patch(inductor_ext.options()), \
            inductor_ext.config.patch(always_fuse=True):
        yield


@pytest.fixture
def tables(tmp_path, monkeypatch):
    """The plugin's metric tables on, written to a fresh working directory (read them with
    tests.support.tables.rows)."""
    monkeypatch.chdir(tmp_path)
    with torch._inductor.config.patch(enabled_metric_tables=TABLES):
        yield tmp_path


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def cuda_knobs():
    """`cuda_knobs(name=value, ...)`: CUDA tuning knobs changed for the rest of the test
    (through inductor_ext.config.tuning, which is part of the cache key)."""
    from tests.support.tuning import tuned

    with contextlib.ExitStack() as stack:
        def set_knobs(**knobs):
            stack.enter_context(tuned("cuda", **knobs))

        yield set_knobs


@pytest.fixture
def ext_records():
    """The inductor_ext logger's records (DEBUG and up) during the test. A handler of its
    own: torch's logging setup stops registered loggers from propagating to caplog's."""
    from inductor_ext.logs import log

    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append
    old_level = log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)


#: The hook's per-graph summary line (inductor_ext.coverage.GraphCoverage.line).
_SUMMARY = re.compile(r"norms (\d+) found, (\d+) fused, (\d+) declined")


@pytest.fixture
def norm_views(ext_records, tmp_path, monkeypatch):
    """The metric tables on, written to a temporary working directory. Call the yielded
    function after compiling: {place: (found, fused, declined)} norms as each place tells
    them: the counters (`metrics.norms`), the hook's summary lines in the log, and the
    report (`inductor_ext.report` from the tables)."""
    from inductor_ext import coverage, report

    def views() -> dict[str, tuple[int, int, int]]:
        counts = inductor_ext.metrics.norms
        summed = [0, 0, 0]
        for record in ext_records:
            found = _SUMMARY.search(record.getMessage())
            if found:
                summed = [a + int(b) for a, b in zip(summed, found.groups())]
        tables = report.read_tables(sorted(glob.glob("metric_table_mix_order_*.csv")))
        graphs = coverage.from_tables(tables.get("mix_order_fusion", []),
                                      tables.get("mix_order_reject", []))
        return {
            "counters": (counts["found"], counts["fused"], counts["declined"]),
            "log summary": (summed[0], summed[1], summed[2]),
            "report": (sum(len(g.found) for g in graphs), sum(len(g.fused) for g in graphs),
                       sum(len(g.declined) for g in graphs)),
        }

    monkeypatch.chdir(tmp_path)
    with torch._inductor.config.patch(
            enabled_metric_tables="mix_order_fusion,mix_order_reject"):
        yield views
