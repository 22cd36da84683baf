"""Planning's inputs from the user's config: the options and a target's tuning, as values
taken once per group (planning itself never reads `inductor_ext.config`)."""

from __future__ import annotations

from typing import Any

from . import compat
from . import config as ext_config
from .plan import knobs as tuning_mod
from .plan.options import PlanOptions


def plan_options() -> PlanOptions:
    return PlanOptions(split_size=ext_config.split_size,
                       max_persistent_n=ext_config.max_persistent_n,
                       ascend_vector_cores=ext_config.ascend_vector_cores,
                       ascend_ub_bytes=ext_config.ascend_ub_bytes,
                       upstream_gates=compat.upstream_mix_order_gates())


def tuning_for(target: str) -> Any:
    """The target's tuning with the overrides in `inductor_ext.config.tuning`."""
    return tuning_mod.make(target, dict(ext_config.tuning).get(target))
