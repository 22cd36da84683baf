"""`python -m inductor_ext --check`: is the plugin right, and faster, on this device?

CI has no NPU, so the people who have one (or a GPU we have not measured) run this and send
us the CSV. For a fixed set of RMSNorm / LayerNorm backwards it compiles each twice, with
the plugin off (stock torch.compile, or an NPU's own Inductor backend) and on
(``inductor_ext.options()``, the default options: the cost model decides), checks dx / dw /
db of the plugin's compile against a float64 eager reference, times both backwards with
the device's events, and prints one row per shape: fused or the decline's reason, the
errors, the two times and their ratio.

On CPU the kernels run in the Triton interpreter (TRITON_INTERPRET=1), and under the
NPU emulation of tests/support in its interpreter: the same path on a small M,
whose times say nothing about speed, and the output says so.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import dataclasses
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

import torch

from . import __version__, compat, config, metrics, plan, plugin, targets
from .compat import inductor_config
from .distributions import installed_version
from .interpreter import INTERPRETER_HINT, cpu_interpret, interpreter_active

#: Largest |got - ref| over largest |ref| allowed per dtype of the compared tensor: the
#: tests' table (tests/support/reference.py), kept here because the package must not import
#: tests/. A gradient may also be off by up to EAGER_FACTOR times eager's own error in the
#: input dtype: the bar is "no worse than eager", not "better than the math".
RTOL: dict[torch.dtype, float] = {
    torch.float32: 2e-5,
    torch.float16: 5e-3,
    torch.bfloat16: 3e-2,
    torch.float64: 1e-10,
}
EAGER_FACTOR = 4.0

#: Rows of a device check: the token count of a training micro-batch, where the norm
#: backward is bandwidth-bound and the fused kernel's one read of x and dy shows.
DEVICE_M = 4096
#: Row lengths: hidden sizes of common models (1024 and 4096 powers of two, 2560 and 3072
#: padded to the next power of two by a persistent row).
NS = (1024, 2560, 3072, 4096)
QUICK_NS = (1024, 4096)
#: Under an interpreter (CPU, emulated NPU) M rows and N / INTERPRETED_N_DIVISOR columns:
#: the interpreter pays per program, and stock Inductor's dw kernel runs one per column
#: (64 x 1024 takes it about 20 s a call on 2 CPU cores), so N shrinks too, keeping padded rows
#: padded (320, 384); the whole set then takes minutes, --quick about one.
INTERPRETED_M = 64
INTERPRETED_N_DIVISOR = 8

#: Bytes written between timed calls so no operand stays in L2 (H100 50 MB, 910B 192 MB).
FLUSH_BYTES = 256 * 2 ** 20
#: Timed backward calls per variant and shape (the median is reported), and untimed ones
#: first (allocator, autotuning).
DEVICE_REPS, QUICK_DEVICE_REPS, WARMUP = 30, 10, 3
#: How long the device is held back before a timed call: three times the host's time to
#: queue the call, within these bounds.
MIN_SLEEP_MS, MAX_SLEEP_MS = 1.0, 20.0

DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16",
               torch.float64: "fp64"}
OPS = ("rms", "ln")
GRAD_NAMES = ("dx", "dw", "db")

COLUMNS = ("op", "M", "N", "dtype", "plugin", "reason", "detail", "target", "err_dx",
           "err_dw", "err_db", "tol_dx", "tol_dw", "tol_db", "ok", "off_us", "on_us",
           "ratio", "timing", "device", "device_name", "torch", "inductor_ext", "error")


@dataclasses.dataclass(frozen=True)
class Shape:
    """One norm backward to check: `op` "rms" (nn.RMSNorm) or "ln" (nn.LayerNorm, with
    bias), x of [M, N] in `dtype`, the weights in the same dtype."""

    op: str
    M: int
    N: int
    dtype: torch.dtype

    def __str__(self) -> str:
        return f"{self.op} {self.M}x{self.N} {DTYPE_NAMES.get(self.dtype, str(self.dtype))}"


@dataclasses.dataclass
class Row:
    """What the check found for one shape (one CSV row). `plugin` is "fused", "declined"
    or "error"; `reason` the decline's reason code(s), `detail` its detail (the cost
    model's times for not_profitable; for a fused kernel the model's verdict). Errors are
    max |got - ref| / max |ref| of the plugin's compile (None: no such gradient), times
    the median backward in microseconds; `ratio` is off / on (above 1: the plugin is
    faster)."""

    shape: Shape
    plugin: str = "error"
    reason: str = ""
    detail: str = ""
    target: str = ""
    errors: dict[str, float | None] = dataclasses.field(default_factory=dict)
    tolerances: dict[str, float | None] = dataclasses.field(default_factory=dict)
    off_us: float = float("nan")
    on_us: float = float("nan")
    timing: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        """Every gradient within its tolerance (and the check ran)."""
        if self.error or not self.errors:
            return False
        return all(err is None or err <= (self.tolerances.get(name) or 0.0)
                   for name, err in self.errors.items())

    @property
    def ratio(self) -> float:
        return self.off_us / self.on_us if self.on_us > 0 else float("nan")

    @property
    def status(self) -> str:
        """The table's plugin column: fused, or why not."""
        if self.plugin == "declined":
            return f"declined: {self.reason}"
        if self.plugin == "error":
            return "error"
        return self.plugin


