"""One rank's time, broken down per step: the figures the many-ranks report compares.

Everything is column arithmetic over the rank's ``EventTable`` and its step windows
(``ProfilerStep#N``, kernelmagic's ``NAME/iter i``, else the whole trace); the result
is a ``RankSummary``, small and JSON-friendly, so that workers parsing large traces
send back only this and the rank's ``ProfileResult``, never events.

On a GPU (the table holds kernels, copies or memsets), within each step window, every
GPU event clipped to the window:

- **communication**: time during which at least one communication kernel runs (a
  kernel whose name starts with ``nccl``, any case, or contains ``gloo``);
- **compute**: time during which at least one other kernel runs;
- **memcpy**: time during which at least one memcpy or memset runs;
- **idle**: the window minus the time during which any GPU work runs (all streams);
- **overlap**: the part of the communication time during which a compute kernel runs
  (on another stream: one stream runs one kernel at a time), over the communication
  time; ``None`` when no communication kernel ran.

Each category is a union of intervals, so work on concurrent streams is not counted
twice; categories can overlap each other, so compute + communication + memcpy + idle
may exceed the step.

On a CPU-only trace, the same categories from the ops that start in the window, by
self time (duration minus that of the events directly under them): **communication** is
the self time of ``record_param_comms``, ``c10d::*`` and ops whose name starts with
``nccl`` or contains ``gloo``, plus the time (union, clipped to the window) of ranges
so named with nothing under them (``gloo:all_reduce`` on gloo's threads); **compute**
is the self time of every other op (summed over threads); **memcpy** is 0; **idle** the
window minus the time during which any op or such range runs (all threads);
**overlap** is ``None``.

Each figure is the mean over the steps, in µs per step; the step time's median and IQR
are those of the rank's iteration timings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from kernelmagic.events import EventTable, Kind
from kernelmagic.result import ProfileResult

Window = tuple[int, int]

#: CPU ops that are communication, by exact name or prefix.
COMM_OPS = ("record_param_comms",)
COMM_OP_PREFIX = "c10d::"


def is_comm_kernel(name: str) -> bool:
    """A communication kernel: its name starts with ``nccl`` (any case) or contains ``gloo``."""
    low = name.lower()
    return low.startswith("nccl") or "gloo" in low


def is_comm_op(name: str) -> bool:
    """A communication op on the CPU: ``record_param_comms``, ``c10d::*``, NCCL or gloo."""
    return name in COMM_OPS or name.startswith(COMM_OP_PREFIX) or is_comm_kernel(name)


@dataclass(frozen=True)
class RankSummary:
    """One rank's step time and its breakdown (µs per step; see the module docstring).

    ``op_us`` maps each op to its self time per step on the rank's primary device
    (self device time on a GPU, self CPU time otherwise): what the straggler finding
    compares between ranks.
    """

    rank: int
    world_size: int | None = None
    backend: str = ""
    file: str = ""
    device: str = "cpu"
    steps: int = 0
    step_median_us: float = 0.0
    step_iqr_us: float = 0.0
    compute_us: float = 0.0
    communication_us: float = 0.0
    memcpy_us: float = 0.0
    idle_us: float = 0.0
    overlap: float | None = None
    op_us: dict[str, float] = field(default_factory=dict)

    @property
    def exposed_communication_us(self) -> float:
        """Communication time per step not hidden behind compute (all of it on a CPU)."""
        return self.communication_us * (1.0 - (self.overlap or 0.0))

    @property
    def label(self) -> str:
        return f"rank {self.rank}"

    @property
    def key(self) -> str:
        """The row's name in tables (``rank N``)."""
        return self.label

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RankSummary:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["op_us"] = {str(k): float(v) for k, v in values.get("op_us", {}).items()}
        return cls(**values)


# --- intervals --------------------------------------------------------------------------


def merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted, disjoint (start, end) arrays."""
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if not starts.size:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    first = np.empty(s.size, dtype=bool)
    first[0] = True
    first[1:] = s[1:] > reach[:-1]
    heads = np.flatnonzero(first)
    return s[heads], np.maximum.reduceat(e, heads)


def covered(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length of the union of intervals."""
    s, e = merge(starts, ends)
    return int((e - s).sum())


class Intervals:
    """Some events' (start, end), sorted by start once, so each window reads only the events
    that can reach it (a binary search, not a pass over every event per step)."""

    def __init__(self, table: EventTable, rows: np.ndarray) -> None:
        order = np.argsort(table.start[rows], kind="stable")
        self.starts = table.start[rows][order]
        self.ends = table.end[rows][order]
        self.longest = int((self.ends - self.starts).max()) if rows.size else 0

    def clip(self, window: Window) -> tuple[np.ndarray, np.ndarray]:
        """The intervals cut to ``window`` (empty ones dropped)."""
        lo, hi = window
        first = np.searchsorted(self.starts, lo - self.longest, "left")
        last = np.searchsorted(self.starts, hi, "left")
        s = np.maximum(self.starts[first:last], lo)
        e = np.minimum(self.ends[first:last], hi)
        keep = e > s
        return s[keep], e[keep]

    def covered(self, window: Window) -> int:
        """Time within ``window`` during which at least one of the intervals runs."""
        return covered(*self.clip(window))


