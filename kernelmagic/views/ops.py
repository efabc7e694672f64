"""Operator rows (torch's ``key_averages()``, field by field) and GPU kernel rows."""

from __future__ import annotations

from collections import Counter

import numpy as np

from kernelmagic.events import DEVICE_WORK, NO_PARENT, EventTable, Kind
from kernelmagic.rows import KernelRow, OpRow
from kernelmagic.views.tree import Figures

#: The range around kernelmagic's own ``torch.cuda.synchronize()`` in each iteration; the
#: ``cudaDeviceSynchronize`` under it is ours, not the user's, and is left out of the rows.
SYNC_RANGE = "kernelmagic: synchronize"


def is_op(table: EventTable) -> np.ndarray:
    """Operators and runtime calls on the CPU: the events that make report rows.

    Not ranges (ours, the user's, modules, ``ProfilerStep#N``), Python frames,
    ``[memory]`` records or GPU work.
    """
    kind = table.kind
    return (table.device < 0) & ((kind == Kind.OP) | (kind == Kind.RUNTIME))


def _under_our_sync(table: EventTable) -> np.ndarray:
    sync = table.names.index(SYNC_RANGE) if SYNC_RANGE in table.names else -1
    if sync < 0:
        return np.zeros(table.n, dtype=bool)
    parent = table.parent
    has = parent >= 0
    out = np.zeros(table.n, dtype=bool)
    up = parent[has]
    out[has] = (table.name[up] == sync) & (table.kind[up] == Kind.RANGE)
    return out


def group(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group ids (0..k-1, numbered by first occurrence) and each group's first position."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse], np.sort(first)


def outer_window(table: EventTable, name: str) -> tuple[int, int] | None:
    """(start, end) of the run's outermost range ``name`` (kernelmagic's own), if any."""
    if name not in table.names:
        return None
    found = np.flatnonzero((table.name == table.names.index(name)) & (table.kind == Kind.RANGE))
    if not found.size:
        return None
    return int(table.start[found].min()), int(table.end[found].max())


def op_rows(table: EventTable, figures: Figures, *, shapes: bool = False,
            memory: bool = False, flops: bool = False,
            window: tuple[int, int] | None = None) -> list[OpRow]:
    """One row per operator name (and input shapes with ``shapes``), in torch's order.

    Sums run over the events in torch's list order, so every figure equals
    ``key_averages()``'s bit for bit. Left out: the events under kernelmagic's own
    synchronize range and, given the run's ``window`` (``outer_window``), events that
    start outside it (the profiler's own start and stop, e.g. its closing synchronize).
    """
    order = figures.order
    wanted = is_op(table) & ~_under_our_sync(table)
    if window is not None:
        wanted &= (table.start >= window[0]) & (table.start <= window[1])
    sel = order[wanted[order]]
    if not sel.size:
        return []
    keys = table.name[sel].astype(np.int64)
    if shapes:
        keys = keys * (int(table.shapes.max()) + 1) + table.shapes[sel]
    gid, first = group(keys)
    k = first.size

    def total(values: np.ndarray) -> list[float]:
        return np.bincount(gid, weights=values[sel], minlength=k).tolist()

    count = np.bincount(gid, minlength=k).tolist()
    columns: dict[str, list[float]] = {
        "self_cpu_time_total": total(figures.self_cpu),
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
    shape_texts = ([names[i] for i in table.shapes[first_events].tolist()] if shapes
                   else [""] * k)
    fields = list(columns)
    values = list(zip(*columns.values(), strict=True))
    return [OpRow(key=key_names[g], count=count[g], input_shapes=shape_texts[g],
                  **dict(zip(fields, values[g], strict=True)))
            for g in range(k)]


def kernel_rows(table: EventTable) -> list[KernelRow]:
    """GPU work (kernels, memcpy, memset) by name: calls, device time, launching op."""
    work = np.flatnonzero(np.isin(table.kind, np.asarray(DEVICE_WORK, dtype=np.int8)))
    if not work.size:
        return []
    work = work[np.argsort(table.start[work], kind="stable")]
    gid, first = group(table.name[work])
    k = first.size
    duration = table.end[work] / 1000.0 - table.start[work] / 1000.0
    time = np.bincount(gid, weights=duration, minlength=k)
    count = np.bincount(gid, minlength=k)
    launchers: list[Counter[int]] = [Counter() for _ in range(k)]
    launcher = table.launcher[work]
    has = launcher != NO_PARENT
    pairs = gid[has] * (len(table.names) + 1) + table.name[launcher[has]]
    found, at, counts = np.unique(pairs, return_index=True, return_counts=True)
    for pair, _, c in sorted(zip(found.tolist(), at.tolist(), counts.tolist(),
                                 strict=True), key=lambda x: x[1]):
        launchers[pair // (len(table.names) + 1)][pair % (len(table.names) + 1)] = c
    names = table.names
    rows = [KernelRow(key=names[int(table.name[work[first[g]]])], count=int(count[g]),
                      device_time_total=float(time[g]),
                      launched_by=(names[launchers[g].most_common(1)[0][0]]
                                   if launchers[g] else ""))
            for g in range(k)]
    return sorted(rows, key=lambda r: -r.device_time_total)
