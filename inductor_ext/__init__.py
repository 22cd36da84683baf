"""inductor_ext: mix-order reduction for PyTorch Inductor (CUDA and Ascend flavors).

Fuses a persistent row reduction (a norm backward's dx) with the column reductions that
read the same [M, N] tensors (dw, db) into one kernel; see README.md.
"""

from __future__ import annotations

from . import config, logs, metrics, targets  # noqa: F401  (targets: registers each)
from .plugin import MixOrderPass, disable, enable, is_enabled, options

logs.register()

__version__ = "0.2.0"

__all__ = ["MixOrderPass", "config", "disable", "enable", "is_enabled", "metrics", "options"]
