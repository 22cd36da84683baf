"""An emulation of torch_npu's runtime, for codegen testing on a machine with no NPU.

What is real here: torch_npu 2.13's own ``torch_npu._inductor`` package, loaded from its
unpacked wheel and run as its ``__init__`` runs it (the chosen ``TORCHINDUCTOR_NPU_BACKEND``
loader, so every patch, lowering, decomposition and registration that backend installs);
its schedulings and kernel classes (``NPUCombinedScheduling`` / ``NPUIndexTritonKernel``,
or the ``triton_experimental`` ones), its Python wrapper codegen, its launcher
(``NPUCachingAutotuner`` and ``GridExprNpu``: for the fused kernels its device path, every
config compiled, timed on ``clone_args`` and the fastest launched; torch_npu's own kernels
its interpreter path), and triton-ascend 3.2.0's front end and Triton interpreter.

What is emulated: every other ``torch_npu.*`` module (the C extension, ``torch_npu.npu``,
profiler, utils...) is a stub whose unknown attributes are mocks; ``torch.npu`` is a
stand-in that reports one device of the chosen SoC (vector / cube core counts, the name);
the SoC version is whatever the caller picks. Since there is no NPU tensor, torch_npu's
scheduling and wrapper are registered for the ``cpu`` device as well (CPU tensors compile
to Triton with ``cpu_backend="triton"``, as :func:`cpu_interpret` does), and torch_npu's
device-dispatched lowerings are taken for CPU tensors too. A few seams where torch_npu
2.13 expects a newer triton-ascend than 3.2.0 are shimmed (see ``_SHIMS`` below).

What it cannot show: execution on an NPU (kernels run in the Triton interpreter on CPU),
anything past triton-ascend's front end (hivmc, bishengir's back end, CANN), real
Unified Buffer behaviour at run time (the interpreter has no UB), speed (the autotuner's
clock is virtual, its times a stand-in timer's), or the behaviour of CANN operators that
torch_npu's fallbacks would call (those run as ATen CPU ops).

Two CANN operators are emulated as real ``torch.library`` ops rather than mocks:
``torch.ops.npu.npu_rms_norm`` / ``npu_rms_norm_backward`` (and ``torch_npu.npu_rms_norm``),
with torch_npu's schemas, output dtypes and autograd link and CPU reference kernels
(``tests/support/npu_cann_ops.py``): an emulation of the ops' contract, not of
aclnnRmsNorm / aclnnRmsNormGrad's numerics or speed.

Use it inside the venv that ``tests/ascend/setup_npu_venv.sh`` builds, with
``TRITON_INTERPRET=1`` set before triton is imported::

    with npu_emulation(soc="910B3"):
        torch.compile(fn)(cpu_tensor, ...)
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.abc
import importlib.machinery
import importlib.metadata
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from inductor_ext.runtime.autotune import PLAN_KEY
from tests.support import npu_cann_ops, npu_socs

#: SoC names the caller may pass (every SoC of tests/support/npu_socs.py whose cores are
#: known, and its short spellings "910B1", "910B3", "950"), with torch_npu's SoC version
#: ids; an int id of that table works too. torch_npu itself compares ids only with 260.
SOC_VERSIONS: dict[str, int] = {
    **{s.name: s.soc_id for s in npu_socs.known()},
    **{alias: npu_socs.BY_NAME[name].soc_id for alias, name in npu_socs.ALIASES.items()}}
_SOC_NAMES: dict[int, str] = {s.soc_id: s.name for s in npu_socs.known()}
#: Core counts the device stand-in reports for the default SoC (a 910B3: 20 AI cores, 2
#: vector cores each); other SoCs report theirs from the table.
VECTOR_CORES = 40
CUBE_CORES = 20
BACKENDS = ("default", "triton_experimental")
_BACKEND_HASH = "INDUCTOR-EXT-NPU-EMULATION"

TORCH_NPU_VERSION = "2.13.0"
TRITON_ASCEND_VERSION = "3.2.0"
#: Where setup_npu_venv.sh unpacks the torch_npu wheel, relative to the venv.
_WHEEL_SUBDIR = "torch_npu_wheel"
_WHEEL_ENV = "INDUCTOR_EXT_TORCH_NPU_WHEEL"


def torch_npu_wheel_dir() -> Path | None:
    """The directory holding the unpacked ``torch_npu`` package, if there is one."""
    candidates = [os.environ.get(_WHEEL_ENV), os.path.join(sys.prefix, _WHEEL_SUBDIR)]
    for cand in filter(None, candidates):
        if (Path(cand) / "torch_npu" / "_inductor" / "__init__.py").is_file():
            return Path(cand)
    return None


def torch_npu_version(wheel_dir: Path | None = None) -> str:
    """The release of the unpacked wheel (its ``torch_npu/version.py``): the paired releases
    (setup_npu_venv.sh: 2.11.0.post3, 2.12.0.post3, 2.13.0, 2.14.0) differ in a few seams
    below, each shim naming the releases that need it. TORCH_NPU_VERSION if unreadable."""
    wheel_dir = wheel_dir or torch_npu_wheel_dir()
    text = ""
    if wheel_dir is not None:
        with contextlib.suppress(OSError):
            text = (wheel_dir / "torch_npu" / "version.py").read_text()
    for line in text.splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("'\"")
    return TORCH_NPU_VERSION


def npu_runtime_module(kind: str) -> str:
    """torch_npu's module of Triton ``helpers`` or ``heuristics`` (the decorators and
    NPUCachingAutotuner): ``_inductor/runtime/triton_<kind>.py`` from 2.13.0 on,
    ``_inductor/npu_triton_<kind>.py`` in 2.11.0.post3 / 2.12.0.post3 (whose ``runtime`` is
    a module, not a package)."""
    wheel_dir = torch_npu_wheel_dir()
    old = f"torch_npu._inductor.npu_triton_{kind}"
    if wheel_dir is not None and (wheel_dir / (old.replace(".", "/") + ".py")).is_file():
        return old
    return f"torch_npu._inductor.runtime.triton_{kind}"


def emulation_unavailable_reason() -> str | None:
    """None when the emulation can run in this interpreter, else why not (for a skip)."""
    try:
        version = importlib.metadata.version("triton-ascend")
    except importlib.metadata.PackageNotFoundError:
        return ("triton-ascend is not installed here: run inside the venv of "
                "tests/ascend/setup_npu_venv.sh")
    if version != TRITON_ASCEND_VERSION:
        return f"triton-ascend {version} installed, the emulation is written for " \
               f"{TRITON_ASCEND_VERSION}"
    if torch_npu_wheel_dir() is None:
        return (f"no unpacked torch_npu {TORCH_NPU_VERSION} wheel under "
                f"{sys.prefix}/{_WHEEL_SUBDIR} (or ${_WHEEL_ENV}): run "
                "tests/ascend/setup_npu_venv.sh")
    if os.environ.get("TRITON_INTERPRET") != "1":
        return "TRITON_INTERPRET=1 must be set before triton is imported"
    return None


def can_emulate() -> bool:
    return emulation_unavailable_reason() is None


# ----------------------------------------------------------------------------------------
# Stub modules for every torch_npu.* module outside _inductor
# ----------------------------------------------------------------------------------------


class _StubModule(types.ModuleType):
    """A torch_npu module with no real code: unknown attributes are mocks named after it."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = mock.MagicMock(name=f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


