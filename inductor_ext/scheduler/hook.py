"""The scheduler pass: match (legality and the target's needs inside), plan, convert — and
fall back on any failure.

At the end of the pass it counts the graph's norms found, fused and declined
(``inductor_ext.coverage``) and, when the graph had a decision, logs them by name in one
summary line (info: ``TORCH_LOGS="inductor_ext"``; the decisions themselves are debug,
``TORCH_LOGS="+inductor_ext"``)."""

from __future__ import annotations

import dataclasses
import fnmatch
import logging
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from .. import compat, diagnostics, metrics, plan_inputs
from .. import config as ext_config
from .. import plan as planning
from ..compat import BaseSchedulerNode, Scheduler, SchedulerNode, V
from ..coverage import GraphCoverage, listed
from ..diagnostics import graph_id, warn_once
from ..groups.column import ColumnReduction
from ..groups.node import Verdict
from ..logs import log
from ..plan import LaunchPlan, ShapeInfo
from ..reasons import Reason
from . import externs, legality, phrases
from .assign import find_candidates
from .convert import convert
from .deps import KernelGraph
from .match import Candidate, cast_consumer, row_steps, split_pieces, strided_column_reads
from .origin import Attribution


def decline(names: str, M: sympy.Expr, N: sympy.Expr, reason: Reason, detail: str,
            attribution: Attribution | None = None,
            coverage: GraphCoverage | None = None) -> None:
    """Record one declined candidate (diagnostics.decline) with the norms and modules it
    is about, and count it in the graph's coverage."""
    fields = attribution.reject_fields() if attribution is not None else {}
    shown = attribution.shown_modules() if attribution is not None else ""
    diagnostics.decline(names, M, N, reason, detail, shown, **fields)
    if coverage is not None:
        if attribution is None:
            coverage.add_declined([], reason)
        else:
            coverage.add_declined(attribution.norms, reason, attribution.classes)


def _hint(expr: sympy.Expr) -> int:
    return int(V.graph.sizevars.optimization_hint(expr))


def _nbytes(name: str) -> tuple[int, int]:
    """(bytes, element size) of a graph buffer at its size hint; (0, 1) if unknown."""
    try:
        buf = V.graph.get_buffer(name)
        itemsize = buf.get_dtype().itemsize
        return _hint(sympy.Mul(*buf.get_size())) * itemsize, itemsize
    except Exception:
        return 0, 1


def _matrix_itemsize(name: str, matrix_numel: int) -> int:
    """Element size of a graph buffer of `matrix_numel` elements (the group's [M, N]; its
    [N] for a weight); 0 for any other buffer or one of unknown size."""
    nbytes, itemsize = _nbytes(name)
    return itemsize if nbytes and nbytes == matrix_numel * itemsize else 0


def writes_rows_after_sums(cand: Candidate, matrix_numel: int) -> bool:
    """Whether the row side writes [M, N] values computed from its row reductions (dx):
    a column-tiled kernel then walks the row twice, and the partials, written last, ride
    the second pass, apart from the row sums (what column groups need)."""
    nodes = [sub for sub in cand.inner.get_nodes() if isinstance(sub, SchedulerNode)]
    sums = {dep.name for sub in nodes if sub.is_reduction() for dep in sub.read_writes.writes}
    return any(not sub.is_reduction()
               and any(dep.name in sums for dep in sub.read_writes.reads)
               and any(_matrix_itemsize(dep.name, matrix_numel)
                       for dep in sub.read_writes.writes)
               for sub in nodes)


