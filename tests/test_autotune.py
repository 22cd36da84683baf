"""Which launch configs Inductor's autotuner gets to time: the planned waves; and which fused
kernels it gets at all (persistent and register-tiled ones with their configs attached,
not those that accumulate into the workspace, one fixed config in deterministic mode)."""

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._inductor.runtime.hints import DeviceProperties
from torch._inductor.runtime.triton_heuristics import CachingAutotuner
from torch._inductor.utils import run_and_get_code
from triton import Config

import inductor_ext
from inductor_ext.plan import DeviceInfo, LaunchPlan, PlanOptions, ShapeInfo
from inductor_ext.runtime import autotune
from inductor_ext.targets.cuda import plan as cuda_plan
from inductor_ext.targets.cuda.tuning import CudaTuning
from tests.support.fused_kernels import register_tiled as _register_tiled
from tests.support.fused_kernels import rms_inputs as _inputs
from tests.support.poison import poisoned_allocations
from tests.support.reference import (
    assert_close,
    autograd_grads,
    float64_grads,
    layer_norm,
    rms_backward,
    rms_norm,
)

#: An H100's limits, as Inductor's DeviceProperties carries them.
H100 = DeviceProperties(type="cuda", index=0, multi_processor_count=132, cc=90, major=9,
                        regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048,
                        max_threads_per_block=1024, warp_size=32)

#: The same H100 as planning sees it (registers and L1 decide the tiles).
H100_INFO = DeviceInfo(type="cuda", name="NVIDIA H100 80GB HBM3", cores=132,
                       l2_bytes=50 * 2**20, register_file_bytes=4 * 65536,
                       l1_bytes=256 * 1024, dram_bytes_per_s=3.352e12, capability=(9, 0))


class _Launcher:
    """What the filter reads of Inductor's launchers: the config and the registers."""

    def __init__(self, xblock: int, num_warps: int, n_regs: int | None,
                 n_spills: int | None = 0) -> None:
        self.config = Config({"XBLOCK": xblock}, num_warps=num_warps)
        self.n_regs = n_regs
        self.n_spills = n_spills


_launcher = _Launcher


def _plan(programs: int, max_extra_waves: int | None) -> LaunchPlan:
    return LaunchPlan(target="cuda", programs=programs, block_m=2, r0_block=4096,
                      num_warps=8, num_stages=1, row_loop="strided",
                      max_extra_waves=max_extra_waves)


#: LayerNorm 4096x4096 bf16 on the H100 (bench/results/autotune_configs_h100.csv):
#: (rows per iteration, warps, registers).
LN_4096 = [(2, 8, 225), (2, 16, 122), (1, 4, 251), (1, 8, 128), (1, 16, 80)]


def test_programs_per_sm_follow_registers_and_threads():
    # 128 registers x 256 threads: two programs fill the 64K register file
    assert autotune.resident_per_sm(128, 8, H100) == 2
    # 225 registers round up to 232 per thread (256 per warp): one program of 8 warps
    assert autotune.resident_per_sm(225, 8, H100) == 1
    # few registers: the 2048 thread slots bound it
    assert autotune.resident_per_sm(32, 4, H100) == 16
    # 255 registers x 1024 threads fit nowhere: unknown rather than zero
    assert autotune.resident_per_sm(255, 32, H100) is None
    assert autotune.resident_per_sm(None, 8, H100) is None
    assert autotune.waves(256, 128, 8, H100) == 1
    assert autotune.waves(256, 122, 16, H100) == 2


def test_configs_beyond_the_planned_waves_are_not_timed():
    launchers = [_launcher(*c) for c in LN_4096]
    kept = autotune.within_planned_waves(launchers, _plan(256, 0),
                                         H100)
    assert [(k.config.kwargs["XBLOCK"], k.config.num_warps) for k in kept] == [(1, 4), (1, 8)]
    # one extra wave allowed (a long kernel): all five are timed
    assert autotune.within_planned_waves(
        launchers, _plan(256, 1), H100) == launchers
    # no allowance in the plan (one config, or an older plan): untouched
    assert autotune.within_planned_waves(launchers, _plan(256, None), H100) == launchers


