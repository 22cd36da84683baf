"""Issue 42's roofline report: the sweep's random and bench grids, its per-case copy
fractions and ratios, and bench/roofline.py on a handmade sweep CSV (no GPU)."""

import csv
import math
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import roofline  # noqa: E402
import sweep_cost_model  # noqa: E402


def test_random_grid_is_deterministic_and_inside_its_ranges():
    cases = sweep_cost_model.grid("random", seed="42", count=60)
    assert cases == sweep_cost_model.random_grid(42, 60)
    assert len(cases) == len(set(cases)) == 60
    assert sweep_cost_model.random_grid(7, 60) != cases
    assert sweep_cost_model.grid("random")[:10] == sweep_cost_model.random_grid(42, 40)[:10]
    for c in cases:
        assert 256 <= c.N <= 32768
        assert 4 * 2**20 <= c.M * c.N <= 256 * 2**20 and c.M >= 1
        assert c.layout == "contiguous" and c.op in ("rms", "ln")
        assert c.wdtype in (c.dtype, "fp32")
        assert c.dtype != "fp32" or c.wdtype == "fp32"
    assert {c.op for c in cases} == {"rms", "ln"}
    assert {c.dtype for c in cases} == {"bf16", "fp16", "fp32"}
    assert {c.wdtype for c in cases if c.dtype != "fp32"} == {"bf16", "fp16", "fp32"}
    odd = sum(1 for c in cases if c.N % 64)
    assert 0 < odd < len(cases) / 2  # about one in five masked rows
    # spread over the log range of both N and M*N, not piled at one end
    assert min(c.N for c in cases) < 1024 and max(c.N for c in cases) > 8192
    assert (min(c.M * c.N for c in cases) < 16 * 2**20
            and max(c.M * c.N for c in cases) > 64 * 2**20)


def test_random_grid_takes_several_seeds():
    """`--seed 43-45,50`: the draws of each seed in order, a case drawn twice kept once."""
    assert sweep_cost_model.seeds("43-45,50") == [43, 44, 45, 50]
    assert sweep_cost_model.seeds("7") == [7]
    many = sweep_cost_model.grid("random", seed="43-45", count=10)
    one_by_one = [c for s in (43, 44, 45) for c in sweep_cost_model.random_grid(s, 10)]
    assert many == list(dict.fromkeys(one_by_one)) and len(many) > 20
    twice = sweep_cost_model.grid("random", seed="43,43", count=10)
    assert twice == sweep_cost_model.random_grid(43, 10)
    with pytest.raises(ValueError, match="--seed 'x'"):
        sweep_cost_model.seeds("x")


def test_bench_grid_is_the_16_bench_cases():
    cases = sweep_cost_model.grid("bench")
    assert len(cases) == len(set(cases)) == 16
    assert {c.op for c in cases} == {"rms", "ln"}
    assert sweep_cost_model.Case("rms", 32768, 4096, "bf16", "bf16", "contiguous") in cases
    assert sweep_cost_model.Case("ln", 576000, 384, "fp32", "fp32", "contiguous") in cases


def test_case_bytes_count_the_vectors_in_their_own_dtype():
    case = sweep_cost_model.Case("ln", 4, 8, "bf16", "fp32", "contiguous")
    assert case.min_bytes() == 3 * 4 * 8 * 2 + 8 * 4 + 4 * 8 * 4
    rms = sweep_cost_model.Case("rms", 4, 8, "fp16", "fp16", "contiguous")
    assert rms.min_bytes() == 3 * 4 * 8 * 2 + 4 * 4 + 2 * 8 * 2


def test_liger_is_skipped_with_its_reason(monkeypatch):
    case = sweep_cost_model.Case("rms", 64, 64, "fp32", "fp32", "contiguous")
    monkeypatch.setattr(sweep_cost_model, "has_liger", lambda: False)
    assert sweep_cost_model.skip_reason(case, "liger") == "liger_kernel is not importable"
    out = sweep_cost_model.measure_variant(case, "liger", None, None, "cpu")
    assert out == {"liger_skipped": "liger_kernel is not importable"}
    assert sweep_cost_model.skip_reason(case, "ext") == ""
    sums = sweep_cost_model.Case("sum", 64, 64, "fp32", "fp32", "contiguous")
    assert "no kernel" in sweep_cost_model.skip_reason(sums, "liger")