def shape_info(cand: Candidate, accumulator: torch.dtype = torch.float32) -> ShapeInfo:
    M_hint = _hint(cand.M)
    N = int(cand.N)
    inner_reads = {d.name for d in cand.inner.read_writes.reads}
    inner_writes = {dep.name for sub in cand.inner.get_nodes()
                    for dep in sub.read_writes.writes}
    # What a column reads that the row side reads or computes: read once fused.
    shared = set()
    for col in cand.columns:
        shared |= (inner_reads | inner_writes) & col.reads()
    reads = set(inner_reads)
    for col in cand.columns:
        reads |= col.reads() - inner_writes
    writes = inner_writes | {col.out_name for col in cand.columns}
    shared_bytes = sum(_nbytes(name)[0] for name in shared)
    matrix_numel = _hint(cand.M) * N
    strided = {dep.name for sub in cand.inner.get_nodes() for dep in sub.read_writes.reads
               if not compat.reads_rows_contiguously(dep)
               and _matrix_itemsize(dep.name, matrix_numel)}
    column_reads = [strided_column_reads(col, cand.M, cand.N) for col in cand.columns]
    column_strided = {name for reads_ in column_reads for name in reads_.names} - strided
    # Adjacent rows of a strided operand: a step of one element from row to row (x.t()),
    # not a permuted [N, T, B] read as rows (b, t), nor pieces of a longer axis. Programs
    # that walk one piece's rows step along the rows the pieces were split from.
    pieces = split_pieces(cand.inner, cand.N)
    walks_pieces = any(col.interleaved for col in cand.columns)
    walked = N * pieces if walks_pieces else N
    row_side_steps = [step for sub in cand.inner.get_nodes() if isinstance(sub, SchedulerNode)
                      for step in row_steps(sub, strided, walked)]
    rows_adjacent = (all(abs(step) == 1 for step in row_side_steps)
                     and all(reads_.rows_adjacent for reads_ in column_reads if reads_.names))
    total_bytes = sum(_nbytes(name)[0] for name in reads | writes)
    # Unfused, the column reductions read their shared inputs again, each buffer once:
    # Inductor fuses column reductions over the same ranges into one kernel (LayerNorm's
    # dw and db read dy in one pass).
    column_shared = set().union(*(col.reads() & shared for col in cand.columns))
    unfused_bytes = total_bytes + sum(_nbytes(name)[0] for name in column_shared)
    # The [M, N] operands only: the row statistics both sides read (rstd, mean: [M, 1]
    # fp32) would make a bf16 norm's elements 4 bytes wide.
    elem_bytes = max((_matrix_itemsize(name, matrix_numel) for name in shared), default=0) or 1
    # Bytes per row element of every [M, N] tensor the kernel loads or stores: the tiles a
    # program holds at once for one row (the Ascend flavor sizes tiles from this).
    row_elem_bytes = sum(_matrix_itemsize(name, matrix_numel) for name in reads | writes)
    weight_elem_bytes = max((_matrix_itemsize(name, N) for name in inner_reads), default=0)
    return ShapeInfo(M_hint=M_hint, M_static=isinstance(cand.M, (int, sympy.Integer)), N=N,
                     num_columns=len(cand.columns), elem_bytes=elem_bytes,
                     shared_bytes=shared_bytes, total_bytes=total_bytes,
                     unfused_bytes=unfused_bytes, row_elem_bytes=row_elem_bytes,
                     device=compat.device_of(cand.inner),
                     accumulator=str(accumulator).replace("torch.", ""),
                     strided_bytes=sum(_nbytes(name)[0] for name in strided),
                     strided_elem_bytes=min([_nbytes(name)[1]
                                             for name in strided | column_strided] or [0]),
                     strided_shared_bytes=sum(_nbytes(name)[0] for name in strided & shared),
                     strided_column_bytes=sum(_nbytes(name)[0] for name in column_strided),
                     strided_rows_adjacent=rows_adjacent,
                     row_pieces=pieces, walks_pieces=walks_pieces,
                     rows_after_sums=writes_rows_after_sums(cand, matrix_numel),
                     weight_elem_bytes=weight_elem_bytes)


def planner_for_device(device: torch.device) -> planning.Planner:
    """The target that generates `device`'s kernels (`config.target`, or with "auto" the
    device's). Matching asks it first, so a column it cannot take stays in the pool."""
    return planning.planner_for(planning.target_for(device, ext_config.target))


