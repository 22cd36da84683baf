"""The user options planning reads, as one value taken from `inductor_ext.config` once per
group (planning itself never reads the config module)."""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import compat
from .. import config as ext_config
from . import tuning as tuning_mod


@dataclasses.dataclass(frozen=True)
class PlanOptions:
    split_size: int | None = None
    max_persistent_n: int = 16384
    ascend_vector_cores: int | None = None
    ascend_ub_bytes: int | None = None  # None: the device's (torch_npu's by SoC)
    #: The baseline's own mix-order gates ("none", "strict", "relaxed"): what stock
    #: torch.compile would fuse without us (`compat.upstream_mix_order_gates`).
    upstream_gates: str = "strict"


def options_from_config() -> PlanOptions:
    return PlanOptions(split_size=ext_config.split_size,
                       max_persistent_n=ext_config.max_persistent_n,
                       ascend_vector_cores=ext_config.ascend_vector_cores,
                       ascend_ub_bytes=ext_config.ascend_ub_bytes,
                       upstream_gates=compat.upstream_mix_order_gates())


def tuning_from_config(target: str) -> Any:
    """The target's tuning with the overrides in `inductor_ext.config.tuning`."""
    return tuning_mod.make(target, dict(ext_config.tuning).get(target))
