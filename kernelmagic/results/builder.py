"""``build_result``: the one place an ``EventTable`` becomes a ``ProfileResult``.

It calls every view (``kernelmagic/views/``) on the table and assembles their rows into
the result (the results layer: it imports the views below it, never torch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from kernelmagic.core.events import EventTable, Window, device_work
from kernelmagic.core.memory_rows import MemoryLedger
from kernelmagic.core.options import VIEWS
from kernelmagic.core.python_samples import PythonSamples
from kernelmagic.core.rows import OpRow, SourceRow, TrustChecks
from kernelmagic.core.sorting import default_sort
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.breakdown import breakdown, gpu_busy
from kernelmagic.views.compiled import compiled_view
from kernelmagic.views.critical_path import iteration_view
from kernelmagic.views.dependencies import trust_checks
from kernelmagic.views.gpu_idle import gpu_idle_rows
from kernelmagic.views.iterations import find_iterations
from kernelmagic.views.memory import MemoryViews, ledger_from_table, memory_views
from kernelmagic.views.ops import kernel_rows, op_rows, outer_window, range_owners
from kernelmagic.views.python_lines import (
    TRACE_HINT,
    PythonLines,
    python_lines,
    samples_from_trace,
    split_top_level,
)
from kernelmagic.views.ranges import module_rows, user_ranges
from kernelmagic.views.source_lines import source_rows
from kernelmagic.views.steps import StepsView, steps_view
from kernelmagic.views.timeline import peak_memory, timeline
from kernelmagic.views.tree import Figures

__all__ = ["build_result"]


def build_result(table: EventTable, *, name: str, views: Sequence[str] = (),
                 iterations: list[Window] | None = None,
                 timings: list[float] | None = None, warmup_timings: Sequence[float] = (),
                 warmup: int = 0, device: str | None = None, device_name: str | None = None,
                 sort: str | None = None, topk: int = 10, source_file: str | None = None,
                 device_peaks: Sequence[float] | None = None, matmul_precision: str = "",
                 torch_version: str = "", trace_path: str = "",
                 memory_ledger: MemoryLedger | None = None,
                 memory_all: bool = False, steps_target: str = "",
                 python_samples: PythonSamples | None = None,
                 cell_label: str = "") -> ProfileResult:
    """Turn an event table (with ``derive_links`` applied) into a ``ProfileResult``.

    - ``name``: the run's name; kernelmagic's own ranges ``<name>``, ``<name>/warmup``,
      ``<name>/iter i`` are not user ranges, and when the ``<name>`` range is there, ops
      starting outside it (the profiler's own start/stop work) are not rows.
    - ``views``: the deeper views asked for, any of ``VIEWS`` ("shapes" splits the op
      rows by input shapes; "memory" adds memory fields and peaks; "flops", "stack"
      (``source_file`` names the profiled code's file, listed first), "modules",
      "timeline" (of the median iteration)).
    - ``iterations``: (start, end) ns windows of the profiled iterations; default
      ``find_iterations(table, name)`` (``views/iterations.py``: ``<name>/iter i``
      ranges, else ``ProfilerStep#N``, else the whole trace).
    - ``timings``: wall seconds per iteration; default the windows' lengths.
    - ``device``: "cpu" or "cuda"; default "cuda" when the table holds GPU work.
    - ``sort``: default "self_device" on a device, else "self_cpu".
    - ``device_peaks``: per-iteration device memory peaks (bytes) measured live; default
      from the table's device memory records.
    - ``memory_ledger``: the run's memory changes with their categories
      (``memory_categories.py``); default the table's records, every category "unknown".
      ``memory_all``: the memory timeline of every iteration, not only the median one.
    - ``steps_target``: with "steps" in ``views``, the name of what each step is a call of
      (``views/steps.py``).
    - ``python_samples``: the live sampler's samples for "python" (default: made from the
      table's ``with_stack`` frames, as for a trace); ``cell_label`` (the magic's ``cell[n]``)
      names the lines of ``source_file``, which is a cell's.
    - the rest is copied into the result unchanged.
    """
    windows = (find_iterations(table, name).windows if iterations is None
               else list(iterations))
    if timings is None:
        timings = [(end - start) / 1e9 for start, end in windows]
    if device is None:
        has_work = device_work(table).any()
        device = "cuda" if has_work else "cpu"
    on_device = device != "cpu"
    sort = sort or default_sort(on_device)
    wanted = [v for v in VIEWS if v in views]
    figures = Figures(table)
    peak: dict[str, float] = {}
    if "memory" in wanted:
        peak = {"cpu": peak_memory(table, windows),
                "device": (max(device_peaks or [0.0]) if device_peaks is not None
                           else peak_memory(table, windows, on_device=True))}
    chosen: list[Window] = []
    median = (sorted(range(len(timings)), key=timings.__getitem__)[len(timings) // 2]
              if timings else 0)
    if "timeline" in wanted and windows and timings:
        chosen = [windows[min(median, len(windows) - 1)]]
    memory = MemoryViews()
    if "memory" in wanted:
        ledger = memory_ledger if memory_ledger is not None else ledger_from_table(table)
        shown = None if memory_all else min(median, max(len(windows) - 1, 0))
        memory = memory_views(table, windows, ledger, shown, name=name)
        memory.note = ledger.note
    steps = _steps(table, figures, windows, name, wanted, steps_target, on_device, median)
    busy = gpu_busy(table, windows)  # the GPU line and the breakdown's idle: one figure
    compiled = compiled_view(table, figures, windows)  # empty unless compiled code ran
    lines, lines_note = PythonLines(), ""
    if "python" in wanted:
        samples = (python_samples if python_samples is not None
                   else samples_from_trace(table, windows))
        lines = python_lines(table, windows, samples, source_file, cell_label)
        if python_samples is None and not samples.n:
            lines_note = TRACE_HINT
    owners = range_owners(table, name)  # the ranges that are rows: for both views below
    rows = op_rows(table, figures, shapes="shapes" in wanted, memory="memory" in wanted,
                   flops="flops" in wanted, window=outer_window(table, name), name=name,
                   ranges=owners)
    model = (iteration_view(table, windows[min(median, len(windows) - 1)], name,
                            shapes="shapes" in wanted, spans=bool(chosen), ranges=owners)
             if windows else None)
    return ProfileResult(
        name=name,
        iters=len(timings),
        warmup=warmup,
        device=device,
        device_name=device_name,
        rows=_with_gains(rows, model.gains_us if model else {}),
        kernels=kernel_rows(table) if on_device else [],
        timings=list(timings),
        warmup_timings=list(warmup_timings),
        matmul_precision=matmul_precision,
        views=wanted,
        peak_memory=peak,
        sources=_sources(table, figures, source_file, python_samples) if "stack" in wanted
        else [],
        modules=module_rows(table, figures) if "modules" in wanted else [],
        ranges=user_ranges(table, figures, name, on_device=on_device),
        timeline=timeline(table, chosen[0]) if chosen else [],
        gpu_busy=busy if on_device else [],
        breakdown=breakdown(table, windows, busy) if windows else None,
        trace_path=trace_path,
        sort=sort,
        topk=topk,
        torch_version=torch_version,
        memory_timeline=memory.points,
        memory_peaks=memory.peaks,
        memory_alive=memory.alive,
        memory_growth=memory.growth,
        memory_note=memory.note,
        compiled_regions=compiled.regions,
        graph_breaks=compiled.breaks,
        fused_kernels=compiled.kernels,
        python_lines=lines.rows,
        python_unattributed=lines.unattributed_us,
        python_note=lines_note,
        gpu_idle=gpu_idle_rows(table, windows) if on_device else [],
        critical_path=model.path if model else [],
        critical_spans=model.spans if model else [],
        dependency_model=model.model.to_dict() if model else {},
        trust=TrustChecks(**trust_checks(table)),
        steps=steps.rows,
        step_groups=steps.groups,
        steps_summary=steps.summary,
    )


def _sources(table: EventTable, figures: Figures, source_file: str | None,
             samples: PythonSamples | None) -> list[SourceRow]:
    """``--stack``'s rows, the cell's top level split by line where samples say how."""
    rows = source_rows(table, figures, source_file)
    return split_top_level(rows, table, samples) if samples is not None else rows


def _with_gains(rows: list[OpRow], gains: dict[tuple[str, str, str], float]) -> list[OpRow]:
    """Each row with its ``max_gain_us`` (0 for a row with nothing in the median iteration)."""
    return [dataclasses.replace(r, max_gain_us=gains.get((r.kind, r.key, r.input_shapes), 0.0))
            for r in rows]


def _steps(table: EventTable, figures: Figures, windows: list[Window], name: str,
           wanted: list[str], target: str, on_device: bool, median: int) -> StepsView:
    """The steps view, when asked for (a trace recorded with ``--steps`` asks for it)."""
    if "steps" not in wanted:
        return StepsView()
    return steps_view(table, figures, windows, name, target=target, on_device=on_device,
                      memory="memory" in wanted, median_iteration=median)
