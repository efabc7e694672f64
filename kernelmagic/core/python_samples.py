"""Samples of the profiled thread's Python stack, taken while the iterations ran.

The sampler (``kernelmagic/live/python_sampler.py``) fills a ``PythonSamples``; the
``python`` view (``kernelmagic/views/python_lines.py``) joins it by time to the
``EventTable``'s ops. Kept here, below both, as plain arrays and tuples, so that views
never see a frame object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np


class Frame(NamedTuple):
    """Where a sample's time goes: the user's line. ``top_level`` is True for code at the
    top level of a cell or script (``<module>``); ``loading`` when the line was waiting
    for a DataLoader (a ``torch/utils/data/`` frame above it: the sample goes to the user
    line that asked for the batch, not to the dataset's own code)."""

    file: str
    line: int
    function: str
    top_level: bool
    loading: bool = False


@dataclass(eq=False)
class PythonSamples:
    """One entry per sample: ``t_ns`` its time on the profiler's clock (Unix ns, as
    ``EventTable.origin_ns``), ``frame`` an index into ``frames`` (-1: no user frame was
    running, e.g. kernelmagic's own loop between iterations)."""

    t_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    frame: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    frames: list[Frame] = field(default_factory=list)
    interval_s: float = 0.0

    @property
    def n(self) -> int:
        return int(self.t_ns.size)
