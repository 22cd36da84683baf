"""Unified Buffer plan of a lowered kernel, by bishengir-compile (ascendnpu-ir 1.2.0).

bishengir-compile runs HFusion and HIVM on a kernel's Linalg MLIR (triton-ascend's
ttadapter output), including the memory planning that places every on-chip buffer at a
fixed UB offset, and then stops where CANN's `hivmc` is missing. With `--save-temps` the
planned module is kept as `module.hivm.opt.mlir`: each UB buffer is a
`hivm.hir.pointer_cast(%cOFFSET_i64[, ...]) : memref<SHAPE x T, ...address_space<ub>>`.
The high-water is the largest offset + size over them. A plan that does not fit fails
with "ub overflow, requires N bits while M bits available"; that is reported as overflow.

No torch here: runs in any venv with the ascendnpu-ir package.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.support, run alone
from tests.support import npu_socs  # noqa: E402

#: Options beside the common ones, per UB class (each has its own bishengir build):
#: Ascend950 takes the -a5 build (its HIVM is register-based; no --enable-hivm-compile).
_CLASS_OPTIONS = {
    "A2A3": ["--enable-auto-bind-sub-block=True", "--enable-hivm-compile=true"],
    "950": ["--enable-auto-bind-sub-block=False"],
}
#: SoC -> (bishengir binary, --target, options beside the common ones), for every SoC of
#: the table (tests/support/npu_socs.py) that is a bishengir target, by name and alias.
SOCS = {name: (soc.bishengir_binary, soc.bishengir_target, _CLASS_OPTIONS[soc.ub_class])
        for name, soc in {**npu_socs.BY_NAME,
                          **{a: npu_socs.BY_NAME[n] for a, n in npu_socs.ALIASES.items()}
                          }.items() if soc.bishengir_target}
#: UB bytes per SoC: the budget a plan must fit, bishengir's own (its target spec's
#: UB_SIZE; on Ascend950 248 KiB, below the 256 KiB torch_npu's config reports).
UB_BYTES = {name: npu_socs.get(name).hw_ub_bytes for name in SOCS}


def lowering_soc(soc: str) -> str:
    """The key of tests/ascend/lower_kernels.py's SOC_OPTIONS for a SoC of the table:
    triton-ascend's front end differs only between the UB classes (Ascend950 compiles
    with compile_on_910_95), so every A2/A3 SoC lowers as the 910B3 does."""
    return "950" if npu_socs.get(soc).ascend950 else "910B3"
#: --enable-tuning-mode: one memory plan, no retry with less multi-buffering when it does
#: not fit (a default compile retries), so a config passes only if it fits as asked; it is
#: also what keeps an -a5 run at half a second instead of several.
_COMMON = ["--enable-hfusion-compile=true", "--enable-triton-kernel-compile=true",
           "--enable-tuning-mode"]
_DTYPE_BYTES = {"f64": 8, "i64": 8, "f32": 4, "i32": 4, "f16": 2, "bf16": 2, "i16": 2,
                "i8": 1, "i1": 1}
_POINTER_CAST = re.compile(r"hivm\.hir\.pointer_cast\(([^)]*)\)\s*:\s*memref<([^>]*)>")
#: An i64 constant in either form the plan is printed in: `arith.constant 7 : i64` (A2/A3)
#: or, after the register-based lowering of the -a5 build, `llvm.mlir.constant(7 : i64)`.
_I64_CONST = re.compile(
    r"(%[\w]+) = (?:arith\.constant (\d+) : i64|llvm\.mlir\.constant\((\d+) : i64\))")
_FUNC = re.compile(r"^\s*func\.func ", re.M)
_OVERFLOW = re.compile(r"ub overflow, requires (\d+) bits while (\d+) bits available")


@dataclasses.dataclass
class UbPlan:
    """What bishengir planned: the UB high-water in bytes, or the overflow it reported."""

    soc: str
    high_water: int | None = None  # bytes
    overflow_bits: int | None = None  # requested bits, when the plan did not fit
    buffers: int = 0
    error: str = ""

    @property
    def overflow(self) -> bool:
        return self.overflow_bits is not None

    @property
    def ok(self) -> bool:
        return self.high_water is not None and not self.overflow and not self.error


def bishengir_path(name: str) -> str | None:
    """The binary from the ascendnpu-ir package of this interpreter (or on PATH)."""
    for root in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]):
        cand = Path(root) / "ascendnpuir" / "bin" / name
        if cand.is_file():
            return str(cand)
    return shutil.which(name)


def high_water(hivm_text: str) -> tuple[int, int]:
    """(largest offset + size in bytes, number of UB buffers) of a planned HIVM module.
    Offsets are SSA constants, so they are looked up within each function."""
    top = count = 0
    starts = [m.start() for m in _FUNC.finditer(hivm_text)] or [0]
    for begin, end in zip(starts, [*starts[1:], len(hivm_text)]):
        func_top, func_count = _func_high_water(hivm_text[begin:end])
        top, count = max(top, func_top), count + func_count
    return top, count


def _func_high_water(text: str) -> tuple[int, int]:
    consts = {m.group(1): int(m.group(2) or m.group(3)) for m in _I64_CONST.finditer(text)}
    top = count = 0
    for m in _POINTER_CAST.finditer(text):
        memref = m.group(2)
        if "address_space<ub" not in memref:
            continue
        *dims, dtype = memref.split(",")[0].strip().split("x")
        size = _DTYPE_BYTES[dtype]
        for dim in dims:
            size *= int(dim)  # planned buffers are static; a '?' raises
        for arg in (a.strip() for a in m.group(1).split(",")):
            if arg not in consts:
                raise ValueError(f"UB offset {arg!r} is not an i64 constant")
            top = max(top, consts[arg] + size)
            count += 1
    return top, count


def plan(linalg_path: str, soc: str, multibuffer: bool, workdir: str,
         timeout: float = 300) -> UbPlan:
    """Run bishengir-compile on one Linalg module and read its UB plan."""
    binary, target, extra = SOCS[soc]
    exe = bishengir_path(binary)
    if exe is None:
        return UbPlan(soc, error=f"{binary} not found (pip install ascendnpu-ir==1.2.0)")
    os.makedirs(workdir, exist_ok=True)
    cmd = [exe, linalg_path, f"--target={target}", f"--enable-auto-multi-buffer={multibuffer}",
           *extra, *_COMMON, f"--save-temps={workdir}", "-o", os.path.join(workdir, "kernel")]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return UbPlan(soc, error=f"bishengir-compile timed out after {timeout} s")
    log = run.stdout + run.stderr
    overflow = _OVERFLOW.search(log)
    if overflow:
        return UbPlan(soc, overflow_bits=int(overflow.group(1)))
    planned = Path(workdir) / "module.hivm.opt.mlir"
    if not planned.is_file():
        tail = " | ".join(line for line in log.splitlines()[-4:] if line.strip())
        return UbPlan(soc, error=f"no planned module (exit {run.returncode}): {tail[:300]}")
    try:
        top, count = high_water(planned.read_text())
    except (ValueError, KeyError) as exc:
        return UbPlan(soc, error=f"unreadable plan: {exc}")
    if count == 0:
        return UbPlan(soc, error="no UB buffer in the planned module")
    return UbPlan(soc, high_water=top, buffers=count)
