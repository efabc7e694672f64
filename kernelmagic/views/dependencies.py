"""The dependency model of one iteration: who waits for whom, as integer arrays.

Built from the ``EventTable`` (live runs and trace files alike) for one iteration window,
with one pass per CPU thread and per GPU stream, no graph object per event:

- **CPU threads** are chains of *positions*: every start and end of an event on the thread
  (clipped to the window), in time order. The stretch into position p belongs to the
  innermost event open there (its self time) and takes ``pos_dur[p]``; position p cannot
  come before position p-1 plus that stretch. A thread's first position is anchored at
  its measured time.
- **GPU work** (kernels, memcpy, memset) on each stream runs in order: it starts after the
  previous work on its stream ends (plus the measured gap, when it was queued behind it),
  and after the runtime call that launched it let it go (``_launched_at``: as the call
  returns) plus the launch latency.
- **Blocking calls** (``op_names.BLOCKING_CALLS``: device, stream and event synchronise,
  a blocking memcpy; what they sit under, ``.item()``'s ``aten::_local_scalar_dense``,
  ``.cpu()``, ``.tolist()``, waits through them) end no earlier than the GPU work they
  waited for ends, plus their own overhead after it. The work waited for is, on each
  stream, the last work launched before the call began that ended before the call ended.
- **Stream waits** (``cudaStreamWaitEvent``): the next work the thread launches starts no
  earlier than the last work launched before the wait on each other stream (that ended
  before it started).

Scaling a row changes the stretches it owns (CPU) and the work it launched (GPU); the
schedule is then recomputed (``views/critical_path.py``). ``Model.to_dict`` packs the
arrays (zlib, base64) so a saved profile answers ``what_if`` too.

Left out (see ``docs/what-if.md``): contention between concurrent kernels for memory
bandwidth or SMs, CPU threads sharing a core, waits between CPU threads (a thread that
blocks on another shows the wait as its own op time), the launch queue filling up, and
iterations other than the median one.
"""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any

import numpy as np

from kernelmagic.core.arrays import isin, median, stable_order, unique
from kernelmagic.core.events import NO_PARENT, EventTable, Kind, Window, device_work
from kernelmagic.core.op_names import BLOCKING_CALLS, LAUNCH_CALLS, STREAM_WAIT_CALLS
from kernelmagic.core.records import RecordError
from kernelmagic.views.breakdown import name_mask
from kernelmagic.views.iterations import recorded_end
from kernelmagic.views.ops import (
    NO_OP,
    UNLAUNCHED,
    is_op,
    marker_work,
    range_owners,
    runtime_calls,
    under_our_sync,
)
from kernelmagic.views.tree import Figures

JOIN_NS = 1_000_000  # a thread resuming this soon after another went idle waited for it
OVERLAP_NS = 0  # work may start this long before the previous work on its stream ends
#: The launch latency taken when no launch in the whole trace found its stream idle (the
#: medians of the real traces in tests/data and shared/traces lie between 7 and 20 µs).
DEFAULT_LAUNCH_LATENCY_NS = 10_000
FIRST_LAUNCH_MAX_NS = 1_000_000  # a stream's first recorded work that waited longer queued
#: A launch waited for the GPU (the launch queue was full) when it took this much longer
#: than the window's median launch (or than this much, if less), its own work was
#: queued, and it returned within ``QUEUE_RETURN_NS`` of some GPU work ending (the slot
#: that work freed).
BLOCKED_LAUNCH_EXTRA_NS = 10_000
QUEUE_RETURN_NS = 20_000
NONE = -(2**62)  # "no constraint" in the packed integer arrays (-inf when simulating)

#: What a stretch of time on the critical path is (``pos_cat`` / the path's categories).
CPU_OP, LAUNCH, SYNC, OUTSIDE_OPS, IDLE, GPU_WORK = range(6)
CATEGORY_NAMES = ("CPU ops", "launches", "waiting on syncs", "CPU outside ops", "idle",
                  "GPU work")


