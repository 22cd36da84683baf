"""inductor_ext: mix-order reduction for PyTorch Inductor (CUDA and Ascend flavors).

Fuses a persistent row reduction (a norm backward's dx) with the column reductions that
read the same [M, N] tensors (dw, db) into one kernel; see README.md.
"""

from __future__ import annotations

from . import config, logs, metrics, targets  # noqa: F401  (targets: registers each)
from .plugin import MixOrderPass, disable, enable, is_enabled, options

logs.register()

__version__ = "0.2.0"


def _enable_if_torch_asked() -> None:
    """INDUCTOR_EXT=1 with this package imported before torch: torch's entry point ran
    while the package was loading (it imports torch) and left enabling to it."""
    if not globals().pop("_enable_when_loaded", False):
        return
    try:
        enable()
    except Exception as exc:  # never break the import
        import warnings

        warnings.warn(f"inductor_ext: INDUCTOR_EXT is set but enabling failed: {exc!r}",
                      RuntimeWarning, stacklevel=2)


_enable_if_torch_asked()

__all__ = ["MixOrderPass", "config", "disable", "enable", "is_enabled", "metrics", "options"]
