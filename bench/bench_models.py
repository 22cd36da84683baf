"""Training steps of whole models: which norms inductor_ext fuses, gradients against eager,
and (on a GPU) the step time of stock torch.compile, upstream mix-order off, inductor_ext.

    TRITON_INTERPRET=1 python bench/bench_models.py --device cpu     # fp32, tiny, interpreter
    python bench/bench_models.py --device cuda [--csv F] [--plot P]   # bf16, training sizes

Models are built from configs with random weights (nothing downloaded): transformers'
Llama, Qwen3, Gemma, GPT-2, BERT and T5, and a DiT-style stack in plain torch (adaLN-
modulated LayerNorm, attention, MLP); see tests/support/models.py. Variants:

- ``stock``: torch.compile as shipped, upstream's own mix-order reduction at its default
  (on since torch 2.10, CUDA/XPU only);
- ``upstream_off``: stock with ``triton.mix_order_reduction=False`` (where the key exists);
- ``inductor_ext``: our pass (which turns upstream's off while on);
- ``stock_again`` (opt-in, ``--variants``): stock compiled a second time, an A/A control:
  its ratio to ``stock`` is what the run's noise (clocks, autotuning picks) alone gives.

Per model it prints its norm modules (with a weight or not: an adaLN-modulated LayerNorm
has none) and what our pass did with them: the norms it found with column reductions to
fuse (per compiled graph), fused and declined by reason, and its fused kernels; upstream's
fused-kernel count for ``stock``; each variant's max relative gradient error against eager
in the same dtype (gradients that are zero in exact arithmetic are left out and named, see
`ZERO_GRAD_SHARE`); on a GPU, the step (forward, loss, ``torch.autograd.grad``) captured in
a CUDA graph and the variants' replays timed in turns (bench/common.py): each variant's
median step and the range of its per-round ratio to stock (a round times the variants
back to back, so a pair shares the GPU's clocks). Inductor's FX graph cache is off so
every variant compiles (and counts) from scratch.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import os
import statistics
import sys
import time
from typing import Any

import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import (  # noqa: E402
    DTYPES,
    FLUSH_MODES,
    GraphTimer,
    check_device,
    description,
    has_upstream_mix_order,
    interleaved_rounds,
    not_measured_banner,
    paired_ratio_range,
)

import inductor_ext  # noqa: E402
from tests.support import models  # noqa: E402
from tests.support.reference import max_rel_err  # noqa: E402

PROG = "bench_models.py"
#: What --help says of the device (the description's last sentence).
DEVICE = ("Needs a CUDA GPU for --device cuda (the default: training sizes, timed); "
          "--device cpu runs tiny sizes on CPU under TRITON_INTERPRET=1 (gradients and "
          "fusion counts, no times).")
VARIANTS = ("stock", "upstream_off", "inductor_ext")
#: Opt-in variants: the A/A control (stock compiled again, `compile_options` as stock's).
CONTROL_VARIANTS = ("stock_again",)
ALL_VARIANTS = VARIANTS + CONTROL_VARIANTS
#: The variants compiled as stock torch.compile.
STOCK_VARIANTS = ("stock", "stock_again")
DEFAULT_MODELS = "llama,qwen3,gemma,gpt2,bert,t5,dit"
#: Training sizes for the GPU run: 4 x 2048 tokens (8192 rows per norm), a 2048-wide
#: model of 4 layers.
GPU_SIZE = models.Size(hidden=2048, layers=4, heads=16, kv_heads=8, ffn=5632, vocab=32000,
                       seq=2048, batch=4)
#: A gradient whose eager values stay below this share of the model's largest gradient is
#: zero in exact arithmetic and holds only rounding (BERT's attention key biases: softmax
#: ignores a shift shared by all keys; 1e-7 of the largest in bf16, where the smallest real
#: gradient is 1e-5). Any two computations of it differ by ~100%, so it is left out of
#: max_grad_err_vs_eager and listed in zero_grads.
ZERO_GRAD_SHARE = 1e-6
#: The CSV's columns (bench/README.md says what each holds).
FIELDS = ["model", "device", "dtype", "variant", "norm_modules", "norms_found", "norms_fused",
          "norms_declined", "declined_reasons", "mix_order_kernels", "max_grad_err_vs_eager",
          "zero_grads",
          "step_us", "vs_stock_range", "timing", "compile_s", "error"]


@dataclasses.dataclass
class Result:
    row: dict[str, Any]
    graph: Any = None  # the captured step (GPU)
    step: Any = None  # the uncaptured step, when capture failed


def parse_size(spec: str, base: models.Size) -> models.Size:
    """'hidden=1024,layers=2' over `base`."""
    if not spec:
        return base
    fields = {f.name for f in dataclasses.fields(models.Size)}
    values = {}
    for item in spec.split(","):
        key, _, value = item.partition("=")
        if key not in fields or not value.isdigit():
            raise SystemExit(f"--size: {item!r} is not one of {sorted(fields)}=<int>")
        values[key] = int(value)
    return dataclasses.replace(base, **values)


def compile_options(variant: str) -> dict[str, Any]:
    if variant in STOCK_VARIANTS:
        return {}
    if variant == "upstream_off":
        return {"triton.mix_order_reduction": False} if has_upstream_mix_order() else {}
    return inductor_ext.options()


def upstream_kernels() -> int:
    from torch._inductor import metrics as inductor_metrics

    return int(getattr(inductor_metrics, "codegen_mix_order_reduction", 0))


def run_variant(work: models.Workload, variant: str, args: argparse.Namespace,
                eager: dict[str, torch.Tensor], timer: GraphTimer | None) -> Result:
    from torch._inductor import metrics as inductor_metrics

    torch._dynamo.reset()
    inductor_ext.metrics.reset()
    if hasattr(inductor_metrics, "codegen_mix_order_reduction"):
        inductor_metrics.codegen_mix_order_reduction = 0
    params = [p for p in work.model.parameters() if p.requires_grad]
    names = [n for n, p in work.model.named_parameters() if p.requires_grad]
    row: dict[str, Any] = {"model": work.name, "device": args.device, "dtype": args.dtype,
                           "variant": variant, "norm_modules": norm_module_count(work)}
    ctx = contextlib.ExitStack()
    if args.device == "cpu":
        from inductor_ext.interpreter import cpu_interpret

        ctx.enter_context(cpu_interpret())
    ctx.enter_context(torch._inductor.config.patch(
        {**compile_options(variant), "fx_graph_cache": False}))
    ctx.enter_context(torch._functorch.config.patch(enable_autograd_cache=False))
    ctx.enter_context(inductor_ext.config.patch(always_fuse=args.always_fuse))
    result = Result(row)
    with ctx:
        compiled = torch.compile(work.model)

        def step() -> tuple[torch.Tensor, ...]:
            return torch.autograd.grad(work.loss(compiled), params)

        t = time.perf_counter()
        grads = step()
        row["compile_s"] = round(time.perf_counter() - t, 1)
        if timer is not None:
            try:
                _, grads, result.graph = timer.run(step)
                row["timing"] = "cuda_graph"
            except Exception as exc:  # a step that cannot be captured is timed uncaptured
                row["timing"] = f"no_graph ({type(exc).__name__})"
                result.step = step
                torch.cuda.synchronize()
    if variant == "inductor_ext":
        norms = inductor_ext.metrics.norms
        declined = inductor_ext.metrics.norms_declined
        row.update(norms_found=norms["found"], norms_fused=norms["fused"],
                   norms_declined=norms["declined"],
                   declined_reasons=" ".join(f"{r}:{n}" for r, n in sorted(declined.items())),
                   mix_order_kernels=inductor_ext.metrics.mix_order_kernels)
    elif variant in STOCK_VARIANTS:
        row["mix_order_kernels"] = upstream_kernels()
    zero = zero_grads(eager)
    row["zero_grads"] = " ".join(sorted(zero))
    row["max_grad_err_vs_eager"] = max(max_rel_err(g, eager[n])
                                       for n, g in zip(names, grads) if n not in zero)
    return result


def norm_module_count(work: models.Workload) -> int:
    """Every norm module of the model, with a weight or not: the norms our pass may find
    (a DiT's modulated LayerNorms have no weight but d(scale) / d(shift) to fuse)."""
    return len(work.norm_modules(weighted=False))


def zero_grads(eager: dict[str, torch.Tensor]) -> set[str]:
    """Parameters whose gradient is rounding only (see ZERO_GRAD_SHARE)."""
    peak = {n: g.detach().abs().max().item() for n, g in eager.items()}
    top = max(peak.values())
    return {n for n, v in peak.items() if v < ZERO_GRAD_SHARE * top}


def bench_model(name: str, args: argparse.Namespace, size: models.Size,
                timer: GraphTimer | None) -> list[dict[str, Any]]:
    dtype = DTYPES[args.dtype]
    work = models.build(name, size).to(args.device, dtype)
    eager = models.grads(work)
    results: dict[str, Result] = {}
    for variant in args.variants.split(","):
        try:
            results[variant] = run_variant(work, variant, args, eager, timer)
        except Exception as exc:  # one broken variant does not end the run
            results[variant] = Result({"model": name, "device": args.device,
                                       "dtype": args.dtype, "variant": variant,
                                       "norm_modules": norm_module_count(work),
                                       "error": f"{type(exc).__name__}: {exc}"[:300]})
    if timer is not None:
        graphs = {v: r.graph for v, r in results.items() if r.graph is not None}
        per_round = interleaved_rounds(timer, graphs, args.rounds, single_replay=True)
        for variant, times in per_round.items():
            results[variant].row["step_us"] = round(statistics.median(times), 1)
            if "stock" in per_round:
                lo, hi = paired_ratio_range(per_round["stock"], times)
                results[variant].row["vs_stock_range"] = f"{lo:.3f}-{hi:.3f}"
        for r in results.values():
            if r.step is not None:
                from triton.testing import do_bench

                r.row["step_us"] = round(statistics.median(
                    do_bench(r.step, return_mode="median") * 1e3 for _ in range(args.rounds)), 1)
    rows = [r.row for r in results.values()]
    print_model(name, rows)
    return rows


def print_model(name: str, rows: list[dict[str, Any]]) -> None:
    ours = next((r for r in rows if r["variant"] == "inductor_ext"), {})
    stock = next((r for r in rows if r["variant"] == "stock"), {})
    print(norm_line(name, rows[0].get("norm_modules", "?"), ours, stock))
    base = stock.get("step_us")
    for r in rows:
        if r.get("error"):
            print(f"  {r['variant']:13s} FAILED {r['error']}")
            continue
        timing = ""
        if r.get("step_us") is not None:
            rel = ""
            if base:
                rounds = f", rounds {r['vs_stock_range']}" if r.get("vs_stock_range") else ""
                rel = f" ({base / r['step_us']:.3f}x stock{rounds})"
            timing = f"  step {r['step_us']:10.1f} us{rel} [{r.get('timing', '')}]"
        print(f"  {r['variant']:13s} max grad rel err vs eager "
              f"{r['max_grad_err_vs_eager']:.2e}"
              + (f" (left out, zero in exact arithmetic: {r['zero_grads']})"
                 if r.get("zero_grads") else "")
              + f"  compile+first step {r['compile_s']} s"
              + (" (interpreter wall clock, not a measurement)" if r.get("device") == "cpu"
                 else "")
              + timing, flush=True)


def norm_line(name: str, modules: Any, ours: dict[str, Any], stock: dict[str, Any]) -> str:
    """One model's counts, each named for what it counts, since they count different
    things: norm modules of the model; norms our pass found with column reductions to fuse
    (per compiled graph), fused and declined; fused kernels (one per row reduction and its
    columns, norm or not); upstream's fused kernels."""
    reasons = ours.get("declined_reasons", "")
    return (f"{name}: {modules} norm modules; inductor_ext: norms found "
            f"{ours.get('norms_found', '?')}, fused {ours.get('norms_fused', '?')}, declined "
            f"{ours.get('norms_declined', '?')}{f' ({reasons})' if reasons else ''}; its "
            f"fused kernels {ours.get('mix_order_kernels', '?')}; upstream mix-order "
            f"kernels (stock) {stock.get('mix_order_kernels', '?')}")


def write_csv(path: str, rows: list[dict[str, Any]]) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows({k: r.get(k, "") for k in FIELDS} for r in rows)


def plot(path: str, rows: list[dict[str, Any]], title: str) -> None:
    """Norms fused / declined by inductor_ext per model, and step time against stock (GPU)
    or the gradient error against eager (CPU)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise SystemExit("--plot needs matplotlib: pip install 'inductor_ext[plot]'") from exc
    names = list(dict.fromkeys(r["model"] for r in rows))
    ours = {r["model"]: r for r in rows if r["variant"] == "inductor_ext"}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    fused = [int(ours.get(n, {}).get("norms_fused") or 0) for n in names]
    declined = [int(ours.get(n, {}).get("norms_declined") or 0) for n in names]
    total = [int(next(r for r in rows if r["model"] == n).get("norm_modules") or 0)
             for n in names]
    ax1.bar(names, fused, label="fused")
    ax1.bar(names, declined, bottom=fused, label="declined")
    ax1.plot(names, total, "k_", markersize=20, label="norm modules in the model")
    ax1.set_title("norms: inductor_ext")
    ax1.legend()
    timed = any(r.get("step_us") for r in rows)
    variants = [v for v in ALL_VARIANTS if any(r["variant"] == v for r in rows)]
    width = 0.8 / max(1, len(variants))
    for i, variant in enumerate(variants):
        values = []
        for n in names:
            r = next((r for r in rows if r["model"] == n and r["variant"] == variant), {})
            if timed:
                stock = next((s for s in rows if s["model"] == n and s["variant"] == "stock"
                              and s.get("step_us")), None)
                values.append(stock["step_us"] / r["step_us"]
                              if stock and r.get("step_us") else 0.0)
            else:
                values.append(float(r.get("max_grad_err_vs_eager") or 0.0))
        ax2.bar([j + (i - (len(variants) - 1) / 2) * width for j in range(len(names))],
                values, width, label=variant)
    ax2.set_xticks(range(len(names)), names)
    if timed:
        ax2.axhline(1.0, color="k", linewidth=0.8)
        ax2.set_title("step speed vs stock torch.compile (higher is faster)")
    else:
        ax2.set_yscale("log")
        ax2.set_title("max gradient rel. error vs eager")
    ax2.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=description(__doc__, DEVICE))
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda",
                    help="cuda: training sizes, timed; cpu: tiny sizes in the Triton "
                    "interpreter (TRITON_INTERPRET=1), gradients and counts only")
    ap.add_argument("--models", default=DEFAULT_MODELS,
                    help=f"comma-separated, of {', '.join(models.MODELS)}")
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="comma-separated, in the order they run: stock (torch.compile as "
                    "shipped, upstream mix-order at its default), upstream_off (upstream "
                    "mix-order off), inductor_ext (our pass), stock_again (stock compiled "
                    "again: an A/A control, its ratio to stock is the run's noise); "
                    f"default {','.join(VARIANTS)}")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                    help="default: bf16 on cuda, fp32 on cpu")
    ap.add_argument("--size", default="", help="e.g. 'hidden=1024,layers=2' (models.Size)")
    ap.add_argument("--always-fuse", action=argparse.BooleanOptionalAction, default=None,
                    help="skip the profitability model (default: on for cpu, off for cuda)")
    ap.add_argument("--rounds", type=int, default=31,
                    help="timing rounds, variants in turns, one replay each (one replay "
                    "of a step varied by up to 5%% on the H100)")
    ap.add_argument("--flush", choices=FLUSH_MODES, default="read",
                    help="how the L2 is emptied before each replay (bench/README.md)")
    ap.add_argument("--csv", default="", metavar="FILE",
                    help="one row per model and variant, written after each model "
                    "(columns: bench/README.md)")
    ap.add_argument("--plot", default="", metavar="PNG",
                    help="norms fused / declined per model, and step speed vs stock (GPU) "
                    "or gradient error vs eager (CPU); needs matplotlib")
    args = ap.parse_args(argv)
    check_device(PROG, args.device, "--device cpu")
    unknown = set(args.models.split(",")) - set(models.MODELS)
    bad_variants = set(args.variants.split(",")) - set(ALL_VARIANTS)
    if unknown or bad_variants:
        raise SystemExit(f"unknown --models {sorted(unknown)} / --variants "
                         f"{sorted(bad_variants)}; models: {', '.join(models.MODELS)}; "
                         f"variants: {', '.join(ALL_VARIANTS)}")
    args.dtype = args.dtype or ("bf16" if args.device == "cuda" else "fp32")
    if args.always_fuse is None:
        args.always_fuse = args.device == "cpu"
    size = parse_size(args.size, GPU_SIZE if args.device == "cuda" else models.TINY)
    inductor_ext.disable()  # "stock" means stock, whatever INDUCTOR_EXT says
    timer = GraphTimer(args.flush) if args.device == "cuda" else None
    where = torch.cuda.get_device_name() if args.device == "cuda" else "CPU (Triton interpreter)"
    print(f"torch {torch.__version__} on {where}, {args.dtype}, {size}")
    if args.device == "cpu":
        print(not_measured_banner(PROG))
    rows: list[dict[str, Any]] = []
    for name in args.models.split(","):
        rows += bench_model(name, args, size, timer)
        if args.device == "cuda":
            torch.cuda.empty_cache()
        if args.csv:  # after each model: a run cut short keeps what it measured
            write_csv(args.csv, rows)
    if args.plot:
        plot(args.plot, rows, f"training step, {where}, {args.dtype}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