@dataclasses.dataclass
class _DeviceProps:
    """What torch_npu reads from ``torch.npu.get_device_properties``."""

    name: str
    vector_core_num: int = VECTOR_CORES
    cube_core_num: int = CUBE_CORES
    total_memory: int = 64 << 30
    multi_processor_count: int = CUBE_CORES
    major: int = 0
    minor: int = 0


class _Stream:
    npu_stream = 0
    cuda_stream = 0

    def synchronize(self) -> None:
        return None

    def wait_stream(self, other: Any) -> None:
        return None


def _npu_attributes(soc: int) -> dict[str, Any]:
    """Attributes of the ``torch_npu.npu`` stub, which is also ``torch.npu``: one device of
    the SoC, with its name and core counts from the SoC table."""
    facts = npu_socs.get(soc)
    assert facts.vector_cores is not None and facts.cube_cores is not None
    props = _DeviceProps(name=facts.name, vector_core_num=facts.vector_cores,
                         cube_core_num=facts.cube_cores,
                         multi_processor_count=facts.cube_cores)
    limit = {"cube_core_num": facts.cube_cores, "vector_core_num": facts.vector_cores}
    return {
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "_initialized": True,
        "_is_in_bad_fork": lambda: False,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "set_device": lambda device: None,
        "get_device_properties": lambda device=None: props,
        "get_device_name": lambda device=None: props.name,
        "get_device_capability": lambda device=None: (0, 0),
        "get_device_limit": lambda device=None: dict(limit),
        "set_device_limit": lambda *args, **kwargs: None,
        "synchronize": lambda device=None: None,
        "current_stream": lambda device=None: _Stream(),
        "_get_deterministic_level": lambda: 0,
    }


#: Modules of torch_npu._inductor that are stubbed too, and why.
STUBBED_INDUCTOR_MODULES: dict[str, str] = {
    "torch_npu._inductor.fx_passes._proxy_ops":
        "registers real torch.library ops cloned from the C extension's FA v3 schemas",
    # torch_npu 2.11.0.post3 / 2.12.0.post3 only (the module is gone in 2.13.0): its
    # register_fa_pass traces an SDPA -> npu_fusion_attention replacement on
    # torch.empty(device="npu"), which a CPU torch cannot allocate. Stubbed, that pass is
    # not registered: attention stays Inductor's decomposition (norms are not affected).
    "torch_npu._inductor.npu_fusion_attention_graph":
        "2.11/2.12: registers an attention pattern traced on NPU tensors",
}


#: Pure-Python torch_npu packages outside ``_inductor`` that a release's kernel codegen
#: calls, loaded from the wheel instead of stubbed (a stub's mock would stand in for text).
REAL_OUTSIDE_INDUCTOR: dict[str, tuple[str, ...]] = {
    # 2.12.0.post3's NPUIndexTritonKernel takes its import lines from
    # torch_npu._compat.inductor.gen_common_triton_imports, and its axis analysis its size
    # hints from get_sizevars_backed_var_to_val (2.11.0.post3 has no _compat; 2.13.0 and
    # 2.14.0 use it only for patches of the C++ wrapper, which stay stubbed).
    "2.12.0.post3": ("torch_npu._compat",),
}


def _npu_interface() -> type:
    """The dynamo device interface torch_npu registers for "npu" (its Inductor backends
    look it up, triton_experimental subclasses it), answering from ``torch.npu``."""
    import torch
    from torch._dynamo import device_interface as di

    npu = torch.npu  # type: ignore[attr-defined]

    class NpuInterface(di.DeviceInterface):
        class Worker:
            @staticmethod
            def set_device(device: int) -> None:
                return None

            @staticmethod
            def current_device() -> int:
                return 0

            @staticmethod
            def get_device_properties(device: Any = None) -> Any:
                return npu.get_device_properties(device)

        current_device = staticmethod(lambda: 0)
        set_device = staticmethod(lambda device: None)
        device_count = staticmethod(lambda: 1)
        is_available = staticmethod(lambda: True)
        synchronize = staticmethod(lambda device=None: None)
        get_raw_stream = staticmethod(lambda device_idx=0: 0)
        is_bf16_supported = staticmethod(lambda including_emulation=False: True)
        is_triton_capable = staticmethod(lambda device=None: True)

        @classmethod
        def get_device_properties(cls, device: Any = None) -> Any:
            return npu.get_device_properties(device)

        @staticmethod
        def get_compute_capability(device: Any = None) -> Any:
            return npu.get_device_name(device)

        @staticmethod
        def current_stream() -> Any:
            return _Stream()

        @staticmethod
        def stream(stream: Any) -> Any:
            return contextlib.nullcontext()

    return NpuInterface


def _register_npu_interface() -> None:
    from torch._dynamo import device_interface as di

    di.register_interface_for_device("npu", _npu_interface())


