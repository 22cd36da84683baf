"""Generate every fused kernel the Ascend flavor emits for the lowering cases and write each
one (source, signature, constants) as JSON for lower_kernels.py.

Runs in the project's environment (torch + upstream Triton, CPU interpreter):
    TRITON_INTERPRET=1 python tests/ascend/dump_kernels.py OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import inductor_ext  # noqa: E402
from inductor_ext.codegen.row_loop import MixOrderKernelMixin as MixOrderKernel  # noqa: E402
from inductor_ext.interpreter import cpu_interpret  # noqa: E402

OPS = ("rms", "ln", "ln_nobias")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
NS = (128, 768, 4096, 8192, 16384)
ROWS = 64


def cases():
    for op in OPS:
        for dname in DTYPES:
            for N in NS:
                yield op, dname, N


def run_case(op: str, dtype: torch.dtype, N: int) -> None:
    x = torch.randn(ROWS, N, dtype=dtype, requires_grad=True)
    w = torch.randn(N, dtype=dtype, requires_grad=True)
    b = torch.randn(N, dtype=dtype, requires_grad=True) if op == "ln" else None
    if op == "rms":
        def fn(x, w):
            return F.rms_norm(x, (N,), w)
        inputs = [x, w]
    else:
        def fn(x, w, b=None):
            return F.layer_norm(x, (N,), w, b)
        inputs = [x, w] + ([b] if b is not None else [])
    y = torch.compile(fn, dynamic=False)(*inputs)
    torch.autograd.grad(y, inputs, torch.randn_like(x))


def main(out_dir: str) -> int:
    os.makedirs(out_dir, exist_ok=True)
    captured: list[dict] = []
    original = MixOrderKernel.codegen_kernel

    def capture(self, name=None):
        src = original(self, name)
        captured.append({"src": src, "signature": self.triton_meta["signature"],
                         "constants": {"XBLOCK": self.plan.block_m,
                                       **({"R0_BLOCK": self.plan.r0_block}
                                          if self.plan.column_tiled else {})},
                         "plan": {"programs": self.plan.programs,
                                  "column_tiled": self.plan.column_tiled,
                                  "r0_block": self.plan.r0_block,
                                  "block_m": self.plan.block_m,
                                  "ub_bytes": dict(self.plan.extra).get("ub_bytes")}})
        return src

    MixOrderKernel.codegen_kernel = capture
    # Only the generated source matters here: skip running kernels in the interpreter (the
    # outputs are garbage, the shapes that drive the backward compile are not).
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    CachingAutotuner.run = lambda self, *args, **kwargs: None
    declined = []
    with cpu_interpret(), torch._inductor.config.patch(inductor_ext.options()), \
            inductor_ext.config.patch(target="ascend", always_fuse=True):
        for op, dname, N in cases():
            torch._dynamo.reset()
            inductor_ext.metrics.reset()
            before = len(captured)
            run_case(op, DTYPES[dname], N)
            if len(captured) == before:
                declined.append((op, dname, N, dict(inductor_ext.metrics.rejected_pairs)))
            for i, k in enumerate(captured[before:]):
                k["case"] = f"{op}-{dname}-N{N}" + (f"-{i}" if i else "")
                with open(os.path.join(out_dir, k["case"] + ".json"), "w") as f:
                    json.dump(k, f)
    for op, dname, N, why in declined:
        print(f"NOT EMITTED {op}-{dname}-N{N}: declined {why}")
    print(f"dumped {len(captured)} kernels to {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