def test_unknown_registers_are_kept_and_nothing_is_emptied():
    unknown = _launcher(2, 8, None)
    launchers = [_launcher(2, 8, 225), unknown, _launcher(1, 8, 128)]
    kept = autotune.within_planned_waves(launchers, _plan(256, 0),
                                         H100)
    assert kept == [unknown, launchers[2]]
    cpu = DeviceProperties(type="cpu", index=None, multi_processor_count=2, cc="")
    assert autotune.within_planned_waves(
        launchers, _plan(256, 0), cpu) == launchers


#: Qwen3's q-norm + RoPE backward, 131072x128 bf16 at 512 programs, as compiled for the
#: H100: (rows per iteration, warps, registers, spilled registers).
#: The two spilling configs fit 4 programs per SM, one wave; the others need two or four.
QWEN3_Q_NORM = [(64, 8, 255, 200), (32, 8, 242, 0), (32, 16, 125, 0), (16, 2, 255, 60),
                (16, 4, 242, 0), (16, 8, 128, 0)]


def test_spilling_configs_set_no_wave_minimum(caplog):
    """Inductor times a config that spills as `inf`: keeping only spilling configs (the
    fewest waves) would leave it nothing to choose from, a blind pick."""
    launchers = [_launcher(*c) for c in QWEN3_Q_NORM]
    with caplog.at_level("DEBUG", logger="inductor_ext"):
        kept = autotune.within_planned_waves(launchers, _plan(512, 0), H100)
    assert [(k.config.kwargs["XBLOCK"], k.config.num_warps) for k in kept] == [(16, 4), (16, 8)]
    (dropped,) = [r.getMessage() for r in caplog.records if "spill" in r.getMessage()]
    assert dropped.endswith("configs [XBLOCK=64, num_warps=8, regs=255, spills=200] "
                            "[XBLOCK=16, num_warps=2, regs=255, spills=60] spill registers; "
                            "not timed")
    # a spill within Inductor's threshold is no spill
    assert autotune.within_planned_waves(launchers, _plan(512, 0), H100,
                                         spill_threshold=255) == [launchers[3]]
    # every config spills: only the fewest spilling are timed, then the wave filter
    spilling = [launchers[0], launchers[3]]
    assert autotune.within_planned_waves(spilling, _plan(512, 0), H100) == [launchers[3]]


def test_when_every_config_spills_the_fewest_spilling_are_kept(caplog):
    """Inductor times each spilling config as `inf` and takes the first, so the pick would
    be the list's order; timing only the fewest spilling makes it a rule."""
    launchers = [_launcher(1, 16, 255, 216), _launcher(1, 8, 255, 38),
                 _launcher(1, 4, 255, 38), _launcher(2, 16, 255, 172)]
    with caplog.at_level("DEBUG", logger="inductor_ext"):
        kept = autotune.within_planned_waves(launchers, _plan(132, 4), H100)
    assert kept == [launchers[1], launchers[2]]
    (message,) = [r.getMessage() for r in caplog.records if "every config" in r.getMessage()]
    assert message.endswith("timing only the fewest spilling, [XBLOCK=1, num_warps=8, "
                            "regs=255, spills=38] [XBLOCK=1, num_warps=4, regs=255, "
                            "spills=38]")
    # the wave filter still applies among them: 4 warps of 255 registers hold two programs
    # an SM, 8 warps one (264 programs: one wave against two)
    assert autotune.within_planned_waves(launchers, _plan(264, 0), H100) == [launchers[2]]


def test_the_benchmark_step_reads_inductors_spill_threshold():
    launchers = [_launcher(*c) for c in QWEN3_Q_NORM]
    meta = {autotune.PLAN_KEY: _plan(512, 0).to_meta()}
    timed = _Tuner(launchers, meta).benchmark_all_configs()
    assert [(k.config.kwargs["XBLOCK"], k.config.num_warps) for k in timed] == [(16, 4), (16, 8)]
    timed = _Tuner(launchers, {**meta, "spill_threshold": 255}).benchmark_all_configs()
    assert [(k.config.kwargs["XBLOCK"], k.config.num_warps) for k in timed] == [(16, 2)]


