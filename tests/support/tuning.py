"""Test helpers: the CPU interpreter harness (`cpu_interpret`), the torch_npu runtime
emulation (`tests.support.npu_emulation`), norm-backward references and tolerances, and
the fused kernels a step launches (`fused_launches`), tuning knobs for a block (`tuned`)."""

import contextlib

from inductor_ext.interpreter import cpu_interpret, interpreter_active
from tests.support.launches import fused_launches

__all__ = ["cpu_interpret", "fused_launches", "interpreter_active", "tuned"]


def tuned(target: str, **knobs: object) -> contextlib.AbstractContextManager[None]:
    """Context manager: the target's tuning knobs changed for what runs inside (through
    `inductor_ext.config.tuning`, so also in the cache key), on top of any already set."""
    from inductor_ext import config

    current = dict(config.tuning)
    merged = {**current, target: {**dict(current.get(target, {})), **knobs}}
    return config.patch(tuning=merged)
