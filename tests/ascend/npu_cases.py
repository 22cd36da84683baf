"""Shared by the torch_npu emulation tests: sessions, the plugin switched on, norm cases
checked against float64."""

from __future__ import annotations

import contextlib

import torch

import inductor_ext
from inductor_ext.testing import npu_emulation as emu
from inductor_ext.testing import reference


@contextlib.contextmanager
def session(soc: str = "910B3", backend: str = "default"):
    with emu.npu_emulation(soc=soc, backend=backend) as package:
        torch._dynamo.reset()
        try:
            yield package
        finally:
            torch._dynamo.reset()


@contextlib.contextmanager
def plugin_on(**options):
    with torch._inductor.config.patch(inductor_ext.options()), \
            inductor_ext.config.patch(always_fuse=True, **options):
        yield


def norm_case(op: str, M: int, N: int, dtype=torch.float32):
    torch.manual_seed(0)
    x = torch.randn(M, N, dtype=dtype, requires_grad=True)
    w = (1 + 0.1 * torch.randn(N, dtype=dtype)).requires_grad_()
    dy = torch.randn(M, N, dtype=dtype)
    if op == "rms":
        return reference.rms_norm, [x, w], dy
    b = torch.randn(N, dtype=dtype, requires_grad=True) if op == "ln" else None
    return reference.layer_norm, [x, w, b], dy


def check_grads(op: str, M: int, N: int, dtype=torch.float32) -> None:
    fn, inputs, dy = norm_case(op, M, N, dtype)
    got = reference.autograd_grads(torch.compile(fn, dynamic=False), inputs, dy)
    reference.assert_close(got, reference.float64_grads(fn, inputs, dy),
                           ["dx", "dw", "db"][:len(got)],
                           eager=reference.autograd_grads(fn, inputs, dy))


def boom(*args, **kwargs):
    raise RuntimeError("injected failure")
