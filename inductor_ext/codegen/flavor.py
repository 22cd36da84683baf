"""Target flavors: how the fused kernel is written for one target, as small descriptors.

Planning (programs, tiles, configs, whether fusing pays) is `inductor_ext.plan`; a
flavor only turns a `LaunchPlan` into code: the row loop's header and `for` line, compile
options, and target-specific statements (cache hints, dependent launch). Adding a target
is one planning module (listed in `plan.PLANNERS`, the one list of targets) plus one flavor
module that calls :func:`register`.
"""

from __future__ import annotations

from typing import ClassVar

from ..plan import FinalizeBlock, LaunchPlan, planner_for


class TargetFlavor:
    """Base descriptor; subclasses write the row loop for their target."""

    name: ClassVar[str] = ""

    def launch_options(self, plan: LaunchPlan) -> dict[str, int]:
        """Compile options besides XBLOCK in the kernel's fixed config."""
        return {"num_warps": plan.num_warps, "num_stages": plan.num_stages}

    def finalize_launch_options(self, block: FinalizeBlock) -> dict[str, int]:
        return {"num_warps": block.num_warps, "num_stages": 1}

    def l2_prefetch_statement(self, pointer: str, nbytes: str, second_pass: bool,
                              keep_fraction: float) -> str:
        """A statement hinting bytes [pointer, pointer + nbytes) into the L2 cache; only
        asked when the plan set `l2_prefetch`. `second_pass`: the loop reads each row
        twice (column-tiled), so `keep_fraction` of the lines may be kept for it."""
        raise NotImplementedError

    def pdl_trigger_statement(self) -> str:
        """In the fused kernel: the dependent final step may launch (plan.final_step_pdl)."""
        raise NotImplementedError

    def pdl_wait_statement(self) -> str:
        """First in the final step: wait until the fused kernel's writes are visible."""
        raise NotImplementedError

    def loop_header(self, plan: LaunchPlan, program: str = "tl.program_id(0)",
                    programs: str = "") -> list[str]:
        """Lines before the row loop; they define row_step (a prefetching loop loads the
        next block at xoffset + row_step) and whatever loop_statement reads. `program`:
        the text of the program's row program (its workspace row); `programs`: the text
        of the row-program count (default: the plan's, as a literal)."""
        raise NotImplementedError

    def loop_statement(self, plan: LaunchPlan) -> str:
        raise NotImplementedError


_REGISTRY: dict[str, TargetFlavor] = {}


def register(flavor: TargetFlavor) -> TargetFlavor:
    """Registers the code flavor of a target that planning knows (`plan.PLANNERS` is the
    one list of targets; a flavor for any other name is a programming error)."""
    planner_for(flavor.name)
    _REGISTRY[flavor.name] = flavor
    return flavor


def get_flavor(target: str) -> TargetFlavor:
    planner_for(target)  # an unknown target is named there, for planning and code alike
    return _REGISTRY[target]


def registered_targets() -> frozenset[str]:
    return frozenset(_REGISTRY)
