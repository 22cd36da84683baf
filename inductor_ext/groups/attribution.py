"""The user's modules, source lines and norms a fused group (or a decline) is about, as
table fields (found by scheduler/origin.py)."""

from __future__ import annotations

import dataclasses

from ..coverage import label


@dataclasses.dataclass
class Attribution:
    """The origins of a group's (or a decline's) reductions, as table fields."""

    norms: list[str]  # keys of the norms involved, in order, no repeats
    modules: list[str]
    sources: list[str]
    norm_columns: int = 0
    other_columns: int = 0
    #: Class name of each module and norm named above, where known ("LayerNorm").
    classes: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def kind(self) -> str:
        return "norm" if self.norms else "other"

    @property
    def norm_classes(self) -> list[str]:
        """The class of each of `norms`, in its order ("?" where unknown)."""
        return [self.classes.get(norm) or "?" for norm in self.norms]

    def shown_modules(self) -> str:
        """The modules for a log line, each name of digits alone with its class ("3.2
        (LayerNorm)"): a top-level nn.Sequential's children otherwise read as numbers."""
        return ", ".join(label(m, self.classes.get(m, "")) for m in self.modules)

    def fusion_fields(self) -> dict[str, str | int]:
        return {"norms": " ".join(self.norms), "norm_columns": self.norm_columns,
                "other_columns": self.other_columns, "modules": " ".join(self.modules),
                "source": " ".join(self.sources),
                "norm_classes": " ".join(self.norm_classes)}

    def reject_fields(self) -> dict[str, str]:
        return {"norms": " ".join(self.norms), "kind": self.kind,
                "modules": " ".join(self.modules), "source": " ".join(self.sources),
                "norm_classes": " ".join(self.norm_classes)}
