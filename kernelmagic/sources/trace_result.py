"""A trace file as a ``ProfileResult``: its iterations, then the same views as a live run.

Iterations, first match wins:

1. one per kernelmagic range ``NAME/iter i`` (what ``%%profile --trace`` writes), the
   result named ``NAME``;
2. one per ``ProfilerStep#N`` range (what ``torch.profiler.profile(schedule=...)`` with
   ``prof.step()`` records), leaving out a step with no op inside (the stub torch opens
   when the profiler stops);
3. else the whole trace is one iteration, from its first to its last op, range or GPU
   event.

``timings`` are those windows' durations (seconds); there are no warm-up runs. With
steps or kernelmagic ranges, the events outside every iteration (the profiler's start and
stop) are left out of the result (``within_iterations``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kernelmagic.events import DEVICE_WORK, EventTable, Kind, select
from kernelmagic.findings import _FP32_GEMM, _LOW_PRECISION
from kernelmagic.range_names import ITERATION_RANGE as _OUR_ITERATION
from kernelmagic.range_names import MODULE_RANGE as _MODULE_RANGE
from kernelmagic.result import ProfileResult
from kernelmagic.sources.trace_file import TraceFileError, read_table

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
    ours = _our_iterations(table)
    if ours is not None:
        return ours
    steps = np.flatnonzero(table.kind == Kind.STEP)
    if steps.size:
        # One thread steps the profiler: if steps appear on several, take the busiest.
        tids, counts = np.unique(table.tid[steps], return_counts=True)
        steps = steps[table.tid[steps] == tids[np.argmax(counts)]]
        # The step torch opens as the profiler stops holds no op: not an iteration.
        op_starts = np.sort(table.start[table.kind == Kind.OP])
        holds = (np.searchsorted(op_starts, table.end[steps], "right")
                 > np.searchsorted(op_starts, table.start[steps], "left"))
        if holds.any():
            steps = steps[holds]
        return Iterations(default_name, _windows(table, steps), "ProfilerStep")
    seen = np.flatnonzero((table.kind != Kind.OTHER) & (table.kind != Kind.MEMORY))
    if not seen.size:
        seen = np.arange(table.n)
    return Iterations(default_name, [(int(table.start[seen].min()), int(table.end[seen].max()))],
                      "whole trace")


def _our_iterations(table: EventTable) -> Iterations | None:
    """kernelmagic's ``NAME/iter i`` ranges; NAME preferably one with its outer range too."""
    ranges = np.flatnonzero(table.kind == Kind.RANGE)
    groups: dict[str, list[tuple[int, int]]] = {}
    outer: set[str] = set()
    for name_id in np.unique(table.name[ranges]):
        text = table.names[name_id]
        found = _OUR_ITERATION.match(text)
        if found is None:
            outer.add(text)
            continue
        rows = ranges[table.name[ranges] == name_id]
        groups.setdefault(found.group(1), []).extend((int(found.group(2)), int(i)) for i in rows)
    named = {k: v for k, v in groups.items() if k in outer} or groups
    if not named:
        return None
    name = max(named, key=lambda k: (len(named[k]), k))
    order = sorted(named[name], key=lambda pair: (table.start[pair[1]], pair[0]))
    return Iterations(name, [(int(table.start[i]), int(table.end[i])) for _, i in order],
                      "kernelmagic ranges")


def within_iterations(table: EventTable, iterations: Iterations) -> EventTable:
    """The events of the iterations only: what runs before the first step or after the last
    (the profiler's own start and stop, its closing ``cudaDeviceSynchronize``) is left out.

    A CPU-side event is kept when it starts inside a window; GPU work when the runtime call
    that launched it is kept (it may run after its step's window), or, with no such call in
    the trace, when it starts inside a window.
    """
    if iterations.source == "whole trace":
        return table
    bounds = sorted(iterations.windows)
    w_start = np.asarray([s for s, _ in bounds], dtype=np.int64)
    w_end = np.maximum.accumulate(np.asarray([e for _, e in bounds], dtype=np.int64))
    at = np.searchsorted(w_start, table.start, "right") - 1
    inside = (at >= 0) & (table.start <= w_end[np.maximum(at, 0)])
    keep = inside.copy()
    gpu = table.device >= 0
    runtime = table.kind == Kind.RUNTIME
    launched = gpu & (table.correlation != 0)
    known = np.isin(table.correlation[launched], table.correlation[runtime])
    kept_calls = table.correlation[runtime & inside]
    by_call = np.isin(table.correlation[launched], kept_calls)
    idx = np.flatnonzero(launched)
    keep[idx[known]] = by_call[known]
    if keep.all():
        return table
    return select(table, keep)


