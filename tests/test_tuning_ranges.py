"""Every tuning knob declares its range beside its default (`plan.knobs.knob`), and a value
out of it is one ValueError naming the knob where it is set, not a failure deep inside a
compile (issue 61)."""

import dataclasses
import math

import pytest

import inductor_ext
from inductor_ext.plan import knobs as tuning_mod
from inductor_ext.targets.ascend.tuning import AscendTuning
from inductor_ext.targets.cuda.tuning import CudaTuning

TUNINGS = {"cuda": CudaTuning, "ascend": AscendTuning}
KNOBS = [(target, field) for target, cls in TUNINGS.items()
         for field in dataclasses.fields(cls)]


def bad_values(declared: tuning_mod.Range) -> list[object]:
    """Values the range refuses: one of another type, and one past each bound it has."""
    if declared.kind is bool:
        return [1, "True"]
    if declared.choices:
        return [f"not_{declared.choices[0]}", 1]
    out: list[object] = [1.5 if declared.kind is int else "1"]
    step = 1 if declared.kind is int else 0.5
    if declared.low is not None:
        out.append(declared.low - step)
    if declared.above is not None:
        out.append(declared.above)
    if declared.high is not None:
        out.append(declared.high * 2 if declared.pow2 else declared.high + step)
    if declared.pow2:
        out.append(3 * max(1, int(declared.low or 1)))
    if declared.kind is float:
        out.append(math.nan)
    return out


BAD = [pytest.param(target, field.name, value, id=f"{target}-{field.name}-{value!r}")
       for target, field in KNOBS
       for value in bad_values(tuning_mod.range_of(field) or tuning_mod.Range(kind=object))]


def _refused(target: str, name: str, value: object) -> list[str]:
    """The messages of setting the knob by `patch` and by assignment; neither is set."""
    before = dict(inductor_ext.config.tuning)
    messages = []
    with pytest.raises(ValueError) as patched:  # the call itself, before any block runs
        inductor_ext.config.patch(tuning={target: {name: value}})
    messages.append(str(patched.value))
    with pytest.raises(ValueError) as assigned:
        inductor_ext.config.tuning = {target: {name: value}}
    messages.append(str(assigned.value))
    assert inductor_ext.config.tuning == before
    for message in messages:
        assert "\n" not in message and len(message) < 400, message
    return messages


def test_every_knob_declares_its_range():
    """A knob added without a range (a plain `x: int = 3`) fails here; the defaults are in
    their ranges."""
    assert dict(tuning_mod.TUNINGS) == TUNINGS  # every registered target is covered
    undeclared = [f"{target}.{field.name}" for target, field in KNOBS
                  if tuning_mod.range_of(field) is None]
    assert undeclared == []
    for target, cls in TUNINGS.items():
        assert cls.TARGET == target
        assert tuning_mod.make(target) == cls()


def test_a_knob_without_a_range_or_out_of_it_is_refused_where_declared():
    with pytest.raises(TypeError, match="needs its range"):
        tuning_mod.knob(3)
    with pytest.raises(TypeError, match="needs its choices"):
        tuning_mod.knob("strided")
    with pytest.raises(TypeError, match="outside its range"):
        tuning_mod.knob(3, pow2=True)
    assert tuning_mod.range_of(dataclasses.fields(CudaTuning)[0]) is not None


@pytest.mark.parametrize("target,name,value,want", [
    ("ascend", "npu_max_configs", 0, "an int >= 1"),  # was an IndexError mid-compile
    ("ascend", "npu_max_configs", -1, "an int >= 1"),  # was one config silently dropped
    ("ascend", "max_block_m", 0, "a power of two"),  # was a self-contradicting no_tile_fits
    ("ascend", "max_block_m", -4, "a power of two"),  # was accepted
    ("ascend", "max_block_m", 48, "a power of two"),
    ("ascend", "npu_max_column_tile", 0, "a power of two >= 256"),  # was a CompilationError
    ("ascend", "ascend950_kernel_ub_bytes", 0, "an int >= 4096"),  # was accepted
    ("ascend", "hbm_efficiency", 0.0, "a number in (0, 1]"),
    ("ascend", "unbuffered_slowdown", 0.5, "a number >= 1"),
    ("cuda", "tile_elems", 6000, "a power of two"),
    ("cuda", "kept_row_tile", 3, "0 or a power of two"),
    ("cuda", "final_step_warps", 64, "a power of two <= 32"),
    ("cuda", "load_round_trip_s", 0, "a number > 0"),
    ("cuda", "row_order", "diagonal", "'strided' or 'contiguous'"),
])
def test_the_reported_bad_values_are_named_with_their_range(target, name, value, want):
    for message in _refused(target, name, value):
        assert message == (f"inductor_ext.config.tuning[{target!r}][{name!r}] must be "
                           f"{want}, got {value!r}")


@pytest.mark.parametrize("target,name,value", BAD)
def test_a_bad_value_of_every_knob_is_named_where_it_is_set(target, name, value):
    for message in _refused(target, name, value):
        assert message.startswith(f"inductor_ext.config.tuning[{target!r}][{name!r}] must be ")
        assert message.endswith(f", got {value!r}")


def test_a_bad_knob_changed_in_place_is_named_at_compile():
    """The setter cannot see a dict changed in place: validate() (every compile) can."""
    with inductor_ext.config.patch(tuning={}):
        inductor_ext.config.tuning["ascend"] = {"npu_max_configs": 0}
        with pytest.raises(ValueError, match=r"\['npu_max_configs'\] must be an int >= 1"):
            inductor_ext.config.validate()


def test_planning_code_cannot_make_a_tuning_out_of_range_either():
    with pytest.raises(ValueError, match=r"\['register_tile'\] must be a power of two"):
        dataclasses.replace(CudaTuning(), register_tile=3000)


def test_bench_settings_are_checked_against_the_ranges():
    with pytest.raises(ValueError, match=r"\['npu_max_configs'\] must be an int >= 1, got 0"):
        tuning_mod.parse_settings("ascend", "npu_max_configs=0")
    with pytest.raises(ValueError, match="did you mean 'tile_elems'"):
        tuning_mod.parse_settings("cuda", "tile_elem=8192")


@pytest.mark.parametrize("target,name,closest", [
    ("ascend", "npu_max_config", "npu_max_configs"),
    ("ascend", "max_blockm", "max_block_m"),
    ("cuda", "register_tiles", "register_tile"),
    ("cuda", "tile_elem", "tile_elems"),
    ("cuda", "rowOrder", "row_order"),
])
def test_an_unknown_knob_names_the_closest_ones(target, name, closest):
    for message in _refused(target, name, 1):
        assert message.startswith(f"inductor_ext.config.tuning[{target!r}]: unknown knob "
                                  f"{name!r}; did you mean {closest!r}")


@pytest.mark.parametrize("name", ["zzz", "x" * 1000])
def test_an_unknown_knob_with_none_close_names_where_the_knobs_are(name):
    for message in _refused("cuda", name, 1):
        assert "unknown knob" in message
        assert message.endswith("the knobs are the fields of "
                                "inductor_ext.targets.cuda.tuning.CudaTuning")
