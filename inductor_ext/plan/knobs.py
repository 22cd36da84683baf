"""Tuning knobs of each target, as frozen values (the way quack keeps per-arch configs).

Each target's knobs are a frozen dataclass in its package (targets/<name>/tuning.py), with
the reason for each default and the range it takes (`knob`); a user, test or bench changes
one through `inductor_ext.config.tuning` (`{"cuda": {"register_tile": 16}}`), which is
part of the pass's cache key, so a changed knob never reuses a kernel planned without
it. Every construction checks every knob against its range (`Tuning`), so a bad
value fails where it is set, naming the knob, instead of deep inside a compile."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

#: Each target's tuning class, registered with its planner (`plan.register_planner`).
TUNINGS: dict[str, type] = {}

#: The key of a knob's `Range` in its dataclass field's metadata.
RANGE = "inductor_ext.range"

_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True)
class Range:
    """The values one knob takes: its default's type, and bounds (`low` / `above`,
    `high`), a power of two, or a fixed set of `choices`. Declared beside the default
    (`knob`), so the planner's needs (a tile a power of two, a share in (0, 1]) are
    written once and checked where the knob is set."""

    kind: type
    low: float | None = None  # value >= low
    above: float | None = None  # value > above
    high: float | None = None  # value <= high
    pow2: bool = False  # a power of two (and 0, where `low` is 0: "0: never")
    choices: tuple[Any, ...] = ()

    def kind_problem(self, value: object) -> str | None:
        """'must be an int' when `value` is not of the knob's type (a bool stays a bool,
        an int an int, a float takes ints too)."""
        if self.kind is bool:
            ok = isinstance(value, bool)
        elif self.kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, self.kind) and not isinstance(value, bool)
        if ok:
            return None
        name = "a float or an int" if self.kind is float else (
            f"{'an' if self.kind.__name__[0] in 'aeiou' else 'a'} {self.kind.__name__}")
        return f"must be {name}, got {value!r}"

    def admits(self, value: Any) -> bool:
        """Of the knob's type and in its range."""
        if self.kind_problem(value) is not None:
            return False
        if self.choices:
            return value in self.choices
        if self.kind is bool:
            return True
        return ((self.low is None or value >= self.low)
                and (self.above is None or value > self.above)
                and (self.high is None or value <= self.high)
                and (not self.pow2 or value == 0 or value & (value - 1) == 0))

    def describe(self) -> str:
        """The range in words: '>= 1', 'in (0, 1]', 'a power of two >= 256',
        "'strided' or 'contiguous'"."""
        if self.choices:
            return _either(self.choices)
        low = self.low
        if self.pow2:
            low = None if low is not None and low <= 1 else low
        lower = (f"[{_num(low)}" if low is not None
                 else f"({_num(self.above)}" if self.above is not None else None)
        if lower is not None and self.high is not None:
            bounds = f"in {lower}, {_num(self.high)}]"
        elif lower is not None:
            bounds = f"{'>=' if lower[0] == '[' else '>'} {lower[1:]}"
        else:
            bounds = f"<= {_num(self.high)}" if self.high is not None else ""
        if not self.pow2:
            return f"{'an int' if self.kind is int else 'a number'} {bounds}".strip()
        power = "0 or a power of two" if self.low == 0 else "a power of two"
        return f"{power} {bounds}".strip()

    def problem(self, value: object) -> str | None:
        """'must be ..., got ...' when `value` is not one the knob takes, else None."""
        wrong_kind = self.kind_problem(value)
        if wrong_kind is not None:
            return wrong_kind
        return None if self.admits(value) else f"must be {self.describe()}, got {value!r}"


def _either(values: Sequence[object]) -> str:
    """"'a', 'b' or 'c'"."""
    words = [repr(value) for value in values]
    return ", ".join(words[:-1]) + f" or {words[-1]}" if len(words) > 1 else words[0]


