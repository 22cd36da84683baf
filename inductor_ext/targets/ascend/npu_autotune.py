"""The decorator of fused kernels built on torch_npu's kernel class.

torch_npu's own decorators (``persistent_reduction`` ...) generate their configs from its
tile generator, which would also pick X0BLOCK and with it the grid. Ours takes the plan's
configs (rows per block, multibuffer, compile mode; already checked against the
calibrated UB estimate) from the kernel's inductor_meta and hands them to torch_npu's
``cached_autotune``: torch_npu's NPUCachingAutotuner compiles and times them on first
launch, and its grid code builds the fixed grid of the plan.
"""

from __future__ import annotations

from typing import Any

from ...compat import HeuristicType
from ...runtime.autotune import CONFIGS_KEY
from . import torch_npu_seams


def npu_mix_order_autotune(size_hints: Any, reduction_hint: Any = None,
                           filename: str | None = None, triton_meta: Any = None,
                           inductor_meta: dict[str, Any] | None = None) -> Any:
    import triton

    # Loaded already: the kernel module imports torch_npu's runtime before this line.
    heuristics = torch_npu_seams.npu_heuristics()
    meta = dict(inductor_meta or {})
    meta["reduction_hint"] = reduction_hint
    configs = [triton.Config(dict(cfg), num_warps=1, num_stages=1)
               for cfg in meta.get(CONFIGS_KEY) or ()]
    if not configs:
        raise RuntimeError("mix-order NPU kernel without launch configs in its inductor_meta")
    return heuristics.cached_autotune(size_hints, configs, triton_meta=triton_meta,
                                      inductor_meta=meta, filename=filename,
                                      heuristic_type=HeuristicType.PERSISTENT_REDUCTION)
