"""The fused kernels through torch_npu's emulated default backend, each checked four ways.

Runs in the venv of setup_npu_venv.sh (torch_npu 2.13's real Inductor backend with its
runtime stubbed, triton-ascend 3.2.0, ascendnpu-ir 1.2.0); see check_npu.sh.

For every norm-backward case (RMSNorm, LayerNorm with and without bias; fp32, bf16, fp16;
N in 128 ... 8192, long rows column-tiled, and 12288 / 16384 asserted to plan as 8192;
odd and even M) and every norm backward of a
2-layer Llama, GPT-2, Qwen3 and Mistral training step (transformers configs; models on
910B3 only, --quick keeps Qwen3, Mistral and DiT; --smoke, two cases, Qwen3 and DiT on
the 910B3 alone), on one SoC per (vector cores, UB) class of
tests/support/npu_socs.py (SOCS: Ascend910B1, Ascend910B3, Ascend950; each in its own
process and emulation session). A class that differs from a fully checked one only in
vector cores (the 48-core A2/A3 SoCs vs the 910B3) runs core_count_cases() only, unless
--all-cases: cores change the grid, not the tile. TORCH_NPU_VERSION picks the torch_npu
release (check_npu.sh):

  fused     the plugin built the kernel on torch_npu's NPUIndexTritonKernel;
  numerics  the compiled gradients match float64 (tests.support.reference's per-dtype
            tolerances) with the kernels run in triton-ascend's interpreter, after
            torch_npu's autotuner timed every config of the kernel on the emulated
            device (its launch path: prerun and benchmark on clone_args);
  lowered   every launch config went through triton-ascend's make_ttir and ttir_to_linalg;
  planned   bishengir-compile planned each config's Unified Buffer within the SoC's UB
            (high-water read from its saved module.hivm.opt.mlir; ub_plan.py).

The default-options subset (tests/ascend/cost_cases.py: COST_CASES whose op, dtype and N
the selected cases have, lines `default-options-...`) runs without always_fuse: the cost
model's decision must be the roofline's expectation on the hook's own shape, a decline
`not_profitable` with the model's three times, the gradients float64's; a disagreement
counts in F (its kernels are not counted in K).

A model that fails with the plugin on is run once with it off; if it fails there too
(torch_npu's own kernels), it is reported as BROKEN and counted in B, not F. A negative
control (a UB budget forced 16x too large, so the tile is far over the UB) must come back
from bishengir as overflow. Per-kernel lines, `B: B broken
without the plugin`, then exactly:

    npu: K fused through torch_npu, K numerics ok, K lowered, K ub-planned, F failed

K counts kernel variants (case x SoC). A model also needs MODEL_MIN_FUSED of its norm
backwards fused (inductor_ext.metrics.norms: norms, not kernels, which may also carry other
columns). `--calibration FILE` writes the UB calibration table
(our estimate vs bishengir's plan per kernel family); `--csv FILE` every planned config.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import csv
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

import cost_cases  # noqa: E402
import torch  # noqa: E402
import ub_plan  # noqa: E402

import inductor_ext  # noqa: E402
from inductor_ext.targets.ascend import kernel as npu_kernel  # noqa: E402
from inductor_ext.targets.ascend import ub as npu_ub  # noqa: E402
from tests.support import npu_emulation as emu  # noqa: E402
from tests.support import npu_socs, reference  # noqa: E402

OPS = ("rms", "ln", "ln_nobias")
#: adaLN (DiT's modulated LayerNorm without affine, x [B, T, N], scale / shift [B, 1, N]):
#: d(scale) / d(shift) per sample, segmented partials (M = 33: 3 samples of 11 rows, M = 64:
#: 2 of 32; --quick keeps bf16 at M = 33); fp32 and bf16, persistent and column-tiled rows.
ADALN_NS = (768, 8192)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
NS = (128, 768, 4096, 5120, 8192)
#: Widths models train at whose kernel is N=8192's with another N: every SoC plans them as
#: it plans 8192 (the same tile, rows, configs; a looped row's N is a loop bound, not a
#: tile), which `same_plans_as_8192` asserts before any case runs. Their numerics would
#: only run the same kernel over more column tiles, a third of this check's time.
WIDER_AS_8192 = (12288, 16384)
#: One SoC per (vector cores, UB) class of the SoC table (tests/support/npu_socs.py): the
#: calibrated Ascend910B3 (40 vector cores, the A2/A3 UB), Ascend910B1 (48: 910B1/B2/B2C
#: and the 48-core 910_93 parts), Ascend950. Each runs in its own process.
SOCS = tuple(s.name for s in npu_socs.representatives())
MODELS = ("llama", "gpt2", "qwen3", "mistral", "dit")
#: The models --quick keeps (about a minute each): the per-head q/k norms (several row
#: axes) and a plain decoder (Mistral: Llama's norms, sliding-window attention config).
QUICK_MODELS = ("qwen3", "mistral", "dit")
#: --smoke (CI's check of the older paired releases): a persistent and a column-tiled row,
#: the per-head q/k norms of Qwen3 and DiT's adaLN (the two layouts whose axes torch_npu
#: tiles differently before 2.13; Qwen3 is torch_npu 2.11's own failure there, counted in
#: B), on the calibrated SoC only (about 3 minutes).
SMOKE_CASES = ("rms-bf16-N768-", "ln-bf16-N8192-")
SMOKE_MODELS = ("qwen3", "dit")
SMOKE_SOCS = ("Ascend910B3",)
#: SoCs the models run on (each model compile takes a minute in the emulation).
MODEL_SOCS = ("Ascend910B3",)
#: Norm backwards each model must fuse (Llama: 2 RMSNorms per layer + the final one, one
#: may be declined; GPT-2: 2 LayerNorms per layer + ln_f; Qwen3: Llama's plus the per-head
#: q_norm / k_norm of each layer, on [B, T, H, D] with several row axes; Mistral: Llama's).
MODEL_MIN_FUSED = {"llama": 4, "gpt2": 5, "qwen3": 9, "mistral": 4, "dit": 4}
#: Norms of each model (inductor_ext.metrics.norms counts those whose kernels were emitted;
#: DiT (tests/support/models.py, 2 blocks): blocks.0.norm1 has no dx, its input needs none).
MODEL_NORMS = {"llama": 5, "gpt2": 5, "qwen3": 9, "mistral": 5, "dit": 4}
#: Models whose norms must also fuse their per-sample (segmented) columns: their norm
#: kernels with segments, at least.
MODEL_MIN_SEGMENTED = {"dit": 3}
#: The negative control's UB budget: 16x the SoC's, so the tile is far over the real UB.
NEGATIVE_UB_FACTOR = 16
#: Models that failed with the plugin on and also with it off (torch_npu's own kernels):
#: reported as B, not F ("<soc> <model>: <error>"); filled by run_soc.
BROKEN: list[str] = []


def plugin_off() -> Any:
    """Inductor config with the plugin's pass (and cache-key carrier) unset: stock
    torch_npu kernels, to tell a model torch_npu itself cannot run from our failure."""
    return torch._inductor.config.patch({k: None for k, v in inductor_ext.options().items()
                                         if not isinstance(v, bool)})


@dataclasses.dataclass
class Kernel:
    """One fused kernel variant (a case on one SoC) and what the checks found."""

    case: str
    soc: str
    configs: list[dict[str, Any]]
    plan: dict[str, Any]
    partials: int
    src: str = ""
    signature: dict[str, str] = dataclasses.field(default_factory=dict)
    numerics: bool = False
    lowered: bool = False
    #: The kernel's name in the wrapper, and the configs torch_npu's autotuner launched
    #: (timed) before the real launch, from the emulated device's record.
    name: str = ""
    timed: int = 0
    #: Per config: bishengir's plan ({"high_water", "overflow_bits", "error"}).
    plans: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    estimates: list[int] = dataclasses.field(default_factory=list)
    error: str = ""
    #: Its model also fails with the plugin off (torch_npu's own kernels): counted in B.
    broken: bool = False
    futures: list[Any] = dataclasses.field(default_factory=list, repr=False)

    def resolve(self) -> None:
        """Wait for bishengir and keep its answers."""
        for future in self.futures:
            result = future.result()
            self.plans.append({"high_water": result.high_water,
                               "overflow_bits": result.overflow_bits, "error": result.error})
        self.futures = []

    def planned_ok(self, i: int) -> bool:
        p = self.plans[i]
        return (p["high_water"] is not None and p["overflow_bits"] is None and not p["error"]
                and p["high_water"] <= ub_plan.UB_BYTES[self.soc])

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key in ("src", "signature", "futures"):
            out.pop(key)
        return out

    @property
    def family(self) -> str:
        """Kernel family, SoC and multibuffer aside: partials and bytes per element."""
        layout = self.layout(self.configs[0])
        return f"k{layout.partials}-e{layout.row_elem_bytes}"

    @property
    def kind(self) -> str:
        return "column-tiled" if self.plan["column_tiled"] else "persistent"

    def layout(self, cfg: dict[str, Any]) -> npu_ub.Layout:
        """The UB model's view of one config (axis-named keys: X0BLOCK_SUB, R1BLOCK_SUB; a
        kernel with several row axes (Qwen3's q/k norms) holds their product of rows)."""
        extra = dict(self.plan["extra"])
        rows = [v for k, v in cfg.items() if k.endswith("BLOCK_SUB") and k[0] != "R"]
        cols = [v for k, v in cfg.items() if k.endswith("BLOCK_SUB") and k[0] == "R"]
        return npu_ub.Layout(block_m=math.prod(rows),
                             cols=math.prod(cols) if cols else self.plan["r0_block"],
                             row_elem_bytes=extra["row_elem_bytes"], partials=self.partials,
                             looped=self.plan["column_tiled"],
                             multibuffer=bool(cfg["multibuffer"]),
                             ub_class=npu_socs.get(self.soc).ub_class)


# ---------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------


def case_name(case: tuple[str, str, int, int]) -> str:
    """A case's name in the lines and filters: `op-dtype-N<N>-M<M>`."""
    op, dname, N, M = case
    return f"{op}-{dname}-N{N}-M{M}"


def norm_cases() -> list[tuple[str, str, int, int]]:
    """(op, dtype, N, M): every op x dtype x N, M alternating odd (33) and even (64)."""
    out = []
    for i, (op, dname, N) in enumerate((o, d, n) for o in OPS for d in DTYPES for n in NS):
        out.append((op, dname, N, 33 if i % 2 else 64))
    for i, (dname, N) in enumerate((d, n) for d in ("fp32", "bf16") for n in ADALN_NS):
        out.append(("adaln", dname, N, 33 if i % 2 else 64))
    return out


def adaln_case(dname: str, N: int, M: int):
    """(fn, inputs, dy, names) of DiT's modulated LayerNorm over M = B * T rows (B = 3
    when it divides M, else 2), fp32 statistics as F.layer_norm keeps them."""
    import torch.nn.functional as F

    dtype = DTYPES[dname]
    B = 3 if M % 3 == 0 else 2
    torch.manual_seed(0)
    x = torch.randn(B, M // B, N, dtype=dtype, requires_grad=True)
    scale = (0.5 * torch.randn(B, 1, N)).to(dtype).requires_grad_()
    shift = torch.randn(B, 1, N, dtype=dtype, requires_grad=True)

    def fn(x, scale, shift):
        return F.layer_norm(x, (N,), None, None, 1e-6) * (1 + scale) + shift
    return fn, [x, scale, shift], torch.randn_like(x), ["dx", "dscale", "dshift"]


def core_count_cases(cases: list[tuple[str, str, int, int]]
                     ) -> list[tuple[str, str, int, int]]:
    """The cases of a SoC whose class differs from a fully checked one only in vector cores
    (npu_socs.core_count_only): cores change the grid (programs, each one's rows), never
    the tile, so per op a persistent (N=768) and a column-tiled (N=8192) row at M=64,
    whose 64 one-row blocks outnumber the cores (48 programs here, 40 on the 910B3); 9
    cases, 3 under --quick (bf16)."""
    return [c for c in cases if c[2] in (768, 8192) and c[3] == 64]


def same_plans_as_8192() -> list[str]:
    """Where a width of WIDER_AS_8192 would not be planned as N=8192 is (the check would
    then miss its kernel): RMSNorm and LayerNorm, each dtype, both row counts, on each
    SoC class, with the plan the hook makes from the SoC's facts. Empty when none."""
    from ascend_model import ES, shape_info

    from inductor_ext.plan import DeviceInfo, PlanOptions, planner_for
    from inductor_ext.plan import knobs as tuning_mod

    planner = planner_for("ascend")
    tuning, options = tuning_mod.make("ascend", {}), PlanOptions()
    differ = []
    for soc in npu_socs.representatives():
        device = DeviceInfo(type="npu", name=soc.name, cores=soc.vector_cores or 1,
                            ub_bytes=soc.ub_bytes, npu_backend="torch_npu",
                            ascend950=soc.ascend950)
        for op, dname, M in ((o, d, m) for o in ("rms", "ln") for d in DTYPES
                             for m in (33, 64)):
            base = planner.plan(shape_info(op, M, 8192, ES[dname]), device, tuning, options)
            differ += [f"{soc.name} {op}-{dname}-N{N}-M{M}" for N in WIDER_AS_8192
                       if planner.plan(shape_info(op, M, N, ES[dname]), device, tuning,
                                       options) != base]
    return differ


def run_norm(op: str, dname: str, N: int, M: int) -> tuple[bool, str]:
    """Compile and run one norm forward+backward; (gradients ok, detail)."""
    dtype = DTYPES[dname]
    names = ["dx", "dw", "db"]
    if op == "adaln":
        fn, inputs, dy, names = adaln_case(dname, N, M)
    else:
        torch.manual_seed(0)
        x = torch.randn(M, N, dtype=dtype, requires_grad=True)
        w = (1 + 0.1 * torch.randn(N, dtype=dtype)).requires_grad_()
        if op == "rms":
            fn, inputs = reference.rms_norm, [x, w]
        else:
            b = torch.randn(N, dtype=dtype, requires_grad=True) if op == "ln" else None
            fn, inputs = reference.layer_norm, [x, w, b]
        dy = torch.randn(M, N, dtype=dtype)
    got = reference.autograd_grads(torch.compile(fn, dynamic=False), inputs, dy)
    ref = reference.float64_grads(fn, inputs, dy)
    eager = reference.autograd_grads(fn, inputs, dy)
    try:
        reference.assert_close(got, ref, names[:len(got)], eager=eager)
    except AssertionError as exc:
        return False, str(exc)
    errs = ", ".join(f"{n} {reference.max_rel_err(g, r):.1e}"
                     for n, g, r in zip(names, got, ref))
    return True, errs


def run_model(name: str) -> tuple[bool, str]:
    """One training step of a 2-layer model, compiled vs eager fp32 (loss and every
    parameter's gradient; eager is the reference, the model runs in fp32)."""
    import transformers

    torch.manual_seed(0)
    if name == "dit":
        return run_dit()
    if name == "llama":
        config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128,
                                          num_hidden_layers=2, num_attention_heads=4,
                                          num_key_value_heads=2, vocab_size=128,
                                          max_position_embeddings=64)
        model = transformers.LlamaForCausalLM(config)
    elif name == "qwen3":
        config = transformers.Qwen3Config(hidden_size=64, intermediate_size=128,
                                          num_hidden_layers=2, num_attention_heads=4,
                                          num_key_value_heads=2, head_dim=16,
                                          vocab_size=128, max_position_embeddings=64)
        model = transformers.Qwen3ForCausalLM(config)
    elif name == "mistral":
        config = transformers.MistralConfig(hidden_size=64, intermediate_size=128,
                                            num_hidden_layers=2, num_attention_heads=4,
                                            num_key_value_heads=2, head_dim=16,
                                            vocab_size=128, max_position_embeddings=64)
        model = transformers.MistralForCausalLM(config)
    else:
        config = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=128,
                                         n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                                         attn_pdrop=0.0)
        model = transformers.GPT2LMHeadModel(config)
    model = model.float().train()
    ids = torch.randint(0, config.vocab_size, (2, 16))
    loss_err, worst = reference.training_step_errors(model, ids)
    ok = loss_err < 1e-4 and worst < 1e-3
    return ok, f"loss diff {loss_err:.1e}, worst grad rel err {worst:.1e}"


