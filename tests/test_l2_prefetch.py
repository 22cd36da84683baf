"""The L2 prefetch of row blocks ahead (Hopper's `cp.async.bulk.prefetch.L2`): which row loops
hint the block `l2_prefetch_distance` steps ahead (register-tiled and persistent loops, not
double-buffered ones; on CPU only when asked), what each hint covers (the [M, N] inputs'
rows, a sliced input up to its last row's last column), the evict_last variant that keeps
lines for a second pass, which devices the plan asks it of, that Triton's ptxas assembles
the asm for sm_90 and rejects it for sm_80, and that the CPU interpreter runs the hint as a
no-op and no other inline asm."""

import contextlib
import os
import re

import pytest
import torch
import triton
import triton.language as tl
from torch._inductor.utils import run_and_get_code

import inductor_ext
from inductor_ext.plan import DeviceInfo
from inductor_ext.targets.cuda import flavor as cuda_codegen
from inductor_ext.targets.cuda import plan as cuda_plan
from inductor_ext.targets.cuda.tuning import CudaTuning
from tests.support.fused_kernels import AMPERE, HOPPER, INTERPRETER
from tests.support.fused_kernels import fused_kernel_source as _fused_kernel_source
from tests.support.fused_kernels import register_tiled as _register_tiled
from tests.support.fused_kernels import rms_inputs as _inputs
from tests.support.reference import assert_close, rms_backward

_L2_HINT = re.compile(
    r"tl\.inline_asm_elementwise\('[^']*cp\.async\.bulk\.prefetch\.L2\.global[^']*', "
    r"\"=r,l,r\", \[(in_ptr\d+) \+ \((\d+) \* xoffset_l2(?: \+ (\d+))?\), "
    r"xrows_l2 \* (\d+)(?: - (\d+))?\], dtype=tl\.int32, is_pure=False, pack=1\)")


def _l2_hints(fused: str) -> list[tuple[str, int, int, int, int]]:
    """(pointer, row stride, offset, bytes per row, gap) of each L2 hint, in source order."""
    hints = [(p, int(s), int(o or 0), int(b), int(g or 0)) for p, s, o, b, g in
             _L2_HINT.findall(fused)]
    assert len(hints) == fused.count("cp.async.bulk.prefetch.L2.global")  # all well formed
    return hints


def _row_loaded_pointers(fused: str, stride: int) -> set[str]:
    """The pointers loaded at `r0 + stride * x` (the [M, N] inputs)."""
    return set(re.findall(rf"tl\.load\((in_ptr\d+) \+ \([\d +]*r0_1 \+ {stride}\*x0\)", fused))


def _l2_hint_asms(fused: str) -> set[str]:
    """The asm strings of the L2 hints: rows read twice (column-tiled) keep their lines."""
    return set(re.findall(r"tl\.inline_asm_elementwise\('([^']*)'", fused))


@pytest.mark.parametrize("distance", [1, 2])
def test_l2_prefetch_in_register_tiled_row_loop(cuda_knobs, plugin, distance):
    """Register tiles are not double-buffered: each iteration hints the row block
    `distance` steps ahead of x and dy into L2 (not the [M, 1] rstd nor the [N] weight),
    before the tiles' loads; the interpreter runs the hint as a no-op."""
    cuda_knobs(l2_prefetch_on_cpu=True)
    cuda_knobs(l2_prefetch_distance=distance)
    args = _inputs(M=64, N=40)
    with _register_tiled(cuda_knobs):
        got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert f"'prefetch': False, 'l2_prefetch': {distance}" in code
    fused = _fused_kernel_source(code)
    ahead = (f"xoffset_l2 = tl.maximum(tl.minimum(xoffset + {distance} * row_step, "
             "xnumel - XBLOCK), 0)")
    assert fused.count(ahead) == 1
    assert fused.count("xrows_l2 = tl.minimum(xnumel - xoffset_l2, XBLOCK)") == 1
    hints = _l2_hints(fused)
    assert len(hints) == 2  # x and dy
    assert [h[1:] for h in hints] == [(40, 0, 160, 0)] * 2  # 40 fp32 columns, whole rows
    pointers = {h[0] for h in hints}
    assert len(pointers) == 2 and pointers == _row_loaded_pointers(fused, 40)
    # column-tiled: the plain hint by default (keeping lines for the second pass is a knob)
    assert "'column_tiled': True" in code
    assert _l2_hint_asms(fused) == {cuda_codegen.L2_PREFETCH_ASM}
    # inside the row loop, at its indentation, before the first column tile's loads
    lines = fused.splitlines()
    loop = next(i for i, line in enumerate(lines) if "for xoffset in" in line)
    hint = next(i for i, line in enumerate(lines) if "xoffset_l2 = " in line)
    tile0 = next(i for i, line in enumerate(lines) if "r0_offset = 0 * R0_BLOCK" in line)
    first_load = next(i for i, line in enumerate(lines) if i > loop and "tl.load(" in line)
    indent = lines[loop + 1][:len(lines[loop + 1]) - len(lines[loop + 1].lstrip())]
    assert lines[hint].startswith(indent) and not lines[hint].startswith(indent + " ")
    assert loop < hint < first_load < tile0
    assert max(i for i, line in enumerate(lines) if "cp.async.bulk" in line) < first_load
    assert_close(got, rms_backward(*[a.double() for a in args]))


