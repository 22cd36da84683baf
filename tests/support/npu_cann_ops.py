"""Emulated CANN operators of torch_npu: ``torch.ops.npu.npu_rms_norm`` and
``npu_rms_norm_backward`` as real ``torch.library`` operators, for the torch_npu emulation
(``tests.support.npu_emulation``), where every other ``torch.ops.npu`` name is a mock.

What is emulated is the operators' contract as torch_npu 2.13 declares it, read from its
wheel: the schemas (``torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml``), the
output dtypes and shapes of its meta functions (``rstd`` float32 with the gamma dims kept as
1; ``dgamma`` float32 whatever gamma's dtype) and the autograd link torch_npu's C extension
registers (``npu_rms_norm``'s backward is one ``npu_rms_norm_backward`` call on the saved
``x``, ``gamma`` and ``rstd``). The kernels are CPU reference implementations of the
maths in float32. What they cannot show: aclnnRmsNorm / aclnnRmsNormGrad's own numerics
(their accumulation order, their float16/bfloat16 handling) and speed.

Under torch_npu's default Inductor backend these operators have no decomposition, so a
compiled model that calls ``torch_npu.npu_rms_norm`` gets them as extern kernels, as on a
device.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import torch

#: The schemas of torch_npu 2.13 (npu_native_functions_by_codegen.yaml).
SCHEMAS = {
    "npu_rms_norm": "npu_rms_norm(Tensor self, Tensor gamma, float epsilon=1e-06) "
                    "-> (Tensor, Tensor)",
    "npu_rms_norm_backward": "npu_rms_norm_backward(Tensor dy, Tensor self, Tensor gamma, "
                             "Tensor rstd) -> (Tensor, Tensor)",
}


def _norm_dims(x: torch.Tensor, gamma: torch.Tensor) -> tuple[int, ...]:
    """The trailing dims gamma covers (the CANN op normalises over all of them)."""
    return tuple(range(x.dim() - gamma.dim(), x.dim()))


def rms_norm(x: torch.Tensor, gamma: torch.Tensor, epsilon: float = 1e-6
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """(y in x's dtype, rstd float32 shaped like x with gamma's dims as 1)."""
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(_norm_dims(x, gamma), keepdim=True) + epsilon)
    return (xf * rstd * gamma.float()).to(x.dtype), rstd


def rms_norm_backward(dy: torch.Tensor, x: torch.Tensor, gamma: torch.Tensor,
                      rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx in x's dtype, dgamma float32 shaped like gamma), in float32."""
    dims = _norm_dims(x, gamma)
    xhat = x.float() * rstd
    g = dy.float() * gamma.float()
    dx = rstd * (g - xhat * (g * xhat).mean(dims, keepdim=True))
    dgamma = dy.float() * xhat
    batch = tuple(range(x.dim() - gamma.dim()))
    return dx.to(x.dtype), (dgamma.sum(batch) if batch else dgamma)


def _rms_norm_fake(x: torch.Tensor, gamma: torch.Tensor, epsilon: float = 1e-6
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    shape = [s if i < x.dim() - gamma.dim() else 1 for i, s in enumerate(x.shape)]
    return torch.empty_like(x), x.new_empty(shape, dtype=torch.float32)


def _rms_norm_backward_fake(dy: torch.Tensor, x: torch.Tensor, gamma: torch.Tensor,
                            rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(x), torch.empty_like(gamma, dtype=torch.float32)


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: tuple[Any, ...]) -> None:
    x, gamma, _ = inputs
    ctx.save_for_backward(x, gamma, output[1])


def _backward(ctx: Any, dy: torch.Tensor, drstd: torch.Tensor | None) -> tuple[Any, ...]:
    """torch_npu's formula: rstd's gradient is not propagated; dgamma (float32 from the
    op) is cast to gamma's dtype, as the autograd engine does with the C extension's."""
    x, gamma, rstd = ctx.saved_tensors
    dx, dgamma = torch.ops.npu.npu_rms_norm_backward(dy, x, gamma, rstd)
    return dx, dgamma.to(gamma.dtype), None


def define(stack: contextlib.ExitStack, namespace: Any) -> None:
    """Define both operators for this emulation session: on ``namespace`` (the session's
    ``torch.ops.npu`` stand-in) and as ``torch_npu.npu_rms_norm`` /
    ``torch_npu.npu_rms_norm_backward`` (torch_npu's Python names). The library is destroyed
    on exit, so the next session defines them anew."""
    lib = torch.library.Library("npu", "FRAGMENT")  # noqa: TOR901  (destroyed on exit)
    stack.callback(lib._destroy)
    real = torch._ops._OpNamespace("npu")
    # torch.library looks for an existing packet on torch.ops.npu, which the stand-in
    # would answer with a mock: define against the real namespace.
    torch.ops.npu = real
    try:
        for name, schema in SCHEMAS.items():
            lib.define(schema)
            setattr(namespace, name, getattr(real, name))
    finally:
        torch.ops.npu = namespace
    lib.impl("npu_rms_norm", rms_norm, "CPU")
    lib.impl("npu_rms_norm_backward", rms_norm_backward, "CPU")
    torch.library.register_fake("npu::npu_rms_norm", _rms_norm_fake, lib=lib)
    torch.library.register_fake("npu::npu_rms_norm_backward", _rms_norm_backward_fake, lib=lib)
    torch.library.register_autograd("npu::npu_rms_norm", _backward,
                                    setup_context=_setup_context, lib=lib)
    torch_npu = sys.modules["torch_npu"]
    for name in SCHEMAS:
        setattr(torch_npu, name, getattr(namespace, name))
