"""inductor_ext under torch.distributed, on CPU: DDP and FSDP2 over gloo in two processes
through the Triton interpreter, and the matcher case FSDP2's layer boundaries exposed.

Under FSDP2 each decoder layer is its own compiled graph whose input x is a graph input.
The backward reads x in both norms' kernels: the input norm's, and the post-attention
norm's, whose input x + attn the partitioner recomputes from x. Pairing each dw with the
first row reduction that reads one of its [M, N] buffers gave the input norm's dw to the
post-attention norm's dx, which produces its dy (declined as producer_consumer), and left
the input norm without a partner: 3 of 5 norms fused in a 2-layer Llama (single process
and DDP lost layer 0's input norm the same way, through the embedding output).
"""

from __future__ import annotations

import csv
import os
import resource
import subprocess
import sys
import time

import pytest
import torch
import torch.distributed as dist

import inductor_ext
from tests.support.launches import fused_launches
from tests.support.reference import assert_close

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench", "bench_distributed.py")
NORMS = 5  # 2 layers x 2 RMSNorms + the final norm


def layer_boundary_backward(x, m, proj, w1, w2, rstd1, rstd2, dy):
    """Two RMSNorm backwards as at an FSDP2 layer boundary, written out: norm2's input
    x + m is recomputed from x, which is also norm1's input, and norm2's dx reaches
    norm1's dy through a projection (the attention block's backward)."""
    h = x + m
    hhat = h * rstd2
    g2 = dy * w2
    dh = rstd2 * (g2 - hhat * (g2 * hhat).mean(-1, keepdim=True))
    dw2 = (dy * hhat).sum(0)
    dy1 = dh @ proj
    xhat = x * rstd1
    g1 = dy1 * w1
    dx = rstd1 * (g1 - xhat * (g1 * xhat).mean(-1, keepdim=True)) + dh
    dw1 = (dy1 * xhat).sum(0)
    return dx, dw1, dw2


def test_dw_skips_the_row_reduction_that_produces_its_dy(plugin):
    """Both norms' kernels read x, and norm2's dx comes first: it must not take norm1's dw,
    which depends on it, so each norm fuses with its own dw."""
    M, N = 64, 32
    x, m, dy = torch.randn(M, N), torch.randn(M, N), torch.randn(M, N)
    proj = torch.randn(N, N) / N ** 0.5
    w1, w2 = 1 + 0.1 * torch.randn(N), 1 + 0.1 * torch.randn(N)
    rstd1 = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    rstd2 = torch.rsqrt((x + m).pow(2).mean(-1, keepdim=True) + 1e-6)
    inputs = (x, m, proj, w1, w2, rstd1, rstd2, dy)
    with fused_launches() as launches:
        got = torch.compile(layer_boundary_backward)(*inputs)
    assert not inductor_ext.metrics.rejected_pairs
    assert inductor_ext.metrics.mix_order_kernels == 2
    assert launches.fused == 2
    ref = layer_boundary_backward(*(t.double() for t in inputs))
    assert_close(got, ref, names=["dx", "dw1", "dw2"],
                 eager=layer_boundary_backward(*inputs))


def test_a_column_every_row_depends_on_is_still_declined(plugin):
    """A column that no row can legally take keeps its producer_consumer decline (it reads
    the row statistic of another row, which the row block does not hold; read at its own
    row it would fuse)."""
    def dw_of_own_output(x, w, dy):
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return x * rstd * w, (dy * x * rstd.flip(0)).sum(0)

    torch.compile(dw_of_own_output)(torch.randn(64, 40), torch.randn(40), torch.randn(64, 40))
    assert inductor_ext.metrics.rejected_pairs == {"producer_consumer": 1}
    assert inductor_ext.metrics.mix_order_kernels == 0


def _children_cpu_s() -> float:
    """CPU seconds of finished child processes (torchrun waits for its ranks)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _distributed_unavailable() -> str | None:
    if not dist.is_available():
        return "torch.distributed is not available in this torch build"
    if not dist.is_gloo_available():
        return "torch.distributed has no gloo backend in this torch build"
    return None


@pytest.fixture(scope="module")
def bench_rows(tmp_path_factory):
    """One torchrun of the bench on CPU: 2 gloo ranks, DDP and FSDP2, plugin on and off,
    no timing. Returns (CSV rows, wall seconds); the time is printed (pytest -s)."""
    reason = _distributed_unavailable()
    if reason:
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("distributed")
    out = tmp / "rows.csv"
    env = dict(os.environ, TRITON_INTERPRET="1", TORCHINDUCTOR_CACHE_DIR=str(tmp / "cache"),
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1")
    env.pop("INDUCTOR_EXT", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           "2", BENCH, "--device", "cpu", "--backend", "gloo", "--modes", "ddp,fsdp2",
           "--model", "blocks", "--variants", "off,on", "--rounds", "0", "--csv", str(out)]
    start, used = time.perf_counter(), _children_cpu_s()
    proc = subprocess.run(cmd, env=env, cwd=str(tmp), capture_output=True, text=True,
                          timeout=900)
    wall, cpu = time.perf_counter() - start, _children_cpu_s() - used
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    print(f"\nbench_distributed on CPU (2 ranks, DDP + FSDP2, plugin on/off): wall {wall:.1f} s,"
          f" CPU {cpu:.1f} s over all processes")
    with open(out, newline="") as f:
        return list(csv.DictReader(f)), wall


def _row(rows, mode, rank, variant):
    found = [r for r in rows if (r["mode"], r["rank"], r["variant"]) == (mode, str(rank),
                                                                          variant)]
    assert len(found) == 1, f"{mode} rank {rank} {variant}: {len(found)} rows"
    return found[0]


@pytest.mark.parametrize("mode", ["ddp", "fsdp2"])
@pytest.mark.parametrize("rank", [0, 1])
def test_every_norm_fused_with_gradients_of_plugin_off(bench_rows, mode, rank):
    rows, _ = bench_rows
    on = _row(rows, mode, rank, "on")
    assert on["world"] == "2"
    assert int(on["norm_modules"]) == NORMS
    # Launched in the step: FSDP2's two layers run one compiled layer graph, so the
    # kernels generated may be fewer than the norms fused.
    assert int(on["norms_fused"]) == NORMS, on
    assert 1 <= int(on["fused_kernels"]) <= NORMS
    assert on["declined"] == "", on["declined_names"]
    tol = 2e-5  # fp32: summation order only
    assert float(on["max_grad_err_vs_off"]) <= tol
    assert float(on["max_grad_err_vs_eager"]) <= tol
    assert float(_row(rows, mode, rank, "off")["max_grad_err_vs_eager"]) <= tol


def test_ddp_ranks_agree(bench_rows):
    """DDP all-reduces: both ranks end with the same gradients, so the same errors."""
    rows, _ = bench_rows
    errs = {_row(rows, "ddp", rank, "on")["max_grad_err_vs_eager"] for rank in (0, 1)}
    assert len(errs) == 1
