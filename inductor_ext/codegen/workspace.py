"""The workspace of one fused kernel: the partials of K column reductions, one [K, N] row
block per program, [programs, K, N] in the accumulator dtype at `offset` elements into
Inductor's workspace buffer.

The fused kernel, the generated final step, the ATen final step (and the Ascend kernel)
all address it; the layout lives here once so that they cannot disagree. A segmented
partial's programs are laid out sample-major: program `b * per + j` is sample b's j-th.
A counted workspace has one more element after the partials: the number of programs the
fused kernel's config launched, which the generated final step folds (configs may launch
fewer programs than the workspace has rows).
"""

from __future__ import annotations

import dataclasses

import torch

from ..plan.types import workspace_bytes


@dataclasses.dataclass(frozen=True)
class Workspace:
    """The [programs, K, N] partials, and the names it has in the kernel and the wrapper."""

    programs: int
    partials: int  # K
    columns: int  # N
    dtype: torch.dtype
    inner: str = ""  # the kernel's pointer argument
    outer: str = ""  # the wrapper's buffer
    offset: int = 0  # elements before the first partial in the buffer
    counted: bool = False  # the launched programs' count follows the partials

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.programs, self.partials, self.columns)

    @property
    def numel(self) -> int:
        return self.programs * self.partials * self.columns

    @property
    def allocated(self) -> int:
        """Elements the kernel needs from the workspace buffer (the count's included)."""
        return self.numel + int(self.counted)

    def count_pointer(self, base: str | None = None) -> str:
        """Triton text of the address of the launched programs' count."""
        assert self.counted, "only a counted workspace holds the count"
        return f"{self.inner if base is None else base} + {self.offset + self.numel}"

    @property
    def nbytes(self) -> int:
        return workspace_bytes(self.programs, self.partials, self.columns, self.dtype.itemsize)

    @property
    def offset_bytes(self) -> int:
        return self.offset * self.dtype.itemsize

    def placed(self, inner: str, outer: str, offset: int) -> Workspace:
        """This layout where Inductor's workspace allocation put it."""
        return dataclasses.replace(self, inner=inner, outer=outer, offset=offset)

    def pointer(self, program: str, k: int, column: str | None = None,
                base: str | None = None, row_length: str | None = None) -> str:
        """Triton text of the address of (program, partial k, column): `column` None gives
        the start of the partial's row. `base` is the pointer (default: the kernel's
        argument); `row_length` the text of N (default: the constant)."""
        N = self.columns if row_length is None else row_length
        col = "" if column is None else f" + {column}"
        return (f"{self.inner if base is None else base} + "
                f"({self.offset} + ({program} * {self.partials} + {k}) * {N}{col})")

    def segment_program(self, segments: int, sample: str, j: str) -> str:
        """Triton text of the program that walks sample `sample`'s j-th share of rows."""
        return f"({sample} * {self.programs // segments} + {j})"

    def aten_rows(self, k: int, segments: int = 1) -> tuple[str, int]:
        """(wrapper text of partial k's rows, the dim the ATen final step reduces): all
        programs' rows ([P, N], dim 0), or per sample ([B, P / B, N], dim 1)."""
        P, K, N = self.shape
        view = f"{self.outer}[{self.offset}:{self.offset + self.numel}].view({P}, {K}, {N})"
        rows = f"{view}[:, {k}]"
        if segments > 1:
            return f"{rows}.view({segments}, {P // segments}, {N})", 1
        return rows, 0
