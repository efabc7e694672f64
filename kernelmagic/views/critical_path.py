"""The critical path of an iteration, and what making a row faster would buy.

``views/dependencies.py`` builds the iteration's dependency model; here it is replayed. A
replay is max-plus arithmetic over the model's arrays: each thread is one chain
(``t[p] = max(t[p-1] + d[p], c[p])``, a cumulative sum and a running maximum), each stream
one chain (``end[i] = max(end[i-1] + gap[i], ready[i]) + dur[i]``), and the blocking calls
tie the two; the two passes alternate until nothing moves (as many rounds as the schedule
switches between CPU and GPU waits). Many scenarios replay at once, one per matrix row:
``max_gains`` removes each op-table row in turn with one batched replay.

The predicted iteration is the longer of (a) the iteration's own thread, from the window's
start to its end, and (b) the measured window shortened by what the whole schedule (every
thread, and GPU work that runs on past the window) gained. Unchanged, both give the
measured window, so ``what_if({})`` reproduces it; speed-ups never lengthen it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from kernelmagic.core.arrays import unique
from kernelmagic.core.events import EventTable, Window
from kernelmagic.core.rows import KIND_MARKS, CriticalPathRow, Span
from kernelmagic.core.units import format_us, percent
from kernelmagic.views.dependencies import (
    CATEGORY_NAMES,
    GPU_WORK,
    IDLE,
    LAUNCH,
    NONE,
    SYNC,
    Model,
    build_model,
)

__all__ = ["SIDES", "IterationView", "WhatIf", "critical_path", "iteration_view", "max_gains",
           "path_summary", "predict", "what_if"]

SIDES = ("both", "cpu", "device")
PATH_LANE = "critical path"  # the timeline lane the path is drawn on
SPAN_RESOLUTION = 4000  # the lane keeps pieces longer than the iteration / this (a pixel)
_MAX_CELLS = 4_000_000  # scenario x position cells replayed at once (memory: 32 MB a matrix)


@dataclass(frozen=True)
class WhatIf:
    """A ``what_if`` answer: the predicted median iteration and its critical path (µs)."""

    iteration_us: float
    measured_us: float
    saved_us: float
    saved_share: float
    critical_path: list[CriticalPathRow] = field(default_factory=list)

    @property
    def summary(self) -> str:
        """The new critical path in one line (``path_summary``)."""
        return path_summary(self.critical_path)

    def __str__(self) -> str:
        return (f"predicted iteration {format_us(self.iteration_us)} of "
                f"{format_us(self.measured_us)} measured: saves {format_us(self.saved_us)} "
                f"({percent(self.saved_share)}); {self.summary}")


def _f(a: np.ndarray) -> np.ndarray:
    out = a.astype(np.float64)
    out[a == NONE] = -np.inf
    return out


@dataclass(frozen=True)
class _Schedule:
    t: np.ndarray  # (S, P) CPU positions' times
    end: np.ndarray  # (S, W) GPU items' ends
    d: np.ndarray  # (S, P) stretches into positions, scaled
    dur: np.ndarray  # (S, W) GPU items' durations, scaled
    sync_c: np.ndarray  # (S, Q) what each blocking call's end waits for (-inf: nothing)
    cpu_f: np.ndarray  # (S, R+1) the CPU multipliers replayed
    cross_c: np.ndarray  # (S, X) what each edge between threads asks of its target


def _replay(m: Model, cpu_f: np.ndarray, gpu_f: np.ndarray, rounds: int = 100_000) -> _Schedule:
    """Every scenario's schedule; ``cpu_f``/``gpu_f``: (S, R+1) multipliers per row (the
    last column, 1, is for time that belongs to no row)."""
    r = len(m.row_key)
    irow = np.where(m.item_row >= 0, m.item_row, r)
    d = _stretches(m, cpu_f)
    dur = m.item_dur[None, :] * gpu_f[:, irow]
    s = cpu_f.shape[0]
    anchor = _f(m.pos_anchor)
    ianchor = _f(m.item_anchor)
    launched = np.flatnonzero(m.item_launch >= 0)
    sync_scale = cpu_f[:, np.where(m.sync_row >= 0, m.sync_row, r)]
    post = m.sync_post[None, :] * sync_scale
    dropped = sync_scale == 0  # a blocking call removed altogether no longer waits
    sync_groups = np.flatnonzero(np.diff(m.sync_off) > 0)
    wait_items = np.flatnonzero(np.diff(m.wait_off) > 0)
    end = np.full((s, m.item_dur.size), -np.inf)
    sync_c = np.full((s, m.sync_pos.size), -np.inf)
    t = np.full((s, m.pos_anchor.size), -np.inf)
    cross_c = np.full((s, m.cross_target.size), -np.inf)
    cpu_run = _running(d, m.chain_off)  # constant across rounds: summed once
    gpu_run = _running(m.item_gap[None, :] + dur, m.stream_off)
    dur_less_run = dur - gpu_run
    for _ in range(rounds):
        c = np.broadcast_to(anchor, d.shape).copy()
        if m.cross_target.size:
            cross_c = t[:, m.cross_source] + m.cross_off
            c[:, m.cross_target] = np.maximum(c[:, m.cross_target], cross_c)
        if sync_groups.size:
            waited = np.maximum.reduceat(end[:, m.sync_dep], m.sync_off[sync_groups], axis=1)
            sync_c = np.full((s, m.sync_pos.size), -np.inf)
            sync_c[:, sync_groups] = waited
            sync_c = np.maximum(sync_c, _f(m.sync_fixed)[None, :]) + post
            sync_c[dropped] = -np.inf
            c[:, m.sync_pos] = np.maximum(c[:, m.sync_pos], sync_c)
        before, t = t, _chains(cpu_run, c, m.chain_off)
        ready = np.broadcast_to(ianchor, dur.shape).copy()
        ready[:, launched] = np.maximum(ready[:, launched],
                                        t[:, m.item_launch[launched]] + m.item_lat[launched])
        if wait_items.size:
            waited = np.maximum.reduceat(end[:, m.wait_dep], m.wait_off[wait_items], axis=1)
            ready[:, wait_items] = np.maximum(ready[:, wait_items], waited)
        new_end = _chains(gpu_run, ready + dur_less_run + gpu_run, m.stream_off)
        if np.array_equal(new_end, end) and np.array_equal(before, t):
            break
        end = new_end
    return _Schedule(t, end, d, dur, sync_c, cpu_f, cross_c)


def _owned(m: Model) -> np.ndarray:
    """(R+1, P): the time each row (the last: no row) owns in each position's stretch."""
    owned = m.__dict__.get("_owned")
    if owned is None:
        r = len(m.row_key)
        owned = np.zeros((r + 1, m.pos_anchor.size))
        block = np.repeat(np.arange(m.pos_anchor.size), np.diff(m.part_off))
        np.add.at(owned, (np.where(m.part_row >= 0, m.part_row, r), block), m.part_dur)
        m.__dict__["_owned"] = owned
    return owned


