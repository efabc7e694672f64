"""The built-in views' declarations (``views/registry.py``), in the order the reports list
them, and the records of the views that had none of their own.

Each declaration names its record, how ``build_result`` builds it (None: a later step of
the live run sets it), the option that asks for it, its frames for ``to_pandas``, the
renderer functions of its tables, notes and picture, and the findings that read it. A view
of a new subject declares itself the same way in its own module (``docs/architecture.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelmagic.core.compiled_rows import (
    CompiledRegionRow,
    CompileRow,
    FusedKernelRow,
    GraphBreakRow,
)
from kernelmagic.core.counter_metrics import CounterRow
from kernelmagic.core.event_rules import UNPLACED_KEY
from kernelmagic.core.events import PythonSamples
from kernelmagic.core.experiment_rows import ExperimentRow
from kernelmagic.core.memory_rows import LiveBlockRow, MemoryGrowthRow, MemoryPeakRow, MemoryPoint
from kernelmagic.core.records import fields_json
from kernelmagic.core.rows import (
    CriticalPathRow,
    GpuIdleRow,
    KernelRow,
    ModuleRow,
    PythonLineRow,
    RangeRow,
    RooflineRow,
    Roofs,
    SourceRow,
    Span,
    TrustChecks,
    UnplacedCategory,
)
from kernelmagic.core.step_rows import StepGroupRow, StepRow
from kernelmagic.views.compiled import CompiledView, compiled_view
from kernelmagic.views.counters import counter_rows, join_note
from kernelmagic.views.dependencies import Model
from kernelmagic.views.gpu_idle import gpu_idle_rows
from kernelmagic.views.memory import (
    PEAK,
    MemoryViews,
    device_label,
    ledger_from_table,
    memory_views,
    named_peaks,
)
from kernelmagic.views.ops import kernel_rows
from kernelmagic.views.python_lines import (
    TRACE_HINT,
    PythonLines,
    python_lines,
    split_top_level,
)
from kernelmagic.views.ranges import module_rows, user_ranges
from kernelmagic.views.registry import Frame, ViewInputs, ViewSpec, register, rows_record
from kernelmagic.views.source_lines import source_rows
from kernelmagic.views.steps import StepsView, steps_view
from kernelmagic.views.timeline import peak_memory, timeline

__all__ = ["CountersView", "CriticalPathView", "ExperimentsView", "GpuIdleView", "KernelsView",
           "ModulesView", "RangesView", "RooflineView", "SourcesView", "TimelineView",
           "UnplacedView"]


# The views that hold one list of rows and nothing else, or a note too
# (``registry.rows_record``).
KernelsView = rows_record("KernelsView", KernelRow, "The GPU kernels (empty without a "
                          "device: ``views/ops.py: kernel_rows``).", __name__)
RangesView = rows_record("RangesView", RangeRow, "The user's ``record_function`` ranges "
                         "(``views/ranges.py: user_ranges``).", __name__)
SourcesView = rows_record("SourcesView", SourceRow, "``--stack``: op time per Python "
                          "function of yours, the cell's first.", __name__)
ModulesView = rows_record("ModulesView", ModuleRow, "``--modules``: time per ``nn.Module`` "
                          "call path, nested.", __name__)
UnplacedView = rows_record("UnplacedView", UnplacedCategory, "Events of categories "
                           "kernelmagic does not know: counted, in no row "
                           "(``core/event_rules.py``), the most time first.", __name__)
GpuIdleView = rows_record("GpuIdleView", GpuIdleRow, "Why the GPU waits: its idle time per "
                          "cause (``views/gpu_idle.py``).", __name__)
CountersView = rows_record("CountersView", CounterRow, "``--counters``: hardware counters "
                           "per kernel, and why they are missing or how they were joined "
                           "to the kernels.", __name__, note=True)
ExperimentsView = rows_record("ExperimentsView", ExperimentRow, "``--try``: one row per "
                              "variant, each with its own result "
                              "(``core/experiment_rows.py``), and a note (``--try auto`` "
                              "found nothing to try).", __name__, note=True)


@dataclass(frozen=True)
class CriticalPathView:
    """The median iteration's dependency model (``views/dependencies.py``; saved packed, so
    that ``what_if`` works on a saved result: packed when saved, not when built), its
    critical path (``spans``: in time, with ``--timeline``) and what the model found wrong
    with its own edges (the trust line)."""

    path: list[CriticalPathRow] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    model: Model | None = None
    trust: TrustChecks | None = None

    def __post_init__(self) -> None:
        if isinstance(self.model, dict):  # packed (``Model.to_dict``), as code written
            # against the flat layout gives it: ``ProfileResult(..., dependency_model=...)``
            object.__setattr__(self, "model",
                               Model.from_json_value(self.model, "critical_path.model"))

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON values; no model as ``{}``, as kernelmagic wrote it before the
        model was a field of its own (an older reader takes an object only)."""
        out = fields_json(self)
        if self.model is None:
            out["model"] = {}
        return out