def broken_without_plugin(name: str) -> str:
    """Run the model once with the plugin off; its failure there ("" if it passes): a
    model torch_npu's own kernels cannot run is no verdict on the fused kernels."""
    torch._dynamo.reset()
    try:
        with plugin_off():
            ok, detail = run_model(name)
    except Exception as exc:
        traceback.print_exc(limit=4, file=sys.stderr)
        return f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        torch._dynamo.reset()
    return "" if ok else detail


def run_dit() -> tuple[bool, str]:
    """One step of the 2-block DiT of tests/support/models.py (adaLN: LayerNorm without
    affine, per-sample scale / shift / gate), compiled vs eager fp32."""
    from tests.support import models

    work = models.build("dit", models.Size(batch=2, seq=12, hidden=32, layers=2))
    eager_loss, eager = work.loss(), models.grads(work)
    compiled = torch.compile(work.model, dynamic=False)
    loss, grads = work.loss(compiled), models.grads(work, compiled)
    worst = max(reference.max_rel_err(grads[k], eager[k]) for k in eager)
    loss_err = abs(loss.item() - eager_loss.item())
    return loss_err < 1e-4 and worst < 1e-3, (f"loss diff {loss_err:.1e}, worst grad rel "
                                             f"err {worst:.1e}")


# ---------------------------------------------------------------------------------------
# Capture, lower, plan
# ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def capture(into: list[dict[str, Any]]):
    """Record every fused kernel the torch_npu adapter defines."""
    original = npu_kernel.NpuKernelAdapter.define_kernel

    def define_kernel(self, scheduling, src_code, node_schedule, kernel):
        name = original(self, scheduling, src_code, node_schedule, kernel)
        into.append({"name": name, "src": src_code,
                     "signature": dict(kernel.triton_meta["signature"]),
                     "configs": kernel.launch_configs(),
                     "plan": kernel.plan.to_meta(), "partials": len(kernel.partials)})
        return name

    npu_kernel.NpuKernelAdapter.define_kernel = define_kernel
    try:
        yield into
    finally:
        npu_kernel.NpuKernelAdapter.define_kernel = original