def _stretches(m: Model, cpu_f: np.ndarray) -> np.ndarray:
    """(S, P): each position's stretch since the previous one, its parts scaled by row.
    Only the rows a scenario changes are touched (no matrix product: BLAS threads
    fight over a loaded machine's cores)."""
    owned = _owned(m)
    d = np.broadcast_to(owned.sum(axis=0), (cpu_f.shape[0], owned.shape[1])).copy()
    for s, row in zip(*np.nonzero(cpu_f != 1.0), strict=True):
        d[s] += (cpu_f[s, row] - 1.0) * owned[row]
    return d


def _running(d: np.ndarray, off: np.ndarray) -> np.ndarray:
    """Running sums of ``d`` along each chain (segment ``off[k]:off[k+1]``)."""
    run = np.empty_like(d)
    for lo, hi in zip(off[:-1].tolist(), off[1:].tolist(), strict=True):
        np.cumsum(d[:, lo:hi], axis=1, out=run[:, lo:hi])
    return run


def _chains(run: np.ndarray, c: np.ndarray, off: np.ndarray) -> np.ndarray:
    """``t[p] = max(t[p-1] + d[p], c[p])`` along each chain (``run``: ``d``'s running sums):
    one pass per thread. A stream is a chain too: ``end[i] = max(end[i-1] + gap[i] +
    dur[i], ready[i] + dur[i])``."""
    t = c - run
    for lo, hi in zip(off[:-1].tolist(), off[1:].tolist(), strict=True):
        np.maximum.accumulate(t[:, lo:hi], axis=1, out=t[:, lo:hi])
    return t + run


