"""Adapters for vendor Inductor backends whose Triton codegen differs from Inductor's own.

Today one: torch_npu's (``npu``: detection, SoC facts, the fused kernel's plan;
``npu_kernel``: the kernel class built on torch_npu's, and how it is registered).
"""

from __future__ import annotations

from typing import Any

from . import npu


def unsupported_backend(scheduling: Any) -> str | None:
    """Why the plugin cannot generate through this device scheduling (None: it can)."""
    return npu.unsupported_detail(scheduling)