class _TorchNpuFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``torch_npu`` and every ``torch_npu.*`` module as a stub, except the real
    ``torch_npu._inductor`` package, which the normal path finder loads from the wheel."""

    def __init__(self, wheel_dir: Path, soc: int) -> None:
        self.wheel_dir = wheel_dir
        self.soc = soc
        self.real = ("torch_npu._inductor",
                     *REAL_OUTSIDE_INDUCTOR.get(torch_npu_version(wheel_dir), ()))

    def _is_real(self, fullname: str) -> bool:
        if fullname in STUBBED_INDUCTOR_MODULES:
            return False
        return any(fullname == p or fullname.startswith(p + ".") for p in self.real)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "torch_npu" and not fullname.startswith("torch_npu."):
            return None
        if self._is_real(fullname):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: Any) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = [str(self.wheel_dir / "torch_npu")] if spec.name == "torch_npu" \
            else []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        for name, value in self._attributes(module.__name__).items():
            setattr(module, name, value)

    def _attributes(self, name: str) -> dict[str, Any]:
        soc = self.soc
        if name == "torch_npu":
            return {"__version__": torch_npu_version(self.wheel_dir)}
        if name == "torch_npu.npu":
            return _npu_attributes(soc)
        if name == "torch_npu.utils._dynamo_device":
            return {"NpuInterface": _npu_interface()}
        if name == "torch_npu.npu.aclnn":
            # Static ACLNN kernels are built by CANN tools; off, as without CANN.
            return {"_use_static_aclnn_kernel": False}
        if name == "torch_npu.npu._backends":
            return {"get_soc_version": lambda: soc}
        if name == "torch_npu.utils._dynamo":
            return {"has_triton": lambda *args, **kwargs: True,
                    "_dynamo_register_interface_for_device": _register_npu_interface}
        return {}


# ----------------------------------------------------------------------------------------
# Undo: what importing torch_npu's backend changes in torch, and how it is put back
# ----------------------------------------------------------------------------------------

_PATCHED_ROOTS = ("torch",)
_CONTAINERS = (dict, list, set)


class _Ledger:
    """Snapshot of module and class namespaces under ``torch`` (and of their module-level
    dicts, lists and sets) taken before torch_npu patches them; ``restore`` sets back
    every attribute and container it finds changed. torch_npu has no unpatch, and its
    patches are plain attribute assignments and registry insertions, which this covers."""

    def __init__(self) -> None:
        self.modules: dict[str, tuple[types.ModuleType, dict[str, Any]]] = {}
        self.classes: list[tuple[type, dict[str, Any]]] = []
        self.containers: list[tuple[Any, Any]] = []
        seen: set[int] = set()
        for name, module in list(sys.modules.items()):
            if module is None or not self._tracked(name):
                continue
            namespace = dict(vars(module))
            self.modules[name] = (module, namespace)
            for value in namespace.values():
                if isinstance(value, type) and id(value) not in seen \
                        and getattr(value, "__module__", "") == name:
                    seen.add(id(value))
                    class_namespace = dict(vars(value))
                    self.classes.append((value, class_namespace))
                    for member in class_namespace.values():  # registries such as
                        self._container(member, seen)  # TritonTemplate.all_templates
                else:
                    self._container(value, seen)

    def _container(self, value: Any, seen: set[int]) -> None:
        if type(value) in _CONTAINERS and id(value) not in seen:
            seen.add(id(value))
            self.containers.append((value, value.copy()))

    @staticmethod
    def _tracked(name: str) -> bool:
        return any(name == root or name.startswith(root + ".") for root in _PATCHED_ROOTS)

    def restore(self) -> None:
        for module, namespace in self.modules.values():
            _restore_namespace(module, namespace, vars(module))
        for cls, namespace in self.classes:
            _restore_namespace(cls, namespace, vars(cls))
        for container, saved in self.containers:
            if container != saved:
                container.clear()
                container.update(saved) if not isinstance(container, list) \
                    else container.extend(saved)


def _restore_namespace(owner: Any, saved: dict[str, Any], current: Any) -> None:
    for key in [k for k in current if k not in saved]:
        with contextlib.suppress(AttributeError, TypeError):
            delattr(owner, key)
    for key, value in saved.items():
        if current.get(key, _MISSING) is not value:
            with contextlib.suppress(AttributeError, TypeError):
                setattr(owner, key, value)


_MISSING = object()


# ----------------------------------------------------------------------------------------
# Seams between torch_npu 2.13 and triton-ascend 3.2.0
# ----------------------------------------------------------------------------------------


class _MissingCannExtension:
    """``tl.extra.cann.extension`` stand-in: triton-ascend 3.2.0 has no such module.
    torch_npu's kernels call it only for indirect gathers / scatters; using one in the
    emulation fails with a clear message instead of an AttributeError at import."""

    def __getattr__(self, name: str) -> Any:
        def missing(*args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError(
                f"tl.extra.cann.extension.{name} is not in triton-ascend "
                f"{TRITON_ASCEND_VERSION} (torch_npu {torch_npu_version()} expects it)")

        return missing


class _EmulatedLibdevice:
    """libdevice of interpreted kernels: what tl.math has (via `_InterpreterLibdevice`),
    plus functions triton-ascend 3.2.0's interpreter cannot run as extern calls, written
    from tl primitives (`_interpreter_libdevice_extras`)."""

    def __init__(self, original: Any) -> None:
        from inductor_ext.interpreter import _InterpreterLibdevice

        self._inner = _InterpreterLibdevice(original)

    def __getattr__(self, name: str) -> Any:
        extra = _interpreter_libdevice_extras().get(name)
        return extra if extra is not None else getattr(self._inner, name)


def _interpreter_libdevice_extras() -> dict[str, Any]:
    from tests.support import npu_libdevice

    return npu_libdevice.FUNCTIONS


# ----------------------------------------------------------------------------------------
# torch_npu's device launch path, with a virtual device
# ----------------------------------------------------------------------------------------

#: Launches the stand-in benchmarker makes of each timed config (triton's do_bench makes
#: dozens; two show any launch whose result depends on what ran before it).
BENCH_LAUNCHES = 2

#: Which kernels take the device path. Ours (their inductor_meta carries the plan) always
#: do. torch_npu's own kernels stay on its interpreter path (first config, no timing)
#: unless INDUCTOR_EXT_EMULATE_DEVICE_PATH=all: each of their ~10 configs is then compiled
#: and launched three times in the interpreter, which made test_npu_emulation.py's 36
#: norm cases take 18 minutes instead of 2 (tests/ascend/NPU_EMULATION_NOTES.md).
DEVICE_PATH_FOR_ALL = os.environ.get("INDUCTOR_EXT_EMULATE_DEVICE_PATH", "") == "all"

#: A stand-in timer: (kernel name, config kwargs) -> milliseconds of one launch.
Timer = Any


def hashed_timer(kernel_name: str, kwargs: dict[str, Any]) -> float:
    """The default stand-in timer: a time in [1, 2) ms fixed by the kernel's name and the
    config (a hash), so which config wins is deterministic but not always the first."""
    import hashlib

    key = f"{kernel_name}|{sorted((k, repr(v)) for k, v in kwargs.items())}"
    return 1.0 + int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 2.0 ** 32


class VirtualDevice:
    """The emulated NPU's clock and launch record. Only emulated launches advance the clock,
    each by the stand-in timer's time for its config; events read the clock, so torch_npu's
    prerun timing and benchmark see those times, deterministically."""

    def __init__(self, timer: Timer = hashed_timer) -> None:
        self.timer = timer
        self.now_ms = 0.0
        #: (kernel name, config kwargs, benchmark launch?) of every launch, in order.
        self.launches: list[tuple[str, dict[str, Any], bool]] = []
        self.benchmarking = False

    def launched(self, kernel_name: str, kwargs: dict[str, Any]) -> None:
        self.now_ms += float(self.timer(kernel_name, kwargs))
        self.launches.append((kernel_name, dict(kwargs), self.benchmarking))


class _Event:
    """``torch.npu.Event`` on the virtual device's clock."""

    def __init__(self, device: VirtualDevice, enable_timing: bool = False, **_: Any) -> None:
        self.device = device
        self.time_ms: float | None = None

    def record(self, stream: Any = None) -> None:
        self.time_ms = self.device.now_ms

    def synchronize(self) -> None:
        return None

    def elapsed_time(self, end: _Event) -> float:
        assert self.time_ms is not None and end.time_ms is not None, "event not recorded"
        return end.time_ms - self.time_ms


