"""User-facing options of inductor_ext, built on PyTorch's config-module machinery.

Every option supports ``inductor_ext.config.patch(...)``; ``always_fuse`` and ``target``
take their defaults from ``INDUCTOR_EXT_ALWAYS_FUSE`` / ``INDUCTOR_EXT_TARGET``. A value is
checked when it is set (assignment or ``patch``: a ``ValueError`` naming the option, see
:func:`_install`), and again by :func:`validate` when a compile uses the options, so a bad
value (or a bad environment variable) fails loudly with its name instead of silently
falling back.
"""


import sys
import types
import typing  # a module, which the config machinery skips (TYPE_CHECKING was an option)
from typing import Any, Optional

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

#: Ascend flavor: vector-core count used for the grid when the NPU's runtime cannot be asked.
ascend_vector_cores: Optional[int] = None

#: Ascend flavor: Unified Buffer bytes per core. None: what the NPU's runtime reports for the
#: SoC (192 KiB on Atlas A2/A3, 256 KiB on Ascend950), 192 KiB when it is not loaded.
ascend_ub_bytes: Optional[int] = None

#: Ascend (its Inductor backend's default): decompose ``npu_rms_norm``'s backward
#: (``npu_rms_norm_backward``, one aclnnRmsNormGrad) into ATen ops Inductor lowers (dx, and
#: dgamma kept float32 as the CANN op returns it), so those norms reach the pass and fuse.
#: Off by default because it has not been measured against aclnnRmsNormGrad on a device;
#: off, each such norm is recorded as ``extern_norm``. Read when a graph is traced, by the
#: entry ``targets/ascend/rms_norm_decomp.py`` puts into Inductor's decomposition table once
#: the NPU's package is loaded (at import, or ``rms_norm_decomp.install()``); part of the cache key.
decompose_npu_rms_norm: bool = False

#: Norms to leave to Inductor: fnmatch patterns on a norm's name as the tables show it (its
#: module path, "model.layers.0.*", "*.q_norm"; a norm without a module by its source line,
#: "model.py:42"). A group with a norm that matches is not fused and is recorded as
#: ``excluded_by_config``: a way to rule one module out while checking a regression.
exclude_modules: list[str] = []

#: Norms to leave to Inductor by their module's class name: fnmatch patterns on the class
#: ("LayerNorm", "LlamaRMSNorm", "*RMSNorm"), as the tables' norm_classes give it; what
#: Liger's ``apply_liger_kernel_to_llama(rms_norm=False)`` does for its kernels. Recorded as
#: ``excluded_by_config``, like ``exclude_modules``.
exclude_norm_classes: list[str] = []

#: Tuning knobs per target (`{"cuda": {"register_tile": 16}}`), over the defaults of
#: `CudaTuning` (targets/cuda/tuning.py) and `AscendTuning` (targets/ascend/tuning.py),
#: each checked against its range (`inductor_ext.plan.knobs`); part of the cache key like
#: every option.
tuning: dict = {}


def check(name: str, value: object) -> None:
    """ValueError naming option `name` when `value` is not one it takes (an unknown name
    passes: the config module itself refuses it)."""
    def bad(want: str) -> ValueError:
        return ValueError(f"inductor_ext.config.{name} must be {want}, got {value!r}"
                          f"{envvars.source_of(name, value)}")

    def positive_int(v: object) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 1

    if name in ("always_fuse", "decompose_npu_rms_norm"):
        if not isinstance(value, bool):
            raise bad("a bool")
    elif name in ("split_size", "ascend_vector_cores"):
        if value is not None and not positive_int(value):
            raise bad("None or a positive int")
    elif name == "max_persistent_n":
        if not positive_int(value):
            raise bad("a positive int")
    elif name == "ascend_ub_bytes":
        if value is not None and not (isinstance(value, int) and positive_int(value)
                                      and value >= 4096):
            raise bad("None or an int >= 4096")
    elif name == "target":
        targets = ("auto", *planning.PLANNERS)
        if value not in targets:
            raise bad(f"one of {targets}")
    elif name == "exclude_modules":
        if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
            raise bad("a list of non-empty str patterns")
    elif name == "exclude_norm_classes":
        if not isinstance(value, list) or not all(isinstance(p, str) and p and "." not in p
                                                  for p in value):
            raise bad("a list of class names or fnmatch patterns on them, as str without a "
                      "module path ('LayerNorm', 'LlamaRMSNorm', '*RMSNorm')")
    elif name == "tuning":
        planning.knobs.validate(value)


def checked(changes: dict[str, Any], where: str) -> dict[str, Any]:
    """A deep copy of `changes` ({option: value}, as `patch` takes them) once each entry
    is checked: a TypeError naming an unknown option (and listing the known ones), the
    ValueError of `check` naming one with a bad value. `where` names the call in the
    TypeError. The copy keeps a list or dict the caller changes later out of it."""
    import copy

    known = sys.modules[__name__]._config
    for name, value in changes.items():
        if name not in known:
            raise TypeError(f"{where}: {name!r} is not an inductor_ext option; the options "
                            f"are {', '.join(known)}")
        check(name, value)
    return copy.deepcopy(changes)


def validate() -> None:
    """Raise ValueError naming the first option that holds a bad value.

    Assignments and `patch` are checked as they happen (`_install`); this is the backstop
    for what they cannot see: a bad environment variable (read at import, which must never
    fail), a `tuning` dict changed in place, and torch's own setters that skip
    `__setattr__`. `enable()`, `options()` and every compile that runs the pass call it."""
    for error in envvars.ERRORS.values():
        raise ValueError(f"inductor_ext: {error}")
    mod = sys.modules[__name__]
    for name in mod._config:
        check(name, getattr(mod, name))


def _install() -> None:
    """Make this module a torch config module whose options are checked when set.

    torch's `install_config_module` swaps the module's class for a `ConfigModule` subclass;
    one more subclass of that class checks each value in `__setattr__`, which is what
    assignment, `patch` (on entering and on leaving) and `load_config` go through, and in
    `patch()` itself, so a bad `patch(...)` fails where it is written, before the block (or
    the decorated function) runs. A value equal to the option's default always passes, so
    leaving a patch restores a default taken from a bad environment variable, which
    `validate()` then reports naming the variable."""
    module = sys.modules[__name__]
    install_config_module(module)
    installed: Any = type(module)

    class CheckedConfigModule(installed):
        def __setattr__(self, name: str, value: object) -> None:
            entry = self._config.get(name)
            if entry is not None and not _is_default(entry.default, value):
                check(name, value)
            super().__setattr__(name, value)

        def patch(self, arg1: Any = None, arg2: Any = None, **kwargs: Any) -> Any:
            changes = ({arg1: arg2} if isinstance(arg1, str) and arg2 is not None
                       else arg1 if isinstance(arg1, dict) else kwargs)
            for name, value in changes.items():
                entry = self._config.get(name)
                if entry is not None and not _is_default(entry.default, value):
                    check(name, value)
            return super().patch(arg1, arg2, **kwargs)

    # ConfigModule.__setattr__ takes only options: set the class past it, as torch does
    # before its own __setattr__ is in place.
    types.ModuleType.__setattr__(module, "__class__", CheckedConfigModule)


def _is_default(default: object, value: object) -> bool:
    return type(default) is type(value) and default == value


if typing.TYPE_CHECKING:  # what install_config_module adds (patch, get_config_copy, ...)
    from torch.utils._config_typing import *  # noqa: F403

_install()