def plan_candidate(cand: Candidate
                   ) -> tuple[LaunchPlan | None, ShapeInfo | None, Reason | None, Verdict]:
    """(plan, shape, reason, verdict); plan is None when the group is declined (reason then
    says why, the verdict's detail the particulars; reason is None for a fused group).
    Matching settled legality and what the target needs of each column (its accumulator,
    a per-sample row loop, one sample count); what is left depends on the whole group:
    split rows, a tile the target can walk the row in (`no_tile_fits`), what a
    column-tiled row cannot give its columns (`tiled_row_reads`, `tiled_non_sum`),
    profitability. For a fused group the verdict is the cost model's:
    whether it expects fusing to pay (False: fused anyway under `always_fuse`) and its
    times, which the fusion table records either way."""
    planner = cand.planner
    assert planner is not None  # matching decided the target
    segments = next((col.segments for col in cand.columns if col.segments > 1), 1)
    shape = shape_info(cand, legality.group_accumulator(cand.columns))
    split = planning.split_rows_reason(shape)
    if split:
        return None, shape, Reason.SPLIT_ROWS, Verdict(False, split)
    info = planning.device_info(compat.device_of(cand.inner))
    tuning = plan_inputs.tuning_for(planner.target)
    options = plan_inputs.plan_options()
    if segments > 1 or any(col.row_reads for col in cand.columns):
        options = dataclasses.replace(options, whole_rows=True)
    unsupported = planner.device_support(info) if planner.device_support else ""
    if unsupported:
        return None, shape, Reason.UNSUPPORTED_DEVICE, Verdict(False, unsupported)
    ok, why = planner.fits(shape, info, tuning, options)
    if not ok:
        return None, shape, Reason.NO_TILE_FITS, Verdict(False, why)
    plan = planner.plan(shape, info, tuning, options)
    if segments > 1:
        assert planner.segments is not None  # matching declined the columns otherwise
        plan = planner.segments(plan, segments, shape.M_hint, shape.walks_pieces)
    if plan.column_tiled and any(col.row_reads for col in cand.columns):
        return None, shape, Reason.TILED_ROW_READS, Verdict(False, (
            "a column reduction reads what the row side computes, which needs the whole row "
            "at once"))
    if (plan.looped_column_tiles
            and any(col.reduction_type != "sum" for col in cand.columns)):
        return None, shape, Reason.TILED_NON_SUM, Verdict(
            False, "the looped column-tiled path adds sums only")
    ok, why = planner.profitable(shape, plan, info, tuning, options)
    if not ok and not ext_config.always_fuse:
        return None, shape, Reason.NOT_PROFITABLE, Verdict(False, why)
    return plan, shape, None, Verdict(ok, why)


def excluded_norms(cand: Candidate) -> dict[str, str]:
    """The group's norms that the config's opt-outs rule out, each with the pattern that
    matched it as the tables and the line name it ("config.exclude_modules 'x'"):
    `config.exclude_modules` on the norm's name (module path, else source line), then
    `config.exclude_norm_classes` on its class; the user's way to keep norms unfused."""
    attribution = cand.attribution
    if attribution is None:
        return {}
    out: dict[str, str] = {}
    for norm in attribution.norms:
        cls = attribution.classes.get(norm, "")
        matched = next((f"config.exclude_modules {p!r}" for p in ext_config.exclude_modules
                        if fnmatch.fnmatchcase(norm, p)), None) or next(
            (f"config.exclude_norm_classes {p!r}" for p in ext_config.exclude_norm_classes
             if cls and fnmatch.fnmatchcase(cls, p)), None)
        if matched:
            out[norm] = matched
    return out


def _excluded_detail(cand: Candidate, excluded: dict[str, str]) -> str:
    """The decline of a group an opt-out matched: which norm matched which pattern first
    (the report shows that part), then the group that stays Inductor's."""
    classes = cand.attribution.classes if cand.attribution is not None else {}

    def named(norm: str, pattern: str) -> str:  # a class pattern: the class it matched
        by_class = pattern.startswith("config.exclude_norm_classes") and norm in classes
        return f"{norm} ({classes[norm]})" if by_class else norm

    matches = ", ".join(f"{named(norm, pattern)} matches {pattern}"
                        for norm, pattern in excluded.items())
    return f"{matches}; {phrases.group(cand.inner, cand.columns)} stays Inductor's"