class _StandInBenchmarker:
    """torch_npu's module-level ``benchmarker`` (Inductor's TritonBenchmarker, which times
    with triton.testing.do_bench on the device): launches the callable BENCH_LAUNCHES times
    and returns the mean virtual time of one call."""

    def __init__(self, device: VirtualDevice) -> None:
        self.device = device

    def benchmark_gpu(self, fn: Any, *args: Any, **kwargs: Any) -> float:
        start = self.device.now_ms
        self.device.benchmarking = True
        try:
            for _ in range(BENCH_LAUNCHES):
                fn()
        finally:
            self.device.benchmarking = False
        return (self.device.now_ms - start) / BENCH_LAUNCHES


class _EmulatedMetadata(types.SimpleNamespace):
    """What torch_npu's launcher reads of a compiled kernel's metadata. No
    ``required_ub_bits``: bishengir 1.2.0 does not report it (torch_npu handles that)."""


class EmulatedBinary:
    """The compiled kernel `triton.compile` returns on a device, for one config: its launch
    runs the interpreted twin of the kernel with the config's constants, on the CPU tensors
    that stand for NPU tensors, and advances the virtual device's clock."""

    launch_enter_hook = None
    launch_exit_hook = None

    def __init__(self, src: Any, interpreted: Any, device: VirtualDevice,
                 options: dict[str, Any], ttir: str) -> None:
        self.src = src
        self.interpreted = interpreted
        self.device = device
        self.constants = {k: v for k, v in src.constants.items()
                          if isinstance(k, str) and k in src.fn.arg_names}
        self.options = dict(options)
        self.asm = {"ttir": ttir}
        self.name = src.fn.__name__
        key = (ttir, repr(sorted(self.constants.items())))
        self.hash = f"emulated-{self.name}-{abs(hash(key))}"
        num_warps = int(options.get("num_warps", 1) or 1)
        self.metadata = _EmulatedMetadata(shared=0, num_warps=num_warps, num_ctas=1,
                                          cluster_dims=(1, 1, 1), name=self.name)
        self.packed_metadata = {"shared": 0, "num_warps": num_warps}
        self.shared = 0
        self.num_warps = num_warps
        self.n_regs = 0
        self.n_spills = 0
        self.function = f"<emulated {self.name}>"
        self.signature_names = [name for name in src.fn.arg_names if name in src.signature]

    def _init_handles(self) -> None:
        return None

    def launch_metadata(self, grid: Any, stream: Any, *args: Any) -> None:
        return None

    def run(self, grid_0: int, grid_1: int, grid_2: int, stream: Any, function: Any,
            metadata: Any, launch_metadata: Any, enter_hook: Any, exit_hook: Any,
            *call_args: Any) -> Any:
        kwargs = dict(zip(self.signature_names, call_args))
        kwargs.update(self.constants)
        out = self.interpreted[(grid_0, grid_1, grid_2)](**kwargs)
        self.device.launched(self.name, {**self.constants, **self.options})
        return out


#: Guards the front end (it swaps triton.language and sys.modules) against torch_npu's
#: parallel precompile threads.
_FRONTEND_LOCK = __import__("threading").RLock()


class _EmulatedCompiler:
    """``triton.compile`` as torch_npu's autotuner calls it (`_precompile_config`, once per
    config): the kernel goes through triton-ascend's front end for the SoC (AST -> TTIR ->
    Linalg, what runs here of the compile; bishengir's HIVM, hivmc and CANN do not), and
    the result launches in the interpreter on the virtual device."""

    def __init__(self, soc_name: str, device: VirtualDevice) -> None:
        self.soc_name = soc_name
        self.device = device

    def compile(self, src: Any, target: Any = None, options: Any = None) -> EmulatedBinary:
        fn = src.fn
        interpreted = _INTERPRETED_TWIN.get(fn)
        if interpreted is None:
            raise RuntimeError(f"{getattr(fn, '__name__', fn)}: no interpreted twin; only "
                               "kernels of torch_npu's autotuner launch in the emulation")
        options = dict(options or {})
        with _FRONTEND_LOCK, _compiled_mode():
            ttir = _lower_for_npu(src, self.soc_name, options)
        return EmulatedBinary(src, interpreted, self.device, options, ttir)


#: JIT function (what torch_npu's autotuner compiles) -> its interpreted twin (what runs).
_INTERPRETED_TWIN: dict[Any, Any] = {}


def _lower_for_npu(src: Any, soc_name: str, options: dict[str, Any]) -> str:
    """TTIR of one config through triton-ascend's front end (make_ir, ttir, then the
    ttadapter stage: triton-adapter-opt --triton-to-linalg), NPU target of the SoC."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    backend = make_backend(GPUTarget("npu", soc_name, 0))
    known = {k: v for k, v in options.items()
             if k in ("debug", "multibuffer", "num_warps", "num_stages")}
    opts = backend.parse_options(known)
    stages: dict[str, Any] = {}
    backend.add_stages(stages, opts)
    context = triton._C.libtriton.ir.context()
    triton._C.libtriton.ir.load_dialects(context)
    backend.load_dialects(context)
    module = src.make_ir(opts, backend.get_codegen_implementation(),
                         backend.get_module_map(), context)
    metadata = {**opts.__dict__, "name": src.fn.__name__,
                "hash": f"{src.fn.__name__}-{soc_name}-{sorted(map(str, src.constants.items()))}"}
    ttir = stages["ttir"](module, metadata)
    linalg = str(stages["ttadapter"](ttir, metadata))
    if "func.func" not in linalg:
        raise RuntimeError(f"{src.fn.__name__}: triton-ascend's ttir_to_linalg gave no "
                           "func.func")
    return str(ttir)


_LOADING_TWIN = __import__("threading").local()


def _jit_twin(filename: str, name: str) -> Any:
    """The kernel's @triton.jit function as a device sees it (a JITFunction), from its
    module file executed afresh in compiled mode."""
    import importlib.util

    with _FRONTEND_LOCK, _compiled_mode():
        _LOADING_TWIN.active = True
        try:
            spec = importlib.util.spec_from_file_location(
                f"_inductor_ext_npu_twin_{abs(hash(filename))}", filename)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        finally:
            _LOADING_TWIN.active = False
    kernel = getattr(module, name)
    return getattr(kernel, "fn", kernel)


def _device_init(original: Any) -> Any:
    """``NPUCachingAutotuner.__init__`` for the emulated device: the autotuner takes torch_npu's
    device path (precompile every config, launchers, prerun and benchmark, the pick, the
    autotune cache) instead of its interpreter path: its kernel is the JIT function, as on
    a device, and the interpreted function it was loaded as runs each launch."""
    def __init__(self: Any, fn: Any, *args: Any, **kwargs: Any) -> None:
        original(self, fn, *args, **kwargs)
        if getattr(_LOADING_TWIN, "active", False) or not hasattr(fn, "rewrite"):
            return  # the twin's own autotuner, never launched; or already a JITFunction
        if not (DEVICE_PATH_FOR_ALL or PLAN_KEY in (self.inductor_meta or {})):
            return  # torch_npu's own kernels: the interpreter path (see DEVICE_PATH_FOR_ALL)
        twin = _jit_twin(self.filename or fn.fn.__code__.co_filename, fn.__name__)
        _INTERPRETED_TWIN[twin] = fn
        self.fn = twin
        self.triton_interpret = False

    return __init__


class _OptionFilteringFn:
    """The interpreted kernel, called with only the config kwargs that name its parameters.
    torch_npu's interpreter path passes every config kwarg (``compile_mode``,
    ``multibuffer``, ...); 3.2.0's interpreter rejects any that is not a parameter."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.params = set(getattr(fn, "arg_names", ()))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fn, name)

    def __getitem__(self, grid: Any) -> Any:
        launch = self.fn[grid]

        def call(*args: Any, **kwargs: Any) -> Any:
            kept = {k: v for k, v in kwargs.items() if k in self.params}
            return launch(*args, **kept)

        return call


