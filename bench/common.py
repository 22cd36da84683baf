"""Shared pieces of the benchmarks: problem setup, variants, bytes, and the one timing
method every variant goes through (see bench/README.md)."""

from __future__ import annotations

import csv
import os
import statistics
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, NoReturn
from unittest import mock

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import nn
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import inductor_ext  # noqa: E402
from tests.support.reference import max_rel_err, tolerance  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}
#: What a command line may call them: the short names or torch's (bfloat16, ...).
DTYPE_NAMES = {**DTYPES, **{str(dt).removeprefix("torch."): dt for dt in DTYPES.values()}}
#: The 8 shapes of ../shared/reference/baseline_h100.csv.
BASELINE_SHAPES = ("32768x4096:bf16,65536x1024:bf16,16384x8192:bf16,8192x16384:bf16,"
                   "576000x384:fp32,32768x768:fp32,4096x4096:bf16,262144x128:bf16")
COMPILED = ("inductor_nomix", "inductor_mix", "inductor_ext", "inductor_ext_ascend")
OURS = ("inductor_ext", "inductor_ext_ascend")


#: What --help says of the device a script needs, the last sentence of its description
#: (`description`); a script with a --device option says both ways in its own words.
NEEDS_CUDA = "Needs a CUDA GPU."
CPU_ONLY = "CPU only: no GPU or NPU needed."
#: The words a description names its device with (tests/test_bench_cli.py checks them).
DEVICE_WORDS = ("Needs a CUDA GPU", "CPU only", "TRITON_INTERPRET=1")


def description(doc: str | None, device: str = "") -> str:
    """An argparse description from a script's docstring: its whole first paragraph, as
    one line (its first line alone is cut mid-sentence where the sentence wraps), then
    `device`, what the script needs to run (`NEEDS_CUDA`, `CPU_ONLY` or its own words)."""
    return " ".join([*(doc or "").strip().split("\n\n", 1)[0].split(), device]).strip()


#: What a timing script run on CPU prints before anything else: the Triton interpreter
#: runs each kernel as Python, so its times measure the interpreter, not the kernels.
NOT_MEASURED = ("CPU run in the Triton interpreter: every time below (and any ratio of "
                "two) is the interpreter's wall clock, NOT a measurement of the kernels; "
                "compare none of them. Fusion counts and gradient errors hold as on a GPU.")


def not_measured_banner(script: str) -> str:
    """The CPU banner of `script`, set off by rules so that it is not read past."""
    rule = "-" * 88
    return f"{rule}\n{script}: {NOT_MEASURED}\n{rule}"


def write_rows(path: str, rows: Sequence[dict[str, Any]]) -> None:
    """Rows as a CSV (columns from the first row), creating the file's folder."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def fail(script: str, message: str) -> NoReturn:
    """Stop `script` as argparse stops on a bad command line: one line on stderr,
    `script: message`, and exit status 2; no traceback."""
    print(f"{script}: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def require_cuda(script: str, cpu_command: str = "") -> None:
    """Stop with one line (`fail`) where there is no CUDA device, naming the script's CPU
    run (`cpu_command`) where it has one."""
    if not torch.cuda.is_available():
        fail(script, "needs a CUDA GPU, and torch.cuda.is_available() is False here; "
             + (f"on CPU instead: {cpu_command}" if cpu_command
                else "run it on a machine with one"))


def require_interpreter(script: str, command: str) -> None:
    """Stop with one line (`fail`) where Triton's interpreter is off: a CPU run compiles
    its kernels for the interpreter, which Triton turns on only when TRITON_INTERPRET=1
    is set before it is first imported. `command` is the run with it set."""
    from inductor_ext.interpreter import interpreter_active

    if not interpreter_active():
        fail(script, "on CPU the kernels run in Triton's interpreter, which needs "
             f"TRITON_INTERPRET=1 set before Python starts: {command}")


def check_device(script: str, device: str, cpu_run: str) -> None:
    """A script with `--device cuda|cpu`: stop with one line where `device` cannot run.
    No CUDA for ``cuda`` (naming the CPU run), no interpreter for ``cpu``. `cpu_run` is
    the CPU run's arguments after the script's path (``--device cpu ...``)."""
    command = f"TRITON_INTERPRET=1 python bench/{script} {cpu_run}".rstrip()
    if device == "cuda":
        require_cuda(f"{script} --device cuda", command)
    else:
        require_interpreter(f"{script} --device cpu", command)


def parse_shapes(spec: str) -> list[tuple[int, int, torch.dtype]]:
    """'MxN:dtype,...' with dtype bf16/fp32/fp16 or torch's name (bfloat16, ...)."""
    names = DTYPE_NAMES
    out = []
    for item in spec.split(","):
        try:
            shape, dt = item.split(":")
            M, N = (int(v) for v in shape.split("x"))
        except ValueError:
            raise SystemExit(f"--shapes: {item!r} is not MxN:dtype") from None
        if dt not in names:
            raise SystemExit(f"--shapes: unknown dtype {dt!r} in {item!r}; "
                             f"one of {', '.join(names)}")
        out.append((M, N, names[dt]))
    return out