def _double_buffered(cuda_knobs):
    cuda_knobs(prefetch_min_n=1)
    cuda_knobs(prefetch_min_rows=1)
    cuda_knobs(tile_elems=512)  # XBLOCK 8: 8 blocks, 2 programs


def test_no_l2_prefetch_when_the_row_loads_are_double_buffered(cuda_knobs, plugin):
    """The next block already sits in `_pf` registers: no L2 hint on top."""
    _double_buffered(cuda_knobs)
    cuda_knobs(l2_prefetch_on_cpu=True)
    args = _inputs(M=64, N=40)
    got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "_pf = tl.load(" in code and "'prefetch': True, 'l2_prefetch': 0" in code
    assert "xoffset_l2" not in code and "cp.async.bulk" not in code
    assert "inline_asm" not in code
    assert_close(got, rms_backward(*[a.double() for a in args]))


def test_l2_prefetch_in_persistent_loop_without_double_buffering(cuda_knobs, plugin):
    _double_buffered(cuda_knobs)
    cuda_knobs(prefetch_min_n=4096)  # above R0_BLOCK: off
    cuda_knobs(l2_prefetch_on_cpu=True)
    args = _inputs(M=64, N=40)
    got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "'column_tiled': False" in code and "'prefetch': False, 'l2_prefetch': 1" in code
    fused = _fused_kernel_source(code)
    assert "_pf = tl.load(" not in fused
    assert fused.count("xoffset_l2 = tl.maximum(tl.minimum(xoffset + 1 * row_step, "
                       "xnumel - XBLOCK), 0)") == 1
    hints = _l2_hints(fused)
    assert len(hints) == 2 and {h[0] for h in hints} == _row_loaded_pointers(fused, 40)
    assert [h[1:] for h in hints] == [(40, 0, 160, 0)] * 2
    assert _l2_hint_asms(fused) == {cuda_codegen.L2_PREFETCH_ASM}  # one pass: no evict_last
    assert_close(got, rms_backward(*[a.double() for a in args]))


@pytest.mark.parametrize("register_tiles", [False, True])
def test_no_l2_prefetch_on_cpu_by_default(plugin, cuda_knobs, register_tiles):
    args = _inputs(M=64, N=40)
    with _register_tiled(cuda_knobs) if register_tiles else contextlib.nullcontext():
        got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    assert "'prefetch': False, 'l2_prefetch': 0" in code  # a loop the hint would suit
    assert "xoffset_l2" not in code and "inline_asm" not in code
    assert_close(got, rms_backward(*[a.double() for a in args]))


