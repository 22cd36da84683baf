"""The fused kernels torch_npu's emulated backend builds with the plugin on, byte for byte
against a committed recording (tests/golden/torch_npu-<torch minor>/): persistent and
column-tiled RMSNorm / LayerNorm, the per-head q/k norm whose rows span several axes, and
adaLN's per-sample partials (persistent and column-tiled rows).
See tests/test_generated_text.py for the flavors' own cases and how to record anew.

    TRITON_INTERPRET=1 .npu-venv/bin/python -m pytest -q tests/ascend/test_npu_generated_text.py
"""

from __future__ import annotations

import pytest
import torch
from npu_cases import fused_kernels, norm_case, plugin_on
from test_npu_adaln import adaln_case
from test_npu_qk_norms import per_head_case

from tests.support import npu_emulation as emu
from tests.support import reference
from tests.support.golden import compare_or_record, recording

pytestmark = pytest.mark.skipif(not emu.can_emulate(),
                                reason=str(emu.emulation_unavailable_reason()))

CASES = {
    "rms-bf16-64x768": lambda: norm_case("rms", 64, 768, torch.bfloat16),
    "ln-fp16-40x768": lambda: norm_case("ln", 40, 768, torch.float16),
    "ln_nobias-fp32-64x128": lambda: norm_case("ln_nobias", 64, 128),
    "rms-bf16-33x16384-column-tiles": lambda: norm_case("rms", 33, 16384, torch.bfloat16),
    "qk-rope-bf16": lambda: per_head_case("rope", torch.bfloat16),
    # adaLN: per-sample partials, one sample per program on torch_npu's sample axis
    "adaln-bf16-3x11x768": lambda: adaln_case(3, 11, 768, torch.bfloat16),
    "adaln-fp32-2x9x8192-column-tiles": lambda: adaln_case(2, 9, 8192, torch.float32),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_generated_text_is_unchanged(kernels, case):
    fn, inputs, dy = CASES[case]()
    with plugin_on():
        reference.autograd_grads(torch.compile(fn, dynamic=False), inputs, dy)
    compare_or_record(recording("torch_npu"), case,
                      [src for _, _, src in fused_kernels(kernels)])
