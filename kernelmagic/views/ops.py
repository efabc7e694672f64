"""Report rows (torch's ``key_averages()``, field by field, plus what torch leaves out) and
GPU kernel rows.

Who owns what: every microsecond of GPU work and of op time is in exactly one row.

- **Ops and runtime calls** are rows, with torch's self and total times. GPU work belongs
  to the innermost op or range around the runtime call that launched it (the call itself
  when nothing is open around it: ``events.derive_links``).
- **Ranges that own time directly** are rows of their own (``kind`` "range"): a range
  that launched GPU work with no op in between (``nccl:all_reduce`` around NCCL's
  ``cudaLaunchKernel``, a fused optimizer's ``Optimizer.step#FusedAdam.step``, a user's
  ``record_function`` around a Triton kernel), and a user range with no op or runtime
  call anywhere under it (``gloo:all_reduce`` on gloo's threads: recorded live as an
  asynchronous range, off the thread's tree, whose self time is its whole duration where
  torch gives it none). A range that only wraps
  ops (ours, the user's, ``ProfilerStep#N``, modules) is no row: its ops are.
- **GPU work whose launch is not recorded** (no runtime call with its correlation id)
  is a row per name (``kind`` "unlaunched").
- **Iteration markers are the window, never rows**: ``ProfilerStep#N`` and kernelmagic's
  ``NAME/iter i``. GPU work a marker launched itself (a runtime call right under the
  step, no op between: a Triton kernel or an extension called from Python) is one row
  per kind of marker (``kind`` "no op", key ``ProfilerStep`` or ``NAME/iter``, shown as
  ``[no op] ProfilerStep``) holding that work's device time and nothing else: its count
  is the pieces of work, its CPU time 0 (the step's own CPU time is no row's, as for any
  range that only wraps ops; the runtime calls are rows of their own).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from kernelmagic.core.arrays import isin, unique
from kernelmagic.core.events import NO_PARENT, EventTable, Kind, device_work, key_finder
from kernelmagic.core.range_names import SYNC_RANGE, is_iteration, is_ours, marker_key
from kernelmagic.core.rows import KIND_MARKS, KernelRow, OpRow
from kernelmagic.views.breakdown import name_mask
from kernelmagic.views.tree import Figures, in_start_order

__all__ = ["group", "in_window", "is_op", "iteration_markers", "kernel_rows", "marker_work",
           "op_rows", "outer_window", "range_owners", "ranges_named", "row_events",
           "runtime_calls", "under_our_sync"]

#: ``OpRow.kind`` values.
OP, RANGE, UNLAUNCHED, NO_OP = "op", "range", "unlaunched", "no op"
#: CPU-side kinds that can own time as a range (``OTHER``: profiler records and the like).
_RANGE_KINDS = np.asarray((Kind.RANGE, Kind.STEP, Kind.OTHER), dtype=np.int8)


def is_op(table: EventTable) -> np.ndarray:
    """Operators and runtime calls on the CPU: the events that make report rows.

    Not ranges (ours, the user's, modules, ``ProfilerStep#N``), Python frames,
    ``[memory]`` records or GPU work.
    """
    kind = table.kind
    return (table.device < 0) & ((kind == Kind.OP) | (kind == Kind.RUNTIME))


def ranges_named(table: EventTable, name: str) -> np.ndarray:
    """Per event: a range called ``name``, such as kernelmagic's own synchronise range
    (``SYNC_RANGE``); none when no event is (names are distinct: one id at most)."""
    if name not in table.names:
        return np.zeros(table.n, dtype=bool)
    return (table.kind == Kind.RANGE) & (table.name == table.names.index(name))


def under_our_sync(table: EventTable) -> np.ndarray:
    """Per event: directly inside kernelmagic's own synchronise range."""
    sync, has = ranges_named(table, SYNC_RANGE), table.parent >= 0
    out = np.zeros(table.n, dtype=bool)
    out[has] = sync[table.parent[has]]
    return out


def group(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group ids (0..k-1, numbered by first occurrence) and each group's first position."""
    _, first, inverse = unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse], np.sort(first)


def outer_window(table: EventTable, name: str) -> tuple[int, int] | None:
    """(start, end) of the run's outermost range ``name`` (kernelmagic's own), if any."""
    found = np.flatnonzero(ranges_named(table, name))
    if not found.size:
        return None
    return int(table.start[found].min()), int(table.end[found].max())


def _ops_below(table: EventTable) -> np.ndarray:
    """Per event: whether an op or runtime call is anywhere under it on its thread."""
    below = np.zeros(table.n, dtype=bool)
    up = table.parent[is_op(table)]
    frontier = unique(up[up >= 0])
    while frontier.size:
        frontier = frontier[~below[frontier]]
        below[frontier] = True
        up = table.parent[frontier]
        frontier = unique(up[up >= 0])
    return below


def runtime_calls(table: EventTable, work: np.ndarray) -> np.ndarray:
    """Each piece of GPU work's runtime call (same correlation id), -1 where none."""
    calls = np.flatnonzero((table.kind == Kind.RUNTIME) & (table.device < 0)
                           & (table.correlation != 0))
    if not calls.size:
        return np.full(work.size, -1, dtype=np.int64)
    hit, first = key_finder(table.correlation[calls])(table.correlation[work])
    return np.where(hit, calls[first], -1)


def range_owners(table: EventTable, name: str | None = None) -> np.ndarray:
    """The CPU-side ranges that own time directly (see the module's docstring).

    ``name`` is the run's name: its ranges (``kernelmagic/core/range_names.py``) are rows
    only when they launched GPU work themselves; the iteration markers
    (``iteration_markers``) never are: what they launch is ``marker_work``'s.
    """
    on_cpu = (table.device < 0) & isin(table.kind, _RANGE_KINDS)
    if not on_cpu.any():
        return on_cpu
    ours = name_mask(table, lambda x: is_ours(x, name), among=on_cpu)
    leaf = ((table.kind == Kind.RANGE) & ~ours & (table.end > table.start)
            & ~_ops_below(table))
    launched = np.zeros(table.n, dtype=bool)  # launched GPU work itself (its ``launcher``)
    launched[table.launcher[device_work(table) & (table.launcher != NO_PARENT)]] = True
    return on_cpu & ~iteration_markers(table, name) & (launched | leaf)


def iteration_markers(table: EventTable, name: str | None = None) -> np.ndarray:
    """Per event: an iteration marker, ``ProfilerStep#N`` or kernelmagic's ``NAME/iter i``
    of the run ``name`` (any run's when None). They mark the window; they are no row."""
    on_cpu = table.device < 0
    ranges = on_cpu & (table.kind == Kind.RANGE)
    return (on_cpu & (table.kind == Kind.STEP)) | name_mask(
        table, lambda x: is_iteration(x, name), among=ranges)


def marker_work(table: EventTable,
                name: str | None = None) -> tuple[np.ndarray, tuple[str, ...]]:
    """The GPU work an iteration marker launched directly (module docstring): per event,
    the index of its row in the keys returned (``ProfilerStep``, ``NAME/iter``), -1 for
    any other event."""
    row = np.full(table.n, -1, dtype=np.int64)
    work = np.flatnonzero(device_work(table) & (table.launcher != NO_PARENT))
    work = work[iteration_markers(table, name)[table.launcher[work]]]
    if not work.size:
        return row, ()
    marker_names = table.name[table.launcher[work]]
    found, inverse = unique(marker_names, return_inverse=True)
    keys = sorted({marker_key(table.names[i]) for i in found.tolist()})
    of_name = np.asarray([keys.index(marker_key(table.names[i])) for i in found.tolist()])
    row[work] = of_name[inverse]
    return row, tuple(keys)


def op_rows(table: EventTable, figures: Figures, *, shapes: bool = False,
            memory: bool = False, flops: bool = False,
            window: tuple[int, int] | None = None, name: str | None = None,
            ranges: np.ndarray | None = None) -> list[OpRow]:
    """One row per operator name (and input shapes with ``shapes``), in torch's order, then
    the ranges that own time and the GPU work with no recorded launch (module docstring).

    Sums run over the events in torch's list order, so every op's figures equal
    ``key_averages()``'s bit for bit. Left out: the events under kernelmagic's own
    synchronize range and, given the run's ``window`` (``outer_window``), events that
    start outside it (the profiler's own start and stop, e.g. its closing synchronize).
    ``name`` is the run's name (its own ranges are not the user's); ``ranges``:
    ``range_owners(table, name)`` when the caller has it already.
    """
    order = figures.order
    ranges = range_owners(table, name) if ranges is None else ranges
    wanted = row_events(table, ranges, window, figures)
    sel = order[wanted[order]]
    rows = _grouped_rows(table, figures, sel, ranges[sel], shapes=shapes, memory=memory,
                         flops=flops)
    return rows + _marker_rows(table, figures, window, name) + _unlaunched_rows(table, window)


def row_events(table: EventTable, ranges: np.ndarray, window: tuple[int, int] | None,
               figures: Figures) -> np.ndarray:
    """Per event: whether it is counted in an op or range row (``op_rows``): an op, a
    runtime call or a range that owns time (``ranges``: ``range_owners``), not under
    kernelmagic's own synchronize, starting inside ``window`` when one is given."""
    return (is_op(table) | ranges) & ~figures.shared(under_our_sync) & in_window(table.start,
                                                                               window)


def in_window(times: np.ndarray, window: tuple[int, int] | None) -> np.ndarray:
    """Per time: inside ``window`` (its ends included); every one without a window."""
    if window is None:
        return np.ones(times.size, dtype=bool)
    return (times >= window[0]) & (times <= window[1])


def _grouped_rows(table: EventTable, figures: Figures, sel: np.ndarray, is_range: np.ndarray,
                  *, shapes: bool, memory: bool, flops: bool) -> list[OpRow]:
    if not sel.size:
        return []
    keys = table.name[sel].astype(np.int64) * 2 + is_range
    if shapes:
        keys = keys * (int(table.shapes.max()) + 1) + table.shapes[sel]
    gid, first = group(keys)
    k = first.size

    def total(values: np.ndarray) -> list[float]:
        return np.bincount(gid, weights=values[sel], minlength=k).tolist()

    # An asynchronous range (off the tree: gloo's collectives, which end on another
    # thread) has nothing under it: its self time is its duration (torch says 0).
    self_cpu = figures.self_cpu
    off_tree = np.zeros(table.n, dtype=bool)
    off_tree[sel[is_range]] = table.tid[sel[is_range]] < 0
    if off_tree.any():
        self_cpu = self_cpu.copy()
        self_cpu[off_tree] = figures.cpu_total[off_tree]
    count = np.bincount(gid, minlength=k).tolist()
    columns: dict[str, list[float]] = {
        "self_cpu_time_total": total(self_cpu),
        "cpu_time_total": total(figures.cpu_total),
        "self_device_time_total": total(figures.self_device),
        "device_time_total": total(figures.device_total),
    }
    if flops:
        columns["flops"] = total(table.flops)
    if memory:
        columns["self_cpu_memory_usage"] = total(figures.self_cpu_memory)
        columns["cpu_memory_usage"] = total(figures.cpu_memory)
        columns["self_device_memory_usage"] = total(figures.self_device_memory)
        columns["device_memory_usage"] = total(figures.device_memory)
    names = table.names
    first_events = sel[first]
    key_names = [names[i] for i in table.name[first_events].tolist()]
    kinds = [RANGE if r else OP for r in is_range[first].tolist()]
    shape_texts = ([names[i] for i in table.shapes[first_events].tolist()] if shapes
                   else [""] * k)
    return [OpRow(key=key_names[g], count=count[g], input_shapes=shape_texts[g], kind=kinds[g],
                  **{name: column[g] for name, column in columns.items()})
            for g in range(k)]


def _marker_rows(table: EventTable, figures: Figures, window: tuple[int, int] | None,
                 name: str | None) -> list[OpRow]:
    """The GPU work iteration markers launched directly: one "no op" row per kind of
    marker (``marker_work``, which the dependency model reads too), counting the pieces
    of work, with their device time."""
    row, keys = figures.shared(marker_work, name)
    idx = np.flatnonzero(row >= 0)
    idx = idx[in_window(table.start[table.launcher[idx]], window)]
    return _work_rows(table, idx, row[idx], keys, NO_OP) if idx.size else []


def _unlaunched_rows(table: EventTable, window: tuple[int, int] | None) -> list[OpRow]:
    """GPU work with no recorded launch: one row per name, in order of first start."""
    work = device_work(table) & (table.launcher == NO_PARENT) & in_window(table.start, window)
    idx = in_start_order(table, work)
    if not idx.size:
        return []
    gid, first = group(table.name[idx])
    names = [table.names[i] for i in table.name[idx[first]].tolist()]
    return _work_rows(table, idx, gid, names, UNLAUNCHED)


def _work_rows(table: EventTable, idx: np.ndarray, gid: np.ndarray, keys: Sequence[str],
               kind: str) -> list[OpRow]:
    """A ``kind`` row per group ``gid`` (named ``keys``) of GPU work ``idx``: device time only."""
    duration = table.end[idx] / 1000.0 - table.start[idx] / 1000.0
    time = np.bincount(gid, weights=duration, minlength=len(keys)).tolist()
    count = np.bincount(gid, minlength=len(keys)).tolist()
    return [OpRow(key=key, count=count[g], self_cpu_time_total=0.0, cpu_time_total=0.0,
                  self_device_time_total=time[g], device_time_total=time[g], kind=kind)
            for g, key in enumerate(keys) if count[g]]


def kernel_rows(table: EventTable, name: str | None = None,
                figures: Figures | None = None) -> list[KernelRow]:
    """GPU work (kernels, memcpy, memset) by name: calls, device time, launching op (the
    marked row, ``[no op] ProfilerStep``, for work an iteration marker launched: the
    run ``name``'s, ``marker_work``, from the load's ``figures`` when given)."""
    work = in_start_order(table, device_work(table))
    if not work.size:
        return []
    gid, first = group(table.name[work])
    k = first.size
    duration = table.end[work] / 1000.0 - table.start[work] / 1000.0
    time = np.bincount(gid, weights=duration, minlength=k)
    count = np.bincount(gid, minlength=k)
    marked, marker_keys = (figures or Figures(table)).shared(marker_work, name)
    labels = table.names + [KIND_MARKS[NO_OP] + key for key in marker_keys]
    launchers: list[Counter[int]] = [Counter() for _ in range(k)]
    launcher = table.launcher[work]
    has = launcher != NO_PARENT
    by = np.where(marked[work[has]] >= 0, len(table.names) + marked[work[has]],
                  table.name[launcher[has]])
    pairs = gid[has] * (len(labels) + 1) + by
    found, at, counts = unique(pairs, return_index=True, return_counts=True)
    for pair, _, c in sorted(zip(found.tolist(), at.tolist(), counts.tolist(),
                                 strict=True), key=lambda x: x[1]):
        launchers[pair // (len(labels) + 1)][pair % (len(labels) + 1)] = c
    names = table.names
    top = [launchers[g].most_common(1)[0] if launchers[g] else (-1, 0) for g in range(k)]
    rows = [KernelRow(key=names[int(table.name[work[first[g]]])], count=int(count[g]),
                      device_time_total=float(time[g]),
                      launched_by=labels[top[g][0]] if top[g][1] else "",
                      launched_by_calls=top[g][1])
            for g in range(k)]
    return sorted(rows, key=lambda r: -r.device_time_total)
