"""Roofline report of a norm-backward sweep (issue 42): per shape, the bytes a backward must
move, the share of the same run's copy bandwidth inductor_ext reaches, the bar it must
meet and where the rest goes; then the distribution over all shapes, as text and a plot.

    python bench/roofline.py bench/results/roofline_random_h100.csv [MORE.csv ...]
        [--plot bench/results/roofline_random_h100.png] [--csv roofline_table.csv]
        [--markdown roofline_table.md] [--against run|shape] [--ncu NCU.csv ...]

Reads the CSVs of `sweep_cost_model.py --grid random|bench` (GPU runs; a case in a later
file replaces the same case in an earlier one) and needs no GPU. A shape's copy fraction
is min_bytes / time / copy bandwidth: the run's copy (`copy_tbps`, a 2-read-1-write bf16
add of 32768x4096) by default, the same add at the shape's size with `--against shape`
(and where a CSV has no `copy_tbps`: the calibration sweeps before issue 42, such as
cost_sweep_h100.csv, recorded only the same-size add).
The bar is 0.92 for M*N >= 16M, 0.85 for 4M <= M*N < 16M (none below). Where the rest
goes, in microseconds of ext's time beyond the copy-speed time of min_bytes: the fp32
workspace's write and read-back at copy speed (the rows the picked config used), the
final step (how long the backward runs past the fused kernel's end, from profiled
replays), and the remainder in the fused kernel itself; with its plan
(programs, rows per block, row tile, column tiling) and the picked config's registers,
resident programs per SM, waves and how full they are. A shape below its bar gets its
measured causes (`causes`), each with its number, and the summary counts them. Each shape's
`limit_frac` is the best a backward could reach by what was measured: the same-size add
plus the least time any backward has spent past it (`FOLD_FLOOR_US`); where it is below
the bar, the bar is out of reach, and `ext_of_limit` says how close ext is to it.
`--ncu` adds Nsight Compute's counters from `ncu_backward.py` runs: the same-size add's
kernel (variant `copy`) and ext's longest kernel (variant `inductor_ext`, matched by the
weights' dtype too: ncu_backward.py's `op:MxN:dtype:wdtype`). On a declined shape ext's
kernels are stock's, and the line says so. Where a file also has DRAM and L2 bytes and the
WarpStateStats section, the report has them too, and each shape below its bar gets a
`held:` line (`ncu_bound`): what the counters say holds it, or that they name nothing. A
later --ncu file's case replaces an earlier one's.
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
import math
import os
import pathlib
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import CPU_ONLY, DTYPES, description, write_rows  # noqa: E402
from fit_cost_model import load  # noqa: E402  (a later CSV's case replaces an earlier one's)

#: ext's ratios to these (their time / ext's; sweep_cost_model.RATIO_BASES, not imported:
#: that module sets Inductor's cache dir as it loads).
RATIO_BASES = ("stock", "upstream_off", "liger")

#: (smallest M*N, copy fraction ext must reach there), largest first.
THRESHOLDS = ((16 * 2**20, 0.92), (4 * 2**20, 0.85))
#: The least time any measured backward takes past the same-size add, in us (rms
#: 8289x1536 fp32 on the H100, the random grid; hand-written kernels take longer for their
#: column sums' workspace and fold). A shape's `limit_frac` is its copy-speed time over
#: the add's time plus this: what a backward that also folds its column sums across
#: programs could reach at best.
FOLD_FLOOR_US = 2.3
#: The variants besides ext whose fractions the plot shows.
OTHERS = ("stock", "upstream_off", "fused", "liger")
#: The plan columns a shape's line and table carry (sweep column -> table column).
PLAN = {"ext_programs": "programs", "ext_launched_programs": "launched",
        "ext_column_groups": "groups", "ext_block_m": "block_m",
        "ext_r0_block": "r0_block", "ext_column_tiled": "column_tiled",
        "ext_register_tiles": "register_tiles", "ext_final_step": "final_step",
        "ext_xblock": "XBLOCK", "ext_num_warps": "warps", "ext_n_regs": "regs",
        "ext_n_spills": "spills", "ext_resident_per_sm": "per_sm", "ext_waves": "waves",
        "ext_wave_fill": "wave_fill"}


#: Nsight Compute metrics the report keeps (ncu_backward.py's) -> their name here.
NCU_METRICS = {"gpu__time_duration.sum": "us",
               "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
               "sm__warps_active.avg.pct_of_peak_sustained_active": "warps_pct"}
#: Launch counters read where a file has them (older runs may not): the config Nsight
#: Compute's own compile ran, which its autotuner may have picked differently.
NCU_LAUNCH = {"launch__registers_per_thread": "regs", "launch__block_size": "threads",
              "launch__grid_size": "grid"}
#: Time units Nsight Compute writes, in us.
NCU_UNITS = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}
#: DRAM traffic counters read where a file has them, summed over a case's kernels.
NCU_BYTES = ("dram__bytes_read.sum", "dram__bytes_write.sum")
#: L2 traffic (every request, hit or miss), summed over a case's kernels where a file has it.
NCU_L2_BYTES = "lts__t_bytes.sum"
#: Byte units Nsight Compute writes, in MB.
NCU_BYTE_UNITS = {"byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3, "Tbyte": 1e6}
#: The WarpStateStats section's stall counters (cycles a warp spent stalled for the reason,
#: per instruction issued): their shares of the sum say what a kernel's warps wait on.
NCU_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio$")
#: Stall reasons -> what they wait on, in the report's words.
STALL_WORDS = {"long_scoreboard": "global loads", "barrier": "barriers",
               "short_scoreboard": "shared memory", "selected": "issuing",
               "not_selected": "another warp's issue", "wait": "fixed latency",
               "lg_throttle": "the load queue", "mio_throttle": "the MIO queue",
               "math_pipe_throttle": "math pipes", "dispatch_stall": "dispatch",
               "no_instruction": "instruction fetch", "drain": "stores draining"}
#: L2 traffic over the least bytes at and past which a column-tiled row's second pass
#: reads L2, not L1: an untiled row's bytes pass L2 about 1.5 times (reads, writes and
#: the workspace), a row read twice through it about 2.5 times or more (bench/NOTES.md).
L2_SECOND_PASS = 2.0
#: The stall reasons a shape's line names: the largest ones, at least this share each.
STALL_SHARE = 0.15
#: The line ncu_backward.py prints after each case it profiled: variant, op, M, N, x's
#: dtype, and `w<dtype>` where the weights' differs.
NCU_CASE = re.compile(r"^(\S+) (rms|ln) (\d+)x(\d+) (\w+)(?: w(\w+))?$")
#: torch's dtype names (ncu_backward.py's lines) -> the sweep's.
SWEEP_DTYPE = {str(dtype).removeprefix("torch."): name for name, dtype in DTYPES.items()}


def ncu_value(cell: object) -> float:
    """A number as Nsight Compute's CSV writes it (thousands separated by commas)."""
    return float(str(cell).replace(",", ""))


