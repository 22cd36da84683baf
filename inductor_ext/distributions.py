"""Installed distributions' versions, read from their metadata without importing them:
the environment report and the device check name what is installed even where importing
it would fail or have side effects (a vendor's package registers a device)."""

from __future__ import annotations

import contextlib
import importlib.metadata


def installed_version(*names: str) -> str | None:
    """The version of the first of `names` that is installed (None: none is); a project
    published under more than one spelling is given by each."""
    for name in names:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(name)
    return None
