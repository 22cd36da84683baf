"""Test helpers: the CPU interpreter harness (`cpu_interpret`), the torch_npu runtime
emulation (`inductor_ext.testing.npu_emulation`), norm-backward references and tolerances."""

from .interpret import cpu_interpret, interpreter_active

__all__ = ["cpu_interpret", "interpreter_active"]