def ncu_cases(path: str) -> dict[tuple[str, str, int, int, str, str], dict[str, float]]:
    """(variant, op, M, N, dtype, weights' dtype) -> its longest kernel's counters (`us`,
    `dram_pct`, `warps_pct`), its kernels' summed time (`kernels_us`), DRAM traffic
    (`dram_MB`, read and written, where the file has it), L2 traffic (`l2_MB`) and the
    longest kernel's stall reasons (`stalls`, reason -> cycles per instruction issued)
    where the file has them, and count, from one
    `ncu --csv --page raw` output of ncu_backward.py (its case lines and the CSV in one
    file). Kernels follow the cases in order: a `copy` case ran its add's one kernel, and
    every other case of a file must have run the same number of kernels, or the file is
    refused."""
    with open(path) as f:
        lines = f.read().splitlines()
    labels = [m.groups() for line in lines if (m := NCU_CASE.match(line.strip()))]
    table = list(csv.DictReader(io.StringIO("\n".join(
        line for line in lines if line.startswith('"')))))
    units = next((row for row in table if not row.get("ID")), {})
    kernels = [row for row in table if str(row.get("ID", "")).isdigit()]
    copies = sum(label[0] == "copy" for label in labels)
    compiled = len(labels) - copies
    if not labels or (len(kernels) - copies) % max(compiled, 1) \
            or (not compiled and len(kernels) != copies):
        raise ValueError(f"{path}: {len(kernels)} kernels for {len(labels)} cases; each case "
                         "but a copy must have run the same number of kernels")
    per = (len(kernels) - copies) // max(compiled, 1)
    scale = NCU_UNITS.get(units.get("gpu__time_duration.sum", ""), 1e-3)
    out = {}
    start = 0
    for variant, op, M, N, dtype, wdtype in labels:
        count = 1 if variant == "copy" else per
        counted = [{**{name: ncu_value(k[metric]) * (scale if name == "us" else 1.0)
                       for metric, name in NCU_METRICS.items()},
                    **{name: ncu_value(k[metric])
                       for metric, name in NCU_LAUNCH.items() if k.get(metric)}}
                   for k in kernels[start:start + count]]
        start += count
        mine = kernels[start - count:start]
        traffic = [ncu_value(k[metric]) * NCU_BYTE_UNITS.get(units.get(metric, ""), 1e-6)
                   for k in mine for metric in NCU_BYTES if k.get(metric)]
        l2 = [ncu_value(k[NCU_L2_BYTES]) * NCU_BYTE_UNITS.get(units.get(NCU_L2_BYTES, ""), 1e-6)
              for k in mine if k.get(NCU_L2_BYTES)]
        longest = max(range(count), key=lambda i: counted[i]["us"])
        main = counted[longest]
        stalls = {m.group(1): ncu_value(value) for column, value in mine[longest].items()
                  if (m := NCU_STALL.match(column)) and value}
        x_dtype = SWEEP_DTYPE.get(dtype, dtype)
        w_dtype = x_dtype if wdtype is None else SWEEP_DTYPE.get(wdtype, wdtype)
        out[(variant, op, int(M), int(N), x_dtype, w_dtype)] = {
            **main, "kernels_us": sum(k["us"] for k in counted), "kernels": count,
            "dram_MB": sum(traffic) if traffic else math.nan,
            **({"l2_MB": sum(l2)} if l2 else {}), **({"stalls": stalls} if stalls else {})}
    return out


