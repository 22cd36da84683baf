"""The Ascend SoCs torch_npu's Inductor backend runs on, with their facts and each fact's
source: what the torch_npu emulation reports per SoC, and what the Ascend checks run on.

No torch here: tests/ascend/ub_plan.py (any venv with ascendnpu-ir) imports it too.

Sources (every number below comes from one of these; none is estimated):

- ``soc_id``: torch_npu's ``c10_npu::SocVersion`` enum, header
  ``torch_npu/include/torch_npu/csrc/core/npu/NpuVariables.h`` of the torch_npu 2.13.0 and
  2.14.0 wheels (identical in both). torch_npu's Inductor config compares ids only against
  ``Ascend950 = 260`` (``is_ascend950 = get_soc_version() >= Ascend950``).
- ``cube_cores`` / ``vector_cores`` / ``hw_ub_bytes``: the target device spec of
  bishengir-compile (ascendnpu-ir 1.2.0), printed by
  ``bishengir-opt --hacc-append-device-spec=target=<bishengir_target>`` on an empty module
  (``CUBE_CORE_COUNT``, ``VECTOR_CORE_COUNT``, ``UB_SIZE`` in bits; ``bishengir-opt-a5``
  for Ascend950). On hardware torch_npu reads the cores from the device properties; the
  compiler's spec is the toolchain's own record of them.
- ``ub_bytes``: what torch_npu's Inductor config reads as ``ub_size`` (``_inductor/config.py``:
  192 KiB, 256 KiB when ``is_ascend950``); this is what the plugin plans with. On Ascend950
  it is more than bishengir's spec grants (248 KiB = 2031616 bits): ``hw_ub_bytes`` is the
  budget bishengir plans against, so the checks hold planned kernels to that (a 950
  calibration point, ln-fp32-N768-M64, was refused by bishengir at 261,248 B requested,
  under torch_npu's 262,144).

Left out of the enum: Ascend910PremiumA..Ascend910B (100-104, the first-generation 910) and
Ascend310P1..P7 (200-205): neither is a target of bishengir-compile or triton-ascend 3.2.0
(whose release covers Atlas A2/A3), so torch_npu's Triton kernels cannot compile for them.
Ascend310B1..B4 (240-243): a target only of the -a5 build (1 AI core, 256 KiB UB), while
torch_npu's config would report 192 KiB for their ids; an inference SoC with no consistent
UB class, left out. Ascend910_9363 (256) is in the table with unknown core counts: it is
neither a bishengir-compile target nor in triton-ascend's arch list, and no primary source
for its cores was found (CANN's platform_config ``Ascend910_9363.ini`` was not available);
the emulation refuses it rather than invent numbers.
"""

from __future__ import annotations

import dataclasses

#: torch_npu's Inductor config: ``Ascend950 = 260``, ``ub_size`` 192 KiB below it, 256 above.
ASCEND950_ID = 260
_TORCH_NPU_UB = {False: 192 * 1024, True: 256 * 1024}
_TORCH_NPU_ENUM = ("torch_npu 2.13.0/2.14.0 wheel include/torch_npu/csrc/core/npu/"
                   "NpuVariables.h (SocVersion)")
_BISHENGIR = "ascendnpu-ir 1.2.0 {opt} --hacc-append-device-spec=target={target}"


@dataclasses.dataclass(frozen=True)
class Soc:
    """One SoC of torch_npu's enum, as torch_npu and bishengir-compile describe it."""

    name: str  # torch_npu's enum name (also what the device properties report)
    soc_id: int  # torch_npu's SocVersion
    cube_cores: int | None  # None: no primary source found
    vector_cores: int | None
    hw_ub_bytes: int | None  # bishengir's UB_SIZE / 8: the budget a kernel is planned in
    bishengir_target: str | None  # --target of bishengir-compile (None: not a target)

    @property
    def ascend950(self) -> bool:
        """torch_npu's ``is_ascend950``."""
        return self.soc_id >= ASCEND950_ID

    @property
    def ub_bytes(self) -> int:
        """torch_npu's Inductor ``ub_size`` for this SoC (what the plugin plans with)."""
        return _TORCH_NPU_UB[self.ascend950]

    @property
    def ub_class(self) -> str:
        """The UB class (inductor_ext.targets.ascend.ub.ub_class): SoCs of one class have
        the same UB and are planned by the same bishengir build, so their kernels have the
        same footprints."""
        return "950" if self.ascend950 else "A2A3"

    @property
    def known(self) -> bool:
        return self.vector_cores is not None and self.cube_cores is not None

    @property
    def bishengir_binary(self) -> str:
        return "bishengir-compile-a5" if self.ascend950 else "bishengir-compile"

    @property
    def source(self) -> str:
        """Where each number comes from."""
        if self.bishengir_target is None:
            cores = "cores: no primary source found (not a bishengir-compile target)"
        else:
            opt = "bishengir-opt-a5" if self.ascend950 else "bishengir-opt"
            cores = "cores, hw UB: " + _BISHENGIR.format(opt=opt, target=self.bishengir_target)
        return (f"id: {_TORCH_NPU_ENUM}; ub_bytes: torch_npu _inductor/config.py ub_size; "
                f"{cores}")