def _span(m: Model, sched: _Schedule) -> tuple[np.ndarray, np.ndarray]:
    """Per scenario: the iteration thread's length, and where it or its GPU work ends
    (other threads count only through their edges to it: a worker running past the
    window does not hold the iteration back)."""
    s = sched.t.shape[0]
    lasts = m.chain_off[1:] - 1
    own = sched.t[:, lasts[m.main_chain]] if m.main_chain >= 0 else np.zeros(s)
    whole = own.copy()
    if sched.end.shape[1]:
        whole = np.maximum(whole, sched.end.max(axis=1))
    return own, whole


def _factors(m: Model, s: int) -> tuple[np.ndarray, np.ndarray]:
    ones = np.ones((s, len(m.row_key) + 1))
    return ones, ones.copy()


def _baseline(m: Model) -> tuple[float, _Schedule]:
    """The measured schedule (every factor 1) and where it ends; computed once per model."""
    cached = m.__dict__.get("_baseline")
    if cached is None:
        sched = _replay(m, *_factors(m, 1))
        cached = m.__dict__["_baseline"] = (float(_span(m, sched)[1][0]), sched)
    return cached


def predict(m: Model, cpu_f: np.ndarray, gpu_f: np.ndarray) -> tuple[np.ndarray, _Schedule]:
    """Predicted iteration (ns) per scenario (the module docstring's rule), and schedules."""
    base_whole, base = _baseline(m)
    changed = (cpu_f != 1).any() or (gpu_f != 1).any()
    sched = _replay(m, cpu_f, gpu_f) if changed or cpu_f.shape[0] != 1 else base
    own, whole = _span(m, sched)
    return np.maximum(own, m.window_ns - (base_whole - whole)), sched


