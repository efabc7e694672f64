"""The user's own ``record_function`` ranges and the ``--modules`` ranges."""

from __future__ import annotations

from collections import Counter

import numpy as np

from kernelmagic.core.events import EventTable, Kind
from kernelmagic.core.range_names import MODULE_RANGE, is_ours
from kernelmagic.core.rows import ModuleRow, RangeRow
from kernelmagic.views.breakdown import name_mask, name_matches
from kernelmagic.views.ops import group, is_op
from kernelmagic.views.tree import Figures, in_start_order, nearest_ancestor

__all__ = ["module_rows", "user_ranges"]


def user_ranges(table: EventTable, figures: Figures, name: str, on_device: bool = False,
                top: int = 5) -> list[RangeRow]:
    """Each ``record_function`` range the user opened: its time and the top ops inside.

    The top ops are ranked by self time on the profiled device (CPU without CUDA); ops
    of none there are not listed (``cudaEventRecord 0 µs`` says nothing of the range).
    """
    theirs = name_mask(table, lambda x: not is_ours(x, name), among=table.kind == Kind.RANGE)
    if not theirs.any():
        return []
    idx = in_start_order(table, theirs)
    gid, first = group(table.name[idx])
    k = first.size
    count = np.bincount(gid, minlength=k)
    cpu = np.bincount(gid, weights=figures.cpu_total[idx], minlength=k)
    dev = np.bincount(gid, weights=figures.range_device[idx], minlength=k)
    owner = nearest_ancestor(table.parent, theirs)
    ops = in_start_order(table, is_op(table) & (owner >= 0))
    own_self = figures.self_device if on_device else figures.self_cpu
    width = len(table.names)
    pairs = table.name[owner[ops]].astype(np.int64) * width + table.name[ops]
    pair_id, pair_first = group(pairs)
    sums = np.bincount(pair_id, weights=own_self[ops], minlength=pair_first.size)
    inside: dict[int, Counter[int]] = {}
    for pair, value in zip(pairs[pair_first].tolist(), sums.tolist(), strict=True):
        inside.setdefault(pair // width, Counter())[pair % width] = value
    names = table.names
    rows = []
    for g in range(k):
        key = int(table.name[idx[first[g]]])
        tops = [(o, t) for o, t in inside.get(key, Counter()).most_common(top) if t > 0]
        rows.append(RangeRow(key=names[key], count=int(count[g]), cpu_time_total=float(cpu[g]),
                             device_time_total=float(dev[g]),
                             top_ops=[(names[o], float(t)) for o, t in tops]))
    return sorted(rows, key=lambda r: (-r.cpu_time_total, r.key))


def module_rows(table: EventTable, figures: Figures) -> list[ModuleRow]:
    """Time per module path from the ``module: <path> (<Type>)`` ranges, nested."""
    is_module_name, matches = name_matches(table, MODULE_RANGE)
    module = (table.kind == Kind.RANGE) & is_module_name[table.name]
    if not module.any():
        return []
    idx = in_start_order(table, module)
    enclosing = nearest_ancestor(table.parent, module)
    # Depth among module ranges: parents come first in start order.
    depth_of: dict[int, int] = {}
    for i, up in zip(idx.tolist(), enclosing[idx].tolist(), strict=True):
        depth_of[i] = depth_of[up] + 1 if up >= 0 else 0
    names = table.name[idx].tolist()
    paths = [matches[n][1] for n in names]
    order = list(dict.fromkeys(paths))  # first-seen order: a parent starts before its children
    path_id = {path: k for k, path in enumerate(order)}
    of_event = np.full(table.n, -1, dtype=np.int64)
    of_event[idx] = [path_id[path] for path in paths]
    up = enclosing[idx]
    inner = up >= 0  # the calls made inside another module

    def per_path(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``values`` of the calls summed per path, and per the path of the module around
        each call (its caller's child time)."""
        return (np.bincount(of_event[idx], weights=values[idx], minlength=len(order)),
                np.bincount(of_event[up[inner]], weights=values[idx][inner],
                            minlength=len(order)))

    (cpu, child_cpu), (dev, child_dev) = per_path(figures.cpu_total), per_path(figures.range_device)
    count = np.bincount(of_event[idx], minlength=len(order))
    last = {path: (matches[n][2], depth_of[i])  # the type and depth of each path's last call
            for path, n, i in zip(paths, names, idx.tolist(), strict=True)}
    return [ModuleRow(key=path, module_type=last[path][0], depth=last[path][1],
                      count=int(count[k]), cpu_time_total=float(cpu[k]),
                      self_cpu_time_total=float(cpu[k] - child_cpu[k]),
                      device_time_total=float(dev[k]),
                      self_device_time_total=float(dev[k] - child_dev[k]))
            for k, path in enumerate(order)]