def lower_and_plan(kernel: Kernel, pool: concurrent.futures.Executor, workdir: str) -> None:
    """Lower each distinct block config (in this process: the front end needs the
    emulation's un-patched triton.language), then plan every config in the pool."""
    from lower_kernels import lower_function

    linalg_by_block: dict[tuple, str] = {}
    with emu.frontend() as load:
        fn = load(kernel.src)
        constexprs = {fn.arg_names[i] for i in fn.constexprs}
        for cfg in kernel.configs:
            constants = {k: v for k, v in cfg.items() if k in constexprs}
            key = tuple(sorted(constants.items()))
            if key in linalg_by_block:
                continue
            signature = {k: v for k, v in kernel.signature.items() if k not in constants}
            _, linalg = lower_function(fn, signature, constants,
                                       ub_plan.lowering_soc(kernel.soc),
                                       {"multibuffer": bool(cfg["multibuffer"])})
            path = os.path.join(workdir, f"{len(linalg_by_block)}.mlir")
            with open(path, "w") as f:
                f.write(linalg)
            linalg_by_block[key] = path
    kernel.lowered = True
    for i, cfg in enumerate(kernel.configs):
        constants = {k: v for k, v in cfg.items() if k in constexprs}
        path = linalg_by_block[tuple(sorted(constants.items()))]
        kernel.futures.append(pool.submit(ub_plan.plan, path, kernel.soc,
                                          bool(cfg["multibuffer"]),
                                          os.path.join(workdir, f"plan{i}")))
        kernel.estimates.append(npu_ub.estimate(kernel.layout(cfg)))