# --- the breakdown ----------------------------------------------------------------------


def _name_mask(table: EventTable, test: Any) -> np.ndarray:
    """Per event: ``test(name)`` evaluated once per distinct name."""
    per_name = np.fromiter((test(n) for n in table.names), dtype=bool, count=len(table.names))
    return per_name[table.name]


def _gpu_breakdown(table: EventTable, windows: list[Window]) -> dict[str, Any]:
    kernel = table.kind == Kind.KERNEL
    comm_name = _name_mask(table, is_comm_kernel)
    comm = Intervals(table, np.flatnonzero(kernel & comm_name))
    compute = Intervals(table, np.flatnonzero(kernel & ~comm_name))
    copies = Intervals(table, np.flatnonzero((table.kind == Kind.MEMCPY)
                                             | (table.kind == Kind.MEMSET)))
    work = Intervals(table, np.flatnonzero(np.isin(table.kind, [Kind.KERNEL, Kind.MEMCPY,
                                                                 Kind.MEMSET])))
    totals = {"compute": 0, "communication": 0, "memcpy": 0, "idle": 0, "both": 0}
    for window in windows:
        c, k = comm.clip(window), compute.clip(window)
        comm_ns, compute_ns = covered(*c), covered(*k)
        both = comm_ns + compute_ns - covered(np.concatenate([c[0], k[0]]),
                                              np.concatenate([c[1], k[1]]))
        totals["communication"] += comm_ns
        totals["compute"] += compute_ns
        totals["both"] += both
        totals["memcpy"] += copies.covered(window)
        totals["idle"] += (window[1] - window[0]) - work.covered(window)
    steps = max(len(windows), 1)
    out: dict[str, Any] = {k: totals[k] / steps / 1000.0
                           for k in ("compute", "communication", "memcpy", "idle")}
    out["overlap"] = totals["both"] / totals["communication"] if totals["communication"] else None
    return out


def _self_times(table: EventTable, rows: np.ndarray) -> np.ndarray:
    """Duration minus the durations of the tree events directly under each of ``rows``."""
    child = np.flatnonzero(table.parent >= 0)
    under = np.bincount(table.parent[child], weights=table.duration[child].astype(np.float64),
                        minlength=table.n)
    return table.duration[rows] - under[rows]


def _cpu_breakdown(table: EventTable, windows: list[Window]) -> dict[str, Any]:
    op_rows = np.flatnonzero((table.kind == Kind.OP) & (table.device < 0))
    order = np.argsort(table.start[op_rows], kind="stable")
    op_rows = op_rows[order]
    op_starts = table.start[op_rows]
    comm = _name_mask(table, is_comm_op)[op_rows]
    self_ns = _self_times(table, op_rows)
    # Prefix sums: the self time of the ops starting in a window is two lookups.
    comm_sum = np.concatenate([[0.0], np.cumsum(np.where(comm, self_ns, 0.0))])
    other_sum = np.concatenate([[0.0], np.cumsum(np.where(comm, 0.0, self_ns))])
    # Collectives that torch records as ranges (``gloo:all_reduce`` on gloo's own
    # threads) with nothing under them: their time is communication too.
    has_child = np.zeros(table.n, dtype=bool)
    has_child[table.parent[table.parent >= 0]] = True
    range_rows = np.flatnonzero((table.kind == Kind.RANGE) & (table.device < 0) & ~has_child
                                & _name_mask(table, is_comm_kernel))
    ranges = Intervals(table, range_rows)
    busy = Intervals(table, np.concatenate([op_rows, range_rows]))
    totals = {"compute": 0.0, "communication": 0.0, "idle": 0.0}
    for window in windows:
        a, b = np.searchsorted(op_starts, window, "left")
        totals["communication"] += float(comm_sum[b] - comm_sum[a]) + ranges.covered(window)
        totals["compute"] += float(other_sum[b] - other_sum[a])
        totals["idle"] += (window[1] - window[0]) - busy.covered(window)
    steps = max(len(windows), 1)
    out: dict[str, Any] = {k: v / steps / 1000.0 for k, v in totals.items()}
    out["memcpy"] = 0.0
    out["overlap"] = None
    return out


def summarize(table: EventTable, windows: list[Window], result: ProfileResult, *,
              rank: int, world_size: int | None = None, backend: str = "",
              file: str = "") -> RankSummary:
    """The ``RankSummary`` of one rank: its table, its step windows and its result."""
    on_gpu = result.profiles_device
    parts = _gpu_breakdown(table, windows) if on_gpu else _cpu_breakdown(table, windows)
    stats = result.stats
    steps = max(result.iters, 1)
    op_us: dict[str, float] = {}
    for row in result.op_totals:
        mine = row.self_device_time_total if on_gpu else row.self_cpu_time_total
        if mine > 0:
            op_us[row.key] = op_us.get(row.key, 0.0) + mine / steps
    return RankSummary(
        rank=rank, world_size=world_size, backend=backend, file=file, device=result.device,
        steps=len(result.timings), step_median_us=stats.median * 1e6,
        step_iqr_us=stats.iqr * 1e6, compute_us=parts["compute"],
        communication_us=parts["communication"], memcpy_us=parts["memcpy"],
        idle_us=parts["idle"], overlap=parts["overlap"], op_us=op_us,
    )
