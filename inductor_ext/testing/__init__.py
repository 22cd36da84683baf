"""Test helpers: the CPU interpreter harness, the torch_npu emulation, norm-backward
references and tolerances."""

from .interpret import cpu_interpret, interpreter_active
from .npu_emulation import can_emulate, emulation_unavailable_reason, npu_emulation

__all__ = ["can_emulate", "cpu_interpret", "emulation_unavailable_reason", "interpreter_active",
           "npu_emulation"]
