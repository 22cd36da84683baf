"""The text rewrites of Inductor's column-tile loops (codegen/rewrites.py): what they
change, what they leave alone, and that a rewritten loop still computes the same sums."""

import importlib.util
import re
import textwrap

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._inductor.utils import run_and_get_code

import inductor_ext
from inductor_ext.codegen.rewrites import (
    aligned_row_vectors,
    chunk_row_sums,
    keep_row_tiles,
    stream_row_stores,
    unpin_row_loads,
    unroll_column_loops,
)
from tests.support.poison import poisoned_allocations
from tests.support.reference import (
    assert_close,
    autograd_grads,
    float64_grads,
    layer_norm,
    rms_norm,
)

# Inductor's looped row sum as it writes it (masked form: the last tile is partial).
LOOPED_SUM = textwrap.dedent("""\
    _tmp4 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        r0_mask = r0_index < r0_numel
        tmp0 = tl.load(in_ptr0 + (r0_index + r0_numel * xindex), r0_mask & xmask, other=0.0)
        tmp3 = tl.broadcast_to(tmp0 * tmp0, [XBLOCK, R0_BLOCK])
        tmp5 = _tmp4 + tmp3
        _tmp4 = tl.where(r0_mask & xmask, tmp5, _tmp4)
    tmp4 = tl.sum(_tmp4, 1)[:, None]
""")


def test_chunked_row_sum_text():
    out = chunk_row_sums(LOOPED_SUM, 8)
    assert "_tmp4 = tl.full([XBLOCK, R0_BLOCK // 8], 0, tl.float32)" in out
    assert ("tmp5 = _tmp4 + tl.sum(tl.reshape(tl.where(r0_mask & xmask, tmp3, 0.0)"
            ".to(tl.float32), [XBLOCK, R0_BLOCK // 8, 8]), 2)") in out
    assert "    _tmp4 = tmp5\n" in out
    assert "tmp4 = tl.sum(_tmp4, 1)[:, None]" in out  # the final sum is unchanged


def test_unmasked_row_sum_keeps_its_term():
    text = LOOPED_SUM.replace("tl.where(r0_mask & xmask, tmp5, _tmp4)", "tmp5")
    out = chunk_row_sums(text, 4)
    assert "tmp5 = _tmp4 + tl.sum(tl.reshape(tmp3.to(tl.float32), " \
           "[XBLOCK, R0_BLOCK // 4, 4]), 2)" in out


@pytest.mark.parametrize("change", [
    ("tmp4 = tl.sum(_tmp4, 1)[:, None]", "tmp4 = tl.sum(_tmp4, 1)[:, None] + _tmp4"),
    ("_tmp4 = tl.where(r0_mask & xmask, tmp5, _tmp4)",
     "_tmp4 = tl.where(r0_mask & xmask, tmp5, _tmp4)\n    tmp9 = tmp5 * 2"),
    ("tmp5 = _tmp4 + tmp3", "tmp5 = _tmp4 * tmp3"),
    ("tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)", "tl.full([XBLOCK, R0_BLOCK], 0, tl.int64)"),
    ("tmp4 = tl.sum(_tmp4, 1)[:, None]", "tmp4 = tl.max(_tmp4, 1)[:, None]"),
], ids=["accumulator-read-elsewhere", "combined-value-read-elsewhere", "not-a-sum",
        "int-accumulator", "no-final-sum"])
def test_other_uses_leave_the_loop_as_it_is(change):
    text = LOOPED_SUM.replace(*change)
    assert text != LOOPED_SUM
    assert chunk_row_sums(text, 8) == text


def test_chunk_one_is_off():
    assert chunk_row_sums(LOOPED_SUM, 1) == LOOPED_SUM


def _kernel_from(body: str, tmp_path, name: str):
    src = ("import triton\nimport triton.language as tl\n\n@triton.jit\n"
           "def row_sums(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr, "
           "R0_BLOCK: tl.constexpr):\n"
           "    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]\n"
           "    xmask = xindex < xnumel\n"
           "    r0_base = tl.arange(0, R0_BLOCK)[None, :]\n"
           + textwrap.indent(body, "    ")
           + "    tl.store(out_ptr0 + xindex, tmp4, xmask)\n")
    path = tmp_path / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.row_sums


@settings(max_examples=12, deadline=None)
@given(M=st.integers(1, 9), N=st.integers(1, 70), chunk=st.sampled_from([2, 4, 8]),
       xblock=st.sampled_from([1, 2, 4]))