def _interpreter_run(autotuner_cls: type, plan_fn: Any) -> Any:
    """``NPUCachingAutotuner.run`` with the two interpreter-path seams closed."""
    original = autotuner_cls.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.triton_interpret:
            if not isinstance(self.fn, _OptionFilteringFn):
                self.fn = _OptionFilteringFn(self.fn)
            names = tuple(getattr(self, "runtime_block_arg_names", ()))
            if names and plan_fn is not None and not self.best_runtime_blocks:
                # Runtime block sizes (X0BLOCK ...) come from the autotuner's pick, which
                # the interpreter path never makes: take the first candidate, as that path
                # takes the first config.
                entry = plan_fn(self.configs, names)["candidate_entries"][0]
                self._set_best_candidate(entry, None)
        elif not self.launchers and plan_fn is None:
            # The device path of 2.11.0.post3 / 2.12.0.post3: their run reads launchers[0]
            # before its own precompile branch (a device's kernel load precompiles first;
            # the emulation's in-process load, interpreted, does not).
            self.precompile()
        return original(self, *args, **kwargs)

    return run


def _lang_namespaces() -> list[Any]:
    """The triton.language objects the interpreter patches in place on a kernel's first
    run (builtins, tensor dunders, dtype.to_ir, static_range ...) and never unpatches."""
    import triton.language as tl

    return [tl, tl.core, tl.math, tl.core.tensor, tl.core.dtype]


def _lang_is_pristine() -> bool:
    import triton.language as tl

    return tl.core.is_builtin(tl.program_id)


_PRISTINE_LANG: list[tuple[Any, dict[str, Any]]] = []


def _remember_pristine_lang() -> None:
    """Snapshot triton.language before the interpreter patches it, for the front end."""
    if not _PRISTINE_LANG and _lang_is_pristine():
        _PRISTINE_LANG.extend((obj, dict(vars(obj))) for obj in _lang_namespaces())


@contextlib.contextmanager
def _pristine_lang() -> Iterator[None]:
    patched: list[tuple[Any, str, Any]] = []
    for obj, saved in _PRISTINE_LANG:
        current = dict(vars(obj))
        for key in [k for k in current if k not in saved]:
            patched.append((obj, key, current[key]))
            delattr(obj, key)
        for key, value in saved.items():
            if current.get(key, _MISSING) is not value:
                patched.append((obj, key, current.get(key, _MISSING)))
                setattr(obj, key, value)
    try:
        yield
    finally:
        for obj, key, value in reversed(patched):
            if value is _MISSING:
                with contextlib.suppress(AttributeError):
                    delattr(obj, key)
            else:
                setattr(obj, key, value)


_HELPER_MODULES = ("torch._inductor.runtime.triton_helpers",
                   "torch_npu._inductor.runtime.triton_helpers",
                   "torch_npu._inductor.npu_triton_helpers")  # 2.11 / 2.12's name


@contextlib.contextmanager
def _compiled_mode() -> Iterator[None]:
    """Kernels and Inductor's Triton helpers as JITFunctions instead of interpreted
    functions, for triton-ascend's front end. ``triton.jit`` picks the kind when it
    decorates, so the helper modules are executed afresh with TRITON_INTERPRET=0 and
    swapped into sys.modules for the duration (then put back)."""
    import importlib.util

    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    saved_env = os.environ.get("TRITON_INTERPRET")
    saved = {name: sys.modules.get(name) for name in _HELPER_MODULES}
    saved_lang: dict[tuple[Any, str], Any] = {}
    if not _PRISTINE_LANG:
        raise RuntimeError("triton.language was patched by an interpreted run before "
                           "npu_emulation was entered: the front-end check cannot run")
    os.environ["TRITON_INTERPRET"] = "0"
    stack = contextlib.ExitStack()
    stack.enter_context(_pristine_lang())
    try:
        # triton.language's own jit functions (tl.sum, tl.max, ...) were made interpreted
        # functions at import: JIT copies stand in while the front end runs.
        for mod_name in ("triton.language.standard", "triton.language.random"):
            original = sys.modules.get(mod_name)
            if original is None:
                continue
            spec = importlib.util.spec_from_file_location(mod_name, original.__file__)
            assert spec is not None and spec.loader is not None
            fresh = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(fresh)
            for owner in (tl, original):
                for key, value in list(vars(owner).items()):
                    if isinstance(value, InterpretedFunction) and hasattr(fresh, key):
                        saved_lang[(owner, key)] = value
                        setattr(owner, key, getattr(fresh, key))
        for name in _HELPER_MODULES:
            original = saved[name]
            if original is None or getattr(original, "__file__", None) is None:
                continue
            spec = importlib.util.spec_from_file_location(name, original.__file__)
            assert spec is not None and spec.loader is not None
            fresh = importlib.util.module_from_spec(spec)
            sys.modules[name] = fresh
            spec.loader.exec_module(fresh)
            if not hasattr(fresh, "extension"):
                fresh.extension = _MissingCannExtension()
            # `from torch._inductor.runtime import triton_helpers` reads the package's
            # attribute, not sys.modules: that one is swapped too.
            package, _, child = name.rpartition(".")
            if sys.modules.get(package) is not None:
                saved_lang[(sys.modules[package], child)] = original
                setattr(sys.modules[package], child, fresh)
        yield
    finally:
        stack.close()
        for (owner, key), value in saved_lang.items():
            setattr(owner, key, value)
        for name, module in saved.items():
            if module is not None:
                sys.modules[name] = module
        if saved_env is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved_env


@contextlib.contextmanager
def frontend() -> Iterator[Any]:
    """For lowering kernels with triton-ascend's front end inside `npu_emulation`: within
    the block triton.language is un-patched from the interpreter (as for torch_npu's own
    make_ttir_for_check) and the yielded `load(src_code, name="triton_")` returns a kernel
    module's @triton.jit function as a JITFunction (`Placeholder.KERNEL_NAME` becomes
    `name`). Lower inside the block."""
    with _compiled_mode():
        yield _load_jit_function


