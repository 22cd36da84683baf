"""Poison every buffer Inductor's generated wrapper allocates, so an output element (or a
workspace row) that a kernel forgets to write shows up as NaN instead of stale memory."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from unittest import mock

import torch

_GUARDS = torch._C._dynamo.guards
_ALLOCATORS = ("_empty_strided_cpu", "_empty_strided_cuda")


def _poison(t: torch.Tensor) -> torch.Tensor:
    if t.dtype.is_floating_point or t.dtype.is_complex:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).max)
    return t


@contextlib.contextmanager
def poisoned_allocations() -> Iterator[None]:
    """Allocations made by wrappers loaded inside this context come back poisoned."""
    with contextlib.ExitStack() as stack:
        for name in _ALLOCATORS:
            original = getattr(_GUARDS, name, None)
            if original is None:
                continue

            def poisoned(*args: Any, _original: Any = original) -> torch.Tensor:
                return _poison(_original(*args))

            stack.enter_context(mock.patch.object(_GUARDS, name, poisoned))
        yield