def _shape(M: int, N: int, elem_bytes: int) -> ShapeInfo:
    nbytes = 3 * M * N * elem_bytes
    return ShapeInfo(M_hint=M, M_static=True, N=N, num_columns=2, elem_bytes=elem_bytes,
                     shared_bytes=2 * M * N * elem_bytes, total_bytes=nbytes,
                     unfused_bytes=nbytes * 5 // 3, row_elem_bytes=elem_bytes,
                     device=torch.device("cpu"))


def test_short_kernels_allow_no_extra_wave_and_long_ones_several():
    h100 = DeviceInfo(type="cuda", cores=132, dram_bytes_per_s=2.0e12, capability=(9, 0))
    tuning = CudaTuning()
    assert cuda_plan.extra_waves_allowed(_shape(4096, 4096, 2), h100, tuning, 256) == 0
    assert cuda_plan.extra_waves_allowed(_shape(576000, 384, 4), h100, tuning, 512) >= 4


class _StubAutotuner:
    """Stands in for Inductor's autotuner: times whatever launchers it is left with."""

    def benchmark_all_configs(self, *args, **kwargs):
        return {launcher: 1.0 for launcher in self.launchers}


class _Tuner(autotune._PlannedWaves, _StubAutotuner):
    def __init__(self, launchers, plan):
        self.launchers, self.inductor_meta, self.device_props = launchers, plan, H100


def test_the_benchmark_step_drops_configs_before_timing():
    launchers = [_launcher(*c) for c in LN_4096]
    tuner = _Tuner(launchers, {autotune.PLAN_KEY: _plan(256, 0).to_meta()})
    timed = tuner.benchmark_all_configs()
    assert [(k.config.kwargs["XBLOCK"], k.config.num_warps) for k in timed] == [(1, 4), (1, 8)]
    assert tuner.launchers == list(timed)
    # a kernel without our plan in its metadata is left alone
    assert len(_Tuner(launchers, {}).benchmark_all_configs()) == 5


def test_timed_configs_are_logged_fastest_first(caplog):
    """The config a fused kernel runs is logged with its registers and time: the one
    record that tells a slow kernel's config from the plan's (inductor_ext at DEBUG)."""
    launchers = [_launcher(*c) for c in LN_4096[2:4]]

    class _Base:
        def benchmark_all_configs(self, *args, **kwargs):
            return {launchers[0]: 0.25, launchers[1]: 0.125}

    tuner = type("T", (autotune._PlannedWaves, _Base), {})()
    tuner.launchers, tuner.device_props = launchers, H100
    tuner.inductor_meta = {autotune.PLAN_KEY: _plan(256, None).to_meta()}
    with caplog.at_level("DEBUG", logger="inductor_ext"):
        tuner.benchmark_all_configs()
    (line,) = [r.getMessage() for r in caplog.records if "timed" in r.getMessage()]
    assert line.endswith("256 programs: timed [XBLOCK=1, num_warps=8, regs=128] 0.125 ms; "
                         "[XBLOCK=1, num_warps=4, regs=251] 0.25 ms")


def test_fused_kernels_with_configs_get_our_autotuner(cuda_knobs, plugin, monkeypatch):
    """The plan carries the allowance and the fused kernel is built as a
    MixOrderAutotuner (the interpreter itself runs the first config untimed)."""
    cuda_knobs(autotune_on_cpu=True)
    kinds = []
    run = CachingAutotuner.run

    def recording_run(self, *args, **kwargs):
        if autotune.PLAN_KEY in self.inductor_meta:
            kinds.append(type(self))
        return run(self, *args, **kwargs)

    monkeypatch.setattr(CachingAutotuner, "run", recording_run)
    args = (torch.randn(256, 40), torch.randn(40), torch.randn(256, 40),
            torch.rand(256, 1) + 0.5)
    got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "'max_extra_waves': 0" in code
    assert kinds == [autotune.MixOrderAutotuner]
    assert_close(got, rms_backward(*[a.double() for a in args]))


