"""torch.backends entry point: with INDUCTOR_EXT=1, enable inductor_ext when torch loads.

Kept outside the package so that loading this entry point imports nothing heavy; any
failure becomes a warning, never a broken ``import torch``.
"""

import os
import warnings


def load() -> None:
    if os.environ.get("INDUCTOR_EXT", "0") != "1":
        return
    try:
        import inductor_ext

        inductor_ext.enable()
    except Exception as exc:  # never break `import torch`
        warnings.warn(f"inductor_ext: INDUCTOR_EXT=1 but enabling failed: {exc!r}",
                      RuntimeWarning, stacklevel=2)
