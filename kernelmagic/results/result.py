"""The result of a profiling run: a plain data object, with no torch objects inside.

Operator rows (``kernelmagic/core/rows.py``) mirror the field names of torch's
``FunctionEventAvg`` (``key``, ``count``, ``self_cpu_time_total``, ...; microseconds
summed over the profiled iterations), so what you know from ``prof.key_averages()``
carries over.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

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
from kernelmagic.core.records import RecordError, fields_from_json, fields_json
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
    TrustChecks,
    UnplacedCategory,
)
from kernelmagic.core.sorting import self_time, sort_value
from kernelmagic.core.step_rows import RepeatedCall, StepGroupRow, StepRow, StepsSummary
from kernelmagic.core.timing import TimingStats
from kernelmagic.core.units import counted

if TYPE_CHECKING:  # the convenience methods' return types (imported lazily where they run)
    import os
    from collections.abc import Iterable
    from pathlib import Path

    import pandas

    from kernelmagic.findings.base import Finding
    from kernelmagic.results.compare import Comparison
    from kernelmagic.views.critical_path import WhatIf
    from kernelmagic.views.dependencies import Model

#: Identifies the JSON written by ``to_dict``; bumped when its layout changes.
FORMAT_NAME = "kernelmagic.profile"
FORMAT_VERSION = 1


@dataclass(eq=False)
class ProfileResult:
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
    kernels: list[KernelRow] = field(default_factory=list)
    matmul_precision: str = ""
    views: list[str] = field(default_factory=list)  # deeper views asked for
    peak_memory: dict[str, float] = field(default_factory=dict)  # bytes, per iteration
    sources: list[SourceRow] = field(default_factory=list)
    modules: list[ModuleRow] = field(default_factory=list)
    ranges: list[RangeRow] = field(default_factory=list)
    timeline: list[Span] = field(default_factory=list)
    gpu_busy: list[float] = field(default_factory=list)  # kernel µs per iteration
    trace_path: str = ""
    # a trace's rank, world_size and backend
    distributed: dict[str, int | str] = field(default_factory=dict)
    planned_iters: int = 0  # iterations asked for, when Ctrl-C stopped the run early
    roofline: list[RooflineRow] = field(default_factory=list)  # --roofline
    roofline_peaks: Roofs = field(default_factory=dict)  # type: ignore[assignment]  # the roofs used
    breakdown: Breakdown | None = None  # compute / communication / memcpy / idle per iteration
    source: str = "live"  # "live" (profiled here) or "trace" (read from a trace file)
    # the backend when a device was profiled: "cuda", "rocm", or another accelerator's
    # ("mtia", "xpu", "hpu", "privateuse1": core/event_rules.py BACKENDS); "" reads as "cuda"
    gpu_runtime: str = ""
    counters: list[CounterRow] = field(default_factory=list)  # --counters, per kernel
    counters_note: str = ""  # --counters: why they are missing, or how they were joined
    capture: str = ""  # "nsight": --nsight, Nsight held CUPTI, torch's profiler did not run
    # --memory: timeline by category, peaks, alive at the peak, growth (memory_rows.py)
    memory_timeline: list[MemoryPoint] = field(default_factory=list)
    memory_peaks: list[MemoryPeakRow] = field(default_factory=list)
    memory_alive: list[LiveBlockRow] = field(default_factory=list)
    memory_growth: list[MemoryGrowthRow] = field(default_factory=list)
    memory_note: str = ""  # why categories are missing, or where the run stopped (OOM)
    # torch.compile (kernelmagic/core/compiled_rows.py): regions, graph breaks, compiles, kernels
    compiled_regions: list[CompiledRegionRow] = field(default_factory=list)
    graph_breaks: list[GraphBreakRow] = field(default_factory=list)
    compiles: list[CompileRow] = field(default_factory=list)
    fused_kernels: list[FusedKernelRow] = field(default_factory=list)
    # --python (kernelmagic/views/python_lines.py): time no op covers, per user line
    python_lines: list[PythonLineRow] = field(default_factory=list)
    python_unattributed: float = 0.0  # µs per iteration no user line held
    python_note: str = ""  # why there are no Python lines (a trace without with_stack)
    gpu_idle: list[GpuIdleRow] = field(default_factory=list)  # GPU idle per cause (views/gpu_idle)
    # events of categories kernelmagic does not know: counted, in no row (core/event_rules.py)
    unplaced: list[UnplacedCategory] = field(default_factory=list)
    # The median iteration's dependency model (views/dependencies.py, packed), its critical
    # path, and what the model found wrong with its own edges (the trust line).
    critical_path: list[CriticalPathRow] = field(default_factory=list)
    critical_spans: list[Span] = field(default_factory=list)  # --timeline: the path in time
    dependency_model: dict[str, Any] = field(default_factory=dict)
    trust: TrustChecks | None = None
    # the machine (kernelmagic/core/machine.py): the device's family and figures, which the
    # advice follows; what else used the CPU while the iterations were timed (live runs)
    device_info: DeviceInfo | None = None
    cpu_load: CpuLoad | None = None
    # --steps TARGET (kernelmagic/core/step_rows.py): each call, the calls by inputs, the loop
    steps: list[StepRow] = field(default_factory=list)
    step_groups: list[StepGroupRow] = field(default_factory=list)
    steps_summary: StepsSummary | None = None
    repeated_call: RepeatedCall | None = None  # a module called many times, without --steps
    # --try: one row per variant, each with its own ProfileResult (core/experiment_rows.py)
    experiments: list[ExperimentRow] = field(default_factory=list)
    experiments_note: str = ""  # e.g. --try auto found nothing to try
    # seconds per call of the code timed without the profiler (--try: the interleaved
    # rounds' baseline samples); empty: the warm-up runs after the first stand in
    unprofiled_timings: list[float] = field(default_factory=list)

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
    def device_label(self) -> str:
        """The device profiled, as the summary names it: ``CPU``, ``CUDA (NVIDIA H200)``,
        ``ROCm (AMD Instinct MI250X)``, ``MTIA (ARTEMIS)``. ``device`` stays ``"cuda"`` on
        ROCm, as in torch."""
        if not self.profiles_device:
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
        """The median time per call of the code without the profiler (seconds):
        ``unprofiled_timings`` where there are (``--try``'s rounds), else the warm-up runs
        after the first (the first pays for first-call set-up); None without them (a
        trace, or fewer than two warm-up runs)."""
        timings = self.unprofiled_timings or self.warmup_timings[1:]
        return statistics.median(timings) if timings else None

    @property
    def unprofiled_source(self) -> str:
        """Where ``unprofiled_s`` comes from: ``3 interleaved rounds``, ``2 warm-up runs``."""
        from kernelmagic.core.units import counted

        if self.unprofiled_timings:
            return counted(len(self.unprofiled_timings), "interleaved round")
        return counted(len(self.warmup_timings[1:]), "warm-up run") + " after the first"

    @property
    def profiler_overhead(self) -> float | None:
        """How much longer a profiled iteration took than an unprofiled one, as a share
        of the unprofiled time (0.65: profiling adds 65%); None when unknown."""
        unprofiled = self.unprofiled_s
        if not unprofiled or unprofiled <= 0 or not self.timings:
            return None
        return self.stats.median / unprofiled - 1

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

    @cached_property
    def _model(self) -> Model:
        from kernelmagic.views.dependencies import Model

        return Model.from_dict(self.dependency_model)

    def what_if(self, factors: dict[str, float], side: str = "both") -> WhatIf:
        """The median iteration if the named rows were faster: ``{"aten::addmm": 2.0}``
        makes that row twice as fast, ``float("inf")`` removes it; keys are the op
        table's row keys (or its labels, ``[range] nccl:all_reduce``). ``side``: "both"
        (the row's own CPU time and the GPU work it launched), "cpu" or "device".

        Returns a ``WhatIf`` (``views/critical_path.py``): ``iteration_us``, ``saved_us``,
        ``saved_share`` and the new critical path (``.summary``), in the measured median
        iteration's terms (``what_if({})`` gives it back). See ``docs/what-if.md``."""
        from kernelmagic.views.critical_path import WhatIf, what_if

        if not self.dependency_model:
            raise ValueError("this result has no dependency model (saved by an older "
                             "kernelmagic, or no iteration was profiled)")
        answer = what_if(self._model, factors, side)
        scale = (self.stats.median * 1e6 / answer.measured_us
                 if answer.measured_us > 0 and self.timings else 1.0)
        return WhatIf(answer.iteration_us * scale, answer.measured_us * scale,
                      answer.saved_us * scale, answer.saved_share, answer.critical_path)

    def saves_at_most(self, keys: Iterable[str], side: str = "both") -> WhatIf | None:
        """``what_if`` with every row of ``keys`` removed (``inf``), leaving out keys the
        median iteration does not hold; None when it holds none of them (or no model)."""
        if not self.dependency_model:
            return None
        held = set(self._model.row_key)
        present = [k for k in keys if k in held]
        return self.what_if(dict.fromkeys(present, float("inf")), side) if present else None

    # --- presentation --------------------------------------------------------------

    def summary(self) -> str:
        """One line: name, device, iterations, time per iteration, total self time."""
        from kernelmagic.render.text import summary_line

        return summary_line(self)

    def table(self, limit: int | None = 25, by: str | None = None) -> str:
        """An aligned text table of the top ``limit`` ops (all with ``None``)."""
        from kernelmagic.render.text import text_table

        return text_table(self, limit=limit, by=by)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        from kernelmagic.render.text import text_report

        p.text(text_report(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from kernelmagic.render.bundle import mime_bundle

        return mime_bundle(self, include=include)

    def __repr__(self) -> str:
        return (
            f"<ProfileResult {self.name!r}: {counted(self.iters, 'iteration')} on {self.device}, "
            f"{counted(len(self.rows), 'op')}>"
        )

    # --- serialisation -------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (``core/records.py``), with the format's name
        and version first; ``from_dict`` restores an equal result."""
        return {"format": FORMAT_NAME, "version": FORMAT_VERSION, **fields_json(self)}

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
        if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
            raise ValueError("not a kernelmagic profile (missing 'format' field)")
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(
                f"kernelmagic profile format version {data.get('version')!r} is not "
                f"supported (this kernelmagic reads version {FORMAT_VERSION})"
            )
        try:
            return cls.from_json_value(data)
        except RecordError as exc:
            raise ValueError(f"malformed kernelmagic profile: {exc}") from None

    @classmethod
    def from_json_value(cls, data: Any, path: str = "") -> ProfileResult:
        """``from_json``'s reading of a result (``core/records.py``): its fields, then each
        ``--try`` row's own result (``ExperimentRow.result``, declared ``Any`` in
        ``core/``, which cannot name ``ProfileResult``) as a ``ProfileResult``, checked
        like the rest; RecordError naming the field's path otherwise."""
        result: ProfileResult = fields_from_json(cls, data, path)
        rows = []
        for i, row in enumerate(result.experiments):
            inner = row.result
            if inner is not None and not isinstance(inner, ProfileResult):
                where = f"{path + '.' if path else ''}experiments[{i}].result"
                inner = cls.from_json_value(inner, where)
            rows.append(dataclasses.replace(row, result=inner))
        result.experiments = rows
        return result

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProfileResult):
            return NotImplemented
        return self.to_dict() == other.to_dict()
