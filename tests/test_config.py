"""Turning the plugin on and off, options, validation, the entry point and the cache key."""

import os
import subprocess
import sys

import pytest
import torch
import torch._inductor.config as inductor_config

import inductor_ext
from inductor_ext import compat
from tests.support.reference import rms_backward


@pytest.fixture(autouse=True)
def _off():
    inductor_ext.disable()
    yield
    inductor_ext.disable()


def test_enable_disable_idempotent_and_upstream_exclusive():
    has_upstream = compat.has_upstream_mix_order()
    before = inductor_config.triton.mix_order_reduction if has_upstream else None
    inductor_ext.enable()
    inductor_ext.enable()
    assert inductor_ext.is_enabled()
    assert isinstance(inductor_config._post_fusion_custom_pass, inductor_ext.MixOrderPass)
    if has_upstream:
        assert inductor_config.triton.mix_order_reduction is False
    inductor_ext.disable()
    inductor_ext.disable()
    assert not inductor_ext.is_enabled()
    assert inductor_config._post_fusion_custom_pass is None
    if has_upstream:
        assert inductor_config.triton.mix_order_reduction == before


def test_options_dict():
    opts = inductor_ext.options()
    assert isinstance(opts["_post_fusion_custom_pass"], inductor_ext.MixOrderPass)
    if compat.has_upstream_mix_order():
        assert opts["triton.mix_order_reduction"] is False


def test_enable_refuses_a_foreign_pass():
    with inductor_config.patch(_post_fusion_custom_pass=lambda nodes: nodes):
        with pytest.raises(RuntimeError, match="_post_fusion_custom_pass"):
            inductor_ext.enable()


def _rms_inputs():
    return torch.randn(64, 40), torch.randn(40), torch.randn(64, 40), torch.rand(64, 1) + 0.5


def test_torch_compile_options(interp):
    with inductor_ext.config.patch(always_fuse=True):
        torch.compile(rms_backward, options=inductor_ext.options())(*_rms_inputs())
    assert inductor_ext.metrics.mix_order_kernels == 1


def test_enable_for_all_compiles(interp):
    inductor_ext.enable()
    with inductor_ext.config.patch(always_fuse=True):
        torch.compile(rms_backward)(*_rms_inputs())
    assert inductor_ext.metrics.mix_order_kernels == 1


_BAD = [
    ("split_size", 0, "must be None or a positive int, got 0"),
    ("split_size", 2.5, "must be None or a positive int, got 2.5"),
    ("split_size", True, "must be None or a positive int, got True"),
    ("target", "tpu", r"must be one of \('auto', .*, got 'tpu'"),
    ("always_fuse", "yes", "must be a bool, got 'yes'"),
    ("decompose_npu_rms_norm", 1, "must be a bool, got 1"),
    ("max_persistent_n", -1, "must be a positive int, got -1"),
    ("max_persistent_n", None, "must be a positive int, got None"),
    ("ascend_vector_cores", 0, "must be None or a positive int, got 0"),
    ("ascend_ub_bytes", 1024, "must be None or an int >= 4096, got 1024"),
    ("tuning", {"cuda": {"register_tile": 1.5}}, r"\['register_tile'\] must be an int, got 1.5"),
    ("tuning", {"tpu": {}}, "unknown target 'tpu'"),
    ("exclude_modules", "model.norm", "must be a list of non-empty str patterns, got 'model.norm'"),
    ("exclude_modules", ("*.q_norm",), r"must be a list of .*, got \('\*\.q_norm',\)"),
    ("exclude_modules", ["*.q_norm", 3], r"must be a list of .*, got \['\*\.q_norm', 3\]"),
    ("exclude_modules", [""], r"must be a list of non-empty str patterns, got \[''\]"),
    ("exclude_norm_classes", "LayerNorm", r"must be a list of class names .*, got 'LayerNorm'"),
    ("exclude_norm_classes", ["torch.nn.LayerNorm"],
     r"as str without a module path \('LayerNorm', 'LlamaRMSNorm', '\*RMSNorm'\), "
     r"got \['torch\.nn\.LayerNorm'\]"),
    ("exclude_norm_classes", [torch.nn.LayerNorm],
     r"must be a list of class names .*, got \[<class 'torch\.nn\.modules\.normalization"
     r"\.LayerNorm'>\]"),
    ("exclude_norm_classes", ["RMSNorm", ""], r"must be a list of class names .*, got "
     r"\['RMSNorm', ''\]"),
]


