"""One iteration's timeline, memory peaks and GPU busy time (``iterations.py`` finds the
iterations)."""

from __future__ import annotations

import numpy as np

from kernelmagic.core.events import EventTable, Window, device_work
from kernelmagic.core.rows import Span
from kernelmagic.views.ops import is_op
from kernelmagic.views.tree import memory_running, nearest_ancestor

#: Past this many spans, an iteration's timeline keeps those longer than 1/``RESOLUTION``
#: of it (under a pixel of the picture otherwise), then the longest ``MAX_SPANS``.
MAX_SPANS = 20_000
RESOLUTION = 4000


def _visible(table: EventTable, events: np.ndarray, window: Window) -> np.ndarray:
    """``events`` at least a pixel long (``MAX_SPANS``), clipped to ``window``."""
    start, end = window
    length = np.minimum(table.end[events], end) - np.maximum(table.start[events], start)
    kept = events[length * RESOLUTION >= end - start]
    if kept.size > MAX_SPANS:
        length = np.minimum(table.end[kept], end) - np.maximum(table.start[kept], start)
        kept = np.sort(kept[np.argsort(-length, kind="stable")[:MAX_SPANS]])
    return kept


def timeline(table: EventTable, window: Window) -> list[Span]:
    """Top-level ops of one iteration on the CPU lane, and its GPU work per stream (the
    part of it inside the iteration); of an iteration of more than ``MAX_SPANS`` of them,
    those at least a pixel long (``_visible``)."""
    start, end = window
    op = is_op(table)
    top = nearest_ancestor(table.parent, op) < 0
    cpu = np.flatnonzero(op & top & (table.start >= start) & (table.end <= end))
    gpu = np.flatnonzero(device_work(table))
    gpu = gpu[(table.end[gpu] > start) & (table.start[gpu] < end)]
    if cpu.size + gpu.size > MAX_SPANS:  # a long window (a trace with no steps): a picture
        cpu, gpu = _visible(table, cpu, window), _visible(table, gpu, window)
    names = table.names
    spans = [Span(key=names[k], lane="CPU", start=(s - start) / 1000.0, end=(e - start) / 1000.0)
             for k, s, e in zip(table.name[cpu].tolist(), table.start[cpu].tolist(),
                                table.end[cpu].tolist(), strict=True)]
    # GPU work is clipped to the iteration, as GPU busy time is (views/breakdown.py).
    spans += [Span(key=names[k], lane=f"stream {t}", start=(max(s, start) - start) / 1000.0,
                   end=(min(e, end) - start) / 1000.0)
              for k, t, s, e in zip(table.name[gpu].tolist(), table.tid[gpu].tolist(),
                                    table.start[gpu].tolist(), table.end[gpu].tolist(),
                                    strict=True)]
    return sorted(spans, key=lambda sp: (sp.lane != "CPU", sp.lane, sp.start))


def peak_iterations(windows: list[Window], on_device: bool = False) -> list[Window]:
    """The iterations whose memory rise can be trusted: on a GPU all of them; on the CPU
    all but the first when there are several. torch's CPU allocator reports a free only
    for blocks allocated while profiling (it prints "Memory block of unknown size was
    allocated before the profiling started" instead), so what the first profiled
    iteration frees of the warm-up's tensors (gradients set to None, a replaced output)
    is never subtracted and its rise reads high by that much."""
    return list(windows) if on_device or len(windows) < 2 else list(windows[1:])


def peak_memory(table: EventTable, windows: list[Window], on_device: bool = False) -> float:
    """Largest rise of allocated CPU (or device) memory within any iteration (bytes).

    The running sum of every allocation and free inside the iteration's window
    (inclusive), from the raw memory records; the peak is its largest value. On the CPU
    the first of several iterations is left out (``peak_iterations``): its frees of
    blocks made before profiling are not recorded, so its rise reads too high.
    """
    records = memory_running(table, on_device)
    if records is None:
        return 0.0
    when, running = records
    peak = 0
    for start, end in peak_iterations(windows, on_device):
        lo, hi = np.searchsorted(when, start, "left"), np.searchsorted(when, end, "right")
        if hi > lo:  # the running sum's highest point in the window, from its level before
            peak = max(peak, int(running[lo + 1:hi + 1].max() - running[lo]))
    return float(peak)