@settings(max_examples=300, deadline=None)
@given(M=st.integers(1, 1 << 22), N=st.sampled_from([64, 256, 768, 1024, 4096, 8192, 16384]),
       elem_bytes=st.sampled_from([2, 4]), columns=st.integers(1, 3),
       tile_elems=st.sampled_from([1024, 4096, 8192, 32768, 131072]))
def test_a_plan_with_one_config_runs_that_config(M, N, elem_bytes, columns, tile_elems):
    """One config is not autotuned, so the kernel runs the plan's block_m and warps: they
    must be that config (else tile_elems 32768 at 65536x1024 leaves block_m 32 at 8 warps
    beside its one config, XBLOCK 8, and the kernel spills)."""
    nbytes = 3 * M * N * elem_bytes
    shape = ShapeInfo(M_hint=M, M_static=True, N=N, num_columns=columns,
                      elem_bytes=elem_bytes, shared_bytes=2 * M * N * elem_bytes,
                      total_bytes=nbytes, unfused_bytes=nbytes + 2 * M * N * elem_bytes,
                      row_elem_bytes=3 * elem_bytes, device=torch.device("cuda"))
    tuning = dataclasses.replace(CudaTuning(), tile_elems=tile_elems)
    plan = cuda_plan.plan(shape, H100_INFO, tuning, PlanOptions())
    if len(plan.configs) == 1:
        config = dict(plan.configs[0])
        assert (config["XBLOCK"], config["num_warps"]) == (plan.block_m, plan.num_warps)


def _ln_shape(M: int, N: int, elem_bytes: int = 2) -> ShapeInfo:
    """A LayerNorm backward's shape as the hook describes it (dw and db: two columns)."""
    nbytes = 3 * M * N * elem_bytes
    return ShapeInfo(M_hint=M, M_static=True, N=N, num_columns=2, elem_bytes=elem_bytes,
                     shared_bytes=2 * M * N * elem_bytes, total_bytes=nbytes,
                     unfused_bytes=nbytes + 2 * M * N * elem_bytes,
                     row_elem_bytes=3 * elem_bytes, device=torch.device("cuda"))


def test_persistent_rows_time_every_config_at_a_second_program_count():
    """ln 8192x2560 bf16 on the H100: about 4 and 3 programs per SM (4096 row blocks
    balanced: 8 and 11 each), every config at both (its 168-register configs fit 3
    blocks an SM)."""
    plan = cuda_plan.plan(_ln_shape(8192, 2560), H100_INFO, CudaTuning(), PlanOptions())
    assert plan.program_choices == (512, 373) and plan.programs == 512
    per_count = {count: sorted(c for c in plan.configs if plan.programs_of(c) == count)
                 for count in plan.program_choices}
    strip = [[item for item in c if item[0] != "RPROGRAMS"] for c in per_count[373]]
    assert strip == [[item for item in c if item[0] != "RPROGRAMS"] for c in per_count[512]]
    off = dataclasses.replace(CudaTuning(), fewer_programs_per_sm=0)
    plan_off = cuda_plan.plan(_ln_shape(8192, 2560), H100_INFO, off, PlanOptions())
    assert plan_off.program_choices == ()


def test_long_row_tiles_are_also_timed_at_two_and_one_programs_per_sm():
    """ln 18174x4800 fp32 on the H100: an 8192-column tile; its configs hold one block an
    SM (194 registers), so 4 per SM run in 4 waves with 520 workspace rows. Every config
    is timed at about 4, 3, 2 and 1 per SM; 4096-column tiles keep two counts."""
    plan = cuda_plan.plan(_ln_shape(18174, 4800, 4), H100_INFO, CudaTuning(), PlanOptions())
    assert plan.r0_block == 8192 and plan.programs == 520
    assert plan.program_choices == (520, 396, 264, 132)
    configs = {tuple(i for i in c if i[0] != "RPROGRAMS") for c in plan.configs}
    assert len(plan.configs) == 4 * len(configs)
    plan_4096 = cuda_plan.plan(_ln_shape(18174, 4000, 4), H100_INFO, CudaTuning(), PlanOptions())
    assert plan_4096.r0_block == 4096 and len(plan_4096.program_choices) == 2
    off = dataclasses.replace(CudaTuning(), low_residency_r0_block=0)
    assert len(cuda_plan.plan(_ln_shape(18174, 4800, 4), H100_INFO, off,
                              PlanOptions()).program_choices) == 2


