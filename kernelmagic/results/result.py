"""The result of a profiling run: a plain data object, with no torch objects inside.

Operator rows (``kernelmagic/core/rows.py``) mirror the field names of torch's
``FunctionEventAvg`` (``key``, ``count``, ``self_cpu_time_total``, ...; microseconds
summed over the profiled iterations), so what you know from ``prof.key_averages()``
carries over.

What to change in the recording is worded here too, for where the result came from
(``more_iterations``, ``warm_up``, ``record``, ...): a result profiled here
(``source == "live"``) is changed with a ``%%profile`` option (``--iters 50``); one read
from a trace file (``source == "trace"``) by changing how ``torch.profiler`` recorded it
(``schedule(active=N)``, ``record_shapes=True``, a warm-up before ``start()``). Findings,
warnings and comparisons take their advice from here, so neither kind of result is told to
do what only the other can.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import typing
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from kernelmagic.core.compiled_rows import (
    CompiledRegionRow,
    CompileRow,
    FusedKernelRow,
    GraphBreakRow,
)
from kernelmagic.core.counter_metrics import CounterRow
from kernelmagic.core.event_rules import BACKEND_LABELS
from kernelmagic.core.experiment_rows import ExperimentRow
from kernelmagic.core.machine import CpuLoad, DeviceInfo
from kernelmagic.core.memory_rows import LiveBlockRow, MemoryGrowthRow, MemoryPeakRow, MemoryPoint
from kernelmagic.core.options import RECORDING
from kernelmagic.core.records import RecordError, fields_from_json, fields_json, from_json
from kernelmagic.core.rows import (
    Breakdown,
    CriticalPathRow,
    GpuIdleRow,
    KernelRow,
    ModuleRow,
    OpRow,
    PythonLineRow,
    RangeRow,
    RooflineRow,
    Roofs,
    SourceRow,
    Span,
    UnplacedCategory,
)
from kernelmagic.core.sorting import self_time, sort_value
from kernelmagic.core.step_rows import RepeatedCall, StepGroupRow, StepRow
from kernelmagic.core.timing import TimingStats
from kernelmagic.core.units import counted
from kernelmagic.views.registry import view_spec

if TYPE_CHECKING:  # the convenience methods' return types (imported lazily where they run)
    import os
    from collections.abc import Callable, Iterable, Sequence
    from pathlib import Path

    import pandas

    from kernelmagic.findings.base import Finding
    from kernelmagic.results.compare import Comparison
    from kernelmagic.results.explain import Explanation
    from kernelmagic.views.critical_path import WhatIf
    from kernelmagic.views.dependencies import Model  # noqa: F401 (Legacy["Model | None"])

#: Identifies the JSON written by ``to_dict``; bumped when its layout changes.
FORMAT_NAME = "kernelmagic.profile"
FORMAT_VERSION = 1


T = TypeVar("T")

#: The names of the flat layout (fields of results saved before views were records): each
#: name -> (view, the record's attribute). ``Legacy`` fills it.
LEGACY_NAMES: dict[str, tuple[str, str]] = {}


class Legacy(Generic[T]):
    """A name of the flat layout, read from its view's record: ``result.steps`` is
    ``result.view("steps").rows``. Files saved with the flat layout load into the records
    (``from_dict``), and ``ProfileResult(..., steps=rows)`` or ``dataclasses.replace(result,
    steps=rows)`` set the record's attribute (code written against the flat layout)."""

    def __init__(self, view: str, attr: str) -> None:
        self.view, self.attr = view, attr

    def __set_name__(self, owner: type, name: str) -> None:
        LEGACY_NAMES[name] = (self.view, self.attr)

    @overload
    def __get__(self, obj: None, owner: type) -> Legacy[T]: ...
    @overload
    def __get__(self, obj: ProfileResult, owner: type) -> T: ...
    def __get__(self, obj: ProfileResult | None, owner: type) -> Any:
        if obj is None:
            return self
        return getattr(obj.view(self.view), self.attr)