def origins(paths: list[str]) -> dict[str, str]:
    """Each case's file: the last of `paths` holding it (`load`'s row is that file's)."""
    out: dict[str, str] = {}
    for path in paths:
        with open(path, newline="") as f:
            out.update((row["case"], path) for row in csv.DictReader(f))
    return out


def reference(rows: list[dict], against: str, origin: dict[str, str]) -> tuple[str, str]:
    """(the copy bandwidth the fractions are taken against, '' or why the rows give no
    report). Calibration sweeps older than `--grid random` (cost_sweep_h100.csv) have no
    `copy_tbps`, the run's copy bandwidth, only each shape's same-size add: the report
    falls back to that (`--against shape`). A CPU sweep has no times at all."""
    def files(selected: list[dict]) -> str:
        return ", ".join(sorted({origin.get(row["case"], "?") for row in selected}))

    if not any(number(row.get("ext_us")) > 0 for row in rows):
        return against, (f"no case in {files(rows)} has ext's time (ext_us): the report "
                         "needs a GPU run of sweep_cost_model.py with ext among its "
                         "--variants (a CPU run times nothing)")
    lacking = [row for row in rows if not number(row.get("copy_tbps")) > 0]
    if against == "shape" or not lacking:
        return against, ""
    if all(number(row.get("shape_copy_tbps")) > 0 for row in rows):
        return "shape", (f"{files(lacking)} has no copy_tbps (the run's copy bandwidth, "
                         "which that sweep predates), so each shape's same-size add is the "
                         "reference, as with --against shape")
    return against, (f"{files(lacking)} has no copy bandwidth (copy_tbps or shape_copy_tbps) "
                     "to take fractions of: the report needs a GPU run of "
                     "sweep_cost_model.py")


def threshold(numel: int) -> float | None:
    """The copy fraction a shape of `numel` elements must reach (None: no bar)."""
    for least, bar in THRESHOLDS:
        if numel >= least:
            return bar
    return None


def number(value: object) -> float:
    """A CSV cell as a float; NaN where it is empty or not a number."""
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def fraction(row: dict, variant: str, against: str) -> float:
    """`variant`'s copy fraction in a sweep row: min_bytes / time / copy bandwidth."""
    us = number(row.get(f"{variant}_us"))
    copy = number(row.get("copy_tbps" if against == "run" else "shape_copy_tbps"))
    if not us > 0 or not copy > 0:
        return math.nan
    return number(row["min_bytes"]) / (us * 1e-6) / (copy * 1e12)


def rows_used(row: dict) -> float:
    """Share of the workspace's rows the picked config writes and the final step reads:
    with the generated final step, only the launched programs' rows (a config may launch
    fewer programs than the workspace has rows); with the ATen one, every row."""
    launched = number(row.get("ext_launched_programs"))
    programs = number(row.get("ext_programs")) * max(1.0, number(row.get("ext_column_groups")))
    if row.get("ext_final_step") != "generated" or not launched > 0 or not programs > 0:
        return 1.0
    return min(1.0, launched / programs)


def declined(row: dict) -> bool:
    """Whether ext ran stock's kernels: no fused kernel planned, or in a sweep before that
    column (a calibration sweep) the cost model's recorded verdict."""
    planned = number(row.get("ext_planned_kernels"))
    if not math.isnan(planned):
        return planned == 0
    return (row.get("model_fuses") or row.get("ext_model_fuses")) == "False"


