"""The scheduler pass: match, check, plan, convert — and fall back on any failure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch

from .. import compat, metrics
from .. import config as ext_config
from ..codegen.flavor import LaunchPlan, ShapeInfo, flavor_for
from ..compat import BaseSchedulerNode, V
from ..logs import log
from . import legality
from .convert import convert
from .match import Candidate, cast_consumer, find_candidates

_warned: set[str] = set()


def _warn_once(key: str, msg: str, *args: Any) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning(msg, *args)
    else:
        log.debug(msg, *args)


def decline(names: str, M: Any, N: Any, reason: str, detail: str) -> None:
    """Count, log and (if the table is on) record one declined candidate."""
    metrics.record_reject(reason, nodes=names, M=M, N=N, detail=detail, graph_id=graph_id())
    log.debug("inductor_ext: declined %s (M=%s, N=%s): %s %s", names, M, N, reason, detail)


def graph_id() -> str:
    """The compile id of the graph being compiled (e.g. '0/0'), for the tables."""
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
        return "" if cid is None else str(cid)
    except Exception:
        return ""


def _hint(expr: Any) -> int:
    return int(V.graph.sizevars.optimization_hint(expr))


def _nbytes(name: str) -> tuple[int, int]:
    """(bytes, element size) of a graph buffer at its size hint; (0, 1) if unknown."""
    try:
        buf = V.graph.get_buffer(name)
        itemsize = buf.get_dtype().itemsize
        return _hint(sympy.Mul(*buf.get_size())) * itemsize, itemsize
    except Exception:
        return 0, 1


def shape_info(cand: Candidate, accumulator: torch.dtype = torch.float32) -> ShapeInfo:
    M_hint = _hint(cand.M)
    N = int(cand.N)
    inner_reads = {d.name for d in cand.inner.read_writes.reads}
    shared = set()
    for col in cand.columns:
        shared |= inner_reads & col.reads()
    reads = set(inner_reads)
    for col in cand.columns:
        reads |= col.reads()
    writes = {dep.name for sub in cand.inner.get_nodes() for dep in sub.read_writes.writes}
    writes |= {col.out_name for col in cand.columns}
    shared_bytes = sum(_nbytes(name)[0] for name in shared)
    total_bytes = sum(_nbytes(name)[0] for name in reads | writes)
    # Unfused, every column reduction reads its inputs again in its own kernel.
    unfused_bytes = total_bytes + sum(_nbytes(name)[0] for col in cand.columns
                                      for name in col.reads() & inner_reads)
    elem_bytes = max([_nbytes(name)[1] for name in shared] or [1])
    # Bytes per row element of every [M, N] tensor the kernel loads or stores: the tiles a
    # program holds at once for one row (the Ascend flavor sizes tiles from this).
    matrix_bytes = _hint(cand.M) * N
    row_elem_bytes = sum(size for b, size in map(_nbytes, reads | writes)
                         if b and b == matrix_bytes * size)
    return ShapeInfo(M_hint=M_hint, M_static=isinstance(cand.M, (int, sympy.Integer)), N=N,
                     num_columns=len(cand.columns), elem_bytes=elem_bytes,
                     shared_bytes=shared_bytes, total_bytes=total_bytes,
                     unfused_bytes=unfused_bytes, row_elem_bytes=row_elem_bytes,
                     device=cand.inner.get_device(),
                     accumulator=str(accumulator).replace("torch.", ""))


def plan_candidate(cand: Candidate) -> tuple[LaunchPlan | None, ShapeInfo | None, str, str]:
    """(plan, shape, reason, detail); plan is None when the group is declined."""
    reason = legality.check_graph(cand) or legality.check_backend(cand)
    if reason:
        return None, None, reason, ""
    flavor = flavor_for(cand.inner.get_device(), ext_config.target)
    accepted = []
    for col in cand.columns:
        bad = (legality.check_column(cand, col, accepted)
               or legality.check_accumulator(col, flavor.name, flavor.accumulator_dtypes))
        if bad:
            decline(f"{cand.inner.get_name()}+{col.out_name}", cand.M, cand.N, *bad)
        else:
            accepted.append(col)
    if not accepted:
        return None, None, "", ""
    cand.columns = accepted
    shape = shape_info(cand, legality.group_accumulator(accepted))
    ok, why = flavor.fits(shape)
    if not ok:
        return None, shape, "not_persistent", why
    plan = flavor.plan(shape, ext_config.split_size)
    if (plan.looped_column_tiles
            and any(col.reduction_type != "sum" for col in cand.columns)):
        return None, shape, "not_persistent", "the looped column-tiled path adds sums only"
    if not ext_config.always_fuse:
        ok, why = flavor.profitable(shape, plan)
        if not ok:
            return None, shape, "not_profitable", why
    return plan, shape, "", ""


def run(nodes: Sequence[BaseSchedulerNode]) -> list[BaseSchedulerNode]:
    nodes = list(nodes)
    sched = compat.scheduler_of(nodes)
    if sched is None:
        return nodes
    try:
        candidates = find_candidates(nodes, legality.check_dependency)
    except Exception as exc:  # matching must never break a compile
        _warn_once("match", "inductor_ext: matching failed, keeping Inductor's schedule: %s",
                   exc)
        decline("<graph>", "?", "?", "internal_error", f"match: {exc!r}")
        return nodes
    from ..codegen.backend import install_backend_wrapper

    for cand in candidates:
        if not any(node is cand.inner for node in nodes):
            continue  # consumed by an earlier group
        try:
            plan, shape, reason, detail = plan_candidate(cand)
            if plan is None:
                if reason:
                    decline(cand.describe(), cand.M, cand.N, reason, detail)
                continue
            install_backend_wrapper(sched, cand.inner.get_device())
            for col in cand.columns:
                col.cast = cast_consumer(sched, col)
            nodes = convert(sched, nodes, cand, plan, shape)
            log.debug("inductor_ext: fused %s (M=%s, N=%s) plan=%s", cand.describe(),
                      cand.M, cand.N, plan)
        except Exception as exc:
            _warn_once("convert", "inductor_ext: could not fuse %s, keeping Inductor's "
                       "schedule: %s", cand.describe(), exc)
            decline(cand.describe(), cand.M, cand.N, "internal_error", repr(exc))
    return nodes
