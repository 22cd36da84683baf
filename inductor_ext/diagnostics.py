"""What the plugin tells about itself while compiling: declines (counted, logged, and
written to the reject table), warnings printed once per process, and the compile id that
ties table rows to a graph. Imported by the scheduler and codegen alike, so it imports
neither."""

from __future__ import annotations

from typing import Any

from . import metrics
from .logs import log

#: Keys of the warnings already printed in this process (later ones go to debug).
warned: set[str] = set()


def warn_once(key: str, msg: str, *args: Any) -> None:
    if key not in warned:
        warned.add(key)
        log.warning(msg, *args)
    else:
        log.debug(msg, *args)


def graph_id() -> str:
    """The compile id of the graph being compiled (e.g. '0/0'), for the tables."""
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
        return "" if cid is None else str(cid)
    except Exception:
        return ""


def decline(names: str, M: Any, N: Any, reason: str, detail: str) -> None:
    """Count, log and (if the table is on) record one declined candidate."""
    metrics.record_reject(reason, nodes=names, M=M, N=N, detail=detail, graph_id=graph_id())
    log.debug("inductor_ext: declined %s (M=%s, N=%s): %s %s", names, M, N, reason, detail)
