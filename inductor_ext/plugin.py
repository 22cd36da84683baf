"""Turning the plugin on and off through Inductor's own config.

The hook is a CustomSchedulerPass set as ``torch._inductor.config._post_fusion_custom_pass``;
its uuid() hashes our sources and options, so the FX graph cache stays on and a change to
either gives a new cache key.

Options for one compile (``options(always_fuse=True)``) ride on a pass object of their own:
it patches ``inductor_ext.config`` with them while it runs, and its uuid() hashes them. Every
read of the options for a compile happens inside the pass (matching, planning, the launch
plan; codegen and the runtime take what the plan carries), except the ones named in
`_READ_BEFORE_THE_PASS`, which `options()` therefore refuses for one compile.
"""

from __future__ import annotations

import contextlib
import pathlib
import weakref
from typing import Any

from . import backend_wrapper, cache_hits, compat, on_enable
from . import config as ext_config
from .compat import BaseSchedulerNode, CustomSchedulerPass, inductor_config
from .groups import unsplit
from .logs import log
from .scheduler import hook

_PASS_KEY = "_post_fusion_custom_pass"
_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent


#: Options read while a graph is traced, before the pass runs: the pass cannot apply them
#: for one compile, so `options()` refuses them (with what to do instead).
_READ_BEFORE_THE_PASS = ("decompose_npu_rms_norm",)


class MixOrderPass(CustomSchedulerPass):
    """Scheduler pass that fuses norm-backward style row/column reduction pairs.

    `overrides` ({option: value} of `inductor_ext.config`, checked by `options()`) are in
    force while this pass runs, and part of its uuid(); other compiles do not see them."""

    def __init__(self, overrides: dict[str, Any] | None = None) -> None:
        self._overrides = dict(overrides or {})

    @property
    def overrides(self) -> dict[str, Any]:
        return dict(self._overrides)

    def __call__(self, nodes: list[BaseSchedulerNode]) -> list[BaseSchedulerNode]:
        with self._options_in_force():
            ext_config.validate()  # a bad option is the user's error: raise, don't fall back
            return hook.run(nodes, backend_wrapper.install_backend_wrapper)

    def _options_in_force(self) -> contextlib.AbstractContextManager[Any]:
        if not self._overrides:
            return contextlib.nullcontext()
        # a copy: nothing the pass does to a list or dict reaches the pass's own
        return ext_config.patch(ext_config.checked(self._overrides, repr(self)))

    def uuid(self) -> str:
        # Sources and data (the NPU UB calibration table decides launch plans too).
        sources = tuple(sorted(str(p) for p in _PACKAGE_DIR.rglob("*")
                               if p.suffix in (".py", ".json")))
        from .plan import assumed_devices

        # The options this pass runs with: two passes that would run alike share a key.
        in_force = {**ext_config.get_config_copy(), **self._overrides}
        options = repr((sorted(in_force.items()), sorted(assumed_devices().items())))
        return compat.get_hash_for_files(sources, options).hex()

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self._overrides.items())
        return f"{type(self).__name__}({shown})"


MIX_ORDER_PASS = MixOrderPass()
_CARRIER = compat.cache_key_carrier(MIX_ORDER_PASS) if compat.CACHE_KEY_CARRIER_KEY else None
#: Every carrier this module made (one per pass with overrides too), to tell ours apart.
_OUR_CARRIERS: weakref.WeakSet[Any] = weakref.WeakSet([_CARRIER] if _CARRIER else [])

_saved_upstream: list[bool] = []


def is_enabled() -> bool:
    return isinstance(getattr(inductor_config, _PASS_KEY, None), MixOrderPass)


def options(**overrides: Any) -> dict[str, object]:
    """Inductor config entries that turn the plugin on (and upstream's mix-order off).

    Keyword arguments are `inductor_ext.config` options, as `inductor_ext.config.patch`
    takes them, in force only for the compiles given these entries:
    ``torch.compile(fn, options=inductor_ext.options(always_fuse=True))``. An unknown
    option is a TypeError and a bad value a ValueError, each naming the option, here."""
    pass_ = MIX_ORDER_PASS
    if overrides:
        overrides = ext_config.checked(overrides, "inductor_ext.options()")
        for name in _READ_BEFORE_THE_PASS:
            if name in overrides:
                raise ValueError(
                    f"inductor_ext.options(): {name} is read while the graph is traced, "
                    f"before the plugin's pass runs, so it cannot be set for one compile; "
                    f"set inductor_ext.config.{name}, or run the compiled function's first "
                    f"call inside inductor_ext.config.patch({name}=...)")
        pass_ = MixOrderPass(overrides)
    ext_config.validate()
    unsplit.install_lowering_hooks(is_enabled)
    cache_hits.install_cache_hit_hook()
    on_enable.run_all()
    opts: dict[str, object] = {_PASS_KEY: pass_}
    if compat.CACHE_KEY_CARRIER_KEY:
        held = getattr(inductor_config, compat.CACHE_KEY_CARRIER_KEY, None)
        if held is None or held in _OUR_CARRIERS:
            opts[compat.CACHE_KEY_CARRIER_KEY] = _carrier_of(pass_)
        else:  # the user's own pre-fusion pass stays; the cache then cannot see our options
            log.warning("inductor_ext: torch._inductor.config.%s is taken; the FX graph "
                        "cache will not tell inductor_ext's options apart",
                        compat.CACHE_KEY_CARRIER_KEY)
    if compat.has_upstream_mix_order():
        opts[compat.UPSTREAM_MIX_ORDER_KEY] = False
    return opts


def _carrier_of(pass_: MixOrderPass) -> Any:
    """torch 2.11: the pre-fusion pass that carries `pass_`'s uuid into the cache key."""
    if pass_ is MIX_ORDER_PASS:
        return _CARRIER
    carrier = compat.cache_key_carrier(pass_)
    _OUR_CARRIERS.add(carrier)
    return carrier


def enable() -> None:
    """Turn the plugin on for every later compile in this process (idempotent)."""
    current = getattr(inductor_config, _PASS_KEY, None)
    if current is not None and not isinstance(current, MixOrderPass):
        raise RuntimeError(
            f"torch._inductor.config.{_PASS_KEY} is already set to {current!r}; "
            "inductor_ext needs that hook. Unset it or compose the passes yourself.")
    opts = options()
    if not is_enabled() and compat.has_upstream_mix_order():
        _saved_upstream[:] = [inductor_config.triton.mix_order_reduction]
    for key, value in opts.items():
        _set(key, value)


def disable() -> None:
    """Turn the plugin off and restore upstream's mix-order setting (idempotent)."""
    if not is_enabled():
        return
    setattr(inductor_config, _PASS_KEY, None)
    if compat.CACHE_KEY_CARRIER_KEY and getattr(inductor_config,
                                                compat.CACHE_KEY_CARRIER_KEY) is _CARRIER:
        setattr(inductor_config, compat.CACHE_KEY_CARRIER_KEY, None)
    if _saved_upstream and compat.has_upstream_mix_order():
        inductor_config.triton.mix_order_reduction = _saved_upstream.pop()


def _set(key: str, value: object) -> None:
    obj = inductor_config
    *parents, leaf = key.split(".")
    for part in parents:
        obj = getattr(obj, part)
    setattr(obj, leaf, value)