def shape_row(row: dict, against: str = "run", ncu: dict | None = None) -> dict:
    """One shape of the report: sizes, min MB, ext's copy fraction, its bar and verdict,
    ext's ratios to the other variants, where ext's time beyond copy speed goes, and the
    plan facts; `<variant>_frac` for each other variant timed; Nsight Compute's counters
    of the same-size add and of ext's longest kernel where `ncu` (`ncu_cases`) has them."""
    M, N = int(row["M"]), int(row["N"])
    numel = M * N
    min_b = number(row["min_bytes"])
    frac = fraction(row, "ext", against)
    bar = threshold(numel)
    out: dict = {"case": row["case"], "op": row["op"], "M": M, "N": N,
                 "dtype": row["dtype"], "param_dtype": row.get("wdtype", row["dtype"]),
                 "numel": numel, "min_MB": round(min_b / 1e6, 3),
                 "ext_frac": round(frac, 4), "threshold": bar if bar is not None else "",
                 # The cost model declined the pair: stock's kernels ran under ext.
                 "declined": declined(row),
                 "verdict": ("n/a" if bar is None or math.isnan(frac)
                             else "pass" if frac >= bar else "FAIL")}
    ext_us = number(row.get("ext_us"))
    for base in RATIO_BASES:
        out[f"ext_over_{base}"] = round(number(row.get(f"{base}_us")) / ext_us, 4)
    for variant in OTHERS:
        out[f"{variant}_frac"] = round(fraction(row, variant, against), 4)
    copy = number(row.get("copy_tbps" if against == "run" else "shape_copy_tbps"))
    ideal = min_b / (copy * 1e12) * 1e6 if copy > 0 else math.nan
    ws = number(row.get("ext_workspace_bytes")) * rows_used(row)
    ws_us = 2 * ws / (copy * 1e12) * 1e6 if copy > 0 and ws >= 0 else math.nan
    # A declined shape runs stock's kernels: no final step of ours to time.
    final = number(row.get("ext_final_us")) if not out["declined"] else math.nan
    gap = ext_us - ideal
    shape_copy = number(row.get("shape_copy_tbps"))
    limit = (ideal / (min_b / (shape_copy * 1e12) * 1e6 + FOLD_FLOOR_US)
             if shape_copy > 0 else math.nan)
    out.update(limit_frac=round(limit, 4), ext_of_limit=round(frac / limit, 4))
    out.update(ext_us=round(ext_us, 2), copy_speed_us=round(ideal, 2), gap_us=round(gap, 2),
               workspace_us=round(ws_us, 2), final_step_us=round(final, 2),
               final_step_share=round(number(row.get("ext_final_share")), 4),
               rest_us=round(gap - (0 if math.isnan(ws_us) else ws_us)
                             - (0 if math.isnan(final) else final), 2))
    for column, name in PLAN.items():
        out[name] = row.get(column, "")
    out.update(ncu_columns(out, ncu or {}))
    found = causes(row, out) if out["verdict"] == "FAIL" else []
    out["cause_families"] = ",".join(family for family, _ in found)
    out["causes"] = "; ".join(cause for _, cause in found)
    out["ncu_bound"], out["ncu_bound_why"] = ncu_bound(out)
    return out


def ncu_columns(s: dict, ncu: dict) -> dict:
    """The same-size add's kernel time and DRAM throughput (% of peak), ext's longest
    kernel's and its kernels' summed time (empty where not profiled; ext's only where its
    weights were in the sweep's dtype)."""
    key = (s["op"], s["M"], s["N"], s["dtype"])
    add = ncu.get(("copy", *key, s["dtype"]), {})
    ext = ncu.get(("inductor_ext", *key, s["param_dtype"]), {})
    return {"ncu_add_us": round(add.get("us", math.nan), 2),
            "ncu_add_dram_pct": round(add.get("dram_pct", math.nan), 1),
            "ncu_main_us": round(ext.get("us", math.nan), 2),
            "ncu_main_dram_pct": round(ext.get("dram_pct", math.nan), 1),
            "ncu_main_warps_pct": round(ext.get("warps_pct", math.nan), 1),
            "ncu_kernels_us": round(ext.get("kernels_us", math.nan), 2),
            "ncu_dram_MB": round(ext.get("dram_MB", math.nan), 1),
            "ncu_l2_MB": round(ext.get("l2_MB", math.nan), 1),
            "ncu_main_stalls": stall_shares(ext.get("stalls", {})),
            "ncu_main_config": ncu_config(s, ext)}


def stall_shares(stalls: dict[str, float]) -> str:
    """'reason share, ...' of a kernel's stall reasons, largest first, those at 1% or more
    ('' where not profiled)."""
    total = sum(stalls.values())
    if not total > 0:
        return ""
    return ", ".join(f"{reason} {cycles / total:.0%}" for reason, cycles in
                     sorted(stalls.items(), key=lambda kv: -kv[1]) if cycles / total >= 0.01)


def waits(shares: str) -> str:
    """'; its warps wait on global loads 40%, barriers 28%': the stall reasons of
    `stall_shares` at STALL_SHARE or more (the largest one always), in the report's words."""
    parts = [part.rsplit(" ", 1) for part in shares.split(", ") if part]
    named = [(reason, share) for i, (reason, share) in enumerate(parts)
             if i == 0 or float(share.rstrip("%")) / 100 >= STALL_SHARE]
    if not named:
        return ""
    return "; its warps wait on " + ", ".join(
        f"{STALL_WORDS.get(reason, reason)} {share}" for reason, share in named)


def ncu_config(s: dict, ext: dict) -> str:
    """'' where Nsight Compute's run launched the sweep's config (or did not say), else
    what it launched: its own compile's autotuner may pick another config, and then its
    counters are that config's."""
    picked = (number(s.get("warps")), number(s.get("regs")))
    if "threads" not in ext or "regs" not in ext or any(map(math.isnan, picked)):
        return ""
    warps, regs, grid = int(ext["threads"]) // 32, int(ext["regs"]), int(ext.get("grid", 0))
    if (warps, regs) == tuple(map(int, picked)):
        return ""
    return f"{grid} programs of {warps} warps, {regs} registers"


#: Shares of ext's time past which the final step, the workspace and the remainder in
#: the fused kernel are named as causes.
CAUSE_SHARE = {"final step": 0.10, "workspace": 0.05, "fused kernel": 0.10}