@dataclass(frozen=True)
class RooflineView:
    """``--roofline``: each op's counts joined to its time, and the roofs used."""

    rows: list[RooflineRow] = field(default_factory=list)
    peaks: Roofs = field(default_factory=dict)  # type: ignore[assignment]


@dataclass(frozen=True)
class TimelineView:
    """``--timeline``: one iteration's spans (the report's timeline picture): the median
    iteration's (``iteration`` -1), or, with ``--memory``, the memory peak's
    (``timeline_at_peak``), the iteration the memory chart and the peak note name."""

    rows: list[Span] = field(default_factory=list)
    iteration: int = -1  # the iteration drawn, when not the median one


def timeline_at_peak(inputs: ViewInputs, memory: MemoryViews | None,
                     drawn: TimelineView | None) -> TimelineView | None:
    """The timeline redrawn at the iteration of the memory peak the report names (on a
    device run the device's, else the CPU's) when that is not the median iteration."""
    if drawn is None or memory is None:
        return drawn
    named = sorted(named_peaks(memory.peaks), key=lambda p: p.device == device_label(-1))
    if not named or named[0].iteration == _median_shown(inputs):
        return drawn
    at = named[0].iteration
    if not 0 <= at < len(inputs.windows):
        return drawn
    return TimelineView(timeline(inputs.table, inputs.windows[at]), iteration=at)


def _median_shown(inputs: ViewInputs) -> int:
    """The median iteration's index among the windows (0 without any)."""
    return min(inputs.median, max(len(inputs.windows) - 1, 0))


def build_gpu_idle(inputs: ViewInputs) -> GpuIdleView | None:
    if not inputs.on_device:
        return None
    return GpuIdleView(gpu_idle_rows(inputs.table, list(inputs.windows),
                                     inputs.extra.get("line_samples"), inputs.source_file,
                                     inputs.cell_label))


def build_python(inputs: ViewInputs) -> PythonLines:
    """``--python``: the time no op covered, shared out among the Python lines the live
    sampler saw there, else those of a trace's ``with_stack`` frames (then a note says how
    to record them when it has none)."""
    samples = inputs.extra.get("line_samples") or PythonSamples()
    lines = python_lines(inputs.table, list(inputs.windows), samples, inputs.source_file,
                         inputs.cell_label)
    from_trace = inputs.extra.get("python_samples") is None
    lines.note = TRACE_HINT if from_trace and not samples.n else ""
    return lines


