"""Turning the plugin on and off through Inductor's own config.

The hook is a CustomSchedulerPass set as ``torch._inductor.config._post_fusion_custom_pass``;
its uuid() hashes our sources and options, so the FX graph cache stays on and a change to
either gives a new cache key.
"""

from __future__ import annotations

import pathlib

from . import cache_hits, compat, on_enable, scheduling
from . import config as ext_config
from .compat import BaseSchedulerNode, CustomSchedulerPass, inductor_config
from .ir import unsplit
from .logs import log
from .scheduler import hook

_PASS_KEY = "_post_fusion_custom_pass"
_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent


class MixOrderPass(CustomSchedulerPass):
    """Scheduler pass that fuses norm-backward style row/column reduction pairs."""

    def __call__(self, nodes: list[BaseSchedulerNode]) -> list[BaseSchedulerNode]:
        ext_config.validate()  # a bad option is the user's error: raise, don't fall back
        return hook.run(nodes, scheduling.install_backend_wrapper)

    def uuid(self) -> str:
        # Sources and data (the NPU UB calibration table decides launch plans too).
        sources = tuple(sorted(str(p) for p in _PACKAGE_DIR.rglob("*")
                               if p.suffix in (".py", ".json")))
        from .plan import assumed_devices

        options = repr((sorted(ext_config.get_config_copy().items()),
                        sorted(assumed_devices().items())))
        return compat.get_hash_for_files(sources, options).hex()


MIX_ORDER_PASS = MixOrderPass()
_CARRIER = compat.cache_key_carrier(MIX_ORDER_PASS) if compat.CACHE_KEY_CARRIER_KEY else None

_saved_upstream: list[bool] = []


def is_enabled() -> bool:
    return isinstance(getattr(inductor_config, _PASS_KEY, None), MixOrderPass)


def options() -> dict[str, object]:
    """Inductor config entries that turn the plugin on (and upstream's mix-order off)."""
    ext_config.validate()
    unsplit.install_lowering_hooks(is_enabled)
    cache_hits.install_cache_hit_hook()
    on_enable.run_all()
    opts: dict[str, object] = {_PASS_KEY: MIX_ORDER_PASS}
    if compat.CACHE_KEY_CARRIER_KEY:
        held = getattr(inductor_config, compat.CACHE_KEY_CARRIER_KEY, None)
        if held is None or held is _CARRIER:
            opts[compat.CACHE_KEY_CARRIER_KEY] = _CARRIER
        else:  # the user's own pre-fusion pass stays; the cache then cannot see our options
            log.warning("inductor_ext: torch._inductor.config.%s is taken; the FX graph "
                        "cache will not tell inductor_ext's options apart",
                        compat.CACHE_KEY_CARRIER_KEY)
    if compat.has_upstream_mix_order():
        opts[compat.UPSTREAM_MIX_ORDER_KEY] = False
    return opts


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
