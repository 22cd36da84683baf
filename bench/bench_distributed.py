"""inductor_ext under torch.distributed: a training step under DDP and FSDP2 with the plugin
on, off and stock, per rank: norms fused and declined, gradients, step time.

    torchrun --nproc-per-node 2 bench/bench_distributed.py [--modes single,ddp,fsdp2]
        [--checkpoint off,on] [--model llama|blocks] [--hidden 2048] [--layers 2]
        [--batch 4] [--seq 2048] [--dtype bf16] [--fsdp-mp] [--always-fuse on]
        [--rounds 7] [--csv F] [--keep-tables DIR]
    torchrun --nproc-per-node 2 bench/bench_distributed.py --device cpu --backend gloo
    python bench/bench_distributed.py ...       # one process, a world of one

Modes: `single` compiles the model on each rank alone (no wrapper, no collectives: the
single-GPU coverage to compare with), `ddp` wraps it in DistributedDataParallel, `fsdp2`
calls `fully_shard` on every decoder layer and then on the root (`--fsdp-mp`: parameters
kept in fp32 and all-gathered in --dtype through MixedPrecisionPolicy). `--checkpoint on`
wraps every decoder layer in non-reentrant activation checkpointing first. The model is
then compiled whole with `torch.compile` (FSDP2's hooks break the graph at every layer).

Variants, each its own copy of the model with the same weights and inputs:
  stock  torch.compile with Inductor's defaults (upstream's own mix-order reduction at its
         default: on since torch 2.10 on CUDA)
  off    torch.compile, upstream's mix-order off, inductor_ext off: plain Inductor
  on     torch.compile with inductor_ext (which turns upstream's mix-order off)
  eager  no compile; only the gradient reference, not timed

A step is forward + loss + backward (DDP's all-reduce, FSDP2's all-gathers and
reduce-scatters included), gradients reset to None before it, no optimizer. Timing: after
warm-up, the compiled variants take turns (a rotated order each round); each round times
`--iters` steps between CUDA events after a barrier; the median over `--rounds` is reported
per rank. Gradients are those of the first step, compared per rank on the rank's own
shard (FSDP2) or the all-reduced gradient (DDP): max |a - b| / max |b| over the parameters.

Coverage (variant on): "norms fused" is the fused kernels launched in the first step (one
per norm; a compiled graph that several layers share launches its kernels once per
layer) out of the model's norm modules; "kernels" the fused kernels generated and
"declined" the candidates declined, by reason, as inductor_ext.metrics counts them per
compile, named from the metric tables (module names where the tables carry them, else
Inductor's node names, after the graph's compile id). For stock, the launches and kernels
are upstream's own mix-order kernels. `--device cpu --backend gloo`
runs a tiny model through the Triton interpreter with `always_fuse` (a smoke test; its
times mean nothing). NCCL's NVLink multicast (NVLS) and symmetric-memory multicast stay
off: the environment variables are set before the process group starts.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

#: Set before anything starts NCCL or NVSHMEM: NVLink multicast stays off.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                 "NVSHMEM_DISABLE_NVLS": "1"}
if __name__ == "__main__":  # run as a script (torchrun); an import leaves os.environ alone
    os.environ.update(MULTICAST_OFF)
    # Every compile is real, so the counters and tables describe this code (a warm
    # FX-graph cache would replay the counters but write no table rows).
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
    os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")


def _wants_cpu(argv: list[str]) -> bool:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--device", default="cuda")
    return pre.parse_known_args(argv)[0].device == "cpu"


if _wants_cpu(sys.argv[1:]):
    # Triton reads this once, at import (importing torch._inductor imports Triton).
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from common import (  # noqa: E402
    DTYPES,
    Block,
    description,
    has_upstream_mix_order,
    not_measured_banner,
    require_cuda,
    require_interpreter,
)

import inductor_ext  # noqa: E402
from tests.support.launches import fused_launches  # noqa: E402
from tests.support.reference import max_rel_err  # noqa: E402

MODES = ("single", "ddp", "fsdp2")
COMPILED = ("stock", "off", "on")
VARIANT_MEANING = {
    "stock": "torch.compile, Inductor defaults (upstream mix-order at its default)",
    "off": "torch.compile, upstream mix-order off, inductor_ext off",
    "on": "torch.compile with inductor_ext (upstream mix-order off)",
    "eager": "no compile (gradient reference only)",
}
TABLES = ("mix_order_fusion", "mix_order_reject")
CSV_FIELDS = ["mode", "checkpoint", "rank", "world", "device", "model", "dtype", "shape",
              "variant", "norm_modules", "norms_fused", "fused_kernels", "declined",
              "fused_names", "declined_names", "max_grad_err_vs_off",
              "max_grad_err_vs_eager", "step_ms"]
#: Inductor metadata key of upstream's own mix-order kernels (read to count their launches
#: in the stock variant; nothing of upstream's machinery is used).
UPSTREAM_MIX_ORDER_META = "RSPLIT_SIZE"


class BlockLM(nn.Module):
    """Embedding -> LLaMA-like blocks (bench/common.Block) -> RMSNorm -> head, from torch.nn
    only: the model of the CPU test, which needs no transformers."""

    def __init__(self, vocab: int, dim: int, layers: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, heads, hidden, eps=1e-6) for _ in range(layers))
        self.norm = nn.RMSNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        for layer in self.layers:
            h = layer(h)
        return self.loss(h, ids)

    def loss(self, h: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Its own frame: under FSDP2 Dynamo runs forward() eagerly (the layers' hooks break
        the graph inside Module.__call__), and compiles this and the layers on their own."""
        logits = self.head(self.norm(h)).float()
        return F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())