def _load_jit_function(src_code: str, name: str = "triton_") -> Any:
    from torch._inductor.codecache import PyCodeCache
    from torch._inductor.utils import Placeholder

    module = PyCodeCache.load(src_code.replace(str(Placeholder.KERNEL_NAME), name))
    kernel = getattr(module, name)
    return getattr(kernel, "fn", kernel)


def _checked_in_compiled_mode(original: Any) -> Any:
    """torch_npu's ``make_ttir_for_check`` (every kernel goes through it), run with the
    kernel module loaded as a JITFunction so triton-ascend's real front end sees it."""
    def make_ttir_for_check(self: Any, src_code: str) -> Any:
        with _compiled_mode():
            return original(self, src_code)

    return make_ttir_for_check


def _ttir_with_triton_ascend_32(soc_name: str) -> Any:
    """``NPUCachingAutotuner._make_ttir_module_from_cfg`` for triton-ascend 3.2.0: the same
    check (Python AST to TTIR for one config) against an NPU target. torch_npu 2.13's
    version loads ``libtriton.ascend.ir`` dialects (not in 3.2.0) and takes its target
    from the kernel's device, which is the CPU in the emulation."""
    def make_ttir(self: Any, cfg: Any) -> Any:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler.compiler import ASTSource, make_backend

        fn = self.fn
        names = list(fn.arg_names)
        constexprs = {names[i] for i in fn.constexprs}
        constants = dict(self.triton_meta.get("constants", {}))
        constants.update({k: v for k, v in cfg.kwargs.items() if k in constexprs})
        signature = {k: v for k, v in self.triton_meta["signature"].items()
                     if k not in constants and v != "constexpr"}
        attrs = (self.triton_meta.get("configs") or [None])[0]
        src = ASTSource(fn, signature, constants, attrs)
        backend = make_backend(GPUTarget("npu", soc_name, 0))
        options = backend.parse_options({"debug": False})
        context = triton._C.libtriton.ir.context()
        triton._C.libtriton.ir.load_dialects(context)
        backend.load_dialects(context)
        return src.make_ir(options, backend.get_codegen_implementation(),
                           backend.get_module_map(), context)

    return make_ttir


_SHIMS = """
- torch_npu._inductor.runtime.triton_helpers.extension: triton-ascend 3.2.0 has no
  tl.extra.cann; set to a stand-in that fails on use (libdevice falls back to
  tl.extra.ascend.libdevice by torch_npu's own code).
- torch_npu._inductor.runtime.triton_helpers.libdevice (interpreted kernels only): names
  that tl.math has resolve there (the interpreter cannot run tl.extra.ascend.libdevice's
  extern calls), and tanh (GPT-2's GELU; triton-ascend's tl.math.tanh is an extern call
  too, so triton_helpers.math is wrapped alike) is written as 1 - 2 / (exp(2x) + 1); the
  front-end check below sees the real libdevice.
- NPUTritonScheduling.make_ttir_for_check: run with TRITON_INTERPRET=0 while the check
  module loads (fresh, JIT-mode copies of the two triton_helpers modules), so the check
  compiles a JITFunction rather than the interpreter's wrapper.
- NPUCachingAutotuner._make_ttir_module_from_cfg: the same AST-to-TTIR check written for
  triton-ascend 3.2.0 (no libtriton.ascend.ir dialects there; NPU target of the chosen SoC
  instead of the CPU device the kernels are compiled for).
- torch._inductor.lowering.make_reduction (torch_npu 2.14.0 on torch 2.14.0): torch_npu's
  replacement takes the keywords torch's own takes (strict_sum=False), dropping them;
  see _take_upstream_reduction_keywords.
- NPUIndexTritonKernel.patch_triton_hash (2.11.0.post3 / 2.12.0.post3): the fixed backend
  hash, as triton_hash_with_backend gives for 2.13.0 on (no active driver to hash).
- triton.runtime.interpreter.InterpreterBuilder.get_int1_ty (3.2.0's interpreter has the
  other get_<int>_ty builders but not this one; tl.int1.to_ir asks for it in max/min
  with index, e.g. argmax in cross entropy): returns tl.int1, as its siblings return
  their dtypes. Removed on exit.
- NPUCachingAutotuner.run, interpreter path (torch_npu's own kernels only): (a) config
  kwargs that are not kernel parameters (compile_mode, multibuffer, a persistent
  kernel's R0_BLOCK...) are dropped before the interpreted call (3.2.0's interpreter
  rejects unknown keyword arguments; a compiled launch takes them as options or
  constants); (b) kernels with runtime block
  arguments (X0BLOCK) get the first candidate's values, which torch_npu's interpreter
  path reads from an autotuner pick it never makes. One config runs, none is timed.
- NPUCachingAutotuner, device path (the fused kernels): __init__ swaps in the kernel's JIT
  twin and turns triton_interpret off; triton.compile (as torch_npu's heuristics module
  calls it) is the stand-in compiler; its benchmarker and torch.npu.Event read the virtual
  device's clock (see "torch_npu's device launch path" above).
"""


# ----------------------------------------------------------------------------------------
# The context manager
# ----------------------------------------------------------------------------------------


def _soc_id(soc: str | int) -> int:
    """torch_npu's id of a SoC of the table (name, short spelling or id); ValueError for
    any other, or for one whose core counts have no source (nothing to report)."""
    facts = npu_socs.get(soc)
    if not facts.known:
        raise ValueError(f"SoC {facts.name} ({facts.soc_id}): its core counts have no "
                         f"source ({facts.source}); the emulation does not invent them. "
                         f"One of {sorted(SOC_VERSIONS)}")
    return facts.soc_id


