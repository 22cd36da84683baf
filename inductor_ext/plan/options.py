"""The user options planning reads, as one value (`inductor_ext.plan_inputs` takes it from
`inductor_ext.config` once per group: planning itself never reads the config module)."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class PlanOptions:
    split_size: int | None = None
    max_persistent_n: int = 16384
    ascend_vector_cores: int | None = None
    ascend_ub_bytes: int | None = None  # None: the device's (by SoC)
    #: The baseline's own mix-order gates ("none", "strict", "relaxed"): what stock
    #: torch.compile would fuse without us (`compat.upstream_mix_order_gates`).
    upstream_gates: str = "strict"
    #: The group needs each row whole in one pass: a column reduction reads what the row
    #: side computes, or the column sums are segmented. Set by the hook per group.
    whole_rows: bool = False
