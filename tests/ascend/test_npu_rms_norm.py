"""Every norm accounted for on torch_npu: ``torch_npu.npu_rms_norm``.

Ascend model ports call ``torch_npu.npu_rms_norm(x, gamma, eps)`` (returns (y, rstd)); its
backward ``npu_rms_norm_backward`` (one aclnnRmsNormGrad: dx and a float32 dgamma) has no
decomposition under torch_npu's default Inductor backend, so Inductor makes it an extern
kernel. By default the pass records each such norm as ``extern_norm`` in its module's name
(counters, reject table, report); with ``config.decompose_npu_rms_norm`` the backward is
decomposed into ATen ops and every such norm fuses.

The model: 2 layers of a Llama-style block (attention through SDPA and a SwiGLU MLP, each
behind an RMSNorm that calls ``torch_npu.npu_rms_norm``), through torch_npu's emulated
default backend. The CANN ops are the emulation's (tests/support/npu_cann_ops.py: their
contract, CPU reference kernels). Runs inside the venv of tests/ascend/setup_npu_venv.sh:

    TRITON_INTERPRET=1 .npu-venv/bin/python -m pytest -q tests/ascend/test_npu_rms_norm.py
"""

from __future__ import annotations

import copy
import csv
import glob
import io
import logging
import sys

import pytest
import torch
import torch.nn.functional as F
from npu_cases import boom, fused_kernels, plugin_on
from torch import nn

import inductor_ext
from inductor_ext import report
from inductor_ext.scheduler import externs
from tests.support import npu_cann_ops, reference
from tests.support import npu_emulation as emu

needs_emulation = pytest.mark.skipif(not emu.can_emulate(),
                                     reason=str(emu.emulation_unavailable_reason()))

HIDDEN, HEADS, FFN, LAYERS, B, T = 64, 4, 128, 2, 2, 8
NORMS = [f"layers.{i}.{name}" for i in range(LAYERS)
         for name in ("input_layernorm", "post_attention_layernorm")]
OP = "npu::npu_rms_norm_backward"


class NpuRMSNorm(nn.Module):
    """An Ascend port's RMSNorm: ``torch_npu.npu_rms_norm``. float64 (no CANN kernel takes
    it) computes the same formula in plain torch, for the reference."""

    def __init__(self, n: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(n))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float64:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        import torch_npu

        return torch_npu.npu_rms_norm(x, self.weight, self.eps)[0]


class Block(nn.Module):
    """Llama-style: x + o(attn(norm(x))), then h + down(silu(gate(norm(h))) * up(norm(h)))."""

    def __init__(self) -> None:
        super().__init__()
        self.input_layernorm = NpuRMSNorm(HIDDEN)
        self.post_attention_layernorm = NpuRMSNorm(HIDDEN)
        self.qkv = nn.Linear(HIDDEN, 3 * HIDDEN, bias=False)
        self.o = nn.Linear(HIDDEN, HIDDEN, bias=False)
        self.gate = nn.Linear(HIDDEN, FFN, bias=False)
        self.up = nn.Linear(HIDDEN, FFN, bias=False)
        self.down = nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        q, k, v = (self.qkv(self.input_layernorm(x)).view(b, t, 3, HEADS, h // HEADS)
                   .permute(2, 0, 3, 1, 4))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, h))
        n = self.post_attention_layernorm(x)
        return x + self.down(F.silu(self.gate(n)) * self.up(n))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Block() for _ in range(LAYERS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def _case(dtype: torch.dtype = torch.float32):
    """(model, x, dy) in `dtype`; x needs grad, so every norm has a dx."""
    torch.manual_seed(0)
    model = Model().to(dtype)
    x = torch.randn(B, T, HIDDEN, dtype=dtype, requires_grad=True)
    dy = torch.randn(B, T, HIDDEN, dtype=dtype)
    return model, x, dy


def _grads(model: nn.Module, fn, x: torch.Tensor, dy: torch.Tensor):
    """(dx, dgamma of every norm in NORMS order) of fn(x) under dy."""
    params = dict(model.named_parameters())
    gammas = [params[f"{name}.weight"] for name in NORMS]
    return torch.autograd.grad(fn(x), [x, *gammas], dy)


def _compiled_grads(model, x, dy, **options):
    with plugin_on(target="ascend", **options):
        return _grads(model, torch.compile(model, dynamic=False), x, dy)


def _reject_rows() -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for path in sorted(glob.glob("metric_table_mix_order_reject.csv")):
        with open(path, newline="") as f:
            rows += list(csv.DictReader(f))
    return rows


# -- without the emulation -----------------------------------------------------------------


@pytest.mark.parametrize("name,norm", [
    ("npu::npu_rms_norm_backward", True), ("aten::native_layer_norm_backward", True),
    ("aten::_fused_rms_norm_backward", True), ("npu::npu_add_layer_norm_backward", True),
    ("npu::npu_rms_norm", False), ("aten::mm", False), ("aten::native_batch_norm_backward",
                                                         False),
    ("npu::npu_swiglu_backward", False)])
def test_which_extern_ops_are_norm_backwards(name, norm):
    assert externs.is_norm_backward(name) is norm


def test_the_option_is_validated():
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="decompose_npu_rms_norm must be a bool"):
            inductor_ext.config.patch(decompose_npu_rms_norm=bad)
    with inductor_ext.config.patch(decompose_npu_rms_norm=True):
        inductor_ext.config.validate()


