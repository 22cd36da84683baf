"""What the hook did: counters and Inductor metric tables.

Counters live in ``torch._dynamo.utils.counters["inductor"]`` under ``inductor_ext_*`` keys.
Inductor stores the change of those counters with each FX-graph cache entry and replays it
on a hit, so a warm cache reports the same fused kernels and declines as a cold compile.
Each graph with a decision also keeps its summary by name (``inductor_ext_graph_*``, read by
the cache-hit log line, not counted by the accessors below). Read them as
``inductor_ext.metrics.mix_order_kernels`` (int),
``inductor_ext.metrics.rejected_pairs`` (Counter by reason), ``fused_columns`` (Counter:
"norm" for a norm's dw/db, "other" for column reductions that rode along, such as a
Linear's bias grad) and ``norms`` / ``norms_declined`` (per graph: norms found, fused and
declined, the last by reason; see ``inductor_ext.coverage``).

Tables are Inductor ``MetricTable``s (registered when inductor_ext is imported), enabled by
``TORCHINDUCTOR_ENABLED_METRIC_TABLES`` / ``torch._inductor.config.enabled_metric_tables``
and written to ``metric_table_<name>.csv`` in the working directory. Rows are compile-time
records, like Inductor's own tables: a warm cache hit writes none.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable, Mapping
from typing import Any

from torch._dynamo.utils import counters

from . import trace
from .compat import inductor_metrics
from .reasons import Reason, check

#: The decline reason codes, in order (inductor_ext.reasons.Reason owns them and their
#: meaning; kept for code that reads the codes as strings).
REASONS = tuple(reason.value for reason in Reason)

_PREFIX = "inductor_ext_"
_KERNELS_KEY = "inductor_ext_mix_order_kernels"
_REJECT_PREFIX = "inductor_ext_rejected_"
_COLUMNS_PREFIX = "inductor_ext_fused_columns_"
_NORMS_PREFIX = "inductor_ext_norms_"
_NORMS_DECLINED_PREFIX = "inductor_ext_norms_declined_"
#: One key per graph with a decision: its summary (coverage.GraphCoverage.encode), which
#: rides the FX-graph cache's counter deltas so that a warm hit can log it by name. No
#: accessor above reads it; counts of everything else are in the keys above.
_GRAPH_PREFIX = "inductor_ext_graph_"

FUSION_TABLE = "mix_order_fusion"
REJECT_TABLE = "mix_order_reject"
BENCH_TABLE = "mix_order_bench"

#: The structured-trace artifact each compile-time table's rows also become (trace.py).
TRACE_ARTIFACTS = {FUSION_TABLE: trace.FUSED, REJECT_TABLE: trace.DECLINED}

TABLE_COLUMNS: dict[str, list[str]] = {
    FUSION_TABLE: [
        "graph_id", "kernel_name", "kernel_path", "inner_node", "outer_nodes", "M", "N",
        "input_dtypes", "num_partials", "target", "programs", "block_m", "split_size",
        "workspace_bytes", "bytes_fused", "bytes_unfused", "model_fuses", "model_detail",
        "shape_info",
        # in the user's terms (scheduler/origin.py): the norms this kernel fuses (module
        # names, else source lines), its norm and other column reductions, every module
        # and forward source line of its reductions; the class of each norm, in the order
        # of `norms` ("?" where unknown)
        "norms", "norm_columns", "other_columns", "modules", "source", "norm_classes",
    ],
    REJECT_TABLE: ["graph_id", "nodes", "M", "N", "reason", "detail",
                   "norms", "kind", "modules", "source", "norm_classes"],
    BENCH_TABLE: ["op", "shape", "dtype", "variant", "time_us", "tbps", "copy_fraction"],
}


def register_tables() -> None:
    """Register our tables with Inductor (idempotent) and drop its cached parse of the
    enabled-tables setting, so a setting that names our tables takes effect."""
    for name, columns in TABLE_COLUMNS.items():
        if name not in inductor_metrics.REGISTERED_METRIC_TABLES:
            inductor_metrics.MetricTable.register_table(name, columns)
    inductor_metrics.enabled_metric_tables_impl.cache_clear()


def table_enabled(name: str) -> bool:
    try:
        return inductor_metrics.is_metric_table_enabled(name)
    except AssertionError:  # setting parsed before we registered: parse again
        register_tables()
        return inductor_metrics.is_metric_table_enabled(name)


def _add_row(name: str, row_fn: Callable[[], Mapping[str, object]]) -> None:
    if name in TRACE_ARTIFACTS:
        trace.artifact(TRACE_ARTIFACTS[name], row_fn)
    if not table_enabled(name):
        return

    def typed_row() -> dict[str, str | float | None]:
        # MetricTable takes str, float or None: keep floats, stringify the rest.
        return {k: (v if isinstance(v, (float, type(None))) else str(v))
                for k, v in row_fn().items()}

    table = inductor_metrics.get_metric_table(name)
    if not os.path.exists(table.output_filename()):
        # MetricTable writes the header once per process; a new working directory (or a
        # deleted file) would otherwise get rows without one.
        table.write_header()
    table.add_row(typed_row)


def _by_prefix(prefix: str, exclude: str | None = None) -> collections.Counter[str]:
    return collections.Counter({
        key[len(prefix):]: count for key, count in counters["inductor"].items()
        if key.startswith(prefix) and count and not (exclude and key.startswith(exclude))})


def __getattr__(name: str) -> Any:
    if name == "mix_order_kernels":
        return counters["inductor"][_KERNELS_KEY]
    if name == "rejected_pairs":
        return _by_prefix(_REJECT_PREFIX)
    if name == "fused_columns":
        return _by_prefix(_COLUMNS_PREFIX)
    if name == "norms":
        return _by_prefix(_NORMS_PREFIX, exclude=_NORMS_DECLINED_PREFIX)
    if name == "norms_declined":
        return _by_prefix(_NORMS_DECLINED_PREFIX)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def reset() -> None:
    """Zero our counters (Inductor's own counters are left alone)."""
    inductor = counters["inductor"]
    for key in [k for k in inductor if k.startswith(_PREFIX)]:
        del inductor[key]


def record_kernel(row: Mapping[str, object] | None = None) -> None:
    """Count one fused kernel and, if the table is on, write its mix_order_fusion row."""
    counters["inductor"][_KERNELS_KEY] += 1
    if hasattr(inductor_metrics, "codegen_mix_order_reduction"):
        inductor_metrics.codegen_mix_order_reduction += 1  # existing tooling counts these
    if row is not None:
        _add_row(FUSION_TABLE, lambda: row)


def record_columns(norm: int, other: int) -> None:
    """Count the column reductions of one fused kernel: a norm's dw/db apart from others."""
    counters["inductor"][_COLUMNS_PREFIX + "norm"] += norm
    counters["inductor"][_COLUMNS_PREFIX + "other"] += other


def record_norms(found: int, fused: int, declined: dict[str, int],
                 graph: Mapping[str, object] | None = None) -> None:
    """Count one graph's norms: found, fully fused, and declined by reason. `graph`
    (the compile id, forward or backward, each norm's module name, reason and class) goes
    into the trace artifact beside the counts."""
    counters["inductor"][_NORMS_PREFIX + "found"] += found
    counters["inductor"][_NORMS_PREFIX + "fused"] += fused
    counters["inductor"][_NORMS_PREFIX + "declined"] += sum(declined.values())
    for reason, count in declined.items():
        counters["inductor"][_NORMS_DECLINED_PREFIX + reason] += count
    if found:
        trace.artifact(trace.GRAPH, lambda: {**dict(graph or {}), "norms_found": found,
                                             "norms_fused": fused,
                                             "norms_declined": dict(declined)})


def record_graph(summary: str) -> None:
    """Keep one graph's summary (text: coverage.GraphCoverage.encode) among the counters."""
    counters["inductor"][_GRAPH_PREFIX + summary] += 1


def record_reject(reason: Reason, nodes: str = "", M: object = "", N: object = "",
                  detail: str = "", graph_id: object = "", norms: str = "", kind: str = "",
                  modules: str = "", source: str = "", norm_classes: str = "") -> None:
    """Count one decline and, if the table is on, write its mix_order_reject row. Anything
    but a `Reason` member raises `reasons.UnknownReason` (a programming error)."""
    code = check(reason).value
    counters["inductor"][_REJECT_PREFIX + code] += 1
    _add_row(REJECT_TABLE, lambda: {"graph_id": graph_id, "nodes": nodes, "M": M, "N": N,
                                    "reason": code, "detail": detail, "norms": norms,
                                    "kind": kind, "modules": modules, "source": source,
                                    "norm_classes": norm_classes})


def replayed(counter_deltas: Mapping[str, int] | None) -> dict[str, int]:
    """Our decisions among an FX-graph cache entry's changes of the "inductor" counters."""
    out: dict[str, int] = {}
    for key, count in dict(counter_deltas or {}).items():
        if count and key == _KERNELS_KEY:
            out["fused"] = count
        elif count and key.startswith(_REJECT_PREFIX):
            out[f"declined {key[len(_REJECT_PREFIX):]}"] = count
    return out


def replayed_graphs(counter_deltas: Mapping[str, int] | None) -> list[str]:
    """The graph summaries (`record_graph`) among an FX-graph cache entry's changes of the
    "inductor" counters, once per count."""
    return [key[len(_GRAPH_PREFIX):]
            for key, count in dict(counter_deltas or {}).items()
            if key.startswith(_GRAPH_PREFIX) for _ in range(max(0, count))]


def record_bench(op: str, shape: str, dtype: str, variant: str, time_us: float,
                 tbps: float, copy_fraction: float) -> None:
    """One row of mix_order_bench (the bench scripts call this)."""
    _add_row(BENCH_TABLE, lambda: {"op": op, "shape": shape, "dtype": dtype,
                                   "variant": variant, "time_us": float(time_us),
                                   "tbps": float(tbps), "copy_fraction": float(copy_fraction)})


register_tables()
