"""Run Inductor's Triton kernels on CPU tensors with the Triton interpreter.

Under :func:`cpu_interpret`, ``torch.compile`` on CPU tensors emits Triton (Inductor's
``cpu_backend="triton"``) and runs it with ``TRITON_INTERPRET=1``, through the plugin's
whole path: hook, codegen, launch and final sum. Two things need patching for that: the
Triton backend hash (no driver is active) and ``libdevice``: names ``tl.math`` has resolve
there, and the interpreter, which runs no extern library, evaluates libdevice's other calls
(``isnan``, ``isinf``, ``tanh`` of tanh-GELU, ...) with numpy (`_LIBDEVICE_NUMPY`). Atomic
operands are made contiguous (the interpreter misreads broadcast views). Welford merges
(LayerNorm's forward statistics over looped rows) run as sums, not one Python call per
element (`interpreter_kernels.welford`).
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
    """libdevice stand-in: a name triton.language.math has resolves there (the interpreter
    runs those); any other is CUDA libdevice's function (the generic module holds stubs
    that a compiler backend replaces), called with the interpreter's semantic (the
    interpreter patches tl's builtins, not libdevice's), so that its extern call reaches
    `_extern_calls_with_numpy`."""

    def __init__(self, original: Any) -> None:
        self._original = original

    def __getattr__(self, name: str) -> Any:
        import triton.language as tl

        if hasattr(tl.math, name):
            return getattr(tl.math, name)
        try:  # Triton >= 3.4; older interpreters (triton-ascend 3.2) keep the original
            from triton.language.extra.cuda import libdevice as cuda_libdevice
            from triton.runtime.interpreter import interpreter_semantic
        except ImportError:
            return getattr(self._original, name)
        function = getattr(cuda_libdevice, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            kwargs.pop("_semantic", None)
            return function(*args, _semantic=interpreter_semantic, **kwargs)

        return call


def _vectorized(fn: Any) -> Any:
    import numpy as np

    return np.vectorize(fn)


def _round_half_away(x: Any) -> Any:
    import numpy as np

    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _numpy_libdevice() -> dict[str, Any]:
    """libdevice function name (symbol without `__nv_` and its f/d suffix) -> numpy."""
    import math

    import numpy as np

    return {
        "abs": np.abs, "fabs": np.abs, "acos": np.arccos, "acosh": np.arccosh,
        "asin": np.arcsin, "asinh": np.arcsinh, "atan": np.arctan, "atan2": np.arctan2,
        "atanh": np.arctanh, "cbrt": np.cbrt, "ceil": np.ceil, "copysign": np.copysign,
        "cos": np.cos, "cosh": np.cosh, "erf": _vectorized(math.erf),
        "erfc": _vectorized(math.erfc), "exp": np.exp, "exp2": np.exp2,
        "exp10": lambda x: np.power(10.0, x), "expm1": np.expm1, "floor": np.floor,
        "fma": lambda a, b, c: a * b + c, "fmax": np.fmax, "fmin": np.fmin, "fmod": np.fmod,
        "hypot": np.hypot, "isfinited": np.isfinite, "isfinite": np.isfinite,
        "isinf": np.isinf, "isnan": np.isnan, "ldexp": np.ldexp,
        "lgamma": _vectorized(math.lgamma), "log": np.log, "log10": np.log10,
        "log1p": np.log1p, "log2": np.log2, "nearbyint": np.rint, "rint": np.rint,
        "nextafter": np.nextafter, "pow": np.power, "round": _round_half_away,
        "rsqrt": lambda x: 1.0 / np.sqrt(x), "signbit": np.signbit, "sin": np.sin,
        "sinh": np.sinh, "sqrt": np.sqrt, "tan": np.tan, "tanh": np.tanh,
        "tgamma": _vectorized(math.gamma), "trunc": np.trunc,
    }


def _libdevice_function(symbol: str) -> Any:
    """numpy stand-in for a libdevice symbol (`__nv_tanhf` -> tanh); None if unknown."""
    table = _numpy_libdevice()
    name = symbol.removeprefix("__nv_").removeprefix("fast_")
    if name in table:
        return table[name]
    if name[-1:] in ("f", "d") and name[:-1] in table:
        return table[name[:-1]]
    return None


def _extern_calls_with_numpy(original: Any) -> Any:
    """The interpreter's extern call (it runs no library): libdevice symbols it knows are
    evaluated with numpy in the call's return dtype; anything else still fails, naming the
    symbol."""
    def create_extern_elementwise(self: Any, lib_name: str, lib_path: str, symbol: str,
                                  args: list[Any], ret_type: Any, is_pure: bool) -> Any:
        import numpy as np
        from triton.runtime.interpreter import TensorHandle, _get_np_dtype

        fn = _libdevice_function(symbol)
        if fn is None:
            raise NotImplementedError(f"inductor_ext.interpreter.cpu_interpret: no interpreter "
                                      f"stand-in for the extern function {symbol!r}")
        scalar = getattr(ret_type, "scalar", ret_type)
        with np.errstate(all="ignore"):
            data = np.asarray(fn(*(a.data for a in args)))
        return TensorHandle(data.astype(_get_np_dtype(scalar)), scalar)

    return create_extern_elementwise


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


def _contiguous(handle: Any) -> Any:
    import numpy as np
    from triton.runtime.interpreter import TensorHandle

    data = getattr(handle, "data", None)
    if isinstance(data, np.ndarray) and not data.flags.c_contiguous:
        return TensorHandle(np.ascontiguousarray(data), handle.dtype)
    return handle


def _atomics_on_contiguous_operands(original: Any) -> Any:
    """The interpreter's atomic add/max/... reads its operands as dense buffers, but a
    broadcast mask or value is a zero-stride numpy view: an atomic_add of a [XBLOCK, R]
    pointer block under an [XBLOCK, 1] mask then updates one column only (Inductor's
    embedding backward fused into a row reduction lost all other columns). Copy the
    operands to contiguous arrays first."""
    def create_atomic_rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any,
                          *rest: Any) -> Any:  # rest: sem (and scope, Triton >= 3.0)
        return original(self, op, _contiguous(ptr), _contiguous(val), _contiguous(mask),
                        *rest)

    return create_atomic_rmw


def _set_interpret_flag(on: bool) -> None:
    os.environ["TRITON_INTERPRET"] = "1" if on else "0"
    try:
        import triton

        knobs = getattr(triton, "knobs", None)
        if knobs is not None and hasattr(knobs, "runtime"):
            knobs.runtime.interpret = on
    except ImportError:
        pass


TRITON_MISSING = ("Triton is not installed: inductor_ext generates Triton kernels, and on a "
                  "machine without a GPU runs them through Triton's interpreter. Install it "
                  "(`pip install triton`; the README pins the tested version).")


def interpreter_active() -> bool:
    """True when Triton was imported in interpreter mode (TRITON_INTERPRET=1 at import)."""
    try:
        import triton.language as tl
    except ImportError:
        raise RuntimeError(TRITON_MISSING) from None
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(tl.sum, InterpretedFunction)


INTERPRETER_HINT = (
    "inductor_ext.interpreter.cpu_interpret() needs Triton's interpreter, which Triton only "
    "enables when TRITON_INTERPRET=1 is set before it is first imported (importing torch."
    "_inductor or inductor_ext imports it). Run `TRITON_INTERPRET=1 python ...`, or set "
    "os.environ['TRITON_INTERPRET'] = '1' before importing torch._inductor / inductor_ext."
)


@contextlib.contextmanager
def cpu_interpret() -> Iterator[None]:
    """Context manager: compile CPU tensors to Triton and run them in the interpreter."""
    if not interpreter_active():
        raise RuntimeError(INTERPRETER_HINT)
    import torch.utils._triton as torch_triton
    from triton.runtime.interpreter import InterpreterBuilder

    from . import interpreter_kernels
    from .compat import inductor_config, triton_compat, triton_helpers

    old_env = os.environ.get("TRITON_INTERPRET")
    libdevice = _InterpreterLibdevice(triton_helpers.libdevice)
    patches: list[contextlib.AbstractContextManager[object]] = [
        mock.patch.object(torch_triton, "triton_hash_with_backend",
                          lambda: _INTERPRET_HASH),
        mock.patch.object(triton_helpers, "libdevice", libdevice),
        mock.patch.object(triton_helpers, "welford", interpreter_kernels.welford),
        mock.patch.object(InterpreterBuilder, "create_inline_asm",
                          _inline_asm_hints_as_no_ops(InterpreterBuilder.create_inline_asm)),
        mock.patch.object(InterpreterBuilder, "create_extern_elementwise",
                          _extern_calls_with_numpy(InterpreterBuilder.create_extern_elementwise)),
        mock.patch.object(InterpreterBuilder, "create_atomic_rmw",
                          _atomics_on_contiguous_operands(InterpreterBuilder.create_atomic_rmw)),
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

