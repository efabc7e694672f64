"""``build_result``: the one place an ``EventTable`` becomes a ``ProfileResult``.

It calls every view (``kernelmagic/views/``) on the table and assembles their rows into
the result (the results layer: it imports the views below it, never torch).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernelmagic.core.events import EventTable, PythonSamples, Window, device_work
from kernelmagic.core.machine import CpuLoad, DeviceInfo
from kernelmagic.core.memory_rows import MemoryLedger
from kernelmagic.core.options import VIEWS
from kernelmagic.core.rows import OpRow, TrustChecks
from kernelmagic.core.sorting import default_sort
from kernelmagic.core.step_rows import RepeatedCall
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.breakdown import breakdown, gpu_busy
from kernelmagic.views.critical_path import IterationView, iteration_view
from kernelmagic.views.dependencies import trust_checks
from kernelmagic.views.iterations import find_iterations
from kernelmagic.views.ops import op_rows, outer_window, range_owners
from kernelmagic.views.python_lines import samples_from_trace
from kernelmagic.views.registry import ViewInputs, view_specs
from kernelmagic.views.specs import CriticalPathView, timeline_at_peak
from kernelmagic.views.tree import Figures

__all__ = ["TABLE_COUNTERS", "RunFacts", "build_result"]

#: A view ``build_result`` also reads from the table when asked: the counters a trace
#: recorded with profiler metrics holds. A live run's come from a run of their own
#: (``live/runner.py: counters_view``), after the result is built.
TABLE_COUNTERS = "counters"


@dataclass(frozen=True)
class RunFacts:
    """What a source knows about its run beyond the events, copied into the result as it
    is. The defaults are what a table alone says (a trace's, a test's): nothing of it.

    ``sort`` defaults to "self_device" on a device, else "self_cpu"; ``gpu_runtime``
    ("cuda", "rocm", or another backend: "mtia", ...) is kept only when a device was
    profiled; ``planned_iters`` is the number of iterations asked for when fewer ran
    (Ctrl-C, out of memory);
    ``repeated_call`` a module the warm-up saw called many times (without ``--steps``);
    ``device_info`` the device's figures for the advice; ``cpu_load`` the machine's load.
    """

    warmup: int = 0
    warmup_timings: Sequence[float] = ()
    device_name: str | None = None
    sort: str | None = None
    topk: int = 10
    matmul_precision: str = ""
    torch_version: str = ""
    gpu_runtime: str = ""
    trace_path: str = ""
    source: str = "live"
    capture: str = ""
    planned_iters: int = 0
    distributed: Mapping[str, Any] = field(default_factory=dict)
    repeated_call: RepeatedCall | None = None
    device_info: DeviceInfo | None = None
    cpu_load: CpuLoad | None = None


def build_result(table: EventTable, *, name: str, views: Sequence[str] = (),
                 iterations: list[Window] | None = None,
                 timings: list[float] | None = None, device: str | None = None,
                 source_file: str | None = None,
                 device_peaks: Sequence[float] | None = None,
                 memory_ledger: MemoryLedger | None = None, memory_all: bool = False,
                 steps_target: str = "", python_samples: PythonSamples | None = None,
                 cell_label: str = "", facts: RunFacts = RunFacts()) -> ProfileResult:
    """Turn an event table (with ``derive_links`` applied) into a finished ``ProfileResult``
    (nothing to set on it afterwards: it caches figures).

    - ``name``: the run's name; kernelmagic's own ranges ``<name>``, ``<name>/warmup``,
      ``<name>/iter i`` are not user ranges, and when the ``<name>`` range is there, ops
      starting outside it (the profiler's own start/stop work) are not rows.
    - ``views``: the deeper views asked for, any of ``VIEWS`` ("shapes" splits the op
      rows by input shapes; "memory" adds memory fields and peaks; "flops", "stack"
      (``source_file`` names the profiled code's file, listed first), "modules",
      "timeline" (of the median iteration)), "counters" (``TABLE_COUNTERS``) and the
      options views declare themselves (``ViewSpec.flag``).
    - ``iterations``: (start, end) ns windows of the profiled iterations; default
      ``find_iterations(table, name)`` (``views/iterations.py``); ``timings``: wall
      seconds per iteration, default the windows' lengths.
    - ``device``: "cpu" or "cuda" (a trace of another accelerator: torch's name for it,
      "mtia", ...); default "cuda" when the table holds GPU work.
    - ``device_peaks``, ``memory_ledger``, ``memory_all``: see ``views/specs.py:
      build_memory``.
    - ``steps_target``: what each step is a call of (``views/steps.py``).
    - ``python_samples``, ``cell_label``: see ``views/specs.py: build_python``.
    - ``facts``: the rest, copied into the result (``RunFacts``).
    """
    windows = (find_iterations(table, name).windows if iterations is None
               else list(iterations))
    if timings is None:
        timings = [(end - start) / 1e9 for start, end in windows]
    if device is None:
        device = "cuda" if device_work(table).any() else "cpu"
    on_device = device != "cpu"
    known = (*VIEWS, TABLE_COUNTERS)  # in their order; then the views with their own option
    wanted = [v for v in known if v in views] + [v for v in views if v not in known]
    figures = Figures(table)
    median = median_index(timings)
    busy = gpu_busy(table, windows)  # the GPU line and the breakdown's idle: one figure
    shown = windows[min(median, len(windows) - 1)] if windows else None  # median iteration
    in_timeline = "timeline" in wanted and shown is not None and bool(timings)
    owners = range_owners(table, name)  # the ranges that are rows: for every view of rows
    rows, model = _rows_and_model(table, figures, name, wanted, shown, in_timeline,
                                  statistics.median(timings) * 1e6 if timings else None,
                                  owners)
    # The Python samples that name lines (the python view's, gpu_idle's): the live
    # sampler's, else those made from a trace's with_stack frames.
    lines = python_samples
    if lines is None and ("python" in wanted or on_device):
        lines = samples_from_trace(table, windows)
    inputs = ViewInputs(table, figures, windows, name, views=wanted, on_device=on_device,
                        median=median, source_file=source_file, cell_label=cell_label,
                        extra={"steps_target": steps_target, "memory_ledger": memory_ledger,
                               "memory_all": memory_all, "device_peaks": device_peaks,
                               "python_samples": python_samples, "line_samples": lines,
                               "range_owners": owners,
                               "timed": bool(timings)})
    records = _view_records(inputs)
    if "timeline" in records:  # one iteration named everywhere: the memory peak's, if any
        records["timeline"] = timeline_at_peak(inputs, records.get("memory"),
                                               records["timeline"])
    records["critical_path"] = CriticalPathView(
        path=model.path if model else [], spans=model.spans if model else [],
        model=model.model if model else None, trust=TrustChecks(**trust_checks(table, figures)))
    return ProfileResult(
        name=name, iters=len(timings), device=device, views=wanted, timings=list(timings),
        rows=rows, gpu_busy=busy if on_device else [],
        breakdown=breakdown(table, windows, busy) if windows else None,
        view_records=records, **_copied(facts, on_device),
    )


def _view_records(inputs: ViewInputs) -> dict[str, Any]:
    """Each registered view's record that its ``build`` makes for ``inputs`` (the views
    asked for, and those without an option), in the reports' order."""
    records = {}
    for spec in view_specs():
        if spec.build is not None and spec.asked(inputs.views):
            record = spec.build(inputs)
            if record is not None:
                records[spec.name] = record
    return records


def _rows_and_model(table: EventTable, figures: Figures, name: str, wanted: list[str],
                    shown: Window | None, spans: bool, median_us: float | None,
                    owners: np.ndarray) -> tuple[list[OpRow], IterationView | None]:
    """The op rows, each with its ``max_gain_us``, and the ``shown`` (median) iteration's
    dependency model (``views/critical_path.py``; None without iterations; ``spans``:
    with its spans, for the timeline), in terms of the measured median ``median_us``."""
    rows = op_rows(table, figures, shapes="shapes" in wanted, memory="memory" in wanted,
                   flops="flops" in wanted, window=outer_window(table, name), name=name,
                   ranges=owners)
    model = (iteration_view(table, shown, name, shapes="shapes" in wanted, spans=spans,
                            ranges=owners, median_us=median_us, figures=figures)
             if shown is not None else None)
    gains = model.gains_us if model else {}  # (0 for a row with nothing in the median iteration)
    return [dataclasses.replace(r, max_gain_us=gains.get((r.kind, r.key, r.input_shapes), 0.0))
            for r in rows], model


def median_index(timings: Sequence[float]) -> int:
    """The index of the median iteration (the upper one of an even count; 0 with none)."""
    if not timings:
        return 0
    return sorted(range(len(timings)), key=timings.__getitem__)[len(timings) // 2]


def _copied(facts: RunFacts, on_device: bool) -> dict[str, Any]:
    """``facts`` as result fields (each ``RunFacts`` field is the result's of its name)."""
    copied = {f.name: getattr(facts, f.name) for f in dataclasses.fields(facts)}
    return {**copied, "warmup_timings": list(facts.warmup_timings),
            "sort": facts.sort or default_sort(on_device),
            "gpu_runtime": facts.gpu_runtime if on_device else "",
            "distributed": dict(facts.distributed)}
