"""Stand-ins for the few Inductor runtime helpers our kernels call, for the triton-ascend
venv (which has no torch). Each is written here from its meaning, as a triton.jit function."""

import triton
import triton.language as tl
from triton.language import math as tl_math  # noqa: F401  (kernels refer to tl_math)


@triton.jit
def maximum(a, b):
    return tl.maximum(a, b)


@triton.jit
def minimum(a, b):
    return tl.minimum(a, b)


@triton.jit
def max2(a, dim):
    return tl.max(a, dim)


@triton.jit
def min2(a, dim):
    return tl.min(a, dim)


@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def prod(a, dim):
    return tl.reduce(a, dim, _mul)


@triton.jit
def promote_to_tensor(x):
    return x + tl.zeros((1,), tl.int1)


class _Libdevice:
    """libdevice names used by Inductor's row math, mapped onto triton.language.math."""

    def __getattr__(self, name):
        return getattr(tl.math, name)


libdevice = _Libdevice()
