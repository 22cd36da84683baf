"""Demo: an RMSNorm backward compiled without and with inductor_ext.

Prints the kernels each compile generated and the max error of dx, dw against float64
eager. Runs on CUDA when available, else on CPU through the Triton interpreter
(start it with TRITON_INTERPRET=1 in the environment).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

import inductor_ext
from inductor_ext.compat import inductor_config, inductor_metrics
from inductor_ext.interpreter import cpu_interpret, interpreter_active


def _run(M: int, N: int, device: str, dtype: torch.dtype, plugin: bool) -> tuple[int, list]:
    torch.manual_seed(0)
    x = torch.randn(M, N, device=device, dtype=dtype, requires_grad=True)
    w = torch.randn(N, device=device, dtype=dtype, requires_grad=True)
    dy = torch.randn(M, N, device=device, dtype=dtype)

    def rms(x, w):
        return F.rms_norm(x, (N,), w, 1e-6)

    torch._dynamo.reset()
    inductor_ext.metrics.reset()
    inductor_metrics.reset()
    opts = inductor_ext.options() if plugin else {}
    with inductor_config.patch(opts), inductor_ext.config.patch(always_fuse=True):
        y = torch.compile(rms)(x, w)
        grads = torch.autograd.grad(y, (x, w), dy)
    kernels = inductor_metrics.generated_kernel_count
    xd = x.detach().double().requires_grad_()
    wd = w.detach().double().requires_grad_()
    refs = torch.autograd.grad(rms(xd, wd), (xd, wd), dy.double())
    errs = [((g.double() - r).abs().max() / r.abs().max()).item() for g, r in zip(grads, refs)]
    return kernels, errs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--M", type=int, default=512)
    parser.add_argument("--N", type=int, default=96)
    args = parser.parse_args()
    on_gpu = torch.cuda.is_available()
    device = "cuda" if on_gpu else "cpu"
    try:
        interpreting = interpreter_active()
    except RuntimeError as exc:  # Triton missing
        raise SystemExit(f"inductor_ext demo: {exc}") from None
    if not on_gpu and not interpreting:
        raise SystemExit("inductor_ext demo: no GPU, so the kernels run in Triton's "
                         "interpreter, which needs TRITON_INTERPRET=1 in the environment: "
                         "TRITON_INTERPRET=1 python -m inductor_ext.demo")
    ctx = _maybe_interpret(on_gpu)
    print(f"RMSNorm backward, x [{args.M}, {args.N}] fp32 on {device}"
          f"{'' if on_gpu else ' (Triton interpreter)'}")
    with ctx:
        for plugin in (False, True):
            kernels, (edx, edw) = _run(args.M, args.N, device, torch.float32, plugin)
            label = "with inductor_ext   " if plugin else "stock Inductor      "
            print(f"  {label} kernels (fwd+bwd): {kernels:2d}   "
                  f"max rel err dx {edx:.2e}  dw {edw:.2e}")
    print(f"  fused mix-order kernels: {inductor_ext.metrics.mix_order_kernels}")


def _maybe_interpret(on_gpu: bool):
    import contextlib

    return contextlib.nullcontext() if on_gpu else cpu_interpret()


if __name__ == "__main__":
    main()
