"""libdevice functions that triton-ascend 3.2.0's interpreter cannot run (they are extern
calls there), written from tl primitives for the torch_npu emulation's interpreted kernels.
Imported lazily by npu_emulation, with TRITON_INTERPRET=1 already set."""

import triton
import triton.language as tl


@triton.jit
def tanh(x):
    """GPT-2's GELU (tanh approximation): 1 - 2 / (exp(2x) + 1), exact at +-inf."""
    return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)


FUNCTIONS = {"tanh": tanh}
