"""Triton functions that stand in for Inductor's under the interpreter (`cpu_interpret`).

Imported only once the interpreter is on: `triton.jit` decides at import whether it builds
an interpreted function.
"""

import triton
import triton.language as tl


@triton.jit
def welford(mean, m2, weight, dim):
    """Inductor's `triton_helpers.welford` merges partial (mean, m2, weight) triples with
    `tl.reduce` and a combine function, which the interpreter runs one element pair at a
    time in Python (a looped LayerNorm forward spent most of a test there). Merging all
    partials at once gives the same statistics: the weighted mean, and m2 as the partials'
    m2 plus each one's weighted squared distance from that mean. As in the pairwise merge,
    equal means (infinite ones included) and empty partials add nothing."""
    total = tl.sum(weight, dim)
    merged = tl.sum(tl.where(weight == 0.0, 0.0, mean * weight), dim) / tl.where(
        total == 0.0, 1.0, total)
    delta = tl.where(mean == tl.expand_dims(merged, dim), 0.0,
                     mean - tl.expand_dims(merged, dim))
    spread = tl.where(weight == 0.0, 0.0, delta * delta * weight)
    return merged, tl.sum(m2, dim) + tl.sum(spread, dim), total
