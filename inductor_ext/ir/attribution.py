"""The user's modules, source lines and norms a fused group (or a decline) is about, as
table fields (found by scheduler/origin.py)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class Attribution:
    """The origins of a group's (or a decline's) reductions, as table fields."""

    norms: list[str]  # keys of the norms involved, in order, no repeats
    modules: list[str]
    sources: list[str]
    norm_columns: int = 0
    other_columns: int = 0

    @property
    def kind(self) -> str:
        return "norm" if self.norms else "other"

    def fusion_fields(self) -> dict[str, str | int]:
        return {"norms": " ".join(self.norms), "norm_columns": self.norm_columns,
                "other_columns": self.other_columns, "modules": " ".join(self.modules),
                "source": " ".join(self.sources)}

    def reject_fields(self) -> dict[str, str]:
        return {"norms": " ".join(self.norms), "kind": self.kind,
                "modules": " ".join(self.modules), "source": " ".join(self.sources)}
