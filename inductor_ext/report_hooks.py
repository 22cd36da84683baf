"""Where the hook reports decisions; the metric tables subscribe here."""

from __future__ import annotations

from typing import Any


def on_decline(names: str, M: Any, N: Any, reason: str, detail: str) -> None:
    """Called once per declined candidate."""
