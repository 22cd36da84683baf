"""Lower dumped kernels with triton-ascend's own front end: make_ttir, then ttir_to_linalg
(the bundled triton-adapter-opt). Runs in the triton-ascend venv (no torch needed).

    python tests/ascend/lower_kernels.py DUMP_DIR

Prints one line per kernel and ends with `N passed, N failed`. `lower_function` is also
what check_npu.py lowers torch_npu-class kernels with, for either SoC.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import tempfile
import traceback

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler.compiler import ASTSource, make_backend

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET = GPUTarget("npu", "Ascend910B3", 0)
ADAPTER_METADATA = {"enable_nd2nz_on_vector": False, "enable_select_analysis": True,
                    "compile_on_910_95": False, "force_simt_template": False}
#: SoC -> (triton-ascend target arch, NPUOptions that differ from the A2/A3 defaults).
#: Ascend950 ("910_95" in triton-ascend) compiles with compile_on_910_95: select analysis
#: on and no sub-block binding, as triton-ascend's own defaults are on such a device.
SOC_OPTIONS = {
    "910B3": ("Ascend910B3", {}),
    "950": ("Ascend950PR_9599", {"compile_on_910_95": True, "enable_select_analysis": True,
                                 "enable_auto_bind_sub_block": False}),
}


def lower_function(fn, signature: dict, constants: dict, soc: str = "910B3",
                   options: dict | None = None, name: str = "triton_") -> tuple[str, str]:
    """(TTIR, Linalg MLIR) of a @triton.jit function through triton-ascend's front end:
    make_ir, its ttir stage, then ttir_to_linalg (the bundled triton-adapter-opt), with the
    NPUOptions of the SoC (plus `options`, e.g. multibuffer) as its stage metadata."""
    arch, soc_options = SOC_OPTIONS[soc]
    backend = make_backend(GPUTarget("npu", arch, 0))
    opts = backend.parse_options({**soc_options, **(options or {})})
    stages: dict = {}
    backend.add_stages(stages, opts)
    context = triton._C.libtriton.ir.context()
    triton._C.libtriton.ir.load_dialects(context)
    backend.load_dialects(context)
    src = ASTSource(fn, signature=signature, constants=constants)
    mod = src.make_ir(opts, backend.get_codegen_implementation(), backend.get_module_map(),
                      context)
    metadata = {**opts.__dict__, "name": name,
                "hash": f"{name}-{soc}-{sorted(constants.items())}"}
    ttir = stages["ttir"](mod, metadata)
    linalg = str(stages["ttadapter"](ttir, metadata))
    if "func.func" not in linalg:
        raise RuntimeError("no func.func in the Linalg output")
    return str(ttir), linalg


def kernel_module(src: str, workdir: str, stem: str):
    """A module holding only the @triton.jit function, with shims for Inductor's helpers."""
    body = src[src.index("@triton.jit"):]
    body = body[:body.rfind("'''")] if "'''" in body else body
    body = body.replace("Placeholder.KERNEL_NAME", f"triton_mix_order_{stem}")
    text = ("import triton\nimport triton.language as tl\n"
            f"import sys\nsys.path.insert(0, {HERE!r})\n"
            "import inductor_shims as triton_helpers\n"
            "from inductor_shims import libdevice, tl_math\n\n" + body)
    path = os.path.join(workdir, f"{stem}.py")
    with open(path, "w") as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location(stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    name = re.search(r"def (\w+)\(", body).group(1)
    return getattr(mod, name)


def lower(case: dict, workdir: str, stem: str) -> tuple[str, str]:
    fn = kernel_module(case["src"], workdir, stem)
    signature = {k: v for k, v in case["signature"].items() if v != "constexpr"}
    constants = dict(case["constants"])
    src = ASTSource(fn, signature=signature, constants=constants)
    backend = make_backend(TARGET)
    options = backend.parse_options({})
    stages: dict = {}
    backend.add_stages(stages, options)
    context = triton._C.libtriton.ir.context()
    triton._C.libtriton.ir.load_dialects(context)
    backend.load_dialects(context)
    codegen_fns = backend.get_codegen_implementation()
    module_map = backend.get_module_map()
    mod = src.make_ir(options, codegen_fns, module_map, context)
    metadata = {"name": src.name, "hash": stem, **ADAPTER_METADATA}
    ttir = stages["ttir"](mod, metadata)
    linalg = stages["ttadapter"](ttir, metadata)
    text = str(linalg)
    if "func.func" not in text:
        raise RuntimeError("no func.func in the Linalg output")
    return str(ttir), text


def main(dump_dir: str) -> int:
    files = sorted(f for f in os.listdir(dump_dir) if f.endswith(".json"))
    passed = failed = 0
    with tempfile.TemporaryDirectory() as workdir:
        for i, name in enumerate(files):
            with open(os.path.join(dump_dir, name)) as f:
                case = json.load(f)
            stem = f"k{i}"
            try:
                ttir, linalg = lower(case, workdir, stem)
                ops = len(re.findall(r"linalg\.\w+", linalg))
                tiled = "column-tiled" if case["plan"].get("column_tiled") else "persistent"
                r0_block = case["plan"]["r0_block"]
                print(f"PASS {case['case']:24s} {tiled:12s} R0_BLOCK={r0_block:<5d} "
                      f"BLOCK_M={case['plan']['block_m']:<3d} "
                      f"programs={case['plan']['programs']:<3d} UB={case['plan']['ub_bytes']} B"
                      f"  ttir {len(ttir.splitlines())} lines, linalg ops {ops}")
                passed += 1
            except Exception as exc:
                print(f"FAIL {case['case']}: {type(exc).__name__}: {str(exc)[:300]}")
                traceback.print_exc(limit=3, file=sys.stderr)
                failed += 1
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