def make_model(args: argparse.Namespace) -> tuple[nn.Module, Callable[..., torch.Tensor]]:
    """(model, loss_fn(model, ids)) with the same weights on every call (seeded)."""
    torch.manual_seed(0)
    heads = max(1, args.hidden // args.head_dim)
    if args.model == "blocks":
        model = BlockLM(args.vocab, args.hidden, args.layers, heads, args.intermediate)
        return model, lambda m, ids: m(ids)
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        raise SystemExit("bench_distributed: --model llama needs transformers "
                         "(pip install transformers), or use --model blocks") from None
    config = LlamaConfig(hidden_size=args.hidden, intermediate_size=args.intermediate,
                         num_hidden_layers=args.layers, num_attention_heads=heads,
                         num_key_value_heads=heads, vocab_size=args.vocab,
                         max_position_embeddings=max(args.seq, 64), use_cache=False)
    config._attn_implementation = args.attn
    return LlamaForCausalLM(config), lambda m, ids: m(input_ids=ids, labels=ids).loss


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    inner = getattr(model, "model", model)
    return inner.layers


def norm_modules(model: nn.Module) -> list[str]:
    """Names of the model's norm modules with a trainable weight: what could fuse."""
    return [name for name, mod in model.named_modules()
            if "norm" in type(mod).__name__.lower()
            and isinstance(getattr(mod, "weight", None), nn.Parameter)]


def compile_options(variant: str) -> dict[str, Any]:
    if variant == "stock":
        return {}
    if variant == "off":
        return {"triton.mix_order_reduction": False} if has_upstream_mix_order() else {}
    if variant == "on":
        return inductor_ext.options()
    raise ValueError(variant)


def build(args: argparse.Namespace, mode: str, checkpoint: bool, variant: str,
          device: torch.device, mesh: Any) -> tuple[nn.Module, Callable[[], torch.Tensor],
                                                    list[str]]:
    """One variant's model, wrapped for `mode` and compiled: (model, step, norm names)."""
    model, loss_fn = make_model(args)
    mixed = mode == "fsdp2" and args.fsdp_mp
    model = model.to(device, torch.float32 if mixed else DTYPES[args.dtype])
    norms = norm_modules(model)
    if checkpoint:
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
            apply_activation_checkpointing,
        )

        layer_types = tuple({type(layer) for layer in decoder_layers(model)})
        apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, layer_types))
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        model = DistributedDataParallel(model, device_ids=ids)
    elif mode == "fsdp2":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        policy = MixedPrecisionPolicy(param_dtype=DTYPES[args.dtype],
                                      reduce_dtype=torch.float32) if mixed else None
        kwargs = {"mp_policy": policy} if policy is not None else {}
        for layer in decoder_layers(model):
            fully_shard(layer, mesh=mesh, **kwargs)
        fully_shard(model, mesh=mesh, **kwargs)
    run = model if variant == "eager" else torch.compile(model,
                                                         options=compile_options(variant))
    torch.manual_seed(1 + dist.get_rank())
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), device=device)

    def step() -> torch.Tensor:
        for p in model.parameters():
            p.grad = None
        loss = loss_fn(run, ids)
        loss.backward()
        return loss

    return model, step, norms


