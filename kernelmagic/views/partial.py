"""An iteration cut short by Ctrl-C, taken out of the event table before any view."""

from __future__ import annotations

import numpy as np

from kernelmagic.core.events import EventTable, Kind, select
from kernelmagic.views.tree import nearest_ancestor


def without_range(table: EventTable, range_name: str) -> EventTable:
    """``table`` less the range ``range_name`` and everything that ran in it.

    Left out: the range itself, every CPU-side event under it (any depth), CPU-side
    events of other threads and memory records that started inside its span
    (autograd's backward threads), and the GPU work any of those launched. Everything else,
    the completed iterations included, is unchanged.
    """
    if range_name not in table.names:
        return table
    ranges = (table.name == table.names.index(range_name)) & (table.kind == Kind.RANGE)
    if not ranges.any():
        return table
    drop = ranges | (nearest_ancestor(table.parent, ranges) >= 0)
    cpu_side = table.device < 0
    for i in np.flatnonzero(ranges).tolist():
        start, end = int(table.start[i]), int(table.end[i])
        drop |= cpu_side & (table.start >= start) & (table.start < end)
    launched = table.launcher >= 0
    drop[launched] |= drop[table.launcher[launched]]
    return select(table, ~drop)
