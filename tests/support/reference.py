"""Norm-backward functions, float64 references and per-dtype tolerances for the tests.

Tolerances are relative to the largest reference magnitude (max |got - ref| / max |ref|),
per dtype of the tensor being compared, in the spirit of FlagGems' tolerance tables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

RTOL = {
    torch.float32: 2e-5,
    torch.float16: 5e-3,
    torch.bfloat16: 3e-2,
    torch.float64: 1e-10,
}


def tolerance(dtype: torch.dtype) -> float:
    return RTOL[dtype]


def max_rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    got = got.detach().double().cpu()
    ref = ref.detach().double().cpu()
    if torch.isnan(got).any() and not torch.isnan(ref).any():
        return float("inf")
    scale = ref.abs().max().clamp_min(1e-30)
    return float((got - ref).abs().max() / scale)


def assert_close(got: Sequence[torch.Tensor], ref: Sequence[torch.Tensor],
                 names: Sequence[str] | None = None,
                 eager: Sequence[torch.Tensor] | None = None) -> None:
    """Each output within its dtype's tolerance of the float64 reference. With `eager`
    (the same computation in the input dtype), an ill-conditioned output may also be off by
    up to 4x eager's own error: the bar is "no worse than eager", not "better than math"."""
    assert len(got) == len(ref)
    for i, (g, r) in enumerate(zip(got, ref)):
        name = names[i] if names else f"output {i}"
        assert g.shape == r.shape, f"{name}: shape {tuple(g.shape)} != {tuple(r.shape)}"
        err = max_rel_err(g, r)
        tol = tolerance(g.dtype)
        if eager is not None:
            tol = max(tol, 4 * max_rel_err(eager[i], r))
        assert err <= tol, f"{name} ({g.dtype}): max rel err {err:.3e} > {tol:.1e}"


def training_step_errors(model: torch.nn.Module, ids: torch.Tensor) -> tuple[float, float]:
    """(loss difference, worst gradient relative error) of one training step of a
    language model (loss from the labels, inside the forward) compiled against eager."""
    params = [p for p in model.parameters() if p.requires_grad]
    eager_loss = model(input_ids=ids, labels=ids).loss
    eager = torch.autograd.grad(eager_loss, params)
    loss = torch.compile(model, dynamic=False)(input_ids=ids, labels=ids).loss
    grads = torch.autograd.grad(loss, params)
    worst = max(max_rel_err(g, e) for g, e in zip(grads, eager))
    return abs(loss.item() - eager_loss.item()), worst


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), w, eps)


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None,
               eps: float = 1e-5) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def autograd_grads(fn: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor],
                   dy: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Gradients of fn(*inputs) under dy for every input that requires grad."""
    needs = [t for t in inputs if t is not None and t.requires_grad]
    y = fn(*inputs)
    return torch.autograd.grad(y, needs, dy)


def float64_grads(fn: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor],
                  dy: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The float64 eager reference of autograd_grads."""
    up = [None if t is None else t.detach().double().requires_grad_(t.requires_grad)
          for t in inputs]
    return autograd_grads(fn, up, dy.double())


def rms_backward(x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor,
                 rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm backward written out (rstd saved from the forward), as a graph to compile."""
    xf = x.float()
    xhat = xf * rstd
    g = dy.float() * w.float()
    dx = rstd * (g - xhat * (g * xhat).mean(-1, keepdim=True))
    dw = (dy.float() * xhat).sum(0)
    return dx.to(x.dtype), dw.to(w.dtype)
