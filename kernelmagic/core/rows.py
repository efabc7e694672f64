"""The rows a profile is made of: plain, frozen, JSON-friendly records (times in µs).

``OpRow`` mirrors torch's ``FunctionEventAvg`` field names. The other rows hold the
deeper views: GPU kernels, source lines, modules, user ranges, and timeline spans.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from kernelmagic.core.records import Record, unit
from kernelmagic.core.units import counted, format_us


@dataclass(frozen=True)
class OpRow(Record):
    """One operator, aggregated over all profiled iterations.

    ``kind`` says what the row is: ``"op"`` (an operator or runtime call, as in torch's
    ``key_averages()``), ``"range"`` (a range that owns time directly: it launched GPU
    work with no op in between, or has no op under it), ``"unlaunched"`` (GPU work whose
    launch is not in the trace) or ``"no op"`` (GPU work an iteration marker,
    ``ProfilerStep#N``, launched with no op between). See ``kernelmagic/views/ops.py``.

    Memory fields (bytes) are filled with ``--memory``, ``flops`` with ``--flops``
    (0 where torch cannot count them), ``input_shapes`` with ``--shapes``.
    """

    key: str
    count: int = unit("calls, summed over {over}")
    self_cpu_time_total: float = unit("µs, summed over {over}")
    cpu_time_total: float = unit("µs, summed over {over}")
    self_device_time_total: float = unit("µs, summed over {over}", 0.0)
    device_time_total: float = unit("µs, summed over {over}", 0.0)
    input_shapes: str = ""
    flops: float = unit("FLOP, summed over {over}", 0.0)
    self_cpu_memory_usage: float = unit("bytes, summed over {over}", 0.0)
    cpu_memory_usage: float = unit("bytes, summed over {over}", 0.0)
    self_device_memory_usage: float = unit("bytes, summed over {over}", 0.0)
    device_memory_usage: float = unit("bytes, summed over {over}", 0.0)
    kind: str = "op"
    max_gain_us: float = unit("µs the median iteration would shrink without this row", 0.0)

    def per_iteration(self, field: str, iters: int) -> float:
        """A summed field as a mean per iteration: ``field`` over ``iters`` (the op table's
        basis, ``render/table.py: op_table``)."""
        return float(getattr(self, field)) / max(1, iters)

    def gain_per_iteration(self, iters: int) -> float:
        """``max_gain_us`` on the op table's basis: the dependency model's saving for the
        median iteration, at most the row's inclusive time per iteration (the mean over
        ``iters``, CPU or device, whichever is longer), so a row never claims to save more
        than the time the same line gives it."""
        inclusive = max(self.cpu_time_total, self.device_time_total) / max(1, iters)
        return min(self.max_gain_us, inclusive)

    @property
    def label(self) -> str:
        """The row's name as reports show it: its key, marked when the row is not an op
        (``KIND_MARKS``: ``[range] nccl:all_reduce``)."""
        return marked_key(self.kind, self.key)

    @property
    def cpu_time(self) -> float:
        """Total (inclusive) CPU time per call, as torch's ``cpu_time``."""
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def device_time(self) -> float:
        """Total (inclusive) device time per call, as torch's ``device_time``."""
        return self.device_time_total / self.count if self.count else 0.0


#: How a row that is not an op is marked wherever its name is shown (table, chart, text,
#: HTML, ``what_if`` keys): a range that owns time itself, GPU work whose launch the trace
#: does not hold, GPU work an iteration marker launched with no op between
#: (``[no op] ProfilerStep``).
KIND_MARKS = {"range": "[range] ", "unlaunched": "[no launch] ", "no op": "[no op] "}


def marked_key(kind: str, key: str) -> str:
    """A row's key as the reports show it: marked when the row is not an op (``KIND_MARKS``:
    ``[range] nccl:all_reduce``); ``OpRow.label``, and any row's in ``render/table.py``."""
    return KIND_MARKS.get(kind, "") + key


@dataclass(frozen=True)
class CriticalPathRow(Record):
    """Time on the median iteration's critical path (``views/critical_path.py``), µs per
    iteration, by category ("CPU ops", "GPU work", "waiting on syncs", ...) and row (the
    op table's ``key`` and ``kind``; "" for time no row owns: idle, launch latency)."""

    category: str
    key: str
    kind: str = ""
    time: float = unit("µs per iteration (the median iteration's critical path)", 0.0)
    share: float = unit("fraction of the critical path's length (0 to 1)", 0.0)


