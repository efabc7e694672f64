"""Turns a finished torch profiler session into kernelmagic's operator and kernel rows."""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from typing import Any

from kernelmagic import torch_compat
from kernelmagic.result import KernelRow, OpRow


def collect_rows(prof: Any, *, shapes: bool = False, memory: bool = False,
                 flops: bool = False, stack: bool = False,
                 leave_out_range: str | None = None) -> list[OpRow]:
    """One row per operator of ``prof.key_averages()``, figures copied unchanged.

    Left out: ``record_function``/NVTX ranges (they wrap ops, so their time is
    already in the ops' rows), pseudo-rows such as ``[memory]``, GPU kernel events
    (their time is the launching op's self device time) and the Python frames that
    ``with_stack`` records (pass ``stack`` when it was on). With ``shapes``, rows are
    split by input shapes. ``leave_out_range`` names a range whose ops are taken out
    (an iteration cut short by Ctrl-C).
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
    if leave_out_range is not None:
        rows = _without_range(rows, prof, leave_out_range, shapes, python_frames)
    return _without_our_sync(rows, prof) if synced else rows


def _without_range(rows: list[OpRow], prof: Any, range_name: str, shapes: bool,
                   python_frames: set[str]) -> list[OpRow]:
    """Subtract every op inside the range ``range_name`` (at any depth) from ``rows``."""
    inside: list[Any] = []
    for event in torch_compat.host_events(prof):
        if (torch_compat.is_user_range(event) or torch_compat.is_python_function(event)
                or str(event.name) in python_frames):
            continue
        parent = event.cpu_parent
        while parent is not None and str(parent.name) not in (range_name,
                                                               torch_compat.SYNC_RANGE):
            parent = parent.cpu_parent
        if parent is not None and str(parent.name) == range_name:
            inside.append(event)  # (our sync's events are _without_our_sync's)
    if not inside:
        return rows

    def key(name: str, shape: str) -> tuple[str, str]:
        return (name, shape if shapes else "")

    count: Counter[tuple[str, str]] = Counter()
    spent: defaultdict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for event in inside:
        k = key(str(event.name), torch_compat.shapes_text(event))
        count[k] += 1
        for field, value in torch_compat.op_times(event).items():
            spent[k][field] += value
    kept = []
    for row in rows:
        k = key(row.key, row.input_shapes)
        if k not in count:
            kept.append(row)
            continue
        left = row.count - count.pop(k)
        if left > 0:
            fields = {f: getattr(row, f) - v for f, v in spent[k].items()}
            kept.append(dataclasses.replace(row, count=left, **fields))
    return kept


def _without_our_sync(rows: list[OpRow], prof: Any) -> list[OpRow]:
    """Take out the events under kernelmagic's own per-iteration synchronize range."""
    ours = [e for e in torch_compat.host_events(prof)
            if e.cpu_parent is not None and str(e.cpu_parent.name) == torch_compat.SYNC_RANGE]
    # (with --shapes, our sync is the shape-less row)
    return _subtract(rows, ours, shapes=False)


def _without_range(rows: list[OpRow], prof: Any, range_name: str, shapes: bool,
                   python_frames: set[str]) -> list[OpRow]:
    """Take out every op inside the range ``range_name``, at any depth."""
    inside: list[Any] = []
    for event in torch_compat.host_events(prof):
        if (torch_compat.is_user_range(event) or torch_compat.is_python_function(event)
                or str(event.name) in python_frames):
            continue
        parent = event.cpu_parent
        while parent is not None and str(parent.name) not in (range_name,
                                                               torch_compat.SYNC_RANGE):
            parent = parent.cpu_parent
        if parent is not None and str(parent.name) == range_name:
            inside.append(event)  # (our sync's events are _without_our_sync's)
    return _subtract(rows, inside, shapes)


def _subtract(rows: list[OpRow], events: list[Any], shapes: bool) -> list[OpRow]:
    """``rows`` less the calls and times of ``events`` (rows left with no call go)."""
    if not events:
        return rows

    def key(name: str, shape: str) -> tuple[str, str]:
        return (name, shape if shapes else "")

    count: Counter[tuple[str, str]] = Counter()
    spent: defaultdict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for event in events:
        k = key(str(event.name), torch_compat.shapes_text(event) if shapes else "")
        count[k] += 1
        for field, value in torch_compat.op_times(event).items():
            spent[k][field] += value
    kept = []
    for row in rows:
        k = key(row.key, row.input_shapes)
        if k not in count:
            kept.append(row)
            continue
        left = row.count - count.pop(k)
        if left > 0:
            fields = {f: getattr(row, f) - v for f, v in spent[k].items()}
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
