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


class _HintResults:
    """Results of an inline-asm cache hint run by the interpreter: zeros of the output."""

    def __init__(self, values: list[Any], types: list[Any]) -> None:
        import numpy as np
        from triton.runtime.interpreter import TensorHandle

        shape = np.broadcast_shapes(*(v.data.shape for v in values)) if values else (1,)
        self._results = [TensorHandle(np.zeros(shape, dtype=np.int32), t.scalar
                                      if hasattr(t, "scalar") else t) for t in types]

    def get_result(self, i: int) -> Any:
        return self._results[i]


def _inline_asm_hints_as_no_ops(original: Any) -> Any:
    """The interpreter runs no PTX. A prefetch (a cache hint, no effect on values) becomes
    a no-op there so kernels that carry one still run; any other inline asm still fails."""
    def create_inline_asm(self: Any, asm: str, constraints: str, values: list[Any],
                          types: Any, is_pure: bool, pack: int) -> Any:
        if "prefetch" in asm and not is_pure:
            return _HintResults(values, types if isinstance(types, list) else [types])
        return original(self, asm, constraints, values, types, is_pure, pack)

    return create_inline_asm


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
    from triton.runtime.interpreter import InterpreterBuilder

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
        mock.patch.object(InterpreterBuilder, "create_inline_asm",
                          _inline_asm_hints_as_no_ops(InterpreterBuilder.create_inline_asm)),
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

