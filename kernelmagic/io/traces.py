"""A trace file as a ``ProfileResult``: its iterations, then the same views as a live run.

The iterations are ``views/iterations.py``'s, the rule a live run uses too: kernelmagic's
``NAME/iter i`` ranges (what ``%%profile --trace`` writes; the result is named ``NAME``),
else ``ProfilerStep#N`` ranges (the closing stub step left out), else the whole trace.
Without kernelmagic's ranges the result is named after the file.

``timings`` are those windows' durations (seconds); there are no warm-up runs. With
steps or kernelmagic ranges, the events outside every iteration (the profiler's start and
stop) are left out of the result (``within_iterations``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np

from kernelmagic.core.arrays import isin, unique
from kernelmagic.core.event_rules import BACKEND_KEY
from kernelmagic.core.events import EventTable, Kind, device_work, select
from kernelmagic.core.machine import DeviceInfo, gpu_info
from kernelmagic.core.op_names import is_fp32_gemm
from kernelmagic.core.options import trace_views
from kernelmagic.core.records import TraceFileError
from kernelmagic.results.result import ProfileResult
from kernelmagic.sources.counter_ranges import RANGES_KEY
from kernelmagic.sources.trace_file import start_reading
from kernelmagic.views.iterations import (
    RECORDED_END_KEY,
    Iterations,
    find_iterations,
    recorded_end,
)

_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json")


def trace_stem(file_name: str) -> str:
    """``rank0.1700000000.pt.trace.json.gz`` -> ``rank0.1700000000``."""
    return next((file_name[: -len(suffix)] for suffix in _SUFFIXES
                 if file_name.endswith(suffix) and len(file_name) > len(suffix)), file_name)


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
    known = isin(table.correlation[launched], table.correlation[runtime])
    kept_calls = table.correlation[runtime & inside]
    by_call = isin(table.correlation[launched], kept_calls)
    idx = np.flatnonzero(launched)
    keep[idx[known]] = by_call[known]
    if keep.all():
        return table
    return select(table, keep)


def gpu_runtime(table: EventTable) -> str:
    """The backend the trace's categories name (``"mtia"``, ``"xpu"``, ...: the readers'
    ``meta``); else ``"rocm"`` when its runtime calls are HIP's (``hipLaunchKernel``...)
    or, with none, its GPU is an AMD one; else ``"cuda"`` (torch calls both "cuda")."""
    backend = table.meta.get(BACKEND_KEY)
    if backend:
        return str(backend)
    runtime = unique(table.name[table.kind == Kind.RUNTIME])
    names = [table.names[i] for i in runtime]
    if names:
        return "rocm" if any(n.startswith("hip") for n in names) else "cuda"
    device = str(table.meta.get("device_name") or "")
    return "rocm" if device.startswith("AMD") else "cuda"


def torch_device(runtime: str) -> str:
    """What torch calls the device of a backend (``gpu_runtime``): ``"cuda"`` on CUDA and
    ROCm, else the backend's own name (``"mtia"``, ``"xpu"``, ``"hpu"``, ...)."""
    return "cuda" if runtime in ("", "cuda", "rocm") else runtime


def inferred_matmul_precision(table: EventTable) -> str:
    """``"highest"`` when float32 GEMM kernels ran where TF32 exists, else ``""`` (unknown).

    A trace does not record ``torch.get_float32_matmul_precision()``. On a GPU with TF32
    (compute capability 8 or newer) cuBLAS picks TF32 kernels for float32 matmuls unless
    the precision is "highest", so plain fp32 GEMM kernels there mean it was.
    """
    major = table.meta.get("compute_major")
    if not isinstance(major, int) or major < 8:
        return ""
    kernels = unique(table.name[table.kind == Kind.KERNEL])
    return "highest" if any(is_fp32_gemm(table.names[i]) for i in kernels) else ""


class TraceParts(NamedTuple):
    """A trace's events (within its iterations, linked) and its iterations."""

    table: EventTable
    iterations: Iterations


def read_trace(path: str | os.PathLike[str],
               reading: Callable[[], EventTable] | None = None) -> TraceParts:
    """A trace file's events and iterations (``TraceFileError`` when it has no events);
    ``reading`` finishes the read when ``start_reading(path)`` has begun it."""
    source = Path(path)
    finish_reading = reading or start_reading(source)  # gunzips on a thread during imports
    import kernelmagic.results.builder  # noqa: F401  (trace_result's, imported meanwhile)
    from kernelmagic.core.events import derive_links

    table = finish_reading()
    if not table.n:
        raise TraceFileError(f"{source}: a trace with no events")
    end = recorded_end(table)
    if end is not None:  # (kept: the session's span is cut out below; read once, here)
        table.meta[RECORDED_END_KEY] = end
    iterations = find_iterations(table)
    if not iterations.name:
        iterations = replace(iterations, name=trace_stem(source.name))
    return TraceParts(derive_links(within_iterations(table, iterations)), iterations)


def load_trace(path: str | os.PathLike[str], *, timeline: bool = True,
               reading: Callable[[], EventTable] | None = None) -> ProfileResult:
    """Read a Kineto / Chrome trace file into a ``ProfileResult`` (no torch imported).

    ``timeline=False`` leaves that view out (many ranks do: ``kernelmagic/io/ranks.py``);
    ``reading``: the read ``start_reading(path)`` began (``load`` begins it before it
    imports this module).
    """
    return trace_result(read_trace(path, reading), timeline=timeline)


def trace_result(parts: TraceParts, *, timeline: bool = True) -> ProfileResult:
    """A read trace's ``ProfileResult`` (``load_trace``)."""
    from kernelmagic.results.builder import TABLE_COUNTERS, RunFacts, build_result

    table, iterations = parts
    views = [v for v in trace_views(table) if timeline or v != "timeline"]
    if table.meta.get(RANGES_KEY):  # recorded with profiler metrics: counters per kernel
        views.append(TABLE_COUNTERS)
    on_device = bool(device_work(table).any())
    runtime = gpu_runtime(table)
    facts = RunFacts(
        device_name=table.meta.get("device_name"),
        matmul_precision=inferred_matmul_precision(table),
        gpu_runtime=runtime,
        source="trace",
        distributed={k: table.meta[k] for k in ("rank", "world_size", "backend")
                     if k in table.meta},
        device_info=trace_device(table, on_device, runtime),
    )
    return build_result(
        table,
        name=iterations.name,
        views=views,
        iterations=iterations.windows,
        timings=iterations.timings,
        device=torch_device(runtime) if on_device else "cpu",
        facts=facts,
    )


def trace_device(table: EventTable, on_device: bool, runtime: str) -> DeviceInfo:
    """The device a trace names in its ``deviceProperties`` (capability, datasheet peaks);
    a CPU-only trace's CPU, whose figures a trace does not hold."""
    if not on_device:
        return DeviceInfo(kind="cpu")
    major, minor = table.meta.get("compute_major"), table.meta.get("compute_minor")
    capability = f"{major}.{minor if isinstance(minor, int) else 0}" \
        if isinstance(major, int) else ""
    return gpu_info(runtime or "cuda", str(table.meta.get("device_name") or ""), capability)