@contextlib.contextmanager
def npu_emulation(soc: str | int = "910B3", backend: str = "default",
                  timer: Timer = hashed_timer) -> Iterator[Any]:
    """Compile CPU tensors through torch_npu's real Inductor backend and run the kernels in
    triton-ascend's interpreter. Yields the imported ``torch_npu._inductor`` package.
    Not re-entrant; on exit torch's namespaces are restored and torch_npu is unloaded."""
    reason = emulation_unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"npu_emulation cannot run here: {reason}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if any(name == "torch_npu" or name.startswith("torch_npu.") for name in sys.modules):
        raise RuntimeError("torch_npu is already imported; npu_emulation is not re-entrant")
    soc_id = _soc_id(soc)
    wheel_dir = torch_npu_wheel_dir()
    assert wheel_dir is not None

    import torch
    import torch._inductor.config as inductor_config

    _remember_pristine_lang()
    # Import what torch_npu patches before the snapshot, so the ledger sees originals.
    _preimport_inductor()
    ledger = _Ledger()
    env = dict(os.environ)
    finder = _TorchNpuFinder(wheel_dir, soc_id)
    device = VirtualDevice(timer)
    with contextlib.ExitStack() as stack:
        _ACTIVE_DEVICE[:] = [device]
        stack.callback(_ACTIVE_DEVICE.clear)
        stack.callback(_INTERPRETED_TWIN.clear)
        stack.enter_context(inductor_config.patch(inductor_config.get_config_copy()))
        stack.callback(_unload, finder, ledger, env)
        sys.meta_path.insert(0, finder)
        sys.path.append(str(wheel_dir))  # torchnpugen, the wheel's other pure-Python package
        stack.callback(_remove_path, str(wheel_dir))
        os.environ["TORCHINDUCTOR_NPU_BACKEND"] = backend
        os.environ["TORCH_WARM_POOL"] = "0"  # no compile subprocess pool
        # torch_npu 2.13 registers fallbacks (aten.nll_loss_forward, ...) for ops torch has
        # decompositions for; torch's make_fallback raises on that when $CI is set (a guard
        # for PyTorch's own CI). CI runners set it, so a real torch_npu there fails the
        # same way: the README's Ascend section says to unset it.
        os.environ.pop("CI", None)
        npu = importlib.import_module("torch_npu.npu")
        torch.npu = npu  # type: ignore[attr-defined]
        _stub_npu_ops(stack)
        # npu_rms_norm / npu_rms_norm_backward: real ops, emulating the CANN ops' contract.
        npu_cann_ops.define(stack, torch.ops.npu)
        # torch only counts cuda/xpu/cpu-backend/mtia devices as Triton-capable; on an NPU
        # machine torch_npu's device makes this true.
        stack.enter_context(mock.patch.object(torch.utils._triton, "has_triton", lambda: True))
        # The interpreter has no active driver to hash; a fixed name keys Inductor's caches.
        stack.enter_context(mock.patch.object(torch.utils._triton, "triton_hash_with_backend",
                                              lambda: _BACKEND_HASH))
        upstream_make_reduction = _upstream_make_reduction()
        package = importlib.import_module("torch_npu._inductor")
        _install_shims(stack, backend, _SOC_NAMES[soc_id], device)
        _take_upstream_reduction_keywords(upstream_make_reduction)
        _register_for_cpu(backend)
        stack.enter_context(inductor_config.patch(cpu_backend="triton", compile_threads=1,
                                                  cpp_wrapper=False))
        yield package


_ACTIVE_DEVICE: list[VirtualDevice] = []


def virtual_device() -> VirtualDevice:
    """The active emulation's virtual device (its clock, timer and launch record)."""
    if not _ACTIVE_DEVICE:
        raise RuntimeError("no npu_emulation is active")
    return _ACTIVE_DEVICE[0]


class _TritonWithEmulatedCompile(types.ModuleType):
    """The ``triton`` torch_npu's heuristics module calls: ``compile`` is the emulated
    device's; everything else is triton-ascend's."""

    def __init__(self, triton: Any, compiler: _EmulatedCompiler) -> None:
        super().__init__("triton")
        self._triton = triton
        self._compiler = compiler

    def compile(self, *args: Any, **kwargs: Any) -> EmulatedBinary:
        return self._compiler.compile(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._triton, name)