def causes(row: dict, s: dict) -> list[tuple[str, str]]:
    """(family, measured cause) pairs of a shape below its bar, from the sweep's own
    numbers: what the bytes alone allow (the same-size add), what ext ran (declined:
    stock's kernels), the rows' alignment and padding, the program layout, and where ext's
    time beyond copy speed went. Nsight Compute's counters per family: bench/NOTES.md."""
    out: list[tuple[str, str]] = []
    bar, ext_us = s["threshold"], s["ext_us"]
    same_size = number(row.get("shape_copy_tbps")) / number(row.get("copy_tbps"))
    if same_size < bar:
        out.append(("small copy", f"the same-size add reaches {same_size:.2f} of the run's "
                                  "copy"))
    if s["limit_frac"] < bar:
        add = ("" if math.isnan(s["ncu_add_us"]) else
               f" (Nsight Compute: the add's kernel {s['ncu_add_us']:.1f} us at "
               f"{s['ncu_add_dram_pct']:.0f}% of DRAM peak)")
        out.append(("limit below bar", f"the add plus the least fold measured "
                                       f"({FOLD_FLOOR_US} us) reaches {s['limit_frac']:.2f} "
                                       f"of the run's copy{add}"))
    if s["declined"]:
        out.append(("declined", "declined: stock's kernels run (the cost model predicts "
                                "no win); stock "
                                f"{s['stock_frac']:.2f} of copy"))
        return out
    row_bytes = s["N"] * DTYPES[s["dtype"]].itemsize
    if row_bytes % 16:
        out.append(("unaligned rows", f"rows of {row_bytes} bytes start off 16-byte "
                                      "vectors: loads of 2-4 bytes"))
    r0_block, tiled = number(row.get("ext_r0_block")), row.get("ext_column_tiled") == "True"
    if not tiled and r0_block > 0 and s["N"] / r0_block <= 0.75:
        out.append(("padded row", f"N={s['N']} runs as a {int(r0_block)}-lane row "
                                  f"({1 - s['N'] / r0_block:.0%} masked)"))
    if tiled:
        out.append(("column tiles", f"column-tiled row ({row.get('ext_register_tiles')} "
                                    "register tiles): the row read twice"))
    launched = number(row.get("ext_launched_programs"))
    if not launched > 0:  # sweeps before the count was recorded: the plan's programs
        launched = number(row.get("ext_programs"))
    if number(row.get("ext_resident_per_sm")) == 1 and launched > 0:
        out.append(("one program per SM", f"one program per SM, {s['M'] / launched:.0f} "
                                          "rows each: a row's loads wait alone"))
    waves = number(row.get("ext_waves"))
    if waves > 1:
        out.append(("waves", f"{waves:.0f} waves"))
    spills = number(row.get("ext_n_spills"))
    if spills > 0:
        out.append(("spills", f"{spills:.0f} registers spilled"))
    parts = (("final step", s["final_step_us"]), ("workspace", s["workspace_us"]),
             ("fused kernel", s["rest_us"]))
    named = [(family, f"{family} {us:.1f} us ({us / ext_us:.0%} of ext's time)")
             for family, us in parts if us / ext_us >= CAUSE_SHARE[family]]
    if not named:  # no part past its share: the gap is spread over them
        unknown = [family for family, us in parts if math.isnan(us)]
        named = [("spread gap", f"{s['gap_us']:.1f} us past copy speed, none of it one "
                                "part: " + " + ".join(f"{family} {us:.1f}"
                                                      for family, us in parts
                                                      if not math.isnan(us))
                  + (f" ({' and '.join(unknown)} not in the sweep)" if unknown else ""))]
    return out + named


#: Points of DRAM peak within which ext's longest kernel counts as running at the
#: same-size add's bandwidth (Nsight Compute's two figures of one call).
AT_ADD_POINTS = 8.0
#: Share of warps active at or under which a kernel below the add's bandwidth is held by
#: the loads in flight: each SM holds too few warps to cover DRAM's latency.
FEW_WARPS_PCT = 35.0


