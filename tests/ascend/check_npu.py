"""The fused kernels through torch_npu's emulated default backend, each checked four ways.

Runs in the venv of setup_npu_venv.sh (torch_npu 2.13's real Inductor backend with its
runtime stubbed, triton-ascend 3.2.0, ascendnpu-ir 1.2.0); see check_npu.sh.

For every norm-backward case (RMSNorm, LayerNorm with and without bias; fp32, bf16, fp16;
N in 128 ... 16384, long rows column-tiled; odd and even M) and every norm backward of a
2-layer Llama and a 2-layer GPT-2 training step (transformers configs), on each SoC
(910B3, then Ascend950 in a second emulation session):

  fused     the plugin built the kernel on torch_npu's NPUIndexTritonKernel;
  numerics  the compiled gradients match float64 (tests.support.reference's per-dtype
            tolerances) with the kernels run in triton-ascend's interpreter, after
            torch_npu's autotuner timed every config of the kernel on the emulated
            device (its launch path: prerun and benchmark on clone_args);
  lowered   every launch config went through triton-ascend's make_ttir and ttir_to_linalg;
  planned   bishengir-compile planned each config's Unified Buffer within the SoC's UB
            (high-water read from its saved module.hivm.opt.mlir; ub_plan.py).

A negative control (a UB budget forced 16x too large, so the tile is far over the UB) must
come back from bishengir as overflow. Per-kernel lines, then exactly:

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

import torch  # noqa: E402
import ub_plan  # noqa: E402

import inductor_ext  # noqa: E402
from inductor_ext.targets.ascend import kernel as npu_kernel  # noqa: E402
from inductor_ext.targets.ascend import ub as npu_ub  # noqa: E402
from tests.support import npu_emulation as emu  # noqa: E402
from tests.support import reference  # noqa: E402

OPS = ("rms", "ln", "ln_nobias")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
NS = (128, 768, 4096, 5120, 8192, 12288, 16384)
SOCS = ("910B3", "950")
MODELS = ("llama", "gpt2", "qwen3")
#: SoCs the models run on (each model compile takes a minute in the emulation).
MODEL_SOCS = ("910B3",)
#: Norm backwards each model must fuse (Llama: 2 RMSNorms per layer + the final one, one
#: may be declined; GPT-2: 2 LayerNorms per layer + ln_f; Qwen3: Llama's plus the per-head
#: q_norm / k_norm of each layer, on [B, T, H, D] with several row axes).
MODEL_MIN_FUSED = {"llama": 4, "gpt2": 5, "qwen3": 9}
#: Norms of each model (inductor_ext.metrics.norms counts those whose kernels were emitted).
MODEL_NORMS = {"llama": 5, "gpt2": 5, "qwen3": 9}
#: The negative control's UB budget: 16x the SoC's, so the tile is far over the real UB.
NEGATIVE_UB_FACTOR = 16


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
                             multibuffer=bool(cfg["multibuffer"]), soc=self.soc)


# ---------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------


def norm_cases() -> list[tuple[str, str, int, int]]:
    """(op, dtype, N, M): every op x dtype x N, M alternating odd (33) and even (64)."""
    out = []
    for i, (op, dname, N) in enumerate((o, d, n) for o in OPS for d in DTYPES for n in NS):
        out.append((op, dname, N, 33 if i % 2 else 64))
    return out


def run_norm(op: str, dname: str, N: int, M: int) -> tuple[bool, str]:
    """Compile and run one norm forward+backward; (gradients ok, detail)."""
    dtype = DTYPES[dname]
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
        reference.assert_close(got, ref, ["dx", "dw", "db"][:len(got)], eager=eager)
    except AssertionError as exc:
        return False, str(exc)
    errs = ", ".join(f"{n} {reference.max_rel_err(g, r):.1e}"
                     for n, g, r in zip(["dx", "dw", "db"], got, ref))
    return True, errs


def run_model(name: str) -> tuple[bool, str]:
    """One training step of a 2-layer model, compiled vs eager fp32 (loss and every
    parameter's gradient; eager is the reference, the model runs in fp32)."""
    import transformers

    torch.manual_seed(0)
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
    else:
        config = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=128,
                                         n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                                         attn_pdrop=0.0)
        model = transformers.GPT2LMHeadModel(config)
    model = model.float().train()
    ids = torch.randint(0, config.vocab_size, (2, 16))
    params = [p for p in model.parameters() if p.requires_grad]
    eager_loss = model(input_ids=ids, labels=ids).loss
    eager = torch.autograd.grad(eager_loss, params)
    compiled = torch.compile(model, dynamic=False)
    loss = compiled(input_ids=ids, labels=ids).loss
    grads = torch.autograd.grad(loss, params)
    worst = max(reference.max_rel_err(g, e) for g, e in zip(grads, eager))
    loss_err = abs(loss.item() - eager_loss.item())
    ok = loss_err < 1e-4 and worst < 1e-3
    return ok, f"loss diff {loss_err:.1e}, worst grad rel err {worst:.1e}"


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
            _, linalg = lower_function(fn, signature, constants, kernel.soc,
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
    timed = {tuple(sorted((k, v) for k, v in cfg.items()
                          if k.endswith("BLOCK_SUB") or k == "multibuffer"))
             for cfg in ours[:-1]}
    return len(timed) if len(kernel.configs) > 1 else int(bool(ours))


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
        jobs: list[tuple[str, Any]] = [(f"{op}-{d}-N{n}-M{m}", (op, d, n, m))
                                       for op, d, n, m in cases]
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
            norms = ""
            if isinstance(spec, str):  # a model: count its norm backwards, not kernels
                counts = inductor_ext.metrics.norms
                fused, need = counts.get("fused", 0), MODEL_MIN_FUSED[spec]
                norms = (f", norms {fused}/{MODEL_NORMS[spec]} fused "
                         f"({counts.get('found', 0)} found)")
            else:
                fused, need = len(records), 1
            log(f"  {soc} {case}: {len(records)} fused{norms}, declined {declined or '-'}, "
                f"{'ok' if ok else 'WRONG'} ({detail}) {time.perf_counter() - start:.1f} s")
            if fused < need:
                what = "norm backwards" if isinstance(spec, str) else "kernels"
                failures.append(f"{soc} {case}: {fused} fused {what}, want >= {need} "
                                f"(declined {declined})")
            launches = emu.virtual_device().launches
            for i, record in enumerate(records):
                kernel = make_kernel(case + (f"#{i}" if len(records) > 1 else ""), soc, record)
                kernel.numerics = ok
                kernel.timed = autotuned_configs(kernel, launches)
                if not ok:
                    kernel.error = f"numerics: {detail}"
                elif len(kernel.configs) > 1 and kernel.timed != len(kernel.configs):
                    kernel.error = (f"launch path: {kernel.timed} of {len(kernel.configs)} "
                                    "configs timed by torch_npu's autotuner")
                    kernel.numerics = False
                try:
                    lower_and_plan(kernel, pool,
                                   tempfile.mkdtemp(prefix=f"{soc}-", dir=workdir))
                except Exception as exc:
                    traceback.print_exc(limit=4, file=sys.stderr)
                    kernel.error = kernel.error or f"lowering: {type(exc).__name__}: {exc}"
                kernels.append(kernel)
            launches.clear()
        if control:
            negative = negative_control(pool, workdir, soc)
        log(f"  {soc}: waiting for bishengir-compile")
        for kernel in [*kernels, *([negative] if negative else [])]:
            kernel.resolve()
    torch._dynamo.reset()
    return kernels, failures, negative


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
    ap.add_argument("--socs", default=",".join(SOCS))
    ap.add_argument("--serial", action="store_true",
                    help="the SoCs one after the other in this process (default: one "
                         "process per SoC, side by side)")
    ap.add_argument("--quick", action="store_true", help="a few cases, no models")
    ap.add_argument("--only", help="cases (and models) whose name contains this")
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
    cases = norm_cases()
    models = MODELS
    if args.quick:
        cases = [c for c in cases if c[2] in (768, 16384) and c[1] == "bf16"]
        models = ()
    if args.only:
        cases = [c for c in cases if args.only in "{}-{}-N{}-M{}".format(*c)]
        models = tuple(m for m in models if args.only in f"{m}-2layer")
    socs = [s for s in args.socs.split(",") if s]
    start = time.perf_counter()
    work = tempfile.TemporaryDirectory(prefix="check_npu_", ignore_cleanup_errors=True)
    workdir = work.name

    def log(line: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f} s]{line}", flush=True)

    def run(soc: str) -> tuple[list[Kernel], list[str], Kernel | None]:
        return run_soc(soc, cases, models if soc in MODEL_SOCS else (), args.workers,
                       workdir, log, control=soc == socs[0] and not args.no_control)

    if args.worker:
        kernels, failures, control = run(socs[0])
        with open(args.worker, "w") as f:
            json.dump({"kernels": [k.to_json() for k in kernels], "failures": failures,
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
    print(f"{'case':28s} {'kernel':13s} {'family':8s} " +
          " ".join(f"{s + ' UB B (planned/est/UB)':>31s}" for s in SOCS))
    for case, per_soc in by_case.items():
        first = next(iter(per_soc.values()))
        cells = []
        for soc in SOCS:
            k = per_soc.get(soc)
            if k is None:
                cells.append(f"{'-':>31s}")
                continue
            top = max((p["high_water"] or 0 for p in k.plans), default=0)
            est = max(k.estimates, default=0)
            cells.append(f"{top:>8d}/{est:>8d}/{ub_plan.UB_BYTES[soc]:>6d}"
                         f"{' ok' if not k.error else ' !!':>4s}  ")
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
    return rows


def print_summary(kernels: list[Kernel], failures: list[str]) -> int:
    fused = len(kernels)
    numerics = sum(k.numerics for k in kernels)
    lowered = sum(k.lowered for k in kernels)
    planned = sum(bool(k.plans) and all(k.planned_ok(i) for i in range(len(k.plans)))
                  for k in kernels)
    failed = sum(bool(k.error) for k in kernels) + len(failures)
    multi = [k for k in kernels if len(k.configs) > 1]
    print(f"launch path: {sum(k.timed == len(k.configs) for k in multi)} of {len(multi)} "
          "kernels with several configs had each timed by torch_npu's autotuner "
          "(emulated device) before the real launch")
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
