"""The ``gpu_idle`` view: each stretch of an iteration during which no GPU work runs, with
its cause, summed per cause.

Within each iteration window, the gaps between the GPU's busy intervals (all streams) are
classified by what the events say about them, first match wins:

- **iteration edge**: the gap touches the window's start or end (the first launch has not
  reached the GPU yet, or the last work is done while the CPU closes the iteration);
- **sync**: a host-device synchronisation (``SYNC_OPS``, ``WAIT_CALLS``) runs on the CPU
  during the gap: the CPU waited for the GPU, then had nothing queued (named by the op);
- **host-to-device copy**: the work that ends the gap is a host-to-device memcpy;
- **data loading**: a DataLoader range (``enumerate(DataLoader)...``) runs during the gap;
- **launch gap**: the CPU had not launched the next work yet: named by the innermost CPU op
  running at the middle of the gap, or ``Python between ops`` when none runs then.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from kernelmagic.core.events import EventTable, Kind, Window, device_work
from kernelmagic.core.op_names import DATA_LOADER, SYNC_OPS, WAIT_CALLS
from kernelmagic.core.rows import GpuIdleRow
from kernelmagic.views.breakdown import merge

_MEMCPY = int(Kind.MEMCPY)


def _cpu_rows(table: EventTable, test: object) -> np.ndarray:
    names = np.fromiter((bool(test(n)) for n in table.names), dtype=bool,  # type: ignore[operator]
                        count=len(table.names))
    return np.flatnonzero(names[table.name] & (table.device < 0))


class _Spans:
    """Some CPU events' intervals, merged once, so "does one run during a gap" is a binary
    search; the events themselves (by start) to name the first that does."""

    def __init__(self, table: EventTable, rows: np.ndarray) -> None:
        self.rows = rows[np.argsort(table.start[rows], kind="stable")]
        self.starts, self.ends = table.start[self.rows], table.end[self.rows]
        self.merged = merge(self.starts, self.ends)

    def first_during(self, lo: int, hi: int) -> int:
        """The first of the events that runs during ``[lo, hi)``, or -1."""
        ms, me = self.merged
        at = int(np.searchsorted(ms, hi, "left")) - 1
        if at < 0 or me[at] <= lo:
            return -1
        hits = np.flatnonzero((self.starts < hi) & (self.ends > lo))
        return int(self.rows[hits[0]]) if hits.size else -1


class _Context:
    """The events a gap is judged by, selected once per table."""

    def __init__(self, table: EventTable) -> None:
        self.table = table
        self.syncs = _Spans(table, _cpu_rows(table, lambda n: n in SYNC_OPS or n in WAIT_CALLS))
        self.loaders = _Spans(table, _cpu_rows(table, lambda n: n.startswith(DATA_LOADER)))
        self.work = np.flatnonzero(device_work(table))
        self.work_by_start = self.work[np.argsort(table.start[self.work], kind="stable")]
        ops = np.flatnonzero((table.kind == Kind.OP) & (table.device < 0))
        self.is_op = np.zeros(table.n, dtype=bool)
        self.is_op[ops] = True
        # Python lists: op_at climbs them once per gap, element by element.
        self.start, self.end = table.start.tolist(), table.end.tolist()
        self.parent, self.op_flags = table.parent.tolist(), self.is_op.tolist()
        self.threads = []  # per thread: its ops' starts, and the ops, by start
        for tid in np.unique(table.tid[ops]).tolist():
            mine = ops[table.tid[ops] == tid]
            mine = mine[np.argsort(table.start[mine], kind="stable")]
            self.threads.append((table.start[mine].tolist(), mine.tolist()))

    def op_at(self, t: int) -> int:
        """The innermost CPU op running at ``t`` on some thread, or -1.

        On one thread events nest: the last op to start before ``t`` either runs at ``t``
        or has ended, and then any op running at ``t`` is one of its ancestors."""
        start, end, parent, is_op = self.start, self.end, self.parent, self.op_flags
        for starts, rows in self.threads:
            at = bisect_right(starts, t) - 1
            node = rows[at] if at >= 0 else -1
            while node >= 0:
                if is_op[node] and start[node] <= t < end[node]:
                    return node
                node = parent[node]
        return -1

    def cause(self, lo: int, hi: int, window: Window) -> tuple[str, str]:
        """(cause, detail) of the GPU idling over ``[lo, hi)`` inside ``window``."""
        t = self.table
        if lo <= window[0] or hi >= window[1]:
            return "iteration edge", "start" if lo <= window[0] else "end"
        sync = self.syncs.first_during(lo, hi)
        if sync >= 0:
            return "sync", t.names[t.name[sync]]
        starts = t.start[self.work_by_start]
        at = int(np.searchsorted(starts, hi, "left"))
        if at < starts.size:
            nxt = self.work_by_start[at]
            name = t.names[t.name[nxt]]
            if t.kind[nxt] == _MEMCPY and "htod" in name.lower().replace(" ", ""):
                return "host-to-device copy", name
        if self.loaders.first_during(lo, hi) >= 0:
            return "data loading", DATA_LOADER
        op = self.op_at((lo + hi) // 2)
        return "launch gap", t.names[t.name[op]] if op >= 0 else "Python between ops"


def gpu_idle_rows(table: EventTable, windows: list[Window]) -> list[GpuIdleRow]:
    """The GPU's idle time per (cause, detail), µs per iteration, largest first."""
    if not windows:
        return []
    context = _Context(table)
    s_all, e_all = merge(table.start[context.work], table.end[context.work])
    totals: dict[tuple[str, str], list[float]] = {}
    for lo, hi in windows:
        s = np.clip(s_all, lo, hi)
        e = np.clip(e_all, lo, hi)
        keep = e > s
        edges = np.concatenate([[lo], e[keep]]), np.concatenate([s[keep], [hi]])
        for g0, g1 in zip(edges[0].tolist(), edges[1].tolist(), strict=True):
            if g1 <= g0:
                continue
            key = context.cause(g0, g1, (lo, hi))
            slot = totals.setdefault(key, [0.0, 0])
            slot[0] += g1 - g0
            slot[1] += 1
    steps = len(windows)
    wall = sum(hi - lo for lo, hi in windows) / steps
    rows = [GpuIdleRow(cause=cause, detail=detail, idle_us=ns / steps / 1000.0,
                       share=ns / steps / wall if wall else 0.0, stretches=int(n))
            for (cause, detail), (ns, n) in totals.items()]
    return sorted(rows, key=lambda r: (-r.idle_us, r.cause, r.detail))
