"""Test helpers: the CPU interpreter harness, norm-backward references and tolerances."""

from .interpret import cpu_interpret, interpreter_active

__all__ = ["cpu_interpret", "interpreter_active"]