def test_without_torch_npu_nothing_is_installed():
    """No torch_npu op registered (this process has no torch_npu loaded): install() says so
    and leaves Inductor's table alone."""
    from inductor_ext.targets.ascend import rms_norm_decomp

    if "torch_npu" in sys.modules:
        pytest.skip("torch_npu is loaded in this process (an emulation session is open)")
    assert rms_norm_decomp.torch_npu_op() is None
    assert rms_norm_decomp.install() is False and not rms_norm_decomp.installed()


# -- the emulated ops ----------------------------------------------------------------------


@needs_emulation
def test_emulated_ops_keep_torch_npus_contract(npu):
    """Schemas as torch_npu declares them, rstd and dgamma float32 whatever the input dtype,
    the Python name bound to the op, and autograd through npu_rms_norm_backward; values as
    the float64 formula."""
    import torch_npu

    assert torch_npu.npu_rms_norm is torch.ops.npu.npu_rms_norm
    assert torch_npu.npu_rms_norm_backward is torch.ops.npu.npu_rms_norm_backward
    for name, schema in npu_cann_ops.SCHEMAS.items():
        assert getattr(torch.ops.npu, name).default._schema == \
            torch._C.parse_schema(f"npu::{schema}")
    torch.manual_seed(0)
    x = torch.randn(3, 5, 32, dtype=torch.bfloat16, requires_grad=True)
    w = (1 + 0.1 * torch.randn(32, dtype=torch.bfloat16)).requires_grad_()
    y, rstd = torch_npu.npu_rms_norm(x, w, 1e-6)
    assert (y.dtype, rstd.dtype, tuple(rstd.shape)) == (torch.bfloat16, torch.float32, (3, 5, 1))
    dy = torch.randn_like(y)
    dx, dgamma = torch.ops.npu.npu_rms_norm_backward(dy, x, w, rstd)
    assert (dx.dtype, dgamma.dtype, tuple(dgamma.shape)) == (torch.bfloat16, torch.float32, (32,))
    got = torch.autograd.grad(y, [x, w], dy)
    assert [g.dtype for g in got] == [torch.bfloat16, torch.bfloat16]
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    y64 = x64 * torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + 1e-6) * w64
    ref = torch.autograd.grad(y64, [x64, w64], dy.double())
    reference.assert_close([y], [y64], ["y"])
    reference.assert_close(got, ref, ["dx", "dgamma"])
    reference.assert_close([dgamma], [ref[1]], ["dgamma (fp32)"])


# -- by default: recorded ------------------------------------------------------------------


