"""Our environment variables, read once when the config module loads.

A bad value is remembered, not raised: importing must never fail (torch's entry point
imports us), so `config.validate()` raises it, naming the variable, when a compile or
`enable()` first uses the options.
"""

from __future__ import annotations

import os

#: How a boolean variable may be spelled (also INDUCTOR_EXT, read by the entry point).
TRUE_SPELLINGS = frozenset({"1", "true", "yes", "on"})
FALSE_SPELLINGS = frozenset({"", "0", "false", "no", "off"})


def parse_flag(name: str, value: str) -> bool:
    """A boolean environment variable's value; ValueError naming the variable otherwise."""
    spelled = value.strip().lower()
    if spelled in TRUE_SPELLINGS:
        return True
    if spelled in FALSE_SPELLINGS:
        return False
    raise ValueError(f"{name}={value!r} is not a boolean: use 1/true/yes/on or "
                     "0/false/no/off")

#: Variable -> what was wrong with its value.
ERRORS: dict[str, str] = {}
#: Option -> the variable its default came from.
SOURCES: dict[str, str] = {}


def flag(option: str, name: str, default: bool) -> bool:
    """A boolean option's default from `name` (1/true/yes/on, 0/false/no/off)."""
    value = os.environ.get(name)
    if value is None:
        return default
    SOURCES[option] = name
    try:
        return parse_flag(name, value)
    except ValueError as exc:
        ERRORS[name] = str(exc)
        return default


def text(option: str, name: str, default: str) -> str:
    """A string option's default from `name` (validated with the option)."""
    value = os.environ.get(name)
    if value is None:
        return default
    SOURCES[option] = name
    return value


def source_of(option: str, value: object) -> str:
    """' (from VAR)' when `value` is what the option's variable holds, else ''."""
    name = SOURCES.get(option)
    return f" (from {name})" if name and os.environ.get(name) == value else ""