def _warn_unmatched_patterns(coverage: GraphCoverage) -> None:
    """Warn, once per pattern, of an opt-out pattern that matches none of the norms of a
    graph that has norms: a name that is not relative to the compiled frame
    ("model.layers.1.*" where `torch.compile(model)` names "layers.1.input_layernorm"),
    a part of a class name ("RMSNorm" for LlamaRMSNorm), a typo. A warm FX-graph cache
    runs no pass, but the patterns are part of its key: the cold compile warned."""
    found = coverage.found
    if not found:
        return
    shown = listed(found, coverage.classes, 120)
    where = f"{len(found)} norm{'s' * (len(found) != 1)} of graph {coverage.graph_id or '?'}"
    for pattern in ext_config.exclude_modules:
        if any(fnmatch.fnmatchcase(n, pattern) for n in found):
            continue
        # The pattern less its first component, where that leaves a name to match: what
        # matches if the user wrote the compiled module's own name in front.
        rest = pattern.partition(".")[2]
        fits = [n for n in found if any(ch.isalnum() for ch in rest)
                and fnmatch.fnmatchcase(n, rest)]
        hint = (f"; {rest!r} would match {listed(fits, coverage.classes, 80)}" if fits
                else "")
        warn_once(f"unmatched exclude_modules {pattern}",
                  "inductor_ext: config.exclude_modules pattern %r matches none of the %s "
                  "(%s): names are module paths relative to the compiled frame, so "
                  "torch.compile(model) names model.layers[1].input_layernorm "
                  "'layers.1.input_layernorm'%s (warned once per pattern)",
                  pattern, where, shown, hint)
    classes = sorted({coverage.classes[n] for n in found if n in coverage.classes})
    for pattern in ext_config.exclude_norm_classes:
        if any(fnmatch.fnmatchcase(cls, pattern) for cls in classes):
            continue
        warn_once(f"unmatched exclude_norm_classes {pattern}",
                  "inductor_ext: config.exclude_norm_classes pattern %r matches the class of "
                  "none of the %s (classes: %s): a pattern matches the whole class name, "
                  "'*RMSNorm' every class whose name ends in RMSNorm (warned once per "
                  "pattern)", pattern, where, ", ".join(classes) or "none known")


