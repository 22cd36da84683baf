"""The Ascend width table: for the row widths current open models train at, on every SoC of
torch_npu's table, whether the plugin fuses a norm backward with default options, and if
not why; the plan it picks and the cost model's times. No NPU needed: this is planning
(a pure function of shape, device, tuning and options) on each SoC's facts, priced by the
plugin's own cost model (inductor_ext/targets/ascend/cost.py), which has not been measured
on a device. The shapes are what the hook describes for an RMSNorm / LayerNorm backward
(`bench/ascend_model.py shape_info`, checked against the hook in tests/ascend).

    python bench/ascend_width_table.py [--csv bench/results/ascend_width_table.csv]
        [--summary bench/results/ascend_width_table.md] [--plot PNG] [--setting K=V;...]

`--setting` sets Ascend tuning knobs (`multibuffer=False`), as the sweep's does.
"""

from __future__ import annotations

import argparse
import collections
import csv
import dataclasses
import os
import sys
from collections.abc import Iterator

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ascend_model import ES, shape_info  # noqa: E402

import inductor_ext  # noqa: E402,F401  (registers the targets)
from inductor_ext.plan import DeviceInfo, PlanOptions, planner_for  # noqa: E402
from inductor_ext.plan import knobs as tuning_mod  # noqa: E402
from inductor_ext.targets.ascend import cost as ascend_cost  # noqa: E402
from inductor_ext.targets.ascend import plan as ascend_plan  # noqa: E402
from tests.support import npu_socs  # noqa: E402

#: Head dims (q/k norms) and hidden sizes of current open models.
WIDTHS = (64, 128, 896, 1024, 1536, 2048, 2304, 2560, 3072, 3584, 4096, 5120, 6144, 7168,
          8192, 12288, 16384)
DTYPES = ("bf16", "fp16", "fp32")
TOKENS = (4096, 16384)
OPS = ("rms", "ln")
#: SoCs torch_npu runs on that triton-ascend does not target (not in npu_socs' table,
#: whose SoCs are the ones its backend compiles Triton for): planned only to show their
#: decline. Core counts do not matter there.
UNTARGETED_SOCS = ("Ascend310P3", "Ascend310B1")
HBM_TBPS = 1.6
FIELDS = ("soc", "vector_cores", "ub_bytes", "op", "dtype", "M", "N", "fused", "reason",
          "plan", "block_m", "cols", "multibuffer", "ub_estimate", "fused_us", "final_us",
          "unfused_us", "detail")


@dataclasses.dataclass(frozen=True)
class Row:
    soc: str
    vector_cores: int
    ub_bytes: int
    op: str
    dtype: str
    M: int
    N: int
    fused: bool
    reason: str
    plan: str = ""
    block_m: int = 0
    cols: int = 0
    multibuffer: str = ""
    ub_estimate: int = 0
    fused_us: float = 0.0
    final_us: float = 0.0
    unfused_us: float = 0.0
    detail: str = ""

    def record(self) -> dict[str, object]:
        out = dataclasses.asdict(self)
        for key in ("fused_us", "final_us", "unfused_us"):
            out[key] = f"{out[key]:.1f}"
        return out


def devices() -> Iterator[DeviceInfo]:
    """Every SoC of torch_npu's table whose cores are known, as the hook sees it there,
    then the SoCs triton-ascend does not target."""
    for soc in npu_socs.known():
        assert soc.vector_cores is not None
        yield DeviceInfo(type="npu", name=soc.name, cores=soc.vector_cores,
                         ub_bytes=soc.ub_bytes, npu_backend="torch_npu",
                         ascend950=soc.ascend950, dram_bytes_per_s=HBM_TBPS * 1e12)
    for name in UNTARGETED_SOCS:
        yield DeviceInfo(type="npu", name=name, cores=npu_socs.get("910B3").vector_cores or 1,
                         ub_bytes=192 * 1024, npu_backend="torch_npu",
                         dram_bytes_per_s=HBM_TBPS * 1e12)


def decide(op: str, dtype: str, M: int, N: int, device: DeviceInfo, tuning: object,
           options: PlanOptions) -> Row:
    """What the hook decides for this norm backward on `device` with default options:
    the same steps in the same order (device support, fits, plan, profitable)."""
    planner = planner_for("ascend")
    shape = shape_info(op, M, N, ES[dtype])
    base = dict(soc=device.name, vector_cores=device.cores, ub_bytes=device.ub_bytes, op=op,
                dtype=dtype, M=M, N=N)
    why = planner.device_support(device) if planner.device_support else ""
    if why:
        return Row(**base, fused=False, reason="unsupported_device", detail=why)
    ok, why = planner.fits(shape, device, tuning, options)
    if not ok:
        return Row(**base, fused=False, reason="no_tile_fits", detail=why)
    plan = planner.plan(shape, device, tuning, options)
    fuses, detail = planner.profitable(shape, plan, device, tuning, options)
    est = ascend_cost.estimate(shape, plan, device, ascend_plan.vector_cores(device, options),
                               tuning, options)  # type: ignore[arg-type]
    first = dict(plan.configs[0]) if plan.configs else {}
    return Row(**base, fused=fuses, reason="" if fuses else "not_profitable",
               plan="looped" if plan.column_tiled else "persistent", block_m=plan.block_m,
               cols=plan.r0_block, multibuffer=str(first.get("multibuffer", "")),
               ub_estimate=int(dict(plan.extra).get("ub_bytes", 0)),
               fused_us=est.fused_s * 1e6, final_us=est.final_s * 1e6,
               unfused_us=est.unfused_s * 1e6, detail=detail)


