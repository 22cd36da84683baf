"""Columns that read what the row side computes: the fused kernel hands them the row
block's values in registers (legality.row_outputs_read).

Qwen3's q/k norms have two shapes of it, which would decline without this: the k_norm's
dy (the RoPE backward, computed in the dx kernel) stored as [B, H, T, D] while the rows
run over (b, t, h); and the q_norm's dw summing a dy * x_hat buffer that only the dx
kernel writes, so the pair reads no common input. A row statistic (rstd) joins the row
that computes it when the column reads it at its own row; read at another row, or through
a reduction over all rows, the pair is declined as `producer_consumer`."""

import pytest
import sympy
import torch
from torch._inductor.utils import run_and_get_code

import inductor_ext
from inductor_ext.scheduler.legality import reads_stored_element
from tests.support.fused_kernels import rms_inputs as _inputs
from tests.support.reference import assert_close


def _symbols(prefix, n):
    return [sympy.Symbol(f"{prefix}{i}", integer=True, nonnegative=True) for i in range(n)]


# -- the index algebra, on the H100's shapes ------------------------------------------------
B, T, H, D = 4, 2048, 8, 128
P = _symbols("p", 4)  # the producer's loop: (b, t, h, d), rows before columns
BHTD_STORE = (H * T * D) * P[0] + D * P[1] + (T * D) * P[2] + P[3]  # laid out [B, H, T, D]


@pytest.mark.parametrize("rows", [[B * T * H], [B, T, H]], ids=["flat_rows", "bth_rows"])
def test_a_permuted_store_read_at_the_same_element_is_handed_over(rows):
    """The k_norm case: the column reads dy at (b, t, h, d) in the [B, H, T, D] layout it
    was stored in, its rows flat (as an unsplit column) or as (b, t, h)."""
    from torch.utils._sympy.functions import FloorDiv, ModularIndexing

    r, c = _symbols("r", len(rows)), _symbols("c", 1)
    if len(rows) == 1:
        b, t, h = FloorDiv(r[0], T * H), ModularIndexing(r[0], H, T), ModularIndexing(r[0], 1, H)
    else:
        b, t, h = r
    load = (H * T * D) * b + (T * D) * h + D * t + c[0]
    assert reads_stored_element(BHTD_STORE, P, [B, T, H, D], [load], r, rows, c, [D],
                                per_row=False)


def test_a_load_of_another_element_is_refused():
    """Reading the next head's value, or the row-major address of a permuted store, would
    take a value no program holds in registers."""
    r, c = _symbols("r", 3), _symbols("c", 1)
    b, t, h = r
    next_head = (H * T * D) * b + (T * D) * ((h + 1) % H) + D * t + c[0]
    row_major = (T * H * D) * b + (H * D) * t + D * h + c[0]
    for load in (next_head, row_major):
        assert not reads_stored_element(BHTD_STORE, P, [B, T, H, D], [load], r, [B, T, H],
                                        c, [D], per_row=False)


def test_a_row_statistic_is_read_per_row_only():
    """An [M] statistic (a recomputed rstd) stored per row: read at the row it is handed
    over; read at another row (or per column) it is not."""
    p, r, c = _symbols("p", 2), _symbols("r", 2), _symbols("c", 1)
    store = 8 * p[0] + p[1]  # over [4, 8] rows
    assert reads_stored_element(store, p, [4, 8], [32 * 0 + 8 * r[0] + r[1]], r, [4, 8], c,
                                [16], per_row=True)
    assert not reads_stored_element(store, p, [4, 8], [8 * r[0] + c[0]], r, [4, 8], c, [16],
                                    per_row=True)