def ncu_bound(s: dict) -> tuple[str, str]:
    """(bound, sentence) naming what Nsight Compute's counters say holds a shape below its
    bar, first that applies: declined (stock's kernels ran), the bar out of reach (the
    add plus the least fold is below it), a column-tiled row (and where its second pass
    reads, where the file has L2 bytes), the main kernel
    at the add's bandwidth (the rest is the final step and the workspace), too few warps
    in flight; ('', '') where the shape passes or was not profiled, ('unnamed', ...)
    where none of them fits."""
    if s["verdict"] != "FAIL" or math.isnan(s["ncu_main_us"]):
        return "", ""
    main, add = s["ncu_main_dram_pct"], s["ncu_add_dram_pct"]
    warps = s["ncu_main_warps_pct"]
    kernel = f"the main kernel at {main:.0f}% of DRAM peak, {warps:.0f}% of warps active"
    if s["declined"]:
        return "declined", f"declined: stock's kernels ran, its longest at {main:.0f}% of " \
                           f"DRAM peak against the add's {add:.0f}%"
    if s["limit_frac"] < s["threshold"]:
        return "out of reach", (f"the bar is out of reach: the same-size add runs at "
                                f"{add:.0f}% of DRAM peak and with the least fold reaches "
                                f"{s['limit_frac']:.3f} of copy; ext is at "
                                f"{s['ext_of_limit']:.2f} of that")
    moved = ("" if math.isnan(s["ncu_dram_MB"]) else
             f"; its kernels move x{s['ncu_dram_MB'] / s['min_MB']:.2f} the least bytes"
             + ("" if math.isnan(s["ncu_l2_MB"]) else
                f" from DRAM, x{s['ncu_l2_MB'] / s['min_MB']:.2f} through L2"))
    moved += waits(s["ncu_main_stalls"])
    if str(s["column_tiled"]) == "True":
        l2 = s["ncu_l2_MB"] / s["min_MB"]
        where = ("" if math.isnan(l2) else
                 ", its second pass reading L2" if l2 >= L2_SECOND_PASS else
                 ", its second pass reading L1")
        return "column tiles", (f"a column-tiled row{where}: {kernel} against the add's "
                                f"{add:.0f}%{moved}")
    if add - main <= AT_ADD_POINTS:
        return "at the add's bandwidth", (
            f"{kernel}, the add {add:.0f}%: the rest is the final step "
            f"{s['final_step_us']:.1f} us and the workspace {s['workspace_us']:.1f} us{moved}")
    if warps <= FEW_WARPS_PCT:
        return "few warps", (f"too few warps in flight: {kernel} ({s['regs']} registers "
                             f"a thread) against the add's {add:.0f}%{moved}")
    return "unnamed", f"{kernel} against the add's {add:.0f}%{moved}: no bound named"


def distribution(shapes: list[dict]) -> str:
    """Min, median, share passing its bar and the worst 5 (by fraction over bar) of ext's
    copy fractions."""
    fracs = [s["ext_frac"] for s in shapes if not math.isnan(s["ext_frac"])]
    if not fracs:
        return f"{len(shapes)} shapes, none with an ext time"
    barred = [s for s in shapes if s["verdict"] in ("pass", "FAIL")]
    passing = sum(1 for s in barred if s["verdict"] == "pass")
    lines = [f"{len(shapes)} shapes ({len(fracs)} timed): ext copy fraction min "
             f"{min(fracs):.3f}, median {statistics.median(fracs):.3f}, max {max(fracs):.3f}; "
             f"{passing} of {len(barred)} with a bar pass it "
             f"({passing / len(barred) if barred else math.nan:.0%})"]
    for base in RATIO_BASES:
        ratios = [s[f"ext_over_{base}"] for s in shapes if s[f"ext_over_{base}"] > 0]
        if ratios:
            geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
            lines.append(f"ext vs {base} (their time / ext's) over {len(ratios)} shapes: "
                         f"min x{min(ratios):.3f}, median x{statistics.median(ratios):.3f}, "
                         f"geomean x{geo:.3f}")
    families: dict[str, int] = {}
    for s in barred:
        for family in filter(None, s["cause_families"].split(",")):
            families[family] = families.get(family, 0) + 1
    if families:
        lines.append(f"causes below the bar ({len(barred) - passing} shapes): " + ", ".join(
            f"{family} {count}" for family, count in
            sorted(families.items(), key=lambda kv: -kv[1])))
    failing = [s for s in barred if s["verdict"] == "FAIL"]
    if any(s["ncu_bound"] for s in failing):
        bounds = collections.Counter(s["ncu_bound"] or "no counters" for s in failing)
        lines.append(f"held below the bar, by Nsight Compute ({len(failing)} shapes): "
                     + ", ".join(f"{bound} {count}" for bound, count in bounds.most_common()))
    largest = collections.Counter(s["ncu_main_stalls"].split(" ", 1)[0] for s in failing
                                  if s.get("ncu_main_stalls"))
    if largest:
        lines.append(f"what their main kernels' warps wait on most ({largest.total()} with "
                     "stall counters): " + ", ".join(
                         f"{STALL_WORDS.get(reason, reason)} {count}"
                         for reason, count in largest.most_common()))
    out_of_reach = [s for s in barred if s["limit_frac"] < s["threshold"]]
    if out_of_reach:
        shares = [s["ext_of_limit"] for s in out_of_reach]
        lines.append(f"bar out of reach (the same-size add + {FOLD_FLOOR_US} us of fold below "
                     f"it) at {len(out_of_reach)} shapes; ext there at {min(shares):.2f} to "
                     f"{max(shares):.2f} of that limit (median {statistics.median(shares):.2f})")
    worst = sorted(barred, key=lambda s: s["ext_frac"] / s["threshold"])[:5]
    lines.append("worst 5 against their bar: " + "; ".join(
        f"{s['case']} {s['ext_frac']:.3f} < {s['threshold']}" if s["verdict"] == "FAIL"
        else f"{s['case']} {s['ext_frac']:.3f} >= {s['threshold']}" for s in worst))
    return "\n".join(lines)


def cell(value: float, spec: str, prefix: str = "") -> str:
    """`prefix` and `value` as `spec` formats it, or '-' as wide where the sweep has no
    number (a variant not run, a column an older sweep lacks)."""
    text = prefix + format(value, spec)
    return ("-" if prefix else "-".rjust(len(text))) if math.isnan(value) else text


