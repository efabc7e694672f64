"""The ``gpu_idle`` view: each stretch of an iteration during which no GPU work runs, with
its cause, summed per cause.

Within each iteration window, the gaps between the GPU's busy intervals (all streams) are
classified by what the events say about them, first match wins:

- **iteration edge**: the gap touches the window's start or end (the first launch has not
  reached the GPU yet, or the last work is done while the CPU closes the iteration);
- **sync**: a host-device synchronisation (``SYNC_OPS``, ``WAIT_CALLS``) is running on the
  CPU as the gap begins: the CPU waited for the GPU, then had nothing queued (named by the
  op). A sync called while the GPU already idles waits for nothing, so the gap goes by the
  rules below (an 824 ms gap of CUDA set-up in ``a100_alexnet.json.gz`` held an 11 µs
  ``cudaDeviceSynchronize``);
- **host-to-device copy**: the work that ends the gap is a host-to-device memcpy;
- **data loading**: a DataLoader range (``enumerate(DataLoader)...``) runs during the gap,
  or the Python samples in it were waiting for a DataLoader (``Frame.loading``);
- **launch gap**: the CPU had not launched the next work yet: named by the innermost CPU op
  running at the middle of the gap, or ``Python between ops`` when none runs then
  (``BETWEEN_OPS``).

Each cause also names the user's Python line behind it (``Lines``): the line that called
the sync op, the DataLoader or the op, or that ran when no op did, from the Python samples
(the live sampler's, or a trace's ``python_function`` frames made into samples) joined to
the event's time (``python_lines.SampleIndex``), else the ``with_stack`` frame around it.
"""

from __future__ import annotations

import linecache

import numpy as np

from kernelmagic.core.arrays import unique
from kernelmagic.core.events import EventTable, Kind, PythonSamples, Window, device_work
from kernelmagic.core.op_names import DATA_LOADER, SYNC_OPS, WAIT_CALLS
from kernelmagic.core.rows import DATA_LOADING, GpuIdleRow
from kernelmagic.views.breakdown import Intervals, merge, name_mask
from kernelmagic.views.python_lines import SampleIndex, label
from kernelmagic.views.source_lines import frame_owner, user_frames
from kernelmagic.views.tree import in_start_order

_MEMCPY = int(Kind.MEMCPY)
#: The causes, in the order the rules try them (the module's docstring); the one taxonomy
#: of why the GPU waits, which the ``gpu_idle`` finding reads from these rows.
EDGE, SYNC, HTOD_COPY, LAUNCH_GAP = "iteration edge", "sync", "host-to-device copy", "launch gap"
CAUSES = (EDGE, SYNC, HTOD_COPY, DATA_LOADING, LAUNCH_GAP)
#: A launch gap's detail when no CPU op ran at its middle.
BETWEEN_OPS = "Python between ops"


def _cpu_rows(table: EventTable, test: object) -> np.ndarray:
    return np.flatnonzero(name_mask(table, test, among=table.device < 0))


