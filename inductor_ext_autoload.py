"""torch.backends entry point: with INDUCTOR_EXT=1, enable inductor_ext when torch loads.

Kept outside the package so that loading this entry point imports nothing heavy; any
failure becomes a warning, never a broken ``import torch``. It also holds the spelling
rules of our boolean environment variables, which the package's config reads too.
"""

from __future__ import annotations

import os
import warnings

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


def load() -> None:
    try:
        wanted = parse_flag("INDUCTOR_EXT", os.environ.get("INDUCTOR_EXT", "0"))
    except ValueError as exc:
        warnings.warn(f"inductor_ext stays off: {exc}", RuntimeWarning, stacklevel=2)
        return
    if not wanted:
        return
    try:
        import inductor_ext

        inductor_ext.enable()
    except Exception as exc:  # never break `import torch`
        warnings.warn(f"inductor_ext: INDUCTOR_EXT is set but enabling failed: {exc!r}",
                      RuntimeWarning, stacklevel=2)
