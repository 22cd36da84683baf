"""User-facing options of inductor_ext, built on PyTorch's config-module machinery.

Every option supports ``inductor_ext.config.patch(...)``; ``always_fuse`` and ``target``
take their defaults from ``INDUCTOR_EXT_ALWAYS_FUSE`` / ``INDUCTOR_EXT_TARGET``. Values are
validated by :func:`validate` when a compile uses them, so a bad value (or a bad
environment variable) fails loudly with its name instead of silently falling back.
"""


import sys
from typing import TYPE_CHECKING, Optional

from torch.utils._config_module import install_config_module

from . import envvars
from . import plan as planning  # a module: the config machinery skips it

#: Fuse every legal pair, skipping the profitability model (tests use it on small shapes).
always_fuse: bool = envvars.flag("always_fuse", "INDUCTOR_EXT_ALWAYS_FUSE", False)

#: Rows each program owns (a multiple of BLOCK_M is used). ``None`` lets the target flavor
#: choose from the device (programs = SMs x k on CUDA, vector cores on Ascend).
split_size: Optional[int] = None

#: Codegen flavor: "auto" picks from the device ("npu" -> "ascend", else "cuda");
#: "cuda" or "ascend" force that flavor on any device (both run in the CPU interpreter).
target: str = envvars.text("target", "INDUCTOR_EXT_TARGET", "auto")

#: Largest row length (N) the fused kernel keeps persistent (whole row in registers);
#: longer rows are walked in column tiles (sum partials only; others are declined).
max_persistent_n: int = 16384

#: Ascend flavor: vector-core count used for the grid when torch_npu cannot be asked.
ascend_vector_cores: Optional[int] = None

#: Ascend flavor: Unified Buffer bytes per core. None: what torch_npu reports for the SoC
#: (192 KiB on Atlas A2/A3, 256 KiB on Ascend950), 192 KiB when torch_npu is not loaded.
ascend_ub_bytes: Optional[int] = None

#: Ascend (torch_npu's default backend): decompose ``torch_npu.npu_rms_norm``'s backward
#: (``npu_rms_norm_backward``, one aclnnRmsNormGrad) into ATen ops Inductor lowers (dx, and
#: dgamma kept float32 as the CANN op returns it), so those norms reach the pass and fuse.
#: Off by default because it has not been measured against aclnnRmsNormGrad on a device;
#: off, each such norm is recorded as ``extern_norm``. Read when a graph is traced, by the
#: entry ``targets/ascend/rms_norm_decomp.py`` puts into Inductor's decomposition table once
#: torch_npu is loaded (at import, or ``rms_norm_decomp.install()``); part of the cache key.
decompose_npu_rms_norm: bool = False

#: Tuning knobs per target, over the defaults in `inductor_ext.plan.tuning`
#: (`{"cuda": {"register_tile": 16}}`); part of the cache key like every option.
tuning: dict = {}


def validate() -> None:
    """Raise ValueError naming the first option that holds a bad value."""
    for error in envvars.ERRORS.values():
        raise ValueError(f"inductor_ext: {error}")
    mod = sys.modules[__name__]
    targets = ("auto", *planning.PLANNERS)
    if not isinstance(mod.always_fuse, bool):
        raise ValueError(f"inductor_ext.config.always_fuse must be a bool, got {mod.always_fuse!r}")
    split = mod.split_size
    if split is not None and (isinstance(split, bool) or not isinstance(split, int) or split < 1):
        raise ValueError(
            f"inductor_ext.config.split_size must be None or a positive int, got {split!r}"
        )
    if mod.target not in targets:
        raise ValueError(f"inductor_ext.config.target must be one of {targets}, got "
                         f"{mod.target!r}{envvars.source_of('target', mod.target)}")
    max_n = mod.max_persistent_n
    if isinstance(max_n, bool) or not isinstance(max_n, int) or max_n < 1:
        raise ValueError(
            f"inductor_ext.config.max_persistent_n must be a positive int, got {max_n!r}"
        )
    cores = mod.ascend_vector_cores
    if cores is not None and (isinstance(cores, bool) or not isinstance(cores, int) or cores < 1):
        raise ValueError(
            f"inductor_ext.config.ascend_vector_cores must be None or a positive int, got {cores!r}"
        )
    if not isinstance(mod.decompose_npu_rms_norm, bool):
        raise ValueError("inductor_ext.config.decompose_npu_rms_norm must be a bool, got "
                         f"{mod.decompose_npu_rms_norm!r}")
    planning.tuning.validate(mod.tuning)
    ub = mod.ascend_ub_bytes
    if ub is not None and (isinstance(ub, bool) or not isinstance(ub, int) or ub < 4096):
        raise ValueError(
            f"inductor_ext.config.ascend_ub_bytes must be None or an int >= 4096, got {ub!r}")


if TYPE_CHECKING:  # what install_config_module adds to this module (patch, get_config_copy, ...)
    from torch.utils._config_typing import *  # noqa: F403

install_config_module(sys.modules[__name__])