@dataclass(eq=False)
class Model:
    """One iteration's dependencies (module docstring); times are ns from the window start.

    CPU positions ``0..P-1``, chain k (a thread) holding ``chain_off[k]:chain_off[k+1]``;
    GPU items ``0..W-1``, stream k holding ``stream_off[k]:stream_off[k+1]``, in order.
    Rows (``row_key``, ``row_kind``, ``row_shapes``) are the op table's; -1 owns nothing.
    """

    window_ns: int = 0
    main_chain: int = -1  # the thread whose range is the iteration window (-1: none)
    overhang_ns: int = 0  # how long the window's GPU work runs on past the window's end
    row_key: list[str] = field(default_factory=list)
    row_kind: list[str] = field(default_factory=list)
    row_shapes: list[str] = field(default_factory=list)
    chain_off: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    pos_anchor: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    part_off: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    part_row: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    part_cat: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    part_dur: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sync_pos: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sync_row: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sync_post: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sync_fixed: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sync_stream: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sync_cat: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sync_off: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    sync_dep: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    stream_off: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    item_dur: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    item_row: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    item_launch: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    item_lat: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    item_gap: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    item_anchor: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    item_backlog: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    wait_off: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    wait_dep: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cross_target: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cross_source: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cross_off: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def empty(self) -> bool:
        return self.pos_anchor.size == 0 and self.item_dur.size == 0

    def __eq__(self, other: object) -> bool:
        """Equal fields (the arrays element by element), as the packed dict compared; the
        replay's caches are no fields."""
        if not isinstance(other, Model):
            return NotImplemented
        return all(np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
                   for a, b in ((getattr(self, f.name), getattr(other, f.name))
                                for f in fields(self)))

    __hash__ = None  # type: ignore[assignment]  # (mutable, as the dict was)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly: scalars and lists as they are, each array zlib-packed in base64."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                raw = zlib.compress(value.astype("<i8").tobytes(), 1)
                value = base64.b64encode(raw).decode("ascii")
            out[f.name] = value
        return out

    @classmethod
    def from_json_value(cls, data: Any, path: str = "") -> Model | None:
        """A saved model (``to_dict``'s), as ``core/records.py`` reads a field of this type;
        None for an empty object (a result saved without a model by kernelmagic before
        the model was a field of its own)."""
        if not isinstance(data, dict):
            raise RecordError(f"{path}: expected a packed dependency model, got "
                              f"{type(data).__name__}")
        if not data:
            return None
        try:
            return cls.from_dict(data)
        except (TypeError, ValueError, zlib.error) as exc:
            raise RecordError(f"{path}: not a packed dependency model ({exc})") from exc

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Model:
        kwargs: dict[str, Any] = {}
        arrays = {f.name for f in fields(cls) if f.name.startswith(
            ("chain_", "pos_", "part_", "sync_", "stream_", "item_", "wait_", "cross_"))}
        for name, value in data.items():
            if name in arrays:
                raw = zlib.decompress(base64.b64decode(value))
                value = np.frombuffer(raw, dtype="<i8").astype(np.int64)
            kwargs[name] = value
        return cls(**kwargs)._completed()

    def _completed(self) -> Model:
        """Fill the arrays a file saved before they existed lacks (saved by an older
        kernelmagic): no carried-in backlog, blocking calls only, nothing scaled."""
        q, w = self.sync_pos.size, self.item_dur.size
        if self.sync_stream.size != q:
            self.sync_stream = np.full(q, -1, np.int64)
        if self.sync_cat.size != q:
            self.sync_cat = np.full(q, SYNC, np.int64)
        if self.item_backlog.size != w:
            self.item_backlog = np.zeros(w, np.int64)
        return self


def build_model(table: EventTable, window: Window, name: str | None = None,
                shapes: bool = False, ranges: np.ndarray | None = None,
                figures: Figures | None = None) -> Model:
    """The dependency model of the iteration ``window`` of ``table`` (module docstring);
    ``ranges``: ``views/ops.py: range_owners(table, name)``, and ``figures``: the table's
    ``Figures`` (its events' depths and the GPU work's stream order, made once for the
    views and the trust checks too), when the caller has them."""
    ws, we = window
    if ranges is None:
        ranges = range_owners(table, name)
    figures = figures or Figures(table)
    row_of, keys, kinds, shape_texts = _row_ids(table, window, ranges, shapes, name, figures)
    cpu = _cpu_chains(table, ws, we, row_of, figures)
    gpu = _gpu_items(table, ws, we, row_of, cpu, figures)
    model = Model(window_ns=we - ws, main_chain=cpu.main_chain(table, window),
                  row_key=keys, row_kind=kinds, row_shapes=shape_texts,
                  **{k: v for k, v in gpu.items() if k in _MODEL_ARRAYS})
    ends = table.end[gpu["items"]]
    model.overhang_ns = max(0, int(ends.max()) - we) if ends.size else 0
    _add_syncs(table, model, cpu, gpu, ws, figures)
    _thread_edges(model, cpu, table)
    _merge_positions(model, cpu)
    return model


