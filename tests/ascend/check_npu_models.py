"""Tiny transformers decoders through torch_npu's emulated backend, the plugin off and on.

Runs in the venv of setup_npu_venv.sh, on any paired torch_npu release; .ci/run calls it on
2.11.0.post3, right after that release's quick check (a minute or two on 2 cores):

  TORCH_NPU_VERSION=2.11.0.post3 bash tests/ascend/setup_npu_venv.sh
  .npu-venv-2.11.0.post3/bin/python tests/ascend/check_npu_models.py [--models llama,...]

Each model (default: a 1-layer transformers Llama with transformers' default use_cache=True,
and the same Llama with use_cache=False; built from a LlamaConfig, random weights, nothing
downloaded) runs one training step (forward with labels, backward) compiled with torch_npu's
default backend, first with the plugin off (torch_npu's own kernels only), then on
(inductor_ext.options(), always_fuse), each compared with eager (loss and every parameter's
gradient). One line a model:

  passes            both runs pass;
  fails ... OFF as well ... (not the plugin's)
                    the plugin-off run fails: torch_npu's own kernels cannot compile or run
                    the model. Not a failure of ours, as long as the plugin-on run passes
                    or fails the same way (same error, in a kernel that is not one of ours);
  FAILS with the plugin ON
                    the plugin-on run fails where the plugin-off run passes, or fails in
                    another way than it (another error, or in one of our fused kernels).

Last line: `npu models (torch_npu <release>): K ok, T torch_npu's own failures, F failed`;
exits non-zero unless F = 0 (torch_npu's own failures do not fail it).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
# Triton reads TRITON_INTERPRET at import: before torch._inductor is imported.
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

import check_npu  # noqa: E402  (its recorder of the fused kernels torch_npu defines)
import torch  # noqa: E402

import inductor_ext  # noqa: E402
from tests.support import npu_emulation as emu  # noqa: E402
from tests.support import reference  # noqa: E402

#: The models (transformers decoders with rotary embeddings; torch_npu 2.11.0.post3's own
#: rotary backward kernel is what this check is about): name -> (config class, model class,
#: whether the step returns the key/value cache). One layer, short sequences, random
#: weights built from the config (nothing downloaded): each compile runs every kernel in
#: the interpreter. 4 heads of 16 on 2 key/value heads (check_npu.py's model heads), a
#: shape torch_npu 2.11.0.post3's rotary backward kernel fails with transformers' default
#: use_cache=True (the rotated keys are also outputs of the graph) and compiles without
#: the cache; other head shapes pass either way (NPU_EMULATION_NOTES.md).
MODELS: dict[str, tuple[str, str, bool]] = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", True),
    "llama-nocache": ("LlamaConfig", "LlamaForCausalLM", False),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", True),
    "mistral": ("MistralConfig", "MistralForCausalLM", True),
}
DEFAULT_MODELS = "llama,llama-nocache"
SIZE = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 1,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "vocab_size": 64, "max_position_embeddings": 64, "attention_dropout": 0.0}
BATCH, SEQ = 2, 8
#: Compiled vs eager fp32 (check_npu.py's model tolerances).
LOSS_TOL = 1e-4
GRAD_TOL = 1e-3


@dataclasses.dataclass
class Outcome:
    """One compiled training step: ok, or what failed and in which kernel."""

    ok: bool
    detail: str
    #: The generated kernel (its function's name) the error was raised in, "" if none.
    kernel: str = ""
    #: The error with what differs between two compiles of one model taken out (kernel
    #: numbers, addresses, paths), to tell the same failure from another one.
    signature: str = ""
    seconds: float = 0.0
    #: Norm backwards the plugin fused (plugin on only) and its fused kernels' names.
    fused_norms: int = 0
    fused_kernels: list[str] = dataclasses.field(default_factory=list)

    def describe(self) -> str:
        where = f" in kernel {self.kernel}" if self.kernel else ""
        return f"{self.detail}{where}"


def _kernel_frame(exc: BaseException) -> tuple[str, int]:
    """The innermost generated Triton kernel (a function named triton_*) in the
    tracebacks of the error and of the errors it wraps; ("", 0) if none."""
    found = ("", 0)
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        err = pending.pop()
        if id(err) in seen:
            continue
        seen.add(id(err))
        for frame, lineno in traceback.walk_tb(err.__traceback__):
            if frame.f_code.co_name.startswith("triton_"):
                found = (frame.f_code.co_name, lineno)
        pending += [e for e in (err.__cause__, err.__context__) if e is not None]
    return found


def _innermost(exc: BaseException) -> BaseException:
    """The error at the end of the chain of errors that wrap others (dynamo's
    BackendCompilerFailed, Inductor's wrappers), the one that says what went wrong."""
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = exc.__cause__ or exc.__context__
        if inner is None:
            break
        exc = inner
    return exc


def _signature(kernel: str, exc: BaseException) -> str:
    """The error as two compiles of one model can compare it: a kernel's trailing number
    (Inductor numbers kernels per graph), addresses and temporary paths taken out."""
    text = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    text = re.sub(r"(triton_\w*?)_\d+\b", r"\1", text)
    text = re.sub(r"0x[0-9a-fA-F]+", "0x?", text)
    text = re.sub(r"/\S+", "<path>", text)
    return f"{re.sub(r'_[0-9]+$', '', kernel)} {text}"


def run_step(name: str) -> tuple[bool, str]:
    """One training step of the model (loss from the labels, inside the compiled
    forward), compiled vs eager fp32 (loss and every parameter's gradient); (ok, detail)."""
    import transformers

    config_cls, model_cls, use_cache = MODELS[name]
    torch.manual_seed(0)
    config = getattr(transformers, config_cls)(**SIZE, use_cache=use_cache)
    model = getattr(transformers, model_cls)(config).float().train()
    ids = torch.randint(0, config.vocab_size, (BATCH, SEQ))
    loss_err, worst = reference.training_step_errors(model, ids)
    ok = loss_err < LOSS_TOL and worst < GRAD_TOL
    return ok, f"loss diff {loss_err:.1e}, worst grad rel err {worst:.1e}"


def run(name: str, plugin: bool) -> Outcome:
    """The model's step with the plugin off (torch_npu's own kernels) or on."""
    torch._dynamo.reset()
    inductor_ext.metrics.reset()
    records: list[dict] = []
    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if plugin:
            stack.enter_context(torch._inductor.config.patch(inductor_ext.options()))
            stack.enter_context(inductor_ext.config.patch(always_fuse=True))
            stack.enter_context(check_npu.capture(records))
        try:
            ok, detail = run_step(name)
            outcome = Outcome(ok, detail if ok else f"wrong result: {detail}")
        except Exception as exc:
            traceback.print_exc(limit=-6, file=sys.stderr)
            kernel, line = _kernel_frame(exc)
            inner = _innermost(exc)
            text = str(inner).strip().splitlines()
            detail = f"{type(inner).__name__}: {text[0][:300] if text else ''}"
            outcome = Outcome(False, detail, kernel=f"{kernel} (line {line})" if kernel
                              else "", signature=_signature(kernel, inner))
    torch._dynamo.reset()
    outcome.seconds = time.perf_counter() - start
    outcome.fused_norms = inductor_ext.metrics.norms.get("fused", 0) if plugin else 0
    outcome.fused_kernels = [record["name"] for record in records]
    return outcome


def _is_ours(kernel: str, fused: list[str]) -> bool:
    """Whether the failing kernel ("name (line n)") is one of the plugin's fused kernels."""
    return bool(kernel) and kernel.split(" ", 1)[0] in fused


def label(name: str) -> str:
    """The model as the report names it: its transformers class and its cache."""
    config_cls, _, use_cache = MODELS[name]
    cache = "use_cache=True, transformers' default" if use_cache else "use_cache=False"
    return f"transformers {config_cls.removesuffix('Config')} ({cache})"


def verdict(release: str, name: str, off: Outcome, on: Outcome) -> tuple[str, str]:
    """("ok" | "torch_npu" | "fail", the line to print) for one model's two runs."""
    head = f"torch_npu {release}: {label(name)}"
    fused = f"{on.fused_norms} norm backwards fused"
    timing = f"{off.seconds:.0f} s off, {on.seconds:.0f} s on"
    if off.ok and on.ok:
        return "ok", (f"{head} passes with the plugin off ({off.detail}) and on "
                      f"({on.detail}, {fused}; {timing})")
    if off.ok:
        return "fail", (f"{head} FAILS with the plugin ON only: {on.describe()} "
                        f"(plugin off passes: {off.detail}; {timing})")
    own = (f"fails with the plugin OFF as well: torch_npu's own kernel"
           f"{' ' + off.kernel if off.kernel else 's'}: {off.detail} (not the plugin's)")
    if on.ok:
        return "torch_npu", (f"{head} {own}; with the plugin on it passes ({on.detail}, "
                             f"{fused}: fused kernels replace the failing one; {timing})")
    ours = _is_ours(on.kernel, on.fused_kernels)
    if on.signature == off.signature and not ours:
        return "torch_npu", (f"{head} {own}; with the plugin on it fails the same way "
                             f"({fused}; {timing})")
    return "fail", (f"{head} FAILS with the plugin ON in another way than with it off: "
                    f"on: {on.describe()}{' (a fused kernel of ours)' if ours else ''}; "
                    f"off: {off.describe()}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=DEFAULT_MODELS,
                    help=f"comma-separated, of {', '.join(MODELS)} (default: "
                         f"{DEFAULT_MODELS})")
    ap.add_argument("--soc", default="Ascend910B3")
    args = ap.parse_args()
    release = emu.torch_npu_version()
    reason = emu.emulation_unavailable_reason()
    names = [m for m in args.models.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if reason or unknown:
        print(f"check_npu_models: cannot run: {reason or f'unknown models {unknown}'}")
        print(f"npu models (torch_npu {release}): 0 ok, 0 torch_npu's own failures, 1 failed")
        return 1
    counts = {"ok": 0, "torch_npu": 0, "fail": 0}
    with emu.npu_emulation(soc=args.soc):
        for name in names:
            off = run(name, plugin=False)
            on = run(name, plugin=True)
            kind, line = verdict(release, name, off, on)
            counts[kind] += 1
            print(line, flush=True)
    print(f"npu models (torch_npu {release}): {counts['ok']} ok, {counts['torch_npu']} "
          f"torch_npu's own failures, {counts['fail']} failed")
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
