"""Test helpers: the CPU interpreter harness (`cpu_interpret`), the torch_npu runtime
emulation (`inductor_ext.testing.npu_emulation`), norm-backward references and tolerances, and
the fused kernels a step launches (`fused_launches`)."""

from .interpret import cpu_interpret, interpreter_active
from .launches import fused_launches

__all__ = ["cpu_interpret", "fused_launches", "interpreter_active"]
