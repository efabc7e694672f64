"""The ``python`` view: the time of each iteration that no op covers, per user Python line.

The sampler (``kernelmagic/live/python_sampler.py``) gives the profiled thread's innermost
user line about every millisecond. Joined by time to the ops (``breakdown.cpu_busy``: an
op, runtime call or collective on any thread), a sample that falls inside an op is op
time (the op's row has it); one that falls outside every op is Python-line time. Each
iteration's exact "other" time (its length minus the ops' union) is shared out among its
outside samples, so that per iteration

    ops (union) + the Python-line rows + unattributed = the iteration's wall time;

"unattributed" is what no user line held: samples in kernelmagic's own loop between
iterations, or a stretch with no sample in it.
"""

from __future__ import annotations

import linecache
import os
from dataclasses import dataclass, field, replace

import numpy as np

from kernelmagic.core.events import EventTable, Frame, Kind, PythonSamples, Window
from kernelmagic.core.rows import DATA_LOADING, PythonLineRow, SourceRow
from kernelmagic.views.breakdown import cpu_busy, merge, name_mask
from kernelmagic.views.source_lines import frame_owner, is_data_loading_file, user_frames

#: How to record what this view needs in a trace.
TRACE_HINT = ("no Python lines: this trace has no python_function events; record them "
              "with torch.profiler.profile(with_stack=True)")


@dataclass
class PythonLines:
    """The view's rows (largest first) and the per-iteration totals they add up to."""

    rows: list[PythonLineRow] = field(default_factory=list)
    python_us: float = 0.0  # the rows' sum, µs per iteration
    unattributed_us: float = 0.0  # the rest of the time no op covered, µs per iteration
    note: str = ""  # why there are no Python lines (a trace without with_stack)


def outside_ops(table: EventTable, times: np.ndarray) -> np.ndarray:
    """Per time (ns from the table's start): True when no op or runtime call runs then."""
    busy = cpu_busy(table)
    starts, ends = merge(busy.starts, busy.ends)
    at = np.searchsorted(starts, times, "right") - 1
    inside = (at >= 0) & (times < ends[np.maximum(at, 0)])
    return ~inside


def sample_weights(samples: PythonSamples) -> np.ndarray:
    """Each sample stands for the time since the one before it (the first: one interval).

    A sample waits for the GIL while the profiled thread runs Python (up to the switch
    interval, 5 ms) but not while it is in an op (ops release it), so samples are sparser
    in pure Python; weighting each by the time it stands for undoes that bias.
    """
    if not samples.n:
        return np.zeros(0)
    first = samples.t_ns[0] - int(samples.interval_s * 1e9)
    return np.diff(samples.t_ns, prepend=first).astype(float)


def label(file: str, line: int, cell_file: str | None, cell_label: str) -> str:
    """``cell[n]:line`` for the profiled cell's lines, ``file:line`` elsewhere."""
    if cell_label and cell_file and file in (cell_file, os.path.basename(cell_file)):
        return f"{cell_label}:{line}"
    return f"{file}:{line}"


def python_lines(table: EventTable, windows: list[Window], samples: PythonSamples,
                 cell_file: str | None = None, cell_label: str = "") -> PythonLines:
    """Each window's time outside every op, shared out among the user lines sampled there."""
    if not windows:
        return PythonLines()
    times = samples.t_ns - table.origin_ns
    free = outside_ops(table, times) if times.size else np.zeros(0, dtype=bool)
    weight = sample_weights(samples)
    busy = cpu_busy(table)
    per_frame = np.zeros(len(samples.frames) + 1)  # the last one: unattributed
    counts = np.zeros(len(samples.frames) + 1, dtype=np.int64)
    for lo, hi in windows:
        other = (hi - lo) - busy.covered((lo, hi))
        here = free & (times >= lo) & (times < hi)
        frames, w = samples.frame[here], weight[here]
        if not frames.size or w.sum() <= 0:
            per_frame[-1] += other
            continue
        slot = np.where(frames >= 0, frames, len(samples.frames))
        np.add.at(per_frame, slot, other * w / w.sum())
        np.add.at(counts, slot, 1)
    steps = len(windows)
    wall = sum(hi - lo for lo, hi in windows) / steps
    rows = []
    for i, frame in enumerate(samples.frames):
        if counts[i] == 0:
            continue
        ns = float(per_frame[i]) / steps
        rows.append(PythonLineRow(
            location=label(frame.file, frame.line, cell_file, cell_label),
            function=frame.function, code=linecache.getline(frame.file, frame.line).strip(),
            self_us=ns / 1000.0, share=ns / wall if wall else 0.0, file=frame.file,
            line=frame.line, samples=int(counts[i]), cause=DATA_LOADING if frame.loading else ""))
    rows.sort(key=lambda r: (-r.self_us, r.location))
    python_ns = float(per_frame[:-1].sum()) / steps
    return PythonLines(rows=rows, python_us=python_ns / 1000.0,
                       unattributed_us=float(per_frame[-1]) / steps / 1000.0)


#: Spacing of the points at which a trace's Python frames are read (ns): 20 µs.
TRACE_STEP_NS = 20_000


