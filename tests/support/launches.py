"""Count the fused kernels a compiled step actually launches.

The compile-time counter (`inductor_ext.metrics.mix_order_kernels`) counts kernels
generated, once per compiled graph. A graph that several modules run (FSDP2's per-layer
graphs are shared by identical layers) launches its fused kernels once per module, so the
norms a training step fuses are its launches: the main kernels, whose Inductor metadata
carries the plan (the final step's does not).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from unittest import mock


class LaunchCount:
    """Launches seen inside `fused_launches()`: ours, and others that `extra` selects."""

    def __init__(self) -> None:
        self.fused = 0
        self.extra = 0


@contextlib.contextmanager
def fused_launches(extra_key: str | None = None) -> Iterator[LaunchCount]:
    """Count launches of inductor_ext's fused kernels (and of kernels whose Inductor
    metadata holds `extra_key`) while the block runs. Every Triton kernel Inductor
    generates is launched through CachingAutotuner.run, which is wrapped for the block."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    from inductor_ext.runtime.autotune import PLAN_KEY

    count = LaunchCount()
    original = CachingAutotuner.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        meta = getattr(self, "inductor_meta", None) or {}
        if PLAN_KEY in meta:
            count.fused += 1
        elif extra_key is not None and extra_key in meta:
            count.extra += 1
        return original(self, *args, **kwargs)

    with mock.patch.object(CachingAutotuner, "run", run):
        yield count