def build_memory(inputs: ViewInputs) -> MemoryViews:
    """``--memory``. ``device_peaks``: per-iteration device memory peaks (bytes) measured
    live; default from the table's device memory records. ``memory_ledger``: the run's
    memory changes with their categories (``live/memory_categories.py``); default the
    table's records, every category "unknown". The memory timeline is the iteration of
    the peak the report names (``views.memory.highest_peak``), or every iteration's with
    ``memory_all``."""
    table, windows = inputs.table, list(inputs.windows)
    device_peaks: Sequence[float] | None = inputs.extra.get("device_peaks")
    device_peak = (max(device_peaks or [0.0]) if device_peaks is not None
                   else peak_memory(table, windows, on_device=True))
    ledger = inputs.extra.get("memory_ledger")
    ledger = ledger if ledger is not None else ledger_from_table(table)
    shown = None if inputs.extra.get("memory_all", False) else PEAK
    memory = memory_views(table, windows, ledger, shown, name=inputs.name)
    memory.note = ledger.note
    memory.peak_memory = {"cpu": peak_memory(table, windows), "device": device_peak}
    return memory


def build_steps(inputs: ViewInputs) -> StepsView:
    return steps_view(inputs.table, inputs.figures, list(inputs.windows), inputs.name,
                      target=inputs.extra.get("steps_target", ""), on_device=inputs.on_device,
                      memory="memory" in inputs.views, median_iteration=inputs.median)


def build_counters(inputs: ViewInputs) -> CountersView:
    """The counters per kernel a trace recorded with profiler metrics holds, and how they
    were joined to its kernels (a live run's come from a run of their own)."""
    return CountersView(counter_rows(inputs.table), join_note(inputs.table))


def build_compiled(inputs: ViewInputs) -> CompiledView:
    return compiled_view(inputs.table, inputs.figures, list(inputs.windows))


def build_kernels(inputs: ViewInputs) -> KernelsView | None:
    return (KernelsView(kernel_rows(inputs.table, inputs.name, inputs.figures))
            if inputs.on_device else None)


def build_ranges(inputs: ViewInputs) -> RangesView:
    return RangesView(user_ranges(inputs.table, inputs.figures, inputs.name,
                                  on_device=inputs.on_device))


def build_sources(inputs: ViewInputs) -> SourcesView:
    """``--stack``'s rows, the cell's top level split by line where samples say how."""
    rows = source_rows(inputs.table, inputs.figures, inputs.source_file)
    samples = inputs.extra.get("python_samples")
    if samples is not None:
        rows = split_top_level(rows, inputs.table, samples)
    return SourcesView(rows)


def build_modules(inputs: ViewInputs) -> ModulesView:
    return ModulesView(module_rows(inputs.table, inputs.figures))


def build_timeline(inputs: ViewInputs) -> TimelineView | None:
    """The median iteration's spans (none without a timed iteration)."""
    if not inputs.windows or not inputs.extra.get("timed", True):
        return None
    return TimelineView(timeline(inputs.table, inputs.windows[_median_shown(inputs)]))


def build_unplaced(inputs: ViewInputs) -> UnplacedView:
    """The categories the source could not place (its ``meta``'s ``UNPLACED_KEY``)."""
    found = inputs.table.meta.get(UNPLACED_KEY) or {}
    rows = [UnplacedCategory(category=str(cat), events=int(count), time_us=ns / 1000)
            for cat, (count, ns) in found.items()]
    return UnplacedView(sorted(rows, key=lambda r: (-r.time_us, r.category)))


R = "kernelmagic.render."

KERNELS = register(ViewSpec(
    "kernels", KernelsView, build_kernels, order=10,
    frames=(Frame("kernels", "rows", KernelRow),), tables=R + "views:kernel_tables"))
RANGES = register(ViewSpec(
    "ranges", RangesView, build_ranges, order=20,
    frames=(Frame("ranges", "rows", RangeRow),), tables=R + "views:range_tables"))
TIMELINE = register(ViewSpec(
    "timeline", TimelineView, build_timeline, option="timeline", order=25,
    frames=(Frame("timeline", "rows", Span),)))
