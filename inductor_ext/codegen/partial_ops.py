"""The ops handler a column reduction's body runs under inside the fused kernel: what
Inductor would write as its reduction becomes a fold into the kernel's partial, and its
store waits for the final step."""

from __future__ import annotations

from typing import Any

import sympy
import torch

from ..compat import WrapperHandler
from .kernel_base import MixOrderKernelBase


class PartialAccumulateOps(WrapperHandler):
    """Ops handler for a column reduction's body run over (rows=x, cols=r0): its reduction
    becomes an accumulate into the kernel's fp32 accumulator; its store is deferred to the
    final step."""

    def __init__(self, inner: Any, kernel: MixOrderKernelBase, out_name: str) -> None:
        super().__init__(inner)
        self._kernel = kernel
        self._out_name = out_name

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str,
                  value: Any) -> Any:
        return self._kernel.add_partial(reduction_type, self._out_name, value)

    def store_reduction(self, name: str, index: sympy.Expr, value: Any) -> None:
        return None