def table(settings: str = "") -> list[Row]:
    tuning = tuning_mod.make("ascend", tuning_mod.parse_settings("ascend", settings))
    options = PlanOptions()
    return [decide(op, dtype, M, N, device, tuning, options)
            for device in devices() for M in TOKENS for op in OPS for dtype in DTYPES
            for N in WIDTHS]


def summary(rows: list[Row]) -> str:
    """Markdown: per SoC class (vector cores, UB), the widths fused by default per norm and
    dtype at each token count, and the counts."""
    classes: dict[tuple[int, int, bool], list[str]] = collections.OrderedDict()
    for row in rows:
        key = (row.vector_cores, row.ub_bytes, row.reason == "unsupported_device")
        names = classes.setdefault(key, [])
        if row.soc not in names:
            names.append(row.soc)
    lines = ["| SoCs | vector cores | UB | norm | dtype | M | declined widths (fused: the "
             "others) |", "|---|---|---|---|---|---|---|"]
    for (cores, ub, untargeted), names in classes.items():
        rep = names[0]
        socs = ", ".join(names)
        for M in TOKENS:
            for op in OPS:
                for dtype in DTYPES:
                    got = [r for r in rows if r.soc == rep and r.M == M and r.op == op
                           and r.dtype == dtype]
                    declined = [f"{r.N} ({r.reason})" for r in got if not r.fused]
                    text = ("all (" + got[0].reason + ")" if untargeted else
                            ", ".join(declined) or "none")
                    lines.append(f"| {socs} | {cores} | {ub // 1024} KiB | {op} | {dtype} | "
                                 f"{M} | {text} |")
    fused = sum(r.fused for r in rows)
    lines.append("")
    lines.append(f"{fused} of {len(rows)} (SoC, norm, dtype, M, N) fused by default; "
                 + "; ".join(f"{soc}: {n}" for soc, n in counts(rows).items()))
    return "\n".join(lines) + "\n"


def counts(rows: list[Row]) -> dict[str, str]:
    """SoC -> 'fused/total' by default."""
    out: dict[str, list[int]] = collections.OrderedDict()
    for row in rows:
        tally = out.setdefault(row.soc, [0, 0])
        tally[0] += row.fused
        tally[1] += 1
    return {soc: f"{f}/{n}" for soc, (f, n) in out.items()}


def plot(rows: list[Row], path: str) -> None:
    """Modeled speed-up (unfused / fused + final) against width, one panel per SoC class
    and token count, a line per norm and dtype; declined points hollow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reps = {(r.vector_cores, r.ub_bytes): r.soc for r in rows
            if r.reason != "unsupported_device"}
    fig, axes = plt.subplots(len(reps), len(TOKENS), figsize=(11, 3.2 * len(reps)),
                             squeeze=False, sharex=True)
    for i, soc in enumerate(reps.values()):
        for j, M in enumerate(TOKENS):
            ax = axes[i][j]
            for op in OPS:
                for dtype in DTYPES:
                    got = [r for r in rows if r.soc == soc and r.M == M and r.op == op
                           and r.dtype == dtype and r.fused_us]
                    xs = [r.N for r in got]
                    ys = [r.unfused_us / (r.fused_us + r.final_us) for r in got]
                    line, = ax.plot(xs, ys, label=f"{op} {dtype}", linewidth=1)
                    ax.scatter([x for x, r in zip(xs, got) if not r.fused],
                               [y for y, r in zip(ys, got) if not r.fused],
                               facecolors="none", edgecolors=line.get_color())
            ax.axhline(1.0, color="grey", linewidth=0.8)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{soc} ({reps and [k for k, v in reps.items() if v == soc][0][0]} "
                         f"vector cores), M={M}", fontsize=9)
            ax.set_ylabel("modeled unfused / fused")
    for ax in axes[-1]:
        ax.set_xlabel("N (row width)")
    axes[0][0].legend(fontsize=7, ncol=2)
    fig.suptitle("Ascend: modeled speed-up of the fused norm backward (hollow: declined); "
                 "cost model, not measured on a device", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=f"{__doc__.rstrip()}\n\nCPU only: no GPU or NPU needed.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", help="write the table here")
    ap.add_argument("--summary", help="write the markdown summary here (else print it)")
    ap.add_argument("--plot", help="write a PNG of the modeled speed-ups here")
    ap.add_argument("--setting", default="", help="Ascend tuning knobs, 'K=V;K=V'")
    args = ap.parse_args(argv)
    rows = table(args.setting)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(row.record() for row in rows)
    text = summary(rows)
    if args.summary:
        with open(args.summary, "w") as f:
            f.write(text)
    print(text, end="")
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