def autotuned_configs(kernel: Kernel, launches: list[tuple[str, dict, bool]]) -> int:
    """How many of the kernel's configs torch_npu's autotuner launched before its real
    launch (the emulated device records every launch of the device path)."""
    ours = [cfg for name, cfg, _ in launches if name == kernel.name]
    timed = {_config_key(cfg) for cfg in ours[:-1]}
    return len(timed) if len(kernel.configs) > 1 else int(bool(ours))


def _config_key(cfg: dict[str, Any]) -> tuple:
    """A launch config as the autotuner tells it apart: its blocks and multibuffer."""
    return tuple(sorted((k, v) for k, v in cfg.items()
                        if k.endswith("BLOCK_SUB") or k == "multibuffer"))


def distinct_configs(kernel: Kernel) -> int:
    """The kernel's different launch configs: plan configs can name the same blocks once
    written in its axes (several row axes of few rows: the split axis's block is capped
    at each program's rows), and the autotuner times such a config once."""
    return len({_config_key(cfg) for cfg in kernel.configs})


def make_kernel(case: str, soc: str, record: dict[str, Any]) -> Kernel:
    return Kernel(case=case, soc=soc, name=record["name"], src=record["src"],
                  signature=record["signature"],
                  configs=record["configs"], plan=record["plan"], partials=record["partials"])