def _merge_positions(model: Model, cpu: _Chains) -> None:
    """Keep only the positions something refers to (a thread's first and last, a launch, a
    blocking call's end); each kept one gets the stretches since the previous one as
    parts, summed by (row, category). The replay then runs on a few positions per launch."""
    keep = np.zeros(cpu.dur.size, bool)
    keep[cpu.chain_off[:-1]] = True
    keep[cpu.chain_off[1:] - 1] = True
    keep[model.item_launch[model.item_launch >= 0]] = True
    keep[model.sync_pos] = True
    keep[model.cross_target] = True
    keep[model.cross_source] = True
    kept = np.flatnonzero(keep)
    running = np.cumsum(keep)  # kept positions up to each one (its block: those before it)
    has = np.flatnonzero(cpu.dur)
    # The key (block, row, category) made in place: at 1M events each temporary is tens of
    # MB, and memory first written costs time (benchmarks/README.md).
    ncat, rows = len(CATEGORY_NAMES), len(model.row_key) + 1
    key = running[has]
    key -= keep[has]
    key *= rows
    key += cpu.row[has]
    key += 1
    key *= ncat
    key += cpu.cat[has]
    order = stable_order(key)
    key = key[order]
    first = np.ones(key.size, bool)
    np.not_equal(key[1:], key[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    del first
    found = key[starts]
    del key
    model.part_dur = np.add.reduceat(cpu.dur[has[order]], starts).astype(np.int64,
                                                                          copy=False)
    del order, starts
    model.part_cat = found % ncat
    found //= ncat
    model.part_row = found % rows
    model.part_row -= 1
    found //= rows  # (each part's block)
    model.part_off = np.searchsorted(found, np.arange(kept.size + 1)).astype(np.int64)
    model.chain_off = np.searchsorted(kept, cpu.chain_off).astype(np.int64)
    model.pos_anchor = np.full(kept.size, NONE, np.int64)
    model.pos_anchor[model.chain_off[:-1]] = cpu.chain_anchor
    launched = model.item_launch >= 0  # (GPU work with no launch, or no CPU event at all)
    model.item_launch = model.item_launch.copy()
    model.item_launch[launched] = running[model.item_launch[launched]] - 1
    model.sync_pos = running[model.sync_pos] - 1
    model.cross_target = running[model.cross_target] - 1
    model.cross_source = running[model.cross_source] - 1


def _thread_edges(model: Model, cpu: _Chains, table: EventTable) -> None:
    """Edges between the iteration's own thread and the others (autograd's backward thread,
    a worker): another thread starts no earlier than the iteration's thread's position
    before its first event (it was started from there), and where the iteration's thread
    sits outside any op and resumes within ``JOIN_NS`` of another thread going idle, it
    waited for that thread (``loss.backward()`` waiting for the backward thread). Only
    threads that run ops, runtime calls or ranges count (not a profiler's own records)."""
    main = model.main_chain
    targets: list[int] = []
    sources: list[int] = []
    offsets: list[int] = []
    if main < 0 or cpu.chain_off.size <= 2:  # (one thread: no edges between threads)
        return
    lo, hi = int(cpu.chain_off[main]), int(cpu.chain_off[main + 1])
    a_time = cpu.time[lo:hi]
    works = isin(table.kind[cpu.event], (Kind.OP, Kind.RUNTIME, Kind.RANGE))
    for k in range(cpu.chain_off.size - 1):
        if k == main or not works[cpu.chain_off[k]:cpu.chain_off[k + 1]].any():
            continue
        b0, b1 = int(cpu.chain_off[k]), int(cpu.chain_off[k + 1])
        before = int(np.searchsorted(a_time, cpu.time[b0], "right")) - 1
        if before >= 0:  # (a thread already running when the iteration's began: as measured)
            q = lo + before
            targets.append(b0)
            sources.append(q)
            offsets.append(int(cpu.time[b0] - cpu.time[q]))
            cpu.chain_anchor[k] = NONE
        idle = b0 + np.flatnonzero(cpu.owner[b0:b1] < 0)
        at = lo + np.searchsorted(a_time, cpu.time[idle], "left")
        ok = (at < hi) & (at > lo)
        idle, at = idle[ok], at[ok]
        ok = (isin(cpu.cat[at], (OUTSIDE_OPS, IDLE))
              & (cpu.time[at] - cpu.time[idle] <= JOIN_NS))
        for p, e in _last_per_target(at[ok], idle[ok]):
            targets.append(p)
            sources.append(e)
            offsets.append(int(cpu.time[p] - cpu.time[e]))
            cpu.dur[p] = offsets[-1]  # the rest of the stretch was the wait
    joined = {}
    for tgt, src, off in zip(targets, sources, offsets, strict=True):
        if tgt not in joined or cpu.time[src] > cpu.time[joined[tgt][0]]:
            joined[tgt] = (src, off)
    model.cross_target = np.asarray(list(joined), np.int64)
    model.cross_source = np.asarray([v[0] for v in joined.values()], np.int64)
    model.cross_off = np.asarray([v[1] for v in joined.values()], np.int64)


def _last_per_target(targets: np.ndarray, sources: np.ndarray) -> list[tuple[int, int]]:
    """For each distinct target, the last source (sources are in time order)."""
    if not targets.size:
        return []
    last = np.flatnonzero(np.append(targets[1:] != targets[:-1], True))
    return list(zip(targets[last].tolist(), sources[last].tolist(), strict=True))


def _row_ids(table: EventTable, window: Window, ranges: np.ndarray, shapes: bool,
             name: str | None, figures: Figures,
             ) -> tuple[np.ndarray, list[str], list[str], list[str]]:
    """Per event, the op-table row it belongs to (as ``views/ops.py`` groups them); GPU
    work with a row of its own (no launch; launched by an iteration marker: ``[no op]``)
    has it, the rest of the GPU work its launcher's."""
    ws, we = window
    inside = (table.start < we) & (table.end > ws) | (table.start == ws)
    owner = (is_op(table) | ranges) & ~figures.shared(under_our_sync) & inside
    work = device_work(table) & (table.launcher == NO_PARENT) & inside
    marked, marker_keys = figures.shared(marker_work, name)
    has = np.flatnonzero(marked >= 0)
    outside = has[~inside[table.launcher[has]]]
    if outside.size:  # (the shared array stays as it is)
        marked = marked.copy()
        marked[outside] = -1
    events = np.flatnonzero(owner | work | (marked >= 0))
    row_of = np.full(table.n, -1, dtype=np.int32)  # (the rows are few: small types)
    if not events.size:
        return row_of, [], [], []
    kind_code = np.where(marked[events] >= 0, 3,
                         np.where(work[events], 2, ranges[events].astype(np.int64)))
    by_itself = kind_code >= 2  # GPU work: no shapes
    key = np.where(kind_code == 3, marked[events], table.name[events]).astype(np.int64) * 4
    key += kind_code
    if shapes:
        key = key * (int(table.shapes.max()) + 1) + np.where(by_itself, 0,
                                                             table.shapes[events])
    found, first, inverse = unique(key, return_index=True, return_inverse=True)
    row_of[events] = inverse
    firsts = events[first]
    names = [marker_keys[k] if k >= 0 else table.names[i]
             for k, i in zip(marked[firsts].tolist(), table.name[firsts].tolist(), strict=True)]
    kind_names = [("op", "range", UNLAUNCHED, NO_OP)[c] for c in kind_code[first].tolist()]
    shape_texts = ([table.names[i] if k in ("op", "range") else ""
                    for i, k in zip(table.shapes[firsts].tolist(), kind_names, strict=True)]
                   if shapes else [""] * found.size)
    return row_of, names, kind_names, shape_texts


@dataclass
class _Chains:
    """The CPU side while the model is built: positions and what they are."""

    chain_off: np.ndarray
    dur: np.ndarray
    chain_anchor: np.ndarray  # each thread's first position's time (NONE: none)
    row: np.ndarray
    cat: np.ndarray
    time: np.ndarray  # measured ns from the window start
    event: np.ndarray  # the event whose start (or end) the position is
    owner: np.ndarray  # the event that runs after the position (-1: none)
    is_start: np.ndarray
    chain_tid: np.ndarray

    def main_chain(self, table: EventTable, window: Window) -> int:
        """The iteration's own thread: the one whose range or step spans exactly the window,
        else the one that runs the most ops and runtime calls (-1: no thread at all)."""
        spans = np.flatnonzero((table.start == window[0]) & (table.end == window[1])
                               & (table.device < 0) & (table.tid >= 0)
                               & isin(table.kind, (Kind.RANGE, Kind.STEP)))
        if spans.size:
            hit = np.flatnonzero(self.chain_tid == table.tid[spans[0]])
            if hit.size:
                return int(hit[0])
        if not self.chain_tid.size:
            return -1
        kind = table.kind[self.event]
        ops = ((kind == Kind.OP) | (kind == Kind.RUNTIME)).view(np.int8)
        return int(np.argmax(np.add.reduceat(ops, self.chain_off[:-1], dtype=np.int64)))

    def position_of_end(self, events: np.ndarray) -> np.ndarray:
        """The position of each event's end (-1 when the event is not on a chain)."""
        return self._position(events, 1)

    def position_of(self, events: np.ndarray, end: np.ndarray) -> np.ndarray:
        """The position of each event's end where ``end``, else of its start (-1 when the
        event is not on a chain)."""
        return self._position(events, end.view(np.int8))

    @cached_property
    def _at(self) -> np.ndarray:
        """(events up to the last on a chain, 2): each event's start and end positions
        (-1: not on a chain), made in one pass."""
        lookup = np.full((int(self.event.max()) + 1 if self.event.size else 1, 2), -1,
                         np.int64)
        lookup[self.event, (~self.is_start).view(np.int8)] = np.arange(self.event.size)
        return lookup

    def _position(self, events: np.ndarray, side: int | np.ndarray) -> np.ndarray:
        lookup = self._at
        ok = (events >= 0) & (events < lookup.shape[0])
        out = np.full(events.shape, -1, np.int64)
        out[ok] = lookup[events[ok], side if isinstance(side, int) else side[ok]]
        return out


def _cpu_chains(table: EventTable, ws: int, we: int, row_of: np.ndarray,
                figures: Figures) -> _Chains:
    """Every CPU thread's positions in the window, one sort for all threads. (Two positions
    per event: each array here is as long as that, so few are made, in small types.)"""
    ev = np.flatnonzero(figures.in_tree & (((table.start < we) & (table.end > ws))
                                   | ((table.start >= ws) & (table.start <= we)))
                        ).astype(np.int32)  # (event indices fit, as ``parent``'s do)
    n = ev.size
    start, end = np.maximum(table.start[ev], ws) - ws, np.minimum(table.end[ev], we) - ws
    # Ends before starts at one instant; the deeper end first, the shallower start first;
    # an event of no length starts and ends after them (else its end would come before its
    # start, and the stretch after it would be its own).
    zero = (end <= start).view(np.int8)
    depth = figures.depth[ev].astype(np.int32)
    tid = table.tid[ev]
    times = np.concatenate((start, end))
    del start, end
    order = _position_order(tid, times, zero, depth, we - ws)
    del depth, zero
    time = times[order]
    del times
    is_start = order < n
    np.remainder(order, n, out=order)  # (now each position's event, in ``ev``)
    tid, event = tid[order], ev[order]
    del order
    owner = event.copy()  # what runs after the position: the event started, or ...
    ends = np.flatnonzero(~is_start)  # ... after an end, its innermost open ancestor
    owner[ends] = _open_ancestor(table, table.parent[event[ends]], time[ends] + ws)
    del ends
    new_chain = np.ones(tid.size, bool)
    new_chain[1:] = tid[1:] != tid[:-1]
    chain_off = np.append(np.flatnonzero(new_chain), tid.size).astype(np.int64)
    prev_owner = np.empty_like(owner)
    prev_owner[:1] = -1
    prev_owner[1:] = owner[:-1]
    prev_owner[new_chain] = -1
    dur = np.empty_like(time)
    dur[:1] = 0
    np.subtract(time[1:], time[:-1], out=dur[1:])
    dur[new_chain] = 0
    row = row_of[prev_owner]
    row[prev_owner < 0] = -1
    cat = _categories(table, prev_owner, figures)
    del prev_owner
    return _Chains(chain_off, dur, time[new_chain], row, cat, time, event, owner, is_start,
                   tid[new_chain])


def _position_order(tid: np.ndarray, times: np.ndarray, zero: np.ndarray, depth: np.ndarray,
                    span: int) -> np.ndarray:
    """The order of the positions (every event's start, then every end: ``times``) by
    thread, time, then at one instant: ends before starts, the deeper end first and the
    shallower start first, events of no length last (``_cpu_chains``). One stable sort of
    a key that packs the four, where it fits in 62 bits (a lexsort of four keys takes
    three times as long)."""
    n = tid.size
    levels = int(depth.max()) + 1 if n else 1
    threads = int(tid.max()) + 1 if n else 1
    low = min(0, int(times.min())) if n else 0  # (an end before the window: a bad trace)
    width = span + 1 - low
    if threads * width * 4 * levels >= 2**62:  # (thread ids too large: their ranks)
        found, tid = unique(tid, return_inverse=True)
        threads = found.size
    if threads * width * 4 * levels >= 2**62:  # (a window of weeks: four keys)
        return np.lexsort((np.concatenate((depth, -depth)),
                           np.concatenate((zero + 1, zero * 3)), times,
                           np.concatenate((tid, tid))))
    key = np.concatenate((tid, tid)).astype(np.int64)
    key *= width
    key += times
    key -= low
    key *= 4
    key += np.concatenate((zero + 1, zero * 3))
    key *= levels
    key += np.concatenate((depth, levels - 1 - depth))
    return key.argsort(kind="stable")


def _open_ancestor(table: EventTable, parent: np.ndarray, time: np.ndarray) -> np.ndarray:
    """After an event ends at ``time``, what runs is its innermost ancestor still open: its
    parent, unless the trace nests them badly (a child that outlives its parent, as CUDA's
    start-up calls do in ``a100_alexnet.json.gz``); then the stretch is not the ended
    parent's, whose self time torch counts without it."""
    owner = parent.astype(np.int32)
    while True:
        ended = np.flatnonzero((owner >= 0) & (table.end[np.maximum(owner, 0)] <= time))
        if not ended.size:
            return owner
        owner[ended] = table.parent[owner[ended]]


def _categories(table: EventTable, owner: np.ndarray, figures: Figures) -> np.ndarray:
    """What each stretch of a thread is, by the kind and name of the event that owns it
    (``owner`` -1: none, idle)."""
    # per event, then read per stretch (the last entry: no owner)
    of_event = np.full(table.n + 1, OUTSIDE_OPS, np.int8)
    of_event[-1] = IDLE
    of_event[:-1][table.kind == Kind.OP] = CPU_OP
    of_event[:-1][table.kind == Kind.RUNTIME] = LAUNCH
    of_event[figures.shared(runtime_named, BLOCKING_CALLS)] = SYNC
    return of_event[owner]


def _stream_order(table: EventTable) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """All GPU work by (device, stream, start); whether the work before it is on its
    stream, and its end there (NONE: none); each one's runtime call (``runtime_calls``).
    The model and the trust checks read it alike (``Figures.shared``)."""
    work = np.flatnonzero(device_work(table) & (table.device >= 0))
    work = work[np.lexsort((table.end[work], table.start[work], table.tid[work],
                            table.device[work]))]
    same = np.zeros(work.size, bool)
    same[1:] = ((table.tid[work[1:]] == table.tid[work[:-1]])
                & (table.device[work[1:]] == table.device[work[:-1]]))
    prev_end = np.full(work.size, NONE, np.int64)
    prev_end[1:] = table.end[work[:-1]]
    prev_end[~same] = NONE
    return work, same, prev_end, runtime_calls(table, work)


def _typical_latency(table: EventTable, work: np.ndarray, call: np.ndarray,
                     prev_end: np.ndarray, in_window: np.ndarray, start: np.ndarray,
                     released: np.ndarray) -> int:
    """The launch latency of work that found its stream idle when it was launched: the
    median in the window, else in the whole trace, else ``DEFAULT_LAUNCH_LATENCY_NS``.
    Never from queued work: its delay is the GPU's backlog, not a latency. (``start``:
    each launch's start, ``released``: when it let its work go: ``_launched_at``.)"""
    launched = call >= 0
    lat = table.start[work] - released
    # Where the trace shows the stream idle when the launch let the work go; the first
    # work recorded on a stream only if it started within ``FIRST_LAUNCH_MAX_NS`` (it
    # may have queued behind work from before the recording began).
    free = (launched & (table.start[work] >= start)
            & np.where(prev_end != NONE, prev_end <= released, lat <= FIRST_LAUNCH_MAX_NS))
    for chosen in (free & in_window, free):
        if chosen.any():
            return int(median(lat[chosen]))
    return DEFAULT_LAUNCH_LATENCY_NS


def _launched_at(table: EventTable, work: np.ndarray,
                 call: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per GPU work (``call``: its runtime call, -1: none): the call's start and end (ns;
    NONE where no call), and whether the launch let the work go as the call returned:
    it is let go at the call's end where the work started after the call returned
    (``np.where(after, end, start)``), as it almost always does (the runtime hands the
    work over as it returns: 2,687 of 2,700 kernels of ``a100_nccl_rank``, all of
    ``mi250_rocm``'s), else the call's start (a blocking ``cudaMemcpy`` ends after its
    copy). So the latency is what follows the call, and a launch that takes long (a
    first launch loading its kernel's module: 6.5 ms in ``mi250_rocm``) holds its work
    back by its own CPU time, which a faster call saves."""
    launched = call >= 0
    c = np.maximum(call, 0)
    start = np.where(launched, table.start[c], NONE)
    end = np.where(launched, table.end[c], NONE)
    return start, end, launched & (table.start[work] >= end)


_MODEL_ARRAYS = frozenset(("stream_off", "item_dur", "item_row", "item_launch", "item_lat",
                           "item_gap", "item_anchor", "item_backlog", "wait_off", "wait_dep"))


def _gpu_items(table: EventTable, ws: int, we: int, row_of: np.ndarray, cpu: _Chains,
               figures: Figures) -> dict[str, np.ndarray]:
    """The GPU work launched in the window (or starting there, with no recorded launch).
    Work queued behind work launched before the window starts after that backlog
    (``item_backlog``: how far into the window it runs)."""
    work, same, prev_end, call = figures.shared(_stream_order)
    if not work.size:  # (a CPU-only run: the model's own empty arrays, without their work)
        empty, none = Model(), np.zeros(0, np.int64)
        return {k: getattr(empty, k) for k in _MODEL_ARRAYS} | dict(
            items=none, work=none, work_launch=none, item_of_work=none,
            queued=np.zeros(0, bool), item_call=none)
    launch_start, call_end, after_call = _launched_at(table, work, call)
    in_window = np.where(call >= 0, (launch_start >= ws) & (launch_start < we),
                         (table.start[work] >= ws) & (table.start[work] < we))
    typical = _typical_latency(table, work, call, prev_end, in_window, launch_start,
                               np.where(after_call, call_end, launch_start))
    keep = np.flatnonzero(in_window)
    items = work[keep]
    st = table.start[items] - ws
    calls = call[keep]
    ls = np.where(calls >= 0, launch_start[keep] - ws, NONE)
    pe = np.where(prev_end[keep] != NONE, prev_end[keep] - ws, NONE)
    launched = (calls >= 0) & (st >= ls)
    # Let go as the call returned (``_launched_at``), where that is in the window: a call
    # that runs on past it ends at the window's end, as its position does (its start, then).
    after = launched & after_call[keep] & (call_end[keep] <= we)
    released = np.where(after, call_end[keep] - ws, ls)
    queued = launched & (pe != NONE) & (pe > released)  # (behind work still running then)
    free = launched & ~queued
    lat = st - released
    item_lat = np.where(queued, np.minimum(lat, typical), lat)
    gap = np.where(free, 0, st - np.where(pe != NONE, pe, st))
    # The previous work on the stream is in the model when it is the item just before.
    prev_in = np.zeros(keep.size, bool)
    prev_in[1:] = (keep[1:] == keep[:-1] + 1) & same[keep[1:]]
    anchor = np.full(keep.size, NONE, np.int64)
    fixed_prev = ~prev_in & (pe != NONE)
    anchor[fixed_prev] = pe[fixed_prev] + gap[fixed_prev]
    backlog = np.where(fixed_prev & (pe != NONE) & (pe > 0), pe, 0).astype(np.int64)
    alone = ~launched & ~prev_in
    anchor[alone] = st[alone]
    stream_off = np.concatenate((np.flatnonzero(~prev_in), [keep.size])).astype(np.int64)
    item_row = np.where(table.launcher[items] >= 0,
                        row_of[np.maximum(table.launcher[items], 0)], -1)
    item_row = np.where(row_of[items] >= 0, row_of[items], item_row).astype(np.int64)  # own
    launch_pos = np.where(launched, cpu.position_of(calls, after), -1)  # its end, or start
    wait_off, wait_dep = _stream_waits(table, items, calls, ws, figures)
    item_of_work = np.full(work.size, -1, np.int64)
    item_of_work[keep] = np.arange(keep.size)
    return dict(stream_off=stream_off, item_dur=(table.end[items] - table.start[items]),
                item_row=item_row, item_launch=launch_pos, item_lat=item_lat.astype(np.int64),
                item_gap=gap.astype(np.int64), item_anchor=anchor, item_backlog=backlog,
                wait_off=wait_off, wait_dep=wait_dep, items=items, work=work,
                work_launch=launch_start, item_of_work=item_of_work, queued=queued,
                item_call=calls)


def _last_before(table: EventTable, items: np.ndarray, launch_at: np.ndarray,
                 launch_by: np.ndarray, end_by: np.ndarray) -> np.ndarray:
    """(query, item) pairs, one per row: per query and stream, the last item launched by
    ``launch_by`` that ended by ``end_by`` (items in stream order; ``launch_at`` their
    launch times)."""
    pairs = [np.zeros((0, 2), np.int64)]
    if not items.size or not launch_by.size:
        return pairs[0]
    stream = table.device[items].astype(np.int64) * (1 << 40) + table.tid[items]
    bounds = np.flatnonzero(np.diff(stream)) + 1
    for lo, hi in zip(np.concatenate(([0], bounds)), np.concatenate((bounds, [items.size])),
                      strict=True):
        launched = np.maximum.accumulate(launch_at[lo:hi])
        ends = table.end[items[lo:hi]]
        upto = np.minimum(np.searchsorted(launched, launch_by, "right"),
                          np.searchsorted(ends, end_by, "right"))
        has = np.flatnonzero(upto > 0)
        pair = np.empty((has.size, 2), np.int64)
        pair[:, 0], pair[:, 1] = has, lo + upto[has] - 1
        pairs.append(pair)
    return np.concatenate(pairs).astype(np.int64, copy=False)


def runtime_named(table: EventTable, names: frozenset[str]) -> np.ndarray:
    """The runtime calls (event indices, in order) whose name is one of ``names``: for
    ``Figures.shared``, once per load and set of names."""
    return np.flatnonzero(name_mask(table, names.__contains__,
                                    among=table.kind == Kind.RUNTIME))


def _stream_waits(table: EventTable, items: np.ndarray, call: np.ndarray, ws: int,
                  figures: Figures) -> tuple[np.ndarray, np.ndarray]:
    """Each stream wait's edges: the next item its thread launches waits for the other
    streams' last work launched before the wait (that ended before it started). All the
    window's waits at once: a sort and a search per stream, no loop over the waits."""
    w = items.size
    off = np.zeros(w + 1, np.int64)
    waits = figures.shared(runtime_named, STREAM_WAIT_CALLS)
    waits = waits[table.start[waits] >= ws]
    launched = np.flatnonzero(call >= 0)
    if not waits.size or not launched.size:
        return off, np.zeros(0, np.int64)
    # The first launch at or after each wait on the wait's thread.
    _, thread = unique(np.concatenate((table.tid[call[launched]], table.tid[waits])),
                       return_inverse=True)
    span = int(max(table.end.max(), table.start.max()) - min(ws, int(table.start.min()))) + 2
    key = thread * span + (np.concatenate((table.start[call[launched]], table.start[waits]))
                           - min(ws, int(table.start.min())))
    launch_key, wait_key = key[:launched.size], key[launched.size:]
    by = np.argsort(launch_key, kind="stable")
    at = np.searchsorted(launch_key[by], wait_key, "left")
    found = at < launched.size
    found[found] = (launch_key[by[at[found]]] // span) == (wait_key[found] // span)
    target = np.full(waits.size, -1, np.int64)
    target[found] = launched[by[at[found]]]
    waits, target = waits[found], target[found]
    launch_at = np.where(call >= 0, table.start[np.maximum(call, 0)], NONE)
    pairs = _last_before(table, items, launch_at, table.start[waits],
                         table.start[items[target]])
    tgt, dep = target[pairs[:, 0]], pairs[:, 1]
    other = (table.tid[items[dep]] != table.tid[items[tgt]]) & (dep != tgt)
    tgt, dep = tgt[other], dep[other]
    order = np.lexsort((dep, tgt))
    tgt, dep = tgt[order], dep[order]
    np.add.at(off, tgt + 1, 1)
    return np.cumsum(off), dep


def _add_syncs(table: EventTable, model: Model, cpu: _Chains, gpu: dict[str, np.ndarray],
               ws: int, figures: Figures) -> None:
    """The calls whose end waits for GPU work: blocking calls (module docstring) and
    launches that waited for a slot in a full launch queue (``_blocked_launches``). Work
    waited for that was launched before the window is fixed in time (``sync_fixed``),
    scaled with its stream's work in the window (``sync_stream``)."""
    calls = figures.shared(runtime_named, BLOCKING_CALLS)
    calls = calls[(table.device[calls] < 0) & (table.tid[calls] >= 0)]
    end_pos = cpu.position_of_end(calls)
    calls, end_pos = calls[end_pos >= 0], end_pos[end_pos >= 0]
    work = gpu["work"]
    pairs = _last_before(table, work, gpu["work_launch"], table.start[calls],
                         table.end[calls])
    launch, launch_pos, launch_waited = _blocked_launches(table, cpu, gpu)
    call = np.concatenate((calls[pairs[:, 0]], launch))
    if not call.size:  # (the model's own empty arrays stand)
        return
    pos = np.concatenate((end_pos[pairs[:, 0]], launch_pos))
    waited_work = np.concatenate((pairs[:, 1], launch_waited))
    cat = np.concatenate((np.full(pairs.shape[0], SYNC), np.full(launch.size, LAUNCH)))
    # One sync per (position, call, category), in that order; its work in the order found.
    order = np.lexsort((cat, call, pos))
    call, pos, cat, waited_work = call[order], pos[order], cat[order], waited_work[order]
    first = np.ones(call.size, bool)
    first[1:] = (pos[1:] != pos[:-1]) | (call[1:] != call[:-1]) | (cat[1:] != cat[:-1])
    firsts = np.flatnonzero(first)
    group = np.cumsum(first) - 1
    ends = table.end[work[waited_work]]
    waited = np.maximum.reduceat(ends, firsts)
    call = call[firsts]
    s, e = table.start[call], table.end[call]
    keep = waited > s  # (work done before the call began: nothing to wait for)
    inside = gpu["item_of_work"][waited_work]
    dep = keep[group] & (inside >= 0)
    fixed, stream = _waited_before(table, model, gpu, ws, group, keep[group] & (inside < 0),
                                   ends, work[waited_work], firsts.size)
    sync_pos = pos[firsts][keep]
    model.sync_pos = sync_pos
    model.sync_row = cpu.row[sync_pos].astype(np.int64)
    model.sync_post = (e - np.maximum(s, waited))[keep].astype(np.int64)
    model.sync_fixed = fixed[keep]
    model.sync_stream = stream[keep]
    model.sync_cat = cat[firsts][keep].astype(np.int64)
    model.sync_off = np.concatenate(([0], np.cumsum(np.bincount(
        group[dep], minlength=firsts.size)[keep]))).astype(np.int64)
    model.sync_dep = inside[dep].astype(np.int64)
    np.minimum.at(cpu.dur, sync_pos, model.sync_post)


def _waited_before(table: EventTable, model: Model, gpu: dict[str, np.ndarray], ws: int,
                   group: np.ndarray, outside: np.ndarray, ends: np.ndarray,
                   waited: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per sync (``group`` numbers each one's waited work ``waited``, ending at ``ends``),
    the work launched before the window it waited for (``outside``): when the latest of
    it ends (from the window's start; NONE: none) and the model's stream it is on (-1)."""
    fixed, stream = np.full(n, NONE, np.int64), np.full(n, -1, np.int64)
    at = np.flatnonzero(outside)
    if not at.size:
        return fixed, stream
    at = at[np.lexsort((at, -ends[at], group[at]))]  # (the latest first, the first of ties)
    at = at[np.append(True, group[at][1:] != group[at][:-1])]
    last = waited[at]
    fixed[group[at]] = table.end[last] - ws
    stream_of_key = _stream_of_key(table, model, gpu["items"])
    stream[group[at]] = [stream_of_key.get(key, -1) for key in
                         zip(table.device[last].tolist(), table.tid[last].tolist(), strict=True)]
    return fixed, stream


def _blocked_launches(table: EventTable, cpu: _Chains, gpu: dict[str, np.ndarray]
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Launches that waited for the GPU because its launch queue was full: the call took
    ``BLOCKED_LAUNCH_EXTRA_NS`` longer than the window's median launch (at most that
    long: where every launch waited, the median is a wait too), its own work was
    queued, and it returned within ``QUEUE_RETURN_NS`` of some GPU work on its device
    ending (the work whose end freed the slot). The calls, their ends' positions and the
    work each waited for (in ``gpu["work"]``): its end waits for that work, like a
    blocking call's."""
    none = np.zeros(0, np.int64)
    calls = gpu["item_call"]
    has = calls >= 0
    if not has.any():
        return none, none, none
    dur = table.end[calls[has]] - table.start[calls[has]]
    # (the median launch, or less: where every launch waited, the median is a wait too)
    cut = min(median(dur), BLOCKED_LAUNCH_EXTRA_NS) + BLOCKED_LAUNCH_EXTRA_NS
    chosen = np.flatnonzero(has & gpu["queued"])
    chosen = chosen[(table.end[calls[chosen]] - table.start[calls[chosen]]) > cut]
    if not chosen.size:
        return none, none, none
    work = gpu["work"]
    found = [(none, none, none)]
    for device in unique(table.device[gpu["items"][chosen]]).tolist():
        on = np.flatnonzero(table.device[work] == device)
        by_end = on[np.argsort(table.end[work[on]], kind="stable")]
        ends = table.end[work[by_end]]
        mine = chosen[table.device[gpu["items"][chosen]] == device]
        c = calls[mine]
        at = np.searchsorted(ends, table.end[c], "right") - 1
        ok = at >= 0
        at = np.maximum(at, 0)
        ok &= (ends[at] > table.start[c]) & (table.end[c] - ends[at] <= QUEUE_RETURN_NS)
        pos = cpu.position_of_end(c)
        ok &= pos >= 0
        found.append((c[ok], pos[ok], by_end[at[ok]]))
    launch, launch_pos, waited = (np.concatenate(x).astype(np.int64, copy=False)
                                  for x in zip(*found, strict=True))
    return launch, launch_pos, waited


def _stream_of_key(table: EventTable, model: Model, items: np.ndarray) -> dict[tuple[int, int],
                                                                                int]:
    """The model's stream of each (device, stream id) holding work in the window."""
    firsts = model.stream_off[:-1]
    firsts = firsts[firsts < items.size]
    out: dict[tuple[int, int], int] = {}
    for k, i in enumerate(firsts.tolist()):
        out.setdefault((int(table.device[items[i]]), int(table.tid[items[i]])), k)
    return out


def trust_checks(table: EventTable, figures: Figures | None = None) -> dict[str, float]:
    """The model checks its own edges (``TrustChecks`` in ``core/rows.py``): GPU work that
    starts before its launch began (and by how much, the median), launches whose GPU work
    is missing, work that overlaps the work before it on its stream, GPU records with a
    zero timestamp. torch's profiler is known to drop or shift GPU events in later
    sessions of one process (pytorch/pytorch#175790, #192021; pytorch/kineto#109). And
    how far a ``ProfilerStep`` range runs past the last recorded event (its iteration
    ends there: ``views/iterations.py: recorded_end``)."""
    figures = figures or Figures(table)
    work, same, prev_end, call = figures.shared(_stream_order)
    has = call >= 0
    early = table.start[call[has]] - table.start[work[has]]
    early = early[early > 0]
    launches = figures.shared(runtime_named, LAUNCH_CALLS)
    launches = launches[table.correlation[launches] != 0]
    done = isin(table.correlation[launches], table.correlation[work])
    overlap = same & (prev_end != NONE) & (table.start[work] < prev_end - OVERLAP_NS)
    zero = (table.device >= 0) & (table.start + table.origin_ns == 0) & (table.kind != Kind.MEMORY)
    steps, last = table.kind == Kind.STEP, recorded_end(table)
    past = int(table.end[steps].max()) - last if steps.any() and last is not None else 0
    return {"before_launch": int(early.size),
            "clock_offset_us": median(early) / 1000.0 if early.size else 0.0,
            "missing_work": int((~done).sum()),
            "stream_overlaps": int(overlap.sum()),
            "zero_timestamps": int(zero.sum()),
            "step_past_end_us": max(0, past) / 1000.0}
