"""The targets, one package each: its planning, code flavor, kernel glue and data, and the
registrations that plug them into planning, codegen and the scheduler (see CONTRIBUTING.md,
"Adding a target"). Importing this package registers every target."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from . import ascend, cuda  # noqa: F401  (each registers itself)
from .ascend.environment import TORCH_NPU


class VendorPackage(Protocol):
    """A package a target's device needs beside torch (Ascend's for the NPU), as the
    environment check and `--check` see it; never imported unless it is safe to."""

    name: str
    device_type: str

    def environment_lines(self) -> Iterator[str]: ...

    def load_if_safe(self) -> None: ...

    def loaded_version(self) -> str | None: ...


#: Every target's vendor package (CUDA needs none beside torch).
VENDOR_PACKAGES: tuple[VendorPackage, ...] = (TORCH_NPU,)