def run_soc(soc: str, cases: list[tuple[str, str, int, int]], models: tuple[str, ...],
            workers: int, workdir: str, log: Any,
            control: bool) -> tuple[list[Kernel], list[str], Kernel | None]:
    """Every case (and model) on one emulated SoC, then the negative control when asked;
    (kernels, failures that are no kernel, control)."""
    kernels: list[Kernel] = []
    failures: list[str] = []
    negative = None
    with concurrent.futures.ThreadPoolExecutor(workers) as pool, \
            emu.npu_emulation(soc=soc), \
            torch._inductor.config.patch(inductor_ext.options()), \
            inductor_ext.config.patch(always_fuse=True):
        jobs: list[tuple[str, Any]] = [(case_name(c), c) for c in cases]
        jobs += [(f"{name}-2layer", name) for name in models]
        for case, spec in jobs:
            torch._dynamo.reset()
            inductor_ext.metrics.reset()
            records: list[dict[str, Any]] = []
            start = time.perf_counter()
            try:
                with capture(records):
                    ok, detail = run_norm(*spec) if isinstance(spec, tuple) else run_model(spec)
            except Exception as exc:
                traceback.print_exc(limit=4, file=sys.stderr)
                ok, detail = False, f"{type(exc).__name__}: {str(exc)[:300]}"
            declined = dict(inductor_ext.metrics.rejected_pairs)
            case_failures: list[str] = []
            case_kernels: list[Kernel] = []
            norms = ""
            if isinstance(spec, str):  # a model: count its norm backwards, not kernels
                counts = inductor_ext.metrics.norms
                fused, need = counts.get("fused", 0), MODEL_MIN_FUSED[spec]
                norms = (f", norms {fused}/{MODEL_NORMS[spec]} fused "
                         f"({counts.get('found', 0)} found)")
            else:
                fused, need = len(records), 1
            segmented = sum(r["plan"]["segments"] > 1 for r in records)
            want = (int(spec[0] == "adaln") if isinstance(spec, tuple)
                    else MODEL_MIN_SEGMENTED.get(spec, 0))
            if segmented < want:
                case_failures.append(f"{soc} {case}: {segmented} kernels with per-sample "
                                     f"partials, want >= {want} (declined {declined})")
            log(f"  {soc} {case}: {len(records)} fused{norms}, declined {declined or '-'}, "
                f"{'ok' if ok else 'WRONG'} ({detail}) {time.perf_counter() - start:.1f} s")
            if fused < need:
                what = "norm backwards" if isinstance(spec, str) else "kernels"
                case_failures.append(f"{soc} {case}: {fused} fused {what}, want >= {need} "
                                     f"(declined {declined})")
            launches = emu.virtual_device().launches
            for i, record in enumerate(records):
                kernel = make_kernel(case + (f"#{i}" if len(records) > 1 else ""), soc, record)
                kernel.numerics = ok
                kernel.timed = autotuned_configs(kernel, launches)
                if not ok:
                    kernel.error = f"numerics: {detail}"
                elif len(kernel.configs) > 1 and kernel.timed != distinct_configs(kernel):
                    kernel.error = (f"launch path: {kernel.timed} of {distinct_configs(kernel)} "
                                    "configs timed by torch_npu's autotuner")
                    kernel.numerics = False
                try:
                    lower_and_plan(kernel, pool,
                                   tempfile.mkdtemp(prefix=f"{soc}-", dir=workdir))
                except Exception as exc:
                    traceback.print_exc(limit=4, file=sys.stderr)
                    kernel.error = kernel.error or f"lowering: {type(exc).__name__}: {exc}"
                case_kernels.append(kernel)
            launches.clear()
            broken = broken_without_plugin(spec) if isinstance(spec, str) and not ok else ""
            if broken:  # B, not F: its numerics and counts cannot be checked here
                BROKEN.append(f"{soc} {case}: torch_npu's own kernels fail this model "
                              f"(plugin off): {broken}")
                log(f"  {BROKEN[-1]}")
                for kernel in case_kernels:
                    kernel.broken = True
                    if kernel.error.startswith("numerics:"):
                        kernel.error = ""
                case_failures = []
            kernels += case_kernels
            failures += case_failures
        failures += check_default_options(soc, cases, log)
        if control:
            negative = negative_control(pool, workdir, soc)
        log(f"  {soc}: waiting for bishengir-compile")
        for kernel in [*kernels, *([negative] if negative else [])]:
            kernel.resolve()
    torch._dynamo.reset()
    return kernels, failures, negative


