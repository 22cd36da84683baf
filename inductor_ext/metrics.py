"""What the hook did: counters and Inductor metric tables.

Counters live in ``torch._dynamo.utils.counters["inductor"]`` under ``inductor_ext_*`` keys.
Inductor stores the change of those counters with each FX-graph cache entry and replays it
on a hit, so a warm cache reports the same fused kernels and declines as a cold compile.
Read them as ``inductor_ext.metrics.mix_order_kernels`` (int) and
``inductor_ext.metrics.rejected_pairs`` (Counter by reason).

Tables are Inductor ``MetricTable``s (registered when inductor_ext is imported), enabled by
``TORCHINDUCTOR_ENABLED_METRIC_TABLES`` / ``torch._inductor.config.enabled_metric_tables``
and written to ``metric_table_<name>.csv`` in the working directory. Rows are compile-time
records, like Inductor's own tables: a warm cache hit writes none.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Callable
from typing import Any

from torch._dynamo.utils import counters
from torch._inductor import metrics as inductor_metrics

#: Reason codes a decline can carry (see scheduler/legality.py for their meaning).
REASONS = (
    "producer_consumer",
    "unsupported_reduction_type",
    "unsupported_dtype",
    "not_persistent",
    "dynamic_n",
    "no_shared_input",
    "not_profitable",
    "unsupported_backend",
    "cpp_wrapper",
    "internal_error",
)

_KERNELS_KEY = "inductor_ext_mix_order_kernels"
_REJECT_PREFIX = "inductor_ext_rejected_"

FUSION_TABLE = "mix_order_fusion"
REJECT_TABLE = "mix_order_reject"
BENCH_TABLE = "mix_order_bench"

TABLE_COLUMNS: dict[str, list[str]] = {
    FUSION_TABLE: [
        "graph_id", "kernel_name", "kernel_path", "inner_node", "outer_nodes", "M", "N",
        "input_dtypes", "num_partials", "target", "programs", "block_m", "split_size",
        "workspace_bytes", "bytes_fused", "bytes_unfused", "model_fuses", "model_detail",
        "shape_info",
    ],
    REJECT_TABLE: ["graph_id", "nodes", "M", "N", "reason", "detail"],
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


def _add_row(name: str, row_fn: Callable[[], dict[str, Any]]) -> None:
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


def __getattr__(name: str) -> Any:
    if name == "mix_order_kernels":
        return counters["inductor"][_KERNELS_KEY]
    if name == "rejected_pairs":
        return collections.Counter({
            key[len(_REJECT_PREFIX):]: count
            for key, count in counters["inductor"].items()
            if key.startswith(_REJECT_PREFIX) and count})
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def reset() -> None:
    """Zero our counters (Inductor's own counters are left alone)."""
    inductor = counters["inductor"]
    for key in [k for k in inductor if k == _KERNELS_KEY or k.startswith(_REJECT_PREFIX)]:
        del inductor[key]


def record_kernel(row: dict[str, Any] | None = None) -> None:
    """Count one fused kernel and, if the table is on, write its mix_order_fusion row."""
    counters["inductor"][_KERNELS_KEY] += 1
    if hasattr(inductor_metrics, "codegen_mix_order_reduction"):
        inductor_metrics.codegen_mix_order_reduction += 1  # existing tooling counts these
    if row is not None:
        _add_row(FUSION_TABLE, lambda: row)


def record_reject(reason: str, nodes: str = "", M: Any = "", N: Any = "",
                  detail: str = "", graph_id: Any = "") -> None:
    if reason not in REASONS:
        raise ValueError(f"unknown decline reason {reason!r}; known: {REASONS}")
    counters["inductor"][_REJECT_PREFIX + reason] += 1
    _add_row(REJECT_TABLE, lambda: {"graph_id": graph_id, "nodes": nodes, "M": M, "N": N,
                                    "reason": reason, "detail": detail})


def replayed(counter_deltas: Any) -> dict[str, int]:
    """Our decisions among an FX-graph cache entry's changes of the "inductor" counters."""
    out: dict[str, int] = {}
    for key, count in dict(counter_deltas or {}).items():
        if count and key == _KERNELS_KEY:
            out["fused"] = count
        elif count and key.startswith(_REJECT_PREFIX):
            out[f"declined {key[len(_REJECT_PREFIX):]}"] = count
    return out


def record_bench(op: str, shape: str, dtype: str, variant: str, time_us: float,
                 tbps: float, copy_fraction: float) -> None:
    """One row of mix_order_bench (the bench scripts call this)."""
    _add_row(BENCH_TABLE, lambda: {"op": op, "shape": shape, "dtype": dtype,
                                   "variant": variant, "time_us": float(time_us),
                                   "tbps": float(tbps), "copy_fraction": float(copy_fraction)})


register_tables()
