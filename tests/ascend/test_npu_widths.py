"""The widths models train at, with default options on the emulated 910B3 (torch_npu's real
backend; see test_npu_emulation.py): the hook fuses them, its shape is the width table's
(bench/ascend_width_table.py, bench/ascend_model.py shape_info), the kernel's gradients
match float64 in the interpreter, and bishengir-compile plans every config it ships within
the SoC's Unified Buffer."""

from __future__ import annotations

import concurrent.futures
import os
import sys
import tempfile

import pytest
import torch
from cost_cases import decisions
from npu_cases import Compiled, check_grads, compile_only, norm_case, plugin_on

import inductor_ext
from inductor_ext import plan_inputs
from inductor_ext.plan import device_info
from inductor_ext.targets.ascend import plan as ascend_plan

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bench"))
from ascend_model import shape_info  # noqa: E402

from tests.support import npu_emulation as emu  # noqa: E402

pytestmark = pytest.mark.skipif(not emu.can_emulate(),
                                reason=str(emu.emulation_unavailable_reason()))

#: (op, N, tokens) in bf16: four that were declined before the planner weighed whole rows
#: without multibuffer, and LayerNorm 8192x1024, which fused all along.
WIDTHS = (("rms", 3072, 4096), ("rms", 4096, 4096), ("ln", 2560, 4096), ("ln", 3072, 4096),
          ("ln", 1024, 8192))
#: Rows of the gradient and UB checks: the configs' row blocks are those of 4096 tokens
#: (at most 64 rows a block), the interpreter's time a sixty-fourth.
SMALL_M = 64
SHAPE_FIELDS = ("total_bytes", "shared_bytes", "unfused_bytes", "row_elem_bytes",
                "num_columns", "elem_bytes")


@pytest.mark.parametrize("op,N,tokens", WIDTHS)
def test_default_options_fuse_training_widths(kernels, op, N, tokens):
    """Compile only (4096 rows in the interpreter would take minutes): one group, fused
    by the model with default options, as a whole row; the hook's bytes are the width
    table's."""
    fn, inputs, dy = norm_case(op, tokens, N, torch.bfloat16)
    compiled = torch.compile(fn, backend=compile_only, dynamic=False)
    with torch._inductor.config.patch(inductor_ext.options()), decisions() as seen:
        assert not inductor_ext.config.always_fuse
        with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as failed:
            compiled(*inputs).backward(dy)
        assert isinstance(failed.value.inner_exception, Compiled), failed.value
    (shape, reason, verdict), = seen
    assert reason is None and verdict.fuses, verdict.detail
    plan = ascend_plan.plan(shape, device_info(shape.device),
                            plan_inputs.tuning_for("ascend"), plan_inputs.plan_options())
    assert not plan.column_tiled
    table = shape_info(op, tokens, N, 2)
    assert ([getattr(shape, f) for f in SHAPE_FIELDS], op) == (
        [getattr(table, f) for f in SHAPE_FIELDS], op)


@pytest.mark.parametrize("op,N", [w[:2] for w in WIDTHS[:4]])
def test_training_widths_right_and_planned_within_ub(kernels, op, N):
    """At 64 rows: the whole-row kernel's gradients match float64, and bishengir plans
    each of its configs (multibuffer off where it does not fit) within the 910B3's UB."""
    import check_npu
    import ub_plan

    if ub_plan.bishengir_path("bishengir-compile") is None:
        pytest.fail("bishengir-compile is missing: setup_npu_venv.sh installs ascendnpu-ir")
    records: list = []
    with plugin_on(), check_npu.capture(records):
        check_grads(op, SMALL_M, N, torch.bfloat16)
    (record,) = records
    kernel = check_npu.make_kernel(f"{op}-{N}", "Ascend910B3", record)
    assert kernel.kind == "persistent"
    assert any(not cfg["multibuffer"] for cfg in kernel.configs)
    with concurrent.futures.ThreadPoolExecutor(2) as pool, \
            tempfile.TemporaryDirectory() as workdir:
        check_npu.lower_and_plan(kernel, pool, workdir)
        kernel.resolve()
    for i, cfg in enumerate(kernel.configs):
        assert kernel.planned_ok(i), (cfg, kernel.plans[i])
