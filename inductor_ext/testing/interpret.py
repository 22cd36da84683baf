"""Run Inductor's Triton kernels on CPU tensors with the Triton interpreter.

Under :func:`cpu_interpret`, ``torch.compile`` on CPU tensors emits Triton (Inductor's
``cpu_backend="triton"``) and runs it with ``TRITON_INTERPRET=1``, through the plugin's
whole path: hook, codegen, launch and final sum. Two things need patching for that: the
Triton backend hash (no driver is active) and ``libdevice`` (resolved to ``tl.math``).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from typing import Any
from unittest import mock

_INTERPRET_HASH = "INDUCTOR-EXT-TRITON-INTERPRETER"


class _InterpreterLibdevice:
    """libdevice stand-in: every name resolves to triton.language.math, else the original."""

    def __init__(self, original: Any) -> None:
        self._original = original

    def __getattr__(self, name: str) -> Any:
        import triton.language as tl

        if hasattr(tl.math, name):
            return getattr(tl.math, name)
        return getattr(self._original, name)


def _set_interpret_flag(on: bool) -> None:
    os.environ["TRITON_INTERPRET"] = "1" if on else "0"
    try:
        import triton

        knobs = getattr(triton, "knobs", None)
        if knobs is not None and hasattr(knobs, "runtime"):
            knobs.runtime.interpret = on
    except ImportError:
        pass


def interpreter_active() -> bool:
    """True when Triton was imported in interpreter mode (TRITON_INTERPRET=1 at import)."""
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(tl.sum, InterpretedFunction)


INTERPRETER_HINT = (
    "inductor_ext.testing.cpu_interpret() needs Triton's interpreter, which Triton only "
    "enables when TRITON_INTERPRET=1 is set before it is first imported (importing torch."
    "_inductor or inductor_ext imports it). Run `TRITON_INTERPRET=1 python ...`, or set "
    "os.environ['TRITON_INTERPRET'] = '1' before importing torch._inductor / inductor_ext."
)


@contextlib.contextmanager
def cpu_interpret() -> Iterator[None]:
    """Context manager: compile CPU tensors to Triton and run them in the interpreter."""
    if not interpreter_active():
        raise RuntimeError(INTERPRETER_HINT)
    import torch._inductor.config as inductor_config
    import torch.utils._triton as torch_triton
    from torch._inductor.runtime import triton_helpers

    try:
        from torch._inductor.runtime import triton_compat
    except ImportError:  # pragma: no cover
        triton_compat = None

    old_env = os.environ.get("TRITON_INTERPRET")
    libdevice = _InterpreterLibdevice(triton_helpers.libdevice)
    patches = [
        mock.patch.object(torch_triton, "triton_hash_with_backend",
                          lambda: _INTERPRET_HASH),
        mock.patch.object(triton_helpers, "libdevice", libdevice),
    ]
    if triton_compat is not None and hasattr(triton_compat, "libdevice"):
        patches.append(mock.patch.object(triton_compat, "libdevice", libdevice))
    with contextlib.ExitStack() as stack:
        _set_interpret_flag(True)
        stack.callback(_restore_env, old_env)
        for p in patches:
            stack.enter_context(p)
        stack.enter_context(inductor_config.patch(cpu_backend="triton", compile_threads=1))
        stack.enter_context(warnings.catch_warnings())
        warnings.filterwarnings("ignore", message="Could not find an active CPU backend")
        yield


def _restore_env(old: str | None) -> None:
    if old is None:
        os.environ.pop("TRITON_INTERPRET", None)
    else:
        os.environ["TRITON_INTERPRET"] = old
    _set_interpret_flag(old == "1")