def shape_line(s: dict) -> str:
    plan = " ".join(f"{name}={s[name]}" for name in PLAN.values() if s[name] not in ("", None))
    return (f"{s['op']:3s} {s['M']:>7d}x{s['N']:<5d} {s['dtype']:4s} w{s['param_dtype']:4s} "
            f"{s['numel'] / 2**20:7.1f}M {s['min_MB']:8.1f} MB  ext {cell(s['ext_frac'], '.3f')} "
            f"bar {s['threshold'] or '-':4} {s['verdict']:4s} limit "
            f"{cell(s['limit_frac'], '.2f')}  {cell(s['ext_over_stock'], '.2f', 'x')} "
            f"{cell(s['ext_over_upstream_off'], '.2f', 'x')} "
            f"{cell(s['ext_over_liger'], '.2f', 'x')}  gap "
            f"{cell(s['gap_us'], '7.1f')} us = ws {cell(s['workspace_us'], '5.1f')} + final "
            f"{cell(s['final_step_us'], '5.1f')} + rest {cell(s['rest_us'], '6.1f')}  {plan}"
            + (f"\n      why: {s['causes']}" if s["causes"] else "")
            + ("" if math.isnan(s["ncu_main_us"]) else
               f"\n      ncu: {'stock' if s['declined'] else 'ext'}'s longest kernel "
               f"{s['ncu_main_us']:.1f} us at "
               f"{s['ncu_main_dram_pct']:.0f}% of DRAM peak, {s['ncu_main_warps_pct']:.0f}% "
               f"of warps active; its kernels {s['ncu_kernels_us']:.1f} us"
               + (f" (its run's autotuner picked another config: {s['ncu_main_config']})"
                  if s["ncu_main_config"] else ""))
            + (f"\n      held: {s['ncu_bound_why']}" if s["ncu_bound_why"] else ""))


HEADER = ("op  M x N         dtype w-dtype  M*N    min bytes  ext of copy, bar, verdict, limit  "
          "ext vs stock / upstream off / liger  ext's time beyond copy speed  plan")