def with_legacy(records: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """``records`` with the flat layout's ``values`` (``LEGACY_NAMES``) set in their views'
    records (each view's empty record where it has none)."""
    out = dict(records)
    by_view: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        view, attr = LEGACY_NAMES[name]
        by_view.setdefault(view, {})[attr] = value
    for view, changes in by_view.items():
        spec = view_spec(view)
        assert spec is not None, view  # the built-in views are always registered
        record = out.get(view)
        out[view] = (dataclasses.replace(record, **changes) if record is not None
                     else spec.record(**changes))
    return out


class Shown:
    """IPython's display (and a cell's last line) of a result with a ``_repr_mimebundle_``
    (``ProfileResult``, ``Comparison``, ``ManyRanksResult``): the static report and the
    widget as outputs of their own (``render/bundle.py: display_outputs``)."""

    __slots__ = ()

    def _ipython_display_(self) -> None:
        from kernelmagic.render.bundle import show

        show(self._repr_mimebundle_())  # type: ignore[attr-defined]


@dataclass(eq=False)
class ProfileResult(Shown):
    """Where the time of a profiled block went.

    ``rows`` are operators and runtime calls, plus the ranges that own time directly and
    GPU work with no recorded launch (``OpRow.kind``; ``kernelmagic/views/ops.py``): every
    piece of GPU work is in exactly one row. Ranges that only wrap ops (ours, the user's,
    ``ProfilerStep#N``) and pseudo-rows such as ``[memory]`` are left out. ``kernels`` lists the GPU
    kernels (empty without CUDA). ``timings`` are the wall times of the profiled
    iterations in seconds, measured after synchronising the GPU; ``warmup_timings``
    those of the warm-up runs.
    """

    name: str
    iters: int = field(metadata={"min": 1})  # (a saved profile's, checked on the way in)
    warmup: int = field(metadata={"min": 0})
    device: str
    rows: list[OpRow]
    timings: list[float] = field(metadata={"min_items": 1})
    sort: str = "self_cpu"
    topk: int = field(default=10, metadata={"min": 1})
    device_name: str | None = None
    torch_version: str = ""
    warmup_timings: list[float] = field(default_factory=list)
    matmul_precision: str = ""
    views: list[str] = field(default_factory=list)  # deeper views asked for
    gpu_busy: list[float] = field(default_factory=list)  # kernel µs per iteration
    trace_path: str = ""
    # a trace's rank, world_size and backend
    distributed: dict[str, int | str] = field(default_factory=dict)
    planned_iters: int = 0  # iterations asked for, when Ctrl-C stopped the run early
    breakdown: Breakdown | None = None  # compute / communication / memcpy / idle per iteration
    source: str = "live"  # "live" (profiled here) or "trace" (read from a trace file)
    # the backend when a device was profiled: "cuda", "rocm", or another accelerator's
    # ("mtia", "xpu", "hpu", "privateuse1": core/event_rules.py BACKENDS); "" reads as "cuda"
    gpu_runtime: str = ""
    capture: str = ""  # "nsight": --nsight, Nsight held CUPTI, torch's profiler did not run
    # the machine (kernelmagic/core/machine.py): the device's family and figures, which the
    # advice follows; what else used the CPU while the iterations were timed (live runs)
    device_info: DeviceInfo | None = None
    cpu_load: CpuLoad | None = None
    repeated_call: RepeatedCall | None = None  # a module called many times, without --steps
    # seconds per call of the code timed without the profiler (--try: the interleaved
    # rounds' baseline samples); empty: the warm-up runs after the first stand in
    unprofiled_timings: list[float] = field(default_factory=list)
    # One record per view, whole, by the view's name (views/registry.py declares each:
    # kernels, ranges, memory, steps, python, critical_path, roofline, counters, compiled,
    # experiments, ...); a view not built has none (``view(name)`` gives its empty record).
    view_records: dict[str, Any] = field(default_factory=dict)

    # --- the views' records, by the names of the flat layout -------------------------
    # (read-only; ``ProfileResult(...)`` and ``dataclasses.replace`` take them too)
    kernels = Legacy[list[KernelRow]]("kernels", "rows")
    ranges = Legacy[list[RangeRow]]("ranges", "rows")
    sources = Legacy[list[SourceRow]]("stack", "rows")
    modules = Legacy[list[ModuleRow]]("modules", "rows")
    timeline = Legacy[list[Span]]("timeline", "rows")
    unplaced = Legacy[list[UnplacedCategory]]("unplaced", "rows")
    gpu_idle = Legacy[list[GpuIdleRow]]("gpu_idle", "rows")
    roofline = Legacy[list[RooflineRow]]("roofline", "rows")
    roofline_peaks = Legacy[Roofs]("roofline", "peaks")
    counters = Legacy[list[CounterRow]]("counters", "rows")
    counters_note = Legacy[str]("counters", "note")
    peak_memory = Legacy[dict[str, float]]("memory", "peak_memory")  # bytes, per iteration
    memory_timeline = Legacy[list[MemoryPoint]]("memory", "points")
    memory_peaks = Legacy[list[MemoryPeakRow]]("memory", "peaks")
    memory_alive = Legacy[list[LiveBlockRow]]("memory", "alive")
    memory_growth = Legacy[list[MemoryGrowthRow]]("memory", "growth")
    memory_note = Legacy[str]("memory", "note")
    compiled_regions = Legacy[list[CompiledRegionRow]]("compiled", "regions")
    graph_breaks = Legacy[list[GraphBreakRow]]("compiled", "breaks")
    compiles = Legacy[list[CompileRow]]("compiled", "compiles")
    fused_kernels = Legacy[list[FusedKernelRow]]("compiled", "kernels")
    python_lines = Legacy[list[PythonLineRow]]("python", "rows")
    python_unattributed = Legacy[float]("python", "unattributed_us")
    python_note = Legacy[str]("python", "note")
    critical_path = Legacy[list[CriticalPathRow]]("critical_path", "path")
    critical_spans = Legacy[list[Span]]("critical_path", "spans")
    dependency_model = Legacy["Model | None"]("critical_path", "model")
    trust = Legacy["TrustChecks | None"]("critical_path", "trust")
    steps = Legacy[list[StepRow]]("steps", "rows")
    step_groups = Legacy[list[StepGroupRow]]("steps", "groups")
    steps_summary = Legacy["StepsSummary | None"]("steps", "summary")
    experiments = Legacy[list[ExperimentRow]]("experiments", "rows")
    experiments_note = Legacy[str]("experiments", "note")

    def view(self, name: str) -> Any:
        """The record of view ``name`` (``views/registry.py``); its empty record when the view
        was not built; KeyError for a name no view is registered as."""
        found = self.view_records.get(name)
        if found is not None:
            return found
        spec = view_spec(name)
        if spec is None:
            raise KeyError(f"no view {name!r} is registered")
        return spec.record()

    # --- derived figures ---------------------------------------------------------

    @property
    def profiles_device(self) -> bool:
        """Whether device (CUDA) activity was profiled."""
        return self.device != "cpu"

    @property
    def from_trace(self) -> bool:
        """Whether this result was read from a trace file rather than profiled live."""
        return self.source == "trace"

    @property
    def timed_while_counting(self) -> bool:
        """Whether the times were taken while the GPU's counters were counted: a trace
        recorded with profiler metrics (CUPTI's range profiler serialises each kernel and
        replays it several times, so every launch waits for its kernel's passes).
        ``--counters`` counts in a run of its own, which is never timed."""
        return self.from_trace and bool(self.counters)

    @property
    def device_label(self) -> str:
        """The device profiled, as the summary names it: ``CPU``, ``CUDA (NVIDIA H200)``,
        ``ROCm (AMD Instinct MI250X)``, ``MTIA (ARTEMIS)``. ``device`` stays ``"cuda"`` on
        ROCm, as in torch. A trace that names its device but holds no GPU work (CUPTI's
        range profiler replaces the kernel records): ``CPU (no GPU work recorded on the
        NVIDIA A100-PG509-200 the trace names)``."""
        if not self.profiles_device:
            if self.device_name and self.from_trace:
                return f"CPU (no GPU work recorded on the {self.device_name} the trace names)"
            return "CPU"
        runtime, word = BACKEND_LABELS.get(self.gpu_runtime, (self.gpu_runtime, "device"))
        return f"{runtime} ({self.device_name or word})"

    @property
    def device_word(self) -> str:
        """What the report calls the device where it would say "GPU": ``GPU`` on CUDA and
        ROCm, the backend's name on another accelerator (``MTIA``), ``CPU`` without one."""
        if not self.profiles_device:
            return "CPU"
        return BACKEND_LABELS.get(self.gpu_runtime, ("", "device"))[1]

    @property
    def interrupted_after(self) -> int | None:
        """Completed iterations when Ctrl-C cut the run short (of ``planned_iters``), else None."""
        return self.iters if self.planned_iters > self.iters else None

    @property
    def unprofiled_s(self) -> float | None:
        """The time per call of the code without the profiler (seconds): the median of
        ``unprofiled_timings`` where there are (``--try``'s interleaved rounds), else the
        best of the warm-up runs after the first (the first pays for first-call set-up; the
        next ones may still be warming up, and warming and a loaded machine only ever slow a
        run, so the best of a few is the fair figure); None without them (a trace, or fewer
        than two warm-up runs)."""
        if self.unprofiled_timings:
            return statistics.median(self.unprofiled_timings)
        return min(self.warmup_timings[1:]) if self.warmup_timings[1:] else None

    @property
    def unprofiled_source(self) -> str:
        """Where ``unprofiled_s`` comes from: ``3 interleaved rounds``, ``the best of 2
        warm-up runs after the first``."""
        if self.unprofiled_timings:
            return counted(len(self.unprofiled_timings), "interleaved round")
        return ("the best of " + counted(len(self.warmup_timings[1:]), "warm-up run")
                + " after the first")

    @property
    def profiler_overhead(self) -> float | None:
        """How much longer a profiled iteration took than an unprofiled one, as a share
        of the unprofiled time (0.65: profiling adds 65%), like against like: medians
        against the interleaved rounds' median, the best profiled iteration against the
        best warm-up run; None when unknown."""
        unprofiled = self.unprofiled_s
        if not unprofiled or unprofiled <= 0 or not self.timings:
            return None
        profiled = self.stats.median if self.unprofiled_timings else self.stats.best
        return profiled / unprofiled - 1

    @cached_property
    def stats(self) -> TimingStats:
        """Median, spread, best and worst of ``timings``."""
        return TimingStats.of(self.timings)

    @cached_property
    def self_cpu_time_total(self) -> float:
        """Sum of the ops' self CPU time (µs, all iterations): nothing counted twice."""
        return sum(r.self_cpu_time_total for r in self.rows)

    @cached_property
    def self_device_time_total(self) -> float:
        """Sum of the ops' self device time (µs, all iterations)."""
        return sum(r.self_device_time_total for r in self.rows)

    @property
    def self_time_total(self) -> float:
        """Total self time on the primary device (the GPU when profiled, else the CPU)."""
        return self_time(self, self.profiles_device)

    @cached_property
    def op_totals(self) -> list[OpRow]:
        """One row per op name: ``rows`` with shape-split rows (``--shapes``) summed."""
        if "shapes" not in self.views:
            return self.rows
        merged: dict[tuple[str, str], OpRow] = {}
        for row in self.rows:
            seen = merged.get((row.key, row.kind))
            if seen is None:
                merged[(row.key, row.kind)] = dataclasses.replace(row, input_shapes="")
                continue
            sums = {f.name: getattr(seen, f.name) + getattr(row, f.name)
                    for f in dataclasses.fields(OpRow)
                    if f.name not in ("key", "input_shapes", "kind")}
            merged[(row.key, row.kind)] = dataclasses.replace(seen, **sums)
        return list(merged.values())

    @cached_property
    def roofline_verdict(self) -> dict[str, float]:
        """Share of the ops' time that is compute-, memory- and overhead-bound."""
        from kernelmagic.core.roofline_bounds import verdict

        return verdict(self.roofline)

    def value(self, row: OpRow, by: str | None = None) -> float:
        """The figure of ``row`` that sort key ``by`` orders by."""
        return sort_value(by or self.sort, self.profiles_device)(row)

    def share(self, row: OpRow, device: bool | None = None) -> float:
        """``row``'s self time as a fraction of the total self time (CPU or device)."""
        on_device = self.profiles_device if device is None else device
        total = self_time(self, on_device)  # the result's totals are named as the rows' fields
        return self_time(row, on_device) / total if total > 0 else 0.0

    def share_of(self, rows: Any, among: Any = None, device: bool | None = None) -> float:
        """Some rows' self time as a fraction of the self time of ``among`` (default: the
        rows; pass ``op_totals`` for rows taken from it): exactly 1 when the rows left out
        have none, and under 1 when they have some (a sum of shares rounds to either side
        of 1, and "100%" is printed only for all of it)."""
        on_device = self.profiles_device if device is None else device
        chosen = {id(r) for r in rows}
        among = self.rows if among is None else among
        part = sum(self_time(r, on_device) for r in among if id(r) in chosen)
        rest = sum(self_time(r, on_device) for r in among if id(r) not in chosen)
        if rest <= 0:
            return 1.0 if part > 0 else 0.0
        return min(part / (part + rest), math.nextafter(1.0, 0.0))

    def top(self, k: int | None = None, by: str | None = None) -> list[OpRow]:
        """The ``k`` rows with the largest value of sort key ``by`` (default: ``sort``)."""
        key = sort_value(by or self.sort, self.profiles_device)
        ordered = sorted(self.rows, key=lambda r: (-key(r), r.key))
        return ordered if k is None else ordered[:k]

    def what_if(self, factors: dict[str, float], side: str = "both") -> WhatIf:
        """The median iteration if the named rows were faster: ``{"aten::addmm": 2.0}``
        makes that row twice as fast, ``float("inf")`` removes it; keys are the op
        table's row keys (or its labels, ``[range] nccl:all_reduce``). ``side``: "both"
        (the row's own CPU time and the GPU work it launched), "cpu" or "device".

        Returns a ``WhatIf`` (``views/critical_path.py``): ``iteration_us``, ``saved_us``,
        ``saved_share`` and the new critical path (``.summary``), in the measured median
        iteration's terms (``what_if({})`` gives it back). See ``docs/what-if.md``."""
        from kernelmagic.views.critical_path import WhatIf, what_if

        model = self.dependency_model
        if not model:
            raise ValueError("this result has no dependency model (saved by an older "
                             "kernelmagic, or no iteration was profiled)")
        answer = what_if(model, factors, side)
        scale = self.model_scale
        return WhatIf(answer.iteration_us * scale, answer.measured_us * scale,
                      answer.saved_us * scale, answer.saved_share, answer.critical_path)

    def explain(self, name: str, what_if: bool = True) -> Explanation:
        """One row taken apart: its GPU work by kernel, input shapes, call sites, time in
        each iteration, memory, roofline point and what making it faster would buy, from
        this result (no new profile). ``name``: a row's key or label (``aten::addmm``,
        ``[range] nccl:all_reduce``) or a kernel's name; an unknown name raises
        ``UnknownRow`` (a LookupError) with the nearest names. Shows as text in a terminal
        and as HTML in a notebook; ``.to_pandas("kernels")`` etc. give its tables. See
        ``docs/views.md``. ``what_if=False`` skips the what-ifs (twice as fast, gone)."""
        from kernelmagic.results.explain import explain

        return explain(self, name, what_if)

    @property
    def model_scale(self) -> float:
        """The measured median iteration over the dependency model's window: what the
        model's times are multiplied by to be in the median iteration's terms, as
        ``what_if``'s answers, the path and the gains are (1 without a model or timings)."""
        model = self.dependency_model
        window_ns = model.window_ns if model else 0
        return self.stats.median * 1e9 / window_ns if window_ns > 0 and self.timings else 1.0

    @cached_property
    def priceable_keys(self) -> frozenset[str]:
        """The row keys whose removal the dependency model can see in the median
        iteration (``views/critical_path.py: priceable_rows``): their what-ifs are
        answers, where another row's "saves nothing" would be the model's blind spot
        (empty without a model)."""
        m = self.dependency_model
        if not m:
            return frozenset()
        from kernelmagic.views.critical_path import priceable_rows

        return frozenset(k for k, seen in zip(m.row_key, priceable_rows(m).tolist(),
                                              strict=True) if seen)

    @cached_property
    def unseen_keys(self) -> frozenset[str]:
        """The row keys the dependency model's median iteration holds but whose removal it
        cannot see (``priceable_keys``: gloo's collectives on threads the iteration's thread
        records no wait on): their ``max_gain_us`` of 0 is the model's blind spot."""
        m = self.dependency_model
        return frozenset(m.row_key) - self.priceable_keys if m else frozenset()

    def gain_shown(self, row: OpRow) -> float | None:
        """``row``'s max gain per iteration as every report shows it (the op table's
        ``max gain/iter``, the chart, ``to_pandas``: ``OpRow.gain_per_iteration``); None,
        shown "—", where the model holds the row but cannot see its removal
        (``unseen_keys``), rather than a saving of 0."""
        return None if row.key in self.unseen_keys else row.gain_per_iteration(self.iters)

    def saves_at_most(self, asks: Sequence[tuple[Iterable[str], str]]
                      ) -> list[tuple[float, float] | None]:
        """For each ``(keys, side)`` of ``asks``: ``(saved_us, iteration_us)``, what
        ``what_if`` gives with every row of ``keys`` removed (``inf``) on ``side``, leaving out
        keys the median iteration does not hold, or holds only where the model cannot see
        their removal (``priceable_rows``); None where that leaves none of them (or there
        is no model). One batched replay answers them all (``saved_each``)."""
        m = self.dependency_model
        if not m:
            return [None] * len(asks)
        from kernelmagic.views.critical_path import saved_each

        held = self.priceable_keys
        present = [[k for k in keys if k in held] for keys, _ in asks]
        wanted = [i for i, keys in enumerate(present) if keys]
        saved = saved_each(m, [(dict.fromkeys(present[i], float("inf")), asks[i][1])
                               for i in wanted])
        measured_us = m.window_ns / 1000.0
        scale = self.model_scale
        out: list[tuple[float, float] | None] = [None] * len(asks)
        for i, ns in zip(wanted, saved.tolist(), strict=True):
            out[i] = (ns / 1000.0 * scale, measured_us * scale)
        return out

    # --- presentation --------------------------------------------------------------

    def summary(self) -> str:
        """One line: name, device, iterations, time per iteration, total self time."""
        from kernelmagic.render.text import summary_line

        return summary_line(self)

    def table(self, limit: int | None = 25, by: str | None = None,
              all_columns: bool = False) -> str:
        """An aligned text table of the top ``limit`` ops (all with ``None``), figures per
        iteration: the default columns, every one with ``all_columns``."""
        from kernelmagic.render.text import text_table

        return text_table(self, limit=limit, by=by, all_columns=all_columns)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        from kernelmagic.render.text import text_report

        p.text(text_report(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from kernelmagic.render.bundle import mime_bundle

        return mime_bundle(self, include=include)

    def __repr__(self) -> str:
        return (f"<ProfileResult {self.name!r}: {counted(self.iters, 'iteration')} on "
                f"{self.device}, {counted(len(self.rows), 'op')}>")

    # --- serialisation -------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (``core/records.py``), with the format's name
        and version first; ``from_dict`` restores an equal result."""
        data = fields_json(dataclasses.replace(self, view_records=self._kept_records()))
        return {"format": FORMAT_NAME, "version": FORMAT_VERSION, **data}

    def _kept_records(self) -> dict[str, Any]:
        """The records that hold something (an empty record reads the same as none)."""
        return {name: record for name, record in self.view_records.items()
                if (spec := view_spec(name)) is None or record != spec.record()}

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write this result as JSON (``kernelmagic.load(path)`` reads it back)."""
        from kernelmagic.io.storage import save

        return save(self, path)

    def to_pandas(self, view: str = "ops") -> pandas.DataFrame:
        """One view as a ``pandas.DataFrame``: ``"ops"`` (the op rows, µs summed over the
        iterations), ``"kernels"``, ``"timeline"``, ``"timings"`` (seconds per iteration),
        ... (``kernelmagic.io.frames.view_names(result)`` lists them). Needs pandas."""
        from kernelmagic.io.frames import to_pandas

        return to_pandas(self, view)

    def compare(self, before: ProfileResult) -> Comparison:
        """This run against an earlier one: a ``Comparison`` (``before`` -> ``self``)."""
        from kernelmagic.results.compare import compare

        return compare(before, self)

    def findings(self) -> list[Finding]:
        """Plain-language observations about this profile, each with its numbers."""
        return list(self._findings)

    @cached_property
    def _findings(self) -> list[Finding]:
        # The text, HTML and widget renderers each list them: run the rules once.
        from kernelmagic.findings import find

        return find(self)

    @classmethod
    def from_dict(cls, data: Any) -> ProfileResult:
        """Rebuild a result from ``to_dict`` output, every field checked against its declared
        type; ValueError on another format, or naming the field that does not fit
        (``malformed kernelmagic profile: rows[0].count: expected an integer, got "3"``)."""
        return read_saved(data, FORMAT_NAME, FORMAT_VERSION, "profile", cls.from_json_value)

    @classmethod
    def from_json_value(cls, data: Any, path: str = "") -> ProfileResult:
        """``from_json``'s reading of a result (``core/records.py``): its fields, each view's
        record (``view_records``; a file saved with the flat layout holds the records'
        attributes under ``LEGACY_NAMES``), then each ``--try`` row's own result
        (``ExperimentRow.result``, declared ``Any`` in ``core/``, which cannot name
        ``ProfileResult``) as a ``ProfileResult``, checked like the rest; RecordError naming
        the field's path otherwise."""
        result: ProfileResult = fields_from_json(cls, data, path)
        prefix = f"{path}." if path else ""
        records: dict[str, Any] = {}
        for name, value in result.view_records.items():
            spec = view_spec(name)
            if spec is not None:  # (a view of a newer kernelmagic is left out)
                records[name] = fields_from_json(spec.record, value,
                                                 f"{prefix}view_records.{name}")
        flat = {name: _legacy_value(name, data[name], prefix + name)
                for name in LEGACY_NAMES if name in data}
        result.view_records = with_legacy(records, flat)
        tried = result.view_records.get("experiments")
        if tried is not None:
            rows = [dataclasses.replace(row, result=_inner(cls, row.result,
                                                           f"{prefix}experiments[{i}].result"))
                    for i, row in enumerate(tried.rows)]
            result.view_records["experiments"] = dataclasses.replace(tried, rows=rows)
        return result

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProfileResult):
            return NotImplemented
        return self.to_dict() == other.to_dict()


def read_saved(data: Any, name: str, version: int, what: str, read: Callable[[Any], T]) -> T:
    """``read(data)`` for the JSON of a saved result of format ``name`` and ``version``
    (``what`` names the kind in messages: ``profile``, ``many-ranks result``); ValueError
    on another format or version, or naming the field that does not fit."""
    if not isinstance(data, dict) or data.get("format") != name:
        raise ValueError(f"not a kernelmagic {what} (missing 'format' field)")
    if data.get("version") != version:
        raise ValueError(f"kernelmagic {what.removesuffix(' result')} format version "
                         f"{data.get('version')!r} is not supported (this kernelmagic reads "
                         f"version {version})")
    try:
        return read(data)
    except RecordError as exc:
        raise ValueError(f"malformed kernelmagic {what}: {exc}") from None


_dataclass_init = ProfileResult.__init__


def _init(self: ProfileResult, *args: Any, **kwargs: Any) -> None:
    """The dataclass's ``__init__``, taking the flat layout's names too (``Legacy``)."""
    legacy = {name: kwargs.pop(name) for name in list(kwargs) if name in LEGACY_NAMES}
    _dataclass_init(self, *args, **kwargs)
    if legacy:
        self.view_records = with_legacy(self.view_records, legacy)


ProfileResult.__init__ = _init  # type: ignore[method-assign]


def _legacy_value(name: str, value: Any, path: str) -> Any:
    """A flat layout field's value, checked against its record attribute's declared type."""
    view, attr = LEGACY_NAMES[name]
    spec = view_spec(view)
    assert spec is not None, view
    return from_json(typing.get_type_hints(spec.record)[attr], value, path)


def _inner(cls: type[ProfileResult], inner: Any, path: str) -> Any:
    """An experiment's own result, read as a ``ProfileResult`` when it is still JSON."""
    if inner is None or isinstance(inner, ProfileResult):
        return inner
    return cls.from_json_value(inner, path)


# --- advice that fits the source ------------------------------------------------------


def more_iterations(result: ProfileResult, n: int) -> str:
    """Advice to measure ``n`` iterations, as an option live, as a schedule for a trace."""
    if result.from_trace:
        return (f"record more steps (torch.profiler.schedule(active={n}), "
                "prof.step() after each)")
    return f"run more iterations (--iters {n})"


def at_least_iterations(result: ProfileResult, n: int) -> str:
    """``use --iters 5 or more`` live, ``record 5 or more steps: ...`` for a trace."""
    if result.from_trace:
        return f"record {n} or more steps: torch.profiler.schedule(active={n})"
    return f"use --iters {n} or more"


def warm_up(result: ProfileResult) -> str:
    """What leaves the first, slow runs out of the measurement, as a clause
    (``profile steady state: {warm_up(result)}, and ...``)."""
    if result.from_trace:
        return ("a warm-up before the profiler records (torch.profiler.schedule(wait=1, "
                "warmup=1, active=N), or a few steps before prof.start())")
    return "more warm-up runs (--warmup)"


def record(result: ProfileResult, option: str) -> str:
    """How to record what ``%%profile`` option ``option`` (``--shapes``) adds: the option
    itself live, its ``torch.profiler.profile`` argument for a trace."""
    if option not in RECORDING:
        raise ValueError(f"unknown recording option {option!r}; expected one of "
                         f"{', '.join(RECORDING)}")
    if result.from_trace:
        return f"torch.profiler.profile({RECORDING[option]})"
    return option


def timing_warning(result: ProfileResult) -> str | None:
    """The summary's warning about one slow iteration, with advice that fits the source
    (``TimingStats.warning`` with a trace's own advice in place of ``--warmup``/``--iters``)."""
    if result.from_trace:
        return result.stats.warning(
            advice="Warm up before the profiler records (torch.profiler.schedule(wait=1, "
                   "warmup=1, active=N)) and record more steps.")
    return result.stats.warning()
