"""The torch side of ``--counters`` and ``--nsight``: every torch call either makes.

``--counters`` runs the block once more under a torch profiler session that reads CUPTI
hardware counters per kernel (``torch.profiler._ExperimentalConfig(profiler_metrics=...,
profiler_measure_per_kernel=True)``, a private torch API, used only here). The session is
written as a Chrome trace and read back by the trace readers, so a live run and a trace
recorded with profiler metrics go through the very same code (``sources/counter_ranges``,
``views/counters``): the counters reach Python only as the ``args`` of the trace's
``cuda_profiler_range`` events whatever the torch version.

``--nsight`` brackets the profiled iterations with ``cudaProfilerStart``/``Stop``
(``torch.cuda.profiler``), for Nsight Systems' ``--capture-range=cudaProfilerApi`` and
Nsight Compute's ``--profile-from-start off``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.autograd import profiler as autograd_profiler

from kernelmagic.core.events import EventTable, derive_links
from kernelmagic.live import quiet_kineto_logs
from kernelmagic.sources.trace_file import read_table

#: What to do where the driver forbids counters to ordinary users (``ERR_NVGPUCTRPERM``).
ENABLE_HINT = ("allow it with the driver option NVreg_RestrictProfilingToAdminUsers=0 "
               "(or run as root); see https://developer.nvidia.com/ERR_NVGPUCTRPERM")
_DRIVER_PARAMS = "/proc/driver/nvidia/params"


def counters_forbidden(params_path: str = _DRIVER_PARAMS) -> str:
    """Why this process may not read GPU counters (one line), or "" when nothing says so.

    The NVIDIA driver's ``RmProfilingAdminOnly: 1`` restricts them to administrators
    (CUPTI then fails with ``ERR_NVGPUCTRPERM``); root may still read them.
    """
    try:
        with open(params_path) as f:
            text = f.read()
    except OSError:
        return ""
    admin_only = any(line.replace(" ", "") == "RmProfilingAdminOnly:1"
                     for line in text.splitlines())
    if admin_only and hasattr(os, "geteuid") and os.geteuid() != 0:
        return ("no hardware counters: the NVIDIA driver lets only administrators read "
                f"them (ERR_NVGPUCTRPERM); {ENABLE_HINT}")
    return ""


def counter_session(metrics: Sequence[str]) -> Any:
    """A profiler session (not yet started) reading ``metrics`` per kernel.

    It asks for CPU activities only, never ``ProfilerActivity.CUDA``: Kineto's CUPTI range
    profiler refuses to start when kernel, memcpy or memset tracing is also requested
    ("cannot run in combination with other cuda activity profilers",
    ``CuptiRangeProfiler::configure``), and recent torch passes a CUDA activity's kernel
    tracing on to Kineto beside the range profiler. The CPU activities (ops, and the
    ``cudaLaunchKernel`` calls the ranges are joined to) are what a trace recorded with
    profiler metrics holds. Kineto must already have CUPTI set up, as the timed session
    before it (with CUDA activities) does: a first, CPU-only session would set Kineto up
    without it.
    """
    quiet_kineto_logs()
    config = torch._C._profiler._ExperimentalConfig(
        profiler_metrics=list(metrics), profiler_measure_per_kernel=True)
    return autograd_profiler.profile(use_kineto=True, use_device=None,
                                     experimental_config=config)


def counter_events(fn: Callable[[], Any], metrics: Sequence[str],
                  session: Callable[[Sequence[str]], Any] = counter_session) -> EventTable:
    """Run ``fn`` once under a counter session; the session's events as an ``EventTable``
    (read from its Chrome trace, counter ranges joined: ``sources/counter_ranges``).

    ``session`` is replaceable for tests (anything with ``__enter__``/``__exit__`` and
    ``export_chrome_trace(path)``).
    """
    torch.cuda.synchronize()
    prof = session(metrics)
    with prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "counters.json")
        prof.export_chrome_trace(path)
        return derive_links(read_table(path))


def capture_start() -> None:
    """``cudaProfilerStart``: Nsight (``--capture-range=cudaProfilerApi``,
    ``--profile-from-start off``) records from here."""
    torch.cuda.synchronize()
    torch.cuda.profiler.start()


def capture_stop() -> None:
    """``cudaProfilerStop``, once the GPU has finished what was launched."""
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
