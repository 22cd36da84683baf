"""Codegen side: the fused kernel, the backend wrapper, and one module per target flavor."""

from . import cuda  # noqa: F401  (registers the flavor)