def samples_from_trace(table: EventTable, windows: list[Window]) -> PythonSamples:
    """Samples made from a trace's ``python_function`` events (``with_stack``): a point
    every ``TRACE_STEP_NS`` in each window, each given the innermost user frame around it, or,
    inside a DataLoader's frame (``torch/utils/data/``), the user frame around that one,
    marked loading (as the live sampler does).

    torch names a frame ``file(line): function`` with the line the function starts at, so
    a trace's rows are per function, not per line. Empty when the trace has no such frame.
    """
    frames, frame_id, rows = user_frames(table)
    if not rows.size or not windows:
        return PythonSamples()
    grid = np.concatenate([np.arange(lo, hi, TRACE_STEP_NS, dtype=np.int64) for lo, hi in windows])
    owner = np.full(grid.size, -1, dtype=np.int32)
    index: dict[tuple[int, bool], int] = {}
    listed: list[Frame] = []

    def paint(row: int, name: int, loading: bool) -> None:
        first, last = np.searchsorted(grid, [table.start[row], table.end[row]], "left")
        if first == last:
            return
        if (name, loading) not in index:
            file, line, func = frames[name]
            index[name, loading] = len(listed)
            listed.append(Frame(file, line, func, func == "<module>", loading))
        owner[first:last] = index[name, loading]

    # Painting frames in order of start leaves each point with the innermost one around it.
    for row in rows[np.argsort(table.start[rows], kind="stable")].tolist():
        paint(row, int(frame_id[table.name[row]]), False)
    caller = frame_owner(table, rows)
    for row in outermost_loaders(table).tolist():  # then DataLoaders over their insides
        if caller[row] >= 0:
            paint(row, int(frame_id[table.name[caller[row]]]), True)
    return PythonSamples(t_ns=grid + table.origin_ns, frame=owner, frames=listed,
                         interval_s=TRACE_STEP_NS / 1e9)


def outermost_loaders(table: EventTable) -> np.ndarray:
    """A trace's ``python_function`` events in a DataLoader's files with no such event
    around them."""
    rows = np.flatnonzero(name_mask(table, is_data_loading_file,
                                    among=table.kind == Kind.PYTHON))
    if not rows.size:
        return rows
    return rows[frame_owner(table, rows)[rows] < 0]


def frames_during(samples: PythonSamples, times: np.ndarray, starts: np.ndarray,
                  ends: np.ndarray, slack_ns: int = 0) -> np.ndarray:
    """The join of time windows (an op's, an idle stretch's) with the samples: per window
    ``[start, end)``, the index into ``samples.frames`` of the user frame that the samples
    taken in it held longest (by ``sample_weights``); for a window no sample fell in, the
    frame of the sample nearest to it, if within ``slack_ns``; -1 when none.

    ``times`` are the samples' times on the windows' clock (``samples.t_ns`` less the
    table's ``origin_ns``); samples in no user frame (-1) are left out.
    """
    return SampleIndex(samples, times).frames_during(starts, ends, slack_ns)


class SampleIndex:
    """The samples in a user frame, by time, with their weights: built once, joined to
    many windows (``frames_during``)."""

    def __init__(self, samples: PythonSamples, times: np.ndarray) -> None:
        keep = samples.frame >= 0
        self.t, self.frame = times[keep], samples.frame[keep]
        self.weight = sample_weights(samples)[keep]

    def frames_during(self, starts: np.ndarray, ends: np.ndarray,
                      slack_ns: int = 0) -> np.ndarray:
        """``frames_during`` of the module, over these samples."""
        t, frame, weight = self.t, self.frame, self.weight
        out = np.full(len(starts), -1, dtype=np.int64)
        if not t.size:
            return out
        first = np.searchsorted(t, starts, "left")
        last = np.searchsorted(t, ends, "left")
        for i in np.flatnonzero(last > first).tolist():
            held = np.bincount(frame[first[i]:last[i]], weights=weight[first[i]:last[i]])
            out[i] = int(np.argmax(held))
        if slack_ns > 0:
            for i in np.flatnonzero(last == first).tolist():  # none inside: the nearest
                near = [j for j in (first[i] - 1, first[i]) if 0 <= j < t.size]
                gaps = [max(starts[i] - t[j], t[j] - ends[i], 0) for j in near]
                best = int(np.argmin(gaps)) if gaps else -1
                if best >= 0 and gaps[best] <= slack_ns:
                    out[i] = int(frame[near[best]])
        return out


def split_top_level(rows: list[SourceRow], table: EventTable,
                    samples: PythonSamples) -> list[SourceRow]:
    """``--stack`` rows with the cell's top level (torch's ``file:0 <module>``) split by line.

    torch's Python tracer names code at the top level of a cell by line 0. The samples
    taken inside an op while the cell's top level was the innermost user frame say which
    of its lines called the op: the row's times are shared out in their proportion. Rows
    with no such sample stay whole.
    """
    inside = ~outside_ops(table, samples.t_ns - table.origin_ns) if samples.n else None
    out: list[SourceRow] = []
    for row in rows:
        if row.line != 0 or row.function != "<module>" or inside is None:
            out.append(row)
            continue
        lines: dict[int, float] = {}
        for frame, w in zip(samples.frame[inside].tolist(),
                            sample_weights(samples)[inside].tolist(), strict=True):
            seen = samples.frames[frame] if frame >= 0 else None
            if seen is not None and seen.top_level and seen.file == row.file and seen.line > 0:
                lines[seen.line] = lines.get(seen.line, 0.0) + w
        total = sum(lines.values())
        if not total:
            out.append(row)
            continue
        for line, w in sorted(lines.items()):
            part = w / total
            out.append(replace(row, key=f"{row.file}:{line} <module>", line=line,
                               code=linecache.getline(row.file, line).strip(),
                               self_cpu_time_total=row.self_cpu_time_total * part,
                               self_device_time_total=row.self_device_time_total * part,
                               ops=round(row.ops * part)))
    return sorted(out, key=lambda r: (not r.in_cell, -r.self_cpu_time_total, r.key))
