"""torch.backends entry point: with INDUCTOR_EXT=1, enable inductor_ext when torch loads.

Kept outside the package so that loading this entry point imports nothing while
INDUCTOR_EXT is unset or empty (the package, and with it Inductor, loads only when the
variable is set, to read it with the package's own rules); any failure becomes a warning,
never a broken ``import torch``.
"""

from __future__ import annotations

import os
import sys
import warnings

#: Set on the inductor_ext module when torch loads this entry point while that module is
#: still being imported (it imports torch first): the package then enables itself at the
#: end of its own import, as `enable` does not exist yet.
ENABLE_WHEN_LOADED = "_enable_when_loaded"


def load() -> None:
    value = os.environ.get("INDUCTOR_EXT", "")
    if not value.strip():
        return
    try:
        from inductor_ext.envvars import parse_flag

        wanted = parse_flag("INDUCTOR_EXT", value)
    except ValueError as exc:
        warnings.warn(f"inductor_ext stays off: {exc}", RuntimeWarning, stacklevel=2)
        return
    except Exception as exc:  # never break `import torch`
        warnings.warn(f"inductor_ext: INDUCTOR_EXT is set but loading failed: {exc!r}",
                      RuntimeWarning, stacklevel=2)
        return
    if not wanted:
        return
    loading = sys.modules.get("inductor_ext")
    if loading is not None and not hasattr(loading, "enable"):
        setattr(loading, ENABLE_WHEN_LOADED, True)
        return
    try:
        import inductor_ext

        inductor_ext.enable()
    except Exception as exc:  # never break `import torch`
        warnings.warn(f"inductor_ext: INDUCTOR_EXT is set but enabling failed: {exc!r}",
                      RuntimeWarning, stacklevel=2)