def plot(shapes: list[dict], path: str, title: str = "") -> None:
    """Left: ext's copy fraction against M*N (log), by op, the bars as lines, the other
    variants lighter; right: the fractions' ECDF per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ecdf) = plt.subplots(1, 2, figsize=(13, 5), width_ratios=(3, 2))
    markers = dict(zip(OTHERS, "vs^D"))
    for variant in OTHERS:
        pts = [(s["numel"], s[f"{variant}_frac"]) for s in shapes
               if not math.isnan(s[f"{variant}_frac"])]
        if pts:
            ax.scatter(*zip(*pts), marker=markers[variant], s=18, color="gray", alpha=0.35,
                       label=variant)
    limits = [(s["numel"], s["limit_frac"]) for s in shapes if not math.isnan(s["limit_frac"])]
    if limits:
        ax.scatter(*zip(*limits), marker="_", s=60, color="black", alpha=0.6,
                   label=f"limit (add + {FOLD_FLOOR_US} us fold)")
    for op, color in (("rms", "tab:blue"), ("ln", "tab:orange")):
        pts = [(s["numel"], s["ext_frac"]) for s in shapes
               if s["op"] == op and not math.isnan(s["ext_frac"])]
        if pts:
            ax.scatter(*zip(*pts), s=30, color=color, label=f"ext {op}", zorder=3)
    top = max([s["numel"] for s in shapes] + [THRESHOLDS[0][0] * 2])
    edges = [top * 1.5] + [least for least, _ in THRESHOLDS]
    for (least, bar), high in zip(THRESHOLDS, edges):
        ax.hlines(bar, least, high, colors="black", linestyles="--", linewidth=1)
        ax.annotate(f"{bar}", (least, bar), textcoords="offset points", xytext=(2, 3),
                    fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("M*N (elements)")
    ax.set_ylabel("min bytes / time / copy bandwidth")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    for variant in ("ext", *OTHERS):
        fracs = sorted(s[f"{variant}_frac"] for s in shapes
                       if not math.isnan(s[f"{variant}_frac"]))
        if fracs:
            ecdf.step(fracs, [(k + 1) / len(fracs) for k in range(len(fracs))], where="post",
                      label=f"{variant} ({len(fracs)})",
                      linewidth=2 if variant == "ext" else 1)
    for _, bar in THRESHOLDS:
        ecdf.axvline(bar, color="black", linestyle="--", linewidth=1)
    ecdf.set_xlabel("copy fraction")
    ecdf.set_ylabel("share of shapes at or below")
    ecdf.legend(fontsize=8, loc="upper left")
    ecdf.grid(alpha=0.3)
    fig.suptitle(title or f"Norm backward: copy fraction over {len(shapes)} shapes")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def below_bar_specs(shapes: list[dict]) -> list[str]:
    """ncu_backward.py's case specs of the shapes below their bar, in the report's order
    (the weights' dtype only where it is not x's)."""
    out = []
    for s in shapes:
        if s["verdict"] != "FAIL":
            continue
        weights = "" if s["param_dtype"] == s["dtype"] else f":{s['param_dtype']}"
        out.append(f"{s['op']}:{s['M']}x{s['N']}:{s['dtype']}{weights}")
    return out


def markdown(shapes: list[dict], origin: dict[str, str]) -> str:
    """The per-shape table as Markdown (bench/README's H200 tables): copy fraction and its
    bar, the limit, ext's ratios, the sweep file a shape came from, and what holds it."""
    head = ("| case | ext of copy | bar | limit | ext over stock | over upstream off | "
            "over Liger | file | held by |")
    out = [head, "|" + "---|" * head.count(" |")]
    for s in shapes:
        name = s["case"].removesuffix(" contiguous") + (" declined" if s["declined"] else "")
        verdict = " (below)" if s["verdict"] == "FAIL" else ""
        out.append(
            f"| {name} | {cell(s['ext_frac'], '.2f')}{verdict} | {s['threshold'] or '-'} | "
            f"{cell(s['limit_frac'], '.2f')} | {cell(s['ext_over_stock'], '.2f', 'x')} | "
            f"{cell(s['ext_over_upstream_off'], '.2f', 'x')} | "
            f"{cell(s['ext_over_liger'], '.2f', 'x')} | "
            f"{pathlib.Path(origin.get(s['case'], '-')).stem} | {s['ncu_bound'] or '-'} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="roofline.py", description=description(
        __doc__, f"{CPU_ONLY} The CSVs come from GPU runs: a sweep's CSV without ext's "
        "time (a CPU run) is refused."))
    ap.add_argument("csvs", nargs="+", metavar="SWEEP_CSV",
                    help="sweep_cost_model.py CSVs of GPU runs (--grid random or bench; an "
                    "older calibration sweep such as bench/results/cost_sweep_h100.csv too)")
    ap.add_argument("--plot", default="", help="write the plot here (PNG)")
    ap.add_argument("--csv", default="", help="write the per-shape table here")
    ap.add_argument("--title", default="", help="the plot's title")
    ap.add_argument("--markdown", default="", metavar="FILE",
                    help="write the per-shape table here as Markdown")
    ap.add_argument("--against", choices=("run", "shape"), default="run",
                    help="copy bandwidth of the run (32768x4096 bf16; default) or of the "
                    "shape's size (also where a CSV has no run copy)")
    ap.add_argument("--ncu", nargs="+", default=[], metavar="NCU_CSV",
                    help="ncu_backward.py outputs under ncu --csv --page raw (variants copy "
                         "and inductor_ext)")
    ap.add_argument("--ncu-specs", default="", metavar="FILE",
                    help="write the ncu_backward.py --cases specs (op:MxN:dtype[:wdtype]) of "
                    "the shapes below their bar here, one line per device call")
    ap.add_argument("--per-call", type=int, default=16, metavar="K",
                    help="--ncu-specs: shapes per line (one ncu call each; default 16)")
    args = ap.parse_args(argv)
    if args.per_call < 1:
        ap.error(f"--per-call must be at least 1, not {args.per_call}")
    ncu: dict = {}
    for path in args.ncu:
        try:
            ncu.update(ncu_cases(path))
        except (OSError, ValueError, KeyError, csv.Error) as exc:
            ap.exit(2, f"{ap.prog}: error: cannot read the Nsight Compute CSV ({exc})\n")
    try:
        rows = load(list(args.csvs))
    except (OSError, KeyError, csv.Error) as exc:
        ap.exit(2, f"{ap.prog}: error: cannot read the sweep CSVs ({exc!r})\n")
    if not rows:
        ap.exit(2, f"{ap.prog}: error: no case in {', '.join(args.csvs)}\n")
    origin = origins(list(args.csvs))
    against, why = reference(rows, args.against, origin)
    if why and against == args.against:
        ap.exit(2, f"{ap.prog}: error: {why}\n")
    shapes = sorted((shape_row(row, against, ncu) for row in rows),
                    key=lambda s: (s["op"], s["numel"], s["N"]))
    print(f"copy fraction against the {against}'s copy bandwidth"
          + (f": {why}" if why else ""))
    print(HEADER)
    for s in shapes:
        print(shape_line(s))
    print(distribution(shapes))
    if args.csv:
        write_rows(args.csv, shapes)
        print(f"wrote {args.csv}")
    if args.markdown:
        pathlib.Path(args.markdown).write_text(markdown(shapes, origin))
        print(f"wrote {args.markdown}")
    if args.plot:
        plot(shapes, args.plot, args.title)
        print(f"wrote {args.plot}")
    if args.ncu_specs:
        specs = below_bar_specs(shapes)
        lines = [",".join(specs[i:i + args.per_call])
                 for i in range(0, len(specs), args.per_call)]
        pathlib.Path(args.ncu_specs).write_text("".join(line + "\n" for line in lines))
        print(f"wrote {args.ncu_specs}: {len(specs)} shapes below their bar, "
              f"{len(lines)} ncu call(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
