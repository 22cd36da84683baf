"""The plugin's decisions as structured-trace artifacts, so that ``TORCH_TRACE=<dir>`` and
``tlparse`` show them beside Inductor's own, under the compile they belong to.

Each fused kernel is an ``inductor_ext_fused`` artifact, each declined candidate an
``inductor_ext_declined`` one (their payloads are the mix_order_fusion and mix_order_reject
rows, JSON-encoded), and each graph with norms an ``inductor_ext_graph`` summary.
``metrics`` calls this where it records those rows. With tracing off nothing is built: the
payload is a callable, run only when torch's trace log has a handler. Tracing is a side
channel: nothing here may fail a compile.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping

import sympy
from torch._logging import _internal as torch_logging

from .logs import log

FUSED = "inductor_ext_fused"
DECLINED = "inductor_ext_declined"
GRAPH = "inductor_ext_graph"

#: Row fields that hold JSON text (the tables keep it as one CSV cell): nested here.
_JSON_FIELDS = frozenset({"shape_info"})


def enabled() -> bool:
    """Whether torch's structured trace is on (TORCH_TRACE, or a handler a tool attached):
    trace_structured itself writes only then, and checks the same way."""
    trace_log = getattr(torch_logging, "trace_log", None)
    return trace_log is None or bool(trace_log.handlers)


def artifact(name: str, payload_fn: Callable[[], Mapping[str, object]]) -> None:
    """Write one JSON artifact `name` to the structured trace, its payload from
    `payload_fn` (called only while tracing is on). Failures are logged, never raised."""
    if not enabled():
        return
    try:
        torch_logging.trace_structured(
            "artifact",
            metadata_fn=lambda: {"name": name, "encoding": "json"},
            payload_fn=lambda: json.dumps(jsonable(payload_fn()), indent=1, sort_keys=True),
        )
    except Exception as exc:  # a side channel: the compile goes on
        log.debug("inductor_ext: could not write trace artifact %s: %r", name, exc)


def jsonable(row: Mapping[str, object]) -> dict[str, object]:
    """A row as JSON values: sizes as ints where static (else their text), JSON-text
    fields nested, anything else json cannot take as its str()."""
    return {key: _value(key, value) for key, value in row.items()}


def _value(key: str, value: object) -> object:
    if key in _JSON_FIELDS and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if isinstance(value, sympy.Basic):
        return int(value) if value.is_Integer else str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # json has no inf/nan
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _value(str(k), v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_value("", v) for v in value]
    return str(value)
