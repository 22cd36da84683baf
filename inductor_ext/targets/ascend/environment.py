"""torch_npu as `python -m inductor_ext` and `--check` see it: whether it imports, its version
and backend setting, and loading it when that is safe.

Without CANN, `import torch_npu` can abort the process, so it is first tried in a child
process, and the package is loaded here only after that child succeeded."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from ...distributions import installed_version

#: How long the child process may take to import torch_npu (CANN's first load is slow).
PROBE_TIMEOUT_S = 120


class TorchNpu:
    """The vendor package the Ascend target runs on (targets.VendorPackage)."""

    name = "torch_npu"
    device_type = "npu"

    def probe(self) -> tuple[bool, str]:
        """(importable, detail): whether `import torch_npu` works, tried in a child process
        so that a hard failure (missing CANN libraries, an abort) cannot take this one
        down."""
        if self.name in sys.modules:
            return True, "already imported"
        if importlib.util.find_spec(self.name) is None:
            return False, "not installed"
        try:
            res = subprocess.run([sys.executable, "-c", f"import {self.name}"],
                                 capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return False, f"installed, but importing it took over {PROBE_TIMEOUT_S} s"
        if res.returncode != 0:
            last = (res.stderr.strip().splitlines() or [f"exit status {res.returncode}"])[-1]
            return False, f"installed, but its import fails: {last}"
        return True, "importable"

    def environment_lines(self) -> Iterator[str]:
        """The environment check's line: version and Inductor backend, or why not."""
        importable, detail = self.probe()
        version = installed_version("torch_npu", "torch-npu")
        if not importable:
            yield f"torch_npu: {detail}" + (f" (version {version})" if version else "")
            return
        try:
            import torch_npu  # noqa: F401  (registers the npu device and its Inductor backend)
        except Exception as exc:
            yield (f"torch_npu: {version or '?'}, import failed here "
                   f"({type(exc).__name__}: {exc})")
            return
        backend = os.environ.get("TORCHINDUCTOR_NPU_BACKEND", "default")
        yield (f"torch_npu: {getattr(torch_npu, '__version__', version)} "
               f"(TORCHINDUCTOR_NPU_BACKEND={backend})")

    def load_if_safe(self) -> None:
        """Load torch_npu (it registers the npu device) when a child process imported it
        cleanly."""
        if self.name in sys.modules or not self.probe()[0]:
            return
        with contextlib.suppress(Exception):
            import torch_npu  # noqa: F401

    def loaded_version(self) -> str | None:
        """The loaded torch_npu's version, None when it is not loaded (never imports it)."""
        module: Any = sys.modules.get(self.name)
        return None if module is None else str(getattr(module, "__version__", "?"))




TORCH_NPU = TorchNpu()