@pytest.mark.parametrize("first_column,sliced_in", [(0, "graph"), (8, "graph"), (8, "input")])
def test_l2_prefetch_of_a_sliced_input_ends_at_the_last_row(plugin, cuda_knobs,
                                                            first_column, sliced_in):
    """x = big[:, c:c + 40] of a [64, 48] tensor: rows 192 bytes apart. The hint starts at
    the block's first element and stops after its last row's 40th column, not at the end
    of the gap after it. Sliced in the graph, c is an offset of the index; sliced before,
    the input pointer already starts c columns in."""
    cuda_knobs(l2_prefetch_on_cpu=True)
    N, stride = 40, 48
    big = torch.randn(64, stride)
    _, w, dy, rstd = _inputs(M=64, N=N)
    if sliced_in == "graph":
        def fn(big, w, dy, rstd):
            return rms_backward(big[:, first_column:first_column + N], w, dy, rstd)
        args, offset = (big, w, dy, rstd), first_column
    else:
        fn, args, offset = rms_backward, (big[:, first_column:first_column + N], w, dy, rstd), 0
    got, (code,) = run_and_get_code(torch.compile(fn), *args)
    assert inductor_ext.metrics.mix_order_kernels == 1
    fused = _fused_kernel_source(code)
    hints = {h[0]: h[1:] for h in _l2_hints(fused)}
    (x_ptr,) = _row_loaded_pointers(fused, stride)
    (dy_ptr,) = _row_loaded_pointers(fused, N)
    assert hints == {x_ptr: (stride, offset, stride * 4, (stride - N) * 4),
                     dy_ptr: (N, 0, N * 4, 0)}
    start = f"{stride} * xoffset_l2" + (f" + {offset}" if offset else "")
    assert f"[{x_ptr} + ({start}), xrows_l2 * 192 - 32]" in fused
    assert _l2_hint_asms(fused) == {cuda_codegen.L2_PREFETCH_ASM}
    assert_close(got, fn(*[a.double() for a in args]))


@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_l2_hint_keeps_lines_for_the_second_pass_when_asked(plugin, cuda_knobs, fraction):
    """l2_keep_fraction > 0: a column-tiled loop's hint enters L2 as evict_last (that share
    of its lines), a persistent loop's hint stays plain; the kernel still runs."""
    cuda_knobs(l2_prefetch_on_cpu=True)
    cuda_knobs(l2_keep_fraction=fraction)
    cuda_knobs(register_tile=16)
    args = _inputs()
    with inductor_ext.config.patch(max_persistent_n=16):
        got, (code,) = run_and_get_code(torch.compile(rms_backward), *args)
    keep = cuda_codegen.L2_PREFETCH_ASM_KEEP.replace("pol, 1.0;", f"pol, {fraction!r};")
    assert _l2_hint_asms(_fused_kernel_source(code)) == {keep}
    assert f"createpolicy.fractional.L2::evict_last.b64 pol, {fraction!r};" in keep
    assert_close(got, rms_backward(*[a.double() for a in args]))
    hint = cuda_codegen.CudaFlavor().l2_prefetch_statement("p", "n", second_pass=False,
                                                            keep_fraction=fraction)
    assert cuda_codegen.L2_PREFETCH_ASM in hint and "createpolicy" not in hint


def test_l2_prefetch_distance_by_device():
    two = CudaTuning(l2_prefetch_distance=2)
    assert cuda_plan.l2_prefetch_for(HOPPER, two) == 2  # Hopper and later
    assert cuda_plan.l2_prefetch_for(AMPERE, two) == 0  # no bulk prefetch before sm_90
    assert cuda_plan.l2_prefetch_for(DeviceInfo(type="meta"), two) == 0
    assert cuda_plan.l2_prefetch_for(INTERPRETER, two) == 0  # l2_prefetch_on_cpu off
    on_cpu = CudaTuning(l2_prefetch_distance=2, l2_prefetch_on_cpu=True)
    assert cuda_plan.l2_prefetch_for(INTERPRETER, on_cpu) == 2
    off = CudaTuning(l2_prefetch_distance=0, l2_prefetch_on_cpu=True)
    assert cuda_plan.l2_prefetch_for(INTERPRETER, off) == 0
    assert cuda_plan.l2_prefetch_for(HOPPER, off) == 0
    assert cuda_plan.l2_prefetch_for(HOPPER, two, double_buffered=True) == 0


@triton.jit
def _inline_asm_kernel(x_ptr, out_ptr, ASM: tl.constexpr):
    offsets = tl.arange(0, 16)
    x = tl.load(x_ptr + offsets)
    tl.inline_asm_elementwise(ASM, "=r,l,r", [x_ptr + offsets, offsets], dtype=tl.int32,
                              is_pure=False, pack=1)
    tl.store(out_ptr + offsets, x + 1)