def test_a_config_is_timed_only_at_its_counts_of_fewest_waves():
    """128 registers x 8 warps: 2 blocks an SM. Of one config at 528, 396, 264 and 132
    programs only 264 and 132 run in one wave; a 4-warp config (4 blocks an SM) keeps
    all four. The allowance of extra waves does not keep a count of more waves."""
    counts = (528, 396, 264, 132)
    plan = dataclasses.replace(_plan(528, 3), configs=tuple(
        (("XBLOCK", 1), ("num_warps", warps), ("RPROGRAMS", count))
        for warps in (8, 4) for count in counts))
    launchers = []
    for config in plan.configs:
        warps = dict(config)["num_warps"]
        launcher = _launcher(1, warps, 128)
        launcher.config = Config({k: v for k, v in config if k != "num_warps"}, num_warps=warps)
        launchers.append(launcher)
    kept = autotune.within_planned_waves(launchers, plan, H100)
    assert [(launcher.config.num_warps, autotune.launched_programs(launcher, plan))
            for launcher in kept] == [(8, 264), (8, 132), (4, 528), (4, 396), (4, 264),
                                      (4, 132)]


@pytest.mark.parametrize("M,N", [(2048, 24576), (64, 2560)])
def test_no_second_count_for_tiled_rows_or_few_row_blocks(M, N):
    """Rows that loop over their column tiles keep one count (their configs are not
    timed; register tiles: test_column_tiles.py); so do rows too few for 3 programs per
    SM to be fewer than the planned ones."""
    plan = cuda_plan.plan(_ln_shape(M, N), H100_INFO, CudaTuning(), PlanOptions())
    assert plan.program_choices == ()
    assert all("RPROGRAMS" not in dict(c) for c in plan.configs)


def test_segmented_plans_keep_one_program_count():
    plan = cuda_plan.plan(_ln_shape(8192, 2560), H100_INFO, CudaTuning(), PlanOptions())
    segmented = cuda_plan.with_segments(plan, 4, 8192)
    assert segmented.program_choices == ()
    assert len(segmented.configs) == len(plan.configs) // 2


def test_the_wave_filter_counts_each_configs_own_programs():
    """168 registers x 4 warps: 3 blocks an SM, so 528 programs run in 2 waves and 396
    in 1; with no extra wave allowed only the 396-program configs are timed."""
    plan = dataclasses.replace(_plan(528, 0), configs=(
        (("XBLOCK", 1), ("num_warps", 4), ("RPROGRAMS", 528)),
        (("XBLOCK", 1), ("num_warps", 4), ("RPROGRAMS", 396))))
    launchers = []
    for config in plan.configs:
        launcher = _launcher(1, 4, 168)
        launcher.config = Config(dict(config[:1] + config[2:]), num_warps=4)
        launchers.append(launcher)
    kept = autotune.within_planned_waves(launchers, plan, H100)
    assert [autotune.launched_programs(launcher, plan) for launcher in kept] == [396]


@pytest.mark.parametrize("generated,norm", [
    # Each final step and each norm once by default; the other two, the slow tier.
    pytest.param(generated, norm, id=f"{'generated' if generated else 'aten'}_final-{norm}",
                 marks=() if (generated, norm) in {(True, "rms"), (False, "ln")}
                 else pytest.mark.slow)
    for generated in (True, False) for norm in ("rms", "ln")])