def _named(option: str, message: str) -> str:
    return rf"^inductor_ext\.config\.{option}\b.*{message}"


@pytest.mark.parametrize("option,value,message", _BAD)
def test_a_bad_assignment_raises_naming_the_option(option, value, message):
    before = getattr(inductor_ext.config, option)
    with pytest.raises(ValueError, match=_named(option, message)):
        setattr(inductor_ext.config, option, value)
    assert getattr(inductor_ext.config, option) == before  # nothing was set


@pytest.mark.parametrize("option,value,message", _BAD)
def test_a_bad_patch_raises_where_it_is_written(option, value, message):
    """At the patch() call, before its block or the function it decorates runs; every
    spelling of patch."""
    with pytest.raises(ValueError, match=_named(option, message)):
        inductor_ext.config.patch(**{option: value})
    with pytest.raises(ValueError, match=_named(option, message)):
        inductor_ext.config.patch({option: value})
    if value is not None:
        with pytest.raises(ValueError, match=_named(option, message)):
            inductor_ext.config.patch(option, value)


def test_good_values_set_and_restore():
    config = inductor_ext.config
    with config.patch(split_size=256, target="cuda", ascend_ub_bytes=4096,
                      tuning={"cuda": {"programs_per_sm": 2}}):
        assert (config.split_size, config.target, config.ascend_ub_bytes) == (256, "cuda", 4096)
        config.validate()
    assert (config.split_size, config.target, config.tuning) == (None, "auto", {})
    config.max_persistent_n = 8192
    try:
        assert config.max_persistent_n == 8192
    finally:
        config.max_persistent_n = 16384


def test_options_are_the_annotated_values_only():
    """Module-level names that are not options (typing's TYPE_CHECKING was one) stay out of
    the config, its patch and the cache key."""
    assert sorted(inductor_ext.config.get_config_copy()) == sorted([
        "always_fuse", "split_size", "target", "max_persistent_n", "ascend_vector_cores",
        "ascend_ub_bytes", "decompose_npu_rms_norm", "exclude_modules",
        "exclude_norm_classes", "tuning"])


def test_a_value_changed_in_place_is_caught_at_compile(interp):
    """The setter cannot see a `tuning` dict changed in place: validate() at compile is
    the backstop, and still names the option."""
    with inductor_ext.config.patch(tuning={}):
        inductor_ext.config.tuning["tpu"] = {}
        with pytest.raises(Exception, match=r"inductor_ext\.config\.tuning: unknown target"):
            torch.compile(rms_backward, options=inductor_ext.options())(*_rms_inputs())


def test_a_patch_over_a_bad_environment_default_restores_it():
    """A default from a bad variable is restored on leaving a patch, and validate() names
    the variable."""
    res = _python("import inductor_ext\n"
                  "with inductor_ext.config.patch(target='cuda'):\n"
                  "    inductor_ext.config.validate()\n"
                  "print(inductor_ext.config.target)\n"
                  "inductor_ext.config.validate()\n", INDUCTOR_EXT_TARGET="tpu")
    assert res.stdout.strip() == "tpu", res.stderr
    assert "got 'tpu' (from INDUCTOR_EXT_TARGET)" in res.stderr


def test_uuid_tracks_options():
    p = inductor_ext.MixOrderPass()
    base = p.uuid()
    assert base == p.uuid()
    with inductor_ext.config.patch(always_fuse=True):
        assert p.uuid() != base
    with inductor_ext.config.patch(exclude_modules=["layers.0.*"]):
        assert p.uuid() != base


def _python(code: str, **env) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True,
                          text=True, timeout=300)


