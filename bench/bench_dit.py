"""DiT blocks' training step over a grid of batch x tokens x width, stock / upstream_off /
inductor_ext: the adaLN-modulated norms' segmented d(scale) / d(shift) (issue 24).

    python bench/bench_dit.py [--sizes 2x1024x1152,8x4096x3072] [--layers 1] [--csv F]
    TRITON_INTERPRET=1 python bench/bench_dit.py --device cpu --sizes 2x12x32   # smoke

Each size B x T x N runs `bench_models.py --models dit` (same variants, gradient check
against eager, CUDA-graph timing in turns) on a DiT stack of `--layers` blocks with heads
of N / 16 channels (DiT-XL: 1152 = 16 x 72) and an MLP of 4 N; the rows of all sizes go
to one CSV with the size in the model column ("dit 2x1024x1152").
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
import bench_models  # noqa: E402
from common import check_device, description  # noqa: E402

#: B in 2..8, T in 1024..4096, N from DiT-XL's 1152 to 3072.
DEFAULT_SIZES = ("2x1024x1152,4x1024x1152,8x1024x1152,2x4096x1152,4x2048x2048,"
                 "8x2048x2048,2x4096x3072,8x1024x3072")


def parse_sizes(spec: str) -> list[tuple[int, int, int]]:
    """'2x1024x1152,...' -> [(B, T, N), ...]; N must split into 16 heads."""
    out = []
    for item in spec.split(","):
        parts = item.split("x")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise SystemExit(f"--sizes: {item!r} is not BxTxN")
        B, T, N = (int(p) for p in parts)
        if N % 16:
            raise SystemExit(f"--sizes: N={N} does not split into 16 heads")
        out.append((B, T, N))
    return out


def size_spec(B: int, T: int, N: int, layers: int) -> str:
    """The bench_models --size of one DiT point."""
    return f"batch={B},seq={T},hidden={N},heads=16,ffn={4 * N},layers={layers}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=description(
        __doc__, "Needs a CUDA GPU for --device cuda (the default); --device cpu runs on "
        "CPU under TRITON_INTERPRET=1 (a smoke run: gradients and counts, no times)."))
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda",
                    help="bench_models.py --device (cpu: TRITON_INTERPRET=1, no times)")
    ap.add_argument("--sizes", default=DEFAULT_SIZES,
                    help="comma-separated BxTxN (batch x tokens x width; N a multiple of "
                    "16)")
    ap.add_argument("--layers", type=int, default=1, help="DiT blocks per model")
    ap.add_argument("--variants", default=",".join(bench_models.VARIANTS),
                    help="bench_models.py --variants: of "
                    f"{', '.join(bench_models.ALL_VARIANTS)}")
    ap.add_argument("--dtype", default=None,
                    help="bench_models.py --dtype (default: bf16 on cuda, fp32 on cpu)")
    ap.add_argument("--rounds", type=int, default=31, help="bench_models.py --rounds")
    ap.add_argument("--csv", default="", metavar="FILE",
                    help="the rows of every size, the size in the model column")
    args = ap.parse_args(argv)
    check_device("bench_dit.py", args.device, "--device cpu --sizes 2x12x32")
    sizes = parse_sizes(args.sizes)
    rows: list[dict[str, Any]] = []
    for B, T, N in sizes:
        part = f"{args.csv}.part" if args.csv else ""
        forwarded = ["--device", args.device, "--models", "dit", "--variants", args.variants,
                     "--size", size_spec(B, T, N, args.layers), "--rounds", str(args.rounds)]
        if args.dtype:
            forwarded += ["--dtype", args.dtype]
        if part:
            forwarded += ["--csv", part]
        bench_models.main(forwarded)
        if part:
            import csv

            with open(part, newline="") as f:
                for row in csv.DictReader(f):
                    row["model"] = f"dit {B}x{T}x{N}"
                    rows.append(row)
            os.remove(part)
            bench_models.write_csv(args.csv, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
