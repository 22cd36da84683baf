"""How each supported column reduction is written in generated code: its identity, how a
value folds into an accumulator, and the final reduction over an axis (Triton and ATen).
The fused kernel and the final step both fold partials, so they share this one table."""

from __future__ import annotations

import torch

#: reduction type -> (identity, fold of `{val}` into `{acc}`)
COMBINE = {
    "sum": ("0.0", "{acc} + {val}"),
    "prod": ("1.0", "{acc} * {val}"),
    "max": ("float('-inf')", "triton_helpers.maximum({acc}, {val})"),
    "min": ("float('inf')", "triton_helpers.minimum({acc}, {val})"),
}
#: reduction type -> Triton reduction over one axis of a tile
TL_REDUCE = {"sum": "tl.sum", "prod": "triton_helpers.prod", "max": "triton_helpers.max2",
             "min": "triton_helpers.min2"}
#: reduction type -> torch.Tensor method for the ATen final step
ATEN_REDUCE = {"sum": "sum", "prod": "prod", "max": "amax", "min": "amin"}


def accumulator_dtype(src_dtype: torch.dtype) -> torch.dtype:
    """The dtype a column reduction's partials accumulate in, kept through the workspace
    and the final step. As Inductor's own reductions do: float64 stays float64 (fp32
    partials cost it 9 digits: dw 1.3e-7 instead of 3e-16), every narrower float
    accumulates in float32."""
    return torch.float64 if src_dtype == torch.float64 else torch.float32