def _num(value: float | None) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def knob(default: _T, *, low: float | None = None, above: float | None = None,
         high: float | None = None, pow2: bool = False,
         choices: tuple[Any, ...] = ()) -> _T:
    """A knob's default and its range, as a dataclass field (`x: int = knob(64, low=1)`;
    `pow2=True` alone: a power of two >= 1). A number must say its range and a str its
    choices (a bool takes True or False), so no knob is added that a planner could get
    out of range."""
    kind = type(default)
    if pow2 and low is None and above is None:
        low = 1  # 0 only where said (`low=0`: "0: never")
    if pow2 and kind is not int:
        raise TypeError(f"only an int knob can be a power of two (default {default!r})")
    if kind is str and not choices:
        raise TypeError(f"a str knob needs its choices (default {default!r})")
    if kind in (int, float) and low is None and above is None and high is None:
        raise TypeError(f"a number knob needs its range (default {default!r})")
    declared = Range(kind=kind, low=low, above=above, high=high, pow2=pow2,
                     choices=choices)
    if not declared.admits(default):
        raise TypeError(f"default {default!r} outside its range {declared.describe()}")
    field: _T = dataclasses.field(default=default, metadata={RANGE: declared})
    return field


def range_of(field: dataclasses.Field[Any]) -> Range | None:
    """The range a knob's field declares (`knob`), None for a plain default."""
    declared = field.metadata.get(RANGE)
    return declared if isinstance(declared, Range) else None


class Tuning:
    """Base of each target's frozen knobs (a dataclass of `knob` fields): every value is
    checked against its knob's range when an instance is made (the defaults, `make`,
    `dataclasses.replace`), so a bad knob is one ValueError naming it."""

    #: The target's name in `inductor_ext.config.tuning` (the error names the knob by it).
    TARGET: ClassVar[str] = ""

    def __post_init__(self) -> None:
        """The one check of every knob, for every target: the first out of range raises."""
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            declared = range_of(field) or Range(kind=type(field.default))
            problem = declared.problem(getattr(self, field.name))
            if problem is not None:
                raise ValueError(f"inductor_ext.config.tuning[{self.TARGET!r}]"
                                 f"[{field.name!r}] {problem}")


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


def unknown_knob(target: str, name: object) -> str:
    """'unknown knob ...' with the closest knobs' names (not all of them: the CUDA
    target has some seventy), where the class lists the rest."""
    cls = TUNINGS[target]
    names = [field.name for field in dataclasses.fields(cls)]
    closest = difflib.get_close_matches(str(name), names, n=3, cutoff=0.6)
    hint = (f"did you mean {_either(closest)}?" if closest
            else f"the knobs are the fields of {cls.__module__}.{cls.__qualname__}")
    return f"unknown knob {str(name)[:80]!r}; {hint}"


def make(target: str, knobs: Mapping[str, Any] | None = None) -> Any:
    """The target's tuning with `knobs` replaced, each checked against its knob's type
    and range (`Tuning`)."""
    cls = TUNINGS[target]
    fields = {f.name for f in dataclasses.fields(cls)}
    if not isinstance(knobs, (Mapping, type(None))):
        raise ValueError(f"inductor_ext.config.tuning[{target!r}] must be a dict "
                         f"{{knob: value}}, got {knobs!r}")
    for name in knobs or {}:
        if name not in fields:
            raise ValueError(f"inductor_ext.config.tuning[{target!r}]: "
                             f"{unknown_knob(target, name)}")
    return cls(**dict(knobs or {}))


def parse_settings(target: str, spec: str) -> dict[str, Any]:
    """`'name=value;name=value'` (bench command lines) -> knob overrides, typed by the
    defaults (`True`/`False` for bools)."""
    default = TUNINGS[target]()
    fields = {f.name for f in dataclasses.fields(default)}
    out: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in spec.split(";"))):
        name, sep, text = item.partition("=")
        if not sep or name not in fields:
            raise ValueError(f"--setting: {item!r} is not KNOB=VALUE with a knob of "
                             f"{TUNINGS[target].__name__}"
                             + (f" ({unknown_knob(target, name)})" if sep else ""))
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