@dataclass(frozen=True)
class TrustChecks(Record):
    """What the dependency model found wrong with its own edges (``views/dependencies.py:
    trust_checks``): counts over the profiled events."""

    before_launch: int = 0  # GPU work that starts before its launch began
    clock_offset_us: float = 0.0  # by how much, the median
    missing_work: int = 0  # launches whose GPU work is not in the trace
    stream_overlaps: int = 0  # work that starts before the previous work on its stream ends
    zero_timestamps: int = 0  # GPU records with a zero timestamp
    step_past_end_us: float = 0.0  # how far a ProfilerStep range runs past the recording

    def line(self) -> str:
        """One line for the report ("" when every check passed)."""
        past = (f"a ProfilerStep range runs {format_us(self.step_past_end_us)} past the "
                "last recorded event (the profiler stopped inside it): its iteration ends "
                "there" if self.step_past_end_us > 0 else "")
        return "; ".join(part for part in (past, self._edges_line()) if part)

    def _edges_line(self) -> str:
        """The model's own edges, checked ("" when every check passed)."""
        clock = f": the GPU clock is about {format_us(self.clock_offset_us)} off"
        checks = (  # (count, noun, its plural, what one does, what several do)
            (self.before_launch, "kernel", "kernels", "starts before its launch" + clock,
             "start before their launch" + clock),
            (self.missing_work, "launch", "launches", "has no GPU work in the trace",
             "have no GPU work in the trace"),
            (self.stream_overlaps, "kernel", "kernels", "overlaps the work before it on its "
             "stream", "overlap the work before it on its stream"),
            (self.zero_timestamps, "GPU record", "GPU records", "has a zero timestamp",
             "have a zero timestamp"))
        parts = [f"{counted(n, noun, plural)} {one if n == 1 else several}"
                 for n, noun, plural, one, several in checks if n]
        return "; ".join(parts) + ": what-if figures are approximate" if parts else ""


@dataclass(frozen=True)
class KernelRow(Record):
    """One GPU kernel name over the profiled iterations."""

    key: str
    count: int = unit("calls, summed over {over}")
    device_time_total: float = unit("µs, summed over {over}")
    launched_by: str = ""  # the operator that launched it most often
    # its calls that ``launched_by`` launched (0: not counted: a profile saved before)
    launched_by_calls: int = unit("calls, summed over {over}", 0)

    @property
    def device_time(self) -> float:
        return self.device_time_total / self.count if self.count else 0.0


@dataclass(frozen=True)
class SourceRow(Record):
    """Op self time attributed to the innermost user function around it (``--stack``)."""

    key: str  # "file:line function"
    file: str
    line: int
    function: str
    code: str
    in_cell: bool
    self_cpu_time_total: float = unit("µs, summed over {over}")
    self_device_time_total: float = unit("µs, summed over {over}", 0.0)
    ops: int = unit("op calls, summed over {over}", 0)


#: The cause of the time a Python line waited for a DataLoader (``PythonLineRow.cause``,
#: a ``GpuIdleRow``'s ``cause``).
DATA_LOADING = "data loading"


@dataclass(frozen=True)
class PythonLineRow(Record):
    """CPU time no op covered, given to the user's Python line that ran (the ``python``
    view, ``kernelmagic/views/python_lines.py``). ``self_us`` is per iteration, ``share``
    its fraction of the iteration; ``location`` is ``cell[n]:line`` for the cell's own
    lines, else ``file:line``; ``samples`` how many samples the figure rests on;
    ``cause`` is ``data loading`` for the time the line waited for a DataLoader (its
    ``torch/utils/data/`` frames and the dataset code they call), else empty."""

    location: str
    function: str
    code: str
    self_us: float = unit("µs per iteration")
    share: float = unit("fraction of the iteration (0 to 1)")
    file: str = ""
    line: int = 0
    samples: int = unit("stack samples the figure rests on, over {over}", 0)
    cause: str = ""

    @property
    def key(self) -> str:
        """The row's name in tables: its location, and its cause when it has one."""
        return f"{self.location} ({self.cause})" if self.cause else self.location


@dataclass(frozen=True)
class GpuIdleRow(Record):
    """Time the GPU ran nothing, per cause (the ``gpu_idle`` view,
    ``kernelmagic/views/gpu_idle.py``): ``cause`` is ``iteration edge``, ``sync``,
    ``host-to-device copy``, ``data loading`` or ``launch gap``; ``detail`` the op (or
    ``Python between ops``) behind it; ``location`` and ``code`` the user's Python line
    that held the CPU then (``cell[n]:line`` or ``file:line``; empty when no sample or
    ``with_stack`` frame says); ``idle_us`` per iteration, ``share`` of the iteration;
    ``stretches`` how many idle stretches, over all iterations."""

    cause: str
    detail: str
    idle_us: float = unit("µs per iteration")
    share: float = unit("fraction of the iteration (0 to 1)")
    stretches: int = unit("idle stretches, over {over}", 0)
    location: str = ""
    code: str = ""

    @property
    def key(self) -> str:
        """The row's name in tables."""
        return f"{self.cause}: {self.detail}" + (f" at {self.location}" if self.location else "")


