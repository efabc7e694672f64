"""Each collective of one rank's steps: when the rank arrived, when it ended, and what the
rank ran just before it arrived (``Arrival`` rows, ``kernelmagic/core/collective_rows.py``).

What a collective is, on one rank:

- **on a GPU**: a communication kernel (``views/breakdown.py: is_comm_kernel``). An NCCL
  kernel starts when its rank arrives and ends once every rank has arrived and the data
  has moved, so its start is the arrival and its end the end. Its name is that of the
  ``nccl:*``/``gloo:*`` range that launched it (the runtime call's enclosing events, the
  innermost so named), else the kernel's name up to ``(``. Its step is the one in which it
  was launched (the runtime call's start; the kernel's own start without one).
- **without communication kernels** (a CPU-only gloo job, or a trace whose NCCL kernels
  are missing): the ``nccl:*``/``gloo:*`` ranges on the CPU, from their start to their end.

Times are from the start of the rank's own step (its ``ProfilerStep#N``, or kernelmagic's
iteration range): ranks' clocks are not comparable, and the step's start is the one moment
every rank marks. This assumes the ranks start a step together; a rank that starts its
step late by some time looks that much early at each collective of the step.

Each collective's ``busy`` is what the rank ran between its previous collective's end in
the step (or the step's start) and its arrival: the ``BUSY_TOP`` ops with the most self
time there, kernels on a GPU (their time clipped to that window), CPU ops otherwise, names
longer than ``BUSY_NAME_CHARS`` cut. The
first ``COLLECTIVES_KEPT`` collectives are kept (in step order), so a ``RankSummary`` stays
small however long the trace.
"""

from __future__ import annotations

import numpy as np

from kernelmagic.core.arrays import isin, unique
from kernelmagic.core.collective_rows import Arrival
from kernelmagic.core.events import EventTable, Kind, Window, device_work, key_finder
from kernelmagic.core.units import cut_end
from kernelmagic.views.breakdown import Intervals, is_comm_kernel, is_comm_op, name_mask
from kernelmagic.views.ops import runtime_calls

__all__ = ["BUSY_NAME_CHARS", "BUSY_TOP", "COLLECTIVES_KEPT", "COLLECTIVE_PREFIXES",
           "collective_arrivals"]

#: How many collectives (the first ones, in step order) a rank's summary keeps.
COLLECTIVES_KEPT = 16
#: How many ops each collective's ``busy`` names.
BUSY_TOP = 3
#: Range names that mark a collective (torch's ``nccl:all_reduce``, ``gloo:all_reduce``).
COLLECTIVE_PREFIXES = ("nccl:", "gloo:")
#: Longer op names in ``busy`` are cut to this many characters (C++ kernel names run to
#: kilobytes; the summary must stay small).
BUSY_NAME_CHARS = 160
#: How far up the enclosing events of a launch to look for its ``nccl:*`` range.
_NAME_DEPTH = 8


def _is_collective_range(name: str) -> bool:
    return name.startswith(COLLECTIVE_PREFIXES)


def _top_busy(table: EventTable, work: Intervals, lo: int, hi: int,
              n: int) -> list[tuple[str, float]]:
    """The ``n`` names with the most self time (µs) within [lo, hi] among ``work`` (the
    events whose self time ``busy`` shares out)."""
    if hi <= lo or not work.rows.size:
        return []
    rows, s, e = work.clip_rows((lo, hi))
    clipped = (e - s).astype(np.float64)
    if not rows.size:
        return []
    own = clipped.copy()
    found, parent = key_finder(rows)(table.parent[rows])  # each one's parent's place
    np.subtract.at(own, parent[found], clipped[found])  # children's time is theirs
    names, inverse = unique(table.name[rows], return_inverse=True)
    sums = np.bincount(inverse, weights=own)
    order = sorted(range(names.size), key=lambda i: (-sums[i], table.names[names[i]]))
    return [(cut_end(table.names[names[i]], BUSY_NAME_CHARS), float(sums[i]) / 1000.0)
            for i in order[:n] if sums[i] > 0]


def _collective_name(table: EventTable, kernel: int, launch: int) -> str:
    """The ``nccl:*`` range enclosing the launch of ``kernel``, else its trimmed name."""
    at = int(table.launcher[kernel]) if launch < 0 else launch
    for _ in range(_NAME_DEPTH):
        if at < 0:
            break
        name = table.names[table.name[at]]
        if _is_collective_range(name):
            return name
        at = int(table.parent[at])
    return table.names[table.name[kernel]].split("(")[0].strip()


def _candidates(table: EventTable) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The collective events (rows), the time that places each in a step, their names."""
    kernels = np.flatnonzero(name_mask(table, is_comm_kernel, among=table.kind == Kind.KERNEL))
    if kernels.size:
        launches = runtime_calls(table, kernels)
        anchors = np.where(launches >= 0, table.start[np.maximum(launches, 0)],
                           table.start[kernels])
        names = [_collective_name(table, int(k), int(r)) for k, r in zip(kernels, launches,
                                                                          strict=True)]
        return kernels, anchors, names
    ranges = np.flatnonzero(name_mask(table, _is_collective_range, among=isin(
        table.kind, (Kind.RANGE, Kind.OP)) & (table.device < 0)))
    return ranges, table.start[ranges], [table.names[table.name[r]] for r in ranges]


def _busy_work(table: EventTable) -> Intervals:
    if bool(device_work(table).any()):
        rows = np.flatnonzero(device_work(table) & ~name_mask(
            table, is_comm_kernel, among=table.kind == Kind.KERNEL))
    else:
        rows = np.flatnonzero((table.kind == Kind.OP) & (table.device < 0)
                              & ~name_mask(table, is_comm_op))
    return Intervals(table, rows)


def collective_arrivals(table: EventTable, windows: list[Window]) -> list[Arrival]:
    """The rank's first ``COLLECTIVES_KEPT`` collectives, step by step (see the module
    docstring)."""
    if not windows:
        return []
    rows, anchors, names = _candidates(table)
    bounds = sorted(windows)
    w_start = np.asarray([s for s, _ in bounds], dtype=np.int64)
    w_end = np.asarray([e for _, e in bounds], dtype=np.int64)
    step = np.searchsorted(w_start, anchors, "right") - 1
    inside = (step >= 0) & (anchors <= w_end[np.maximum(step, 0)])
    order = [int(i) for i in np.lexsort((table.start[rows], step)) if inside[i]][:COLLECTIVES_KEPT]
    work = _busy_work(table)
    out: list[Arrival] = []
    seen: dict[tuple[int, str], int] = {}
    previous_end: dict[int, int] = {}
    for i in order:
        row, k = int(rows[i]), int(step[i])
        begin, arrival, end = int(w_start[k]), int(table.start[row]), int(table.end[row])
        index = seen[(k, names[i])] = seen.get((k, names[i]), -1) + 1
        lo = previous_end.get(k, begin)
        lo = begin if lo > arrival else lo
        out.append(Arrival(step=k, name=names[i], index=index,
                           arrival_us=(arrival - begin) / 1000.0,
                           end_us=(end - begin) / 1000.0,
                           busy=_top_busy(table, work, lo, arrival, BUSY_TOP)))
        previous_end[k] = max(previous_end.get(k, begin), end)
    return out
