"""Tuning knobs of each target, as frozen values (the way quack keeps per-arch configs).

Each target's knobs are a frozen dataclass in its package (targets/<name>/tuning.py), with
the measurement behind each default; a user, test or bench changes one
through `inductor_ext.config.tuning` (`{"cuda": {"register_tile": 16}}`), which is part
of the pass's cache key, so a changed knob never reuses a kernel planned without it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

#: Each target's tuning class, registered with its planner (`plan.register_planner`).
TUNINGS: dict[str, type] = {}


def validate(overrides: object) -> None:
    """ValueError naming the first bad entry of `inductor_ext.config.tuning`."""
    if not isinstance(overrides, Mapping):
        raise ValueError("inductor_ext.config.tuning must be a dict {target: {knob: value}}, "
                         f"got {overrides!r}")
    for target, knobs in overrides.items():
        if target not in TUNINGS:
            raise ValueError(f"inductor_ext.config.tuning: unknown target {target!r}; "
                             f"known: {sorted(TUNINGS)}")
        make(target, knobs)


def make(target: str, knobs: Mapping[str, Any] | None = None) -> Any:
    """The target's tuning with `knobs` replaced (each checked against the default's
    type: a bool stays a bool, an int an int, a float accepts ints)."""
    cls = TUNINGS[target]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    default = cls()
    for name, value in (knobs or {}).items():
        if name not in fields:
            raise ValueError(f"inductor_ext.config.tuning[{target!r}]: unknown knob {name!r}; "
                             f"known: {sorted(fields)}")
        want = type(getattr(default, name))
        ok = (isinstance(value, bool) if want is bool
              else isinstance(value, (int, float)) and not isinstance(value, bool)
              if want is float else isinstance(value, want) and not isinstance(value, bool)
              if want is int else isinstance(value, want))
        if not ok:
            kind = "a float or an int" if want is float else (
                f"{'an' if want.__name__[0] in 'aeiou' else 'a'} {want.__name__}")
            raise ValueError(f"inductor_ext.config.tuning[{target!r}][{name!r}] must be "
                             f"{kind}, got {value!r}")
    return dataclasses.replace(default, **dict(knobs or {}))


def parse_settings(target: str, spec: str) -> dict[str, Any]:
    """`'name=value;name=value'` (bench command lines) -> knob overrides, typed by the
    defaults (`True`/`False` for bools)."""
    default = TUNINGS[target]()
    out: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in spec.split(";"))):
        name, sep, text = item.partition("=")
        if not sep or not hasattr(default, name):
            raise ValueError(f"--setting: {item!r} is not KNOB=VALUE with a knob of "
                             f"{TUNINGS[target].__name__}")
        kind = type(getattr(default, name))
        if kind is bool:
            if text not in ("True", "False"):
                raise ValueError(f"--setting: {name} takes True or False, not {text!r}")
            out[name] = text == "True"
        else:
            try:
                out[name] = kind(text)
            except ValueError:
                raise ValueError(f"--setting: {name} takes a {kind.__name__}, "
                                 f"not {text!r}") from None
    make(target, out)
    return out
