"""Ascend flavor (triton-ascend): one program per vector core, each walking row blocks
with a stride of the program count; no num_warps / num_stages (triton-ascend ignores or
rejects them). The launch plan comes from `inductor_ext.targets.ascend.plan`. Segmented
plans (adaLN's per-sample partials, plan.with_segments) take the generic per-sample row
loop of codegen/row_loop.py instead of these lines (torch_npu's kernel: kernel.py)."""

from __future__ import annotations

from ...codegen.flavor import TargetFlavor
from ...plan import LaunchPlan


class AscendFlavor(TargetFlavor):
    name = "ascend"

    def launch_options(self, plan: LaunchPlan) -> dict[str, int]:
        return {}

    def loop_header(self, plan: LaunchPlan, program: str = "tl.program_id(0)",
                    programs: str = "") -> list[str]:
        if plan.column_groups != 1:
            raise ValueError("Ascend plans have no column groups (one program per row)")
        return [f"row_step = {programs or plan.programs} * XBLOCK"]

    def loop_statement(self, plan: LaunchPlan) -> str:
        return "for xoffset in tl.range(tl.program_id(0) * XBLOCK, xnumel, row_step):"


