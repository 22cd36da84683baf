"""Compile a generated kernel while its group can still fall back.

The wrapper compiles its kernels when it is loaded, after every scheduling decision is
final: a fused kernel that fails to compile there breaks the step. Compiled here, during
codegen and inside the fallback of inductor_ext/backend_wrapper.py (`_codegen_or_fallback`), a
failure leaves Inductor's (or the vendor backend's) own kernels for that group, one warning and an
`internal_error` decline.

It compiles to the wrapper's bar: the kernel's module is loaded (its decorator builds the
autotuner) and its configs are compiled in order until one compiles, as an autotuner drops
a config that fails and fails only when none compiles (Triton to a binary on CUDA; the NPU
backend's ``triton.compile`` on an NPU, UB overflow included; triton-ascend's front end in the
emulation). Under Triton's CPU interpreter nothing is compiled before a launch, so there
only the module is loaded. The wrapper compiles the kernel again under its own name;
bench/bench_compile_time.py measures what this adds.
"""

from __future__ import annotations

import time
from typing import Any

from .. import compat
from ..compat import Placeholder, PyCodeCache
from ..logs import log

#: The name the kernel is compiled under here (the wrapper gives it its own).
_NAME = "triton_"


def compile_now(src_code: str) -> Any:
    """Load one kernel source and compile its first config that compiles; returns its
    autotuner. Raises what the load raises, or the first config's error when none
    compiles."""
    src = (src_code.replace(str(Placeholder.DESCRIPTIVE_NAME), _NAME)
           .replace(str(Placeholder.KERNEL_NAME), _NAME))
    start = time.perf_counter()
    autotuner = getattr(PyCodeCache.load(src), _NAME)
    if getattr(autotuner, "triton_interpret", True):
        return autotuner
    errors: list[Exception] = []
    for config in autotuner.configs:
        try:
            compat.compile_config(autotuner, config)
        except Exception as exc:  # this config fails; the autotuner would drop it
            errors.append(exc)
            continue
        log.debug("inductor_ext: compiled a fused kernel (config %d of %d) in %.3f s",
                  len(errors) + 1, len(autotuner.configs), time.perf_counter() - start)
        return autotuner
    raise errors[0] if errors else RuntimeError("the kernel has no launch config")
