"""`python -m inductor_ext`: --version, and the environment check's content."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import types

import pytest
import torch
import torch._inductor.config as inductor_config

import inductor_ext
from inductor_ext import __main__ as cli
from inductor_ext import compat, envvars
from inductor_ext.targets.ascend import environment as npu_environment
from tests.support.reference import rms_norm


@pytest.fixture(autouse=True)
def _off():
    inductor_ext.disable()
    yield
    inductor_ext.disable()


def _env() -> str:
    return "\n".join(cli.environment())


def test_version_from_the_command_line():
    res = subprocess.run([sys.executable, "-m", "inductor_ext", "--version"],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"inductor_ext {inductor_ext.__version__}"


def test_no_arguments_and_env_print_the_check(capsys):
    assert cli.main([]) == 0
    plain = capsys.readouterr().out
    assert cli.main(["--env"]) == 0
    assert capsys.readouterr().out == plain
    assert plain.startswith(f"inductor_ext: {inductor_ext.__version__} (")


def test_versions():
    out = _env()
    assert f"python: {platform.python_version()} " in out
    assert f"torch: {torch.__version__} (" in out
    lo, hi = compat.SUPPORTED_TORCH
    assert f"supported: {lo[0]}.{lo[1]}-{hi[0]}.{hi[1]})" in out
    import triton
    assert f"triton: {triton.__version__} (" in out
    assert "torch_npu: " in out and "transformers: " in out


def test_triton_ascend_is_named(monkeypatch):
    real = cli.installed_version
    monkeypatch.setattr(cli, "installed_version",
                        lambda *names: "3.2.0" if "triton-ascend" in names else real(*names))
    assert "(triton-ascend 3.2.0: Ascend's Triton)" in _env()


def test_cpu_says_where_the_plugin_acts():
    with inductor_config.patch(cpu_backend="cpp"):
        out = _env()
    assert "cpu: Inductor's 'cpp' backend (C++): the plugin does not act there" in out
    with inductor_config.patch(cpu_backend="triton"), inductor_ext.config.patch(target="ascend"):
        out = _env()
    assert "cpu: Inductor's Triton CPU backend (cpu_backend='triton'): target 'ascend'" in out


def test_cpu_hint_followed_literally_fuses():
    """The C++ backend's hint names what runs the plugin on CPU: the context manager it
    names, entered as written (TRITON_INTERPRET=1 is set for this suite), fuses a norm."""
    import importlib
    import re

    with inductor_config.patch(cpu_backend="cpp"):
        out = _env()
    assert "TRITON_INTERPRET=1" in out
    named = re.search(r"with (inductor_ext\.[\w.]+)\(\):", out)
    assert named, out
    module, _, attr = named.group(1).rpartition(".")
    context = getattr(importlib.import_module(module), attr)
    x = torch.randn(8, 16, requires_grad=True)
    w = torch.randn(16, requires_grad=True)
    torch._dynamo.reset()
    inductor_ext.metrics.reset()
    with context(), torch._inductor.config.patch(inductor_ext.options()), \
            inductor_ext.config.patch(always_fuse=True):
        torch.compile(rms_norm)(x, w).sum().backward()
    assert inductor_ext.metrics.mix_order_kernels == 1


def test_each_targets_device_type_is_listed():
    out = _env()
    for device_type in ("cuda", "npu"):
        assert f"\n  {device_type}: " in out or f"\n  {device_type}:0: " in out


def test_upstream_mix_order_and_enabled():
    out = _env()
    assert "plugin: disabled" in out
    if compat.has_upstream_mix_order():
        assert f"{compat.UPSTREAM_MIX_ORDER_KEY}=" in out
    else:
        assert "upstream mix-order reduction: not in this torch" in out
    inductor_ext.enable()
    out = _env()
    assert "plugin: enabled" in out
    if compat.has_upstream_mix_order():
        assert f"{compat.UPSTREAM_MIX_ORDER_KEY}=False (the plugin turns it off while on)" in out


def test_options_in_effect():
    with inductor_ext.config.patch(split_size=256, tuning={"cuda": {"programs_per_sm": 2}}):
        out = _env()
    section = out.split("options (inductor_ext.config):\n", 1)[1]
    assert "  split_size = 256\n" in section
    assert "  tuning = {'cuda': {'programs_per_sm': 2}}" in section
    for name in inductor_ext.config.get_config_copy():
        assert f"  {name} = " in section
    assert "INVALID" not in section


def test_a_bad_environment_variable_is_shown(monkeypatch):
    monkeypatch.setitem(envvars.ERRORS, "INDUCTOR_EXT_ALWAYS_FUSE",
                        "INDUCTOR_EXT_ALWAYS_FUSE='maybe' is not a boolean")
    assert "  INVALID: inductor_ext: INDUCTOR_EXT_ALWAYS_FUSE='maybe'" in _env()


def test_torch_npu_that_fails_to_import_is_not_imported(monkeypatch):
    """Without CANN, importing torch_npu can abort: the child process takes that."""
    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    monkeypatch.setattr(npu_environment.importlib.util, "find_spec",
                        lambda name: object() if name == "torch_npu" else None)
    failed = subprocess.CompletedProcess([], 134, "", "Traceback ...\n"
                                         "ImportError: libhccl.so: cannot open shared object")
    monkeypatch.setattr(npu_environment.subprocess, "run", lambda *a, **k: failed)
    out = _env()
    assert ("torch_npu: installed, but its import fails: ImportError: libhccl.so: cannot "
            "open shared object") in out
    assert "torch_npu" not in sys.modules


def test_torch_npu_not_installed(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    monkeypatch.setattr(npu_environment.importlib.util, "find_spec", lambda name: None)
    assert "torch_npu: not installed" in _env()


def test_a_loaded_torch_npu_is_reported(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_npu", types.SimpleNamespace(__version__="2.14.0"))
    monkeypatch.setenv("TORCHINDUCTOR_NPU_BACKEND", "default")
    assert "torch_npu: 2.14.0 (TORCHINDUCTOR_NPU_BACKEND=default)" in _env()