def check_default_options(soc: str, cases: list[tuple[str, str, int, int]], log: Any
                          ) -> list[str]:
    """The default-options subset: cost_cases.COST_CASES whose (op, dtype, N) the selected
    cases have, compiled without always_fuse. The cost model's decision must be the
    roofline's expectation (cost_cases.roofline_expectation, on the hook's own shape), a
    decline must be `not_profitable` with the three times, and the gradients (fused or
    torch_npu's own kernels) float64's. These check decisions: their kernels are neither
    lowered nor counted above. Returns the failures."""
    selected = {case[:3] for case in cases}
    failures: list[str] = []
    for op, dname, N, M in (c for c in cost_cases.COST_CASES if c[:3] in selected):
        case = cost_cases.case_name(op, dname, N, M)
        torch._dynamo.reset()
        inductor_ext.metrics.reset()
        start = time.perf_counter()
        with inductor_ext.config.patch(always_fuse=False), cost_cases.decisions() as seen:
            try:
                ok, detail = run_norm(op, dname, N, M)
            except Exception as exc:
                traceback.print_exc(limit=4, file=sys.stderr)
                ok, detail = False, f"{type(exc).__name__}: {str(exc)[:300]}"
        if len(seen) != 1:
            failures.append(f"{soc} {case}: {len(seen)} groups planned, want 1")
            continue
        shape, reason, verdict = seen[0]
        fuses = reason is None
        expect = cost_cases.expectation_for(shape)
        times = cost_cases.TIMES.search(verdict.detail)
        log(f"  {soc} {case}: model {'fuses' if fuses else 'declines'} ({verdict.detail}), "
            f"roofline expects {'-' if expect is None else 'fuse' if expect else 'decline'}, "
            f"{'ok' if ok else 'WRONG'} ({detail}) {time.perf_counter() - start:.1f} s")
        if expect is None or fuses is not expect:
            failures.append(f"{soc} {case}: model {'fuses' if fuses else 'declines'}, "
                            f"roofline expects {expect} ({verdict.detail})")
        if (not fuses and reason != "not_profitable") or not times:
            failures.append(f"{soc} {case}: declined {reason}: {verdict.detail}")
        if inductor_ext.metrics.mix_order_kernels != int(fuses) or not ok:
            failures.append(f"{soc} {case}: {inductor_ext.metrics.mix_order_kernels} fused "
                            f"kernels for a model that {'fuses' if fuses else 'declines'}, "
                            f"numerics {'ok' if ok else detail}")
    return failures


def negative_control(pool: concurrent.futures.Executor, workdir: str, soc: str) -> Kernel:
    """RMSNorm fp32 N=768 planned with a UB budget 16x the SoC's: bishengir must report the
    tile as overflow."""
    budget = NEGATIVE_UB_FACTOR * ub_plan.UB_BYTES[soc]
    with inductor_ext.config.patch(ascend_ub_bytes=budget):
        torch._dynamo.reset()
        records: list[dict[str, Any]] = []
        with capture(records):
            run_norm("rms", "fp32", 768, 64)
    kernel = make_kernel("negative-control", soc, records[0])
    kernel.configs = kernel.configs[:1]
    lower_and_plan(kernel, pool, tempfile.mkdtemp(prefix="negative-", dir=workdir))
    return kernel


