"""Keeps Kineto's start/stop banners out of notebooks. Imports nothing heavy."""

from __future__ import annotations

import os

#: Kineto prints ``STAGE:``/``USDT:`` lines to the C-level stderr at every profile start
#: and stop unless ``KINETO_LOG_LEVEL`` is set before the process's first profile;
#: 6 is the lowest level that silences them (5 and below still print).
KINETO_QUIET_LEVEL = "6"


def quiet_kineto_logs() -> None:
    """Silence Kineto's banners, unless the user already chose a log level."""
    os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET_LEVEL)