@needs_emulation
def test_each_npu_rms_norm_is_recorded_in_its_modules_name(kernels, norm_views):
    """Option off: each norm's backward is one extern kernel, declined as extern_norm in its
    module's name: counters, reject table, hook summary and report agree. The forward's
    npu_rms_norm externs and the Linear layers' matmuls (externs that are no norm backward)
    are not recorded."""
    model, x, dy = _case()
    _compiled_grads(model, x, dy)
    assert inductor_ext.metrics.mix_order_kernels == 0 and not fused_kernels(kernels)
    assert dict(inductor_ext.metrics.rejected_pairs) == {"extern_norm": len(NORMS)}
    assert dict(inductor_ext.metrics.norms) == {"found": len(NORMS), "declined": len(NORMS)}
    assert dict(inductor_ext.metrics.norms_declined) == {"extern_norm": len(NORMS)}
    views = norm_views()
    assert set(views.values()) == {(len(NORMS), 0, len(NORMS))}, views
    rows = _reject_rows()
    assert sorted(row["modules"] for row in rows) == sorted(NORMS)
    for row in rows:
        assert row["reason"] == "extern_norm" and row["kind"] == "norm", row
        assert row["norms"] == row["modules"], row
        assert row["graph_id"].endswith("backward"), row
        assert (row["M"], row["N"]) == (str(B * T), str(HIDDEN)), row
        assert OP in row["detail"] and "decompose_npu_rms_norm" in row["detail"], row
    out = io.StringIO()  # what `python -m inductor_ext.report` prints for the tables
    report.summarize(report.read_tables(sorted(glob.glob("metric_table_mix_order_*.csv"))),
                     out)
    text = out.getvalue()
    lines = {ln.split()[0]: ln for ln in text.splitlines() if ln.startswith("  ") and ln.strip()}
    assert all("declined: extern_norm" in lines[name] for name in NORMS), text


@needs_emulation
def test_extern_ops_that_are_no_norm_backward_are_not_recorded(kernels):
    """Inference through npu_rms_norm (an extern, but a forward) and a matmul (an extern
    kernel): nothing recorded, no norm counted."""
    import torch_npu

    w = 1 + 0.1 * torch.randn(HIDDEN)
    m = torch.randn(HIDDEN, HIDDEN)

    def fn(x):
        return torch_npu.npu_rms_norm(x, w, 1e-6)[0] @ m

    x = torch.randn(B * T, HIDDEN)
    with plugin_on(target="ascend"):
        got = torch.compile(fn, dynamic=False)(x)
    reference.assert_close([got], [fn(x)])
    assert not inductor_ext.metrics.rejected_pairs
    assert not inductor_ext.metrics.norms


@needs_emulation
def test_a_failing_scan_never_breaks_a_compile(kernels, monkeypatch, ext_records):
    """The scan raising: logged once as a warning, nothing recorded, the compile goes on."""
    from inductor_ext import diagnostics

    monkeypatch.setattr(externs, "op_name_of", boom)
    monkeypatch.setattr(diagnostics, "warned", set())  # once per process: this one is ours
    model, x, dy = _case()
    got = _compiled_grads(model, x, dy)
    reference.assert_close(got, _grads(model, model, x, dy))
    assert "extern_norm" not in inductor_ext.metrics.rejected_pairs
    warnings = [r for r in ext_records if r.levelno == logging.WARNING
                and "extern kernels" in r.getMessage()]
    assert len(warnings) == 1 and "injected failure" in warnings[0].getMessage(), warnings


# -- opt in: decomposed and fused ------------------------------------------------------------


@needs_emulation
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_decomposed_npu_rms_norm_fuses_every_norm(kernels, dtype):
    """decompose_npu_rms_norm on: every norm's backward is Inductor reductions, each pair
    fused into one kernel on torch_npu's class; dx and every dgamma within the dtype's
    tolerance of float64 (no worse than 4x eager's own error)."""
    from inductor_ext.targets.ascend import rms_norm_decomp

    assert rms_norm_decomp.install() and rms_norm_decomp.installed()
    model, x, dy = _case(dtype)
    got = _compiled_grads(model, x, dy, decompose_npu_rms_norm=True)
    assert inductor_ext.metrics.mix_order_kernels == len(NORMS), \
        (dict(inductor_ext.metrics.rejected_pairs), dict(inductor_ext.metrics.norms))
    assert len(fused_kernels(kernels)) == len(NORMS)
    assert dict(inductor_ext.metrics.norms) == {"found": len(NORMS), "fused": len(NORMS)}
    assert not inductor_ext.metrics.rejected_pairs, dict(inductor_ext.metrics.rejected_pairs)
    ref_model = copy.deepcopy(model).double()
    x64 = x.detach().double().requires_grad_()
    ref = _grads(ref_model, ref_model, x64, dy.double())
    eager = _grads(model, model, x, dy)
    names = ["dx", *(f"{name}.dgamma" for name in NORMS)]
    assert [g.dtype for g in got] == [dtype] * len(names)
    reference.assert_close(got, ref, names, eager=eager)


