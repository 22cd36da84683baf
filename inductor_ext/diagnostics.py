"""What the plugin tells about itself while compiling: declines (counted, logged, and
written to the reject table), warnings printed once per process, and the compile id that
ties table rows to a graph. Imported by the scheduler and codegen alike, so it imports
neither."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import metrics
from .compat import V
from .logs import log
from .reasons import Reason

if TYPE_CHECKING:
    import sympy

#: Keys of the warnings already printed in this process (later ones go to debug).
warned: set[str] = set()


def warn_once(key: str, msg: str, *args: object) -> None:
    if key not in warned:
        warned.add(key)
        log.warning(msg, *args)
    else:
        log.debug(msg, *args)


def compile_id() -> str:
    """Dynamo's id of the compile under way ('0/0'; '' outside one)."""
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
        return "" if cid is None else str(cid)
    except Exception:
        return ""


def graph_id() -> str:
    """The graph being compiled, for the tables: its compile id and, inside a training
    compile (whose forward and backward share that id), which of the two it is
    (e.g. '0/0 backward')."""
    gid = compile_id()
    try:
        graph = V.graph
        part = "backward" if graph.is_backward else "" if graph.is_inference else "forward"
    except Exception:
        part = ""
    return f"{gid} {part}".strip()


def decline(names: str, M: sympy.Expr, N: sympy.Expr, reason: Reason, detail: str,
            shown_modules: str = "", **fields: str) -> None:
    """Count, log and (if the table is on) record one declined candidate; `fields` are the
    reject table's columns in the user's terms (norms, kind, modules, source,
    norm_classes), `shown_modules` the modules as the log line names them
    (`Attribution.shown_modules`; default: the table's)."""
    metrics.record_reject(reason, nodes=names, M=M, N=N, detail=detail, graph_id=graph_id(),
                          **fields)
    shown = shown_modules or fields.get("modules", "")
    where = f" [{shown}]" if shown else ""
    log.debug("inductor_ext: declined %s (M=%s, N=%s): %s %s%s", names, M, N, reason, detail,
              where)
