"""The deeper views, built from the profiler's event tree (``cpu_parent`` links).

Each function takes the finished session and returns plain rows: user source lines
(``--stack``), modules (``--modules``), the user's own ranges, one iteration's
timeline, per-iteration memory peaks and GPU busy time.
"""

from __future__ import annotations

import linecache
import os
import re
import sys
import sysconfig
from collections import Counter, defaultdict
from functools import lru_cache
from typing import Any

from kernelmagic import torch_compat
from kernelmagic.rows import ModuleRow, RangeRow, SourceRow, Span

_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<func>.+)$")


def _is_op(event: Any) -> bool:
    """An operator event: not a Python frame, a range, a ``[memory]`` row or a kernel."""
    return (torch_compat.is_host_event(event)
            and not torch_compat.is_python_function(event)
            and not torch_compat.is_user_range(event)
            and not torch_compat.is_pseudo_row(event))


def _ancestors(event: Any) -> Any:
    parent = event.cpu_parent
    while parent is not None:
        yield parent
        parent = parent.cpu_parent


def iteration_events(prof: Any, name: str) -> list[Any]:
    """The ``<name>/iter <i>`` range events, in iteration order."""
    prefix = f"{name}/iter "
    found = [e for e in torch_compat.host_events(prof)
             if torch_compat.is_user_range(e) and str(e.name).startswith(prefix)]
    return sorted(found, key=lambda e: int(str(e.name)[len(prefix):]))


# --- source lines (--stack) ------------------------------------------------------------


def _resolve(path: str) -> str:
    """The file behind a frame's name: torch shortens paths relative to ``sys.path``."""
    if os.path.isabs(path) or path.startswith("<"):
        return path
    for root in sys.path:
        candidate = os.path.join(root, path)
        if os.path.exists(candidate):
            return candidate
    return path


@lru_cache(maxsize=4096)
def _library_file(path: str) -> bool:
    """True for torch, the standard library, installed packages and kernelmagic itself."""
    if path.startswith("<") and not path.startswith("<ipython-input"):
        return path.startswith(("<built-in", "<frozen", "<string>"))
    found = _resolve(path)
    if not os.path.exists(found):
        return path.startswith(("torch/", "torch\\"))
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.add(os.path.dirname(os.path.abspath(__file__)))  # kernelmagic itself
    real = os.path.realpath(found)
    return any(real.startswith(os.path.realpath(r) + os.sep) for r in roots)


def collect_sources(prof: Any, cell_file: str | None = None) -> list[SourceRow]:
    """Op self time attributed to the innermost user Python function around each op.

    Torch's ``with_stack`` records each Python call as an event named
    ``file(line): function``; walking up ``cpu_parent`` from an op finds the innermost
    frame that is not torch, the standard library or an installed package. Code at the
    top level of a cell has line 0 (the whole cell). The cell's own frames come first.
    """
    self_cpu: defaultdict[tuple[str, int, str], float] = defaultdict(float)
    self_dev: defaultdict[tuple[str, int, str], float] = defaultdict(float)
    ops: Counter[tuple[str, int, str]] = Counter()
    for event in torch_compat.host_events(prof):
        if not _is_op(event):
            continue
        for frame in _ancestors(event):
            if not torch_compat.is_python_function(frame):
                continue
            m = _FRAME.match(str(frame.name))
            if m is None or _library_file(m["file"]):
                continue
            where = (m["file"], int(m["line"]), m["func"])
            times = torch_compat.op_times(event)
            self_cpu[where] += times["self_cpu_time_total"]
            self_dev[where] += times["self_device_time_total"]
            ops[where] += 1
            break
    cell_names = {cell_file, os.path.basename(cell_file)} if cell_file else set()
    rows = []
    for (file, line, func), cpu in self_cpu.items():
        code = linecache.getline(_resolve(file), line).strip() if line else "(top level)"
        rows.append(SourceRow(key=f"{file}:{line} {func}", file=file, line=line,
                              function=func, code=code, in_cell=file in cell_names,
                              self_cpu_time_total=cpu,
                              self_device_time_total=self_dev[(file, line, func)],
                              ops=ops[(file, line, func)]))
    return sorted(rows, key=lambda r: (not r.in_cell, -r.self_cpu_time_total, r.key))


# --- modules (--modules) ---------------------------------------------------------------


def collect_modules(prof: Any) -> list[ModuleRow]:
    """Time per module path from the ``module: <path> (<Type>)`` ranges, nested."""
    total_cpu: defaultdict[str, float] = defaultdict(float)
    total_dev: defaultdict[str, float] = defaultdict(float)
    child_cpu: defaultdict[str, float] = defaultdict(float)
    child_dev: defaultdict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    types: dict[str, str] = {}
    depth: dict[str, int] = {}
    events = sorted(torch_compat.host_events(prof), key=lambda e: torch_compat.event_times(e)[0])
    for event in events:
        m = torch_compat.MODULE_RANGE.match(str(event.name))
        if m is None or not torch_compat.is_user_range(event):
            continue
        path, times = m[1], torch_compat.range_times(event)
        types[path] = m[2]
        count[path] += 1
        total_cpu[path] += times["cpu_time_total"]
        total_dev[path] += times["device_time_total"]
        enclosing = [torch_compat.MODULE_RANGE.match(str(p.name)) for p in _ancestors(event)]
        enclosing = [e for e in enclosing if e is not None]
        depth[path] = len(enclosing)
        if enclosing:
            child_cpu[enclosing[0][1]] += times["cpu_time_total"]
            child_dev[enclosing[0][1]] += times["device_time_total"]
    rows = [
        ModuleRow(key=path, module_type=types[path], depth=depth[path],
                  count=count[path], cpu_time_total=total_cpu[path],
                  self_cpu_time_total=total_cpu[path] - child_cpu[path],
                  device_time_total=total_dev[path],
                  self_device_time_total=total_dev[path] - child_dev[path])
        for path in count  # first-seen order: a parent starts before its children
    ]
    return rows