def max_gains(m: Model) -> np.ndarray:
    """Per row of the model: ns the iteration would shrink if the row took no time."""
    r = len(m.row_key)
    gains = np.zeros(r)
    if m.empty or not r:
        return gains
    per_chunk = max(1, _MAX_CELLS // max(1, m.pos_anchor.size + m.item_dur.size))
    owns = np.zeros(r + 1, bool)  # a row that owns no time here is worth nothing
    owns[m.part_row[m.part_dur > 0]] = True
    owns[m.item_row[m.item_dur > 0]] = True
    owns[m.sync_row] = True
    held = np.flatnonzero(owns[:r])
    for lo in range(0, held.size, per_chunk):
        rows = held[lo:lo + per_chunk]
        cpu_f, gpu_f = _factors(m, rows.size)
        cpu_f[np.arange(rows.size), rows] = 0.0
        gpu_f[np.arange(rows.size), rows] = 0.0
        predicted, _ = predict(m, cpu_f, gpu_f)
        gains[rows] = np.maximum(0.0, m.window_ns - predicted)
    return gains


def row_indices(m: Model, key: str) -> list[int]:
    """The model's rows a what-if key names: a row key, or the label the table shows
    (``[range] nccl:all_reduce``); ValueError with the nearest names when none."""
    for kind, mark in KIND_MARKS.items():
        if key.startswith(mark):
            return [i for i, (k, kd) in enumerate(zip(m.row_key, m.row_kind, strict=True))
                    if k == key[len(mark):] and kd == kind]
    found = [i for i, k in enumerate(m.row_key) if k == key]
    if not found:
        import difflib  # (only to name the nearest rows of a key not found)

        near = difflib.get_close_matches(key, sorted(set(m.row_key)), n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise ValueError(f"no row {key!r} in the median iteration{hint}")
    return found


def what_if(m: Model, factors: Mapping[str, float], side: str = "both") -> WhatIf:
    """The median iteration if each named row were ``k`` times faster (``inf``: gone),
    on ``side`` ("both": its own CPU time and the GPU work it launched; "cpu"; "device")."""
    if side not in SIDES:
        raise ValueError(f"side must be one of {', '.join(SIDES)}; got {side!r}")
    cpu_f, gpu_f = _factors(m, 1)
    for key, k in factors.items():
        k = float(k)
        if not k > 0 or math.isnan(k):
            raise ValueError(f"the factor for {key!r} must be above 0 (inf removes it); got {k}")
        for i in row_indices(m, key):
            if side in ("both", "cpu"):
                cpu_f[0, i] = 1.0 / k
            if side in ("both", "device"):
                gpu_f[0, i] = 1.0 / k
    predicted, sched = predict(m, cpu_f, gpu_f)
    new = float(predicted[0]) / 1000.0
    measured = m.window_ns / 1000.0
    saved = measured - new
    return WhatIf(new, measured, saved, saved / measured if measured > 0 else 0.0,
                  _walk(m, sched))


def critical_path(m: Model, spans: bool = False) -> tuple[list[CriticalPathRow], list[Span]]:
    """The measured iteration's critical path, by category and row (µs, largest first),
    and with ``spans`` where it lies in time (``Span``: the category as ``key``, lane
    "critical path", µs from the iteration's start; neighbours of one category merged)."""
    if m.empty:
        return [], []
    _, sched = predict(m, *_factors(m, 1))
    pieces: list[tuple[float, float, int]] | None = [] if spans else None
    rows = _walk(m, sched, pieces)
    return rows, _merged(pieces, m.window_ns / SPAN_RESOLUTION) if pieces else []


def _merged(pieces: list[tuple[float, float, int]], finest: float) -> list[Span]:
    """The path's pieces (ns) as spans (µs), neighbours of one category joined; pieces
    shorter than ``finest`` ns (under a pixel of the picture) left out."""
    start, end, cat = (np.asarray(x) for x in zip(*pieces, strict=True))
    keep = end - start >= max(finest, 1e-9)
    start, end, cat = start[keep], end[keep], cat[keep]
    order = np.lexsort((end, start))
    start, end, cat = start[order], end[order], cat[order]
    if not start.size:
        return []
    joined = np.zeros(start.size, bool)
    joined[1:] = (cat[1:] == cat[:-1]) & (start[1:] - end[:-1] < max(finest, 1.0))
    first = np.flatnonzero(~joined)
    stop = np.maximum.reduceat(end, first)
    return [Span(CATEGORY_NAMES[k], PATH_LANE, a / 1000.0, b / 1000.0)
            for k, a, b in zip(cat[first].tolist(), start[first].tolist(), stop.tolist(),
                               strict=True)]


def path_summary(rows: list[CriticalPathRow]) -> str:
    """``critical path: CPU ops 71%, GPU work 22%, waiting on syncs 7%`` ("" when empty)."""
    total = sum(r.time for r in rows)
    if total <= 0:
        return ""
    by: dict[str, float] = {}
    for r in rows:
        by[r.category] = by.get(r.category, 0.0) + r.time
    parts = [f"{c} {percent(v / total)}" for c, v in
             sorted(by.items(), key=lambda x: -x[1]) if v / total >= 0.005]
    return "critical path: " + ", ".join(parts)


def _walk(m: Model, sched: _Schedule,
          spans: list[tuple[float, float, int]] | None = None) -> list[CriticalPathRow]:
    """Walk back from whatever ends the predicted iteration, adding up what lies on the way."""
    t, end, d, dur = sched.t[0], sched.end[0], sched.d[0], sched.dur[0]
    lasts = m.chain_off[1:] - 1
    ends = [("c", int(lasts[m.main_chain]), float(t[lasts[m.main_chain]]))
            ] if m.main_chain >= 0 else []
    if end.size:
        ends.append(("g", int(np.argmax(end)), float(end.max())))
    node: tuple[str, int] | None = None
    if ends:
        what, i, _ = max(ends, key=lambda x: x[2])
        node = (what, i)
        if m.main_chain >= 0 and not (what == "g" and end[i] > t[lasts[m.main_chain]]):
            node = ("c", int(lasts[m.main_chain]))  # the iteration's own thread ends it
    acc: dict[tuple[int, int], float] = {}
    _follow(m, sched, node, acc, t, end, d, dur, spans)
    total = sum(acc.values())
    rows = [CriticalPathRow(category=CATEGORY_NAMES[cat],
                            key=m.row_key[row] if row >= 0 else "",
                            kind=m.row_kind[row] if row >= 0 else "",
                            time=ns / 1000.0, share=ns / total if total > 0 else 0.0)
            for (cat, row), ns in acc.items() if ns > 0]
    return sorted(rows, key=lambda r: (-r.time, r.category, r.key))


def _follow(m: Model, sched: _Schedule, node: tuple[str, int] | None,
            acc: dict[tuple[int, int], float], t: np.ndarray, end: np.ndarray,
            d: np.ndarray, dur: np.ndarray,
            spans: list[tuple[float, float, int]] | None) -> None:
    chain_start = set(m.chain_off[:-1].tolist())
    sync_at = {p: q for q, p in enumerate(m.sync_pos.tolist())}
    cross_at = {p: x for x, p in enumerate(m.cross_target.tolist())}
    stream_first = np.zeros(m.item_dur.size, bool)
    stream_first[m.stream_off[:-1][m.stream_off[:-1] < m.item_dur.size]] = True
    irow = m.item_row.tolist()
    r = len(m.row_key)
    scale = sched.cpu_f[0]
    stretches: list[int] = []  # positions whose whole stretch lies on the path
    t_, d_, end_, dur_ = t.tolist(), d.tolist(), end.tolist(), dur.tolist()

    def add(c: int, r: int, ns: float, until: float | None = None) -> None:
        acc[(c, r)] = acc.get((c, r), 0.0) + ns
        if spans is not None and until is not None:
            spans.append((until - ns, until, c))

    while node is not None:
        what, i = node
        if what == "c":
            x = cross_at.get(i)
            if x is not None and sched.cross_c[0, x] >= (t_[i - 1] + d_[i] if i not in chain_start
                                                         else -np.inf) + 1e-6:
                add(IDLE, -1, float(m.cross_off[x]), t_[i])
                node = ("c", int(m.cross_source[x]))
                continue
            if i in chain_start:
                add(IDLE, -1, max(0.0, t_[i]), t_[i])
                break
            q = sync_at.get(i)
            if q is not None and sched.sync_c[0, q] > t_[i - 1] + d_[i] + 1e-6:
                sync_row = int(m.sync_row[q])
                add(SYNC, sync_row, float(m.sync_post[q] * scale[sync_row if sync_row >= 0
                                                                 else r]), float(t[i]))
                lo, hi = int(m.sync_off[q]), int(m.sync_off[q + 1])
                deps = m.sync_dep[lo:hi]
                node = ("g", int(deps[np.argmax(end[deps])])) if hi > lo else None
                continue
            stretches.append(i)
            node = ("c", i - 1)
            continue
        add(GPU_WORK, irow[i], dur_[i], end_[i])
        node = _gpu_cause(m, i, t, end, dur, stream_first, add)
    _add_stretches(m, np.asarray(stretches, np.int64), scale, t, acc, spans)


def _add_stretches(m: Model, at: np.ndarray, scale: np.ndarray, t: np.ndarray,
                   acc: dict[tuple[int, int], float],
                   spans: list[tuple[float, float, int]] | None) -> None:
    """Add the parts of the stretches into positions ``at`` to ``acc`` (and ``spans``)."""
    if not at.size:
        return
    lo, hi = m.part_off[at], m.part_off[at + 1]
    counts = hi - lo
    parts = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
    rows = m.part_row[parts]
    ns = m.part_dur[parts] * scale[np.where(rows >= 0, rows, len(m.row_key))]
    key = m.part_cat[parts] * (len(m.row_key) + 1) + rows + 1
    found, inverse = unique(key, return_inverse=True)
    sums = np.bincount(inverse, weights=ns)
    for k, v in zip(found.tolist(), sums.tolist(), strict=True):
        cat, row = divmod(k, len(m.row_key) + 1)
        acc[(cat, row - 1)] = acc.get((cat, row - 1), 0.0) + v
    if spans is None or not counts.any():  # (positions that hold no part: nothing to lay)
        return
    # Merged parts are in no real order: laid back to back, ending at the position.
    total = np.cumsum(ns)
    last = np.cumsum(counts) - 1
    ends = np.repeat(t[at], counts) - (np.repeat(total[last], counts) - total)
    spans.extend(zip((ends - ns).tolist(), ends.tolist(), m.part_cat[parts].tolist(),
                     strict=True))


def _gpu_cause(m: Model, i: int, t: np.ndarray, end: np.ndarray, dur: np.ndarray,
               stream_first: np.ndarray, add) -> tuple[str, int] | None:  # type: ignore[no-untyped-def]
    """What GPU item ``i`` waited for before it started (the binding one of its causes)."""
    start = end[i] - dur[i]
    lp = int(m.item_launch[i])
    if lp >= 0 and t[lp] + m.item_lat[i] >= start - 1e-6:
        add(LAUNCH, -1, float(m.item_lat[i]), float(start))
        return ("c", lp)
    lo, hi = int(m.wait_off[i]), int(m.wait_off[i + 1])
    for j in m.wait_dep[lo:hi].tolist():
        if end[j] >= start - 1e-6:
            return ("g", j)
    if not stream_first[i] and end[i - 1] + m.item_gap[i] >= start - 1e-6:
        add(IDLE, -1, float(m.item_gap[i]), float(start))
        return ("g", i - 1)
    add(IDLE, -1, max(0.0, float(start)), float(start))
    return None


@dataclass(frozen=True)
class IterationView:
    """What ``build_result`` keeps of one iteration's model: the model, its critical path
    and each row's ``max_gain_us`` keyed by (kind, key, input shapes)."""

    model: Model
    path: list[CriticalPathRow]
    spans: list[Span]
    gains_us: dict[tuple[str, str, str], float]


def iteration_view(table: EventTable, window: Window, name: str | None = None,
                   shapes: bool = False, spans: bool = False,
                   ranges: np.ndarray | None = None) -> IterationView:
    """The dependency model of ``window`` (the median iteration), its path (in time too,
    with ``spans``: for the timeline) and each row's gain; ``ranges``: ``range_owners``."""
    m = build_model(table, window, name, shapes, ranges)
    gains = max_gains(m) / 1000.0
    keyed = {(kind, key, shape): float(g) for kind, key, shape, g in
             zip(m.row_kind, m.row_key, m.row_shapes, gains.tolist(), strict=True)}
    return IterationView(m, *critical_path(m, spans), keyed)
