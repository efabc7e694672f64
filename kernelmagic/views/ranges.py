"""The user's own ``record_function`` ranges and the ``--modules`` ranges."""

from __future__ import annotations

from collections import Counter

import numpy as np

from kernelmagic.core.arrays import unique
from kernelmagic.core.events import EventTable, Kind
from kernelmagic.core.range_names import MODULE_RANGE, is_ours
from kernelmagic.core.rows import ModuleRow, RangeRow
from kernelmagic.views.breakdown import name_mask, name_matches
from kernelmagic.views.ops import group, is_op
from kernelmagic.views.tree import Figures, nearest_ancestor

__all__ = ["module_rows", "user_ranges"]


def user_ranges(table: EventTable, figures: Figures, name: str, on_device: bool = False,
                top: int = 5) -> list[RangeRow]:
    """Each ``record_function`` range the user opened: its time and the top ops inside.

    The top ops are ranked by self time on the profiled device (CPU without CUDA).
    """
    theirs = (table.kind == Kind.RANGE) & name_mask(table, lambda x: not is_ours(x, name))
    if not theirs.any():
        return []
    idx = np.flatnonzero(theirs)
    idx = idx[np.argsort(table.start[idx], kind="stable")]
    gid, first = group(table.name[idx])
    k = first.size
    count = np.bincount(gid, minlength=k)
    cpu = np.bincount(gid, weights=figures.cpu_total[idx], minlength=k)
    dev = np.bincount(gid, weights=figures.range_device[idx], minlength=k)
    owner = nearest_ancestor(table.parent, theirs)
    ops = np.flatnonzero(is_op(table) & (owner >= 0))
    own_self = figures.self_device if on_device else figures.self_cpu
    ops = ops[np.argsort(table.start[ops], kind="stable")]
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
        tops = inside.get(key, Counter()).most_common(top)
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
    idx = np.flatnonzero(module)
    idx = idx[np.argsort(table.start[idx], kind="stable")]
    enclosing = nearest_ancestor(table.parent, module)
    # Depth among module ranges: parents come first in start order.
    depth_of: dict[int, int] = {}
    for i, up in zip(idx.tolist(), enclosing[idx].tolist(), strict=True):
        depth_of[i] = depth_of[up] + 1 if up >= 0 else 0
    cpu = figures.cpu_total
    dev = figures.range_device
    path_of = {i: matches[i][1] for i in unique(table.name[idx]).tolist()}
    type_of = {i: matches[i][2] for i in path_of}
    total_cpu: dict[str, float] = {}
    total_dev: dict[str, float] = {}
    child_cpu: Counter[str] = Counter()
    child_dev: Counter[str] = Counter()
    count: Counter[str] = Counter()
    types: dict[str, str] = {}
    depth: dict[str, int] = {}
    for i, name_id, up in zip(idx.tolist(), table.name[idx].tolist(), enclosing[idx].tolist(),
                              strict=True):
        path = path_of[name_id]
        types[path] = type_of[name_id]
        count[path] += 1
        c, d = float(cpu[i]), float(dev[i])
        total_cpu[path] = total_cpu.get(path, 0.0) + c
        total_dev[path] = total_dev.get(path, 0.0) + d
        depth[path] = depth_of[i]
        if up >= 0:
            outer = path_of[int(table.name[up])]
            child_cpu[outer] += c
            child_dev[outer] += d
    return [
        ModuleRow(key=path, module_type=types[path], depth=depth[path], count=count[path],
                  cpu_time_total=total_cpu[path],
                  self_cpu_time_total=total_cpu[path] - child_cpu[path],
                  device_time_total=total_dev[path],
                  self_device_time_total=total_dev[path] - child_dev[path])
        for path in count  # first-seen order: a parent starts before its children
    ]
