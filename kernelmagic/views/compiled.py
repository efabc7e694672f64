"""The compiled view (``torch.compile``): compiled regions, the gaps graph breaks leave
between compiled graphs, and the kernels inductor generated, from the event table alone.

Dynamo names each call of compiled code ``Torch-Compiled Region: <compile id>`` and
inductor each run of a compiled graph ``## Call CompiledFxGraph <key> ##``. A frame that
broke its graph runs its first graph, then the code dynamo could not compile (eagerly),
then the resume function's region with the next graph, nested in the first region: the
**gap** between two graphs of one outermost call is what the graph break costs.
Dynamo's reasons, lines and compile times are not in the events: the runner adds them
(``kernelmagic/live/compile_watch.py``).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernelmagic.core.arrays import unique
from kernelmagic.core.compiled_rows import (
    CompiledRegionRow,
    CompileRow,
    FusedKernelRow,
    GraphBreakRow,
)
from kernelmagic.core.events import EventTable, Kind, Window, device_work
from kernelmagic.core.units import format_fixed
from kernelmagic.views.breakdown import Intervals, name_mask, name_matches
from kernelmagic.views.ops import group, is_op
from kernelmagic.views.tree import Figures, in_start_order, nearest_ancestor

__all__ = ["BACKWARD", "DYNAMO_OVERHEAD", "GRAPH_CALL", "KERNEL", "REGION", "CompiledView",
           "compiled_view", "id_order"]

#: A compiled region's range name; group 1 is its compile id (``0/1``: frame 0, second
#: compile; ``!0/1/0`` under compiled autograd).
REGION = re.compile(r"^Torch-Compiled Region: (\S+)$")
#: A compiled graph's run; group 1 is inductor's FX graph cache key.
GRAPH_CALL = re.compile(r"^## Call CompiledFxGraph (\S+) ##$")
#: A kernel inductor generated: Triton on GPUs, C++ (``graph_<n>_`` prefixed by its
#: profiling record) on CPUs; group 1 is the graph's number, group 2 the kernel's name.
KERNEL = re.compile(r"^(?:graph_(\d+)_)?((?:triton|cpp)_\w+)$")
#: The row of compiled graphs run outside any region: autograd runs a compiled function's
#: backward graphs (``CompiledFunctionBackward``) after dynamo's region has ended.
BACKWARD = "backward"
#: The autograd node that runs a compiled backward graph (its wrappers around the graph).
BACKWARD_NODE = "CompiledFunctionBackward"
#: Eager ops named per gap.
GAP_OPS = 4
#: Dynamo's own work around a compiled graph (guards, wrappers): one entry of a gap's ops.
DYNAMO_OVERHEAD = frozenset({"TorchDynamo Cache Lookup", "Pregraph bytecode",
                             "AOTDispatcher Runtime Wrapper Prologue",
                             "AOTDispatcher Runtime Wrapper Epilogue"})


@dataclass(frozen=True)
class CompiledView:
    """What the events say about compiled code: regions, graph-break gaps, fused kernels;
    and dynamo's compiles (``live/compile_watch.py`` adds them to a live run's record)."""

    regions: list[CompiledRegionRow] = field(default_factory=list)
    breaks: list[GraphBreakRow] = field(default_factory=list)
    kernels: list[FusedKernelRow] = field(default_factory=list)
    compiles: list[CompileRow] = field(default_factory=list)


def _inside(table: EventTable, windows: list[Window]) -> np.ndarray:
    """Events that start inside one of ``windows`` (all events without windows)."""
    if not windows:
        return np.ones(table.n, dtype=bool)
    inside = np.zeros(table.n, dtype=bool)
    for start, end in windows:
        inside |= (table.start >= start) & (table.start < end)
    return inside


def compiled_view(table: EventTable, figures: Figures,
                  windows: list[Window]) -> CompiledView:
    """The compiled regions, graph-break gaps and inductor kernels of the iterations
    ``windows``; an empty ``CompiledView`` when no compiled code ran."""
    is_region_name, region_match = name_matches(table, REGION)
    on_cpu = (table.device < 0) & (table.kind != Kind.PYTHON)
    inside = _inside(table, windows)
    region = on_cpu & is_region_name[table.name]
    if not (region & inside).any():
        return CompiledView()
    is_graph_name, _ = name_matches(table, GRAPH_CALL)
    graph = on_cpu & is_graph_name[table.name] & inside
    owner = nearest_ancestor(table.parent, region)
    regions = _region_rows(table, figures, region & inside, graph, owner, region_match)
    breaks = _gaps(table, figures, graph, owner, region_match, max(len(windows), 1))
    kernels = _kernels(table, figures, inside, owner, region_match)
    return CompiledView(regions=regions, breaks=breaks, kernels=kernels)


def _compile_id(table: EventTable, i: int, found: list[Any]) -> str:
    return str(found[int(table.name[i])][1])


def _region_rows(table: EventTable, figures: Figures, region: np.ndarray, graph: np.ndarray,
                 owner: np.ndarray, found: list[Any]) -> list[CompiledRegionRow]:
    """One row per compile id, and per outermost or nested (a function can be called on
    its own and from another region's code): calls, inclusive time, own graphs' time,
    device time."""
    duration = (table.end - table.start) / 1e3
    in_region = np.flatnonzero(graph & (owner >= 0))
    graph_time = np.bincount(owner[in_region], weights=duration[in_region], minlength=table.n)
    idx = in_start_order(table, region)
    # one row per region name (one compile id each) and outermost or not
    gid, first = group(table.name[idx].astype(np.int64) * 2 + (owner[idx] < 0))
    device = figures.range_device

    def total(values: np.ndarray) -> list[float]:
        return np.bincount(gid, weights=values[idx], minlength=first.size).tolist()

    rows = [CompiledRegionRow(compile_id=_compile_id(table, i, found), count=n,
                              cpu_time_total=cpu, graph_time_total=own,
                              device_time_total=dev, outermost=bool(owner[i] < 0))
            for i, n, cpu, own, dev in zip(idx[first].tolist(),
                                           np.bincount(gid, minlength=first.size).tolist(),
                                           total(figures.cpu_total), total(graph_time),
                                           total(device), strict=True)]
    outside = np.flatnonzero(graph & (owner < 0))  # the backward: compiled, not eager
    if outside.size:
        # Each graph's time in full: its autograd node's (``BACKWARD_NODE`` around it, with
        # the wrappers), else its own.
        backward = name_mask(table, lambda n: n == BACKWARD_NODE)
        node = nearest_ancestor(table.parent, backward)[outside]
        runs = sorted(set(np.where(node >= 0, node, outside).tolist()))
        rows.append(CompiledRegionRow(
            compile_id=BACKWARD, count=len(runs),
            cpu_time_total=float(figures.cpu_total[runs].sum()),
            graph_time_total=float(duration[outside].sum()),
            device_time_total=float(device[runs].sum()), outermost=True,
            function="compiled graphs autograd ran"))
    return sorted(rows, key=id_order)


def id_order(row: CompiledRegionRow | GraphBreakRow
             ) -> tuple[bool, tuple[int, ...], str, bool]:
    """Compile ids in numeric order (``2/0`` before ``10/0``), the backward row last; a
    region's calls on their own before its nested ones."""
    return (row.compile_id == BACKWARD,
            tuple(int(x) for x in re.findall(r"\d+", row.compile_id)), row.compile_id,
            not getattr(row, "outermost", True))


def _gaps(table: EventTable, figures: Figures, graph: np.ndarray, owner: np.ndarray,
          found: list[Any], iters: int) -> list[GraphBreakRow]:
    """The gaps between consecutive graphs of one outermost region's call, per compile id
    of the innermost region around both graphs (the frame that broke: the resume function
    runs nested in it, and so does a compiled function its eager code calls); the ops in
    them per iteration, and how long the GPU (when the table has GPU work) idled in them."""
    calls: dict[int, list[int]] = {}
    for g in np.flatnonzero(graph).tolist():
        top = int(owner[g])
        if top < 0:
            continue
        while owner[top] >= 0:
            top = int(owner[top])
        calls.setdefault(top, []).append(g)
    ops = in_start_order(table, is_op(table))
    op_starts = table.start[ops]
    total: Counter[str] = Counter()
    count: Counter[str] = Counter()
    idle: Counter[str] = Counter()
    in_gap: dict[str, list[np.ndarray]] = {}
    gpu = np.flatnonzero(device_work(table))
    work = Intervals(table, gpu) if gpu.size else None
    for top, graphs in calls.items():
        graphs.sort(key=lambda g: int(table.start[g]))
        for before, after in itertools.pairwise(graphs):
            lo, hi = int(table.end[before]), int(table.start[after])
            if hi <= lo:
                continue
            cid = _compile_id(table, _enclosing(owner, int(owner[before]),
                                                int(owner[after])), found)
            total[cid] += (hi - lo) / 1e3
            count[cid] += 1
            if work is not None:
                idle[cid] += (hi - lo - work.covered((lo, hi))) / 1e3
            first, last = np.searchsorted(op_starts, [lo, hi])
            inside = ops[first:last]
            inside = inside[(table.end[inside] <= hi) & (table.tid[inside] == table.tid[top])]
            in_gap.setdefault(cid, []).append(inside)
    rows = [GraphBreakRow(compile_id=cid, count=count[cid], gap_time_total=total[cid],
                          top_ops=_gap_ops(_by_name(table, figures, in_gap[cid]), iters,
                                           total[cid]),
                          gpu_idle_total=idle[cid])
            for cid in total]
    return sorted(rows, key=id_order)


def _enclosing(owner: np.ndarray, first: int, second: int) -> int:
    """The innermost of the regions ``first``, ``second`` and those around them that holds
    both (``owner`` of a region: the region around it)."""
    around = set()
    at = second
    while at >= 0:
        around.add(at)
        at = int(owner[at])
    at = first
    while at >= 0 and at not in around:
        at = int(owner[at])
    return at if at >= 0 else first


def _by_name(table: EventTable, figures: Figures, parts: list[np.ndarray]) -> Counter[str]:
    """The self CPU time of the events ``parts`` per name."""
    idx = np.concatenate(parts)
    sums = np.bincount(table.name[idx], weights=figures.self_cpu[idx],
                       minlength=len(table.names))
    return Counter({table.names[i]: float(sums[i]) for i in unique(table.name[idx]).tolist()})


def _gap_ops(self_cpu: Counter[str], iters: int, gap: float) -> str:
    """What the gaps (``gap`` µs in all) held, per iteration, adding up to them: the eager
    ops, most self time first (``GAP_OPS`` of them, the others summed), dynamo's own work
    summed, then the time no op recorded (Python, yours and dynamo's):
    ``aten::item 1.2 µs; ...; 3 other ops 0.9 µs; dynamo 9.8 µs; Python 20.1 µs``."""
    dynamo = sum(t for name, t in self_cpu.items() if name in DYNAMO_OVERHEAD)
    eager = Counter({name: t for name, t in self_cpu.items() if name not in DYNAMO_OVERHEAD})
    named = eager.most_common(GAP_OPS)
    parts = [f"{name} {format_fixed(t / iters, 'µs')}" for name, t in named]
    if len(eager) > len(named):
        rest = sum(eager.values()) - sum(t for _, t in named)
        parts.append(f"{len(eager) - len(named)} other ops {format_fixed(rest / iters, 'µs')}")
    if dynamo:
        parts.append(f"dynamo {format_fixed(dynamo / iters, 'µs')}")
    python = gap - sum(self_cpu.values())
    if python > 0:
        parts.append(f"Python {format_fixed(python / iters, 'µs')}")
    return "; ".join(parts)


def _kernels(table: EventTable, figures: Figures, inside: np.ndarray, owner: np.ndarray,
             region_match: list[Any]) -> list[FusedKernelRow]:
    """Inductor's kernels in the iterations: GPU kernels by device time (not their launches'
    CPU-side records of the same name), C++ kernels (their profiling records) by CPU time,
    one row per name and region (Triton kernels are named per graph: two graphs can
    each have a ``triton_poi_fused_add_0``)."""
    is_kernel_name, found = name_matches(table, KERNEL)
    on_device = device_work(table)
    on_cpu = (table.device < 0) & (table.kind == Kind.OP)
    chosen = np.flatnonzero(is_kernel_name[table.name] & inside & (on_device | on_cpu))
    count: Counter[tuple[int, bool, str]] = Counter()  # (name id, on device, region)
    time: Counter[tuple[int, bool, str]] = Counter()
    duration = (table.end - table.start) / 1e3
    for i in chosen.tolist():
        host = int(table.launcher[i]) if on_device[i] else i
        region = ("" if host < 0 else BACKWARD if owner[host] < 0
                  else _compile_id(table, int(owner[host]), region_match))
        key = (int(table.name[i]), bool(on_device[i]), region)
        count[key] += 1
        time[key] += float(duration[i] if on_device[i] else figures.cpu_total[i])
    rows = []
    on_gpu = {name for name, device, _ in count if device}
    for (name, device, region), n in count.items():
        if not device and name in on_gpu:  # a Triton launch's CPU-side record: the GPU row
            continue
        m = found[name]
        rows.append(FusedKernelRow(key=table.names[name], count=n,
                                   time_total=time[(name, device, region)],
                                   on_device=device,
                                   graph=f"graph_{m[1]}" if m[1] is not None else "",
                                   compile_id=region))
    return sorted(rows, key=lambda r: (-r.time_total, r.key, r.compile_id))
