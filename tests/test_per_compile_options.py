"""Options for one compile: ``torch.compile(fn, options=inductor_ext.options(**overrides))``.

The overrides ride on a pass object of their own, are in force only while that pass runs,
are checked at the ``options(...)`` call, and are part of the FX graph cache key."""

import pytest
import torch
import torch._inductor.config as inductor_config
from torch._dynamo.utils import counters

import inductor_ext
from inductor_ext import compat, plugin
from tests.support.reference import assert_close

#: A tuning under which the cost model declines the tiny norm below (at the default tuning
#: the interpreted device finds even it profitable).
UNPROFITABLE = {"cuda": {"min_rows_per_program": 1 << 20}}


@pytest.fixture(autouse=True)
def _not_forced():
    """The plugin off and fusion not forced globally (whatever INDUCTOR_EXT_ALWAYS_FUSE
    says): only what a compile's options ask for applies."""
    inductor_ext.disable()
    with inductor_ext.config.patch(always_fuse=False):
        yield
    inductor_ext.disable()


@pytest.fixture
def unprofitable():
    """Globally, a tuning that makes the tiny norm not worth fusing."""
    with inductor_ext.config.patch(tuning=UNPROFITABLE):
        yield


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.RMSNorm(40)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def _grads(opts, compiled=True):
    """(dx, dw) of a tiny RMSNorm, compiled with `opts` (counters zeroed first)."""
    torch.manual_seed(0)
    model = Model()
    with torch.no_grad():
        model.norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(64, 40, requires_grad=True)
    dy = torch.randn(64, 40)
    torch._dynamo.reset()
    inductor_ext.metrics.reset()
    run = torch.compile(model, options=opts) if compiled else model
    run(x).backward(dy)
    return x.grad, model.norm.weight.grad


def test_the_overrides_apply_to_that_compile_only(interp, unprofitable):
    before = inductor_ext.config.get_config_copy()
    eager = _grads(None, compiled=False)

    got = _grads(inductor_ext.options(always_fuse=True))
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert inductor_ext.metrics.norms == {"found": 1, "fused": 1}
    assert_close(got, eager, ["dx", "dw"])
    assert inductor_ext.config.always_fuse is False
    assert inductor_ext.config.get_config_copy() == before

    got = _grads(inductor_ext.options())  # the same compile without the override: declined
    assert inductor_ext.metrics.mix_order_kernels == 0
    assert inductor_ext.metrics.norms_declined == {"not_profitable": 1}
    assert_close(got, eager, ["dx", "dw"])


def test_overrides_of_other_options(interp):
    """tuning and exclude_modules for one compile; the default compile around them fuses."""
    _grads(inductor_ext.options(tuning=UNPROFITABLE))
    assert inductor_ext.metrics.norms_declined == {"not_profitable": 1}
    _grads(inductor_ext.options(always_fuse=True, tuning=UNPROFITABLE))
    assert inductor_ext.metrics.mix_order_kernels == 1
    _grads(inductor_ext.options(exclude_modules=["norm"]))
    assert inductor_ext.metrics.norms_declined == {"excluded_by_config": 1}
    _grads(inductor_ext.options())
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert (inductor_ext.config.tuning, inductor_ext.config.exclude_modules) == ({}, [])


def test_overrides_beside_enable(interp, unprofitable):
    """enable() for every compile; one compile's options still add their overrides."""
    inductor_ext.enable()
    _grads(inductor_ext.options(always_fuse=True))
    assert inductor_ext.metrics.mix_order_kernels == 1
    _grads(None)  # the global pass: the global options
    assert inductor_ext.metrics.norms_declined == {"not_profitable": 1}
    assert inductor_config._post_fusion_custom_pass is plugin.MIX_ORDER_PASS


