"""The ``inductor_ext`` log, controlled like Inductor's: ``TORCH_LOGS="inductor_ext"`` (info)
prints one line per graph with a norm (or whose pass could not run), naming its norms fused
and declined (coverage.py), and the same line, marked as a replay, when a warm FX-graph
cache hit replays it (cache_hits.py); ``TORCH_LOGS="+inductor_ext"`` (debug) adds one line
per decision (fused, with its plan, or declined, with the reason)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import FrameType

LOG_NAME = "inductor_ext"

log = logging.getLogger(LOG_NAME)


def _inside_torch_log_setup(init_logs: object) -> bool:
    """True while torch._logging is still setting up logs (it imports packages named in
    TORCH_LOGS, this one included, and attaches their handler when that import returns)."""
    code = getattr(init_logs, "__code__", None)
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def register() -> None:
    """Register with torch._logging and re-read TORCH_LOGS (it was parsed at import torch).

    When TORCH_LOGS names this package, torch imports it while parsing the setting and
    attaches the handler itself afterwards; setting the logs up again from inside that
    import would give the logger a second handler, and print every line twice."""
    from torch._logging import _internal

    if LOG_NAME in _internal.log_registry.log_alias_to_log_qnames:
        return
    _internal.register_log(LOG_NAME, LOG_NAME)
    if (LOG_NAME in os.environ.get("TORCH_LOGS", "")
            and not _inside_torch_log_setup(_internal._init_logs)):
        _internal._init_logs()


def log_cache_hit(replayed: Mapping[str, int]) -> None:
    """One debug line for an FX-graph cache hit whose replayed counters hold our decisions
    but no graph summary to replay as the info line (cache_hits.py)."""
    if replayed:
        log.debug("inductor_ext: FX graph cache hit, replayed %s (decided when the graph "
                  "was first compiled)",
                  ", ".join(f"{name} x{count}" for name, count in sorted(replayed.items())))
