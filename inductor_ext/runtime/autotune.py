"""The fused kernel's decorator when a flavor offers several launch configs.

Inductor's `fixed_config` takes one config; this takes the flavor's bounded list (from the
kernel's inductor_meta) and hands it to Inductor's CachingAutotuner, which benchmarks each
once on first launch and caches the winner like any Inductor kernel. The workspace is the
same for every config; rows per iteration, warps, pipelining stages and, for persistent
rows, the row-program count (`RPROGRAMS`) differ.

Before timing, configs whose registers would run the grid in more waves than the plan
allows (`LaunchPlan.max_extra_waves`) are dropped: at short kernels a second wave costs
more than Inductor's timing noise shows. Configs that spill registers are dropped first
and count for no wave minimum: Inductor times a spilling config as `inf`, so a filter that
kept only spilling configs would leave the autotuner a blind pick; when every config
spills, only the fewest spilling are kept.
Of one config's row-program counts only those of its fewest waves are timed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from .. import compat
from ..compat import (
    CachingAutotuner,
    DebugAutotuner,
    DeviceProperties,
    HeuristicType,
    cached_autotune,
    config_from_dict,
)
from ..logs import log
from ..plan.types import PROGRAMS_KEY, LaunchPlan

if TYPE_CHECKING:
    # Type checkers see the autotuner class this is always mixed into; at run time the
    # mixin's only base stays `object`.
    _AutotunerBase = CachingAutotuner
else:
    _AutotunerBase = object

#: inductor_meta key holding the list of config dicts.
CONFIGS_KEY = "inductor_ext_configs"
#: inductor_meta key holding the plan (LaunchPlan as a dict).
PLAN_KEY = "inductor_ext_plan"
#: Registers are allocated to a warp in units of this many.
_REGISTER_UNIT = 256
#: Inductor's default for `inductor_meta["spill_threshold"]` on CUDA: a config spilling
#: more registers than this is not timed (its time is `inf`).
DEFAULT_SPILL_THRESHOLD = 16


def resident_per_sm(n_regs: int | None, num_warps: int, props: DeviceProperties) -> int | None:
    """Programs of this config one SM holds at once, by registers and thread slots
    (None when the compiler or the device did not say)."""
    regs_per_sm = getattr(props, "regs_per_multiprocessor", None)
    threads_per_sm = getattr(props, "max_threads_per_multi_processor", None)
    if not n_regs or not regs_per_sm or not threads_per_sm:
        return None
    warp_size = getattr(props, "warp_size", None) or 32
    regs_per_warp = math.ceil(n_regs * warp_size / _REGISTER_UNIT) * _REGISTER_UNIT
    by_registers = regs_per_sm // regs_per_warp // num_warps
    by_threads = threads_per_sm // (num_warps * warp_size)
    return min(by_registers, by_threads) or None


def waves(programs: int, n_regs: int | None, num_warps: int, props: DeviceProperties) -> int | None:
    """Waves the grid runs in (None when unknown)."""
    per_sm = resident_per_sm(n_regs, num_warps, props)
    sms = getattr(props, "multi_processor_count", None)
    if per_sm is None or not sms:
        return None
    return -(-programs // (per_sm * sms))


def launched_programs(launcher: Any, plan: LaunchPlan) -> int:
    """Programs the launcher's config launches (its row-program count when the plan lets
    the configs choose one)."""
    return plan.programs_of(tuple(launcher.config.kwargs.items())) * plan.column_groups


def _code_of(launcher: Any) -> tuple[Any, ...]:
    """A launcher's config without its row-program count (the code it runs)."""
    kwargs = {k: v for k, v in launcher.config.kwargs.items() if k != PROGRAMS_KEY}
    return (tuple(sorted(kwargs.items())), launcher.config.num_warps,
            launcher.config.num_stages)


def spills(launcher: Any, threshold: int) -> bool:
    """The launcher spills more registers than Inductor's autotuner times."""
    n_spills = getattr(launcher, "n_spills", None)
    return n_spills is not None and n_spills > threshold


def fewest_spills(launchers: Sequence[Any], programs: int) -> list[Any]:
    """Every config spills: the ones spilling the fewest registers. Inductor times all of
    them as `inf` and takes the first, so without this the pick is the list's order."""
    least = min(launcher.n_spills for launcher in launchers)
    kept = [launcher for launcher in launchers if launcher.n_spills == least]
    log.debug("mix-order kernel, %d programs: every config spills registers; timing only "
              "the fewest spilling, %s", programs,
              " ".join(describe_launcher(launcher) for launcher in kept))
    return kept