def test_the_fx_graph_cache_tells_override_sets_apart(interp, unprofitable, tmp_path,
                                                       monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    with inductor_config.patch(fx_graph_cache=True, force_disable_caches=False):
        _grads(inductor_ext.options(always_fuse=True))
        assert inductor_ext.metrics.mix_order_kernels == 1
        hits = counters["inductor"]["fxgraph_cache_hit"]
        _grads(inductor_ext.options())  # another key: compiled afresh, and declined
        assert counters["inductor"]["fxgraph_cache_hit"] == hits
        assert inductor_ext.metrics.norms_declined == {"not_profitable": 1}
        _grads(inductor_ext.options(always_fuse=True))  # the first key again: a hit
        assert counters["inductor"]["fxgraph_cache_hit"] > hits
        assert inductor_ext.metrics.mix_order_kernels == 1  # replayed from the entry


def test_an_unknown_option_is_named_at_the_call():
    with pytest.raises(TypeError, match=r"^inductor_ext\.options\(\): 'no_such_option' is "
                                        r"not an inductor_ext option; the options are "
                                        r"always_fuse, "):
        inductor_ext.options(no_such_option=1)


@pytest.mark.parametrize("option,value,message", [
    ("always_fuse", "yes", "must be a bool, got 'yes'"),
    ("exclude_modules", "model.norm", "must be a list of non-empty str patterns"),
    ("split_size", 0, "must be None or a positive int, got 0"),
    ("tuning", {"tpu": {}}, "unknown target 'tpu'"),
])
def test_a_bad_value_is_named_at_the_call(option, value, message):
    with pytest.raises(ValueError, match=rf"^inductor_ext\.config\.{option}\b.*{message}"):
        inductor_ext.options(**{option: value})


def test_an_option_read_before_the_pass_is_refused_for_one_compile():
    with pytest.raises(ValueError, match=r"decompose_npu_rms_norm is read while the graph "
                                         r"is traced.*inductor_ext\.config\.patch"):
        inductor_ext.options(decompose_npu_rms_norm=True)


def test_no_arguments_is_what_it_always_was():
    opts = inductor_ext.options()
    assert opts[plugin._PASS_KEY] is plugin.MIX_ORDER_PASS
    expected = {plugin._PASS_KEY}
    if compat.CACHE_KEY_CARRIER_KEY:
        assert opts[compat.CACHE_KEY_CARRIER_KEY] is plugin._CARRIER
        expected.add(compat.CACHE_KEY_CARRIER_KEY)
    if compat.has_upstream_mix_order():
        assert opts[compat.UPSTREAM_MIX_ORDER_KEY] is False
        expected.add(compat.UPSTREAM_MIX_ORDER_KEY)
    assert set(opts) == expected
    assert plugin.MIX_ORDER_PASS.overrides == {}


def test_the_same_keys_with_overrides():
    plain, opts = inductor_ext.options(), inductor_ext.options(always_fuse=True)
    assert set(opts) == set(plain)
    pass_ = opts[plugin._PASS_KEY]
    assert isinstance(pass_, inductor_ext.MixOrderPass) and pass_ is not plugin.MIX_ORDER_PASS
    assert pass_.overrides == {"always_fuse": True}
    assert repr(pass_) == "MixOrderPass(always_fuse=True)"
    if compat.CACHE_KEY_CARRIER_KEY:  # torch 2.11: a carrier of this pass's uuid
        assert opts[compat.CACHE_KEY_CARRIER_KEY].uuid() == pass_.uuid()


def test_the_uuid_hashes_the_overrides():
    plain = plugin.MIX_ORDER_PASS.uuid()
    fuse = inductor_ext.options(always_fuse=True)[plugin._PASS_KEY].uuid()
    excluded = inductor_ext.options(exclude_modules=["layers.0.*"])[plugin._PASS_KEY].uuid()
    assert len({plain, fuse, excluded}) == 3
    assert inductor_ext.options(always_fuse=True)[plugin._PASS_KEY].uuid() == fuse
    # what a compile runs with decides: the same values set globally give the same key
    with inductor_ext.config.patch(always_fuse=True):
        assert plugin.MIX_ORDER_PASS.uuid() == fuse


def test_a_list_changed_after_the_call_does_not_reach_the_pass():
    patterns = ["layers.0.*"]
    pass_ = inductor_ext.options(exclude_modules=patterns)[plugin._PASS_KEY]
    patterns.append("*.q_norm")
    assert pass_.overrides == {"exclude_modules": ["layers.0.*"]}