def _a2a3(name: str, soc_id: int, ai_cores: int, target: str | None = None) -> Soc:
    """An Atlas A2/A3 SoC: 1 cube + 2 vector cores per AI core, UB 1572864 bits (both per
    bishengir's spec of the target)."""
    return Soc(name, soc_id, ai_cores, 2 * ai_cores, 1572864 // 8, target or name)


#: Every SoC of torch_npu's enum that its Inductor backend runs on, in enum order.
SOCS: tuple[Soc, ...] = (
    _a2a3("Ascend910B1", 220, 24),
    _a2a3("Ascend910B2", 221, 24),
    _a2a3("Ascend910B2C", 222, 24),
    _a2a3("Ascend910B3", 223, 20),
    _a2a3("Ascend910B4", 224, 20),
    _a2a3("Ascend910B4_1", 225, 20, "Ascend910B4-1"),
    _a2a3("Ascend910_9391", 250, 24),
    _a2a3("Ascend910_9392", 251, 24),
    _a2a3("Ascend910_9381", 252, 24),
    _a2a3("Ascend910_9382", 253, 24),
    _a2a3("Ascend910_9372", 254, 20),
    _a2a3("Ascend910_9362", 255, 20),
    Soc("Ascend910_9363", 256, None, None, None, None),
    # torch_npu has one id for every Ascend950 part; bishengir knows each (8..72 vector
    # cores, one UB). Ascend950PR_9599 is the part the checks compile for (36 AI cores).
    Soc("Ascend950", 260, 36, 72, 2031616 // 8, "Ascend950PR_9599"),
)

#: Short spellings (the emulation's and checks' historical ones) and bishengir's.
ALIASES: dict[str, str] = {"910B1": "Ascend910B1", "910B3": "Ascend910B3", "950": "Ascend950",
                           "Ascend910B4-1": "Ascend910B4_1"}
BY_NAME: dict[str, Soc] = {s.name: s for s in SOCS}
BY_ID: dict[int, Soc] = {s.soc_id: s for s in SOCS}
#: The SoC each UB class's calibration (ub_calibration.json) was measured on.
CALIBRATED_ON: dict[str, str] = {"A2A3": "Ascend910B3", "950": "Ascend950"}


def get(soc: str | int) -> Soc:
    """The table's SoC for a name, alias or torch_npu id; ValueError naming the choices."""
    if isinstance(soc, int):
        if soc in BY_ID:
            return BY_ID[soc]
        raise ValueError(f"unknown SoC id {soc}: one of {sorted(BY_ID)} (torch_npu's "
                         "SocVersion ids its Inductor backend runs on)")
    found = BY_NAME.get(ALIASES.get(soc, soc))
    if found is None:
        raise ValueError(f"unknown SoC {soc!r}: one of {sorted(BY_NAME)} or "
                         f"{sorted(ALIASES)}")
    return found


def known() -> tuple[Soc, ...]:
    """The SoCs whose core counts have a source (the ones the emulation can stand in for)."""
    return tuple(s for s in SOCS if s.known)


def classes() -> dict[tuple[int, int], tuple[Soc, ...]]:
    """(vector cores, torch_npu UB bytes) -> its SoCs: what planning sees differs only
    between classes."""
    out: dict[tuple[int, int], list[Soc]] = {}
    for soc in known():
        assert soc.vector_cores is not None
        out.setdefault((soc.vector_cores, soc.ub_bytes), []).append(soc)
    return {key: tuple(socs) for key, socs in out.items()}


def representative(socs: tuple[Soc, ...]) -> Soc:
    """The SoC a class is checked on: the one its UB class was calibrated on, else the
    lowest id."""
    for soc in socs:
        if CALIBRATED_ON.get(soc.ub_class) == soc.name:
            return soc
    return min(socs, key=lambda s: s.soc_id)


def representatives() -> tuple[Soc, ...]:
    """One SoC per (vector cores, UB) class, in table order."""
    reps = {representative(socs).name for socs in classes().values()}
    return tuple(s for s in SOCS if s.name in reps)


def core_count_only(soc: Soc) -> bool:
    """Its class differs from a calibrated class only in vector cores (same UB class): the
    tiles are the same, only the grid differs."""
    return CALIBRATED_ON.get(soc.ub_class) not in {
        s.name for s in classes().get((soc.vector_cores or 0, soc.ub_bytes), ())}
