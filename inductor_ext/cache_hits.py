"""The log lines of an FX-graph cache hit.

A hit replays the cached graph's counter changes instead of running our hook (which logs
each decision and the graph's summary), so these lines are all a warm compile's log says
of them: the summary the cold compile kept among its counters (metrics.record_graph), as
the same info line, marked as a replay. A hit writes no metric table rows (Inductor's own
tables do not either), and the line says how to get them.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping

from . import compat, logs, metrics
from .coverage import GraphCoverage
from .diagnostics import compile_id
from .logs import log

#: What the replay line adds: the tables are compile-time records.
NO_TABLES = ("a cache hit writes no metric tables; TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 "
             "to get them")


@functools.cache
def install_cache_hit_hook() -> bool:
    """Idempotently log each FX-graph cache hit; False where this torch has no seam for it
    (a hit then replays our counters without a log line)."""
    return compat.after_fx_cache_hit(_log_cache_hit)


def replay_lines(counter_deltas: Mapping[str, int] | None, compile_id: str = ""
                 ) -> list[tuple[int, str]]:
    """(level, line) of a hit whose counter changes are `counter_deltas`: each graph
    summary the cold compile kept, as a replay under the current `compile_id`, at the
    level the cold compile logged it."""
    lines = []
    for text in metrics.replayed_graphs(counter_deltas):
        try:
            graph = GraphCoverage.decode(text, compile_id)
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # not a summary this version wrote
        level = logging.INFO if graph.tells_the_user() else logging.DEBUG
        lines.append((level,
                      f"inductor_ext: FX graph cache replay of {graph.line()} ({NO_TABLES})"))
    return lines


def _log_cache_hit(counter_deltas: Mapping[str, int] | None) -> None:
    try:
        lines = replay_lines(counter_deltas, compile_id())
        for level, line in lines:
            log.log(level, "%s", line)
        if not lines:
            logs.log_cache_hit(metrics.replayed(counter_deltas))
    except Exception:  # a log line must never break loading a cached graph
        log.debug("inductor_ext: cache-hit log failed", exc_info=True)
