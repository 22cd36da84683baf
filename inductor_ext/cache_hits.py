"""The one log line of an FX-graph cache hit.

A hit replays the cached graph's counter changes instead of running our hook (which logs
each decision), so this line is all a warm compile's log says of them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from . import compat, logs, metrics
from .logs import log


@functools.cache
def install_cache_hit_hook() -> bool:
    """Idempotently log each FX-graph cache hit; False where this torch has no seam for it
    (a hit then replays our counters without a log line)."""
    return compat.after_fx_cache_hit(_log_cache_hit)


def _log_cache_hit(counter_deltas: Mapping[str, int] | None) -> None:
    try:
        logs.log_cache_hit(metrics.replayed(counter_deltas))
    except Exception:  # a log line must never break loading a cached graph
        log.debug("inductor_ext: cache-hit log failed", exc_info=True)
