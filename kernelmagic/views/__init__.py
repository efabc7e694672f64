"""Every view of a profile, each a pure function of an ``EventTable`` (numpy only).

The flow: sources (``kernelmagic/sources/``: a live session, a trace file) -> events
(``kernelmagic/core/events.py``: one ``EventTable``) -> views (this package) -> result
(``ProfileResult``, assembled by ``kernelmagic/results/builder.py: build_result``) ->
renderers. No view imports torch, nor anything above this layer.
"""

from __future__ import annotations

from kernelmagic.core.events import Window
from kernelmagic.core.range_names import MODULE_RANGE, SYNC_RANGE
from kernelmagic.views.iterations import Iterations, find_iterations, iteration_windows
from kernelmagic.views.tree import Figures

__all__ = ["MODULE_RANGE", "SYNC_RANGE", "Figures", "Iterations", "Window",
           "find_iterations", "iteration_windows"]