def min_bytes(op: str, M: int, N: int, es: int, ws: int | None = None) -> int:
    """Bytes a norm backward must move at least: read x and dy, write dx (3 [M, N]); read
    the per-row statistics (fp32); read w and write dw (and db for LayerNorm), of `ws`
    bytes an element (the parameters' dtype; default `es`, x's)."""
    ws = es if ws is None else ws
    if op == "rms":
        return 3 * M * N * es + 4 * M + 2 * N * ws
    return 3 * M * N * es + 8 * M + 4 * N * ws


def has_upstream_mix_order() -> bool:
    return hasattr(torch._inductor.config.triton, "mix_order_reduction")


def has_liger() -> bool:
    try:
        import liger_kernel.transformers  # noqa: F401
    except Exception:
        return False
    return True


def norm_forward(op: str, N: int) -> Callable[..., torch.Tensor]:
    """The norm's forward over rows of N: fn(x, w, b), b unused by RMSNorm."""
    if op == "rms":
        def fn(x, w, b):
            return F.rms_norm(x, (N,), w, 1e-6)
    else:
        def fn(x, w, b):
            return F.layer_norm(x, (N,), w, b, 1e-5)
    return fn


def norm_weights(op: str, N: int, device: str, wdtype: torch.dtype,
                 generator: torch.Generator | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The norm's weight near one (a trained norm) and LayerNorm's bias near zero."""
    w = (1 + 0.1 * torch.randn(N, device=device, dtype=wdtype, generator=generator))
    b = (0.1 * torch.randn(N, device=device, dtype=wdtype, generator=generator)
         if op == "ln" else None)
    return w.requires_grad_(), None if b is None else b.requires_grad_()


def make_problem(op: str, M: int, N: int, dtype: torch.dtype, device: str = "cuda",
                 wdtype: torch.dtype | None = None):
    """(forward fn, [x, w, b or None], dy), the weights in `wdtype` (default: x's dtype;
    fp32 weights under 16-bit x are what autocast trains)."""
    x = torch.randn(M, N, device=device, dtype=dtype, requires_grad=True)
    w, b = norm_weights(op, N, device, dtype if wdtype is None else wdtype)
    dy = torch.randn(M, N, device=device, dtype=dtype)
    return norm_forward(op, N), [x, w, b], dy


def compile_options(variant: str) -> dict[str, Any]:
    if variant == "inductor_nomix":
        return {"triton.mix_order_reduction": False} if has_upstream_mix_order() else {}
    if variant == "inductor_mix":
        return {"triton.mix_order_reduction": True}
    if variant in OURS:
        return inductor_ext.options()
    raise ValueError(f"not a compiled variant: {variant}")


def warmed_backward(compiled: Callable, inputs: Sequence[torch.Tensor | None],
                    wrt: Sequence[torch.Tensor], dy: torch.Tensor,
                    calls: int) -> Callable[[], Any]:
    """A repeatable backward call of `compiled` (its forward runs once here), called
    `calls` times first: the backward graph compiles and autotunes on the first call, so
    run this inside whatever config the compile should see."""
    y = compiled(*inputs)

    def step():
        return torch.autograd.grad(y, wrt, dy, retain_graph=True)

    for _ in range(calls):
        step()
    torch.cuda.synchronize()
    return step


def liger_forward(op: str, N: int, inputs: Sequence[torch.Tensor | None]):
    """Liger's module for the op, sharing our weight (and bias) tensors as its parameters.
    RMSNorm runs with in_place=False so dy is not overwritten between variants."""
    from liger_kernel.transformers import LigerLayerNorm, LigerRMSNorm

    x, w, b = inputs
    if op == "rms":
        mod = LigerRMSNorm(N, eps=1e-6, in_place=False)
    else:
        mod = LigerLayerNorm(N, eps=1e-5, bias=True)
        mod.bias = torch.nn.Parameter(b.detach().clone())
    mod.weight = torch.nn.Parameter(w.detach().clone())
    mod = mod.to(x.device)
    params = [mod.weight] + ([mod.bias] if op == "ln" else [])

    def fn(x, w, b):
        return mod(x)
    return fn, params


def reference_grads(fn: Callable, inputs: Sequence[torch.Tensor | None], dy: torch.Tensor):
    up = [None if t is None else t.detach().double().requires_grad_() for t in inputs]
    return torch.autograd.grad(fn(*up), [t for t in up if t is not None], dy.double())


def check(grads: Sequence[torch.Tensor], ref: Sequence[torch.Tensor],
          eager_errs: Sequence[float] | None = None) -> tuple[bool, float]:
    """(all within tolerance, max relative error) against the float64 reference. With
    eager's own errors, a gradient may also be up to 4x eager's (the bar is "no worse than
    eager" on ill-conditioned outputs, as in tests.support.reference)."""
    errs = [max_rel_err(g, r) for g, r in zip(grads, ref)]
    ok = True
    for i, (e, g) in enumerate(zip(errs, grads)):
        bar = tolerance(g.dtype)
        if eager_errs is not None:
            bar = max(bar, 4 * eager_errs[i])
        ok &= e <= bar
    return ok, max(errs)


@triton.jit
def fold_workspace_columns(ws_ptr, out_ptr, second_ptr, rows, N: tl.constexpr,
                           COLS: tl.constexpr, ROWS_P2: tl.constexpr, OUTPUTS: tl.constexpr):
    """The column partials' fold: this program's COLS columns of `out_ptr` (and with
    OUTPUTS=2 of `second_ptr`, None otherwise) are the sums of the first `rows` (at most
    ROWS_P2) rows of an fp32 workspace of rows of OUTPUTS * N (output k's partials in
    columns k * N to (k + 1) * N). Launched on cdiv(N, COLS) programs, or called from a
    kernel whose program ids share out the columns."""
    cols = tl.program_id(0) * COLS + tl.arange(0, COLS)[None, :]
    lanes = tl.arange(0, ROWS_P2)[:, None]
    mask = (lanes < rows) & (cols < N)
    first = tl.load(ws_ptr + lanes * OUTPUTS * N + cols, mask, other=0.0)
    if OUTPUTS == 1:
        tl.store(out_ptr + cols, tl.sum(first, 0)[None, :].to(out_ptr.dtype.element_ty),
                 cols < N)
    else:
        second = tl.load(ws_ptr + lanes * OUTPUTS * N + N + cols, mask, other=0.0)
        tl.store(out_ptr + cols, tl.sum(first, 0)[None, :].to(out_ptr.dtype.element_ty),
                 cols < N)
        tl.store(second_ptr + cols,
                 tl.sum(second, 0)[None, :].to(second_ptr.dtype.element_ty), cols < N)


#: How the L2 is emptied before each timed replay (bench/README.md, "The L2 flush"):
#: "read" (default) reads do_bench's 256 MB buffer, so the L2 holds clean lines and the
#: previous replay's writes drain untimed; "write" is do_bench's own zero-fill, which
#: leaves ~50 MB of dirty lines that the timed kernels must write back (the baseline CSV's
#: method: it costs every variant the same few microseconds).
FLUSH_MODES = ("read", "write")


class GraphTimer:
    """Time a GPU callable as device time: capture it once in a CUDA graph on a side
    stream, then `triton.testing.do_bench` the replay (L2 flushed before every replay,
    median of the event-timed replays). The host-side cost of autograd and Python wrappers
    is outside the graph, so large and small shapes measure the kernels and their gaps.

    `prepare` runs on the same stream first (the forward, so that autograd launches the
    backward on the capture stream) and warms up `fn` (compiles, autotuning)."""

    def __init__(self, flush: str = "read") -> None:
        if flush not in FLUSH_MODES:
            raise ValueError(f"flush must be one of {FLUSH_MODES}, not {flush!r}")
        self.stream = torch.cuda.Stream()
        self.flush = flush

    def run(self, fn: Callable[[], Any], prepare: Callable[[], Any] | None = None,
            warmup_calls: int = 3) -> tuple[Any, Any, torch.cuda.CUDAGraph]:
        s = self.stream
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            state = prepare() if prepare is not None else None
            for _ in range(warmup_calls):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=s):
            out = fn()
        graph.replay()
        torch.cuda.synchronize()
        return state, out, graph

    def _clear(self, cache: torch.Tensor) -> None:
        """Empty the L2 through `cache` (a buffer larger than it) in this timer's mode."""
        if self.flush == "read":
            cache.sum()
        else:
            cache.zero_()

    def flush_l2(self) -> None:
        """Empty the L2 the way the timed replays do (for profiled replays)."""
        if not hasattr(self, "_flush_buffer"):
            self._flush_buffer = torch.empty(int(256e6 // 4), dtype=torch.int,
                                             device="cuda")
        self._clear(self._flush_buffer)

    def time_us(self, graph: torch.cuda.CUDAGraph, rep_ms: int = 100) -> float:
        from triton.runtime import driver

        # do_bench empties the L2 through driver.active.clear_cache before each replay.
        with mock.patch.object(driver.active, "clear_cache", self._clear):
            return do_bench(graph.replay, warmup=10, rep=rep_ms, return_mode="median") * 1e3

    def replay_us(self, graph: torch.cuda.CUDAGraph) -> float:
        """One replay after an emptied L2, timed by CUDA events. For steps of milliseconds
        (a model's training step) do_bench times one replay per call anyway, after five
        estimating replays and a warm-up: this is the same sample at an eighth of the cost,
        so a run can afford the rounds that a 5% per-replay spread needs."""
        self.flush_l2()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3


def rotated_turns(names: Sequence[str], rounds: int) -> Iterator[str]:
    """The names in turns, `rounds` times, each round starting one name further on, so
    clock or power drift over a run hits every variant alike."""
    for r in range(rounds):
        k = r % len(names)
        yield from list(names[k:]) + list(names[:k])


def interleaved_rounds(timer: GraphTimer, graphs: dict[str, torch.cuda.CUDAGraph],
                       rounds: int, single_replay: bool = False) -> dict[str, list[float]]:
    """Each graph's time per round, the variants taking turns (`rotated_turns`). Round r
    of one variant and round r of another ran back to back: their ratio is a paired
    sample. A round is a do_bench of 50 ms, or with `single_replay` one replay
    (`GraphTimer.replay_us`)."""
    times: dict[str, list[float]] = {n: [] for n in graphs}
    for name in rotated_turns(list(graphs), rounds):
        times[name].append(timer.replay_us(graphs[name]) if single_replay
                           else timer.time_us(graphs[name], rep_ms=50))
    return times


def interleaved_us(timer: GraphTimer, graphs: dict[str, torch.cuda.CUDAGraph],
                   rounds: int) -> dict[str, float]:
    """Median over `rounds` of each graph's time (`interleaved_rounds`)."""
    return {n: statistics.median(t)
            for n, t in interleaved_rounds(timer, graphs, rounds).items()}


def paired_ratio_range(base: Sequence[float], other: Sequence[float]) -> tuple[float, float]:
    """Lowest and highest per-round speed ratio base / other of two interleaved series."""
    ratios = [b / o for b, o in zip(base, other)]
    return min(ratios), max(ratios)


def profiled_replay(graph: torch.cuda.CUDAGraph, timer: GraphTimer) -> list[Any]:
    """The kernel events of one replay under torch.profiler, after the L2 flush the timed
    replays get (the flush stays outside the profile)."""
    from torch.profiler import ProfilerActivity, profile

    timer.flush_l2()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    return [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def print_breakdown(graph, title: str, timer: GraphTimer, replays: int = 5) -> None:
    """Device time per kernel inside the timed graph (torch.profiler over a few replays,
    each after the same L2 flush as the timed ones, which stays outside the profile)."""
    events = []
    span = tail = 0.0
    for _ in range(replays):
        kernels = profiled_replay(graph, timer)
        events.extend(kernels)
        if kernels:
            # Device timeline of this replay: first kernel start to last kernel end, and
            # what runs after the longest kernel ends (the final step's exposed part).
            end = max(e.time_range.end for e in kernels)
            span += (end - min(e.time_range.start for e in kernels)) / replays
            longest = max(kernels, key=lambda e: e.device_time_total)
            tail += (end - longest.time_range.end) / replays
    per_kernel: dict[str, float] = {}
    for evt in events:
        per_kernel[evt.name] = per_kernel.get(evt.name, 0.0) + evt.device_time_total / replays
    total = sum(per_kernel.values())
    print(f"  breakdown {title}: kernels {total:.1f} us per replay, timeline {span:.1f} us "
          f"({tail:.1f} us after the longest kernel ends)")
    for name, us in sorted(per_kernel.items(), key=lambda kv: -kv[1]):
        print(f"    {us:8.1f} us  {name[:100]}")


def copy_add(numel: int, dtype: torch.dtype):
    """The copy-speed reference, a 2-read-1-write add (x + dy into a third tensor): a
    callable running it on fresh operands of `numel` elements."""
    a = torch.randn(numel, device="cuda", dtype=dtype)
    b = torch.randn_like(a)
    out = torch.empty_like(a)
    return lambda: torch.add(a, b, out=out)


def copy_tbps(timer: GraphTimer, numel: int = 32768 * 4096,
              dtype: torch.dtype = torch.bfloat16) -> float:
    """Practical bandwidth ceiling: the copy add, timed like every variant (the default
    size is the baseline's: 32768x4096 bf16)."""
    _, _, graph = timer.run(copy_add(numel, dtype))
    us = timer.time_us(graph)
    return 3 * numel * dtype.itemsize / (us * 1e-6) / 1e12



class Block(nn.Module):
    """A LLaMA-like transformer block from torch.nn pieces with random weights: RMSNorm ->
    causal attention -> residual -> RMSNorm -> SwiGLU MLP -> residual."""

    def __init__(self, dim: int, heads: int, hidden: int, eps: float | None = None) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.RMSNorm(dim, eps=eps)
        self.norm2 = nn.RMSNorm(dim, eps=eps)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(B, T, 3, self.heads, D // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
        n = self.norm2(x)
        return x + self.down(F.silu(self.gate(n)) * self.up(n))


def apply_setting(setting: str) -> None:
    """`--setting 'knob=value;...'`: CUDA tuning knobs for every compile of this run
    (through `inductor_ext.config.tuning`, part of the cache key); a bad one exits naming
    it."""
    from inductor_ext.plan.knobs import parse_settings

    if not setting.strip():
        return  # nothing to change (and nothing left set for later compiles in the process)

    try:
        inductor_ext.config.tuning = {"cuda": parse_settings("cuda", setting)}
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


class RmsCase(NamedTuple):
    """A probe's RMSNorm case, `rms:MxN:dtype[:wdtype]`."""
    M: int
    N: int
    dtype: torch.dtype
    wdtype: torch.dtype


def parse_rms_case(spec: str) -> RmsCase:
    """`rms:MxN:dtype[:wdtype]` (the weights in x's dtype unless given); what follows an
    `@` is the caller's."""
    case = spec.partition("@")[0]
    op, shape, dt, wdt = (case.split(":") + [""])[:4]
    if op != "rms" or dt not in DTYPE_NAMES or (wdt and wdt not in DTYPE_NAMES):
        raise SystemExit(f"{spec!r} is not rms:MxN:dtype[:wdtype] (RMSNorm only; dtypes "
                         f"{', '.join(DTYPES)})")
    M, N = (int(v) for v in shape.split("x"))
    return RmsCase(M, N, DTYPE_NAMES[dt], DTYPE_NAMES[wdt] if wdt else DTYPE_NAMES[dt])


class RmsProblem(NamedTuple):
    """An RMSNorm backward's inputs (rstd in fp32, as the forward saves it) and its float64
    gradients."""
    fn: Callable[..., torch.Tensor]
    x: torch.Tensor
    w: torch.Tensor
    dy: torch.Tensor
    rstd: torch.Tensor
    ref_dx: torch.Tensor
    ref_dw: torch.Tensor
    min_bytes: int


def rms_problem(M: int, N: int, dtype: torch.dtype, wdtype: torch.dtype,
                device: str = "cuda") -> RmsProblem:
    torch.manual_seed(0)
    fn, (x, w, _), dy = make_problem("rms", M, N, dtype, device=device, wdtype=wdtype)
    x, w = x.detach(), w.detach()
    xd, dyd, wd = x.double(), dy.double(), w.double()
    rstd = torch.rsqrt(xd.pow(2).mean(1) + 1e-6)
    wdy = wd * dyd
    ref_dx = (rstd[:, None] * wdy
              - xd * (rstd ** 3 / N)[:, None] * (wdy * xd).sum(1, keepdim=True))
    ref_dw = (dyd * xd * rstd[:, None]).sum(0)
    return RmsProblem(fn, x, w, dy, rstd.float(), ref_dx, ref_dw,
                      min_bytes("rms", M, N, dtype.itemsize, wdtype.itemsize))


def check_rms_grads(p: RmsProblem, label: str, dx: torch.Tensor, dw: torch.Tensor) -> None:
    """Stop, naming `label`, unless dx and dw are within their dtypes' tolerances of
    float64 (NaN, a gradient left unwritten, fails too)."""
    for what, got, want in (("dx", dx, p.ref_dx), ("dw", dw, p.ref_dw)):
        ok, err = check([got], [want])
        if not ok:
            raise SystemExit(f"{label}: {what} off by {err:.2e}")


def time_inductor_ext(timer: GraphTimer, p: RmsProblem, tbps: float) -> float:
    """Print the case's copy-speed time and its same-size add; check torch.compile with
    inductor_ext against float64 and return its time (us)."""
    M, N = p.x.shape
    copy_us = 3 * M * N * p.x.dtype.itemsize / (tbps * 1e12) * 1e6
    _, _, graph = timer.run(copy_add(M * N, p.x.dtype))
    print(f"  copy speed {copy_us:.1f} us, same-size add {timer.time_us(graph):.1f} us")
    xg, wg = p.x.clone().requires_grad_(), p.w.clone().requires_grad_()
    compiled = torch.compile(p.fn, options=inductor_ext.options(), dynamic=False)
    holder = {}

    def prepare():
        holder["y"] = compiled(xg, wg, None)

    def step():
        return torch.autograd.grad(holder["y"], [xg, wg], p.dy, retain_graph=True)

    _, (gx, gw), graph = timer.run(step, prepare)
    check_rms_grads(p, "inductor_ext", gx, gw)
    ext_us = timer.time_us(graph)
    print(f"  inductor_ext           {ext_us:7.1f} us  "
          f"{p.min_bytes / ext_us / 1e6 / tbps:.3f} of copy")
    return ext_us


def probe_timer(script: str, flush: str) -> tuple[GraphTimer, float]:
    """A probe's start on the GPU: the timer with its L2 flush and this run's copy
    bandwidth (TB/s), printed."""
    require_cuda(script)
    timer = GraphTimer(flush)
    tbps = copy_tbps(timer)
    print(f"copy {tbps:.3f} TB/s (32768x4096 bf16 add)")
    return timer, tbps
