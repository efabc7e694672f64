"""Where each iteration's time went: compute, communication, memcpy/memset and idle.

One definition for a single run's summary (``ProfileResult.breakdown``) and for the
many-ranks report (``kernelmagic/results/rank_summary.py``): column arithmetic over the
``EventTable`` and the iteration windows.

On a GPU (the table holds kernels, copies or memsets), within each window, every GPU
event clipped to the window:

- **communication**: time during which at least one communication kernel runs (a
  kernel whose name starts with ``nccl``, any case, or contains ``gloo``);
- **compute**: time during which at least one other kernel runs;
- **memcpy**: time during which at least one memcpy or memset runs;
- **idle**: the window minus the time during which any GPU work runs (all streams);
- **overlap**: the part of the communication time during which a compute kernel runs
  (on another stream), over the communication time; ``None`` when no communication
  kernel ran.

Each category is a union of intervals, so work on concurrent streams is not counted
twice; categories can overlap each other (``overlap`` says how much communication is
hidden behind compute), so compute + communication + memcpy + idle may exceed the
window.

On the CPU (no GPU work), the same way, over the threads: **communication** is the time
during which a collective op runs (``record_param_comms``, ``c10d::*``, ops whose name
starts with ``nccl`` or contains ``gloo``) or a range so named with nothing under it
(``gloo:all_reduce`` on gloo's threads); **compute** the time during which any other op
runs; **memcpy** is 0; **idle** the window minus the time during which any op or such
range runs on any thread (Python between ops, waits); **overlap** is ``None``. Each is a
union clipped to the window, so no share of it is above 100%.

Each figure is the mean over the windows, in µs per iteration; ``wall`` is the windows'
mean length, so each share is a figure over ``wall``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from kernelmagic.core.events import EventTable, Kind, Window, device_work
from kernelmagic.core.rows import Breakdown

#: CPU ops that are communication, by exact name or prefix.
COMM_OPS = ("record_param_comms",)
COMM_OP_PREFIX = "c10d::"


def is_comm_kernel(name: str) -> bool:
    """A communication kernel: its name starts with ``nccl`` (any case) or contains ``gloo``."""
    low = name.lower()
    return low.startswith("nccl") or "gloo" in low


def is_comm_op(name: str) -> bool:
    """A communication op on the CPU: ``record_param_comms``, ``c10d::*``, NCCL or gloo."""
    return name in COMM_OPS or name.startswith(COMM_OP_PREFIX) or is_comm_kernel(name)


# --- intervals --------------------------------------------------------------------------


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted, disjoint (start, end) arrays."""
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if not starts.size:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    first = np.empty(s.size, dtype=bool)
    first[0] = True
    first[1:] = s[1:] > reach[:-1]
    heads = np.flatnonzero(first)
    return s[heads], np.maximum.reduceat(e, heads)