@dataclass(frozen=True)
class UnplacedCategory(Record):
    """Events of a category no rule of ``core/event_rules.py`` places (a category it does
    not know): ``events`` complete events holding ``time_us`` µs in all, over the whole
    trace, counted as neither ops nor device work (read as profiler records: one that
    launched GPU work is a ``[range]`` row). The report says so in one line."""

    category: str
    events: int = unit("complete events of the category, in the whole trace")
    time_us: float = unit("µs, summed over the whole trace")


@dataclass(frozen=True)
class ModuleRow(Record):
    """One ``nn.Module`` call path (``--modules``), e.g. ``ff.0``; depth 0 is the root."""

    key: str
    module_type: str
    depth: int
    count: int = unit("calls, summed over {over}")
    cpu_time_total: float = unit("µs, summed over {over}")
    self_cpu_time_total: float = unit("µs, summed over {over}")
    device_time_total: float = unit("µs, summed over {over}", 0.0)
    self_device_time_total: float = unit("µs, summed over {over}", 0.0)


@dataclass(frozen=True)
class RangeRow(Record):
    """A ``record_function`` range the user opened in the profiled code."""

    key: str
    count: int = unit("calls, summed over {over}")
    cpu_time_total: float = unit("µs, summed over {over}")
    device_time_total: float = unit("µs, summed over {over}", 0.0)
    top_ops: list[tuple[str, float]] = unit("op -> µs", factory=list)  # (op, self µs)


@dataclass(frozen=True)
class Span(Record):
    """One bar of the timeline: an op on the CPU or a kernel on a stream (µs from start)."""

    key: str
    lane: str
    start: float = unit("µs from the iteration's start")
    end: float = unit("µs from the iteration's start")


@dataclass(frozen=True)
class RooflineRow(Record):
    """One op against the device's roofs (``--roofline``).

    ``flops`` and ``bytes`` are per call, counted in one unprofiled run; ``time`` is the
    profiled time it owns (µs over all iterations, self device time on CUDA, else self
    CPU time; see ``kernelmagic/views/roofline.py`` for which ops own which time); rates
    are per second of that time. ``bound`` is ``compute``, ``memory`` or ``overhead``;
    ``roof_share`` the fraction of the nearer roof it reached.
    """

    key: str
    count: int = unit("calls, summed over {over}")
    flops: float = unit("FLOP per call")
    bytes: float = unit("bytes per call")
    intensity: float = unit("FLOP per byte")  # FLOP per byte (0 when it moves no bytes)
    flops_per_s: float = unit("FLOP/s")
    bytes_per_s: float = unit("bytes/s")
    bound: str
    time: float = unit("µs, summed over {over}", 0.0)
    dtype: str = ""
    roof_share: float = unit("fraction (0 to 1)", 0.0)
    counted: bool = True  # False: the counting run never saw it (a wrapper's own time)


class Roofs(TypedDict, total=False):
    """The roofs a ``--roofline`` result was placed against (``ProfileResult.roofline_peaks``:
    ``Peaks.to_dict()`` of ``kernelmagic/live/device_peaks.py``, with a ``note``)."""

    device: str
    flops_per_s: dict[str, float]  # per dtype
    bytes_per_s: float
    source: str
    measured: dict[str, float]
    note: str


@dataclass(frozen=True)
class Breakdown(Record):
    """Where an iteration's time went, µs per iteration (``kernelmagic/views/breakdown.py``).

    ``device`` is ``"cuda"`` (GPU work was recorded: the categories are GPU time) or
    ``"cpu"`` (``compute`` is op self time, ``idle`` the time no op ran). ``wall`` is the
    iterations' mean length; ``overlap`` the fraction of ``communication`` during which
    compute ran too (``None`` without communication kernels, and on the CPU).
    """

    device: str = "cpu"
    wall: float = unit("µs per iteration (mean)", 0.0)
    compute: float = unit("µs per iteration (mean)", 0.0)
    communication: float = unit("µs per iteration (mean)", 0.0)
    memcpy: float = unit("µs per iteration (mean)", 0.0)
    idle: float = unit("µs per iteration (mean)", 0.0)
    overlap: float | None = unit("fraction (0 to 1)", None)
    #: The GPU work's own time within the windows, its streams' summed: more than the busy
    #: time (``wall - idle``) where streams ran at once (0 in a profile saved before it).
    work: float = unit("µs per iteration (mean)", 0.0)

    @property
    def exposed_communication(self) -> float:
        """Communication time not hidden behind compute (all of it on the CPU), µs."""
        return self.communication * (1.0 - (self.overlap or 0.0))

    def share(self, part: str) -> float:
        """``part`` (a field name, or ``"exposed_communication"``) over ``wall``."""
        return getattr(self, part) / self.wall if self.wall > 0 else 0.0