def local_grads(model: nn.Module) -> list[torch.Tensor]:
    """This rank's gradients: FSDP2's DTensor shards as their local tensors."""
    out = []
    for p in model.parameters():
        g = p.grad
        if g is None:
            out.append(torch.zeros(0))
            continue
        if hasattr(g, "to_local"):
            g = g.to_local()
        out.append(g.detach().float().cpu().clone())
    return out


def max_err(got: list[torch.Tensor], ref: list[torch.Tensor]) -> float:
    if len(got) != len(ref):
        return float("inf")
    return max((max_rel_err(g, r) for g, r in zip(got, ref) if r.numel()), default=0.0)


@contextlib.contextmanager
def tables_in(directory: str) -> Iterator[None]:
    """The metric tables on, written to `directory` (MetricTable writes to the cwd)."""
    cwd = os.getcwd()
    os.makedirs(directory, exist_ok=True)
    os.chdir(directory)
    try:
        with torch._inductor.config.patch(enabled_metric_tables=",".join(TABLES)):
            yield
    finally:
        os.chdir(cwd)


def read_table(directory: str, name: str) -> list[dict[str, str]]:
    path = os.path.join(directory, f"metric_table_{name}.csv")
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def row_names(row: dict[str, str], fallback: str) -> str:
    """What a table row is about: its norms' module names where the tables carry them,
    else Inductor's node names, after the graph's compile id."""
    names = next((row[key] for key in ("norms", "modules") if row.get(key)),
                 row.get(fallback, ""))
    return f"[{row['graph_id']}] {names}" if row.get("graph_id") else names


def coverage(directory: str) -> tuple[list[str], dict[str, list[str]]]:
    """(fused names, declined names by reason) from the metric tables."""
    fused = [row_names(r, "inner_node") for r in read_table(directory, "mix_order_fusion")]
    declined: dict[str, list[str]] = {}
    for r in read_table(directory, "mix_order_reject"):
        declined.setdefault(r["reason"], []).append(row_names(r, "nodes"))
    return fused, declined


