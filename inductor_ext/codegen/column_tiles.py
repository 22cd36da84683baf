"""Which rewrites a column-tiled kernel's loops get, chosen by its plan.

Inductor emits a row longer than one tile as `for r0_offset in tl.range(...)` loops whose
row sums accumulate into [XBLOCK, R0_BLOCK] fp32 tensors, reduced once after the loop.
The edits of that text live in codegen/rewrites.py (counted, a miss logged):
`unroll_column_loops` gives each tile its own partial accumulators, `keep_row_tiles` hands
the first pass's row values to the second (a row read once) and `chunk_row_sums`
shrinks the row-sum accumulators to [XBLOCK, R0_BLOCK // chunk] (both keep registers for
the column partials); `stream_row_stores` marks the output stores as streaming, so they
leave the L2 first; `unpin_row_loads` drops the L2 keep-priority from row loads that are
read back from L1.
"""

from __future__ import annotations

from ..plan import LaunchPlan
from . import rewrites


def rewrite_loops(code: str, plan: LaunchPlan, accumulators: list[str]) -> str:
    """Inductor's loops over column tiles (`code`) with the rewrites the plan asks for."""
    if plan.register_tiles:
        code = rewrites.apply("unroll_column_loops", code, plan.register_tiles, accumulators,
                              plan.column_groups, plan.unroll_row_sums,
                              plan.row_sum_stages, plan.row_sum_unroll)
    if plan.keep_row_tiles:
        code = rewrites.apply("keep_row_tiles", code)
    if plan.row_sum_chunk > 1:
        code = rewrites.apply("chunk_row_sums", code, plan.row_sum_chunk)
    if plan.stream_stores:
        code = rewrites.apply("stream_row_stores", code)
    if plan.unpin_row_loads:
        code = rewrites.apply("unpin_row_loads", code)
    return code