def test_env_var_enables_through_entry_point():
    code = ("import torch, torch._inductor.config as c; "
            "print(type(c._post_fusion_custom_pass).__name__)")
    on = _python(code, INDUCTOR_EXT="1")
    assert on.returncode == 0, on.stderr
    assert on.stdout.strip() == "MixOrderPass"
    off = _python(code, INDUCTOR_EXT="0")
    assert off.stdout.strip() == "NoneType"


@pytest.mark.parametrize("first", [
    "import torch; import inductor_ext",
    "import inductor_ext; import torch",
    "from inductor_ext.interpreter import cpu_interpret; import inductor_ext",
], ids=["torch_first", "plugin_first", "submodule_first"])
def test_env_var_enables_whatever_is_imported_first(first):
    """Imported before torch, the package is still loading when torch runs the entry point:
    it enables itself once loaded, without a warning."""
    res = _python(f"{first}; import torch._inductor.config as c; "
                  "print(inductor_ext.is_enabled(), type(c._post_fusion_custom_pass).__name__)",
                  INDUCTOR_EXT="1")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "MixOrderPass"]
    assert "enabling failed" not in res.stderr and "RuntimeWarning" not in res.stderr


def test_env_check_says_enabled_under_the_env_var():
    res = _python("import runpy; runpy.run_module('inductor_ext', run_name='__main__')",
                  INDUCTOR_EXT="1")
    assert res.returncode == 0, res.stderr
    assert "plugin: enabled" in res.stdout.splitlines()


def test_env_var_failure_warns_and_import_torch_still_works():
    code = "import torch; print('imported', torch.__version__)"
    res = _python(code, INDUCTOR_EXT="1", INDUCTOR_EXT_TARGET="not-a-target")
    assert res.returncode == 0, res.stderr
    assert "imported" in res.stdout
    assert "inductor_ext" in res.stderr and "target" in res.stderr


@pytest.mark.parametrize("value,enabled", [("true", True), ("Yes", True), ("ON", True),
                                           ("1", True), ("false", False), ("off", False),
                                           ("", False)])
def test_env_var_accepts_the_usual_spellings(monkeypatch, value, enabled):
    """The entry point's switch (the subprocess test above runs it from `import torch`)."""
    import warnings

    import inductor_ext_autoload

    monkeypatch.setenv("INDUCTOR_EXT", value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inductor_ext_autoload.load()
    assert inductor_ext.is_enabled() is enabled


def test_env_var_with_an_unknown_value_warns(monkeypatch):
    import inductor_ext_autoload

    monkeypatch.setenv("INDUCTOR_EXT", "maybe")
    with pytest.warns(RuntimeWarning, match="inductor_ext stays off: INDUCTOR_EXT='maybe' "
                                            "is not a boolean"):
        inductor_ext_autoload.load()
    assert not inductor_ext.is_enabled()


@pytest.mark.parametrize("value,expected", [("true", True), ("no", False), ("maybe", None)])
def test_always_fuse_env_var_is_parsed_and_named_in_errors(monkeypatch, value, expected):
    from inductor_ext import envvars

    monkeypatch.setattr(envvars, "ERRORS", {})
    monkeypatch.setenv("INDUCTOR_EXT_ALWAYS_FUSE", value)
    default = envvars.flag("always_fuse", "INDUCTOR_EXT_ALWAYS_FUSE", False)
    if expected is None:
        with pytest.raises(ValueError, match="INDUCTOR_EXT_ALWAYS_FUSE='maybe' is not a "
                                             "boolean"):
            inductor_ext.config.validate()
    else:
        assert default is expected
        inductor_ext.config.validate()


def test_bad_env_vars_are_named_when_the_options_are_used():
    """Read at import (never failing there), raised when the options are first used."""
    res = _python("import inductor_ext\ntry:\n    inductor_ext.options()\n"
                  "except ValueError as e:\n    print(e)\n",
                  INDUCTOR_EXT_ALWAYS_FUSE="maybe")
    assert "INDUCTOR_EXT_ALWAYS_FUSE='maybe' is not a boolean" in res.stdout, res.stderr
    res = _python("import inductor_ext; inductor_ext.options()", INDUCTOR_EXT_TARGET="tpu")
    assert res.returncode != 0 and "(from INDUCTOR_EXT_TARGET)" in res.stderr
