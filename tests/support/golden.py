"""Generated kernel text against a committed recording (tests/golden/<folder>/<case>.py.txt).

An intended change of the emitted code records anew with INDUCTOR_EXT_RECORD_GOLDEN=1 (the
diff of tests/golden/ then shows what changed)."""

from __future__ import annotations

import os
import pathlib
import re

import pytest
import torch

GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden"
SEPARATOR = "\n# ---- next kernel ----\n"


def recording(kind: str) -> pathlib.Path:
    """The folder of this torch minor version's recordings of `kind` (Inductor's text
    differs between releases): e.g. tests/golden/torch-2.13."""
    minor = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    return GOLDEN / f"{kind}-{minor}"


def normalized(source: str) -> str:
    """`source` without what varies by installation only (the Triton build's hash)."""
    return re.sub(r"'backend_hash': '[0-9A-Fa-f]+'", "'backend_hash': '<triton build>'", source)


def compare_or_record(folder: pathlib.Path, case: str, texts: list[str]) -> None:
    """Assert `texts` equal the recording of `case` (or record them anew)."""
    assert texts, f"{case}: no fused kernel was emitted"
    text = SEPARATOR.join(normalized(t) for t in texts)
    path = folder / f"{case}.py.txt"
    if os.environ.get("INDUCTOR_EXT_RECORD_GOLDEN") == "1":
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        pytest.skip(f"no recording in {folder.name} (INDUCTOR_EXT_RECORD_GOLDEN=1 makes one)")
    assert text == path.read_text(), f"{case}: the generated text differs from {path}"
