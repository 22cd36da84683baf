"""The ``inductor_ext`` log, controlled like Inductor's: ``TORCH_LOGS="+inductor_ext"``
prints one line per decision (fused or declined, with the reason)."""

from __future__ import annotations

import logging
import os

LOG_NAME = "inductor_ext"

log = logging.getLogger(LOG_NAME)


def register() -> None:
    """Register with torch._logging and re-read TORCH_LOGS (it was parsed at import torch)."""
    from torch._logging import _internal

    if LOG_NAME in _internal.log_registry.log_alias_to_log_qnames:
        return
    _internal.register_log(LOG_NAME, LOG_NAME)
    if LOG_NAME in os.environ.get("TORCH_LOGS", ""):
        _internal._init_logs()
