"""The fused kernel's decorator when a flavor offers several launch configs.

Inductor's `fixed_config` takes one config; this takes the flavor's bounded list (from the
kernel's inductor_meta) and hands it to Inductor's CachingAutotuner, which benchmarks each
once on first launch and caches the winner like any Inductor kernel. The grid (programs,
hence the workspace) is the same for every config; only rows per iteration, warps and
pipelining stages differ.
"""

from __future__ import annotations

from typing import Any

from torch._inductor.runtime.triton_heuristics import (
    HeuristicType,
    cached_autotune,
    config_from_dict,
)

#: inductor_meta key holding the list of config dicts.
CONFIGS_KEY = "inductor_ext_configs"


def mix_order_autotune(config: dict[str, Any], filename: str, triton_meta: dict[str, Any],
                       inductor_meta: dict[str, Any]) -> Any:
    configs = inductor_meta.get(CONFIGS_KEY) or [config]
    return cached_autotune(
        None,
        [config_from_dict(dict(c)) for c in configs],
        triton_meta=triton_meta,
        inductor_meta=inductor_meta,
        heuristic_type=HeuristicType.FIXED,
        filename=filename,
    )
