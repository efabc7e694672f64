"""Turns a finished torch profiler session into kernelmagic's operator and kernel rows."""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from typing import Any

from kernelmagic import torch_compat
from kernelmagic.result import KernelRow, OpRow


def collect_rows(prof: Any, *, shapes: bool = False, memory: bool = False,
                 flops: bool = False, stack: bool = False) -> list[OpRow]:
    """One row per operator of ``prof.key_averages()``, figures copied unchanged.

    Left out: ``record_function``/NVTX ranges (they wrap ops, so their time is
    already in the ops' rows), pseudo-rows such as ``[memory]``, GPU kernel events
    (their time is the launching op's self device time) and the Python frames that
    ``with_stack`` records (pass ``stack`` when it was on). With ``shapes``, rows are
    split by input shapes.
    """
    python_frames = ({str(e.name) for e in torch_compat.all_events(prof)
                      if torch_compat.is_python_function(e)} if stack else set())
    rows = []
    synced = False
    for avg in torch_compat.key_averages(prof, by_shapes=shapes):
        synced = synced or str(avg.key) == torch_compat.SYNC_RANGE
        if (
            torch_compat.is_user_range(avg)
            or torch_compat.is_pseudo_row(avg)
            or not torch_compat.is_host_event(avg)
            or str(avg.key) in python_frames
        ):
            continue
        extra: dict[str, Any] = {}
        if shapes:
            extra["input_shapes"] = torch_compat.shapes_text(avg)
        if flops:
            extra["flops"] = float(getattr(avg, "flops", 0) or 0)
        if memory:
            extra.update(torch_compat.op_memory(avg))
        rows.append(OpRow(key=str(avg.key), count=int(avg.count),
                          **torch_compat.op_times(avg), **extra))
    return _without_our_sync(rows, prof) if synced else rows


def _without_our_sync(rows: list[OpRow], prof: Any) -> list[OpRow]:
    """Take out the events under kernelmagic's own per-iteration synchronize range."""
    ours = [e for e in torch_compat.host_events(prof)
            if e.cpu_parent is not None and str(e.cpu_parent.name) == torch_compat.SYNC_RANGE]
    if not ours:
        return rows
    count: Counter[str] = Counter(str(e.name) for e in ours)
    spent: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for event in ours:
        for field, value in torch_compat.op_times(event).items():
            spent[str(event.name)][field] += value
    kept = []
    for row in rows:
        if row.key not in count:  # (with --shapes, our sync is the shape-less row)
            kept.append(row)
            continue
        left = row.count - count.pop(row.key)
        if left > 0:
            fields = {f: getattr(row, f) - v for f, v in spent[row.key].items()}
            kept.append(dataclasses.replace(row, count=left, **fields))
    return kept


def collect_kernels(prof: Any) -> list[KernelRow]:
    """GPU kernels by name: calls, total device time, and the op that launched them.

    Torch attaches each kernel to the operator whose correlation id launched it
    (``FunctionEvent.kernels``), which is where the launching op comes from.
    """
    count: Counter[str] = Counter()
    time: defaultdict[str, float] = defaultdict(float)
    launchers: defaultdict[str, Counter[str]] = defaultdict(Counter)
    for event in torch_compat.host_events(prof):
        if torch_compat.is_user_range(event):
            continue  # a range's "kernel" is its own GPU-side copy, not GPU work
        for name, duration in torch_compat.kernels_of(event):
            count[name] += 1
            time[name] += duration
            launchers[name][str(event.name)] += 1
    return [
        KernelRow(key=name, count=count[name], device_time_total=time[name],
                  launched_by=launchers[name].most_common(1)[0][0])
        for name in sorted(count, key=lambda n: -time[n])
    ]