# --- the user's own ranges ---------------------------------------------------------------


def collect_ranges(prof: Any, name: str, on_device: bool = False,
                   top: int = 5) -> list[RangeRow]:
    """Each ``record_function`` range the user opened: its time and the top ops inside.

    The top ops are ranked by self time on the profiled device (CPU without CUDA).
    """
    ours = {name, f"{name}/warmup", torch_compat.SYNC_RANGE}
    count: Counter[str] = Counter()
    cpu: defaultdict[str, float] = defaultdict(float)
    dev: defaultdict[str, float] = defaultdict(float)
    inside: defaultdict[str, Counter[str]] = defaultdict(Counter)
    iter_prefix = f"{name}/iter "

    def is_theirs(e: Any) -> bool:
        label = str(e.name)
        return (torch_compat.is_user_range(e) and label not in ours
                and not label.startswith(iter_prefix)
                and torch_compat.MODULE_RANGE.match(label) is None)

    events = torch_compat.host_events(prof)
    if not any(is_theirs(e) for e in events if torch_compat.is_user_range(e)):
        return []  # the common case: no walk up the tree for every op
    for event in events:
        if is_theirs(event):
            times = torch_compat.range_times(event)
            count[str(event.name)] += 1
            cpu[str(event.name)] += times["cpu_time_total"]
            dev[str(event.name)] += times["device_time_total"]
        elif _is_op(event):
            owner = next((p for p in _ancestors(event) if is_theirs(p)), None)
            if owner is not None:
                times = torch_compat.op_times(event)
                field = "self_device_time_total" if on_device else "self_cpu_time_total"
                inside[str(owner.name)][str(event.name)] += times[field]
    return sorted(
        (RangeRow(key=k, count=count[k], cpu_time_total=cpu[k], device_time_total=dev[k],
                  top_ops=[(op, t) for op, t in inside[k].most_common(top)])
         for k in count),
        key=lambda r: (-r.cpu_time_total, r.key))


# --- timeline, memory peaks, GPU busy time ---------------------------------------------


def _device_events(prof: Any) -> list[Any]:
    """GPU kernels and copies; not the GPU-side copies of ``record_function`` ranges."""
    return [e for e in torch_compat.all_events(prof)
            if not torch_compat.is_host_event(e) and not torch_compat.is_user_range(e)]


def collect_timeline(prof: Any, name: str, iteration: int) -> list[Span]:
    """Top-level ops of one iteration on the CPU lane, and its kernels per stream."""
    iters = iteration_events(prof, name)
    if not iters:
        return []
    it = iters[min(iteration, len(iters) - 1)]
    start, end = torch_compat.event_times(it)
    spans = []
    for event in torch_compat.host_events(prof):
        if not _is_op(event):
            continue
        s, e = torch_compat.event_times(event)
        if s < start or e > end:
            continue
        if any(_is_op(p) for p in _ancestors(event)):
            continue  # only top-level ops: their children are inside them
        spans.append(Span(key=str(event.name), lane="CPU", start=s - start, end=e - start))
    for event in _device_events(prof):
        s, e = torch_compat.event_times(event)
        if start <= s <= end:
            lane = f"stream {torch_compat.stream_of(event)}"
            spans.append(Span(key=str(event.name), lane=lane, start=s - start, end=e - start))
    return sorted(spans, key=lambda sp: (sp.lane != "CPU", sp.lane, sp.start))


def collect_peak_cpu_memory(prof: Any, name: str) -> float:
    """Largest rise of allocated CPU memory within any iteration (bytes).

    The running sum of every allocation and free inside the iteration's window, from
    Kineto's raw memory records; the peak is its largest value.
    """
    records = torch_compat.memory_records(prof)
    peak = 0.0
    for start, end in (torch_compat.event_times(e) for e in iteration_events(prof, name)):
        level = 0.0
        for when, delta in records:
            if start <= when <= end:
                level += delta
                peak = max(peak, level)
    return peak


def collect_gpu_busy(prof: Any, name: str) -> list[float]:
    """Time (µs) during which at least one kernel ran, within each iteration's window.

    Kernels on concurrent streams overlap; their intervals are merged, not added.
    """
    windows = [torch_compat.event_times(e) for e in iteration_events(prof, name)]
    kernels = sorted(torch_compat.event_times(e) for e in _device_events(prof))
    busy = []
    for start, end in windows:
        total, reach = 0.0, start
        for s, e in kernels:
            if not start <= s <= end:
                continue
            if e > reach:
                total += e - max(s, reach)
                reach = e
        busy.append(total)
    return busy