def test_sweep_rows_carry_copy_fractions_and_ratios():
    row = {"min_bytes": 3e6, "shape_copy_tbps": 2.0, "stock_us": 2.0, "upstream_off_us": 3.0,
           "ext_us": 1.5, "liger_us": math.nan}
    out = sweep_cost_model.roofline_columns(row, run_copy=2.5)
    assert out["copy_tbps"] == 2.5
    assert out["ext_copy_frac"] == pytest.approx(3e6 / 1.5e-6 / 2.5e12, abs=1e-4)  # 0.8
    assert out["ext_shape_copy_frac"] == pytest.approx(1.0)
    assert out["stock_copy_frac"] == pytest.approx(0.6)
    assert "liger_copy_frac" not in out and math.isnan(out["ext_over_liger"])
    assert out["ext_over_upstream_off"] == 2.0


FIELDS = ["case", "op", "M", "N", "dtype", "wdtype", "min_bytes", "copy_tbps",
          "shape_copy_tbps", "stock_us", "upstream_off_us", "ext_us", "liger_us",
          "ext_workspace_bytes", "ext_final_us", "ext_final_share", "ext_programs",
          "ext_block_m", "ext_waves", "ext_planned_kernels"]


def _sweep_csv(path, rows):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def _row(op, M, N, ext_us, **extra):
    min_bytes = 3 * M * N * 2 + 4 * M + 2 * N * 2
    return {"case": f"{op} {M}x{N} bf16 contiguous", "op": op, "M": M, "N": N,
            "dtype": "bf16", "wdtype": "bf16", "min_bytes": min_bytes, "copy_tbps": 3.0,
            "shape_copy_tbps": 2.5, "stock_us": 2 * ext_us, "upstream_off_us": 1.5 * ext_us,
            "ext_us": ext_us, "liger_us": "", **extra}


def test_thresholds_by_size():
    assert roofline.threshold(16 * 2**20) == 0.92
    assert roofline.threshold(16 * 2**20 - 1) == 0.85
    assert roofline.threshold(4 * 2**20) == 0.85
    assert roofline.threshold(4 * 2**20 - 1) is None