def has_device_work(table: EventTable) -> bool:
    """Whether the trace holds GPU kernels, copies or memsets."""
    return bool(np.isin(table.kind, np.asarray(DEVICE_WORK, dtype=np.int8)).any())


def supported_views(table: EventTable) -> list[str]:
    """The deeper views this trace holds data for (``--trace`` keeps what was recorded).

    Not "shapes": rows stay one per op even when the trace recorded input shapes.
    """
    views = ["timeline"]
    if (table.kind == Kind.MEMORY).any():
        views.append("memory")
    if table.flops.any():
        views.append("flops")
    if (table.kind == Kind.PYTHON).any():
        views.append("stack")
    if any(_MODULE_RANGE.match(x) for x in table.names):
        views.append("modules")
    return views


def gpu_runtime(table: EventTable) -> str:
    """``"rocm"`` when the trace's runtime calls are HIP's (``hipLaunchKernel``...) or, with
    none, its GPU is an AMD one; else ``"cuda"``. Either way torch calls the device "cuda"."""
    runtime = np.unique(table.name[table.kind == Kind.RUNTIME])
    names = [table.names[i] for i in runtime]
    if names:
        return "rocm" if any(n.startswith("hip") for n in names) else "cuda"
    device = str(table.meta.get("device_name") or "")
    return "rocm" if device.startswith("AMD") else "cuda"


def inferred_matmul_precision(table: EventTable) -> str:
    """``"highest"`` when float32 GEMM kernels ran where TF32 exists, else ``""`` (unknown).

    A trace does not record ``torch.get_float32_matmul_precision()``. On a GPU with TF32
    (compute capability 8 or newer) cuBLAS picks TF32 kernels for float32 matmuls unless
    the precision is "highest", so plain fp32 GEMM kernels there mean it was.
    """
    major = table.meta.get("compute_major")
    if not isinstance(major, int) or major < 8:
        return ""
    kernel_names = np.unique(table.name[table.kind == Kind.KERNEL])
    for name_id in kernel_names:
        text = table.names[name_id]
        if _FP32_GEMM.search(text) and not _LOW_PRECISION.search(text):
            return "highest"
    return ""


def load_trace(path: str | os.PathLike[str], *, timeline: bool = True,
               keep: Callable[[EventTable, Iterations], None] | None = None) -> ProfileResult:
    """Read a Kineto / Chrome trace file into a ``ProfileResult`` (no torch imported).

    ``timeline=False`` leaves that view out; ``keep(table, iterations)`` receives the
    table the result was built from (many ranks summarise it: ``kernelmagic/ranks/``).
    """
    from kernelmagic.events import derive_links
    from kernelmagic.views import build_result

    source = Path(path)
    table = read_table(source)
    if not table.n:
        raise TraceFileError(f"{source}: a trace with no events")
    iterations = find_iterations(table, trace_stem(source.name))
    table = derive_links(within_iterations(table, iterations))
    result = build_result(
        table,
        name=iterations.name,
        views=[v for v in supported_views(table) if timeline or v != "timeline"],
        iterations=iterations.windows,
        timings=iterations.timings,
        device="cuda" if has_device_work(table) else "cpu",
        device_name=table.meta.get("device_name"),
        matmul_precision=inferred_matmul_precision(table),
    )
    result.distributed = {k: table.meta[k] for k in ("rank", "world_size", "backend")
                          if k in table.meta}
    result.source = "trace"
    if result.profiles_device:
        result.gpu_runtime = gpu_runtime(table)
    if keep is not None:
        keep(table, iterations)
    return result
