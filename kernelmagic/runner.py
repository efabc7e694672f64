"""Runs a block of code: warm-up, then profiled iterations under torch's profiler.

This is the plain-Python core under the magic; it works without IPython::

    import kernelmagic
    result = kernelmagic.profile(lambda: block(x), iters=10, name="block")
    print(result.table())
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import CodeType
from typing import Any

from kernelmagic import collect_views as views
from kernelmagic import torch_compat
from kernelmagic.collector import collect_kernels, collect_rows
from kernelmagic.options import ProfileOptions
from kernelmagic.result import ProfileResult


class ProfilerBusyError(RuntimeError):
    """Another torch profiler is already running in this process."""


@dataclass(frozen=True)
class Plan:
    """Options resolved against this machine, before anything runs."""

    options: ProfileOptions
    profiles_device: bool
    sort: str


def plan(options: ProfileOptions) -> Plan:
    """Resolve options against the machine; ValueError or ProfilerBusyError if impossible."""
    profiles_device = not options.cpu_only and torch_compat.cuda_available()
    sort = options.resolve_sort(profiles_device)
    if torch_compat.profiler_running():
        raise ProfilerBusyError(
            "a torch profiler is already running in this process (your own "
            "`with profile():`?); stop it before using %%profile"
        )
    return Plan(options=options, profiles_device=profiles_device, sort=sort)


def as_callable(target: Callable[[], Any] | CodeType, namespace: dict[str, Any] | None = None,
                local_namespace: dict[str, Any] | None = None) -> Callable[[], Any]:
    """A zero-argument callable running ``target`` (a callable, or code run in a namespace)."""
    if isinstance(target, CodeType):
        globals_ = {} if namespace is None else namespace
        locals_ = globals_ if local_namespace is None else local_namespace

        def run_code() -> None:
            __tracebackhide__ = True
            exec(target, globals_, locals_)

        return run_code
    if not callable(target):
        raise TypeError(f"expected a callable or a code object, got {type(target).__name__}")
    return target


def execute(fn: Callable[[], Any], run: Plan,
            on_trace_ready: Callable[[Any], None] | None = None,
            clock: Callable[[], float] = time.perf_counter,
            source_file: str | None = None) -> ProfileResult:
    """Warm up, profile ``run.options.iters`` iterations, and collect the result.

    Exceptions from ``fn`` (``KeyboardInterrupt`` included) propagate unchanged; the
    profiler is stopped and every range closed on the way out. ``clock`` (seconds)
    is replaceable for tests; ``source_file`` names the profiled code's file, whose
    functions ``--stack`` lists first.
    """
    __tracebackhide__ = True
    opts = run.options
    name = opts.name
    sync = torch_compat.synchronize
    warmup_timings: list[float] = []
    if opts.warmup:
        with torch_compat.labelled_range(f"{name}/warmup"):
            for _ in range(opts.warmup):
                start = clock()
                fn()
                sync()
                warmup_timings.append(clock() - start)  # each run ends synchronised
    torch_compat.warm_profiler(run.profiles_device)

    timings: list[float] = []
    prof = torch_compat.new_profiler(run.profiles_device, shapes=opts.shapes or opts.flops,
                                     memory=opts.memory, flops=opts.flops, stack=opts.stack)
    modules = torch_compat.module_ranges() if opts.modules else contextlib.nullcontext()
    device_peaks: list[float] | None = [] if opts.memory and run.profiles_device else None
    gc_was_enabled = gc.isenabled()
    try:
        with prof:
            with torch_compat.labelled_range(name), modules:
                for i in range(opts.iters):
                    if device_peaks is not None:
                        baseline = torch_compat.reset_device_peak()
                    with torch_compat.labelled_range(f"{name}/iter {i}"):
                        start = clock()
                        fn()
                        sync()
                        timings.append(clock() - start)
                    if device_peaks is not None:
                        device_peaks.append(torch_compat.device_peak(baseline))
            # Parsing the events (at profiler exit) and collecting rows allocate many
            # small objects; pausing the cyclic GC there, never in the user's code,
            # saves up to a third of that time on large profiles.
            gc.disable()
        result = _result(prof, run, timings, warmup_timings, device_peaks, source_file)
        if opts.roofline:  # one more run, outside the profiled region
            if gc_was_enabled:
                gc.enable()
            result = roofline_view(result, fn, prof, run.profiles_device)
    finally:
        if gc_was_enabled:
            gc.enable()
    if opts.trace is not None:
        torch_compat.export_trace(prof, opts.trace)
    if on_trace_ready is not None:
        on_trace_ready(prof)
    else:  # nobody else holds the session: free it now
        torch_compat.release(prof)
        del prof
        torch_compat.return_freed_memory()
    return result


def roofline_view(result: ProfileResult, fn: Callable[[], Any], prof: Any,
                  on_device: bool) -> ProfileResult:
    """``result`` with its roofline: ``fn`` runs once more, counted, not profiled."""
    from kernelmagic.device_peaks import peaks
    from kernelmagic.op_counter import count_ops
    from kernelmagic.roofline import collect_roofline, ops_to_open

    roofs = peaks("cuda" if on_device else "cpu")
    try:
        counts = count_ops(fn, ops_to_open(prof))
    except Exception as exc:  # the cell ran fine unprofiled: the counting mode is at fault
        note = f"the counting run failed ({type(exc).__name__}: {exc}); no roofline"
        return dataclasses.replace(result, roofline_peaks={**roofs.to_dict(), "note": note})
    torch_compat.synchronize()
    rows, roofs = collect_roofline(prof, counts, roofs, on_device)
    return dataclasses.replace(result, roofline=rows, roofline_peaks=roofs.to_dict())


def _result(prof: Any, run: Plan, timings: list[float], warmup_timings: list[float],
            device_peaks: list[float] | None, source_file: str | None) -> ProfileResult:
    """Everything the finished session holds, as a plain ``ProfileResult``."""
    opts, name = run.options, run.options.name
    median_iteration = sorted(range(len(timings)), key=timings.__getitem__)[len(timings) // 2]
    return ProfileResult(
        name=name,
        iters=opts.iters,
        warmup=opts.warmup,
        device="cuda" if run.profiles_device else "cpu",
        device_name=torch_compat.device_name() if run.profiles_device else None,
        rows=collect_rows(prof, shapes=opts.shapes, memory=opts.memory, flops=opts.flops,
                          stack=opts.stack),
        kernels=collect_kernels(prof) if run.profiles_device else [],
        timings=timings,
        warmup_timings=warmup_timings,
        matmul_precision=torch_compat.matmul_precision(),
        views=[v for v in ("memory", "shapes", "flops", "stack", "modules", "timeline",
                           "roofline")
               if getattr(opts, v)],
        peak_memory=({"cpu": views.collect_peak_cpu_memory(prof, name),
                      "device": max(device_peaks or [0.0])} if opts.memory else {}),
        sources=views.collect_sources(prof, source_file) if opts.stack else [],
        modules=views.collect_modules(prof) if opts.modules else [],
        ranges=views.collect_ranges(prof, name, on_device=run.profiles_device),
        timeline=views.collect_timeline(prof, name, median_iteration) if opts.timeline else [],
        gpu_busy=views.collect_gpu_busy(prof, name) if run.profiles_device else [],
        trace_path=os.path.abspath(opts.trace) if opts.trace else "",
        sort=run.sort,
        topk=opts.topk,
        torch_version=torch_compat.torch_version(),
    )


def profile(target: Callable[[], Any] | CodeType, *, iters: int = 10, warmup: int = 3,
            topk: int = 10, sort: str | None = None, name: str = "profile",
            cpu_only: bool = False, namespace: dict[str, Any] | None = None,
            on_trace_ready: Callable[[Any], None] | None = None,
            **view_options: Any) -> ProfileResult:
    """Profile ``target`` and return where its time went.

    ``target`` is a zero-argument callable, or a code object run in ``namespace``.
    It runs ``warmup`` times unprofiled, then ``iters`` times under the profiler.
    ``on_trace_ready`` receives the finished torch profiler session (for example to
    call ``export_chrome_trace`` or compare with ``key_averages()``). The deeper views
    are keyword flags as in the magic: ``memory``, ``shapes``, ``flops``, ``stack``,
    ``modules``, ``timeline``, ``roofline``, and ``trace="run.json"`` (with ``force``).
    """
    __tracebackhide__ = True
    options = ProfileOptions(iters=iters, warmup=warmup, topk=topk, sort=sort, name=name,
                             cpu_only=cpu_only, **view_options)
    fn = as_callable(target, namespace)
    code = target if isinstance(target, CodeType) else getattr(target, "__code__", None)
    return execute(fn, plan(options), on_trace_ready,
                   source_file=code.co_filename if code is not None else None)