class Timer:
    """Wall time of a block of steps: CUDA events on GPU, perf_counter on CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"

    def ms(self, fn: Callable[[], Any], iters: int) -> float:
        dist.barrier()
        if self.cuda:
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(
                enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / iters
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - t0) * 1e3 / iters


def run_case(args: argparse.Namespace, mode: str, checkpoint: bool, device: torch.device,
             mesh: Any, table_root: str) -> list[dict[str, Any]]:
    """Every variant of one (mode, checkpoint) case on this rank: its CSV rows."""
    rank = dist.get_rank()
    case = f"{mode}{'_ckpt' if checkpoint else ''}"
    variants = [v for v in args.variants if v in COMPILED] + ["eager"]
    steps: dict[str, Callable[[], torch.Tensor]] = {}
    info: dict[str, dict[str, Any]] = {}
    grads: dict[str, list[torch.Tensor]] = {}
    # One reset per case: a reset between variants would drop the compiled code of the
    # earlier ones, which would then recompile inside the timed steps.
    torch._dynamo.reset()
    for variant in variants:
        inductor_ext.metrics.reset()
        upstream_before = getattr(torch._inductor.metrics, "codegen_mix_order_reduction", 0)
        directory = os.path.join(table_root, f"{case}_{variant}_rank{rank}")
        shutil.rmtree(directory, ignore_errors=True)
        with tables_in(directory) if variant == "on" else contextlib.nullcontext():
            model, step, norms = build(args, mode, checkpoint, variant, device, mesh)
            with fused_launches(UPSTREAM_MIX_ORDER_META) as launches:
                step()
            grads[variant] = local_grads(model)
            for _ in range(args.warmup - 1):
                step()
        entry: dict[str, Any] = {"norm_modules": len(norms), "norms_fused": "",
                                 "fused_kernels": "", "declined": "", "fused_names": "",
                                 "declined_names": ""}
        if variant == "on":
            fused, declined = coverage(directory)
            entry["norms_fused"] = launches.fused
            entry["fused_kernels"] = inductor_ext.metrics.mix_order_kernels
            entry["declined"] = " ".join(f"{k}={v}" for k, v in
                                         sorted(inductor_ext.metrics.rejected_pairs.items()))
            entry["fused_names"] = "; ".join(fused)
            entry["declined_names"] = "; ".join(f"{reason}: {', '.join(names)}"
                                                for reason, names in sorted(declined.items()))
        elif variant == "stock":  # upstream's own mix-order kernels
            entry["norms_fused"] = launches.extra
            upstream = getattr(torch._inductor.metrics, "codegen_mix_order_reduction", None)
            entry["fused_kernels"] = "" if upstream is None else upstream - upstream_before
        info[variant] = entry
        steps[variant] = step
        if not args.keep_tables:
            shutil.rmtree(directory, ignore_errors=True)
    times = time_in_turns(steps, [v for v in variants if v != "eager"], device, args)
    rows = []
    for variant in variants:
        ref_off = grads.get("off")
        rows.append({
            "mode": mode, "checkpoint": "on" if checkpoint else "off", "rank": rank,
            "world": dist.get_world_size(), "device": device_name(device),
            "model": args.model,
            "dtype": f"{args.dtype}{' (fp32 params)' if mode == 'fsdp2' and args.fsdp_mp else ''}",
            "shape": f"b{args.batch}xs{args.seq}xh{args.hidden}xl{args.layers}",
            "variant": variant, **info[variant],
            "max_grad_err_vs_off": ("" if ref_off is None or variant == "off"
                                    else f"{max_err(grads[variant], ref_off):.3e}"),
            "max_grad_err_vs_eager": ("" if variant == "eager"
                                      else f"{max_err(grads[variant], grads['eager']):.3e}"),
            "step_ms": "" if variant not in times else f"{times[variant]:.3f}",
        })
    return rows


def time_in_turns(steps: dict[str, Callable[[], Any]], names: list[str],
                  device: torch.device, args: argparse.Namespace) -> dict[str, float]:
    """Median over rounds of each variant's time per step, the variants taking turns in a
    rotated order, so clock and power drift hit them alike."""
    if args.rounds <= 0 or not names:
        return {}
    timer = Timer(device)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(timer.ms(steps[name], args.iters))
    return {n: statistics.median(t) for n, t in times.items()}


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu (Triton interpreter)"


def print_rows(rows: list[dict[str, Any]], measured: bool = True) -> None:
    """The table (rank 0): norms fused per step out of the model's norm modules (launches
    of inductor_ext's kernels for `on`, of upstream's for `stock`), kernels compiled,
    declines, gradient errors and step times; then on/off and on/stock per rank. Not
    `measured` (CPU, the Triton interpreter): the times' column and ratios say so."""
    print(f"{'mode':6s} {'ckpt':4s} {'rank':>4s} {'variant':7s} {'norms fused':>11s} "
          f"{'kernels':>7s} {'declined':24s} {'err vs off':>10s} {'err vs eager':>12s} "
          f"{'step ms' if measured else 'interp ms':>9s}")
    for r in rows:
        fused = (f"{r['norms_fused']}/{r['norm_modules']}" if r["norms_fused"] != ""
                 else "")
        declined = (r["declined"] or "-") if r["variant"] == "on" else ""
        print(f"{r['mode']:6s} {r['checkpoint']:4s} {r['rank']:>4d} {r['variant']:7s} "
              f"{fused:>11s} {r['fused_kernels']!s:>7s} {declined:24s} "
              f"{r['max_grad_err_vs_off']:>10s} {r['max_grad_err_vs_eager']:>12s} "
              f"{r['step_ms']:>9s}")
        if r["variant"] == "on" and r["declined_names"]:
            print(f"{'':12s}declined {r['declined_names']}")
    for r in rows:
        if r["variant"] != "on" or not r["step_ms"]:
            continue
        same = {x["variant"]: x["step_ms"] for x in rows
                if (x["mode"], x["checkpoint"], x["rank"]) == (r["mode"], r["checkpoint"],
                                                               r["rank"])}
        ratios = [f"on/{v} {float(r['step_ms']) / float(same[v]):.3f}"
                  for v in ("off", "stock") if same.get(v)]
        if ratios:
            print(f"{r['mode']} checkpoint {r['checkpoint']} rank {r['rank']}: "
                  + ("step time " if measured else "interpreter wall clock (not a "
                     "measurement) ") + ", ".join(ratios))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=description(
        __doc__, "Needs a CUDA GPU per rank for --device cuda (the default); --device cpu "
        "runs a tiny model on CPU in Triton's interpreter (TRITON_INTERPRET=1, set by the "
        "script): a smoke run, no times."))
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cuda: one GPU per rank, the issue's model, timed; cpu: a tiny "
                    "model in the Triton interpreter, untimed")
    ap.add_argument("--backend", default=None, help="process group backend (default: nccl "
                    "on cuda, gloo on cpu)")
    ap.add_argument("--modes", default="single,ddp,fsdp2",
                    help=f"comma list of {', '.join(MODES)}")
    ap.add_argument("--checkpoint", default="off", help="comma list of off, on")
    ap.add_argument("--variants", default="stock,off,on",
                    help="compiled variants to run (eager always runs, untimed)")
    ap.add_argument("--model", choices=("llama", "blocks"), default="llama",
                    help="transformers LlamaForCausalLM, or torch.nn blocks (common.Block)")
    ap.add_argument("--attn", default="sdpa", help="transformers attention implementation")
    ap.add_argument("--hidden", type=int, default=None,
                    help="model width (default: 2048 on cuda, 32 on cpu)")
    ap.add_argument("--intermediate", type=int, default=None,
                    help="MLP width (default: 5632 on cuda, 64 on cpu)")
    ap.add_argument("--head-dim", type=int, default=None,
                    help="channels per attention head (default: 128 on cuda, 16 on cpu)")
    ap.add_argument("--layers", type=int, default=2, help="decoder layers (default 2)")
    ap.add_argument("--vocab", type=int, default=None,
                    help="vocabulary size (default: 32000 on cuda, 16 on cpu)")
    ap.add_argument("--batch", type=int, default=None,
                    help="sequences per rank (default: 4 on cuda, 6 on cpu)")
    ap.add_argument("--seq", type=int, default=None,
                    help="tokens per sequence (default: 2048 on cuda, 8 on cpu)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                    help="model dtype (default: bf16 on cuda, fp32 on cpu)")
    ap.add_argument("--fsdp-mp", action="store_true",
                    help="fsdp2: parameters kept in fp32, all-gathered and computed in "
                    "--dtype, gradients reduce-scattered in fp32 (MixedPrecisionPolicy)")
    ap.add_argument("--always-fuse", choices=("auto", "on", "off"), default="auto",
                    help="inductor_ext.config.always_fuse (auto: on for --device cpu only)")
    ap.add_argument("--warmup", type=int, default=None, help="steps before timing (>= 1)")
    ap.add_argument("--iters", type=int, default=None, help="steps per timed block")
    ap.add_argument("--rounds", type=int, default=None, help="timed rounds (0: none)")
    ap.add_argument("--csv", default="", metavar="FILE",
                    help="write every rank's rows here (rank 0 writes)")
    ap.add_argument("--keep-tables", default="",
                    help="keep the metric tables of each case under this directory")
    args = ap.parse_args(argv)
    cpu = args.device == "cpu"
    # GPU defaults: the issue's model (2-layer Llama, hidden 2048, bf16); CPU: tiny.
    defaults = dict(hidden=32 if cpu else 2048, intermediate=64 if cpu else 5632,
                    head_dim=16 if cpu else 128, vocab=16 if cpu else 32000,
                    batch=6 if cpu else 4, seq=8 if cpu else 2048,
                    dtype="fp32" if cpu else "bf16", warmup=1 if cpu else 3,
                    iters=1 if cpu else 5, rounds=1 if cpu else 7)
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.backend = args.backend or ("gloo" if cpu else "nccl")
    args.modes = _choices(args.modes, MODES, "--modes")
    args.checkpoint = [c == "on" for c in _choices(args.checkpoint, ("off", "on"),
                                                   "--checkpoint")]
    args.variants = _choices(args.variants, COMPILED, "--variants")
    if args.warmup < 1:
        raise SystemExit("--warmup must be at least 1 (the first step gives the gradients)")
    return args


def _choices(spec: str, allowed: tuple[str, ...], flag: str) -> list[str]:
    items = [s for s in spec.split(",") if s]
    bad = [s for s in items if s not in allowed]
    if bad or not items:
        raise SystemExit(f"{flag}: {','.join(bad) or spec!r} not in {', '.join(allowed)}")
    return items


def init(args: argparse.Namespace) -> tuple[torch.device, Any]:
    """Start the process group (torchrun's environment, or a world of one without it)."""
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    local = int(os.environ["LOCAL_RANK"])
    if args.device == "cuda":
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    dist.init_process_group(args.backend, device_id=device if device.type == "cuda" else None)
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    return device, mesh


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cuda":
        require_cuda("bench_distributed.py --device cuda", "python bench/bench_distributed.py "
                     "--device cpu (a smoke run, no times)")
    else:
        require_interpreter("bench_distributed.py --device cpu", "TRITON_INTERPRET=1 python "
                            "bench/bench_distributed.py --device cpu")
    inductor_ext.disable()  # INDUCTOR_EXT=1 would put the plugin into "stock" and "off"
    device, mesh = init(args)
    rank, world = dist.get_rank(), dist.get_world_size()
    # Each variant, layer and case is its own compile of the same code objects.
    torch._dynamo.config.recompile_limit = max(
        torch._dynamo.config.recompile_limit, 8 * (args.layers + 2) * len(COMPILED))
    if hasattr(torch._dynamo.config, "accumulated_recompile_limit"):
        torch._dynamo.config.accumulated_recompile_limit = max(
            torch._dynamo.config.accumulated_recompile_limit, 64 * (args.layers + 2))
    always = args.always_fuse == "on" or (args.always_fuse == "auto" and args.device == "cpu")
    if rank == 0:
        upstream = (torch._inductor.config.triton.mix_order_reduction
                    if has_upstream_mix_order() else "absent")
        print(f"torch {torch.__version__}, {world} rank(s) on {device_name(device)}, "
              f"backend {args.backend}; model {args.model} hidden {args.hidden} layers "
              f"{args.layers} batch {args.batch} seq {args.seq} {args.dtype}; "
              f"always_fuse={always}; upstream mix-order default: {upstream}")
        for v in [*args.variants, "eager"]:
            print(f"  {v:6s} {VARIANT_MEANING[v]}")
        print("  NCCL/NVSHMEM multicast off: " +
              " ".join(f"{k}={v}" for k, v in MULTICAST_OFF.items()), flush=True)
        if args.device == "cpu":
            print(not_measured_banner("bench_distributed.py"), flush=True)
    table_root = args.keep_tables or tempfile.mkdtemp(prefix="bench_distributed_")
    rows: list[dict[str, Any]] = []
    interpret = contextlib.nullcontext()
    if args.device == "cpu":
        from inductor_ext.interpreter import cpu_interpret

        interpret = cpu_interpret()
    with interpret, inductor_ext.config.patch(always_fuse=always):
        for mode in args.modes:
            for checkpoint in args.checkpoint:
                rows += run_case(args, mode, checkpoint, device, mesh, table_root)
    if not args.keep_tables:
        shutil.rmtree(table_root, ignore_errors=True)
    gathered: list[Any] = [None] * world
    dist.all_gather_object(gathered, rows)
    if rank == 0:
        rows = sorted((r for part in gathered for r in part),
                      key=lambda r: (args.modes.index(r["mode"]), r["checkpoint"], r["rank"]))
        print_rows(rows, measured=args.device == "cuda")
        if args.csv:
            os.makedirs(os.path.dirname(args.csv) or ".", exist_ok=True)
            with open(args.csv, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
                writer.writeheader()
                writer.writerows(rows)
            print(f"wrote {args.csv}")
    # Every rank leaves together: a rank that tore gloo down while rank 0 still wrote the
    # CSV aborted ("terminate called without an active exception", CI on CPU, once).
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
