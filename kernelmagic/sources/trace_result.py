"""A trace file as a ``ProfileResult``: its iterations, then the same views as a live run.

Iterations, first match wins:

1. one per ``ProfilerStep#N`` range (what ``torch.profiler.profile(schedule=...)`` with
   ``prof.step()`` records);
2. one per kernelmagic range ``NAME/iter i`` (what ``%%profile --trace`` writes), the
   result named ``NAME``;
3. else the whole trace is one iteration, from its first to its last op, range or GPU
   event.

``timings`` are those windows' durations (seconds); there are no warm-up runs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kernelmagic.events import DEVICE_WORK, EventTable, Kind
from kernelmagic.result import ProfileResult
from kernelmagic.sources.trace_file import TraceFileError, read_table

_OUR_ITERATION = re.compile(r"(.+)/iter (\d+)\Z")
_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json")


@dataclass(frozen=True)
class Iterations:
    """The profiled iterations of a trace: windows in ns from the trace's start."""

    name: str
    windows: list[tuple[int, int]]
    source: str  # "ProfilerStep", "kernelmagic ranges" or "whole trace"

    @property
    def timings(self) -> list[float]:
        """Each window's duration in seconds."""
        return [(end - start) / 1e9 for start, end in self.windows]


def trace_stem(file_name: str) -> str:
    """``rank0.1700000000.pt.trace.json.gz`` -> ``rank0.1700000000``."""
    for suffix in _SUFFIXES:
        if file_name.endswith(suffix) and len(file_name) > len(suffix):
            return file_name[: -len(suffix)]
    return file_name


def _windows(table: EventTable, rows: np.ndarray) -> list[tuple[int, int]]:
    order = rows[np.argsort(table.start[rows], kind="stable")]
    return [(int(table.start[i]), int(table.end[i])) for i in order]


def find_iterations(table: EventTable, default_name: str) -> Iterations:
    """The iterations of ``table`` (see the module's docstring)."""
    steps = np.flatnonzero(table.kind == Kind.STEP)
    if steps.size:
        # One thread steps the profiler: if steps appear on several, take the busiest.
        tids, counts = np.unique(table.tid[steps], return_counts=True)
        steps = steps[table.tid[steps] == tids[np.argmax(counts)]]
        return Iterations(default_name, _windows(table, steps), "ProfilerStep")
    ranges = np.flatnonzero(table.kind == Kind.RANGE)
    groups: dict[str, list[tuple[int, int]]] = {}
    outer: set[str] = set()
    for name_id in np.unique(table.name[ranges]):
        text = table.names[name_id]
        found = _OUR_ITERATION.match(text)
        rows = ranges[table.name[ranges] == name_id]
        if found is not None:
            groups.setdefault(found.group(1), []).extend(
                (int(found.group(2)), int(i)) for i in rows)
        else:
            outer.add(text)
    named = {k: v for k, v in groups.items() if k in outer} or groups
    if named:
        name = max(named, key=lambda k: (len(named[k]), k))
        order = sorted(named[name], key=lambda pair: (table.start[pair[1]], pair[0]))
        windows = [(int(table.start[i]), int(table.end[i])) for _, i in order]
        return Iterations(name, windows, "kernelmagic ranges")
    seen = np.flatnonzero((table.kind != Kind.OTHER) & (table.kind != Kind.MEMORY))
    if not seen.size:
        seen = np.arange(table.n)
    return Iterations(default_name, [(int(table.start[seen].min()), int(table.end[seen].max()))],
                      "whole trace")


def has_device_work(table: EventTable) -> bool:
    """Whether the trace holds GPU kernels, copies or memsets."""
    return bool(np.isin(table.kind, np.asarray(DEVICE_WORK, dtype=np.int8)).any())


def load_trace(path: str | os.PathLike[str]) -> ProfileResult:
    """Read a Kineto / Chrome trace file into a ``ProfileResult`` (no torch imported)."""
    source = Path(path)
    table = read_table(source)
    if not table.n:
        raise TraceFileError(f"{source}: a trace with no events")
    from kernelmagic.events import derive_links  # type: ignore[attr-defined]
    from kernelmagic.views import build_result  # type: ignore[import-not-found]

    derive_links(table)
    iterations = find_iterations(table, trace_stem(source.name))
    on_device = has_device_work(table)
    return build_result(
        table,
        name=iterations.name,
        windows=iterations.windows,
        timings=iterations.timings,
        device="cuda" if on_device else "cpu",
        device_name=table.meta.get("device_name"),
    )
