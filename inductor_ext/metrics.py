"""Counters of what the hook did in this process (reset with :func:`reset`).

Modelled on ``torch._inductor.metrics``: plain module globals that tests and tools read.
"""

from __future__ import annotations

import collections

#: Fused mix-order kernels generated since the last reset.
mix_order_kernels: int = 0

#: Candidate groups the hook considered and declined, by reason code.
rejected_pairs: collections.Counter[str] = collections.Counter()

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


def reset() -> None:
    global mix_order_kernels
    mix_order_kernels = 0
    rejected_pairs.clear()


def record_kernel() -> None:
    global mix_order_kernels
    mix_order_kernels += 1


def record_reject(reason: str) -> None:
    if reason not in REASONS:
        raise ValueError(f"unknown decline reason {reason!r}")
    rejected_pairs[reason] += 1
