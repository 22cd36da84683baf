"""What a target needs done each time the plugin is turned on (`inductor_ext.options()` /
`enable()`), registered by the target so the plugin names none.

Why: some preparation can only happen once the vendor's package is loaded (Ascend's
ops exist only then), and the user may import it after inductor_ext; turning the plugin
on is the last moment before a compile traces its graph.
"""

from __future__ import annotations

from collections.abc import Callable

from .diagnostics import warn_once

_HOOKS: list[Callable[[], object]] = []


def register(hook: Callable[[], object]) -> None:
    """Run `hook` at every `options()` (idempotent hooks only; registered once each)."""
    if hook not in _HOOKS:
        _HOOKS.append(hook)


def run_all() -> None:
    """Every registered hook; one that fails warns once and never stops the plugin."""
    for hook in _HOOKS:
        try:
            hook()
        except Exception as exc:
            name = getattr(hook, "__qualname__", repr(hook))
            warn_once(f"on_enable:{name}", "inductor_ext: %s failed while turning the "
                      "plugin on: %s", name, exc)
