"""Tuning knobs for a block of a test or bench (`tuned`), through the config's `tuning`."""

import contextlib

from inductor_ext import config


def tuned(target: str, **knobs: object) -> contextlib.AbstractContextManager[None]:
    """Context manager: the target's tuning knobs changed for what runs inside (through
    `inductor_ext.config.tuning`, so also in the cache key), on top of any already set."""
    current = dict(config.tuning)
    merged = {**current, target: {**dict(current.get(target, {})), **knobs}}
    return config.patch(tuning=merged)
