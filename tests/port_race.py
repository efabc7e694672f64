"""Starting again a server that lost the race for its port.

A test that starts a server (a notebook's kernel, the live ranks' store) asks for a TCP port
that is free when chosen; in a parallel run another process (a kernel, a Dask cluster,
JupyterLab) can bind it before the server does. ``retried`` runs the start again, on a new
port, when the error says so, and never for any other error. JupyterLab's starts, judged by
its log instead of an exception, have their own loop (``test_browser._start_lab``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Starts at most, the first included.
STARTS = 3


def retried(start: Callable[[], T], lost_the_port: Callable[[Exception], bool]) -> T:
    """``start()``, run again (``STARTS`` in all) while it raises an error that
    ``lost_the_port`` recognises; any other error is raised at once."""
    for attempt in range(1, STARTS + 1):
        try:
            return start()
        except Exception as exc:
            if attempt == STARTS or not lost_the_port(exc):
                raise
    raise AssertionError("unreachable")
