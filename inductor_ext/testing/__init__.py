"""Test helpers: the CPU interpreter harness, norm-backward references and tolerances."""

from .interpret import cpu_interpret, fresh_compile_state, interpreter_active

__all__ = ["cpu_interpret", "fresh_compile_state", "interpreter_active"]