def test_chunked_loop_computes_the_same_sums(tmp_path_factory, M, N, chunk, xblock):
    """Run the loop before and after the rewrite under the interpreter (masked rows and
    columns, a partial last tile) against a float64 reference."""
    tmp = tmp_path_factory.mktemp("loops")
    x = torch.randn(M, N)
    ref = (x.double() ** 2).sum(1)
    for name, body in (("plain", LOOPED_SUM), ("chunked", chunk_row_sums(LOOPED_SUM, chunk))):
        out = torch.empty(M)
        kernel = _kernel_from(body, tmp, name)
        kernel[(-(-M // xblock),)](x, out, M, N, XBLOCK=xblock, R0_BLOCK=16)
        torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


def test_stream_row_stores_text():
    code = textwrap.dedent("""\
        tl.store(out_ptr2 + (r0_1 + 300*x0), tmp27, r0_mask)
        tl.store(out_ptr3 + (x0), tmp9, None, eviction_policy='evict_first')
        tl.store(ws_ptr + (r0_cols), _mo_acc0_t0)
    """)
    out = stream_row_stores(code)
    assert "tl.store(out_ptr2 + (r0_1 + 300*x0), tmp27, r0_mask, cache_modifier='.cs')" in out
    assert "tl.store(out_ptr3 + (x0), tmp9, None, eviction_policy='evict_first')\n" in out
    assert "tl.store(ws_ptr + (r0_cols), _mo_acc0_t0)\n" in out


def test_unpin_row_loads_text():
    """Only loads indexed by a row and a column lose evict_last; the rest of the line stays."""
    code = textwrap.dedent("""\
        tmp0 = tl.load(in_ptr0 + (r0_1 + 300*x0), r0_mask, eviction_policy='evict_last', other=0.0).to(tl.float32)
        tmp8 = tl.load(in_ptr2 + (r0_1 + 16384*x0), None, eviction_policy='evict_last').to(tl.float32)
        tmp2 = tl.load(in_ptr1 + (r0_1), r0_mask, eviction_policy='evict_last', other=0.0)
        tmp10 = tl.load(in_ptr3 + (x0), None, eviction_policy='evict_last')
        tmp23 = tl.load(in_ptr0 + (r0_1 + 300*x0), r0_mask, eviction_policy='evict_first', other=0.0)
    """)  # noqa: E501
    out = unpin_row_loads(code).splitlines()
    assert out[0] == ("tmp0 = tl.load(in_ptr0 + (r0_1 + 300*x0), r0_mask, other=0.0)"
                      ".to(tl.float32)")
    assert out[1] == "tmp8 = tl.load(in_ptr2 + (r0_1 + 16384*x0), None).to(tl.float32)"
    assert out[2:] == code.splitlines()[2:]  # weight, per-row scalar, second-pass load


def _pinned_row_loads(fused: str) -> list[str]:
    return [line for line in fused.splitlines() if "tl.load(" in line and "*x0" in line
            and "evict_last" in line]


def _register_tiled_layer_norm_kernel(cuda_knobs, **knobs):
    cuda_knobs(register_tile=64, **knobs)
    N = 300
    x = torch.randn(48, N, requires_grad=True)
    w = torch.randn(N, requires_grad=True)
    b = torch.randn(N, requires_grad=True)
    dy = torch.randn(48, N)

    def fn(x, w, b, dy):
        return autograd_grads(layer_norm, [x, w, b], dy)

    with inductor_ext.config.patch(max_persistent_n=64, target="cuda"):
        got, codes = run_and_get_code(torch.compile(fn), x, w, b, dy)
    fused = next(src for code in codes for src in code.split("async_compile.triton(")[1:]
                 if "for xoffset in" in src)
    assert_close(got, float64_grads(layer_norm, [x, w, b], dy), names=["dx", "dw", "db"])
    return fused


def test_register_tiled_kernel_chunks_its_row_sums_and_streams_dx(plugin, cuda_knobs):
    """LayerNorm's two row sums over 5 tiles of 64 (the last one partial): [XBLOCK, 8]
    accumulators, and dx stored with the streaming hint; the numbers still match."""
    fused = _register_tiled_layer_norm_kernel(cuda_knobs)
    assert fused.count("tl.full([XBLOCK, R0_BLOCK // 8], 0, tl.float32)") == 2
    assert fused.count("tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)") == 0
    assert fused.count("[XBLOCK, R0_BLOCK // 8, 8]), 2)") == 2 * 5
    assert fused.count("cache_modifier='.cs')") == 5  # dx, once per tile
    assert "_mo_acc0_t0, cache_modifier" not in fused  # workspace stores stay plain
    # x and dy are read again from L1, not L2: their loads lose evict_last; w keeps it.
    assert _pinned_row_loads(fused) == []
    assert fused.count("tl.load(in_ptr1 + (r0_1), r0_mask, eviction_policy='evict_last'") == 2 * 5


def test_rewrites_follow_the_tuning_knobs(plugin, cuda_knobs):
    fused = _register_tiled_layer_norm_kernel(cuda_knobs, row_sum_chunk=1,
                                              stream_column_tiled_stores=False,
                                              unpin_register_tiled_rows=False)
    assert fused.count("tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)") == 2
    assert "R0_BLOCK // " not in fused and "cache_modifier" not in fused
    assert len(_pinned_row_loads(fused)) == 2 * 5  # x and dy in each first-pass tile


def _grouped_kernel(norm, M: int, N: int, dtype: torch.dtype) -> tuple[str, list]:
    """The fused kernel of `norm`'s backward at [M, N] with tiles of 64, and its grads
    checked against float64."""
    x = torch.randn(M, N, dtype=dtype, requires_grad=True)
    params = [torch.randn(N, dtype=dtype, requires_grad=True)
              for _ in range(2 if norm is layer_norm else 1)]
    dy = torch.randn(M, N, dtype=dtype)

    def fn(x, *params):
        return autograd_grads(norm, [x, *params], dy)

    with inductor_ext.config.patch(max_persistent_n=64, target="cuda"):
        got, codes = run_and_get_code(torch.compile(fn), x, *params)
    assert_close(got, float64_grads(norm, [x, *params], dy),
                 names=["dx", "dw", "db"][:len(got)])
    assert inductor_ext.metrics.mix_order_kernels == 1
    fused = next(src for code in codes for src in code.split("async_compile.triton(")[1:]
                 if "for xoffset in" in src)
    return fused, params


@pytest.mark.parametrize("norm,dtype,row_sum_loop", [
    # Each norm, dtype and row-sum form once by default; the other four, the slow tier.
    pytest.param(norm, dtype, loop, id=f"{name}-{str(dtype)[6:]}-{loop}",
                 marks=() if (name, dtype, loop) in {("ln", torch.float32, True),
                                                     ("rms", torch.bfloat16, False)}
                 else pytest.mark.slow)
    for name, norm in (("ln", layer_norm), ("rms", rms_norm))
    for dtype in (torch.float32, torch.bfloat16) for loop in (True, False)])
def test_column_groups_split_the_row_tiles(plugin, cuda_knobs, norm, dtype, row_sum_loop):
    """Two column groups over 8 tiles of 64 (the last one partial at N=500, 75 rows): each
    program sums the whole row, starting past its own 4 tiles, then writes dx and keeps
    partials for those 4 only; the workspace has one row per row program."""
    cuda_knobs(register_tile=64, column_groups=2, grouped_row_sum_loop=row_sum_loop)
    fused, params = _grouped_kernel(norm, 75, 500, dtype)
    assert "row_program = tl.program_id(0) // 2" in fused
    assert "col_group = tl.program_id(0) % 2" in fused
    assert "row_start = row_program * XBLOCK" in fused
    loop = "for r0_tile in tl.range(0, 8):"
    assert (loop in fused) is row_sum_loop
    rotated = "(((col_group + 1) * 4 + {}) % 8) * R0_BLOCK"
    expected = [rotated.format("r0_tile")] if row_sum_loop else [rotated.format(t)
                                                                 for t in range(8)]
    assert all(f"r0_offset = {offset}" in fused for offset in expected)
    own = [f"r0_offset = (col_group * 4 + {t}) * R0_BLOCK" for t in range(5)]
    assert [line in fused for line in own] == [True] * 4 + [False]
    assert fused.count("cache_modifier='.cs')") == 4  # dx: the group's tiles, once each
    assert fused.count("tl.store(ws_ptr") == 4 * len(params)
    assert f"(row_program * {len(params)} + 0) * r0_numel" in fused
    programs = int(re.search(r"'inductor_ext_plan': \{'target': 'cuda', 'programs': (\d+)",
                             fused).group(1))
    assert f"'fixed_grid': ['{2 * programs}', '1', '1']" in fused


def test_the_row_sum_loop_asks_for_pipelining_stages(plugin, cuda_knobs):
    """The grouped row-sum loop carries the tuning's stages and unroll factor as tl.range
    arguments, and the gradients stay right (the interpreter runs the loop as written).
    LayerNorm's two sums take the unroll only past the default column limit."""
    cuda_knobs(register_tile=64, column_groups=2, grouped_row_sum_stages=3,
               grouped_row_sum_unroll=2, grouped_row_sum_unroll_max_columns=2)
    fused, _ = _grouped_kernel(layer_norm, 75, 500, torch.float32)
    assert "for r0_tile in tl.range(0, 8, num_stages=3, loop_unroll_factor=2):" in fused


@pytest.mark.parametrize("groups,N,dtype", [
    # 4 groups of 2 tiles (LayerNorm at N=65536 on the H100)
    pytest.param(4, 500, torch.float32, marks=pytest.mark.slow),
    (3, 560, torch.bfloat16),  # 3 groups of 3, the last tile partial (N=18432: 9 of 2048)
])
def test_more_column_groups(plugin, cuda_knobs, groups, N, dtype):
    """Groups other than two: each program's share of the tiles, the row sums rotated."""
    cuda_knobs(register_tile=64, column_groups=groups)
    fused, _ = _grouped_kernel(layer_norm, 75, N, dtype)
    tiles = -(-N // 64)
    per_group = tiles // groups
    assert f"col_group = tl.program_id(0) % {groups}" in fused
    assert (f"r0_offset = (((col_group + 1) * {per_group} + r0_tile) % {tiles}) * R0_BLOCK"
            in fused)
    assert fused.count("cache_modifier='.cs')") == per_group


def test_a_one_pass_row_is_never_split(plugin, cuda_knobs):
    """A row sum beside a column sum of the same product: one pass over the tiles holds
    both, so even `column_groups=2` plans one group (the rewrite could not split it)."""
    cuda_knobs(register_tile=64, column_groups=2)

    def fn(a, b):
        v = a * b
        return v.sum(1), v.sum(0)

    a, b = torch.randn(96, 500), torch.randn(96, 500)
    with inductor_ext.config.patch(max_persistent_n=64, target="cuda"):
        got, codes = run_and_get_code(torch.compile(fn), a, b)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "col_group" not in "\n".join(codes)
    for g, r in zip(got, fn(a.double(), b.double())):
        torch.testing.assert_close(g.double(), r, rtol=1e-5, atol=1e-5)


def test_grouped_unroll_leaves_loops_it_cannot_split():
    """Grouped unrolling needs the partials in a loop without row sums, and row sums in
    a loop that stores nothing: otherwise the text stays as it is (a miss, which the
    required rewrite turns into Inductor's kernels)."""
    partials_with_sum = textwrap.dedent("""\
        for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
            tmp0 = tl.load(in_ptr0 + (r0_index + 8*x0), None)
            tmp1 = _tmp2 + tmp0
            _tmp2 = tmp1
            _mo_acc0 = _mo_acc0 + tl.sum(tmp0, 0)[None, :]
    """)
    sums_with_store = textwrap.dedent("""\
        for r0_offset in tl.range(0, r0_numel, R0_BLOCK):
            tmp0 = tl.load(in_ptr0 + (r0_index + 8*x0), None)
            tl.store(out_ptr0 + (r0_index + 8*x0), tmp0, None)
            tmp1 = _tmp2 + tmp0
            _tmp2 = tmp1
    """)
    for code in (partials_with_sum, sums_with_store):
        assert unroll_column_loops(code, 4, ["_mo_acc0"], groups=2) == code
        assert unroll_column_loops(code, 4, ["_mo_acc0"]) != code  # one group: unrolled


@pytest.mark.parametrize("M", [47, 48])
def test_register_tiles_timed_at_two_rows_keep_the_row_mask(cuda_knobs, plugin, monkeypatch,
                                                            M):
    """Register tiles plan one row per iteration and time two: the interpreter runs the
    first config, here a two-row one. With an odd M the last block's second row is past
    the end, so the kernel must keep the row mask that a one-row plan alone would drop
    (without it the kernel reads that row: dw inf on CPU, wrong on a GPU)."""
    from inductor_ext.targets.cuda import plan as cuda_plan

    cuda_knobs(register_tile=64, autotune_on_cpu=True)
    configs = cuda_plan.register_tiled_configs
    monkeypatch.setattr(cuda_plan, "register_tiled_configs", lambda *a, **k: tuple(
        sorted(configs(*a, **k), key=lambda c: -dict(c)["XBLOCK"])))
    N = 300
    x = torch.randn(M, N, requires_grad=True)
    w = torch.randn(N, requires_grad=True)
    dy = torch.randn(M, N)
    with inductor_ext.config.patch(target="cuda", max_persistent_n=64):
        got, codes = run_and_get_code(
            lambda: autograd_grads(torch.compile(rms_norm), [x, w], dy))
    assert_close(got, float64_grads(rms_norm, [x, w], dy))
    assert inductor_ext.metrics.mix_order_kernels == 1
    source = "\n".join(codes)
    assert "'XBLOCK': 2" in source


@pytest.mark.parametrize("norm", [layer_norm, rms_norm], ids=["ln", "rms"])
def test_register_tiles_at_fewer_programs_fold_only_the_rows_launched(
        plugin, cuda_knobs, monkeypatch, norm):
    """Register-tiled configs are timed at every count per SM below the plan's: here 4
    row programs of 2 column groups, and 3, 2 and 1. The interpreter runs the first
    config, put first with the fewest programs (1 row program, 2 of the workspace's 4
    rows written, into poisoned memory): the gradients are right only if the final step
    folds just the rows that count names and every group walks all of its rows."""
    from inductor_ext.targets.cuda import plan as cuda_plan

    cuda_knobs(register_tile=64, column_groups=2, autotune_on_cpu=True)
    counts = cuda_plan.with_program_counts
    monkeypatch.setattr(cuda_plan, "with_program_counts",
                        lambda configs, choices, scaled=None: counts(
                            configs, tuple(reversed(choices)), scaled))
    with poisoned_allocations():
        fused, params = _grouped_kernel(norm, 75, 500, torch.float32)
    assert "col_group = tl.program_id(0) % 2" in fused
    assert "XBLOCK : tl.constexpr, RPROGRAMS : tl.constexpr" in fused
    assert "'grid_type': 'PrecomputedGrid'" in fused
    for count in (4, 3, 2, 1):  # each row-program count launches its 2 groups
        assert (f"{{'config': {{'RPROGRAMS': {count}}}, 'python': ['{2 * count}', '1', '1']"
                in fused)


def test_register_tiled_counts_per_sm_below_the_plans():
    """rms 2392x10167 fp16 on the H100: 3 programs per SM planned (342, balanced over
    the rows), then 2 and 1 per SM; split in 2 groups, rms 1450x28736 fp32 at 1 per SM
    (132 row programs, 264 launched) also runs 66. Off: the plan's count alone."""
    from inductor_ext.plan import PlanOptions
    from inductor_ext.targets.cuda import plan as cuda_plan
    from inductor_ext.targets.cuda.tuning import CudaTuning
    from tests.test_cost_model import H100, _norm

    def choices(M, N, es, **knobs):
        planned = cuda_plan.plan(_norm(M, N, es), H100, CudaTuning(**knobs), PlanOptions())
        assert planned.register_tiles
        return planned.column_groups, planned.program_choices

    assert choices(2392, 10167, 2) == (1, (342, 240, 126))
    assert choices(1450, 28736, 4) == (2, (132, 66))
    assert choices(2392, 10167, 2, register_tiled_fewer_programs=False) == (1, ())


def test_register_tiled_fewer_counts_also_take_the_plans_threads_per_sm():
    """rms 1450x28736 fp32 on the H100: 264 programs planned (132 row programs x 2
    groups) at up to 16 warps; at 66 row programs (one an SM) each config is also timed
    at twice its warps, up to 32. Off, or for a persistent row (rms
    8431x8128 fp16: 264 programs, then 132), the fewer counts keep the plan's warps."""
    from inductor_ext.plan import PROGRAMS_KEY, PlanOptions
    from inductor_ext.targets.cuda import plan as cuda_plan
    from inductor_ext.targets.cuda.tuning import CudaTuning
    from tests.test_cost_model import H100, _norm

    def warps_by_count(M, N, es, **knobs):
        planned = cuda_plan.plan(_norm(M, N, es), H100, CudaTuning(**knobs), PlanOptions())
        out: dict[int, set[int]] = {}
        for config in planned.configs:
            kwargs = dict(config)
            out.setdefault(int(kwargs[PROGRAMS_KEY]), set()).add(int(kwargs["num_warps"]))
        return planned.register_tiles, out

    assert warps_by_count(1450, 28736, 4) == (8, {132: {8, 16}, 66: {8, 16, 32}})
    assert warps_by_count(1450, 28736, 4, register_tiled_scaled_warps=False) == (
        8, {132: {8, 16}, 66: {8, 16}})
    tiles, counts = warps_by_count(2392, 10167, 2)
    assert (tiles, counts) == (5, {342: {4, 8}, 240: {4, 8, 16}, 126: {4, 8, 16, 32}})
    tiles, counts = warps_by_count(8431, 8128, 2)
    assert tiles == 0 and len(counts) > 1
    assert all(warps == counts[max(counts)] for warps in counts.values())


@pytest.mark.parametrize("M,N,es,columns,tiles", [
    (24576, 3072, 2, 2, 3),   # the ln 24576x3072 bf16: 3 x 1024 lanes, not 4096
    (11797, 4288, 2, 2, 5),
    (24576, 3072, 2, 1, 0),   # RMSNorm: one column sum, stays persistent
    (24576, 3072, 4, 2, 0),   # fp32 rows
    (6652, 2951, 2, 2, 0),    # rows off 16-byte vectors
    (8192, 4096, 2, 2, 0),    # no padding to save
    (108219, 1408, 2, 2, 2),  # 2 x 1024 lanes, as many as the padded 2048: two may
    (8192, 1408, 2, 2, 0),    # the same row, 11.5M elements
    (23107, 3136, 2, 2, 0),   # 4 x 1024 lanes, as many as 4096: only two tiles may
    (39350, 5888, 2, 2, 0),   # 6 tiles
    (2305, 3072, 2, 2, 0),    # 7M elements: the padded row's few-row plan stays
])
def test_padded_layer_norm_rows_run_as_kept_register_tiles(M, N, es, columns, tiles):
    """A padded persistent LayerNorm row of 16-bit elements on 16-byte vectors, in a group
    of 16M elements or more, runs as 2-5 register tiles of 1024 columns whose second pass
    takes the first pass's row values (2 tiles when they take as many lanes as the padded
    row); every other row keeps the plan it had with the rule off, as does a group whose
    rows must stay whole, and the knob at 0."""
    got = _h100_plan(M, N, es, columns)
    off = _h100_plan(M, N, es, columns, kept_row_tile=0)
    if not tiles:
        assert got == off and not got.keep_row_tiles
        return
    assert (got.keep_row_tiles, got.column_tiled, got.register_tiles, got.r0_block,
            got.column_groups, got.block_m) == (True, True, tiles, 1024, 1, 1)
    assert not off.column_tiled and off.r0_block >= tiles * 1024
    same = _h100_plan(M, N, es, columns, kept_row_same_lanes_tiles=0)
    assert (same == off) == (off.r0_block == tiles * 1024)
    assert _h100_plan(M, N, es, columns, whole_rows=True) == off


def _h100_plan(M: int, N: int, es: int, columns: int, whole_rows: bool = False, **knobs):
    """The CUDA plan of a norm backward's [M, N] rows on the H100 with `knobs` changed."""
    from inductor_ext.plan import PlanOptions
    from inductor_ext.targets.cuda import plan as cuda_plan
    from inductor_ext.targets.cuda.tuning import CudaTuning
    from tests.test_cost_model import H100, _norm

    return cuda_plan.plan(_norm(M, N, es, columns=columns), H100, CudaTuning(**knobs),
                          PlanOptions(whole_rows=whole_rows))


@pytest.mark.parametrize("M, N, es, columns, tiles", [
    (672777, 320, 2, 1, 5),   # the grid's rms 672777x320: 5 x 64 lanes, not 512
    (254055, 576, 2, 1, 9),
    (298940, 704, 2, 1, 11),
    (200000, 960, 2, 1, 0),   # 15 tiles: too many partials (255 registers measured)
    (62061, 448, 2, 1, 0),    # 118 rows a program: the once-a-program fold is not paid
    (133562, 384, 4, 1, 0),   # fp32 rows
    (672777, 320, 2, 2, 0),   # LayerNorm: two column sums (spilled)
    (262144, 512, 2, 1, 0),   # no padding to save
    (300000, 330, 2, 1, 0),   # rows off 16-byte vectors
])
def test_short_padded_rms_rows_run_as_kept_tiles_in_row_blocks(M, N, es, columns, tiles):
    """A padded persistent RMSNorm row of 16-bit elements on 16-byte vectors, of at most
    11 tiles of 64 columns and with 192 rows or more a program, runs as kept register
    tiles in row blocks: 64-column tiles, XBLOCK rows of them (one 16-byte vector a thread
    per tile at the planned warps), whole-block partials. Every other row keeps the plan
    it had with the rule off, as does a group whose rows must stay whole."""
    got = _h100_plan(M, N, es, columns)
    off = _h100_plan(M, N, es, columns, short_row_tile=0)
    if not tiles:
        assert got == off and not got.block_partials
        return
    assert not off.column_tiled and off.r0_block == 1 << (N - 1).bit_length()
    assert (got.column_tiled, got.register_tiles, got.keep_row_tiles, got.block_partials,
            got.r0_block, got.block_m, got.column_groups) == (True, tiles, True, True, 64,
                                                               32, 1)
    assert got.num_warps == 8 and got.programs <= M // 192
    assert got.configs and all(dict(config)["R0_BLOCK"] == 64
                               and dict(config)["XBLOCK"] <= got.block_m
                               and 2 <= dict(config)["num_warps"] <= 8
                               for config in got.configs)
    assert _h100_plan(M, N, es, columns, whole_rows=True) == off


@pytest.mark.parametrize("M, N, dtype, wdtype", [
    (33, 320, torch.bfloat16, torch.bfloat16),  # odd M: the last block's rows masked
    (64, 448, torch.float16, torch.float32),
])
def test_short_rows_in_kept_tiles_fold_whole_blocks_once(cuda_knobs, plugin, M, N, dtype,
                                                         wdtype):
    """RMSNorm of short padded rows as kept tiles of 64 in row blocks, in the interpreter:
    right against float64, x and dy loaded once per tile, each tile's dw partial a whole
    [XBLOCK, R0_BLOCK] block added without a fold in the loop and folded over its rows
    once, at the workspace store."""
    cuda_knobs(short_row_min_rows=0)  # the interpreter's rows are far fewer than the rule's
    tiles = -(-N // 64)
    x = torch.randn(M, N, dtype=dtype, requires_grad=True)
    w = (1 + 0.1 * torch.randn(N, dtype=wdtype)).requires_grad_()
    dy = torch.randn(M, N, dtype=dtype)

    def norm(x, w):
        return torch.nn.functional.rms_norm(x, (N,), w, 1e-6)

    def fn(x, w, dy):
        return autograd_grads(norm, [x, w], dy)

    with inductor_ext.config.patch(target="cuda"):
        got, codes = run_and_get_code(torch.compile(fn), x, w, dy)
    assert_close(got, float64_grads(norm, [x, w], dy), names=["dx", "dw"])
    fused = next(src for code in codes for src in code.split("async_compile.triton(")[1:]
                 if "for xoffset in" in src)
    assert "'block_partials': True" in fused and f"'register_tiles': {tiles}" in fused
    lines = fused.splitlines()
    row_loads = [line for line in lines if "tl.load(in_ptr" in line and f"{N}*x0" in line]
    assert len(row_loads) == 2 * tiles  # x and dy, once per tile
    for tile in range(tiles):
        acc = f"_mo_acc0_t{tile}"
        assert sum(line.strip() == f"{acc} = tl.full([XBLOCK, R0_BLOCK], 0.0, tl.float32)"
                   for line in lines) == 1
        adds = [line for line in lines if line.strip().startswith(f"{acc} = {acc} + ")]
        assert len(adds) == 1 and "tl.sum(" not in adds[0]
        assert sum(f"tl.sum({acc}, 0)[None, :]" in line and "tl.store(ws_ptr" in line
                   for line in lines) == 1


@pytest.mark.parametrize("M, N, es, columns, aligned", [
    (9411, 5555, 2, 1, True),    # odd N, 16-bit: rows off 4 bytes, one row a block
    (20000, 3001, 2, 2, True),   # LayerNorm too (persistent: its 4953 is column-tiled)
    (1682, 3033, 2, 1, True),    # 4096 lanes: one row a block instead of two
    (1084, 6829, 2, 1, True),    # 1024 rows or more for one column sum...
    (1827, 2451, 2, 2, False),   # ...but LayerNorm's two need 2048
    (17693, 4918, 2, 1, False),  # N % 8 == 6: rows on 4 bytes (their loads are b32)
    (61403, 1261, 2, 1, False),  # odd, but several rows a block
    (3001, 4095, 4, 1, False),   # fp32
    (16384, 4096, 2, 1, False),  # on 16-byte vectors
])
def test_odd_16bit_rows_read_as_whole_vectors(M, N, es, columns, aligned):
    """A persistent row of 16-bit elements off 4 bytes (N odd) of 2049 columns or more runs
    one row a block as whole 16-byte vectors from the boundary before its start: the plan
    says its vector (8 elements), every launch's row programs are a multiple of 8 (each
    program's rows then share one shift), every config is one row a block, and nothing
    is double-buffered. Every other row keeps its plan, as does a split or strided group,
    one with fp32 weights, or one of fewer than 1024 rows per column sum."""
    import dataclasses

    from inductor_ext.plan import PlanOptions
    from inductor_ext.targets.cuda import plan as cuda_plan
    from inductor_ext.targets.cuda.tuning import CudaTuning
    from tests.test_cost_model import H100, _norm

    got = _h100_plan(M, N, es, columns)
    off = _h100_plan(M, N, es, columns, aligned_row_min_n=0)
    if not aligned:
        assert got == off and got.row_vector == 0
        return
    assert (got.row_vector, got.block_m, got.prefetch, got.column_tiled) == (8, 1, False, False)
    assert got.extra == (("row_vector", 8),) and off.row_vector == 0
    counts = {got.programs} | {dict(c).get("RPROGRAMS", got.programs) for c in got.configs}
    assert all(count % 8 == 0 for count in counts) and len(counts) > 1
    assert got.configs and {dict(c)["XBLOCK"] for c in got.configs} == {1}
    # What the kernel checks before the rewrite (else it records a miss): one shift per
    # program in every launch; a launch of two rows a block or of 132 programs breaks it.
    assert got.keeps_row_shift and not off.keeps_row_shift
    two_rows = tuple((k, 2 if k == "XBLOCK" else v) for k, v in got.configs[0])
    assert not dataclasses.replace(got, configs=got.configs + (two_rows,)).keeps_row_shift
    assert not dataclasses.replace(got, programs=132, configs=()).keeps_row_shift
    # Four warps a program (eight vectors a thread at 8192 lanes) among the configs.
    assert 4 in {dict(c)["num_warps"] for c in got.configs}
    shape = _norm(M, N, es, columns)
    for other, options in [(shape, PlanOptions(split_size=64)),
                           (_norm(M, N, es, columns, strided=True), PlanOptions()),
                           (dataclasses.replace(shape, weight_elem_bytes=4), PlanOptions())]:
        assert cuda_plan.plan(other, H100, CudaTuning(), options).row_vector == 0
    # A weight is loaded once a program, before the row loop (none: nothing to load).
    weighted = cuda_plan.plan(dataclasses.replace(shape, weight_elem_bytes=2), H100,
                              CudaTuning(), PlanOptions())
    assert weighted == dataclasses.replace(got, extra=(("row_vector", 8), ("weights_once", 1)))
    assert weighted.weights_once and not got.weights_once


@pytest.mark.parametrize("op, M, N, dtype, wdtype", [
    ("rms", 37, 2051, torch.bfloat16, torch.bfloat16),  # every program's shift differs
    pytest.param("rms", 24, 2113, torch.float16, torch.float16, marks=pytest.mark.slow),
    ("ln", 29, 2053, torch.bfloat16, torch.bfloat16),
])
def test_odd_rows_as_whole_vectors_match_float64(plugin, cuda_knobs, op, M, N, dtype,
                                                  wdtype):
    """The aligned rows in the interpreter: right against float64 (the shifted lanes, the
    over-read zeroed, dx's middle and edges, the workspace's shifted columns), with the
    row loads from the vector boundary, dx stored as a vector middle and the lanes of its
    first and last vectors (no `tl.gather`), and the rewrite counted."""
    from inductor_ext.codegen import rewrites

    cuda_knobs(aligned_row_min_rows_per_column=0)  # the interpreter's rows are few
    rewrites.reset()
    x = torch.randn(M, N, dtype=dtype, requires_grad=True)
    w = (1 + 0.1 * torch.randn(N, dtype=wdtype)).requires_grad_()
    b = (0.1 * torch.randn(N, dtype=wdtype)).requires_grad_()
    dy = torch.randn(M, N, dtype=dtype)
    inputs = [x, w] if op == "rms" else [x, w, b]
    norm = rms_norm if op == "rms" else layer_norm

    def fn(*args):
        return autograd_grads(norm, list(args[:-1]), args[-1])

    with inductor_ext.config.patch(target="cuda"):
        got, codes = run_and_get_code(torch.compile(fn), *inputs, dy)
    assert_close(got, float64_grads(norm, inputs, dy), names=["dx", "dw", "db"][:len(got)])
    fused = next(src for code in codes for src in code.split("async_compile.triton(")[1:]
                 if "for xoffset in" in src)
    assert "'extra': (('row_vector', 8), ('weights_once', 1))" in fused
    lines = [line.strip() for line in fused.splitlines()]
    assert "_mo_shift = (tl.program_id(0) * r0_numel) % 8" in lines
    row_loads = [line for line in lines if f"({N}*x0) // 8 * 8 + r0_index)" in line
                 and "tl.load(" in line]
    assert len(row_loads) == 2 and all(line.count("tl.where(r0_mask, tl.load(") == 1
                                       and "_mo_read" in line for line in row_loads)
    stores = [line for line in lines if line.startswith("tl.store(out_ptr")]
    assert len(stores) == 3 and "_mo_body" in stores[0] and "tl.gather(" not in fused
    assert "_mo_head_mask" in stores[1] and "_mo_vec == 0, _mo_vectors" in stores[1]
    assert "_mo_tail_mask" in stores[2] and "_mo_vec == _mo_end // 8, _mo_vectors" in stores[2]
    assert not any(f"r0_1 + {N}*x0" in line for line in lines)
    # The weights (w; LayerNorm's dx reads no b) are loaded once, before the row loop.
    loop = lines.index(next(line for line in lines if line.startswith("for xoffset in ")))
    weight = [i for i, line in enumerate(lines) if line.startswith("tmp")
              and "tl.load(in_ptr1 + (r0_1), r0_mask," in line]
    assert len(weight) == 1 and weight[0] < loop
    assert rewrites.applied() == {"aligned_row_vectors": 1}  # the weights: emitted
    assert not rewrites.missed()


def compiled_cuda_rms(M: int, N: int, dtype: torch.dtype, wdtype: torch.dtype) -> str:
    """RMSNorm's backward of [M, N] rows compiled for CUDA (run in the interpreter) and
    checked against float64; its generated code."""
    x = torch.randn(M, N, dtype=dtype, requires_grad=True)
    w = (1 + 0.1 * torch.randn(N, dtype=wdtype)).requires_grad_()
    dy = torch.randn(M, N, dtype=dtype)

    def fn(x, w, dy):
        return autograd_grads(rms_norm, [x, w], dy)

    with inductor_ext.config.patch(target="cuda"):
        got, codes = run_and_get_code(torch.compile(fn), x, w, dy)
    assert_close(got, float64_grads(rms_norm, [x, w], dy), names=["dx", "dw"])
    return "\n".join(codes)


@pytest.mark.parametrize("wdtype, aligned", [(torch.float32, False), (torch.float16, True)])
def test_fp32_weights_keep_odd_rows_element_wise(plugin, cuda_knobs, wdtype, aligned):
    """The hook reads the weight's element size (fp32: 4 bytes, read at every row's shifted
    columns), and the aligned rows decline wider weights than the rows."""
    cuda_knobs(aligned_row_min_rows_per_column=0)
    code = compiled_cuda_rms(24, 2113, torch.float16, wdtype)
    assert ("_mo_shift" in code) == aligned
    assert inductor_ext.metrics.mix_order_kernels == 1


def test_aligned_rows_a_launch_cannot_keep_are_a_counted_miss(plugin, cuda_knobs,
                                                              monkeypatch):
    """A plan asking for aligned rows whose launch would put a program's rows at several
    shifts (here: program counts not rounded to the vector) keeps Inductor's indexing,
    stays right, and records one miss of the rewrite, not a silent fallback."""
    from inductor_ext.codegen import rewrites
    from inductor_ext.targets.cuda import plan as cuda_plan

    cuda_knobs(aligned_row_min_rows_per_column=0)
    monkeypatch.setattr(cuda_plan.RowLayout, "on_vectors", lambda self, programs: 9)
    rewrites.reset()
    code = compiled_cuda_rms(37, 2051, torch.bfloat16, torch.bfloat16)
    assert "'extra': (('row_vector', 8), ('weights_once', 1))" in code
    assert "_mo_shift" not in code
    assert rewrites.missed() == {"aligned_row_vectors": 1}
    assert inductor_ext.metrics.mix_order_kernels == 1


def test_aligned_row_vectors_text_misses_without_its_lines():
    """The rewrite changes nothing (a miss, which raises: it is required) unless it finds
    the column mask, the column and a row load and store; a row of another length is
    left as it is."""
    head = textwrap.dedent("""\
        r0_mask = r0_index < r0_numel
        r0_1 = r0_index
    """)
    load = "    tmp0 = tl.load(in_ptr0 + (r0_1 + 2051*x0), r0_mask, other=0.0)\n"
    store = "    tl.store(out_ptr1 + (r0_1 + 2051*x0), tmp5, r0_mask)\n"
    assert aligned_row_vectors(head + load, 2051, 8) == head + load
    assert aligned_row_vectors(head + store, 2051, 8) == head + store
    assert aligned_row_vectors(head + load + store, 2053, 8) == head + load + store
    out = aligned_row_vectors(head + load + store, 2051, 8)
    assert "tl.load(in_ptr0 + ((2051*x0) // 8 * 8 + r0_index), _mo_read, other=0.0)" in out
    assert "r0_1 = r0_index - _mo_shift" in out
    from inductor_ext.codegen import rewrites
    with pytest.raises(rewrites.RewriteMissed, match="aligned_row_vectors"):
        rewrites.apply("aligned_row_vectors", head + load, 2051, 8)


def test_aligned_rows_without_a_weight_load_nothing_once(plugin, cuda_knobs):
    """LayerNorm with a bias and no weight: aligned rows whose row side reads no [N]
    operand (db sums dy), so neither the plan's `weights_once` nor a miss."""
    from inductor_ext.codegen import rewrites

    cuda_knobs(aligned_row_min_rows_per_column=0)
    rewrites.reset()
    x = torch.randn(24, 2113, dtype=torch.float16, requires_grad=True)
    b = (0.1 * torch.randn(2113, dtype=torch.float16)).requires_grad_()
    dy = torch.randn(24, 2113, dtype=torch.float16)

    def norm(x, b):
        return torch.nn.functional.layer_norm(x, (2113,), None, b, 1e-5)

    def fn(x, b, dy):
        return autograd_grads(norm, [x, b], dy)

    with inductor_ext.config.patch(target="cuda"):
        got, codes = run_and_get_code(torch.compile(fn), x, b, dy)
    assert_close(got, float64_grads(norm, [x, b], dy), names=["dx", "db"])
    code = "\n".join(codes)
    assert "_mo_shift" in code and "weights_once" not in code
    assert rewrites.applied() == {"aligned_row_vectors": 1} and not rewrites.missed()


def test_keep_row_tiles_text():
    """A tile's second-pass row load takes the first pass's value; the weight (a column
    index only) and another tile's load are left, and a load no later pass takes gets no
    name; nothing loaded twice is a miss."""
    code = "\n".join([
        "r0_offset = 0 * R0_BLOCK",
        "tmp0 = tl.load(in_ptr0 + (r0_1 + 2560*x0), r0_mask, other=0.0).to(tl.float32)",
        "tmp1 = tl.load(in_ptr1 + (r0_1), r0_mask, eviction_policy='evict_last', other=0.0)",
        "r0_offset = 1 * R0_BLOCK",
        "tmp0 = tl.load(in_ptr0 + (r0_1 + 2560*x0), r0_mask, other=0.0).to(tl.float32)",
        "r0_offset = 0 * R0_BLOCK",
        "tmp8 = tl.load(in_ptr0 + (r0_1 + 2560*x0), r0_mask, eviction_policy='evict_first', "
        "other=0.0).to(tl.float32)",
        "tmp9 = tl.load(in_ptr1 + (r0_1), r0_mask, eviction_policy='evict_last', other=0.0)",
        "r0_offset = 1 * R0_BLOCK",
        "tmp8 = tl.load(in_ptr0 + (r0_1 + 2560*x0), r0_mask, eviction_policy='evict_first', "
        "other=0.0)",  # no cast: not the first pass's value
    ]) + "\n"
    out = keep_row_tiles(code).splitlines()
    assert out[2] == "_mo_row0 = tmp0"
    assert out[5] == code.splitlines()[4]  # tile 1's load: no later pass takes it, no name
    assert out[7] == "tmp8 = _mo_row0"
    assert out[8].startswith("tmp9 = tl.load(in_ptr1")
    assert out[10].startswith("tmp8 = tl.load(in_ptr0") and sum("tl.load(in_ptr0" in line
                                                              for line in out) == 3
    assert sum("_mo_row" in line for line in out) == 2
    single = "r0_offset = 0 * R0_BLOCK\n" + code.splitlines()[1] + "\n"
    assert keep_row_tiles(single) == single


@pytest.mark.parametrize("M", [33, 64])
def test_kept_row_tiles_read_each_row_once(cuda_knobs, plugin, M):
    """LayerNorm bf16 at N=2560 (3 tiles of 1024, not one of 4096) in the interpreter:
    right against float64 (odd M too), each tile's x and dy loaded once a row."""
    cuda_knobs(kept_row_min_elems=0)  # the interpreter's rows are far fewer than the rule's
    N = 2560
    x = torch.randn(M, N, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(N, dtype=torch.bfloat16, requires_grad=True)
    b = torch.randn(N, dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(M, N, dtype=torch.bfloat16)

    def fn(x, w, b, dy):
        return autograd_grads(layer_norm, [x, w, b], dy)

    with inductor_ext.config.patch(target="cuda"):
        got, codes = run_and_get_code(torch.compile(fn), x, w, b, dy)
    assert_close(got, float64_grads(layer_norm, [x, w, b], dy), names=["dx", "dw", "db"])
    fused = next(src for code in codes for src in code.split("async_compile.triton(")[1:]
                 if "for xoffset in" in src)
    assert "'keep_row_tiles': True" in fused and "'register_tiles': 3" in fused
    row_loads = [line for line in fused.splitlines()
                 if "tl.load(in_ptr" in line and f"{N}*x0" in line]
    assert len(row_loads) == 3 * 2  # x and dy, once per tile
    assert sum("= _mo_row" in line for line in fused.splitlines()) == 3 * 2


def test_row_statistics_do_not_widen_a_16_bit_row(plugin, tables):
    """A backward whose both sides read the saved rstd ([M, 1] fp32, as CUDA's LayerNorm
    and RMSNorm backwards do) still has 2-byte elements: the statistics are not [M, N]
    operands, so they neither hide the kept tiles nor the row's alignment."""
    import json

    from tests.support.tables import rows

    M, N = 16, 2560

    def backward(x, dy, rstd, w):
        xf, g = x.float(), dy.float() * w.float()
        s = (g * xf).sum(-1, keepdim=True)
        dx = (rstd * (g - xf * rstd * rstd * s / N)).to(x.dtype)
        return dx, (dy.float() * xf * rstd).sum(0)

    x = torch.randn(M, N, dtype=torch.bfloat16)
    dy = torch.randn(M, N, dtype=torch.bfloat16)
    rstd = torch.rand(M, 1) + 0.5
    w = torch.randn(N, dtype=torch.bfloat16)
    with inductor_ext.config.patch(target="cuda"):
        torch.compile(backward)(x, dy, rstd, w)
    (row,) = rows(inductor_ext.metrics.FUSION_TABLE)
    shape = json.loads(row["shape_info"])
    assert (shape["elem_bytes"], shape["row_elem_bytes"]) == (2, 6), shape
