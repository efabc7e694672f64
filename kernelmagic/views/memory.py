"""``--memory``: the memory timeline by category, its peak, what was alive at the peak,
and what each iteration keeps (pure functions of an ``EventTable`` and a ``MemoryLedger``).

The totals are the table's raw ``[memory]`` records, as ``timeline.peak_memory`` reads
them (so the peak note and the timeline agree); the ledger adds what the category
analysis (``views/memory_rules.py``) knows: each change's category and the tensors that
existed before profiling.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from kernelmagic.core.arrays import unique
from kernelmagic.core.event_rules import STEP_PREFIX
from kernelmagic.core.events import EventTable, Kind, Window
from kernelmagic.core.memory_rows import (
    BEFORE,
    CATEGORIES,
    NEVER,
    UNKNOWN,
    LiveBlockRow,
    MemoryGrowthRow,
    MemoryLedger,
    MemoryPeakRow,
    MemoryPoint,
    block_spans,
    by_category,
)
from kernelmagic.core.range_names import MODULE_RANGE, is_ours
from kernelmagic.views.memory_rules import BACKWARD_OP
from kernelmagic.views.timeline import peak_iterations
from kernelmagic.views.tree import in_start_order

#: Timeline points kept per iteration and device (the peak always among them).
MAX_POINTS = 1500
#: Allocations listed as alive at the peak.
ALIVE_ROWS = 20
_NODE = re.compile(r"^[A-Z]\w*Backward\d*$")


@dataclass
class MemoryViews:
    """The ``--memory`` record: the timeline by category, the peaks, what was alive at
    the peak, the growth, why categories are missing, and each side's peak rise within an
    iteration (``peak_memory``: bytes, ``{"cpu": ..., "device": ...}``)."""

    points: list[MemoryPoint] = field(default_factory=list)
    peaks: list[MemoryPeakRow] = field(default_factory=list)
    alive: list[LiveBlockRow] = field(default_factory=list)
    growth: list[MemoryGrowthRow] = field(default_factory=list)
    note: str = ""
    peak_memory: dict[str, float] = field(default_factory=dict)


def device_label(device: int) -> str:
    """``"CPU"`` for -1, else ``"cuda:i"``."""
    return "CPU" if device < 0 else f"cuda:{device}"


def ledger_from_table(table: EventTable, note: str = "") -> MemoryLedger:
    """The table's ``[memory]`` records as an uncategorised ledger (every change "unknown",
    no blocks followed): what a trace, or a run whose category analysis failed, holds.

    Where a device's running sum falls below zero (a GPU allocator records frees of
    blocks allocated before profiling), the least that must have existed before is one
    change at ``BEFORE``, as torch's own timeline counts such frees' blocks as
    pre-existing; so no level reads below zero."""
    return _ledger(table, _memory_records(table), note)


def _memory_records(table: EventTable) -> np.ndarray:
    """The table's ``[memory]`` records in start order (ties: in table order)."""
    return in_start_order(table, table.kind == Kind.MEMORY)


def _ledger(table: EventTable, mem: np.ndarray, note: str = "") -> MemoryLedger:
    """``ledger_from_table`` of the ``[memory]`` records ``mem`` (``_memory_records``)."""
    time = table.start[mem].astype(np.int64)
    device = table.device[mem].astype(np.int16)
    delta = table.nbytes[mem].astype(np.int64)
    before = []
    for d in sorted(set(device.tolist())):
        lowest = int(np.cumsum(delta[device == d]).min())
        if lowest < 0:
            before.append((d, -lowest))
    if before:
        time = np.concatenate([np.full(len(before), BEFORE, dtype=np.int64), time])
        device = np.concatenate([np.asarray([d for d, _ in before], dtype=np.int16), device])
        delta = np.concatenate([np.asarray([n for _, n in before], dtype=np.int64), delta])
    return MemoryLedger(time=time, device=device,
                        category=np.full(time.size, UNKNOWN, dtype=np.int8), delta=delta,
                        block=np.full(time.size, -1, dtype=np.int32), note=note)


class _Levels:
    """Bytes per category after the first ``k`` changes of a device's ledger (``before``),
    asked for the iterations in order: each change is summed once, not once per
    iteration (a ``k`` below the last one starts again from the first change)."""

    def __init__(self, category: np.ndarray, delta: np.ndarray) -> None:
        self.category, self.delta = category, delta
        self.k, self.sums = 0, np.zeros(len(CATEGORIES))

    def before(self, k: int) -> np.ndarray:
        """int64, one per category (whole bytes: the float sums are exact)."""
        k = max(k, 0)
        if k < self.k:
            self.k, self.sums = 0, np.zeros(len(CATEGORIES))
        self.sums = self.sums + np.bincount(self.category[self.k:k], weights=self.delta[self.k:k],
                                            minlength=len(CATEGORIES))
        self.k = k
        return np.rint(self.sums).astype(np.int64)