@dataclasses.dataclass(frozen=True)
class Where:
    """How the check runs on a device: whether an interpreter runs the kernels (then the
    times are not measurements) and what to call it."""

    device: torch.device
    name: str
    interpreted: bool
    emulated_npu: bool
    timing: str
    interpreter: str = ""  # which interpreter runs the kernels, for the report's note


def default_shapes(interpreted: bool, quick: bool = False) -> list[Shape]:
    """The fixed set: bf16 RMSNorm and LayerNorm at each N, plus fp32 at N=1024 (`quick`:
    N 1024 and 4096 in bf16 only); under an interpreter M and N scaled down (see
    INTERPRETED_M)."""
    M, div = (INTERPRETED_M, INTERPRETED_N_DIVISOR) if interpreted else (DEVICE_M, 1)
    shapes = [Shape(op, M, N // div, torch.bfloat16) for op in OPS
              for N in (QUICK_NS if quick else NS)]
    if not quick:
        shapes += [Shape(op, M, 1024 // div, torch.float32) for op in OPS]
    return shapes


def default_device() -> str:
    """A vendor package's device (npu) when that package is loaded and sees one, else
    cuda, else cpu. No vendor package is imported here: its import can abort the process
    (the caller decides, `VendorPackage.load_if_safe`)."""
    if _vendor_served(torch.device("cpu")):  # the NPU emulation: CPU tensors
        return "cpu"
    for package in targets.VENDOR_PACKAGES:
        module: Any = getattr(torch, package.device_type, None)
        with contextlib.suppress(Exception):
            if (package.loaded_version() is not None and module is not None
                    and module.is_available()):
                return package.device_type
    if torch.cuda.is_available():
        return "cuda"
    return "cpu"


def _vendor_name(device_type: str) -> str:
    """The vendor package whose Inductor backend serves `device_type` (Ascend's for npu)."""
    return next((p.name for p in targets.VENDOR_PACKAGES if p.device_type == device_type),
                f"the {device_type} vendor")


def _vendor_served(device: torch.device) -> bool:
    """A vendor backend generates this device's kernels (the NPU emulation serves CPU
    tensors): the targets' `serves` predicates know, without naming one here."""
    for planner in plan.PLANNERS.values():
        with contextlib.suppress(Exception):
            if planner.serves is not None and planner.serves(device):
                return True
    return False


def where(device: str | torch.device) -> Where:
    """Describe `device`. RuntimeError where the check cannot run: on CPU without the
    interpreter (INTERPRETER_HINT's text: the plugin acts on CPU only through it), on a
    device type torch does not know or has none of."""
    dev = torch.device(device)
    interpreting = interpreter_active()
    if dev.type == "cpu":
        emulated = _vendor_served(dev)
        if not interpreting:
            raise RuntimeError(INTERPRETER_HINT)
        if emulated:
            return Where(dev, f"emulated NPU: {_vendor_name('npu')}'s backend on CPU tensors",
                         True, True,
                         "wall clock of one backward in triton-ascend's interpreter: "
                         "NOT a measurement", "the emulated NPU runs the kernels in "
                         "triton-ascend's interpreter")
        return Where(dev, platform.processor() or platform.machine() or "cpu", True, False,
                     "wall clock of one backward in the Triton interpreter: NOT a measurement",
                     "on CPU the kernels run in the Triton interpreter")
    module: Any = getattr(torch, dev.type, None)
    available = False
    with contextlib.suppress(Exception):
        available = bool(module.is_available())
    if not available:
        raise RuntimeError(f"no {dev.type} device here (torch.{dev.type} reports none)")
    name = "?"
    with contextlib.suppress(Exception):
        name = str(module.get_device_name(dev.index or 0))
    if interpreting:
        return Where(dev, name, True, False, "wall clock of one backward, TRITON_INTERPRET=1 "
                     "on a device: NOT a measurement",
                     "TRITON_INTERPRET=1 runs the kernels in the Triton interpreter")
    return Where(dev, name, False, False,
                 f"torch.{dev.type}.Event, median of the backward calls, L2 flushed before each")


def _inputs(shape: Shape, device: torch.device
            ) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    """The norm module (weights near 1, a bias near 0), x and dy: drawn on CPU from a fixed
    seed so every device checks the same numbers."""
    gen = torch.Generator().manual_seed(shape.M * 100003 + shape.N)
    N = shape.N
    module: torch.nn.Module
    if shape.op == "rms":
        module = torch.nn.RMSNorm(N, eps=1e-6, dtype=shape.dtype)
    elif shape.op == "ln":
        module = torch.nn.LayerNorm(N, eps=1e-5, dtype=shape.dtype)
    else:
        raise ValueError(f"unknown op {shape.op!r}: one of {OPS}")
    with torch.no_grad():
        module.weight.copy_(1 + 0.1 * torch.randn(N, generator=gen))
        bias = getattr(module, "bias", None)
        if bias is not None:
            bias.copy_(0.1 * torch.randn(N, generator=gen))
    x = torch.randn(shape.M, N, generator=gen).to(shape.dtype)
    dy = torch.randn(shape.M, N, generator=gen).to(shape.dtype)
    return module.to(device), x.to(device), dy.to(device)


def _grads(module: torch.nn.Module, fn: Callable[[torch.Tensor], torch.Tensor],
           x: torch.Tensor, dy: torch.Tensor) -> list[torch.Tensor]:
    """dx, dw (and db) of fn(x) under dy."""
    xg = x.detach().requires_grad_()
    return list(torch.autograd.grad(fn(xg), [xg, *module.parameters()], dy))


def max_rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    """max |got - ref| / max |ref| (inf for a NaN the reference does not have)."""
    g = got.detach().double().cpu()
    r = ref.detach().double().cpu()
    if torch.isnan(g).any() and not torch.isnan(r).any():
        return float("inf")
    return float((g - r).abs().max() / r.abs().max().clamp_min(1e-30))


@contextlib.contextmanager
def _tables_in(folder: str) -> Iterator[None]:
    """The plugin's metric tables on, written to `folder` (Inductor writes them to the
    working directory), so the check reads each decline's reason and detail."""
    old = os.getcwd()
    os.chdir(folder)
    try:
        with inductor_config.patch(enabled_metric_tables=",".join(
                (metrics.FUSION_TABLE, metrics.REJECT_TABLE))):
            yield
    finally:
        os.chdir(old)


def _table(folder: str, name: str) -> list[dict[str, str]]:
    path = os.path.join(folder, f"metric_table_{name}.csv")
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    os.remove(path)  # the next shape's rows start a new file
    return rows


def _decision(row: Row, folder: str) -> None:
    """Fill `row`'s plugin / reason / detail from the counters (kept in Inductor's cached
    counter deltas) and the tables (the detail; caches are off, so they are written)."""
    fused = _table(folder, metrics.FUSION_TABLE)
    rejects = [r for r in _table(folder, metrics.REJECT_TABLE) if r.get("kind") == "norm"]
    norms = metrics.norms
    declined = metrics.norms_declined
    if declined or (norms["found"] and norms["fused"] < norms["found"]):
        row.plugin = "declined"
        row.reason = ",".join(sorted(declined)) or "not fused"
        row.detail = "; ".join(r.get("detail", "") for r in rejects if r.get("detail"))
    elif metrics.mix_order_kernels:
        row.plugin = "fused"
        row.detail = "; ".join(r.get("model_detail", "") for r in fused
                               if r.get("model_detail"))
        row.target = ",".join(sorted({r["target"] for r in fused if r.get("target")}))
    else:
        row.plugin = "declined"
        row.reason = ",".join(sorted(metrics.rejected_pairs)) or "no norm backward found"


#: A forward's output and the tensors its backward differentiates for.
Step = tuple[torch.Tensor, list[torch.Tensor]]


class _Timer:
    """Median time of one backward call on a device: events around the call, the forward
    and an L2 flush before it untimed, and (where the device has a sleep kernel) the
    device held back while the host queues the call, so that launch overhead is not
    timed."""

    def __init__(self, device: torch.device, reps: int) -> None:
        self.reps = reps
        self.module: Any = getattr(torch, device.type)
        self.flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device=device)

    def _sleep_cycles_per_ms(self) -> float:
        """The sleep kernel's cycles per millisecond at the clock the device runs now
        (0: no usable sleep kernel). Measured after the warm-up calls: an idle GPU's clock
        is several times lower, and a sleep calibrated there is too short once it
        rises, so host time would be timed again."""
        sleep = getattr(self.module, "_sleep", None)
        if sleep is None:
            return 0.0
        try:
            start, end = (self.module.Event(enable_timing=True) for _ in range(2))
            cycles = 10 ** 7
            sleep(cycles)  # the clock up again before the measured one
            start.record()
            sleep(cycles)
            end.record()
            self.module.synchronize()
            elapsed_ms = float(start.elapsed_time(end))
            return cycles / elapsed_ms if elapsed_ms > 0 else 0.0
        except Exception:  # no usable sleep kernel: time without it
            return 0.0

    def __call__(self, forward: Callable[[], Step],
                 backward: Callable[[Step], Sequence[torch.Tensor]]) -> float:
        mod = self.module
        host_ms = []
        for _ in range(WARMUP):
            step = forward()
            mod.synchronize()
            t0 = time.perf_counter()
            backward(step)
            host_ms.append((time.perf_counter() - t0) * 1e3)
            mod.synchronize()
        sleep_ms = min(max(3 * statistics.median(host_ms), MIN_SLEEP_MS), MAX_SLEEP_MS)
        cycles_per_ms = self._sleep_cycles_per_ms()
        events = [(mod.Event(enable_timing=True), mod.Event(enable_timing=True))
                  for _ in range(self.reps)]
        for start, end in events:
            step = forward()
            self.flush.zero_()
            if cycles_per_ms:
                mod._sleep(int(sleep_ms * cycles_per_ms))
            start.record()
            backward(step)
            end.record()
        mod.synchronize()
        return statistics.median(float(s.elapsed_time(e)) * 1e3 for s, e in events)


def check_shape(shape: Shape, at: Where, timer: _Timer | None, always_fuse: bool = False
                ) -> Row:
    """Compile `shape`'s norm off and on, check the plugin's gradients, time both (with
    `timer` on a device; under an interpreter the wall clock of the first backward, which
    only shows that it ran)."""
    row = Row(shape, timing=at.timing)
    module, x, dy = _inputs(shape, at.device)
    ref_module = _reference_module(module)
    refs = _grads(ref_module, ref_module, x.cpu().double(), dy.cpu().double())
    eager = _grads(module, module, x, dy)
    names = GRAD_NAMES[:len(refs)]

    def compiled(opts: dict[str, object]) -> tuple[list[torch.Tensor], float]:
        torch._dynamo.reset()
        with inductor_config.patch({**opts, "force_disable_caches": True}), \
                config.patch(always_fuse=always_fuse):
            fn = torch.compile(module, dynamic=False)
            params = list(module.parameters())

            def forward() -> Step:
                xg = x.detach().requires_grad_()
                return fn(xg), [xg, *params]

            def backward(step: Step) -> Sequence[torch.Tensor]:
                return torch.autograd.grad(step[0], step[1], dy)

            step = forward()  # compiles the forward and the backward
            t0 = time.perf_counter()
            grads = list(backward(step))
            us = (time.perf_counter() - t0) * 1e6
            if timer is not None:
                us = timer(forward, backward)
        return grads, us

    with tempfile.TemporaryDirectory(prefix="inductor_ext_check_") as folder:
        _, row.off_us = compiled({})
        metrics.reset()
        with _tables_in(folder):
            got, row.on_us = compiled(plugin.options())
        _decision(row, folder)
    torch._dynamo.reset()
    if not row.target:
        row.target = plan.target_for(at.device, config.target)
    for name, g, r, e in zip(names, got, refs, eager):
        row.errors[name] = max_rel_err(g, r)
        row.tolerances[name] = max(RTOL[g.dtype], EAGER_FACTOR * max_rel_err(e, r))
    for name in GRAD_NAMES[len(refs):]:
        row.errors[name] = row.tolerances[name] = None
    return row


def _reference_module(module: torch.nn.Module) -> torch.nn.Module:
    """A float64 CPU copy of the norm: the reference the gradients are checked against."""
    return copy.deepcopy(module).to("cpu", torch.float64)


def run_check(device: str | torch.device, shapes: Sequence[Shape], *,
              always_fuse: bool = False, reps: int | None = None,
              progress: Callable[[str], None] | None = None) -> list[Row]:
    """Check each shape on `device` (the plugin left as the caller had it afterwards). A
    shape that fails to compile or run becomes a row with `error` set, not an exception:
    the other shapes still report."""
    at = where(device)
    was_on = plugin.is_enabled()
    if was_on:  # "off" must be stock: the plugin is passed per compile below
        plugin.disable()
    rows: list[Row] = []
    try:
        with _interpreting(at), warnings.catch_warnings():
            # caches are off on purpose (fresh compiles write the tables): not news
            warnings.filterwarnings("ignore", message=".*force_disable_caches")
            timer = None if at.interpreted else _Timer(at.device, reps or DEVICE_REPS)
            for i, shape in enumerate(shapes, 1):
                t0 = time.perf_counter()
                try:
                    row = check_shape(shape, at, timer, always_fuse)
                except Exception as exc:  # report it in the row; the other shapes go on
                    row = Row(shape, timing=at.timing,
                              error=f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
                    torch._dynamo.reset()
                rows.append(row)
                if progress is not None:
                    progress(f"inductor_ext check: [{i}/{len(shapes)}] {shape}: "
                             f"{_progress_text(row)} ({time.perf_counter() - t0:.1f} s)")
    finally:
        if was_on:
            plugin.enable()
    return rows


def _interpreting(at: Where) -> contextlib.AbstractContextManager[None]:
    """CPU tensors go through the Triton interpreter; the emulated NPU has set that up
    itself (triton-ascend's interpreter), and a device needs nothing."""
    if at.device.type == "cpu" and not at.emulated_npu:
        return cpu_interpret()
    return contextlib.nullcontext()


def _progress_text(row: Row) -> str:
    if row.error:
        return f"error: {row.error}"
    return (f"{row.status}, {'ok' if row.ok else 'FAIL'}, off {row.off_us:.1f} us, "
            f"on {row.on_us:.1f} us, off/on {row.ratio:.2f}")


def _fmt_err(value: float | None) -> str:
    return "-" if value is None else f"{value:.1e}"


def table(rows: Sequence[Row], interpreted: bool) -> list[str]:
    """The rows as a fixed-width table; under an interpreter the time columns carry a `*`
    that the last line explains."""
    mark = "*" if interpreted else ""
    head = ["op", "M", "N", "dtype", "plugin", "err dx", "err dw", "err db", "check",
            f"off us{mark}", f"on us{mark}", f"off/on{mark}"]
    body = [[r.shape.op, str(r.shape.M), str(r.shape.N),
             DTYPE_NAMES.get(r.shape.dtype, str(r.shape.dtype)), r.status,
             *(_fmt_err(r.errors.get(n)) for n in GRAD_NAMES),
             "ok" if r.ok else "FAIL", f"{r.off_us:.1f}", f"{r.on_us:.1f}",
             f"{r.ratio:.2f}"] for r in rows]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]
    left = {0, 3, 4, 8}
    lines = ["  ".join(c.ljust(w) if i in left else c.rjust(w)
                       for i, (c, w) in enumerate(zip(line, widths))).rstrip()
             for line in [head, *body]]
    return lines


def _versions() -> str:
    triton = str(getattr(sys.modules.get("triton"), "__version__", "?"))
    if (ascend := installed_version("triton-ascend")) is not None:
        triton += f" (triton-ascend {ascend})"
    parts = [f"inductor_ext {__version__}", f"torch {torch.__version__}", f"triton {triton}"]
    parts += [f"{package.name} {version}" for package in targets.VENDOR_PACKAGES
              if (version := package.loaded_version()) is not None]
    return ", ".join(parts)


def report(rows: Sequence[Row], at: Where, always_fuse: bool) -> list[str]:
    """The printed report: what ran where, the table, declines' details, the verdict."""
    off = (f"{_vendor_name('npu')}'s backend" if at.emulated_npu or at.device.type == "npu"
           else "stock torch.compile")
    upstream = ""
    if compat.has_upstream_mix_order():
        upstream = (f" (upstream {compat.UPSTREAM_MIX_ORDER_KEY}="
                    f"{inductor_config.triton.mix_order_reduction})")
    options = "always_fuse=True" if always_fuse else "default options (the cost model decides)"
    lines = [f"inductor_ext check on {at.device} ({at.name}); {_versions()}",
             f"off: {off}{upstream}",
             f"on:  inductor_ext.options(), {options}, target "
             f"{plan.target_for(at.device, config.target)!r}",
             "errors: max |got - float64| / max |float64| of the plugin's gradients",
             f"times: {at.timing}"]
    if at.interpreted:
        lines.append(f"NOTE: {at.interpreter}: the times below are NOT measurements, they "
                     "only show that the path ran (M and N are small).")
    lines += ["", *table(rows, at.interpreted)]
    if at.interpreted:
        lines.append("* not a measurement: interpreter time")
    notes = [f"  {r.shape}: {r.reason}: {r.detail}" for r in rows
             if r.plugin == "declined" and r.detail]
    notes += [f"  {r.shape}: {r.error}" for r in rows if r.error]
    if notes:
        lines += ["", "declines and errors:", *(n[:240] for n in notes)]
    failed = [r for r in rows if not r.ok]
    lines += ["", f"{len(rows) - len(failed)} of {len(rows)} shapes within tolerance; "
                  f"{sum(r.plugin == 'fused' for r in rows)} fused"]
    return lines


def write_csv(path: str, rows: Sequence[Row], at: Where) -> None:
    """One row per shape with the columns of COLUMNS (floats full precision)."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for r in rows:
            writer.writerow({
                "op": r.shape.op, "M": r.shape.M, "N": r.shape.N,
                "dtype": DTYPE_NAMES.get(r.shape.dtype, str(r.shape.dtype)),
                "plugin": r.plugin, "reason": r.reason, "detail": r.detail,
                "target": r.target,
                **{f"err_{n}": _csv_float(r.errors.get(n)) for n in GRAD_NAMES},
                **{f"tol_{n}": _csv_float(r.tolerances.get(n)) for n in GRAD_NAMES},
                "ok": r.ok, "off_us": _csv_float(r.off_us), "on_us": _csv_float(r.on_us),
                "ratio": _csv_float(r.ratio), "timing": r.timing, "device": str(at.device),
                "device_name": at.name, "torch": torch.__version__,
                "inductor_ext": __version__, "error": r.error})


def _csv_float(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def command(device: str | None = None, csv_path: str | None = None, quick: bool = False,
            always_fuse: bool = False, out: IO[str] | None = None,
            err: IO[str] | None = None) -> int:
    """`python -m inductor_ext --check`: 0 when every shape is within tolerance, 1 when one
    is not (or failed), 2 when the check cannot run here (CPU without TRITON_INTERPRET=1)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        at = where(device or default_device())
    except RuntimeError as exc:
        if "TRITON_INTERPRET" in str(exc):
            print("inductor_ext --check: on CPU the kernels run in Triton's interpreter, "
                  "which needs TRITON_INTERPRET=1 in the environment: TRITON_INTERPRET=1 "
                  "python -m inductor_ext --check", file=err)
        else:
            print(f"inductor_ext --check: {exc}", file=err)
        return 2
    shapes = default_shapes(at.interpreted, quick)
    reps = QUICK_DEVICE_REPS if quick else DEVICE_REPS
    print(f"inductor_ext check: {len(shapes)} shapes on {at.device} ({at.name}); each "
          "compiled off and on", file=err, flush=True)
    rows = run_check(at.device, shapes, always_fuse=always_fuse, reps=reps,
                     progress=lambda line: print(line, file=err, flush=True))
    print("\n".join(report(rows, at, always_fuse)), file=out, flush=True)
    if csv_path:
        write_csv(csv_path, rows, at)
        print(f"CSV: {csv_path} (attach it to your report)", file=out, flush=True)
    return 0 if all(r.ok for r in rows) else 1