UNPLACED = register(ViewSpec(
    "unplaced", UnplacedView, build_unplaced, order=26,
    frames=(Frame("unplaced", "rows", UnplacedCategory),)))
SOURCES = register(ViewSpec(
    "stack", SourcesView, build_sources, option="stack", order=40,
    frames=(Frame("stack", "rows", SourceRow),), tables=R + "views:source_tables"))
MODULES = register(ViewSpec(
    "modules", ModulesView, build_modules, option="modules", order=60,
    frames=(Frame("modules", "rows", ModuleRow),), tables=R + "views:module_tables"))

GPU_IDLE = register(ViewSpec(
    "gpu_idle", GpuIdleView, build_gpu_idle, order=30,
    frames=(Frame("gpu_idle", "rows", GpuIdleRow),),
    tables=R + "views:gpu_idle_tables", findings=("gpu_idle",)))
PYTHON = register(ViewSpec(
    "python", PythonLines, build_python, option="python", order=50,
    frames=(Frame("python", "rows", PythonLineRow),),
    tables=R + "views:python_tables", findings=("python_between_ops",)))
ROOFLINE = register(ViewSpec(
    "roofline", RooflineView, option="roofline", order=70,
    frames=(Frame("roofline", "rows", RooflineRow),),
    tables=R + "roofline:roofline_tables", notes=R + "roofline:roofline_notes",
    picture=R + "roofline:roofline_picture",
    findings=("memory_bound", "overhead_bound", "compute_far_from_peak",
              "unexplained_by_roofline")))
COUNTERS = register(ViewSpec(
    "counters", CountersView, build_counters, option="counters", order=80,
    frames=(Frame("counters", "rows", CounterRow),),
    tables=R + "counters:counter_views", notes=R + "counters:capture_notes",
    findings=("dram_near_peak", "poor_reuse")))
MEMORY = register(ViewSpec(
    "memory", MemoryViews, build_memory, option="memory", order=90,
    frames=(Frame("memory_timeline", "points", MemoryPoint),
            Frame("memory_peaks", "peaks", MemoryPeakRow),
            Frame("memory_alive", "alive", LiveBlockRow),
            Frame("memory_growth", "growth", MemoryGrowthRow)),
    tables=R + "memory:memory_tables", picture=R + "memory:memory_picture",
    findings=("memory_growth",)))
STEPS = register(ViewSpec(
    "steps", StepsView, build_steps, option="steps", order=100,
    frames=(Frame("steps", "rows", StepRow), Frame("step_groups", "groups", StepGroupRow)),
    tables=R + "steps:steps_tables", notes=R + "steps:steps_notes",
    findings=("step_overhead", "steps_slow_down", "slow_first_step", "time_between_steps")))
COMPILED = register(ViewSpec(
    "compiled", CompiledView, build_compiled, order=110,
    frames=(Frame("compiled_regions", "regions", CompiledRegionRow),
            Frame("graph_breaks", "breaks", GraphBreakRow),
            Frame("compiles", "compiles", CompileRow),
            Frame("fused_kernels", "kernels", FusedKernelRow)),
    tables=R + "compiled:compiled_tables", notes=R + "compiled:compiled_notes",
    findings=("graph_break_gap", "recompile_in_loop", "mostly_eager")))
EXPERIMENTS = register(ViewSpec(
    "experiments", ExperimentsView, option="variants", order=120,
    frames=(Frame("experiments", "rows", ExperimentRow),),
    tables=R + "experiments:experiments_tables", notes=R + "experiments:experiments_notes",
    picture=R + "experiments:experiments_picture"))
# Built with the op rows (their ``max_gain_us``) by ``build_result``; its line is among the
# run's own notes, beside the GPU's busy time (``render/views.py: view_notes``).
CRITICAL_PATH = register(ViewSpec(
    "critical_path", CriticalPathView, order=130,
    frames=(Frame("critical_path", "path", CriticalPathRow),
            Frame("critical_spans", "spans", Span))))