@needs_emulation
def test_installed_but_off_keeps_the_extern(kernels):
    """With the entry in Inductor's table and the option off, the table's function declines
    (NotImplemented) and the op stays one extern kernel, through the fallback registered with
    it (Inductor's implicit one would refuse an op that has a decomposition)."""
    from torch._inductor import lowering
    from torch._inductor.decomposition import select_decomp_table

    from inductor_ext.targets.ascend import rms_norm_decomp

    assert rms_norm_decomp.install()
    op = rms_norm_decomp.torch_npu_op()
    assert op is torch.ops.npu.npu_rms_norm_backward.default and op in lowering.lowerings
    entry = select_decomp_table()[op]
    args = (torch.randn(4, 8), torch.randn(4, 8), torch.randn(8), torch.rand(4, 1))
    assert entry(*args) is NotImplemented
    with inductor_ext.config.patch(decompose_npu_rms_norm=True):
        dx, dgamma = entry(*args)
    want = npu_cann_ops.rms_norm_backward(*args)
    reference.assert_close([dx, dgamma], list(want), ["dx", "dgamma"])
    assert dgamma.dtype == torch.float32
    model, x, dy = _case()
    got = _compiled_grads(model, x, dy)
    reference.assert_close(got, _grads(model, model, x, dy))
    assert dict(inductor_ext.metrics.rejected_pairs) == {"extern_norm": len(NORMS)}
    assert inductor_ext.metrics.mix_order_kernels == 0


@needs_emulation
def test_turning_the_plugin_on_installs_the_decomposition(kernels):
    """torch_npu loaded after inductor_ext (the tests' order) and no install() call: turning
    the plugin on (options(), through on_enable) installs the entry, so the first compile
    with the option on already decomposes and fuses every norm."""
    from torch._inductor.decomposition import select_decomp_table

    from inductor_ext.targets.ascend import rms_norm_decomp

    rms_norm_decomp.uninstall()
    op = rms_norm_decomp.torch_npu_op()
    assert not rms_norm_decomp.installed() and op not in select_decomp_table()
    model, x, dy = _case()
    got = _compiled_grads(model, x, dy, decompose_npu_rms_norm=True)
    assert rms_norm_decomp.installed()
    assert "extern_norm" not in inductor_ext.metrics.rejected_pairs
    assert inductor_ext.metrics.mix_order_kernels == len(NORMS)
    assert dict(inductor_ext.metrics.norms) == {"found": len(NORMS), "fused": len(NORMS)}
    reference.assert_close(got, _grads(model, model, x, dy))


@needs_emulation
def test_a_missing_entry_is_installed_for_the_next_compile(kernels, ext_records):
    """The entry gone when a graph is traced with the option on (taken out after the plugin
    was turned on): that compile keeps the extern, recorded with what happened; the scan
    installed the entry, so the next compile decomposes and fuses every norm."""
    from inductor_ext.targets.ascend import rms_norm_decomp

    model, x, dy = _case()
    with plugin_on(target="ascend", decompose_npu_rms_norm=True):
        rms_norm_decomp.uninstall()
        assert not rms_norm_decomp.installed()
        _grads(model, torch.compile(model, dynamic=False), x, dy)
        assert dict(inductor_ext.metrics.rejected_pairs) == {"extern_norm": len(NORMS)}
        assert rms_norm_decomp.installed()
        declined = [r.getMessage() for r in ext_records
                    if ": extern_norm npu::" in r.getMessage()]
        assert len(declined) == len(NORMS)
        assert all("installed now" in m for m in declined), declined
        torch._dynamo.reset()
        inductor_ext.metrics.reset()
        got = _grads(model, torch.compile(model, dynamic=False), x, dy)
    assert inductor_ext.metrics.mix_order_kernels == len(NORMS)
    assert dict(inductor_ext.metrics.norms) == {"found": len(NORMS), "fused": len(NORMS)}
    reference.assert_close(got, _grads(model, model, x, dy))
