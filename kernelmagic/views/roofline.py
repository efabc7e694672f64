"""The roofline view (``--roofline``): is each op bound by compute, memory or overhead?

The counts come from one extra, unprofiled run of the cell (``op_counter.count_ops``,
run after the profiled iterations). ``collect_roofline`` joins them to the profiled
run's ``EventTable`` (its event tree, ``parent``, and the op rows' self times):

- An op event whose name the counting run counted, and that no counted op encloses, owns
  its FLOPs and bytes, and its time is its own self time **plus the self time of the
  ops it calls internally** (``aten::addmm``'s internal ``aten::copy_``,
  ``aten::convolution``'s ``aten::mkldnn_convolution``): the counts describe all of that
  work. (Fused ops that call matmuls are opened instead: see ``ops_to_open``.)
- Every other op event (a composite wrapper such as ``aten::linear``, an op only ever
  called from inside another op) keeps its own self time under its own name, with 0
  FLOPs and bytes: its time is dispatch overhead.

Times are self device time on CUDA, self CPU time otherwise. ``classify`` then places
each op against the device's roofs (found by ``kernelmagic/live/device_peaks.py``). The
records, the bounds, their thresholds and the verdict are
``kernelmagic/core/roofline_bounds.py``'s. Like every view, this module is a pure function
of the table and never imports torch: what needs torch (counting, the roofs, which ops
have a FLOP formula) is asked by ``live/runner.py: roofline_view`` and passed in.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

import numpy as np

from kernelmagic.core.arrays import unique
from kernelmagic.core.events import EventTable
from kernelmagic.core.range_names import SYNC_RANGE
from kernelmagic.core.roofline_bounds import OpCount, Peaks, classify, unexplained_kind
from kernelmagic.core.rows import RooflineRow
from kernelmagic.views.breakdown import name_mask
from kernelmagic.views.ops import in_window, is_op, outer_window, ranges_named
from kernelmagic.views.tree import Figures, nearest_ancestor


def attribute_times(table: EventTable, counted: set[str], on_device: bool,
                    window: tuple[int, int] | None = None
                    ) -> tuple[dict[str, float], dict[str, int]]:
    """Per owner name: time (µs) and calls, by the rule in the module docstring.

    The event tree (``table.parent``) read top-down: a counted op that no counted op
    encloses takes its inclusive time (the self times of itself and everything below
    it); any other op takes its own self time. Self times are the op rows' own
    (``Figures.self_device`` on CUDA, ``Figures.self_cpu`` otherwise). kernelmagic's
    own synchronize range and everything under it count nowhere; given the run's
    ``window`` (``views.ops.outer_window``), only ops starting inside it are ops, as in
    the op rows.
    """
    figures = Figures(table)
    own = figures.self_device if on_device else figures.self_cpu
    parent = table.parent
    sync_range = ranges_named(table, SYNC_RANGE)
    skipped = sync_range | (nearest_ancestor(parent, sync_range) >= 0)
    op = is_op(table) & ~skipped & in_window(table.start, window)
    is_counted = name_mask(table, lambda x: x in counted, among=op)
    # The outermost counted op above each event (-1: none): it owns the event's time.
    inner = nearest_ancestor(parent, is_counted)
    owner = inner.copy()
    while True:
        has = np.flatnonzero(owner >= 0)
        up = inner[owner[has]]
        outer = up >= 0
        if not outer.any():
            break
        owner[has[outer]] = up[outer]
    visited = op & (owner < 0)  # the ops the walk reaches: each is a call of its name
    owner[visited] = np.flatnonzero(visited)
    takes = np.flatnonzero((owner >= 0) & ~skipped)
    width = len(table.names)
    time = np.bincount(table.name[owner[takes]], weights=own[takes], minlength=width)
    calls = np.bincount(table.name[visited], minlength=width)
    names = table.names
    found = np.flatnonzero(calls).tolist()
    return ({names[i]: float(time[i]) for i in found},
            {names[i]: int(calls[i]) for i in found})


def build_rows(times: dict[str, float], calls: dict[str, int], counts: dict[str, OpCount],
               peaks: Peaks) -> tuple[list[RooflineRow], Peaks]:
    """One ``RooflineRow`` per op with time, most time first, and the roofs they used.

    A roof is a ceiling: when an op went faster than a measured peak (a noisy
    measurement), that roof is raised to the op's rate before classifying.
    """
    rates = []
    for key, spent in times.items():
        if spent <= 0:
            continue
        count = calls.get(key, 0)
        seen = counts.get(key)
        flops = seen.flops / seen.calls if seen and seen.calls else 0.0
        moved = seen.bytes / seen.calls if seen and seen.calls else 0.0
        seconds = spent / 1e6
        rates.append((key, count, flops, moved, seen, spent,
                      flops * count / seconds, moved * count / seconds))
    peaks = raise_roofs(peaks, [(seen.dtype if seen else "", f, b)
                                for *_, seen, _, f, b in rates])
    rows = []
    for key, count, flops, moved, seen, spent, flops_per_s, bytes_per_s in rates:
        dtype = seen.dtype if seen else ""
        bound, reached = classify(flops_per_s, bytes_per_s, dtype, peaks)
        if bound == "memory" and unexplained_kind(key, flops, reached):
            bound = "unexplained"
        rows.append(RooflineRow(
            key=key, count=count, flops=flops, bytes=moved,
            intensity=flops / moved if moved > 0 else 0.0,
            flops_per_s=flops_per_s, bytes_per_s=bytes_per_s, bound=bound,
            time=spent, dtype=dtype, roof_share=reached,
            counted=seen is not None and not seen.opened))
    return sorted(rows, key=lambda r: (-r.time, r.key)), peaks


def raise_roofs(peaks: Peaks, rates: list[tuple[str, float, float]]) -> Peaks:
    """``peaks`` with each roof at least the best (dtype, FLOP/s, bytes/s) achieved."""
    flops = dict(peaks.flops_per_s)
    bandwidth = peaks.bytes_per_s
    raised = []
    for dtype, flops_per_s, bytes_per_s in rates:
        roof = dtype if dtype in flops else "float32"
        if flops_per_s > flops.get(roof, 0.0):
            flops[roof] = flops_per_s
            raised.append(roof)
        if bytes_per_s > bandwidth:
            bandwidth = bytes_per_s
            raised.append("memory")
    if not raised:
        return peaks
    note = (f"{', '.join(sorted(set(raised)))} roof raised to the fastest op's rate "
            "(the peak measurement saw less)")
    return replace(peaks, flops_per_s=flops, bytes_per_s=bandwidth,
                   note="; ".join(n for n in (peaks.note, note) if n))


def ops_to_open(table: EventTable, formula_ops: Collection[str]) -> frozenset[str]:
    """Ops without a FLOP formula that the profile shows calling ops that have one.

    ``formula_ops``: the names of the ops torch has a FLOP formula for
    (``torch_compat.flop_formula_names()``). The counting run opens the ops found
    (``live/op_counter.py``): a fused kernel's matmuls count where their time is, not as
    0 FLOPs of the fused op. Read from the table's event tree: the ops above each formula
    op, up to the first enclosing formula op.
    """
    formula = name_mask(table, lambda x: x in formula_ops)
    op = is_op(table)
    found: set[int] = set()
    node = table.parent[np.flatnonzero(op & formula)]
    while node.size:
        # e.g. convolution -> _convolution: the outer one has the formula, stop there
        node = unique(node[node >= 0])
        node = node[~formula[node]]
        found.update(table.name[node[op[node]]].tolist())
        node = table.parent[node]
    return frozenset(table.names[i] for i in found)


def collect_roofline(table: EventTable, counts: dict[str, OpCount], peaks: Peaks,
                     on_device: bool, name: str | None = None) -> tuple[list[RooflineRow], Peaks]:
    """The roofline rows of a profiled run's table and the roofs they were placed under.

    ``name``: the run's name; only ops inside its outer range count (as in the op rows).
    """
    counted = {k for k, c in counts.items() if (c.flops > 0 or c.bytes > 0) and not c.opened}
    window = outer_window(table, name) if name is not None else None
    times, calls = attribute_times(table, counted, on_device, window=window)
    return build_rows(times, calls, counts, peaks)
