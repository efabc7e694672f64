"""The ``gpu_idle`` view: each stretch of an iteration during which no GPU work runs, with
its cause, summed per cause.

Within each iteration window, the gaps between the GPU's busy intervals (all streams) are
classified by what the events say about them, first match wins:

- **iteration edge**: the gap touches the window's start or end (the first launch has not
  reached the GPU yet, or the last work is done while the CPU closes the iteration);
- **sync**: a host-device synchronisation (``SYNC_OPS``, ``WAIT_CALLS``) runs on the CPU
  during the gap: the CPU waited for the GPU, then had nothing queued (named by the op);
- **host-to-device copy**: the work that ends the gap is a host-to-device memcpy;
- **data loading**: a DataLoader range (``enumerate(DataLoader)...``) runs during the gap,
  or the Python samples in it were waiting for a DataLoader (``Frame.loading``);
- **launch gap**: the CPU had not launched the next work yet: named by the innermost CPU op
  running at the middle of the gap, or ``Python between ops`` when none runs then.

Each cause also names the user's Python line behind it (``Lines``): the line that called
the sync op, the DataLoader or the op, or that ran when no op did, from the Python samples
(the live sampler's, or a trace's ``python_function`` frames made into samples) joined to
the event's time (``python_lines.SampleIndex``), else the ``with_stack`` frame around it.
"""

from __future__ import annotations

import linecache
from bisect import bisect_right

import numpy as np

from kernelmagic.core.events import EventTable, Kind, Window, device_work
from kernelmagic.core.op_names import DATA_LOADER, SYNC_OPS, WAIT_CALLS
from kernelmagic.core.python_samples import PythonSamples
from kernelmagic.core.rows import DATA_LOADING, GpuIdleRow
from kernelmagic.views.breakdown import merge
from kernelmagic.views.python_lines import SampleIndex, frame_owner, label
from kernelmagic.views.source_lines import user_frames

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


#: What a cause holds: (cause, detail, location, code).
Cause = tuple[str, str, str, str]


class Lines:
    """The user's Python line behind an event or a stretch of time, as (location, code).

    An op's line: the samples taken while it ran (the sampler's lines are exact), else the
    innermost user ``python_function`` frame around it (``with_stack``: the function's
    first line), else the sample nearest to it within two sampling intervals."""

    def __init__(self, table: EventTable, samples: PythonSamples | None,
                 cell_file: str | None = None, cell_label: str = "") -> None:
        self.samples = samples if samples is not None else PythonSamples()
        self.index = SampleIndex(self.samples, self.samples.t_ns - table.origin_ns)
        self.slack = int(2 * self.samples.interval_s * 1e9)
        self.table, self.cell_file, self.cell_label = table, cell_file, cell_label
        self.frames, rows = user_frames(table)
        self.owner = frame_owner(table, rows) if rows.size else None

    def frame_during(self, lo: int, hi: int, slack: int = 0) -> int:
        """The samples' frame index over ``[lo, hi)`` (-1: none)."""
        if not self.samples.n:
            return -1
        return int(self.index.frames_during(np.array([lo]), np.array([hi]), slack)[0])

    def loading(self, frame: int) -> bool:
        """True when the samples' frame ``frame`` waited for a DataLoader."""
        return frame >= 0 and self.samples.frames[frame].loading

    def of_frame(self, frame: int) -> tuple[str, str]:
        if frame < 0:
            return "", ""
        seen = self.samples.frames[frame]
        return self.named(seen.file, seen.line)

    def named(self, file: str, line: int) -> tuple[str, str]:
        return (label(file, line, self.cell_file, self.cell_label),
                linecache.getline(file, line).strip())

    def of_op(self, row: int) -> tuple[str, str]:
        """The line that called the op (or range) ``row``."""
        t = self.table
        lo, hi = int(t.start[row]), int(t.end[row])
        frame = self.frame_during(lo, hi)
        if frame >= 0:
            return self.of_frame(frame)
        owner = int(self.owner[row]) if self.owner is not None else -1
        if owner >= 0:
            file, line, _func = self.frames[int(t.name[owner])]
            if line > 0:  # line 0: a cell's whole top level, no line to name
                return self.named(file, line)
        return self.of_frame(self.frame_during(lo, hi, self.slack))


class _Context:
    """The events a gap is judged by, selected once per table."""

    def __init__(self, table: EventTable, lines: Lines) -> None:
        self.table = table
        self.lines = lines
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

    def cause(self, lo: int, hi: int, window: Window) -> Cause:
        """(cause, detail, location, code) of the GPU idling over ``[lo, hi)`` inside
        ``window``."""
        t, lines = self.table, self.lines
        if lo <= window[0] or hi >= window[1]:
            return "iteration edge", "start" if lo <= window[0] else "end", "", ""
        sync = self.syncs.first_during(lo, hi)
        if sync >= 0:
            return ("sync", t.names[t.name[sync]], *lines.of_op(sync))
        starts = t.start[self.work_by_start]
        at = int(np.searchsorted(starts, hi, "left"))
        if at < starts.size:
            nxt = self.work_by_start[at]
            name = t.names[t.name[nxt]]
            if t.kind[nxt] == _MEMCPY and "htod" in name.lower().replace(" ", ""):
                return "host-to-device copy", name, *lines.of_op(self.launcher(nxt))
        loader = self.loaders.first_during(lo, hi)
        if loader >= 0:
            return (DATA_LOADING, DATA_LOADER, *lines.of_op(loader))
        held = lines.frame_during(lo, hi)
        if lines.loading(held):
            return (DATA_LOADING, DATA_LOADER, *lines.of_frame(held))
        op = self.op_at((lo + hi) // 2)
        if op >= 0:
            return ("launch gap", t.names[t.name[op]], *lines.of_op(op))
        if held < 0:
            held = lines.frame_during(lo, hi, lines.slack)
        return ("launch gap", "Python between ops", *lines.of_frame(held))

    def launcher(self, work: int) -> int:
        """The CPU event that launched GPU work ``work`` (itself when none is known)."""
        linked = int(self.table.launcher[work])
        return linked if linked >= 0 else work


def gpu_idle_rows(table: EventTable, windows: list[Window],
                  samples: PythonSamples | None = None, cell_file: str | None = None,
                  cell_label: str = "") -> list[GpuIdleRow]:
    """The GPU's idle time per (cause, detail, line), µs per iteration, largest first.

    ``samples``: the Python samples that name the lines (live, or ``samples_from_trace``);
    ``cell_file`` and ``cell_label`` name the cell's lines ``cell[n]:line``."""
    if not windows:
        return []
    context = _Context(table, Lines(table, samples, cell_file, cell_label))
    s_all, e_all = merge(table.start[context.work], table.end[context.work])
    totals: dict[Cause, list[float]] = {}
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
                       share=ns / steps / wall if wall else 0.0, stretches=int(n),
                       location=location, code=code)
            for (cause, detail, location, code), (ns, n) in totals.items()]
    return sorted(rows, key=lambda r: (-r.idle_us, r.cause, r.detail, r.location))