@pytest.mark.parametrize("hint", ["L2_PREFETCH_ASM", "L2_PREFETCH_ASM_KEEP"])
def test_interpreter_runs_the_l2_hint_as_a_no_op_and_no_other_asm(hint):
    from triton.runtime.errors import InterpreterError

    from inductor_ext.interpreter import cpu_interpret

    asm = getattr(cuda_codegen, hint)
    x, out = torch.arange(16, dtype=torch.float32), torch.zeros(16)
    with cpu_interpret():
        _inline_asm_kernel[(1,)](x, out, ASM=asm)
        assert torch.equal(out, x + 1)
        with pytest.raises(InterpreterError, match="inline_asm not supported") as err:
            _inline_asm_kernel[(1,)](x, out, ASM="mov.u32 $0, 0;")
        assert isinstance(err.value.__cause__, NotImplementedError)
    # the patch ends with the context: the hint is unsupported again
    with pytest.raises(InterpreterError, match="inline_asm not supported"):
        _inline_asm_kernel[(1,)](x, out, ASM=asm)


_COMPILE_FOR_SM = """
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
sys.path.insert(0, sys.argv[1])
from l2_hint_kernel import l2_hint_kernel
src = ASTSource(fn=l2_hint_kernel, constexprs={"BLOCK": 1024},
                signature={"x_ptr": "*bf16", "y_ptr": "*bf16", "n": "i32", "BLOCK": "constexpr"})
try:
    c = triton.compile(src, target=GPUTarget("cuda", int(sys.argv[2]), 32))
except Exception as e:
    print(json.dumps({"error": str(e)}))
else:
    print(json.dumps({"ptx": c.asm["ptx"], "cubin_bytes": len(c.asm["cubin"])}))
"""


@pytest.mark.parametrize("second_pass", [False, True])
def test_l2_prefetch_asm_assembles_for_hopper_only(tmp_path, second_pass):
    """Triton's bundled ptxas (no GPU needed) takes the hint for sm_90 and rejects it for
    sm_80, so the asm string is checked, not just passed through. Rows read twice get the
    variant that enters L2 as evict_last (a cache policy on the bulk prefetch)."""
    import json
    import subprocess
    import sys
    import textwrap

    hint = cuda_codegen.CudaFlavor().l2_prefetch_statement(
        "x_ptr + off", "nbytes", second_pass, keep_fraction=1.0)  # the kept variant
    asm = cuda_codegen.L2_PREFETCH_ASM_KEEP if second_pass else cuda_codegen.L2_PREFETCH_ASM
    assert hint.startswith(f"tl.inline_asm_elementwise({asm!r}, ")
    (tmp_path / "l2_hint_kernel.py").write_text(textwrap.dedent(f"""
        import triton
        import triton.language as tl

        @triton.jit
        def l2_hint_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            off = tl.program_id(0) * BLOCK
            nbytes = tl.minimum(n - off, BLOCK) * 2
            {hint}
            idx = off + tl.arange(0, BLOCK)
            tl.store(y_ptr + idx, tl.load(x_ptr + idx, idx < n), idx < n)
    """))
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(tmp_path / "cache")}

    def compile_for(sm: int) -> dict:
        res = subprocess.run([sys.executable, "-c", _COMPILE_FOR_SM, str(tmp_path), str(sm)],
                             env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout.strip().splitlines()[-1])

    hopper = compile_for(90)
    assert "error" not in hopper, hopper.get("error")
    if second_pass:
        assert "createpolicy.fractional.L2::evict_last.b64 pol, 1.0;" in hopper["ptx"]
        assert "@p cp.async.bulk.prefetch.L2.global.L2::cache_hint [a], n, pol;" in hopper["ptx"]
    else:
        assert "@p cp.async.bulk.prefetch.L2.global [a], n;" in hopper["ptx"]
        assert "createpolicy" not in hopper["ptx"]
    assert hopper["cubin_bytes"] > 0
    ampere = compile_for(80)
    assert "cp.async.bulk.prefetch" in ampere.get("error", "")
    assert "sm_90" in ampere["error"]