# ---------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=1,
                    help="parallel bishengir-compile runs per SoC")
    ap.add_argument("--socs", help=f"comma-separated (default: {','.join(SOCS)})")
    ap.add_argument("--serial", action="store_true",
                    help="the SoCs one after the other in this process (default: one "
                         "process per SoC, side by side)")
    ap.add_argument("--quick", action="store_true",
                    help=f"a few cases and the models {', '.join(QUICK_MODELS)}")
    ap.add_argument("--smoke", action="store_true",
                    help=f"cases {', '.join(c.rstrip('-') for c in SMOKE_CASES)}, the model "
                         f"{', '.join(SMOKE_MODELS)}, on {', '.join(SMOKE_SOCS)} unless --socs")
    ap.add_argument("--only", help="cases (and models) whose name contains this")
    ap.add_argument("--all-cases", action="store_true",
                    help="the whole case list on every SoC, core-count-only classes too")
    ap.add_argument("--csv", help="write every planned config here")
    ap.add_argument("--calibration", help="refit the UB calibration table in this file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # results file of one SoC's process
    ap.add_argument("--no-control", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    reason = emu.emulation_unavailable_reason()
    if reason:
        print(f"check_npu: cannot run: {reason}")
        print("npu: 0 fused through torch_npu, 0 numerics ok, 0 lowered, 0 ub-planned, "
              "1 failed")
        return 1
    differ = [] if args.worker else same_plans_as_8192()
    if differ:
        print("check_npu: planned otherwise than N=8192, so its kernel would go unchecked "
              f"(add the width to NS): {', '.join(differ)}")
        print("npu: 0 fused through torch_npu, 0 numerics ok, 0 lowered, 0 ub-planned, "
              f"{len(differ)} failed")
        return 1
    cases = norm_cases()
    models = MODELS
    if args.quick:
        cases = [c for c in cases if c[2] in (768, 8192) and c[1] == "bf16"]
        models = QUICK_MODELS
    if args.smoke:
        cases = [c for c in cases if case_name(c).startswith(SMOKE_CASES)]
        models = SMOKE_MODELS
        args.socs = args.socs or ",".join(SMOKE_SOCS)
    if args.only:
        cases = [c for c in cases if args.only in case_name(c)]
        models = tuple(m for m in models if args.only in f"{m}-2layer")
    socs = [s for s in (args.socs or ",".join(SOCS)).split(",") if s]
    start = time.perf_counter()
    work = tempfile.TemporaryDirectory(prefix="check_npu_", ignore_cleanup_errors=True)
    workdir = work.name

    def log(line: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f} s]{line}", flush=True)

    def run(soc: str) -> tuple[list[Kernel], list[str], Kernel | None]:
        full = args.all_cases or not npu_socs.core_count_only(npu_socs.get(soc))
        return run_soc(soc, cases if full else core_count_cases(cases),
                       models if npu_socs.get(soc).name in MODEL_SOCS else (), args.workers,
                       workdir, log, control=soc == socs[0] and not args.no_control)

    if args.worker:
        kernels, failures, control = run(socs[0])
        with open(args.worker, "w") as f:
            json.dump({"kernels": [k.to_json() for k in kernels], "failures": failures,
                   "broken": BROKEN,
                       "control": control.to_json() if control else None}, f)
        return 0
    kernels, failures, controls = [], [], []
    if args.serial or len(socs) == 1:
        for soc in socs:
            got, failed, control = run(soc)
            kernels, failures, controls = kernels + got, failures + failed, controls + [control]
    else:
        kernels, failures, controls = _run_side_by_side(socs, workdir, args)
    rows = report(kernels, next((c for c in controls if c), None), failures)
    if args.csv and rows:
        write_csv(args.csv, rows)
    if args.calibration:
        write_calibration(args.calibration, rows)
    setup = os.environ.get("CHECK_NPU_SETUP_S")
    print(f"check_npu: {time.perf_counter() - start:.0f} s"
          + (f" (+ {setup} s venv setup)" if setup else ""), flush=True)
    return print_summary(kernels, failures)


def _run_side_by_side(socs: list[str], workdir: str, args: argparse.Namespace
                      ) -> tuple[list[Kernel], list[str], list[Kernel | None]]:
    """One worker process per SoC (an emulation session each, on the machine's cores);
    the first SoC's also runs the negative control."""
    passthrough = ["--workers", str(args.workers), *(["--quick"] if args.quick else []),
                   *(["--smoke"] if args.smoke else []),
                   *(["--all-cases"] if args.all_cases else []),
                   *(["--only", args.only] if args.only else [])]
    procs = []
    for soc in socs:
        path = os.path.join(workdir, f"{soc}.json")
        cmd = [sys.executable, os.path.abspath(__file__), *passthrough, "--socs", soc,
               "--worker", path, *([] if soc == socs[0] else ["--no-control"])]
        procs.append((soc, path, subprocess.Popen(cmd)))
    kernels: list[Kernel] = []
    failures: list[str] = []
    controls: list[Kernel | None] = []
    for soc, path, proc in procs:
        if proc.wait() != 0 or not os.path.isfile(path):
            failures.append(f"{soc}: worker exited {proc.returncode}")
            continue
        with open(path) as f:
            data = json.load(f)
        kernels += [Kernel(**k) for k in data["kernels"]]
        failures += data["failures"]
        BROKEN.extend(data.get("broken", []))
        controls.append(Kernel(**data["control"]) if data["control"] else None)
    return kernels, failures, controls


def report(kernels: list[Kernel], control: Kernel | None, failures: list[str]) -> list[dict]:
    rows = []
    by_case: dict[str, dict[str, Kernel]] = {}
    for k in kernels:
        by_case.setdefault(k.case, {})[k.soc] = k
        for i, (cfg, plan, estimate) in enumerate(zip(k.configs, k.plans, k.estimates)):
            layout = k.layout(cfg)
            rows.append({"case": k.case, "soc": k.soc, "family": layout.family,
                         "kind": k.kind, "config": json.dumps(cfg, sort_keys=True),
                         "layout": json.dumps(dataclasses.asdict(layout)),
                         "raw_estimate": npu_ub.raw_estimate(layout), "estimate": estimate,
                         "planned": plan["high_water"], "overflow_bits": plan["overflow_bits"],
                         "ub_bytes": ub_plan.UB_BYTES[k.soc], "error": plan["error"]})
            if not k.planned_ok(i):
                what = (f"overflow (requires {plan['overflow_bits'] // 8} B)"
                        if plan["overflow_bits"] else plan["error"]
                        or f"{plan['high_water']} B > UB")
                k.error = k.error or f"ub plan {cfg}: {what}"
    socs = list(dict.fromkeys(k.soc for k in kernels))
    print(f"{'case':28s} {'kernel':13s} {'family':8s} " +
          " ".join(f"{s + ' UB B (planned/est/UB)':>31s}" for s in socs))
    for case, per_soc in by_case.items():
        first = next(iter(per_soc.values()))
        cells = []
        for soc in socs:
            k = per_soc.get(soc)
            if k is None:
                cells.append(f"{'-':>31s}")
                continue
            top = max((p["high_water"] or 0 for p in k.plans), default=0)
            est = max(k.estimates, default=0)
            cells.append(f"{top:>8d}/{est:>8d}/{ub_plan.UB_BYTES[soc]:>6d}"
                         f"{' !!' if k.error else ' B' if k.broken else ' ok':>4s}  ")
        print(f"{case:28s} {first.kind:13s} {first.family:8s} " + " ".join(cells))
        for k in per_soc.values():
            if k.error:
                print(f"FAIL {k.soc} {k.case}: {k.error}")
    plan = control.plans[0] if control and control.plans else None
    if plan and plan["overflow_bits"]:
        print(f"negative control ({NEGATIVE_UB_FACTOR}x UB budget, {control.soc}, "
              f"{control.configs[0]}): overflow reported by bishengir, requires "
              f"{plan['overflow_bits'] // 8} B > {ub_plan.UB_BYTES[control.soc]} B")
    else:
        failures.append(f"negative control not reported as overflow: {plan}")
    for failure in failures:
        print(f"FAIL {failure}")
    for broken in BROKEN:
        print(f"BROKEN {broken}")
    return rows


def print_summary(kernels: list[Kernel], failures: list[str]) -> int:
    fused = len(kernels)
    numerics = sum(k.numerics for k in kernels)
    lowered = sum(k.lowered for k in kernels)
    planned = sum(bool(k.plans) and all(k.planned_ok(i) for i in range(len(k.plans)))
                  for k in kernels)
    failed = sum(bool(k.error) for k in kernels) + len(failures)
    multi = [k for k in kernels if len(k.configs) > 1]
    print(f"launch path: {sum(k.timed == distinct_configs(k) for k in multi)} of {len(multi)} "
          "kernels with several configs had each timed by torch_npu's autotuner "
          "(emulated device) before the real launch")
    # B: models torch_npu's own kernels fail (plugin off too); not failures of ours.
    print(f"B: {len(BROKEN)} broken without the plugin")
    print(f"npu: {fused} fused through torch_npu, {numerics} numerics ok, {lowered} lowered, "
          f"{planned} ub-planned, {failed} failed")
    return 0 if failed == 0 and fused > 0 else 1


def write_csv(path: str, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def write_calibration(path: str, rows: list[dict]) -> None:
    """Refit the UB calibration table: the points already in `path` plus this run's (a
    plan that overflowed counts with the bytes bishengir said it requires)."""
    points: dict[tuple, dict[str, Any]] = {}
    if os.path.isfile(path):
        with open(path) as f:
            for entry in json.load(f).get("families", {}).values():
                for point in entry["points"]:
                    points[_point_key(point)] = point
    for row in rows:
        need = row["planned"] if row["planned"] is not None else (
            row["overflow_bits"] // 8 if row["overflow_bits"] else None)
        if need is None:
            continue
        point = {"layout": json.loads(row["layout"]), "case": row["case"],
                 "planned": int(need), "overflow": row["planned"] is None,
                 "raw_estimate": row["raw_estimate"]}
        points[_point_key(point)] = point
    table = npu_ub.fit_families(points.values())
    with open(path, "w") as f:
        json.dump({"source": "tests/ascend/check_npu.py --calibration: bishengir-compile "
                             "(ascendnpu-ir 1.2.0) UB high-water of module.hivm.opt.mlir, "
                             "or the bytes an overflow reports",
                   "model": "estimate = tile * a + vector * b + rows (npu_ub.parts)",
                   "families": table}, f, indent=1, sort_keys=True)
        f.write("\n")


def _point_key(point: dict[str, Any]) -> tuple:
    return (point["case"], tuple(sorted(point["layout"].items())))


if __name__ == "__main__":
    sys.exit(main())
