"""The unsplit record: what each reduction Inductor split was before the split.

Inductor lowers a long column reduction (sum over M of [M, N]) as two reductions: partial
sums over chunks of rows, then a sum of the partials. Our fused kernel wants the original
single reduction, so while the plugin is enabled we remember, per intermediate buffer, the
reduction it was split from. Recording is passive: it never changes what Inductor emits.
The plugin installs the hook (`install_lowering_hooks`); the scheduler's matcher reads the
records and groups/column.py rebuilds the unsplit loop body from them.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from .. import compat
from ..compat import BaseSchedulerNode, V, ir
from ..logs import log


@dataclasses.dataclass(frozen=True)
class UnsplitReduction:
    """The reduction a split intermediate buffer was made from."""

    device: torch.device
    dst_dtype: torch.dtype
    src_dtype: torch.dtype
    inner_fn: Callable[..., Any]
    ranges: tuple[sympy.Expr, ...]
    reduction_ranges: tuple[sympy.Expr, ...]
    reduction_type: str
    reduction_hint: ir.ReductionHint


def unsplit_records() -> dict[str, UnsplitReduction]:
    """Records of the graph being lowered, keyed by intermediate buffer name."""
    graph = V.graph
    records = getattr(graph, "_inductor_ext_unsplit", None)
    if records is None:
        records = {}
        graph._inductor_ext_unsplit = records  # type: ignore[attr-defined]  # ours, on its graph
    return records


def split_record_of(snode: BaseSchedulerNode) -> UnsplitReduction | None:
    """The record of the reduction `snode` is the first stage of (keyed by its buffer;
    an operation name is tried too), or None when it is no split's first stage."""
    records = unsplit_records()
    buffer = getattr(snode, "node", None)
    return records.get(snode.get_name()) or (
        records.get(buffer.get_name()) if buffer is not None else None)


#: Whether split reductions are recorded now (the plugin's `is_enabled`, once installed).
_recording: list[Callable[[], bool]] = [lambda: False]


@functools.cache
def install_lowering_hooks(record_when: Callable[[], bool]) -> None:
    """Idempotently have Inductor's split of a reduction call the recorder, which records
    while `record_when()` holds (the plugin passes its `is_enabled`; taking it as an
    argument keeps this layer from importing the plugin)."""
    _recording[0] = record_when
    compat.after_split_reduction(_record_if_enabled)


def _record_if_enabled(out: object, **fields: Any) -> None:
    try:
        if _recording[0]():
            _record_split(out, **fields)
    except Exception:  # recording is best effort; never break lowering
        log.debug("inductor_ext: could not record split reduction", exc_info=True)


def _record_split(out: object, device: torch.device, dst_dtype: torch.dtype,
                  src_dtype: torch.dtype, inner_fn: Callable[..., Any],
                  ranges: Sequence[sympy.Expr], reduction_ranges: Sequence[sympy.Expr],
                  reduction_type: str, reduction_hint: ir.ReductionHint) -> None:
    if not isinstance(out, ir.TensorBox):
        return
    reads = list(out.get_read_names())
    if len(reads) != 1:
        return
    inter = V.graph.name_to_buffer.get(reads[0])
    if not isinstance(inter, ir.ComputedBuffer) or not isinstance(inter.data, ir.Reduction):
        return
    unsplit_records()[inter.get_name()] = UnsplitReduction(
        device=device,
        dst_dtype=dst_dtype,
        src_dtype=src_dtype,
        inner_fn=inner_fn,
        ranges=tuple(ranges),
        reduction_ranges=tuple(reduction_ranges),
        reduction_type=reduction_type,
        reduction_hint=reduction_hint,
    )
