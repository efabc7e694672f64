"""Per-event figures over the event tree, computed once per table as torch computes them.

Torch's ``FunctionEvent`` (``torch/autograd/profiler_util.py``) defines each figure;
here each is one array over every event, built with numpy in torch's own order so the
float sums come out bit for bit as torch's:

- CPU time total: ``end_us - start_us`` (µs as floats, from ns / 1000)
- self CPU time: total minus the direct children's totals (0 for async events)
- device time total: the GPU work attributed to the event (``launcher``) plus its
  children's device totals; self device time: total minus the children's totals
- memory (``[memory]`` records, bytes): the records of every thread whose time falls
  inside the event (inclusive), CPU and device apart; self: minus the children's
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

import numpy as np

from kernelmagic.core.arrays import concat_ranges
from kernelmagic.core.events import NO_PARENT, EventTable, Kind

_T = TypeVar("_T")


def nearest_ancestor(parent: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """For each event, its innermost strict ancestor where ``mask`` is true (else -1).

    Pointer doubling: log(depth) rounds of array indexing, no Python loop per event.
    """
    ptr = parent.astype(np.int64)
    done = (ptr < 0) | mask[np.maximum(ptr, 0)]
    todo = np.flatnonzero(~done)
    while todo.size:
        ptr[todo] = ptr[ptr[todo]]
        p = ptr[todo]
        finished = (p < 0) | mask[np.maximum(p, 0)]
        todo = todo[~finished]
    return ptr


def depth_of(parent: np.ndarray) -> np.ndarray:
    """Number of ancestors of each event: levels from the roots down."""
    depth = np.zeros(parent.shape[0], dtype=np.int64)
    level = np.flatnonzero(parent < 0)
    children_of = _children_index(parent)
    d = 0
    while level.size:
        depth[level] = d
        level = children_of(level)
        d += 1
    return depth


def _children_index(parent: np.ndarray):  # type: ignore[no-untyped-def]
    has = np.flatnonzero(parent >= 0)
    by_parent = has[np.argsort(parent[has], kind="stable")]
    sorted_parents = parent[by_parent]

    def children_of(nodes: np.ndarray) -> np.ndarray:
        lo = np.searchsorted(sorted_parents, nodes, side="left")
        hi = np.searchsorted(sorted_parents, nodes, side="right")
        counts = hi - lo
        if not counts.sum():
            return np.empty(0, dtype=np.int64)
        return by_parent[concat_ranges(lo, counts)]

    return children_of


@dataclass(eq=False)
class Figures:
    """Per-event figures of one table (arrays of length ``table.n``, µs and bytes), and
    what several views derive from the table alike, made once (``shared``)."""

    table: EventTable
    _shared: dict[tuple[Any, ...], Any] = field(default_factory=dict, init=False,
                                                repr=False, compare=False)

    def shared(self, derive: Callable[..., _T], *args: Any) -> _T:
        """``derive(table, *args)``, computed on the first call with these ``args`` only
        (hashable, and passed alike by every caller: positionally, defaults included);
        its arrays are made read-only (every view that asks reads the same ones)."""
        key = (derive, *args)
        if key not in self._shared:
            value = derive(self.table, *args)
            for part in value if isinstance(value, tuple) else (value,):
                if isinstance(part, np.ndarray):
                    part.flags.writeable = False
            self._shared[key] = value
        return self._shared[key]  # type: ignore[no-any-return]

    @cached_property
    def order(self) -> np.ndarray:
        """Torch's list order: by start, then longest first, ties in table order."""
        t = self.table
        return np.lexsort((-t.end, t.start))

    @cached_property
    def in_tree(self) -> np.ndarray:
        t = self.table
        return (t.device < 0) & (t.kind != Kind.MEMORY) & (t.tid >= 0)

    @cached_property
    def depth(self) -> np.ndarray:
        """Each event's number of ancestors (``depth_of``)."""
        return depth_of(self.table.parent)

    @cached_property
    def cpu_total(self) -> np.ndarray:
        t = self.table
        total = t.end / 1000.0 - t.start / 1000.0
        total[t.device >= 0] = 0.0
        return total

    def _children_sum(self, values: np.ndarray) -> np.ndarray:
        """Sum of the direct children's ``values`` per event, added in torch's order."""
        order = self.order
        parent = self.table.parent[order]
        has = parent >= 0
        return np.bincount(parent[has], weights=values[order][has], minlength=self.table.n)

    @cached_property
    def self_cpu(self) -> np.ndarray:
        out = self.cpu_total - self._children_sum(self.cpu_total)
        out[~self.in_tree] = 0.0
        return out

    @cached_property
    def own_device(self) -> np.ndarray:
        """Device µs of the GPU work attributed to each event (torch's ``kernels``)."""
        t = self.table
        gpu = np.flatnonzero((t.device >= 0) & (t.launcher != NO_PARENT))
        duration = t.end[gpu] / 1000.0 - t.start[gpu] / 1000.0
        return np.bincount(t.launcher[gpu], weights=duration, minlength=t.n)

    @cached_property
    def range_device(self) -> np.ndarray:
        """``device_total`` less the GPU-side copy of each range (not GPU work), never
        below 0: a range's device time."""
        t = self.table
        gpu = np.flatnonzero((t.kind == Kind.GPU_RANGE) & (t.launcher != NO_PARENT))
        duration = t.end[gpu] / 1000.0 - t.start[gpu] / 1000.0
        copies = np.bincount(t.launcher[gpu], weights=duration, minlength=t.n)
        return np.maximum(0.0, self.device_total - copies)

    @cached_property
    def device_total(self) -> np.ndarray:
        """Own GPU work plus the children's device totals, children first (by depth)."""
        t = self.table
        own = self.own_device
        total = own.copy()
        if not own.any():
            return total
        total[~self.in_tree] = 0.0
        depth = self.depth
        order = self.order
        d_sorted = depth[order]
        parent_sorted = t.parent[order]
        kids = np.zeros(t.n)
        for d in range(int(depth.max()), 0, -1):
            level = d_sorted == d
            idx = order[level]
            total[idx] = own[idx] + kids[idx]
            kids += np.bincount(parent_sorted[level], weights=total[idx], minlength=t.n)
        roots = order[d_sorted == 0]
        total[roots] = own[roots] + kids[roots]
        total[~self.in_tree] = 0.0
        self._device_kids = kids
        return total

    @cached_property
    def self_device(self) -> np.ndarray:
        """Device total minus the children's (torch's sums); an event off the tree (an
        async one) keeps the work it launched itself, so no work is lost."""
        total = self.device_total
        if not total.any():
            return self.own_device.copy()
        out = total - self._device_kids
        out[~self.in_tree] = self.own_device[~self.in_tree]
        return out

    def _memory_total(self, on_device: bool) -> np.ndarray:
        t = self.table
        out = np.zeros(t.n, dtype=np.int64)
        records = memory_running(t, on_device)
        if records is None:
            return out
        when, running = records
        cpu = np.flatnonzero((t.device < 0) & (t.kind != Kind.MEMORY))
        lo = np.searchsorted(when, t.start[cpu], side="left")
        hi = np.searchsorted(when, t.end[cpu], side="right")
        out[cpu] = running[hi] - running[lo]
        return out

    def _self_memory(self, total: np.ndarray) -> np.ndarray:
        out = total - self._children_sum(total).astype(np.int64)
        out[~self.in_tree] = 0
        return out

    @cached_property
    def cpu_memory(self) -> np.ndarray:
        return self._memory_total(on_device=False)

    @cached_property
    def device_memory(self) -> np.ndarray:
        return self._memory_total(on_device=True)

    @cached_property
    def self_cpu_memory(self) -> np.ndarray:
        return self._self_memory(self.cpu_memory)

    @cached_property
    def self_device_memory(self) -> np.ndarray:
        return self._self_memory(self.device_memory)


def in_start_order(table: EventTable, mask: np.ndarray) -> np.ndarray:
    """The events ``mask`` selects, in order of start (ties: in table order)."""
    idx = np.flatnonzero(mask)
    return idx[np.argsort(table.start[idx], kind="stable")]


def memory_running(table: EventTable, on_device: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """The memory records (on the GPU, or the CPU) in time order: their times, and the
    bytes allocated since the table began before each (``running[k]``: the first ``k``
    records' sum; one entry more than the times); None when the table holds none."""
    mem = (table.kind == Kind.MEMORY) & ((table.device >= 0) if on_device else
                                         (table.device < 0))
    if not mem.any():
        return None
    when = table.start[mem]
    by_time = np.argsort(when, kind="stable")
    return when[by_time], np.concatenate(([0], np.cumsum(table.nbytes[mem][by_time])))