class _StubOpNamespace(types.ModuleType):
    """``torch.ops.npu`` stand-in: torch_npu's C extension registers these operators; here
    each name is a mock, enough for the lowering / pattern tables that mention them."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = mock.MagicMock(name=f"torch.ops.npu.{name}")
        setattr(self, name, value)
        return value


def _stub_npu_ops(stack: contextlib.ExitStack) -> None:
    import torch

    had = "npu" in vars(torch.ops)
    saved = vars(torch.ops).get("npu")
    torch.ops.npu = _StubOpNamespace("torch.ops.npu")

    def restore() -> None:
        if had:
            torch.ops.npu = saved
        else:
            with contextlib.suppress(AttributeError):
                delattr(torch.ops, "npu")

    stack.callback(restore)


def _preimport_inductor() -> None:
    """Modules torch_npu patches; imported first so the ledger snapshots them unpatched."""
    for name in ("torch._inductor.compile_fx", "torch._inductor.lowering",
                 "torch._inductor.scheduler", "torch._inductor.codegen.triton",
                 "torch._inductor.codegen.simd", "torch._inductor.codegen.wrapper",
                 "torch._inductor.codegen.common", "torch._inductor.runtime.triton_heuristics",
                 "torch._inductor.decomposition", "torch._inductor.ir",
                 "torch._inductor.sizevars", "torch._inductor.loop_body",
                 "torch._inductor.select_algorithm", "torch._inductor.codecache",
                 "torch._inductor.graph", "torch._inductor.choices",
                 "torch._inductor.async_compile", "torch._dynamo.device_interface",
                 "torch.nn.attention.flex_attention", "torch._inductor.kernel.mm",
                 "torch._inductor.fx_passes.joint_graph", "torch._inductor.cpp_builder"):
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    # Device op overrides register when their modules are first imported, behind a flag the
    # ledger would reset on exit while the modules stay imported: register them now, so
    # the snapshot holds them and a second session (another SoC) still finds "cpu".
    with contextlib.suppress(Exception):
        from torch._inductor.codegen.common import get_device_op_overrides

        get_device_op_overrides("cpu")


def _scheduling_module(backend: str) -> Any:
    name = {"default": "torch_npu._inductor.codegen.scheduling",
            "triton_experimental": "torch_npu._inductor.triton_experimental.codegen.triton",
            }.get(backend)
    return importlib.import_module(name) if name else None


def _install_shims(stack: contextlib.ExitStack, backend: str, soc_name: str,
                   device: VirtualDevice) -> None:
    """The seams listed in ``_SHIMS``; each is undone on exit (torch_npu is unloaded)."""
    helpers = importlib.import_module(npu_runtime_module("helpers"))
    if not hasattr(helpers, "extension"):
        helpers.extension = _MissingCannExtension()
    # The interpreter runs tl.math on numpy but not triton-ascend's extern libdevice.
    helpers.libdevice = _EmulatedLibdevice(helpers.libdevice)
    helpers.math = _EmulatedLibdevice(helpers.math)  # kernels' tl_math: tanh is extern there
    heuristics = importlib.import_module(npu_runtime_module("heuristics"))
    autotuner = heuristics.NPUCachingAutotuner
    # The device launch path: JIT kernels compiled per config by the stand-in compiler,
    # launched in the interpreter on the virtual device, timed by its clock.
    autotuner.__init__ = _device_init(autotuner.__init__)
    # 2.11.0.post3 / 2.12.0.post3 have no runtime block arguments (X0BLOCK is a config
    # constexpr there), hence no candidate plan to take the first of.
    autotuner.run = _interpreter_run(autotuner, getattr(heuristics, "build_candidate_plan",
                                                        None))
    heuristics.triton = _TritonWithEmulatedCompile(heuristics.triton,
                                                   _EmulatedCompiler(soc_name, device))
    heuristics.benchmarker = _StandInBenchmarker(device)
    npu = importlib.import_module("torch_npu.npu")
    npu.Event = lambda enable_timing=False, **kwargs: _Event(device, enable_timing)
    import triton._C.libtriton as libtriton

    if not hasattr(getattr(libtriton, "ascend", None), "ir"):
        autotuner._make_ttir_module_from_cfg = _ttir_with_triton_ascend_32(soc_name)
    if backend == "default":
        # 2.11.0.post3 / 2.12.0.post3's kernel hashes the active driver's target itself
        # (patch_triton_hash; the interpreter has no driver), where 2.13.0 on ask
        # triton_hash_with_backend, which is patched above to the same fixed name.
        kernel_cls = importlib.import_module(
            "torch_npu._inductor.codegen.triton").NPUIndexTritonKernel
        if hasattr(kernel_cls, "patch_triton_hash"):
            kernel_cls.patch_triton_hash = lambda self: _BACKEND_HASH
    scheduling = _scheduling_module(backend)
    if scheduling is not None and hasattr(scheduling.NPUTritonScheduling,
                                          "make_ttir_for_check"):
        cls = scheduling.NPUTritonScheduling
        cls.make_ttir_for_check = _checked_in_compiled_mode(cls.make_ttir_for_check)
    from triton.language import semantic

    stack.enter_context(mock.patch.object(semantic, "_store_legacy",
                                          _store_keeping_its_mask(semantic._store_legacy)))
    from triton.runtime.interpreter import InterpreterBuilder

    if not hasattr(InterpreterBuilder, "get_int1_ty"):
        import triton.language as tl

        # tl.int1.to_ir(builder) asks for it: max/min-with-index reductions (argmax in
        # softmax / cross entropy, torch_npu's max_with_index) need it in the interpreter.
        stack.enter_context(mock.patch.object(InterpreterBuilder, "get_int1_ty",
                                              lambda self: tl.int1, create=True))


def _upstream_make_reduction() -> Any:
    from torch._inductor import lowering

    return lowering.make_reduction


def _take_upstream_reduction_keywords(upstream: Any) -> None:
    """torch_npu replaces Inductor's ``lowering.make_reduction`` with its own, whose keywords
    are those of the torch it was built against. torch 2.14.0's ``sum`` lowering passes
    ``strict_sum=`` (2.15: ``strict_reduction=``), which torch_npu 2.14.0's replacement does
    not take: every sum fails to lower with a TypeError (torch_npu 2.14.0 on torch 2.14.0,
    the pair its wheel requires; a device would fail alike, so this is a shim of a
    torch_npu gap, not of the emulation). Those keywords only select a strict, eager-order
    sum layout that Inductor grants to CUDA tensors alone (``_strict_sum_layout_eligible``),
    so False is dropped; True raises. Not installed where torch_npu's function takes them
    (2.11.0.post3, 2.12.0.post3, 2.13.0: torch has no such keyword). Restored on exit by the
    ledger, with the rest of ``torch._inductor.lowering``."""
    import inspect

    from torch._inductor import lowering

    npu_make = lowering.make_reduction
    if npu_make is upstream:
        return
    theirs = inspect.signature(npu_make).parameters
    missing = {name for name, p in inspect.signature(upstream).parameters.items()
               if p.kind is p.KEYWORD_ONLY and name not in theirs}
    if not missing:
        return

    def make_reduction(reduction_type: str, override_return_dtype: Any = None,
                       **kwargs: Any) -> Any:
        unknown = set(kwargs) - missing
        if unknown:
            raise TypeError(f"make_reduction() got unexpected keywords {sorted(unknown)}")
        if any(kwargs.values()):
            raise NotImplementedError(f"torch_npu's make_reduction has no {kwargs} (a CUDA "
                                      "layout, never asked for NPU tensors)")
        return npu_make(reduction_type, override_return_dtype)

    lowering.make_reduction = make_reduction


def _store_keeping_its_mask(original: Any) -> Any:
    """triton-ascend 3.2.0's ``semantic._store_legacy`` asks ``if not mask`` for "no mask".
    Compiled, a block is always true; the interpreter's tensors answer with their data, so a
    one-element mask that is False (a [1, 1] row block past the last row) reads as no mask
    and the store writes out of bounds: heap corruption, the process aborts (torch_npu's
    LayerNorm forward at X0BLOCK_SUB=1). Inside the call a block answers true, as compiled."""
    import triton.language as tl

    def store(ptr: Any, val: Any, mask: Any, *args: Any) -> Any:
        interpreted = vars(tl.core.tensor).get("__bool__")
        if mask is None or interpreted is None:  # compiled: no data to answer with
            return original(ptr, val, mask, *args)

        def block_is_true(self: Any) -> bool:
            return True if self.type.is_block() else interpreted(self)

        tl.core.tensor.__bool__ = block_is_true
        try:
            return original(ptr, val, mask, *args)
        finally:
            tl.core.tensor.__bool__ = interpreted

    return store


def _register_for_cpu(backend: str) -> None:
    """torch_npu registers its scheduling and wrapper for "npu"; the emulation's tensors
    are CPU tensors, so the same pair is registered for "cpu"."""
    from torch._inductor.codegen import common

    npu_backend = common.device_codegens.get("npu")
    if npu_backend is None:
        raise RuntimeError(f"torch_npu's {backend!r} backend registered nothing for 'npu'")
    common.device_codegens["cpu"] = npu_backend
    _lowerings_for_cpu()


def _lowerings_for_cpu() -> None:
    """torch_npu's overriding lowerings dispatch on the device ("npu" picks torch_npu's
    handler, others upstream's). In the emulation CPU tensors stand for NPU tensors, so
    each such dispatcher is replaced by torch_npu's handler."""
    from torch._inductor import lowering

    for target, handler in list(lowering.lowerings.items()):
        device_handler = getattr(handler, "_torch_npu_device_handler", None)
        if device_handler is not None:
            lowering.lowerings[target] = device_handler


def _remove_path(entry: str) -> None:
    with contextlib.suppress(ValueError):
        sys.path.remove(entry)
    for name in [n for n in sys.modules if n == "torchnpugen" or n.startswith("torchnpugen.")]:
        del sys.modules[name]


def _unload(finder: _TorchNpuFinder, ledger: _Ledger, env: dict[str, str]) -> None:
    import torch

    with contextlib.suppress(ValueError):
        sys.meta_path.remove(finder)
    for name in [n for n in sys.modules if n == "torch_npu" or n.startswith("torch_npu.")]:
        del sys.modules[name]
    ledger.restore()
    if hasattr(torch, "npu"):
        with contextlib.suppress(AttributeError):
            delattr(torch, "npu")
    os.environ.clear()
    os.environ.update(env)
    with contextlib.suppress(Exception):
        from torch._inductor.decomposition import fast_random_decomps

        fast_random_decomps.cache_clear()
