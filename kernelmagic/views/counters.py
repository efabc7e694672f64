"""Hardware counters per kernel (``--counters``, or a trace recorded with profiler
metrics): the counter ranges a source joined to their kernels (``sources/counter_ranges``)
summed per kernel name, with the op that launched them and the rates they reached.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np

from kernelmagic.core.arrays import isin
from kernelmagic.core.counter_metrics import (
    DRAM_READ_METRIC,
    DRAM_WRITE_METRIC,
    FLOP_METRICS,
    OCCUPANCY_METRIC,
    PRECISIONS,
    SUMMED_METRICS,
    TENSOR_METRIC,
    CounterRow,
)
from kernelmagic.core.events import NO_PARENT, EventTable, Kind
from kernelmagic.core.range_names import is_ours
from kernelmagic.sources.counter_ranges import JOIN_KEY, RANGES_KEY


def counter_ranges(table: EventTable) -> list[dict[str, Any]]:
    """The table's counter ranges in run order (``{"name", "metrics", "correlation"}``)."""
    found = table.meta.get(RANGES_KEY)
    return list(found) if isinstance(found, list) else []


def join_note(table: EventTable) -> str:
    """How the table's counter ranges were joined to its kernels (one line; "" if none)."""
    return str(table.meta.get(JOIN_KEY, ""))


def _launching_op(table: EventTable, i: int) -> str:
    """The op (or user range) around event ``i``, kernelmagic's own ranges skipped."""
    names, kind, parent = table.names, table.kind, table.parent
    at = int(parent[i])
    while at != NO_PARENT:
        text = names[int(table.name[at])]
        if kind[at] in (Kind.OP, Kind.RANGE) and not is_ours(text, None):
            return text
        at = int(parent[at])
    return ""


def counter_rows(table: EventTable, *, call_time: dict[str, float] | None = None,
                 peak_bytes_per_s: float = 0.0) -> list[CounterRow]:
    """One ``CounterRow`` per kernel name, most DRAM traffic (then most FLOPs) first.

    ``call_time`` (µs per call of each kernel name, as timed elsewhere) gives the rates:
    a row's time is that times the calls its counters cover, so the rates hold however
    many calls were counted. Without it the time is that of the kernel events the ranges
    were joined to (0 where the table has none: counts, no rates). ``peak_bytes_per_s``
    (the device's DRAM bandwidth; 0: unknown) gives ``dram_peak_share``.
    """
    ranges = counter_ranges(table)
    if not ranges:
        return []
    by_correlation: dict[int, list[int]] = defaultdict(list)
    wanted = {int(r["correlation"]) for r in ranges} - {0}
    if wanted:
        linked = np.flatnonzero(isin(table.correlation, np.fromiter(wanted, np.int64))
                                & ((table.kind == Kind.KERNEL) | (table.kind == Kind.RUNTIME)))
        for i in linked.tolist():
            by_correlation[int(table.correlation[i])].append(i)
    sums: dict[str, Counter[str]] = defaultdict(Counter)
    seen: dict[str, set[str]] = defaultdict(set)
    occupancy: dict[str, list[float]] = defaultdict(list)
    calls: Counter[str] = Counter()
    ops: dict[str, Counter[str]] = defaultdict(Counter)
    joined_time: Counter[str] = Counter()
    for r in ranges:
        name, metrics = str(r["name"]), r["metrics"]
        calls[name] += 1
        for metric, value in metrics.items():
            if metric in SUMMED_METRICS:
                sums[name][metric] += value
                seen[name].add(metric)
        if OCCUPANCY_METRIC in metrics:
            occupancy[name].append(metrics[OCCUPANCY_METRIC])
        op = ""
        for i in by_correlation.get(int(r["correlation"]), []):
            if table.kind[i] == Kind.KERNEL:
                joined_time[name] += (int(table.end[i]) - int(table.start[i])) / 1000.0
                launcher = int(table.launcher[i])
                if launcher != NO_PARENT and not op:
                    op = table.names[int(table.name[launcher])]
            elif not op:
                op = _launching_op(table, i)
        if op:
            ops[name][op] += 1
    rows = []
    for name, count in calls.items():
        s, has = sums[name], seen[name]
        flops = dict.fromkeys(PRECISIONS, 0.0)
        for metric, (precision, per_inst) in FLOP_METRICS.items():
            flops[precision] += s[metric] * per_inst
        dram = s[DRAM_READ_METRIC] + s[DRAM_WRITE_METRIC]
        time = (call_time.get(name, 0.0) * count if call_time is not None
                else joined_time[name])
        seconds = time / 1e6
        has_dram = DRAM_READ_METRIC in has or DRAM_WRITE_METRIC in has
        bytes_per_s = dram / seconds if seconds > 0 and has_dram else 0.0
        rows.append(CounterRow(
            key=name, count=count,
            launched_by=ops[name].most_common(1)[0][0] if ops[name] else "",
            fp64_flops=flops["fp64"], fp32_flops=flops["fp32"], fp16_flops=flops["fp16"],
            tensor_inst=s[TENSOR_METRIC],
            dram_read_bytes=s[DRAM_READ_METRIC], dram_write_bytes=s[DRAM_WRITE_METRIC],
            occupancy=(sum(occupancy[name]) / len(occupancy[name]) if occupancy[name]
                       else -1.0),
            time=time,
            flops_per_s=sum(flops.values()) / seconds if seconds > 0 else 0.0,
            dram_bytes_per_s=bytes_per_s,
            dram_peak_share=bytes_per_s / peak_bytes_per_s if peak_bytes_per_s > 0 else 0.0,
            has_flops=any(m in has for m in FLOP_METRICS), has_dram=has_dram,
            has_tensor=TENSOR_METRIC in has,
        ))
    return sorted(rows, key=lambda r: (-r.dram_bytes, -r.flops, r.key))