def test_roofline_table_summary_plot_and_csv(tmp_path, capsys):
    big = _row("rms", 8192, 4096, 0.0, ext_workspace_bytes=1_000_000, ext_final_us=3.0,
               ext_final_share=0.05, ext_programs=528, ext_block_m=2, ext_waves=1)
    # ext at 0.95 of the run's 3 TB/s copy: passes 0.92
    big["ext_us"] = big["min_bytes"] / (0.95 * 3e12) * 1e6
    big["stock_us"], big["upstream_off_us"] = 2 * big["ext_us"], 1.5 * big["ext_us"]
    mid = _row("ln", 2048, 4096, 0.0)  # 8M elements: bar 0.85
    mid["ext_us"] = mid["min_bytes"] / (0.80 * 3e12) * 1e6
    mid["stock_us"], mid["upstream_off_us"] = 2 * mid["ext_us"], 1.5 * mid["ext_us"]
    small = _row("rms", 64, 64, 5.0)  # no bar
    old = {**mid, "ext_us": 1.0}
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    _sweep_csv(first, [old, small])
    _sweep_csv(second, [big, mid])  # mid replaces old
    table, png = tmp_path / "table.csv", tmp_path / "plot.png"
    assert roofline.main([str(first), str(second), "--csv", str(table),
                          "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "3 shapes (3 timed)" in out and "1 of 2 with a bar pass it (50%)" in out
    assert "ln 2048x4096 bf16 contiguous 0.800 < 0.85" in out
    assert "ext vs stock (their time / ext's) over 3 shapes: min x2.000" in out
    with open(table, newline="") as f:
        rows = {r["case"]: r for r in csv.DictReader(f)}
    assert len(rows) == 3
    b, m, s = (rows[r["case"]] for r in (big, mid, small))
    assert float(b["ext_frac"]) == pytest.approx(0.95, abs=1e-4)
    assert (b["threshold"], b["verdict"]) == ("0.92", "pass")
    assert (m["threshold"], m["verdict"]) == ("0.85", "FAIL")
    assert float(m["ext_frac"]) == pytest.approx(0.80, abs=1e-4)
    assert (s["threshold"], s["verdict"]) == ("", "n/a")
    assert float(b["ext_over_stock"]) == 2.0 and float(b["ext_over_upstream_off"]) == 1.5
    assert math.isnan(float(b["ext_over_liger"]))
    assert float(b["stock_frac"]) == pytest.approx(0.475, abs=1e-4)
    # where the rest goes: 2 x 1 MB of workspace at 3 TB/s, the final step, the remainder
    assert float(b["workspace_us"]) == pytest.approx(2e6 / 3e12 * 1e6, abs=0.01)
    assert float(b["final_step_us"]) == 3.0
    gap = float(b["ext_us"]) - float(b["copy_speed_us"])
    assert float(b["gap_us"]) == pytest.approx(gap, abs=0.02)
    assert float(b["rest_us"]) == pytest.approx(gap - 3.0 - 2e6 / 3e12 * 1e6, abs=0.03)
    assert (b["programs"], b["block_m"], b["waves"]) == ("528", "2", "1")
    assert float(b["min_MB"]) == pytest.approx(big["min_bytes"] / 1e6, abs=1e-3)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_the_shapes_below_their_bar_become_ncu_case_specs(tmp_path, capsys):
    """`--ncu-specs`: the specs ncu_backward.py takes, of the failing shapes only, K a line
    (one Nsight Compute call each); the weights' dtype only where it differs."""
    rows = []
    for op, M, N, wdtype, frac in (("rms", 8192, 4096, "bf16", 0.95),
                                   ("ln", 2048, 4096, "fp32", 0.8),
                                   ("rms", 4096, 4096, "bf16", 0.7),
                                   ("ln", 8192, 2048, "bf16", 0.5)):
        row = _row(op, M, N, 0.0)
        row["wdtype"] = wdtype
        row["ext_us"] = row["min_bytes"] / (frac * 3e12) * 1e6
        row["stock_us"] = row["upstream_off_us"] = 2 * row["ext_us"]
        rows.append(row)
    path, specs = tmp_path / "a.csv", tmp_path / "specs.txt"
    _sweep_csv(path, rows)
    assert roofline.main([str(path), "--ncu-specs", str(specs), "--per-call", "2"]) == 0
    lines = specs.read_text().splitlines()
    assert lines == ["ln:2048x4096:bf16:fp32,ln:8192x2048:bf16", "rms:4096x4096:bf16"]
    assert "3 shapes below their bar, 2 ncu call(s)" in capsys.readouterr().out
    import ncu_backward

    assert [ncu_backward.parse_case(spec)[:3] for line in lines for spec in line.split(",")
            ] == [("ln", 2048, 4096), ("ln", 8192, 2048), ("rms", 4096, 4096)]
    with pytest.raises(SystemExit):
        roofline.main([str(path), "--ncu-specs", str(specs), "--per-call", "0"])


def test_roofline_against_the_shapes_copy(tmp_path, capsys):
    row = _row("rms", 8192, 4096, 10.0)
    path = tmp_path / "a.csv"
    _sweep_csv(path, [row])
    table = tmp_path / "t.csv"
    roofline.main([str(path), "--against", "shape", "--csv", str(table)])
    with open(table, newline="") as f:
        (got,) = list(csv.DictReader(f))
    assert float(got["ext_frac"]) == pytest.approx(
        row["min_bytes"] / 10e-6 / 2.5e12, abs=1e-4)
    assert "against the shape's copy bandwidth" in capsys.readouterr().out


def test_roofline_without_cases_is_one_line(tmp_path, capsys):
    path = tmp_path / "empty.csv"
    _sweep_csv(path, [])
    with pytest.raises(SystemExit) as stop:
        roofline.main([str(path)])
    assert stop.value.code == 2
    assert capsys.readouterr().err.startswith("roofline.py: error: no case in")


@pytest.mark.parametrize("final_step,launched,groups,share", [
    ("generated", 132, 1, 0.25),   # 132 of 528 programs launched: a quarter of the rows
    ("aten", 132, 1, 1.0),         # the ATen final step reads (and the kernel fills) all
    ("generated", 1056, 2, 1.0),   # column groups: launched counts every group
    ("generated", "", 1, 1.0),     # a sweep before the column existed
])
def test_workspace_time_counts_the_rows_the_picked_config_used(final_step, launched, groups,
                                                                share):
    row = _row("rms", 8192, 8192, 0.0, ext_workspace_bytes=3_000_000, ext_programs=528,
               ext_launched_programs=launched, ext_column_groups=groups,
               ext_final_step=final_step, ext_planned_kernels=2, ext_final_us=3.0)
    row["ext_us"] = 200.0
    got = roofline.shape_row(row)
    assert got["workspace_us"] == pytest.approx(share * 2 * 3e6 / 3e12 * 1e6, abs=0.01)


def _at(row, frac):
    """The row with ext at `frac` of the run's copy."""
    return {**row, "ext_us": row["min_bytes"] / (frac * row["copy_tbps"] * 1e12) * 1e6}


def test_causes_name_what_the_sweep_measured():
    """A shape below its bar gets its measured causes; a passing shape none."""
    declined = roofline.shape_row(_at(_row("rms", 300, 20000, 0.0, shape_copy_tbps=3.0,
                                           ext_planned_kernels=0), 0.4))
    # 6M elements at 12 us of copy: even the add and the fold floor miss 0.85
    assert declined["verdict"] == "FAIL"
    assert declined["cause_families"] == "limit below bar,declined"
    assert "; declined: stock's kernels run" in declined["causes"]
    row = _at(_row("rms", 2000, 4918, 0.0, shape_copy_tbps=3.0, ext_planned_kernels=2,
                   ext_r0_block=8192, ext_column_tiled="False", ext_resident_per_sm=1,
                   ext_launched_programs=125, ext_programs=125, ext_workspace_bytes=0,
                   ext_waves=1, ext_n_spills=0), 0.6)
    row["ext_final_us"] = 0.2 * row["ext_us"]
    s = roofline.shape_row(row)
    assert s["cause_families"].split(",") == [
        "unaligned rows", "padded row", "one program per SM", "final step", "fused kernel"]
    assert "rows of 9836 bytes start off 16-byte vectors" in s["causes"]
    assert "N=4918 runs as a 8192-lane row (40% masked)" in s["causes"]
    assert "one program per SM, 16 rows each" in s["causes"]
    assert "final step" in s["causes"] and "(20% of ext's time)" in s["causes"]
    small = roofline.shape_row(_at(_row("rms", 1024, 5120, 0.0, shape_copy_tbps=2.4,
                                        ext_planned_kernels=2), 0.8))
    assert small["cause_families"].startswith("small copy")
    assert "the same-size add reaches 0.80 of the run's copy" in small["causes"]
    spread = _at(_row("rms", 8192, 4096, 0.0, shape_copy_tbps=3.0, ext_planned_kernels=2,
                      ext_workspace_bytes=0), 0.91)
    spread["ext_final_us"] = 0.05 * spread["ext_us"]
    got = roofline.shape_row(spread)
    assert got["cause_families"] == "spread gap" and "none of it one part" in got["causes"]
    passing = roofline.shape_row(_at(_row("rms", 8192, 4096, 0.0, ext_planned_kernels=2), 0.95))
    assert passing["verdict"] == "pass" and passing["causes"] == ""
    summary = roofline.distribution([declined, s, got, passing])
    assert "causes below the bar (3 shapes): " in summary and "declined 1" in summary


def test_the_limit_is_the_same_size_add_plus_the_least_fold():
    """limit_frac: the copy-speed time over the same-size add's time plus FOLD_FLOOR_US.
    Below the bar it is a cause of its own, and the summary counts those shapes and says
    how close ext came to their limit."""
    few = _at(_row("rms", 1024, 4096, 0.0, shape_copy_tbps=2.7, ext_planned_kernels=2), 0.6)
    s = roofline.shape_row(few)
    ideal = few["min_bytes"] / 3e12 * 1e6
    limit = ideal / (few["min_bytes"] / 2.7e12 * 1e6 + roofline.FOLD_FLOOR_US)
    assert limit < 0.85 < 2.7 / 3.0  # the add alone would meet the bar: the fold does not
    assert s["limit_frac"] == pytest.approx(limit, abs=1e-4)
    assert s["ext_of_limit"] == pytest.approx(0.6 / limit, abs=1e-3)
    families = s["cause_families"].split(",")
    assert "limit below bar" in families and "small copy" not in families
    assert (f"the add plus the least fold measured ({roofline.FOLD_FLOOR_US} us) reaches "
            f"{limit:.2f} of the run's copy") in s["causes"]
    big = roofline.shape_row(_at(_row("rms", 8192, 4096, 0.0, shape_copy_tbps=3.0,
                                      ext_planned_kernels=2, ext_workspace_bytes=0), 0.9))
    assert big["limit_frac"] > 0.92 and "limit below bar" not in big["cause_families"]
    summary = roofline.distribution([s, big])
    assert (f"bar out of reach (the same-size add + {roofline.FOLD_FLOOR_US} us of fold below "
            f"it) at 1 shapes; ext there at {0.6 / limit:.2f}") in summary


def _ncu_file(path, labels, kernels):
    """An `ncu --csv --page raw` output of ncu_backward.py: its case lines, then the CSV
    (header, a units row, one row a kernel: (name, time ns, DRAM %, warps %))."""
    metrics = list(roofline.NCU_METRICS)
    lines = ["==PROF== Connected to process 1 (python)", *labels,
             ",".join(f'"{c}"' for c in ["ID", "Kernel Name", *metrics]),
             ",".join(f'"{c}"' for c in ["", "", "nsecond", "%", "%"])]
    lines += [",".join(f'"{c}"' for c in [str(i), name, f"{ns:,}", str(dram), str(warps)])
              for i, (name, ns, dram, warps) in enumerate(kernels)]
    path.write_text("\n".join(lines) + "\n")


def test_ncu_counters_join_the_shapes_they_profiled(tmp_path, capsys):
    """`--ncu`: the same-size add's kernel (variant copy) and ext's longest kernel, its
    kernels' sum, by case, the weights' dtype included (a case profiled with bf16 weights
    is not the sweep's fp32-weight one); on a declined shape the kernels are stock's; a
    file whose kernels do not split evenly over its cases is refused with a one-line
    error."""
    copy, ext, bad = tmp_path / "copy.csv", tmp_path / "ext.csv", tmp_path / "bad.csv"
    _ncu_file(copy, ["copy rms 1024x4096 bfloat16", "copy ln 2048x4096 bfloat16"],
              [("add", 11_104, 55.0, 59.3), ("add", 20_000, 70.0, 60.0)])
    _ncu_file(ext, ["inductor_ext rms 1024x4096 bfloat16", "inductor_ext ln 2048x4096 bfloat16",
                    "inductor_ext ln 2048x4096 bfloat16 wfloat32"],
              [("fused", 14_432, 54.3, 49.0), ("final", 4_928, 33.3, 31.1),
               ("final", 5_000, 30.0, 30.0), ("fused", 30_000, 80.0, 50.0),
               ("stock_dx", 40_000, 61.0, 70.0), ("stock_dw", 9_000, 20.0, 30.0)])
    cases = roofline.ncu_cases(str(ext))
    assert cases[("inductor_ext", "rms", 1024, 4096, "bf16", "bf16")] == pytest.approx(
        {"us": 14.432, "dram_pct": 54.3, "warps_pct": 49.0, "kernels_us": 19.36, "kernels": 2,
         "dram_MB": math.nan}, nan_ok=True)  # no DRAM byte counters in this file
    assert cases[("inductor_ext", "ln", 2048, 4096, "bf16", "bf16")]["us"] == 30.0  # longest
    assert cases[("inductor_ext", "ln", 2048, 4096, "bf16", "fp32")]["us"] == 40.0
    few = _at(_row("rms", 1024, 4096, 0.0, shape_copy_tbps=2.7), 0.6)
    wide = _at(_row("ln", 2048, 4096, 0.0), 0.6)
    wide["wdtype"] = "fp32"
    unprofiled = _at(_row("ln", 4096, 4096, 0.0), 0.6)
    declined = _at(_row("ln", 2048, 4096, 0.0, ext_planned_kernels=0), 0.6)
    declined["wdtype"] = "fp32"
    sweep, table = tmp_path / "s.csv", tmp_path / "t.csv"
    _sweep_csv(sweep, [few, wide, unprofiled])
    assert roofline.main([str(sweep), "--ncu", str(copy), str(ext), "--csv", str(table)]) == 0
    out = capsys.readouterr().out
    assert "(Nsight Compute: the add's kernel 11.1 us at 55% of DRAM peak)" in out
    assert "ncu: ext's longest kernel 14.4 us at 54% of DRAM peak, 49% of warps active; " \
           "its kernels 19.4 us" in out
    assert "ncu: ext's longest kernel 40.0 us at 61% of DRAM peak" in out
    with open(table, newline="") as f:
        rows = {r["case"]: r for r in csv.DictReader(f)}
    r, w = rows[few["case"]], rows[wide["case"]]
    assert (float(r["ncu_add_us"]), float(r["ncu_main_dram_pct"])) == (11.1, 54.3)
    assert float(w["ncu_add_us"]) == 20.0 and float(w["ncu_main_us"]) == 40.0
    assert math.isnan(float(rows[unprofiled["case"]]["ncu_main_us"]))
    _sweep_csv(sweep, [declined])
    assert roofline.main([str(sweep), "--ncu", str(ext)]) == 0
    assert "ncu: stock's longest kernel 40.0 us at 61% of DRAM peak" in capsys.readouterr().out
    _ncu_file(bad, ["inductor_ext rms 1024x4096 bfloat16", "inductor_ext ln 2048x4096 bfloat16"],
              [("fused", 1, 1.0, 1.0), ("final", 1, 1.0, 1.0), ("fused", 1, 1.0, 1.0)])
    with pytest.raises(SystemExit) as exc:
        roofline.main([str(sweep), "--ncu", str(bad)])
    assert exc.value.code == 2
    assert "3 kernels for 2 cases" in capsys.readouterr().err


def test_ncu_names_the_config_its_own_compile_ran(tmp_path):
    """Nsight Compute's run compiles and autotunes again: where its main kernel's warps or
    registers differ from the sweep's pick, the report says what it profiled instead."""
    metrics = [*roofline.NCU_METRICS, *roofline.NCU_LAUNCH]
    path = tmp_path / "ext.csv"
    path.write_text("\n".join([
        "inductor_ext rms 20019x778 float16",
        ",".join(f'"{c}"' for c in ["ID", "Kernel Name", *metrics]),
        ",".join(f'"{c}"' for c in ["", "", "nsecond", "%", "%", "register/thread", "", ""]),
        ",".join(f'"{c}"' for c in ["0", "fused", "39,680", "62.2", "23.0", "127", "128", "501"]),
        ",".join(f'"{c}"' for c in ["1", "final", "4,704", "10.0", "12.4", "72", "256", "49"]),
    ]) + "\n")
    main = roofline.ncu_cases(str(path))[("inductor_ext", "rms", 20019, 778, "fp16", "fp16")]
    assert (main["threads"], main["regs"], main["grid"]) == (128, 127, 501)
    assert roofline.ncu_config({"warps": 4, "regs": 127}, main) == ""
    assert roofline.ncu_config({"warps": 8, "regs": 64}, main) == \
        "501 programs of 4 warps, 127 registers"
    assert roofline.ncu_config({"warps": "", "regs": ""}, main) == ""  # declined: no pick
    assert roofline.ncu_config({"warps": 8, "regs": 64}, {"us": 1.0}) == ""  # not recorded


def test_one_ncu_file_holds_the_adds_and_a_compiled_variant(tmp_path):
    """ncu_backward.py --variants copy,inductor_ext writes one file: each copy case ran its
    add's one kernel, then each compiled case its own (here 2): both join their cases."""
    both = tmp_path / "both.csv"
    _ncu_file(both, ["copy rms 1024x4096 bfloat16", "copy ln 2048x4096 bfloat16",
                     "inductor_ext rms 1024x4096 bfloat16", "inductor_ext ln 2048x4096 bfloat16"],
              [("add", 11_000, 55.0, 59.0), ("add", 20_000, 70.0, 60.0),
               ("fused", 14_000, 54.0, 49.0), ("final", 5_000, 33.0, 31.0),
               ("fused", 30_000, 80.0, 50.0), ("final", 6_000, 30.0, 30.0)])
    cases = roofline.ncu_cases(str(both))
    assert cases[("copy", "ln", 2048, 4096, "bf16", "bf16")]["us"] == 20.0
    assert cases[("inductor_ext", "rms", 1024, 4096, "bf16", "bf16")] == pytest.approx(
        {"us": 14.0, "dram_pct": 54.0, "warps_pct": 49.0, "kernels_us": 19.0, "kernels": 2,
         "dram_MB": math.nan}, nan_ok=True)
    assert cases[("inductor_ext", "ln", 2048, 4096, "bf16", "bf16")]["kernels_us"] == 36.0


def test_ncu_sums_the_dram_bytes_of_a_cases_kernels_in_their_unit(tmp_path):
    """dram__bytes_read/write.sum, where a file has them: read and written, over every
    kernel of the case, in the unit its units row names (here Mbyte and byte)."""
    metrics = [*roofline.NCU_METRICS, *roofline.NCU_BYTES]
    path = tmp_path / "ext.csv"
    path.write_text("\n".join([
        "copy rms 1024x4096 bfloat16", "inductor_ext rms 1024x4096 bfloat16",
        ",".join(f'"{c}"' for c in ["ID", "Kernel Name", *metrics]),
        ",".join(f'"{c}"' for c in ["", "", "nsecond", "%", "%", "Mbyte", "byte"]),
        ",".join(f'"{c}"' for c in ["0", "add", "9,000", "80", "90", "16.78", "8,390,000"]),
        ",".join(f'"{c}"' for c in ["1", "fused", "14,000", "70", "25", "16.9", "8,400,000"]),
        ",".join(f'"{c}"' for c in ["2", "final", "3,000", "10", "12", "0.5", "16,384"]),
    ]) + "\n")
    cases = roofline.ncu_cases(str(path))
    assert cases[("copy", "rms", 1024, 4096, "bf16", "bf16")]["dram_MB"] == pytest.approx(
        16.78 + 8.39)
    assert cases[("inductor_ext", "rms", 1024, 4096, "bf16", "bf16")]["dram_MB"] == \
        pytest.approx(16.9 + 8.4 + 0.5 + 0.016384)


def _held(**changes):
    """A shape below its bar with Nsight Compute's counters, as shape_row makes it: the
    main kernel at 70% of DRAM peak with 12% of warps, the add at 90%."""
    s = {"verdict": "FAIL", "declined": False, "threshold": 0.92, "limit_frac": 0.97,
         "ext_of_limit": 0.8, "column_tiled": "False", "regs": 232, "min_MB": 200.0,
         "final_step_us": 3.5, "workspace_us": 1.2, "ncu_main_us": 60.0,
         "ncu_main_dram_pct": 70.0, "ncu_add_dram_pct": 90.0, "ncu_main_warps_pct": 12.0,
         "ncu_dram_MB": 198.0, "ncu_l2_MB": math.nan, "ncu_main_stalls": ""}
    return {**s, **changes}


@pytest.mark.parametrize("changes, bound, words", [
    ({}, "few warps", ["too few warps in flight: the main kernel at 70% of DRAM peak, 12% "
                       "of warps active (232 registers a thread) against the add's 90%",
                       "x0.99 the least bytes"]),
    ({"declined": True, "limit_frac": 0.5}, "declined",
     ["declined: stock's kernels ran, its longest at 70%"]),
    ({"limit_frac": 0.8}, "out of reach",
     ["the same-size add runs at 90% of DRAM peak", "reaches 0.800 of copy",
      "ext is at 0.80 of that"]),
    ({"column_tiled": "True", "ncu_main_warps_pct": 50.0}, "column tiles",
     ["a column-tiled row: the main kernel", "50% of warps active"]),
    ({"column_tiled": "True", "ncu_l2_MB": 520.0}, "column tiles",
     ["its second pass reading L2", "x0.99 the least bytes from DRAM, x2.60 through L2"]),
    ({"column_tiled": "True", "ncu_l2_MB": 310.0}, "column tiles",
     ["its second pass reading L1", "x1.55 through L2"]),
    ({"ncu_main_stalls": "barrier 31%, long_scoreboard 24%, selected 9%"}, "few warps",
     ["its warps wait on barriers 31%, global loads 24%"]),
    ({"ncu_main_dram_pct": 84.0}, "at the add's bandwidth",
     ["the add 90%: the rest is the final step 3.5 us and the workspace 1.2 us"]),
    ({"ncu_main_warps_pct": 60.0}, "unnamed", ["no bound named"]),
    ({"ncu_dram_MB": math.nan}, "few warps", ["against the add's 90%"]),
])
def test_nsight_compute_names_what_holds_a_shape_below_its_bar(changes, bound, words):
    """ncu_bound: the first of declined, out of reach, column tiles, at the add's bandwidth
    and few warps that the counters show; a main kernel below the add with many warps
    active is left unnamed, not guessed."""
    got, why = roofline.ncu_bound(_held(**changes))
    assert got == bound
    for word in words:
        assert word in why
    if math.isnan(changes.get("ncu_dram_MB", 0.0)):
        assert "least bytes" not in why


def test_no_bound_where_a_shape_passes_or_was_not_profiled():
    assert roofline.ncu_bound(_held(verdict="pass")) == ("", "")
    assert roofline.ncu_bound(_held(ncu_main_us=math.nan)) == ("", "")


def test_the_summary_counts_the_bounds_and_the_unprofiled(tmp_path, capsys):
    """The report's summary line counts each bound over the shapes below their bar, those
    without counters as such; the table carries the bound and its sentence."""
    sweep, table, ncu = tmp_path / "s.csv", tmp_path / "t.csv", tmp_path / "n.csv"
    slow = _at(_row("rms", 8192, 4096, 0.0, shape_copy_tbps=3.0, ext_planned_kernels=2,
                    ext_workspace_bytes=0), 0.7)
    unprofiled = _at(_row("rms", 16384, 4096, 0.0, shape_copy_tbps=3.0, ext_planned_kernels=2,
                          ext_workspace_bytes=0), 0.7)
    _sweep_csv(sweep, [slow, unprofiled])
    _ncu_file(ncu, ["copy rms 8192x4096 bfloat16", "inductor_ext rms 8192x4096 bfloat16"],
              [("add", 20_000, 90.0, 90.0), ("fused", 40_000, 60.0, 12.0)])
    assert roofline.main([str(sweep), "--ncu", str(ncu), "--csv", str(table)]) == 0
    out = capsys.readouterr().out
    assert "held below the bar, by Nsight Compute (2 shapes): few warps 1, no counters 1" in out
    assert "      held: too few warps in flight" in out
    with open(table, newline="") as f:
        rows = {r["case"]: r for r in csv.DictReader(f)}
    assert rows[slow["case"]]["ncu_bound"] == "few warps"
    assert rows[unprofiled["case"]]["ncu_bound"] == ""
    counters = {("copy", "rms", 8192, 4096, "bf16", "bf16"): {"us": 20.0, "dram_pct": 90.0},
                ("inductor_ext", "rms", 8192, 4096, "bf16", "bf16"): {
                    "us": 40.0, "dram_pct": 60.0, "warps_pct": 12.0, "kernels_us": 44.0,
                    "stalls": {"barrier": 5.0, "long_scoreboard": 3.0}}}
    shapes = [roofline.shape_row(slow, ncu=counters), roofline.shape_row(unprofiled)]
    assert shapes[0]["ncu_main_stalls"] == "barrier 62%, long_scoreboard 38%"
    assert ("what their main kernels' warps wait on most (1 with stall counters): barriers 1"
            in roofline.distribution(shapes))


def test_ncu_reads_the_longest_kernels_stall_reasons_and_l2_bytes(tmp_path):
    """With the WarpStateStats section and lts__t_bytes.sum: the longest kernel's stall
    reasons (cycles per issued instruction) and every kernel's L2 bytes; the table shows
    the reasons' shares, and the held line names those at STALL_SHARE or more."""
    stall = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
    reasons = ["long_scoreboard", "barrier", "selected"]
    metrics = [*roofline.NCU_METRICS, roofline.NCU_L2_BYTES, *map(stall.format, reasons)]
    path = tmp_path / "ext.csv"
    path.write_text("\n".join([
        "inductor_ext rms 1024x4096 bfloat16",
        ",".join(f'"{c}"' for c in ["ID", "Kernel Name", *metrics]),
        ",".join(f'"{c}"' for c in ["", "", "nsecond", "%", "%", "Mbyte", "inst", "inst",
                                    "inst"]),
        ",".join(f'"{c}"' for c in ["0", "fused", "14,000", "70", "25", "40.5", "4", "3", "1"]),
        ",".join(f'"{c}"' for c in ["1", "final", "3,000", "10", "12", "1.5", "9", "0", "1"]),
    ]) + "\n")
    main = roofline.ncu_cases(str(path))[("inductor_ext", "rms", 1024, 4096, "bf16", "bf16")]
    assert main["l2_MB"] == pytest.approx(42.0)
    assert main["stalls"] == {"long_scoreboard": 4.0, "barrier": 3.0, "selected": 1.0}
    shares = roofline.stall_shares(main["stalls"])
    assert shares == "long_scoreboard 50%, barrier 38%, selected 12%"
    assert roofline.waits(shares) == "; its warps wait on global loads 50%, barriers 38%"
    assert roofline.waits("selected 12%, wait 10%") == "; its warps wait on issuing 12%"
    assert roofline.stall_shares({}) == "" and roofline.waits("") == ""


def test_the_table_as_markdown(tmp_path):
    """--markdown: one row a shape in the report's order, with its verdict, ratios, the
    sweep file it came from and its bound; a declined shape says so."""
    sweep, bench, md = tmp_path / "grid.csv", tmp_path / "bench.csv", tmp_path / "t.md"
    slow = _at(_row("rms", 8192, 4096, 0.0, shape_copy_tbps=3.0, ext_planned_kernels=2,
                    ext_workspace_bytes=0), 0.7)
    fast = _at(_row("ln", 16384, 4096, 0.0, shape_copy_tbps=3.0, ext_planned_kernels=0,
                    ext_workspace_bytes=0), 0.95)
    for row in (slow, fast):
        row.update(stock_us=2 * row["ext_us"], upstream_off_us=1.5 * row["ext_us"])
    _sweep_csv(sweep, [slow])
    _sweep_csv(bench, [fast])
    assert roofline.main([str(sweep), str(bench), "--markdown", str(md)]) == 0
    lines = md.read_text().splitlines()
    assert lines[0].startswith("| case | ext of copy | bar | limit |")
    assert lines[1] == "|---|---|---|---|---|---|---|---|---|"
    assert lines[2] == "| ln 16384x4096 bf16 declined | 0.95 | 0.92 | 0.98 | x2.00 | x1.50 | - " \
                       "| bench | - |"
    assert lines[3].startswith("| rms 8192x4096 bf16 | 0.70 (below) | 0.92 |")
    assert lines[3].endswith("| grid | - |")  # below its bar, no counters: no bound
    assert len(lines) == 4