def run(nodes: Sequence[BaseSchedulerNode],
        install_codegen: Callable[[Scheduler, torch.device], None]) -> list[BaseSchedulerNode]:
    """The pass over one graph's nodes: every fused group becomes a MixOrderNode, whose
    device's scheduling `install_codegen(scheduler, device)` makes generate it."""
    nodes = list(nodes)
    sched = compat.scheduler_of(nodes)
    if sched is None:
        return nodes
    coverage = GraphCoverage(graph_id())
    for ext in externs.scan(nodes):  # norm backwards Inductor left as extern kernels
        decline(ext.names, ext.M, ext.N, Reason.EXTERN_NORM, ext.detail, ext.attribution,
                coverage)
    try:
        unsupported = legality.unsupported_backends(nodes)
        for detail in unsupported:
            decline("<graph>", "?", "?", Reason.UNSUPPORTED_BACKEND, detail, coverage=coverage)
        if unsupported:
            _finish(coverage)
            return nodes
        matching = find_candidates(nodes, planner_for_device)
    except Exception as exc:  # matching must never break a compile
        warn_once("match", "inductor_ext: matching failed, keeping Inductor's schedule: %s",
                  exc)
        decline("<graph>", "?", "?", Reason.INTERNAL_ERROR, f"match: {exc!r}",
                coverage=coverage)
        _finish(coverage)
        return nodes
    for d in matching.declines:
        decline(d.names, d.M, d.N, d.reason, d.detail, d.attribution, coverage)
    if any(d.reason == Reason.UNSUPPORTED_BACKEND for d in matching.declines):
        coverage.add_note(legality.backend_advice(nodes))
    inner_ops = {op for cand in matching.groups for op in cand.inner.get_operation_names()}
    graph: KernelGraph | None = None  # the schedule as converted so far
    for cand in matching.groups:
        if not any(node is cand.inner for node in nodes):
            continue  # consumed by an earlier group
        try:
            excluded = excluded_norms(cand)
            if excluded:
                assert cand.attribution is not None  # its norms matched
                # The norms that matched first: the line lists them before their group's.
                norms = [*excluded, *(n for n in cand.attribution.norms if n not in excluded)]
                decline(cand.describe(), cand.M, cand.N, Reason.EXCLUDED_BY_CONFIG,
                        _excluded_detail(cand, excluded),
                        dataclasses.replace(cand.attribution, norms=norms), coverage)
                for pattern in dict.fromkeys(excluded.values()):
                    coverage.add_excluded(pattern, [n for n, p in excluded.items()
                                                    if p == pattern])
                continue
            plan, shape, reason, verdict = plan_candidate(cand)
            if plan is None:
                assert reason is not None
                decline(cand.describe(), cand.M, cand.N, reason, verdict.detail,
                        cand.attribution, coverage)
                continue
            assert shape is not None  # planned from it
            graph = graph if graph is not None else KernelGraph(nodes)
            for col in cand.columns:
                col.cast = _free_cast(sched, col, inner_ops)
            ops = set(cand.inner.get_operation_names())
            for col in cand.columns:
                ops |= col.operation_names() | ({col.cast.get_name()} if col.cast else set())
            # Matching kept the groups acyclic all together; a group declined above puts
            # its columns back, which can close a cycle through the ones still to come.
            via = graph.cycle_through(ops)
            if via is not None:
                between = phrases.kernel_of_ops(sched, graph.members.get(via, ()), via)
                decline(cand.describe(), cand.M, cand.N, Reason.PRODUCER_CONSUMER,
                        f"{phrases.group(cand.inner, cand.columns)} would run both before "
                        f"and after {between}", cand.attribution, coverage)
                continue
            install_codegen(sched, compat.device_of(cand.inner))
            nodes = convert(sched, nodes, cand, plan, shape, verdict=verdict, coverage=coverage)
            graph.merge(ops, f"mix_order:{cand.inner.get_name()}")
            attribution = cand.attribution or Attribution([], [], [], 0, len(cand.columns))
            coverage.add_fused(attribution.norms, attribution.other_columns,
                               attribution.classes)
            where = f" [{attribution.shown_modules()}]" if attribution.modules else ""
            log.debug("inductor_ext: fused %s (M=%s, N=%s)%s plan: %s", cand.describe(),
                      cand.M, cand.N, where, plan.summary(shape.M_hint))
        except Exception as exc:
            warn_once("convert", "inductor_ext: could not fuse %s, keeping Inductor's "
                      "schedule: %s", cand.describe(), exc)
            decline(cand.describe(), cand.M, cand.N, Reason.INTERNAL_ERROR, repr(exc),
                    cand.attribution, coverage)
    _warn_unmatched_patterns(coverage)
    if coverage.fused or coverage.other_fused:
        # A fused group still falls back if its codegen or compile fails: count the
        # graph's norms once its kernels are emitted (the scheduling wrapper demotes those).
        _finish_after_codegen(sched, coverage)
    else:
        _finish(coverage)
    return nodes


def _finish_after_codegen(sched: Any, coverage: GraphCoverage) -> None:
    """Count and summarise the graph's norms when the scheduler's codegen has run (on the
    instance: other compiles are untouched)."""
    original = sched.codegen

    def codegen(*args: Any, **kwargs: Any) -> Any:
        try:
            return original(*args, **kwargs)
        finally:
            _finish(coverage)

    sched.codegen = codegen


def _free_cast(sched: Scheduler, col: ColumnReduction, inner_ops: set[str]
               ) -> SchedulerNode | None:
    """The cast the final step may write (`cast_consumer`), unless that node belongs to a
    group's row side or to a kernel this pass already fused."""
    from ..groups.node import MixOrderNode

    cast = cast_consumer(sched, col)
    if cast is None or cast.get_name() in inner_ops:
        return None
    holder = sched.name_to_fused_node.get(cast.get_name())
    return None if isinstance(holder, MixOrderNode) else cast


def _finish(coverage: GraphCoverage) -> None:
    """Count the graph's norms and, where the graph had a decision, summarise them in one
    line, info where it tells the user something (`GraphCoverage.tells_the_user`), else
    debug (each decision has its own debug line); the summary is counted too, so that
    a warm FX-graph cache, which replays counters instead of running this pass, logs it
    again (cache_hits.py)."""
    metrics.record_norms(len(coverage.found), len(coverage.fused),
                         coverage.declined_by_reason(), coverage.trace_record())
    if coverage.decisions():
        metrics.record_graph(coverage.encode())
        level = logging.INFO if coverage.tells_the_user() else logging.DEBUG
        log.log(level, "inductor_ext: %s", coverage.line())
