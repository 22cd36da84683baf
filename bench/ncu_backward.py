"""Hardware counters of one backward call per case: run under Nsight Compute, which profiles
only the timed call of each case (between cudaProfilerStart and Stop), not the compile and
autotuning before it.

    M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
    M=$M,dram__throughput.avg.pct_of_peak_sustained_elapsed
    M=$M,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
    M=$M,launch__grid_size,launch__block_size,launch__occupancy_limit_registers
    M=$M,launch__waves_per_multiprocessor
    M=$M,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct
    ncu --clock-control none --profile-from-start off --csv --page raw --metrics $M \\
        python bench/ncu_backward.py --cases ln:8192x2560:bf16,rms:2048x24576:bf16:fp32 > ncu.csv

What a main kernel's warps wait on, and its L2 bytes (`roofline.py`'s `held:` lines): add
`--section WarpStateStats --section SchedulerStats` and `lts__t_bytes.sum` to the metrics.

A case is op:MxN:dtype, or op:MxN:dtype:wdtype for weights in another dtype (fp32 weights
under 16-bit x, as the sweep's grid draws them); its printed line then ends in `w<wdtype>`.

Each case is printed as it is timed, so the kernels of the CSV follow the printed order.
Why a shape stays below the copy bandwidth: registers per thread, waves, achieved warps and
DRAM throughput of the main kernel (the readings so far: bench/NOTES.md).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from common import (  # noqa: E402
    DTYPE_NAMES,
    apply_setting,
    compile_options,
    copy_add,
    description,
    make_problem,
    parse_shapes,
    require_cuda,
    warmed_backward,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=description(__doc__, "Needs a CUDA GPU, and runs under Nsight Compute: "
                                "ncu --profile-from-start off --csv --page raw --metrics M "
                                "python bench/ncu_backward.py ... (this file's docstring "
                                "lists the metrics M)."))
    ap.add_argument("--cases", default="ln:8192x2560:bf16,rms:8192x2560:bf16",
                    help="op:MxN:dtype[:wdtype],... (op rms or ln; wdtype: the weights', "
                         "default dtype)")
    ap.add_argument("--variants", default="inductor_ext,inductor_mix",
                    help="compiled variants (bench_norm_bwd.py's names), each case in turn; "
                         "'copy' profiles the same-size add instead")
    ap.add_argument("--setting", default="",
                    help="CUDA tuning knobs for every compile, e.g. 'prefetch_min_rows_alone=0'")
    args = ap.parse_args(argv)
    apply_setting(args.setting)
    require_cuda("ncu_backward.py")
    cases = [parse_case(spec) for spec in filter(None, args.cases.split(","))]
    for variant in filter(None, args.variants.split(",")):
        for op, M, N, dtype, wdtype in cases:
            name = str(dtype).removeprefix("torch.")
            if variant == "copy":  # the add reads and writes x's dtype only
                profile_copy(M * N, dtype)
                print(f"copy {op} {M}x{N} {name}", flush=True)
                continue
            torch._dynamo.reset()
            fn, inputs, dy = make_problem(op, M, N, dtype, wdtype=wdtype)
            wrt = [t for t in inputs if t is not None]
            with torch._inductor.config.patch(compile_options(variant)):
                step = warmed_backward(torch.compile(fn), inputs, wrt, dy, 3)
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            step()
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            weights = "" if wdtype == dtype else f" w{str(wdtype).removeprefix('torch.')}"
            print(f"{variant} {op} {M}x{N} {name}{weights}", flush=True)
    return 0


def parse_case(spec: str) -> tuple[str, int, int, torch.dtype, torch.dtype]:
    """'op:MxN:dtype[:wdtype]' -> (op, M, N, dtype, weights' dtype)."""
    op, _, rest = spec.partition(":")
    if op not in ("rms", "ln"):
        raise SystemExit(f"ncu_backward: {spec!r}: the op is rms or ln")
    shape, dtype, *weights = rest.split(":")
    if len(weights) > 1:
        raise SystemExit(f"ncu_backward: {spec!r} is not op:MxN:dtype[:wdtype]")
    ((M, N, dt),) = parse_shapes(f"{shape}:{dtype}")
    if weights and weights[0] not in DTYPE_NAMES:
        raise SystemExit(f"ncu_backward: {spec!r}: unknown weight dtype {weights[0]!r}; "
                         f"one of {', '.join(DTYPE_NAMES)}")
    return op, M, N, dt, DTYPE_NAMES[weights[0]] if weights else dt


def profile_copy(numel: int, dtype: torch.dtype) -> None:
    """The same-size add the roofline's limit starts from (x + dy into a third tensor of
    the case's size), profiled once after a warm-up call."""
    add = copy_add(numel, dtype)
    add()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    add()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    sys.exit(main())
