"""CUDA flavor (the default): the row loop over strided (or contiguous) row blocks, and
Hopper's L2 bulk prefetch and programmatic dependent launch as Triton statements. The
launch plan comes from `inductor_ext.targets.cuda.plan`."""

from __future__ import annotations

from ...codegen.flavor import TargetFlavor
from ...plan import LaunchPlan

#: One thread of the program prefetches [$1, $1 + $2) into L2, start and size rounded
#: down to the 16 bytes the instruction needs (so the range never passes the block).
L2_PREFETCH_ASM = (
    "{ .reg .pred p; .reg .u32 t, n; .reg .u64 a; mov.u32 t, %tid.x; "
    "setp.eq.u32 p, t, 0; and.b64 a, $1, -16; and.b32 n, $2, -16; "
    "@p cp.async.bulk.prefetch.L2.global [a], n; mov.u32 $0, 0; }")


def l2_prefetch_keep_asm(keep_fraction: float) -> str:
    """The L2 hint for rows read twice (column-tiled: the second pass re-reads the row), with
    the lines entering L2 as evict_last (a `keep_fraction` share of them), so that
    streaming traffic does not push them out before that second pass. Written with its
    fraction, not edited from a fixed one."""
    return ("{ .reg .pred p; .reg .u32 t, n; .reg .u64 a, pol; mov.u32 t, %tid.x; "
            "setp.eq.u32 p, t, 0; and.b64 a, $1, -16; and.b32 n, $2, -16; "
            f"createpolicy.fractional.L2::evict_last.b64 pol, {keep_fraction!r}; "
            "@p cp.async.bulk.prefetch.L2.global.L2::cache_hint [a], n, pol; mov.u32 $0, 0; }")


#: The keeping variant for all of a row's lines.
L2_PREFETCH_ASM_KEEP = l2_prefetch_keep_asm(1.0)


def l2_prefetch_asm(second_pass: bool, keep_fraction: float) -> str:
    if second_pass and keep_fraction > 0:
        return l2_prefetch_keep_asm(keep_fraction)
    return L2_PREFETCH_ASM


class CudaFlavor(TargetFlavor):
    name = "cuda"

    def l2_prefetch_statement(self, pointer: str, nbytes: str, second_pass: bool,
                              keep_fraction: float) -> str:
        asm = l2_prefetch_asm(second_pass, keep_fraction)
        return (f"tl.inline_asm_elementwise({asm!r}, \"=r,l,r\", "
                f"[{pointer}, {nbytes}], dtype=tl.int32, is_pure=False, pack=1)")

    def pdl_trigger_statement(self) -> str:
        return "tl.extra.cuda.gdc_launch_dependents()"

    def pdl_wait_statement(self) -> str:
        return "tl.extra.cuda.gdc_wait()"

    def loop_header(self, plan: LaunchPlan, program: str = "tl.program_id(0)",
                    programs: str = "") -> list[str]:
        if plan.row_loop == "strided":
            return [f"row_start = {program} * XBLOCK", "row_end = xnumel",
                    f"row_step = {programs or plan.programs} * XBLOCK"]
        if programs:
            raise ValueError("per-config program counts are planned for strided rows only")
        P = plan.programs
        return [
            "row_blocks = (xnumel + XBLOCK - 1) // XBLOCK",
            f"rows_per_program = ((row_blocks + {P - 1}) // {P}) * XBLOCK",
            f"row_start = {program} * rows_per_program",
            "row_end = tl.minimum(row_start + rows_per_program, xnumel)",
            "row_step = XBLOCK",
        ]

    def loop_statement(self, plan: LaunchPlan) -> str:
        return "for xoffset in tl.range(row_start, row_end, row_step):"