def within_planned_waves(launchers: Sequence[Any], plan: LaunchPlan | None,
                         props: DeviceProperties, spill_threshold: int = DEFAULT_SPILL_THRESHOLD
                         ) -> list[Any]:
    """The launchers whose waves are at most the fewest plus the plan's allowance (the
    ones with unknown waves stay; all stay when none is known or the plan sets none).
    Spilling launchers go first; when every launcher spills, all but the fewest spilling."""
    if plan is None or plan.max_extra_waves is None or len(launchers) < 2:
        return list(launchers)
    allowance, programs = plan.max_extra_waves, plan.grid
    if not programs:
        return list(launchers)
    spilling = [launcher for launcher in launchers if spills(launcher, spill_threshold)]
    if spilling and len(spilling) < len(launchers):
        log.debug("mix-order kernel, %d programs: configs %s spill registers; not timed",
                  programs, " ".join(describe_launcher(launcher) for launcher in spilling))
        launchers = [launcher for launcher in launchers if launcher not in spilling]
    elif spilling:
        launchers = fewest_spills(launchers, programs)
    counted = [(launcher, waves(launched_programs(launcher, plan),
                                getattr(launcher, "n_regs", None), launcher.config.num_warps,
                                props))
               for launcher in launchers]
    known = [w for _, w in counted if w is not None]
    if not known:
        return list(launchers)
    limit = min(known) + allowance
    # A config is timed only at its row-program counts of the fewest waves: one more wave
    # of the same code brings only more workspace rows to fold.
    fewest: dict[tuple[Any, ...], int] = {}
    for launcher, w in counted:
        if w is not None:
            key = _code_of(launcher)
            fewest[key] = min(w, fewest.get(key, w))
    kept = [launcher for launcher, w in counted
            if w is None or w <= min(limit, fewest[_code_of(launcher)])]
    if len(kept) < len(launchers):
        log.debug("mix-order kernel, %d programs: configs %s run in more than %d waves, or "
                  "in more than their code does at another program count; not timed",
                  programs,
                  " ".join(describe_launcher(launcher) for launcher, _ in counted
                           if launcher not in kept),
                  limit)
    return kept


def describe_launcher(launcher: Any) -> str:
    """One config as the logs show it: its kwargs, warps, registers and spills (which one
    a kernel runs is otherwise only in Inductor's cache)."""
    kwargs = ", ".join(f"{k}={v}" for k, v in sorted(launcher.config.kwargs.items()))
    regs = getattr(launcher, "n_regs", None)
    spilled = getattr(launcher, "n_spills", None)
    return (f"[{kwargs}, num_warps={launcher.config.num_warps}"
            f"{f', regs={regs}' if regs is not None else ''}"
            f"{f', spills={spilled}' if spilled else ''}]")


class _PlannedWaves(_AutotunerBase):
    """Mixin for Inductor's autotuners: time only the configs within the planned waves."""

    def benchmark_all_configs(self, *args: Any, **kwargs: Any) -> Any:
        # torch 2.15 types inductor_meta as a TypedDict without our keys (a dict before).
        meta = cast("Mapping[str, Any] | None", self.inductor_meta.get(PLAN_KEY))
        plan = LaunchPlan.from_meta(meta) if meta else None
        threshold = self.inductor_meta.get("spill_threshold", DEFAULT_SPILL_THRESHOLD)
        self.launchers = within_planned_waves(self.launchers, plan, self.device_props,
                                              threshold)
        timings = super().benchmark_all_configs(*args, **kwargs)
        if plan is not None:
            log.debug("mix-order kernel %s, %d programs: timed %s",
                      self.inductor_meta.get("kernel_name", "?"), plan.grid,
                      describe_timings(timings))
        return timings


def describe_timings(timings: dict[Any, float]) -> str:
    """Configs fastest first with their times: a time off the plan's prediction is often
    the config the autotuner picked."""
    return "; ".join(f"{describe_launcher(launcher)} {ms:.4g} ms"
                     for launcher, ms in sorted(timings.items(), key=lambda item: item[1]))


class MixOrderAutotuner(_PlannedWaves, CachingAutotuner):
    pass


class MixOrderDebugAutotuner(_PlannedWaves, DebugAutotuner):
    pass


def mix_order_autotune(config: dict[str, Any], filename: str, triton_meta: dict[str, Any],
                       inductor_meta: dict[str, Any]) -> Any:
    configs = inductor_meta.get(CONFIGS_KEY) or [config]
    return cached_autotune(
        None,
        [config_from_dict(dict(c)) for c in configs],
        # TypedDicts (TritonMeta, InductorMeta) in torch 2.15, plain dicts before.
        triton_meta=cast(Any, triton_meta),
        inductor_meta=cast(Any, inductor_meta),
        heuristic_type=HeuristicType.FIXED,
        filename=filename,
        **compat.autotuner_classes(MixOrderAutotuner, MixOrderDebugAutotuner),
    )