class _Around:
    """The ops and ranges of the threads' trees in start order (ties: table order), with the
    latest end in each block of ``BLOCK`` of them: the events around a time are read a
    block at a time, only in the blocks that reach it, not over the whole table once per
    iteration (``_peak``). Made when first asked: only a peak with a rise asks."""

    BLOCK = 256

    def __init__(self, table: EventTable) -> None:
        self.table = table

    @cached_property
    def _events(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The events in start order; their starts, ends and threads; each block's latest end."""
        table = self.table
        idx = in_start_order(table, ((table.kind == Kind.OP) | (table.kind == Kind.RANGE))
                             & (table.tid >= 0))
        end = table.end[idx]
        block_end = (np.maximum.reduceat(end, np.arange(0, idx.size, self.BLOCK))
                     if idx.size else end)
        return idx, table.start[idx], end, table.tid[idx], block_end

    def at(self, t: int, tid: int | None) -> np.ndarray:
        """The events around time ``t`` (on thread ``tid``, or any), in start order."""
        idx, start, end, tids, block_end = self._events
        upto = int(np.searchsorted(start, t, "right"))  # those started by ``t``
        blocks = np.flatnonzero(block_end[:-(-upto // self.BLOCK)] >= t)
        pos = (blocks[:, None] * self.BLOCK + np.arange(self.BLOCK)).ravel()
        pos = pos[pos < upto]
        held = end[pos] >= t
        if tid is not None:
            held &= tids[pos] == tid
        return idx[pos[held]]


@dataclass
class _Device:
    """One device's memory, as its peaks and timeline points read it: the ledger's changes
    (their times, categories and bytes; ``made_of``: their running levels by category,
    ``_Levels``) and the raw ``[memory]`` records (their times and the running total after
    each; the events themselves, in start order, and their starts)."""

    label: str
    when: np.ndarray
    category: np.ndarray
    delta: np.ndarray
    made_of: _Levels
    raw_when: np.ndarray
    raw_total: np.ndarray
    records: np.ndarray
    record_start: np.ndarray


def _enclosing(table: EventTable, around: _Around, t: int, tid: int | None,
               name: str | None = None) -> tuple[str, str]:
    """(innermost op, innermost scope) around time ``t`` on thread ``tid``: the scope is the
    backward function, module range or user range closest around it (not the ranges
    kernelmagic opened for the run ``name``, nor a ``ProfilerStep#N``)."""
    idx = around.at(t, tid)[::-1]  # innermost first
    op = scope = ""
    for i in idx.tolist():
        text = table.names[table.name[i]]
        if table.kind[i] == Kind.OP and not text.startswith(BACKWARD_OP) \
                and not _NODE.match(text):
            op = op or text
        elif not scope:  # the innermost scope, never an outer one found after it
            scope = _scope_name(text, table.kind[i] == Kind.RANGE, name)
        if op and scope:
            break
    return op, scope


def _scope_name(text: str, is_range: bool, name: str | None) -> str:
    """What an op or range called ``text`` names as a peak's scope: the backward function,
    the ``--modules`` module path, a user range; "" for anything else (other ops,
    kernelmagic's own ranges, ``ProfilerStep#N``)."""
    if text.startswith(BACKWARD_OP):
        return text[len(BACKWARD_OP):]
    if _NODE.match(text):
        return text
    module = MODULE_RANGE.match(text)
    if module is not None:
        return str(module[1])
    if (is_range and not is_ours(text, name) and not is_ours(text, None)
            and not text.startswith(STEP_PREFIX)):
        return text
    return ""


def _thin(points: list[MemoryPoint], keep: int) -> list[MemoryPoint]:
    """At most about ``keep`` points: the highest of each run of neighbours (the peak stays)."""
    if len(points) <= keep:
        return points
    size = -(-len(points) // keep)
    return [max(points[i:i + size], key=lambda p: p.total) for i in range(0, len(points), size)]


#: ``memory_views``'s ``show`` for the iteration of each device's highest peak (the one
#: the peak note names and the alive table is taken at).
PEAK = -1


def highest_peak(rows: list[MemoryPeakRow]) -> MemoryPeakRow | None:
    """One device's peak the report names, its rows in iteration order: the largest rise
    (the first of equal ones) among the iterations ``timeline.peak_iterations`` trusts (on
    the CPU not the first of several, whose rise reads high); None without rows."""
    on_device = bool(rows) and rows[0].device != device_label(-1)
    kept = len(peak_iterations([(r.iteration, r.iteration) for r in rows], on_device))
    return max(rows[len(rows) - kept:], key=lambda r: r.rise, default=None)


def named_peaks(rows: list[MemoryPeakRow]) -> list[MemoryPeakRow]:
    """Per device, the peak the report names (``highest_peak``): the iteration the memory
    chart shows, the peak note names and the timeline draws."""
    by_device: dict[str, list[MemoryPeakRow]] = {}
    for row in rows:
        by_device.setdefault(row.device, []).append(row)
    found = (highest_peak(sorted(rows, key=lambda r: r.iteration)) for rows in by_device.values())
    return [row for row in found if row is not None]


def memory_views(table: EventTable, windows: list[Window], ledger: MemoryLedger,
                 show: int | None = PEAK, name: str | None = None) -> MemoryViews:
    """The memory rows of a run: timeline points of iteration ``show`` (``PEAK``: each
    device's highest peak's, ``highest_peak``; None: all of them), each iteration's peak
    per device, the allocations alive at the highest peak of each device, and what every
    iteration kept to the end.

    ``windows`` are the iterations (ns from the table's origin), in order. Each peak's
    moment and rise are the table's raw records' (as ``timeline.peak_memory`` reads them,
    so the peak note agrees); its make-up by category is the ledger's at that moment.
    The alive rows are taken at the same highest peak, so the chart, the peak note and
    the alive table name one iteration.
    """
    out = MemoryViews()
    if not windows or ledger.time.size == 0:
        return out
    mem = _memory_records(table)
    raw = _ledger(table, mem)
    around = _Around(table)
    for device in sorted(set(ledger.device.tolist())):
        sel = np.flatnonzero(ledger.device == device)
        raw_at = raw.device == device
        category, delta = ledger.category[sel], ledger.delta[sel]
        records = mem[table.device[mem] == device]
        dev = _Device(device_label(device), ledger.time[sel], category, delta,
                      _Levels(category, delta), raw.time[raw_at], np.cumsum(raw.delta[raw_at]),
                      records, table.start[records])
        found = [_peak(table, dev, window, i, name, around) for i, window in enumerate(windows)]
        peaks = [row for row, _ in found]
        out.peaks += peaks
        best = highest_peak(peaks)
        chosen = best.iteration if best is not None else 0
        for i, window in enumerate(windows):
            if show is None or i == (chosen if show == PEAK else show):
                out.points += _points(dev, i, window)
        if best is not None and ledger.blocks:
            out.alive += _alive(ledger, sel, found[chosen][1], windows[chosen][0], dev.label)
        if ledger.blocks:
            out.growth += _growth(ledger, device, windows, dev.label)
    return out


def _points(dev: _Device, i: int, window: Window) -> list[MemoryPoint]:
    """Iteration ``i``'s timeline on ``dev``: its start, each change, its end (thinned);
    the iterations asked in order (``_Levels``)."""
    start, end = window
    label, when = dev.label, dev.when
    lo = int(np.searchsorted(when, start, "left"))
    hi = int(np.searchsorted(when, end, "right"))
    base = dev.made_of.before(lo)
    changes = np.zeros((hi - lo, len(CATEGORIES)), dtype=np.int64)
    changes[np.arange(hi - lo), dev.category[lo:hi]] = dev.delta[lo:hi]
    levels = base + np.cumsum(changes, axis=0)  # bytes per category after each change
    pts = [MemoryPoint(label, i, 0.0, **by_category(base.tolist()))]
    pts += [MemoryPoint(label, i, (int(t) - start) / 1000.0, **by_category(row))
            for t, row in zip(when[lo:hi].tolist(), levels.tolist(), strict=True)]
    pts.append(MemoryPoint(label, i, (end - start) / 1000.0,
                           **by_category((levels[-1] if hi > lo else base).tolist())))
    return _thin(pts, MAX_POINTS)


def _peak(table: EventTable, dev: _Device, window: Window, i: int, name: str | None,
          around: _Around) -> tuple[MemoryPeakRow, int]:
    """Iteration ``i``'s peak on ``dev``, and the index of the ledger's last change at it
    (-1 before the first): the moment and rise from the raw records, the make-up from the
    ledger's categories; what was running then from ``around``, for the run ``name``."""
    start, end = window
    when, raw_when, raw_total = dev.when, dev.raw_when, dev.raw_total
    lo = int(np.searchsorted(when, start, "left"))
    rlo = int(np.searchsorted(raw_when, start, "left"))
    rhi = int(np.searchsorted(raw_when, end, "right"))
    raw_base = int(raw_total[rlo - 1]) if rlo else 0
    t_peak, rise, k = start, 0, lo - 1  # nothing above the start: the start
    if rhi > rlo:
        top = rlo + int(np.argmax(raw_total[rlo:rhi]))
        if int(raw_total[top]) > raw_base:
            t_peak, rise = int(raw_when[top]), int(raw_total[top]) - raw_base
            k = int(np.searchsorted(when, t_peak, "right")) - 1
    at = dev.made_of.before(k + 1)
    op, scope = ("", "")
    if rise > 0:  # around the peak's ``[memory]`` record, on its thread
        j = int(np.searchsorted(dev.record_start, t_peak))
        hit = (dev.records[j] if j < dev.records.size and dev.record_start[j] == t_peak
               else -1)
        op, scope = _enclosing(table, around, t_peak, int(table.tid[hit]) if hit >= 0 else None,
                               name)
    length = end - start
    row = MemoryPeakRow(
        dev.label, i, (t_peak - start) / 1000.0, (t_peak - start) / length if length else 0.0,
        length / 1000.0, op, scope, float(at.sum()), float(rise), **by_category(at.tolist()))
    return row, k


def _alive(ledger: MemoryLedger, sel: np.ndarray, k: int, start: int,
           label: str) -> list[LiveBlockRow]:
    """The largest followed blocks alive just after change ``k`` of ``sel``."""
    if k < 0:
        return []
    upto = sel[:k + 1]
    owners = ledger.block[upto]
    held = np.zeros(len(ledger.blocks), dtype=np.int64)
    np.add.at(held, owners[owners >= 0], ledger.delta[upto][owners >= 0])
    # Each block's category is its last rising change's (the version alive at the peak):
    # numpy leaves repeated indices' assignment order open, so pick that change explicitly.
    category = np.full(len(ledger.blocks), UNKNOWN, dtype=np.int8)
    rising = np.flatnonzero((owners >= 0) & (ledger.delta[upto] > 0))[::-1]
    latest, first = unique(owners[rising], return_index=True)
    category[latest] = ledger.category[upto][rising[first]]
    live = np.flatnonzero(held > 0)
    live = live[np.argsort(-held[live], kind="stable")][:ALIVE_ROWS]
    rows = []
    for b in live.tolist():
        block = ledger.blocks[b]
        before = block.created == BEFORE
        rows.append(LiveBlockRow(
            label, float(held[b]), CATEGORIES[category[b]], block.shape, block.dtype, block.op,
            block.source, 0.0 if before else (block.created - start) / 1000.0, before))
    return rows


def _growth(ledger: MemoryLedger, device: int, windows: list[Window],
            label: str) -> list[MemoryGrowthRow]:
    """Blocks allocated inside an iteration and never freed before profiling ended,
    grouped by (op, source); kept only for sources that kept some in every iteration."""
    if len(windows) < 2:
        return []
    kept: dict[tuple[str, str], list[int]] = {}
    count: dict[tuple[str, str], int] = {}
    on, nbytes, created, freed = block_spans(ledger.blocks)
    held = np.flatnonzero((on == device) & (freed == NEVER) & (created != BEFORE))
    starts = np.asarray([start for start, _ in windows], dtype=np.int64)
    ends = np.asarray([end for _, end in windows], dtype=np.int64)
    # the first iteration whose window ends at or after each block's creation, if it holds it
    first = np.searchsorted(ends, created[held], "left")
    inside = (first < len(windows)) & (starts[np.minimum(first, len(windows) - 1)]
                                       <= created[held])
    for b, i in zip(held[inside].tolist(), first[inside].tolist(), strict=True):
        block = ledger.blocks[b]
        key = (block.op, block.source)
        per_iter = kept.setdefault(key, [0] * len(windows))
        per_iter[i] += int(nbytes[b])
        count[key] = count.get(key, 0) + 1
    rows = [MemoryGrowthRow(label, op, source, sum(v) / len(windows), len(windows),
                            count[(op, source)], float(sum(v)), float(min(v)), float(max(v)))
            for (op, source), v in kept.items() if all(x > 0 for x in v)]
    return sorted(rows, key=lambda r: -r.total)