class _Spans(Intervals):
    """Some CPU events' intervals, by start, so "the first that runs during a gap" is a
    few binary searches for all gaps at once."""

    def __init__(self, table: EventTable, rows: np.ndarray) -> None:
        super().__init__(table, rows)
        ends = self.ends
        # The first event (by start) that ends after t is the first whose running maximum
        # of ends passes t. Only events of some length say that one runs during a gap
        # (an instant inside it does not), but the first to run may be an instant.
        self.reach = np.maximum.accumulate(ends) if ends.size else ends
        lasting = ends > self.starts
        self.lasting_starts = self.starts[lasting]
        self.lasting_reach = np.maximum.accumulate(ends[lasting]) if lasting.any() \
            else ends[lasting]

    def running_at(self, t: np.ndarray) -> np.ndarray:
        """Per time in ``t``: an event that runs at it (starts at or before, ends after), or
        -1. The first event (by start) that ends after ``t`` is the first whose running
        maximum of ends passes it: one runs at ``t`` if and only if that one has begun."""
        if not self.rows.size:
            return np.full(t.shape, -1, dtype=np.int64)
        first = np.searchsorted(self.reach, t, "right")
        at = np.minimum(first, self.rows.size - 1)
        return np.where((first < self.rows.size) & (self.starts[at] <= t), self.rows[at], -1)

    def first_during(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Per gap ``[lo, hi)``: the first of the events (by start) that runs during it,
        or -1 when none of some length does."""
        if not self.lasting_starts.size:
            return np.full(lo.shape, -1, dtype=np.int64)
        some = (np.searchsorted(self.lasting_reach, lo, "right")
                < np.searchsorted(self.lasting_starts, hi, "left"))
        first = np.searchsorted(self.reach, lo, "right")
        return np.where(some, self.rows[np.minimum(first, self.rows.size - 1)], -1)


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
        self.frames, _, rows = user_frames(table)
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
        self.work = in_start_order(table, device_work(table))
        self.is_op = (table.kind == Kind.OP) & (table.device < 0)
        ops = np.flatnonzero(self.is_op)
        self.threads = []  # per thread: its ops' starts, and the ops, by start
        op_tids = table.tid[ops]
        for tid in sorted(set(op_tids.tolist())):
            mine = ops[op_tids == tid]
            mine = mine[np.argsort(table.start[mine], kind="stable")]
            self.threads.append((table.start[mine], mine))

    def op_at(self, t: np.ndarray) -> np.ndarray:
        """Per time in ``t``: the innermost CPU op running then on some thread (the first
        thread, by id, that has one), or -1.

        On one thread events nest: the last op to start before ``t`` either runs at ``t``
        or has ended, and then any op running at ``t`` is one of its ancestors."""
        table = self.table
        found = np.full(t.shape, -1, dtype=np.int64)
        for starts, rows in self.threads:
            left = np.flatnonzero(found < 0)
            if not left.size:
                break
            at = np.searchsorted(starts, t[left], "right") - 1
            node = np.where(at >= 0, rows[np.maximum(at, 0)], -1).astype(np.int64)
            when = t[left]
            while True:  # climb each node's parents until an op running at t, or none
                live = node >= 0
                safe = np.maximum(node, 0)
                running = live & self.is_op[safe] & (table.start[safe] <= when) \
                    & (when < table.end[safe])
                climbing = live & ~running
                if not climbing.any():
                    break
                node[climbing] = table.parent[node[climbing]]
            found[left[running]] = node[running]
        return found

    def causes(self, lo: np.ndarray, hi: np.ndarray, w_lo: np.ndarray,
               w_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per gap: the cause (an index into ``CAUSES``) of the GPU idling over
        ``[lo, hi)`` inside the window ``[w_lo, w_hi)``, the first rule that matches (the
        module's docstring), and the event that names it (-1: none; for an iteration
        edge, 0 at the start, 1 at the end; for data loading, the DataLoader range)."""
        t = self.table
        edge = (lo <= w_lo) | (hi >= w_hi)
        sync = self.syncs.running_at(lo)
        work = self.work  # (by start)
        nxt_at = np.searchsorted(t.start[work], hi, "left")
        nxt = np.where(nxt_at < work.size, work[np.minimum(nxt_at, work.size - 1)],
                       -1) if work.size else np.full(lo.shape, -1)
        htod_name = name_mask(t, lambda n: "htod" in n.lower().replace(" ", ""))
        safe = np.maximum(nxt, 0)
        htod = (nxt >= 0) & (t.kind[safe] == _MEMCPY) & htod_name[safe]
        loader = self.loaders.first_during(lo, hi)
        loading = loader >= 0
        rest = ~edge & (sync < 0) & ~htod & ~loading
        op = np.full(lo.shape, -1, dtype=np.int64)
        if rest.any():
            op[rest] = self.op_at((lo[rest] + hi[rest]) // 2)
        # the rules in order: the first that holds names the gap
        cause = np.select([edge, sync >= 0, htod, loading], [0, 1, 2, 3], 4)
        event = np.select([edge, sync >= 0, htod, loading], [lo > w_lo, sync, nxt, loader], op)
        return cause, event.astype(np.int64)

    def detail(self, cause: int, event: int) -> str:
        """What names a gap of ``cause`` (``causes``)."""
        if cause == 0:
            return "end" if event else "start"
        if cause == 3:
            return DATA_LOADER
        return self.table.names[self.table.name[event]] if event >= 0 else BETWEEN_OPS

    def launcher(self, work: int) -> int:
        """The CPU event that launched GPU work ``work`` (itself when none is known)."""
        linked = int(self.table.launcher[work])
        return linked if linked >= 0 else work

    def named(self, cause: int, event: int, lo: int, hi: int) -> Cause:
        """(cause, detail, location, code) of one gap ``[lo, hi)`` of ``cause`` and
        ``event`` (``causes``), with the user's line behind it (``Lines``)."""
        lines, name, detail = self.lines, CAUSES[cause], self.detail(cause, event)
        if cause == 0:
            return name, detail, "", ""
        if cause == 2:
            return (name, detail, *lines.of_op(self.launcher(event)))
        if cause in (1, 3):
            return (name, detail, *lines.of_op(event))
        held = lines.frame_during(lo, hi)
        if lines.loading(held):  # no DataLoader range, but the samples waited for one
            return (DATA_LOADING, DATA_LOADER, *lines.of_frame(held))
        if event >= 0:
            return (name, detail, *lines.of_op(event))
        if held < 0:
            held = lines.frame_during(lo, hi, lines.slack)
        return (name, detail, *lines.of_frame(held))


def _gaps(starts: np.ndarray, ends: np.ndarray,
          windows: list[Window]) -> tuple[np.ndarray, ...]:
    """Every stretch of each window with no GPU work (``starts``/``ends``: the busy
    intervals, merged and sorted): its start, end, and its window's start and end, in
    window order."""
    parts = []
    for lo, hi in windows:
        inside = slice(np.searchsorted(ends, lo, "right"), np.searchsorted(starts, hi, "left"))
        s = np.clip(starts[inside], lo, hi)
        e = np.clip(ends[inside], lo, hi)
        keep = e > s
        g0, g1 = np.concatenate([[lo], e[keep]]), np.concatenate([s[keep], [hi]])
        real = g1 > g0
        count = int(real.sum())
        parts.append((g0[real], g1[real], np.full(count, lo), np.full(count, hi)))
    return tuple(np.concatenate([p[k] for p in parts]).astype(np.int64) for k in range(4))


def gpu_idle_rows(table: EventTable, windows: list[Window],
                  samples: PythonSamples | None = None, cell_file: str | None = None,
                  cell_label: str = "") -> list[GpuIdleRow]:
    """The GPU's idle time per (cause, detail, line), µs per iteration, largest first.

    ``samples``: the Python samples that name the lines (live, or ``samples_from_trace``);
    ``cell_file`` and ``cell_label`` name the cell's lines ``cell[n]:line``."""
    if not windows:
        return []
    lines = Lines(table, samples, cell_file, cell_label)
    context = _Context(table, lines)
    lo, hi, w_lo, w_hi = _gaps(*merge(table.start[context.work], table.end[context.work]),
                               windows)
    cause, event = context.causes(lo, hi, w_lo, w_hi)
    totals: dict[Cause, list[float]] = {}
    if lines.samples.n or lines.owner is not None:  # lines to name: one gap at a time
        for c, e, g0, g1 in zip(cause.tolist(), event.tolist(), lo.tolist(), hi.tolist(),
                                strict=True):
            slot = totals.setdefault(context.named(c, e, g0, g1), [0.0, 0])
            slot[0] += g1 - g0
            slot[1] += 1
    else:  # no line to name: the gaps of one (cause, event) at once
        key = cause * (table.n + 2) + event + 1  # (cause, event) as one integer
        found, inverse = unique(key, return_inverse=True)
        ns = np.bincount(inverse, weights=hi - lo).tolist()
        counts = np.bincount(inverse).tolist()
        for k, length, n in zip(found.tolist(), ns, counts, strict=True):
            c, e = divmod(k, table.n + 2)
            slot = totals.setdefault((CAUSES[c], context.detail(c, e - 1), "", ""), [0.0, 0])
            slot[0] += length
            slot[1] += n
    steps = len(windows)
    wall = sum(hi - lo for lo, hi in windows) / steps
    rows = [GpuIdleRow(cause=cause, detail=detail, idle_us=ns / steps / 1000.0,
                       share=ns / steps / wall if wall else 0.0, stretches=int(n),
                       location=location, code=code)
            for (cause, detail, location, code), (ns, n) in totals.items()]
    return sorted(rows, key=lambda r: (-r.idle_us, r.cause, r.detail, r.location))