def test_fewer_programs_leave_workspace_rows_the_final_step_skips(cuda_knobs, plugin,
                                                                  monkeypatch, norm, generated):
    """The interpreter runs the first config: with the fewest-program configs put first,
    the kernel launches 2 of the workspace's 8 rows (2 interpreter cores, every count per
    SM timed) into poisoned memory. The gradients are right only if the generated final
    step folds just the rows the count after the partials names, or, for the ATen final
    step, if the rows left were filled with the identity."""
    cuda_knobs(autotune_on_cpu=True, low_residency_r0_block=64, generated_final_step=generated)
    counts = cuda_plan.with_program_counts
    monkeypatch.setattr(cuda_plan, "with_program_counts",
                        lambda configs, choices, scaled=None: counts(
                            configs, tuple(reversed(choices)), scaled))
    M, N = 1024, 40
    x = torch.randn(M, N, requires_grad=True)
    w = torch.randn(N, requires_grad=True)
    params = [w] if norm == "rms" else [w, torch.randn(N, requires_grad=True)]
    fn = rms_norm if norm == "rms" else layer_norm
    dy = torch.randn_like(x)
    with poisoned_allocations():
        grads, code = run_and_get_code(
            lambda: autograd_grads(torch.compile(fn), [x, *params], dy))
    assert_close(grads, float64_grads(fn, [x, *params], dy))
    assert inductor_ext.metrics.mix_order_kernels == 1
    source = "\n".join(code)
    assert "XBLOCK : tl.constexpr, RPROGRAMS : tl.constexpr" in source
    assert "row_step = RPROGRAMS * XBLOCK" in source
    assert "'grid_type': 'PrecomputedGrid'" in source
    for count in (8, 6, 4, 2):
        assert f"{{'config': {{'RPROGRAMS': {count}}}, 'python': ['{count}', '1', '1']" in source
    partials = 8 * (1 if norm == "rms" else 2) * N
    if generated:
        assert "fill_program" not in source
        assert f"tl.store(ws_ptr + {partials}, tl.full([], RPROGRAMS, tl.float32))" in source
        assert f"r0_numel = tl.load(ws_ptr + {partials}).to(tl.int32)" in source
    else:
        assert ("for fill_program in range(tl.program_id(0) + RPROGRAMS, 8, RPROGRAMS):"
                in source)
        assert "tl.load(ws_ptr" not in source


def test_deterministic_kernels_run_the_plans_program_count(cuda_knobs, plugin):
    """No autotuning in deterministic mode, so no per-config count: the plan's literal."""
    cuda_knobs(autotune_on_cpu=True)
    args = (torch.randn(3072, 40), torch.randn(40), torch.randn(3072, 40),
            torch.rand(3072, 1) + 0.5)
    torch.use_deterministic_algorithms(True)
    try:
        got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    finally:
        torch.use_deterministic_algorithms(False)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "RPROGRAMS : tl.constexpr" not in code and "row_step = 8 * XBLOCK" in code
    assert "PrecomputedGrid" not in code
    assert_close(got, rms_backward(*[a.double() for a in args]))


# -- which fused kernels carry configs to time, end to end ----------------------------------
def test_register_tiles_are_autotuned(cuda_knobs, plugin):
    """Register-tiled kernels store their partials (no workspace adds), so the autotuner
    may run them more than once: rows per iteration 1 and 2 are both correct."""
    cuda_knobs(autotune_on_cpu=True)
    args = _inputs(M=64, N=48)
    with _register_tiled(cuda_knobs):
        got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert "@mix_order_autotune(" in code
    configs = code.split("'inductor_ext_configs': ")[1].split("]")[0]
    assert "'XBLOCK': 1," in configs and "'XBLOCK': 2," in configs
    assert configs.count("'R0_BLOCK': 16,") == configs.count("'XBLOCK'")
    assert_close(got, rms_backward(*[a.double() for a in args]))


def test_autotuned_configs_are_attached_and_correct(plugin, cuda_knobs):
    cuda_knobs(autotune_on_cpu=True)
    args = _inputs(M=256, N=40)
    got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "@mix_order_autotune(" in code
    assert "from inductor_ext.runtime.autotune import mix_order_autotune" in code
    configs = code.split("'inductor_ext_configs': ")[1].split("]")[0]
    assert 2 <= configs.count("'XBLOCK'") <= 12
    assert_close(got, rms_backward(*[a.double() for a in args]))


def test_deterministic_mode_keeps_one_config(plugin, cuda_knobs):
    cuda_knobs(autotune_on_cpu=True)
    with torch._inductor.config.patch(deterministic=True):
        _, (code,) = run_and_get_code(torch.compile(rms_backward), *_inputs(M=256))
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "mix_order_autotune" not in code and "@triton_heuristics.fixed_config(" in code
