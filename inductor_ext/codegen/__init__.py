"""Codegen side: the fused kernel, the backend wrapper, and one module per target flavor."""

from . import ascend, cuda  # noqa: F401  (each registers its flavor)
