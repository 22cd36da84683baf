"""Shared by the torch_npu emulation tests: sessions, the plugin switched on, norm cases
checked against float64, and a recorder of the kernels torch_npu's schedulings generate."""

from __future__ import annotations

import contextlib

import torch

import inductor_ext
from tests.support import npu_emulation as emu
from tests.support import reference


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


@contextlib.contextmanager
def recorded_kernels():
    """Yields a list that fills with (class, kernel object, final source) for every Triton
    kernel torch_npu's schedulings generate inside the block, ours included (they subclass
    NPUIndexTritonKernel and call its codegen_kernel: each is recorded once, at our mixin,
    with the source we return). Use inside `session()`."""
    from torch_npu._inductor.codegen import triton as npu_triton

    from inductor_ext.targets.ascend.kernel import NpuMixOrderKernelMixin

    seen: list[tuple[type, object, str]] = []
    originals = {cls: cls.codegen_kernel for cls in (
        npu_triton.NPUIndexTritonKernel, npu_triton.NPUTritonKernel, NpuMixOrderKernelMixin)}

    def recorder(cls, original):
        def record(self, name=None):
            src = original(self, name)
            if (cls is NpuMixOrderKernelMixin) == isinstance(self, NpuMixOrderKernelMixin):
                seen.append((type(self), self, src))
            return src
        return record

    for cls, original in originals.items():
        cls.codegen_kernel = recorder(cls, original)
    try:
        yield seen
    finally:
        for cls, original in originals.items():
            cls.codegen_kernel = original


def fused_kernels(seen):
    """The fused kernels among `recorded_kernels()`'s records."""
    return [(cls, k, src) for cls, k, src in seen if cls.__name__.startswith("MixOrder")]


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


class Compiled(Exception):
    """Raised by the backend once Inductor has compiled both graphs: nothing runs."""


def compile_only(gm: torch.fx.GraphModule, example_inputs: list) -> None:
    """A Dynamo backend: Inductor compiles the forward and, at once, the backward (the hook
    plans the backward's scheduler nodes, the kernels are generated), then it stops."""
    from torch._inductor.compile_fx import compile_fx

    with torch._functorch.config.patch(force_non_lazy_backward_lowering=True):
        compile_fx(gm, example_inputs)
    raise Compiled


def boom(*args, **kwargs):
    raise RuntimeError("injected failure")

