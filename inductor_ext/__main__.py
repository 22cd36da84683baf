"""`python -m inductor_ext`: the version, or an environment check to paste into a bug report.

    python -m inductor_ext --version   the package's version
    python -m inductor_ext [--env]     versions (Python, torch, Triton, the targets' vendor
                                       packages, transformers),
                                       which target each available device gets, upstream's
                                       mix-order reduction, the options in effect, on / off
    python -m inductor_ext --check [--csv FILE] [--device DEV] [--quick] [--always-fuse]
                                       the plugin on this device (npu, else cuda, else cpu):
                                       norm backwards off and on, errors against float64,
                                       times (inductor_ext/devcheck.py)

Nothing here changes a setting for good (--check patches options per compile and puts them
back). A target's vendor package (targets.VENDOR_PACKAGES) is imported only when it is
installed and a child process imported it cleanly first: its import can fail hard (an NPU's
without its driver libraries), and the check must still print everything else.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Iterator
from typing import Any

import torch
import torch._inductor.config as inductor_config

from . import __version__, compat, config, devcheck, envvars, plan, plugin, targets
from .distributions import installed_version


def _triton_lines() -> Iterator[str]:
    ascend = installed_version("triton-ascend", "triton_ascend")
    try:
        import triton
    except Exception as exc:  # a broken install is what the report is for
        yield f"triton: not importable ({type(exc).__name__}: {exc})"
        return
    version = getattr(triton, "__version__", "?")
    if ascend is not None:
        yield f"triton: {version} (triton-ascend {ascend}: Ascend's Triton)"
    else:
        yield f"triton: {version} (not triton-ascend)"
    interpret = os.environ.get("TRITON_INTERPRET")
    if interpret is not None:
        yield f"  TRITON_INTERPRET={interpret} (kernels run in the Triton interpreter)"


def _device_lines() -> Iterator[str]:
    """Which target each available device type gets under the configured `target`; the
    device types are CPU and those the registered targets name (no target is named here)."""
    configured = config.target
    types = ["cpu", *sorted({t for p in plan.PLANNERS.values() for t in p.device_types})]
    try:
        cpu_target = plan.target_for(torch.device("cpu"), configured)
    except Exception as exc:
        cpu_target = f"? ({type(exc).__name__}: {exc})"
    backend = inductor_config.cpu_backend
    how = ("with TRITON_INTERPRET=1 set before Python starts and the compile inside "
           "`with inductor_ext.interpreter.cpu_interpret():` (cpu_backend='triton' alone "
           "finds no active Triton driver)")
    if backend == "triton":
        interp = ("TRITON_INTERPRET=1 is set: compile inside "
                  "inductor_ext.interpreter.cpu_interpret() to run there"
                  if os.environ.get("TRITON_INTERPRET") == "1"
                  else f"needs a Triton CPU backend, or the interpreter: {how}")
        yield (f"cpu: Inductor's Triton CPU backend (cpu_backend='triton'): target "
               f"{cpu_target!r}, {interp}")
    else:
        yield (f"cpu: Inductor's {backend!r} backend (C++): the plugin does not act there "
               f"(recorded as unsupported_backend); it acts on CPU only in Triton's "
               f"interpreter, {how}, as the tests and the demo run")
    for device_type in types[1:]:
        module: Any = getattr(torch, device_type, None)  # a vendor's module (torch.npu): untyped
        if module is None:
            yield f"{device_type}: not available (no torch.{device_type})"
            continue
        try:
            available = bool(module.is_available())
            count = module.device_count() if available else 0
        except Exception as exc:
            yield f"{device_type}: cannot be asked ({type(exc).__name__}: {exc})"
            continue
        if not available:
            yield f"{device_type}: not available"
            continue
        for index in range(count):
            device = torch.device(device_type, index)
            try:
                name = module.get_device_name(index)
            except Exception:
                name = "?"
            try:
                target = plan.target_for(device, configured)
            except Exception as exc:
                target = f"? ({type(exc).__name__}: {exc})"
            yield f"{device}: {name}: target {target!r}"


def _upstream_lines() -> Iterator[str]:
    key = compat.UPSTREAM_MIX_ORDER_KEY
    if not compat.has_upstream_mix_order():
        yield f"upstream mix-order reduction: not in this torch (no {key})"
        return
    value = inductor_config.triton.mix_order_reduction
    why = " (the plugin turns it off while on)" if plugin.is_enabled() else ""
    gates = compat.upstream_mix_order_gates()
    meaning = {"strict": "torch 2.10-2.14: it fuses only where rows >= 2 x columns, within "
                         "its size limits",
               "relaxed": "torch 2.15: no row-to-column rule, only its size limits"}
    yield (f"upstream mix-order reduction: {key}={value}{why}; CUDA/XPU only, its shape "
           f"gates here: {gates} ({meaning.get(gates, gates)})")


def _option_lines() -> Iterator[str]:
    for name, value in config.get_config_copy().items():
        source = envvars.source_of(name, value)
        yield f"  {name} = {value!r}{source}"
    try:
        config.validate()
    except ValueError as exc:
        yield f"  INVALID: {exc}"


def _plugin_line() -> str:
    if plugin.is_enabled():
        return "plugin: enabled"
    asked = os.environ.get("INDUCTOR_EXT")
    try:
        wanted = asked is not None and envvars.parse_flag("INDUCTOR_EXT", asked)
    except ValueError as exc:
        return f"plugin: disabled ({exc})"
    if wanted:
        return (f"plugin: disabled, though INDUCTOR_EXT={asked!r} asks for it: enabling failed "
                "(its RuntimeWarning says why; an invalid option is shown below)")
    return "plugin: disabled (enable() / options(), or INDUCTOR_EXT=1 in the environment)"


def environment() -> list[str]:
    """The environment check's lines (what `python -m inductor_ext` prints)."""
    lo, hi = compat.SUPPORTED_TORCH
    supported = lo <= compat.TORCH_VERSION <= hi
    lines = [
        f"inductor_ext: {__version__} ({os.path.dirname(os.path.abspath(__file__))})",
        f"python: {platform.python_version()} ({sys.executable})",
        f"platform: {platform.platform()}",
        f"torch: {torch.__version__} (CUDA {torch.version.cuda or 'none'}; "
        f"{'supported' if supported else 'NOT supported'}: "
        f"{lo[0]}.{lo[1]}-{hi[0]}.{hi[1]})",
        *_triton_lines(),
        *(line for package in targets.VENDOR_PACKAGES
          for line in package.environment_lines()),
        f"transformers: {installed_version('transformers') or 'not installed'} (optional)",
        "devices:",
        *(f"  {line}" for line in _device_lines()),
        *_upstream_lines(),
        _plugin_line(),
        "options (inductor_ext.config):",
        *_option_lines(),
    ]
    return lines