def span_index(t: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each time: the index of the span (sorted by start, disjoint, ends included)
    around it, -1 when none."""
    if starts.size == 0:
        return np.full(t.size, -1)
    k = np.searchsorted(starts, t, "right") - 1
    return np.where((k >= 0) & (ends[np.maximum(k, 0)] >= t), k, -1)


def covered(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length of the union of intervals."""
    s, e = merge(starts, ends)
    return int((e - s).sum())


class Intervals:
    """Some events' (start, end), sorted by start once, so each window reads only the events
    that can reach it (a binary search, not a pass over every event per step)."""

    def __init__(self, table: EventTable, rows: np.ndarray) -> None:
        self.rows = rows[np.argsort(table.start[rows], kind="stable")]
        self.starts = table.start[self.rows]
        self.ends = table.end[self.rows]
        self.longest = int((self.ends - self.starts).max()) if rows.size else 0

    def clip(self, window: Window) -> tuple[np.ndarray, np.ndarray]:
        """The intervals cut to ``window`` (empty ones dropped)."""
        return self.clip_rows(window)[1:]

    def clip_rows(self, window: Window) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``clip``, with the rows of the table whose intervals they are, first."""
        lo, hi = window
        first = np.searchsorted(self.starts, lo - self.longest, "left")
        last = np.searchsorted(self.starts, hi, "left")
        s = np.maximum(self.starts[first:last], lo)
        e = np.minimum(self.ends[first:last], hi)
        keep = e > s
        return self.rows[first:last][keep], s[keep], e[keep]

    def covered(self, window: Window) -> int:
        """Time within ``window`` during which at least one of the intervals runs."""
        return covered(*self.clip(window))


# --- the breakdown ----------------------------------------------------------------------


def name_mask(table: EventTable, test: Any, among: np.ndarray | None = None) -> np.ndarray:
    """Per event: ``test(name)`` evaluated once per distinct name; with ``among`` (a mask
    of events), only for the names those events have (False for the other events)."""
    if among is None:
        per_name = np.fromiter((test(n) for n in table.names), dtype=bool,
                               count=len(table.names))
        return per_name[table.name]
    ids = np.flatnonzero(np.bincount(table.name[among], minlength=len(table.names)))
    per_name = np.zeros(len(table.names), bool)
    per_name[ids] = [test(table.names[i]) for i in ids.tolist()]
    return per_name[table.name] & among


def name_matches(table: EventTable, pattern: re.Pattern[str]) -> tuple[np.ndarray, list[Any]]:
    """Per name id: whether ``pattern`` matches it, and the matches (None where not)."""
    found = [pattern.match(x) for x in table.names]
    return np.fromiter((m is not None for m in found), dtype=bool, count=len(found)), found


def gpu_busy(table: EventTable, windows: list[Window]) -> list[float]:
    """Time (µs) during which any GPU work ran, within each window: the union of the
    kernels, memcpys and memsets clipped to the window (work on concurrent streams counted
    once), so busy + idle is the window."""
    work = Intervals(table, np.flatnonzero(device_work(table)))
    return [work.covered(window) / 1000.0 for window in windows]


def _gpu_totals(table: EventTable, windows: list[Window],
                busy: list[float]) -> tuple[dict[str, float], float | None]:
    """Each category's time over all ``windows`` (ns), and the overlap."""
    kernel = table.kind == Kind.KERNEL
    comm_name = name_mask(table, is_comm_kernel)
    comm = Intervals(table, np.flatnonzero(kernel & comm_name))
    compute = Intervals(table, np.flatnonzero(kernel & ~comm_name))
    copies = Intervals(table, np.flatnonzero((table.kind == Kind.MEMCPY)
                                             | (table.kind == Kind.MEMSET)))
    totals: dict[str, float] = {"compute": 0, "communication": 0, "memcpy": 0, "idle": 0,
                                "work": 0}
    both = 0
    for window, busy_us in zip(windows, busy, strict=True):
        c, k, m = comm.clip(window), compute.clip(window), copies.clip(window)
        comm_ns, compute_ns = covered(*c), covered(*k)
        both += comm_ns + compute_ns - covered(np.concatenate([c[0], k[0]]),
                                               np.concatenate([c[1], k[1]]))
        totals["communication"] += comm_ns
        totals["compute"] += compute_ns
        totals["memcpy"] += covered(*m)
        totals["idle"] += (window[1] - window[0]) - busy_us * 1000.0
        totals["work"] += int(sum((e - s).sum() for s, e in (c, k, m)))
    return totals, both / totals["communication"] if totals["communication"] else None


def _comm_range_rows(table: EventTable) -> np.ndarray:
    """Collectives that torch records as ranges with nothing under them
    (``gloo:all_reduce`` on gloo's own threads): communication, and busy."""
    has_child = np.zeros(table.n, dtype=bool)
    has_child[table.parent[table.parent >= 0]] = True
    return np.flatnonzero(name_mask(table, is_comm_kernel, among=(table.kind == Kind.RANGE)
                                    & (table.device < 0) & ~has_child))


def cpu_busy(table: EventTable) -> Intervals:
    """When some thread runs an op, a runtime call or a collective range: the CPU time that
    is not Python between ops (the ``python`` view shares out the rest)."""
    rows = np.flatnonzero(((table.kind == Kind.OP) | (table.kind == Kind.RUNTIME))
                          & (table.device < 0))
    return Intervals(table, np.concatenate([rows, _comm_range_rows(table)]))


def _cpu_totals(table: EventTable, windows: list[Window]) -> dict[str, float]:
    """Each category's time over all ``windows`` (ns)."""
    op_rows = np.flatnonzero((table.kind == Kind.OP) & (table.device < 0))
    comm = name_mask(table, is_comm_op)[op_rows]
    range_rows = _comm_range_rows(table)
    compute = Intervals(table, op_rows[~comm])
    communication = Intervals(table, np.concatenate([op_rows[comm], range_rows]))
    busy = Intervals(table, np.concatenate([op_rows, range_rows]))
    totals = {"compute": 0.0, "communication": 0.0, "memcpy": 0.0, "idle": 0.0}
    for window in windows:
        totals["compute"] += compute.covered(window)
        totals["communication"] += communication.covered(window)
        totals["idle"] += (window[1] - window[0]) - busy.covered(window)
    return totals


def communication_intervals(table: EventTable) -> Intervals:
    """The communication of the module docstring: NCCL/gloo kernels on a GPU; on a CPU-only
    trace, collective ops and the collective ranges with nothing under them."""
    if bool(device_work(table).any()):
        return Intervals(table, np.flatnonzero(name_mask(table, is_comm_kernel,
                                                         among=table.kind == Kind.KERNEL)))
    op_rows = np.flatnonzero((table.kind == Kind.OP) & (table.device < 0))
    comm = name_mask(table, is_comm_op)[op_rows]
    return Intervals(table, np.concatenate([op_rows[comm], _comm_range_rows(table)]))


def communication_per_window(table: EventTable, windows: list[Window]) -> list[float]:
    """Communication time (µs) within each window, as ``breakdown`` counts it."""
    comm = communication_intervals(table)
    return [comm.covered(window) / 1000.0 for window in windows]


def breakdown(table: EventTable, windows: list[Window],
              busy: list[float] | None = None) -> Breakdown:
    """The mean time per window in each category (see the module's docstring); ``busy``
    is ``gpu_busy(table, windows)`` where the caller has it already."""
    on_gpu = bool(device_work(table).any())
    totals, overlap = (_gpu_totals(table, windows,
                                   gpu_busy(table, windows) if busy is None else busy)
                       if on_gpu else (_cpu_totals(table, windows), None))
    steps = max(len(windows), 1)
    wall = sum(end - start for start, end in windows) / steps / 1000.0
    return Breakdown(device="cuda" if on_gpu else "cpu", wall=wall, overlap=overlap,
                     **{k: ns / steps / 1000.0 for k, ns in totals.items()})
