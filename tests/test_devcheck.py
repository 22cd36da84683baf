"""`python -m inductor_ext --check` on CPU (Triton interpreter), on a tiny shape set: the
table, the CSV, the not-a-measurement note, and the refusal without TRITON_INTERPRET."""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys

import pytest
import torch

import inductor_ext
from inductor_ext import __main__ as cli
from inductor_ext import devcheck

TINY = [devcheck.Shape("rms", 24, 96, torch.bfloat16),
        devcheck.Shape("ln", 16, 64, torch.float32)]


@pytest.fixture(autouse=True)
def _clean():
    inductor_ext.disable()
    torch._dynamo.reset()
    yield
    inductor_ext.disable()
    torch._dynamo.reset()


def test_check_prints_the_table_and_writes_the_csv(monkeypatch, tmp_path, capsys):
    """Every row fused (always_fuse) and within tolerance, positive times marked as no
    measurement, the CSV's columns; the plugin left on as the caller had it."""
    monkeypatch.setattr(devcheck, "default_shapes", lambda interpreted, quick=False: TINY)
    path = tmp_path / "check.csv"
    inductor_ext.enable()
    assert cli.main(["--check", "--device", "cpu", "--always-fuse", "--csv", str(path)]) == 0
    assert inductor_ext.is_enabled()
    captured = capsys.readouterr()
    out, err = captured.out, captured.err

    assert "NOTE:" in out and "NOT measurements" in out
    assert "* not a measurement: interpreter time" in out
    lines = out.splitlines()
    head = next(line for line in lines if line.startswith("op "))
    for column in ("op", "M", "N", "dtype", "plugin", "err dx", "err dw", "err db", "check",
                   "off us*", "on us*", "off/on*"):
        assert column in head, head
    body = lines[lines.index(head) + 1:lines.index(head) + 1 + len(TINY)]
    assert [line.split()[:5] for line in body] == [
        ["rms", "24", "96", "bf16", "fused"], ["ln", "16", "64", "fp32", "fused"]]
    assert "2 of 2 shapes within tolerance; 2 fused" in out
    assert f"CSV: {path}" in out
    assert "[1/2] rms 24x96 bf16: fused, ok" in err and "[2/2] ln 16x64 fp32" in err

    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert tuple(reader.fieldnames or ()) == devcheck.COLUMNS
    assert [(r["op"], r["M"], r["N"], r["dtype"]) for r in rows] == [
        ("rms", "24", "96", "bf16"), ("ln", "16", "64", "fp32")]
    for r in rows:
        assert r["plugin"] == "fused" and r["ok"] == "True" and r["error"] == ""
        assert r["target"] == "cuda"  # the CPU interpreter plans for the default target
        assert "NOT a measurement" in r["timing"]
        assert float(r["off_us"]) > 0 and float(r["on_us"]) > 0
        assert math.isclose(float(r["ratio"]), float(r["off_us"]) / float(r["on_us"]),
                            rel_tol=1e-4)
        grads = ("dx", "dw", "db") if r["op"] == "ln" else ("dx", "dw")
        for g in grads:
            assert float(r[f"err_{g}"]) <= float(r[f"tol_{g}"])
        assert float(r["tol_dx"]) >= devcheck.RTOL[{"bf16": torch.bfloat16,
                                                    "fp32": torch.float32}[r["dtype"]]]
    assert rows[0]["err_db"] == rows[0]["tol_db"] == ""  # RMSNorm has no bias


def test_a_decline_shows_its_reason(interp):
    """Default options: a norm the plugin leaves to Inductor says why (the reason code, and
    the detail in the CSV), and the check still compares the gradients."""
    with inductor_ext.config.patch(exclude_modules=["*"]):
        [row] = devcheck.run_check("cpu", [devcheck.Shape("rms", 16, 64, torch.float32)])
    assert row.plugin == "declined" and row.reason == "excluded_by_config", row
    assert row.status == "declined: excluded_by_config"
    assert row.detail
    assert row.ok and row.on_us > 0 and row.off_us > 0


def test_a_failing_shape_is_a_row(monkeypatch, interp):
    """A shape that raises is reported (and fails the check); the others still run."""
    def boom(shape, at, timer, always_fuse=False):
        raise RuntimeError("injected failure\nsecond line")

    monkeypatch.setattr(devcheck, "check_shape", boom)
    rows = devcheck.run_check("cpu", TINY)
    assert [r.error for r in rows] == ["RuntimeError: injected failure"] * 2
    assert not any(r.ok for r in rows)
    at = devcheck.where("cpu")
    assert "  rms 24x96 bf16: RuntimeError: injected failure" in devcheck.report(rows, at, False)


def test_without_the_interpreter_one_line_and_exit_2():
    env = {**os.environ, "TRITON_INTERPRET": "0",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    res = subprocess.run([sys.executable, "-m", "inductor_ext", "--check", "--device", "cpu"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert res.stderr.strip().splitlines() == [
        "inductor_ext --check: on CPU the kernels run in Triton's interpreter, which needs "
        "TRITON_INTERPRET=1 in the environment: TRITON_INTERPRET=1 python -m inductor_ext "
        "--check"]


def test_check_options_need_check(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--csv", "x.csv"])
    assert exc.value.code == 2
    assert "go with --check" in capsys.readouterr().err


def test_default_shapes():
    device = devcheck.default_shapes(interpreted=False)
    assert {(s.op, s.N) for s in device if s.dtype == torch.bfloat16} == {
        (op, n) for op in ("rms", "ln") for n in (1024, 2560, 3072, 4096)}
    assert {(s.op, s.N) for s in device if s.dtype == torch.float32} == {
        ("rms", 1024), ("ln", 1024)}
    assert {s.M for s in device} == {devcheck.DEVICE_M}
    assert {s.M for s in devcheck.default_shapes(interpreted=True)} == {devcheck.INTERPRETED_M}
    assert len(devcheck.default_shapes(interpreted=False, quick=True)) == 4