def _check(args: argparse.Namespace) -> int:
    for package in targets.VENDOR_PACKAGES:
        if args.device is None or args.device.startswith(package.device_type):
            package.load_if_safe()
    return devcheck.command(args.device, args.csv, quick=args.quick,
                            always_fuse=args.always_fuse)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m inductor_ext",
        description="Print the version, or an environment check for bug reports; --check "
                    "checks the plugin's gradients and speed on this device.")
    parser.add_argument("--version", action="version", version=f"inductor_ext {__version__}")
    parser.add_argument("--env", action="store_true",
                        help="print the environment check (also the default)")
    parser.add_argument("--check", action="store_true",
                        help="compile norm backwards with the plugin off and on on this "
                             "device, check the gradients against float64 and time both")
    parser.add_argument("--csv", metavar="FILE", help="--check: also write the rows to FILE")
    parser.add_argument("--device", metavar="DEV",
                        help="--check: the device (default: npu, else cuda, else cpu)")
    parser.add_argument("--quick", action="store_true",
                        help="--check: 4 shapes (bf16, N 1024 and 4096) and fewer timed calls")
    parser.add_argument("--always-fuse", action="store_true",
                        help="--check: fuse whatever the cost model says (default: it decides)")
    args = parser.parse_args(argv)
    if not args.check and (args.csv or args.device or args.quick or args.always_fuse):
        parser.error("--csv, --device, --quick and --always-fuse go with --check")
    if args.check:
        return _check(args)
    try:
        print("\n".join(environment()), flush=True)
    except BrokenPipeError:  # `python -m inductor_ext | head`: the reader has what it wanted
        sys.stdout = None  # no flush of a closed pipe at exit
    return 0


if __name__ == "__main__":
    sys.exit(main())
