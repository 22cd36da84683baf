"""Opt-in: torch_npu's ``npu_rms_norm`` backward as ATen ops Inductor lowers, so the norm
reaches the pass and fuses (``config.decompose_npu_rms_norm``).

Under torch_npu's default Inductor backend ``npu_rms_norm_backward(dy, x, gamma, rstd)``
has no decomposition: it runs as one extern kernel (aclnnRmsNormGrad), which the pass
records as ``extern_norm``. torch_npu's ``triton_experimental`` and DVM backends decompose
it by putting a function into Inductor's decomposition table, which AOTAutograd applies
while it traces the joint graph. We do the same with our own function, behind the option:

- The entry is installed once per process for torch_npu's op (`install`: when this package
  is imported with torch_npu loaded, and again each time the plugin is turned on
  (`inductor_ext.enable()` / `options()`, through `on_enable`), so `import torch_npu` after
  `import inductor_ext` is covered; failing both, the first time the pass records the op as
  an extern with the option on, which that graph cannot use any more), and answers
  ``NotImplemented`` while the option is off, which makes the tracer keep the op as it is.
  So the option decides per compile, and off the graph is the stock one.
- Since the op is then in the table, Inductor's implicit fallback for it (what makes it an
  extern kernel when it is kept) would refuse it ("both a fallback and a decomp"): the same
  fallback is registered explicitly, with the layout constraint the implicit one takes.
- An entry that torch_npu (or anyone) put there first is left alone.

The maths (ours; torch_npu's backends were read for what the op computes): with
``xhat = x * rstd`` and ``g = dy * gamma`` in float32, ``dx = rstd * (g - xhat * mean(g *
xhat))`` over the normalised dims, cast to x's dtype, and ``dgamma = sum(dy * xhat)`` over
the others, kept float32 as the CANN op returns it (autograd casts it to gamma's dtype).
"""

from __future__ import annotations

from typing import Any

import torch

from ... import config as ext_config

OP_NAME = "npu::npu_rms_norm_backward"

#: Fallbacks `install` registered itself (not Inductor's or torch_npu's), for `uninstall`.
_OUR_FALLBACKS: set[torch._ops.OpOverload] = set()


def npu_rms_norm_backward(dy: torch.Tensor, x: torch.Tensor, gamma: torch.Tensor,
                          rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx in x's dtype, dgamma float32 shaped like gamma) of npu_rms_norm, in ATen ops."""
    norm_dims = list(range(x.dim() - gamma.dim(), x.dim()))
    batch_dims = list(range(x.dim() - gamma.dim()))
    xhat = x.float() * rstd
    g = dy.float() * gamma.float()
    dx = rstd * (g - xhat * (g * xhat).mean(norm_dims, keepdim=True))
    dgamma = dy.float() * xhat
    if batch_dims:
        dgamma = dgamma.sum(batch_dims)
    return dx.to(x.dtype), dgamma


def _when_enabled(dy: torch.Tensor, x: torch.Tensor, gamma: torch.Tensor, rstd: torch.Tensor
                  ) -> Any:
    """The table's entry: the decomposition while the option is on, else NotImplemented
    (the tracer then keeps the op)."""
    if not ext_config.decompose_npu_rms_norm:
        return NotImplemented
    return npu_rms_norm_backward(dy, x, gamma, rstd)


def torch_npu_op() -> torch._ops.OpOverload | None:
    """torch_npu's ``npu_rms_norm_backward.default`` when torch_npu has registered it."""
    try:
        packet = torch.ops.npu.npu_rms_norm_backward
        op = getattr(packet, "default", None)
    except Exception:
        return None
    return op if isinstance(op, torch._ops.OpOverload) else None


def installed() -> bool:
    """Whether our entry is in Inductor's decomposition table for torch_npu's op."""
    from torch._inductor.decomposition import decompositions

    op = torch_npu_op()
    return op is not None and decompositions.get(op) is _when_enabled


def install() -> bool:
    """Put the entry into Inductor's decomposition table (idempotent). False when torch_npu
    has not registered the op, or when another entry holds its place."""
    from torch._inductor import lowering
    from torch._inductor.decomposition import decompositions, fast_random_decomps

    op = torch_npu_op()
    if op is None:
        return False
    current = decompositions.get(op)
    if current is _when_enabled:
        return True
    if current is not None:
        return False
    if op not in lowering.lowerings:
        # What GraphLowering's implicit fallback would register: the op's layout tag.
        from torch._library.utils import get_layout_constraint_tag

        constraint = lowering.tag_to_layout_constraint(
            get_layout_constraint_tag(op, with_default=True))
        lowering.make_fallback(op, layout_constraint=constraint, warn=False,
                               override_decomp=True)
        _OUR_FALLBACKS.add(op)
    decompositions[op] = _when_enabled
    fast_random_decomps.cache_clear()  # Inductor's copy of the table, built once
    return True


def uninstall() -> None:
    """Take our entry (and the fallback `install` registered) out of Inductor's tables: the
    op is then as torch_npu's default backend leaves it."""
    from torch._inductor import lowering
    from torch._inductor.decomposition import decompositions, fast_random_decomps

    op = torch_npu_op()
    if op is not None and decompositions.get(op) is _when_enabled:
        del decompositions[op]
        if op in _OUR_FALLBACKS:
            lowering.lowerings.pop(op, None)
    _OUR_FALLBACKS.clear()
    fast_random_decomps.cache_clear()


def extern_hint() -> str:
    """What an extern_norm record of the op tells the user (the scan asks at each record).
    With the option on the op should not have stayed an extern: the entry was missing when
    the graph was traced (torch_npu loaded after inductor_ext), so it is installed now."""
    if not ext_config.decompose_npu_rms_norm:
        return ("inductor_ext.config.decompose_npu_rms_norm = True decomposes it so the norm "
                "fuses")
    if install():
        return ("decompose_npu_rms_norm is on, but its decomposition was not in Inductor's "
                "table when this graph was traced (torch_npu loaded after inductor_ext): "
                "installed now, for the compiles that follow")
    return ("decompose_npu_rms_norm is on, but another decomposition of the op holds its "
            "place in Inductor's table")