def test_symbolic_sizes_keep_the_plain_row_major_identity():
    s = sympy.Symbol("s0", integer=True, positive=True)
    p, r, c = _symbols("p", 2), _symbols("r", 1), _symbols("c", 1)
    assert reads_stored_element(16 * p[0] + p[1], p, [s, 16], [16 * r[0] + c[0]], r, [s], c,
                                [16], per_row=False)
    # a permuted store over a symbolic size has no factorization to check it against
    assert not reads_stored_element(p[0] + s * p[1], p, [s, 16], [16 * r[0] + c[0]], r, [s],
                                    c, [16], per_row=False)


# -- end to end: the q_norm case on the CPU interpreter ------------------------------------
def _qnorm_like(g, a, b, c, x, w, rstd):
    """dx and dw of an RMSNorm whose dy * x_hat has enough inputs (more than Inductor's
    realize_reads_threshold) that Inductor stores it in the dx kernel for the dw sum."""
    xh = x.float() * rstd
    prod = (g * a + b * c + g.flip(1)).float() * xh
    dx = rstd * (w * g.float() - xh * (w * prod).mean(-1, keepdim=True))
    return dx.to(x.dtype), prod.sum(0)


def test_a_column_of_what_only_the_row_side_writes_fuses(plugin):
    M, N = 256, 64
    mats = [torch.randn(M, N, dtype=torch.bfloat16) for _ in range(5)]
    w, rstd = torch.randn(N), torch.rand(M, 1) + 0.5
    (dx, dw), (code,) = run_and_get_code(torch.compile(_qnorm_like), *mats, w, rstd)
    ref = _qnorm_like(*(t.double() for t in (*mats, w, rstd)))
    assert_close([dx, dw], list(ref), names=["dx", "dw"])
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert not inductor_ext.metrics.rejected_pairs
    # dy * x_hat lives in registers only: the fused kernel stores dx and its partials,
    # and no [M, N] fp32 buffer is allocated for the product any more
    assert code.count("async_compile.triton(") == 2  # the fused kernel and the final step
    assert f"(({M}, {N}), ({N}, 1), torch.float32)" not in code
    assert f"(({M}, {N}), ({N}, 1), torch.bfloat16)" in code  # dx


def test_a_column_tiled_row_declines_a_column_of_what_the_row_side_computes(plugin):
    """The same group with rows longer than `max_persistent_n`: walked in column tiles, the
    row side cannot hand the column its values, so the group is declined as such."""
    M, N = 256, 64
    mats = [torch.randn(M, N, dtype=torch.bfloat16) for _ in range(5)]
    w, rstd = torch.randn(N), torch.rand(M, 1) + 0.5
    with inductor_ext.config.patch(max_persistent_n=32):
        torch.compile(_qnorm_like)(*mats, w, rstd)
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs == {"tiled_row_reads": 1}


# -- end to end: a row statistic read by the column ------------------------------------------
def test_column_reading_the_row_statistic_joins_its_row(plugin):
    """dw needs rstd, which the row reduction computes: in the persistent kernel the row
    block's rstd is in registers when dw's partial is accumulated, read at its own row."""

    def fn(x, w, dy):
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        xhat = x * rstd
        dw = (dy * xhat).sum(0)
        return xhat * w, dw

    x, w, dy, _ = _inputs()
    got = torch.compile(fn)(x, w, dy)
    assert_close(got, fn(x.double(), w.double(), dy.double()))
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert not inductor_ext.metrics.rejected_pairs


@pytest.mark.parametrize("path", ["other_row", "through_a_kernel"])
def test_producer_consumer_pair_is_not_fused(plugin, path):
    """dw reads rstd at another row than its own (flipped), or through a reduction over all
    rows (another kernel, which would run both before and after the fused one)."""

    def fn(x, w, dy):
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        scale = rstd.flip(0) if path == "other_row" else rstd.sum()
        return x * rstd * w, (dy * x * scale).sum(0)

    x, w, dy, _ = _inputs()
    got = torch.compile(fn)(x, w, dy)
    assert_close(got, fn(x.double(), w.double(), dy.double()))
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.rejected_pairs == {"producer_consumer": 1}
