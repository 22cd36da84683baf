"""The fused kernel's parts that are plain text of their inputs: the workspace layout
(codegen/workspace.py) every reader and writer shares, and the loads ahead of the row loop
(codegen/prefetch.py)."""

import sympy
import torch

from inductor_ext.codegen import prefetch
from inductor_ext.codegen.workspace import Workspace

WS = Workspace(programs=6, partials=2, columns=40, dtype=torch.float32).placed(
    "ws_ptr0", "workspace_0", 8)


def test_workspace_layout():
    assert WS.shape == (6, 2, 40) and WS.numel == 480
    assert WS.nbytes == 1920 and WS.offset_bytes == 32


def test_workspace_addresses_agree():
    """The kernel's store, the final step's load and torch_npu's row start name the same
    element for (program, k, n)."""
    kernel = WS.pointer("tl.program_id(0)", 1, "r0_index", row_length="r0_numel")
    assert kernel == "ws_ptr0 + (8 + (tl.program_id(0) * 2 + 1) * r0_numel + r0_index)"
    assert WS.pointer("r0_index", 1, "xindex", base="ws_ptr") == (
        "ws_ptr + (8 + (r0_index * 2 + 1) * 40 + xindex)")
    assert WS.pointer("pid", 0) == "ws_ptr0 + (8 + (pid * 2 + 0) * 40)"
    program, k, n = 4, 1, 7
    flat = eval(WS.pointer(str(program), k, str(n), base="0"))
    assert flat - WS.offset == (program * WS.partials + k) * WS.columns + n


def test_segmented_programs_are_sample_major():
    """Sample b's j-th program is b * (programs / B) + j, in the kernel and the fold."""
    assert WS.segment_program(3, "seg", "r0_index") == "(seg * 2 + r0_index)"
    assert eval(WS.segment_program(3, "2", "1")) == 5


def test_aten_view():
    assert WS.aten_rows(1) == ("workspace_0[8:488].view(6, 2, 40)[:, 1]", 0)
    assert WS.aten_rows(0, segments=3) == (
        "workspace_0[8:488].view(6, 2, 40)[:, 0].view(3, 2, 40)", 1)


def test_split_loads():
    indexing = "x0 = xindex\n"
    loads = ("tmp0 = tl.load(in_ptr0 + (r0_1 + 40*x0), r0_mask, other=0.0)\n"
             "tmp1 = tl.load(in_ptr1 + (r0_1), r0_mask, other=0.0)\n")
    split = prefetch.split_loads(indexing, loads)
    assert split is not None
    assert split.variables == ["tmp0"] and len(split.other_loads) == 1
    assert "x0" in split.index_names
    # A load that reads a computed value is not a plain load: left single-buffered.
    assert prefetch.split_loads(indexing, "tmp2 = tl.load(in_ptr0 + (tmp0))\n") is None
    assert prefetch.first_block_offset(True) == "tl.minimum(row_start, xnumel - XBLOCK)"


def test_row_span():
    x, r0 = sympy.symbols("x0 r0_1")
    span = prefetch.row_span(48 * x + r0 + 3, x, r0, sympy.Integer(40), "in_ptr0", 2)
    assert (span.stride, span.offset, span.stride_bytes, span.gap_bytes) == (48, 3, 96, 16)
    assert prefetch.row_span(40 * x + 2 * r0, x, r0, sympy.Integer(40), "p", 2) is None
