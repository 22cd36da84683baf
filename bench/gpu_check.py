"""GPU check + timing for the core issue: RMSNorm / LayerNorm backward at the three core
shapes, correctness vs float64 eager first, then timings beside stock Inductor with
upstream mix-order off and on, and a 2-read-1-write copy as the bandwidth ceiling.

    python bench/gpu_check.py [--out DIR] [--shapes 32768x4096:bf16,...]

Times are medians of triton.testing.do_bench over torch.autograd.grad(y, inputs, dy,
retain_graph=True), so every variant is timed the same way (backward only).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import inductor_ext  # noqa: E402
from inductor_ext.testing.reference import max_rel_err, tolerance  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}
DEFAULT_SHAPES = "32768x4096:bf16,65536x1024:bf16,576000x384:fp32"


def min_bytes(op: str, M: int, N: int, es: int) -> int:
    if op == "rms":
        return 3 * M * N * es + 4 * M + 2 * N * es
    return 3 * M * N * es + 8 * M + 4 * N * es


def make(op, M, N, dtype):
    x = torch.randn(M, N, device="cuda", dtype=dtype, requires_grad=True)
    w = (1 + 0.1 * torch.randn(N, device="cuda", dtype=dtype)).requires_grad_()
    b = torch.randn(N, device="cuda", dtype=dtype, requires_grad=True) if op == "ln" else None
    dy = torch.randn(M, N, device="cuda", dtype=dtype)
    if op == "rms":
        def fn(x, w, b):
            return F.rms_norm(x, (N,), w, 1e-6)
    else:
        def fn(x, w, b):
            return F.layer_norm(x, (N,), w, b, 1e-5)
    return fn, [x, w, b], dy


def variant_options(variant):
    if variant == "inductor_nomix":
        return {"triton.mix_order_reduction": False}
    if variant == "inductor_mix":
        return {"triton.mix_order_reduction": True}
    if variant in ("inductor_ext", "inductor_ext_ascend"):
        return inductor_ext.options()
    raise ValueError(variant)


def run_variant(op, M, N, dtype, variant, ref, fn, inputs, dy):
    torch._dynamo.reset()
    inductor_ext.metrics.reset()
    from torch._inductor import metrics as im
    im.reset()
    params = [t for t in inputs if t is not None]
    if variant == "eager":
        f = fn
    else:
        f = torch.compile(fn, options=variant_options(variant))
    target = "ascend" if variant == "inductor_ext_ascend" else "auto"
    with inductor_ext.config.patch(target=target, always_fuse=target == "ascend"):
        y = f(*inputs)
        grads = torch.autograd.grad(y, params, dy, retain_graph=True)
    errs = [max_rel_err(g, r) for g, r in zip(grads, ref)]
    ok = all(e <= tolerance(g.dtype) for e, g in zip(errs, grads))
    fused = inductor_ext.metrics.mix_order_kernels
    upstream = getattr(im, "codegen_mix_order_reduction", 0)
    ms = do_bench(lambda: torch.autograd.grad(y, params, dy, retain_graph=True),
                  warmup=50, rep=300, return_mode="median")
    return dict(op=op, M=M, N=N, dtype=str(dtype).replace("torch.", ""), variant=variant,
                us=ms * 1e3, TBps=min_bytes(op, M, N, dtype.itemsize) / (ms * 1e-3) / 1e12,
                max_rel_err=max(errs), correct=ok, ext_kernels=fused,
                upstream_mo_kernels=upstream - (fused if variant.startswith("inductor_ext") else 0))


def copy_bandwidth():
    a = torch.randn(32768 * 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn_like(a)
    out = torch.empty_like(a)
    ms = do_bench(lambda: torch.add(a, b, out=out), warmup=50, rep=300, return_mode="median")
    return 3 * a.numel() * 2 / (ms * 1e-3) / 1e12


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--ops", default="rms,ln")
    ap.add_argument("--variants", default="eager,inductor_nomix,inductor_mix,inductor_ext")
    ap.add_argument("--sweep", default="",
                    help="CUDA flavor settings to try for inductor_ext, e.g. "
                         "'programs_per_sm=2|4,elems_per_warp=256|512'")
    args = ap.parse_args()
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    copy_tbps = copy_bandwidth()
    print(f"2-read-1-write bf16 add: {copy_tbps:.3f} TB/s")
    rows = []
    for spec in args.shapes.split(","):
        shape, dt = spec.split(":")
        M, N = (int(v) for v in shape.split("x"))
        dtype = DTYPES[dt]
        for op in args.ops.split(","):
            torch.manual_seed(0)
            fn, inputs, dy = make(op, M, N, dtype)
            params = [t for t in inputs if t is not None]
            up = [None if t is None else t.detach().double().requires_grad_() for t in inputs]
            ref = torch.autograd.grad(fn(*up), [t for t in up if t is not None], dy.double())
            for variant, setting in _variants(args):
                try:
                    with _flavor_setting(setting):
                        row = run_variant(op, M, N, dtype, variant, ref, fn, inputs, dy)
                    if setting:
                        row["variant"] = f"{variant}[{setting}]"
                except Exception as exc:  # keep going: report the failure in the table
                    row = dict(op=op, M=M, N=N, dtype=dt, variant=variant, us=float("nan"),
                               TBps=float("nan"), max_rel_err=float("nan"), correct=False,
                               ext_kernels=-1, upstream_mo_kernels=-1, error=repr(exc)[:200])
                row["copy_frac"] = row["TBps"] / copy_tbps
                inductor_ext.metrics.record_bench(
                    op, f"{M}x{N}", row["dtype"], row["variant"], row["us"], row["TBps"],
                    row["copy_frac"])
                rows.append(row)
                _write_csv(args.out, rows)
                print(f"{op:3s} {M:>7d}x{N:<5d} {row['dtype']:9s} {row['variant']:15s} "
                      f"{row['us']:9.1f} us {row['TBps']:6.3f} TB/s "
                      f"({row['copy_frac']:.2f} of copy) err {row['max_rel_err']:.2e} "
                      f"ok={row['correct']} ext_kernels={row['ext_kernels']} "
                      f"upstream_mo={row['upstream_mo_kernels']} {row.get('error', '')}",
                      flush=True)
            del fn, inputs, dy, ref, up, params
            torch.cuda.empty_cache()


def _variants(args):
    out = [(v, "") for v in args.variants.split(",")]
    if args.sweep:
        import itertools
        keys, values = zip(*(kv.split("=") for kv in args.sweep.split(",")))
        for combo in itertools.product(*(v.split("|") for v in values)):
            out.append(("inductor_ext", ";".join(f"{k}={c}" for k, c in zip(keys, combo))))
    return out


class _flavor_setting:
    """Temporarily set CudaFlavor class attributes (bench-only exploration)."""

    def __init__(self, setting):
        from inductor_ext.codegen.cuda import CudaFlavor
        self.cls = CudaFlavor
        self.items = [kv.split("=") for kv in setting.split(";") if kv]
        self.saved = {}

    def __enter__(self):
        for k, v in self.items:
            self.saved[k] = getattr(self.cls, k)
            setattr(self.cls, k, int(v))

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            setattr(self.cls, k, v)


def _write_csv(out_dir, rows):
    os.makedirs(out_dir, exist_ok=True)
    keys = sorted({k for r in rows for k in r})
    with open(os.path.join(out_dir, "gpu_check.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
