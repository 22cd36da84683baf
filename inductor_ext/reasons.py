"""Why a candidate was not fused: the one list of decline reasons.

Each `Reason` member is a code (the string written in the ``reason`` column of
``mix_order_reject``, in the ``rejected_pairs`` / ``norms_declined`` counters and in the
log) with a one-line description; `notes` adds what the README says beyond it. Every
decline passes a member (``metrics.record_reject`` raises `UnknownReason` for anything
else), the report describes codes from here, and the README's table of reasons is
rendered from here:

    python -m inductor_ext.report --reasons     # prints the table README.md holds

A code, once written to tables, keeps its meaning: a new cause gets a new code, and a code
split into several is listed in `RETIRED` (tables from older versions carry it).
"""

from __future__ import annotations

import enum


class UnknownReason(TypeError):
    """A decline recorded with something other than a `Reason` member: a programming
    error (a bare string, a misspelt code), never a user's."""


class Reason(str, enum.Enum):
    """A decline's reason: ``Reason.X == "x"`` (a str, for tables and counters) and
    ``Reason.X.description``."""

    description: str
    notes: str

    def __new__(cls, code: str, description: str, notes: str = "") -> Reason:
        member = str.__new__(cls, code)
        member._value_ = code
        member.description = description
        member.notes = notes
        return member

    # The code wherever a member is printed, on every Python (3.11 changed an enum's
    # format(); this is what enum.StrEnum, 3.11+, does).
    __str__ = str.__str__
    __format__ = str.__format__  # type: ignore[assignment]

    @property
    def code(self) -> str:
        return self.value

    PRODUCER_CONSUMER = (
        "producer_consumer",
        "A path connects the row and the column reduction (or two columns of a group), so "
        "one must finish before the other starts; also when the path runs through another "
        "kernel, which would have to run both before and after the fused one.",
        "(A column may read what the row kernel computes for the row block, at that block's "
        "own elements: an `[M, N]` value such as a q/k norm's dy from the RoPE backward, or a "
        "per-row statistic such as the recomputed rstd of a checkpointed norm; the persistent "
        "kernel hands it the values in registers.)")
    UNSUPPORTED_REDUCTION_TYPE = (
        "unsupported_reduction_type",
        "The column reduction is not sum/prod/max/min (welford, argmax, scans, ...), the row "
        "side contains a scan or sort, or either side is a strict reduction "
        "(`numerics=\"strict\"`, torch 2.14+, which keeps eager's summation order).")
    UNSUPPORTED_DTYPE = (
        "unsupported_dtype",
        "The column reduction accumulates a non-floating dtype, or one the target cannot "
        "accumulate in: the Ascend target declines float64 (its vector units have no float64 "
        "arithmetic).")
    NO_TILE_FITS = (
        "no_tile_fits",
        "Not even the narrowest column tile of one row fits the Ascend Unified Buffer (the "
        "row's `[M, N]` tiles, one fp32 partial per column reduction and the fp32 "
        "temporaries), so the target cannot walk the row at all.",
        "Planning asks the target first (`fits`); the CUDA target always has a tile.")
    UNSUPPORTED_DEVICE = (
        "unsupported_device",
        "The target's compiler does not generate kernels for this device model: Ascend's "
        "Inductor backend serves Ascend 310P / 310B inference SoCs and the first-generation "
        "910, but "
        "triton-ascend and bishengir-compile target Atlas A2/A3 and Ascend950 only.",
        "The detail names the SoC; Inductor's (the vendor backend's) own kernels run unchanged.")
    TILED_ROW_READS = (
        "tiled_row_reads",
        "The row does not fit on chip (longer than `max_persistent_n`, or the Ascend Unified "
        "Buffer), so it is walked in column tiles, and a column reduction reads what the row "
        "side computes (see `producer_consumer`): a persistent row hands it those values in "
        "registers, a column-tiled one cannot.")
    TILED_NON_SUM = (
        "tiled_non_sum",
        "The row does not fit on chip and is walked in column tiles by a run-time loop, which "
        "adds each tile's partials into the workspace: a column reduction that is not a sum "
        "(prod/max/min) cannot be added up that way.",
        "On CUDA, rows whose partials fit in registers (static column tiles) keep any "
        "reduction; the Ascend target always loops.")
    DYNAMIC_N = (
        "dynamic_n",
        "The row length is symbolic; the persistent tile needs it to be static.")
    NO_SHARED_INPUT = (
        "no_shared_input",
        "The shapes match, but no `[M, N]` buffer is read by both sides, nor written by the "
        "row side and read by the column.",
        "A norm's dw/db facing its own dx is recorded every time; other reductions once per "
        "shape, and only when nothing else happened at that shape.")
    NO_ROW_REDUCTION = (
        "no_row_reduction",
        "A norm's dw/db with no dx of its own to join: the norm's input needs no gradient (a "
        "norm applied to data, or after a frozen embedding), so no per-row loop runs for it.",
        "Recorded for every such norm, so the table names it.")
    PARTNER_TAKEN = (
        "partner_taken",
        "The row reductions this column could join are already used by other groups (one of "
        "their reductions went into another group as a column).")
    TRIVIAL_REDUCTION = (
        "trivial_reduction",
        "One side reduces over so few elements (`M` or `N` is 1, or at most Inductor's "
        "`unroll_reductions_threshold`) that Inductor computes it without a reduction loop: "
        "RMSNorm backward at 1x1000, 1000x1, 3x7.",
        "Nothing to fuse; recorded once per shape.")
    NOT_PROFITABLE = (
        "not_profitable",
        "The cost model expects the unfused kernels to be faster.")
    SPLIT_ROWS = (
        "split_rows",
        "Inductor split each row into pieces (its split reduction over few long rows, e.g. "
        "256 rows of 32768, or over a transposed operand): the row side is partial sums over "
        "`M * k` rows of `N / k`, not whole rows, so dx waits for a second stage anyway and "
        "fusing saves only the column kernel's read.",
        "The H100 sweep ran all 12 such cases slower fused (0.12-0.99x of stock), so every "
        "target declines them; as column strips (one piece per program) the 8 split long rows "
        "ran 0.58-1.05x, so only strips whose row side reads a transposed operand are kept "
        "(CUDA).")
    UNSUPPORTED_BACKEND = (
        "unsupported_backend",
        "The device is not generated through Inductor's Triton backend (the C++ CPU backend, "
        "say), so the plugin fuses nothing there: run on a GPU or an NPU, or on CPU with "
        "`TRITON_INTERPRET=1` and the compile inside "
        "`inductor_ext.interpreter.cpu_interpret()`.",
        "On the C++ CPU backend, recorded for every norm of the graph, in its module's name, "
        "and once for the graph's other column reductions, the detail and the graph's summary "
        "line saying what to do; on a vendor's backend the plugin has no adapter for, once "
        "per graph, the detail naming the backend.")
    CPP_WRAPPER = (
        "cpp_wrapper",
        "The output is cpp_wrapper / AOTInductor; the plugin's final step is Python wrapper "
        "code.")
    DYNAMIC_SEGMENTS = (
        "dynamic_segments",
        "A segmented column reduction (adaLN's d(scale) / d(shift), see \"Modulated norms\") "
        "whose sample count `B` is symbolic (a dynamic batch): the fused kernel lays its "
        "programs out per sample at compile time.",
        "Inductor computes it; the group's other columns still fuse.")
    SEGMENTED_UNSUPPORTED = (
        "segmented_unsupported",
        "A segmented column reduction the fused kernel cannot take: its output does not split "
        "into `B` samples of `N` columns, its reduction is not a sample's `T` rows, another "
        "column of the group has another `B`, or the target has no per-sample row loop.")
    EXTERN_NORM = (
        "extern_norm",
        "The norm's backward reached Inductor as one extern kernel, an op it has no "
        "decomposition for (Ascend's `npu_rms_norm_backward`, one aclnnRmsNormGrad, under "
        "its default backend; any layer or RMS norm backward left to a fallback, as Ascend's "
        "`NPU_INDUCTOR_FALLBACK_LIST` does for listed ops without one): its dx and dw are no "
        "Inductor reductions, so there is nothing to fuse.",
        "Recorded for every such norm, in its module's name. "
        "`config.decompose_npu_rms_norm = True` decomposes `npu_rms_norm`'s backward so "
        "those norms fuse (off by default: not measured against aclnnRmsNormGrad on a "
        "device).")
    EXCLUDED_BY_CONFIG = (
        "excluded_by_config",
        "A norm of the group matches an opt-out pattern: `config.exclude_modules` on its "
        "name (its module path, else its source line, as the tables name it) or "
        "`config.exclude_norm_classes` on its class; the user asked to leave it to Inductor.",
        "Checked once matching has named the group's norms, before planning; the whole group "
        "stays Inductor's, the columns that would have ridden along included. The detail, "
        "the report's line of each of the group's norms and the graph's summary line name "
        "the norm that matched and the pattern.")
    INTERNAL_ERROR = (
        "internal_error",
        "The hook or the fused codegen raised, and Inductor's schedule was kept.")


#: Codes older versions wrote that no decline carries any more, and what replaced them.
RETIRED: dict[str, str] = {
    "not_persistent": "three causes, now no_tile_fits, tiled_row_reads and tiled_non_sum",
}


def check(reason: object) -> Reason:
    """`reason` if it is a member, else `UnknownReason` (a bare string included: declines
    pass members, so that every code has its description)."""
    if not isinstance(reason, Reason):
        raise UnknownReason(f"decline reason {reason!r} is not an inductor_ext.reasons.Reason "
                            f"member; known: {', '.join(r.value for r in Reason)}")
    return reason


def describe(code: str) -> str:
    """A table's code described: the member's description, or for a retired code what
    replaced it (a table from an older version), else that the code is unknown."""
    for member in Reason:
        if member.value == code:
            return member.description
    if code in RETIRED:
        return f"(retired code: {RETIRED[code]})"
    return "(not a reason code of this inductor_ext version)"


def render_table() -> str:
    """The README's table of reasons, in markdown (one row per member, in order)."""
    rows = ["| Reason code | Meaning |", "|---|---|"]
    for reason in Reason:
        text = f"{reason.description} {reason.notes}".strip()
        rows.append(f"| `{reason.value}` | {text} |")
    return "\n".join(rows) + "\n"
