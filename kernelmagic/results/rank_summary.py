"""One rank's time, broken down per step: the figures the many-ranks report compares.

Everything comes from the rank's ``ProfileResult``: the breakdown (compute,
communication, memcpy, idle, overlap) is ``result.breakdown``, made once by
``build_result`` over the rank's steps (``ProfilerStep#N``, kernelmagic's ``NAME/iter i``,
else the whole trace) with ``kernelmagic/views/breakdown.py``, the same that a single run's
summary shows. The ``RankSummary`` is small and JSON-friendly, so that workers parsing
large traces send back only this and the rank's ``ProfileResult``, never events.

Each figure is the mean over the steps, in µs per step; the step time's median and IQR
are those of the rank's iteration timings. ``step_us`` keeps each of the first
``HEATMAP_STEPS`` step times and their communication times (the ranks × steps
heatmaps), and ``collectives`` the rank's first collectives
(``kernelmagic/views/collectives.py``, matched across ranks by
``kernelmagic/results/ranks.py: match_collectives``), so a summary stays a few kB however long the
trace. A summary saved before these fields existed loads with them empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelmagic.core.collective_rows import Arrival
from kernelmagic.core.events import EventTable, Window
from kernelmagic.core.records import Record, unit
from kernelmagic.core.rows import Breakdown
from kernelmagic.core.sorting import self_time
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.breakdown import communication_per_window
from kernelmagic.views.collectives import collective_arrivals

__all__ = ["HEATMAP_STEPS", "RankSummary", "summarize", "summarize_with_events"]

#: How many step times (the first ones) a ``RankSummary`` keeps for the heatmap.
HEATMAP_STEPS = 128


@dataclass(frozen=True)
class RankSummary(Record):
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
    steps: int = unit("steps", 0)
    step_median_us: float = unit("µs per step", 0.0)
    step_iqr_us: float = unit("µs per step", 0.0)
    compute_us: float = unit("µs per step", 0.0)
    communication_us: float = unit("µs per step", 0.0)
    memcpy_us: float = unit("µs per step", 0.0)
    idle_us: float = unit("µs per step", 0.0)
    overlap: float | None = unit("fraction (0 to 1)", None)
    op_us: dict[str, float] = unit("µs per step, per op", factory=dict)
    step_us: list[float] = unit("µs", factory=list)
    step_comm_us: list[float] = unit("µs", factory=list)
    collectives: list[Arrival] = field(default_factory=list)

    @property
    def exposed_communication_us(self) -> float:
        """Communication time per step not hidden behind compute (all of it on a CPU)."""
        return self.communication_us * (1.0 - (self.overlap or 0.0))

    @property
    def label(self) -> str:
        """``rank N``: the rank as the report names it, and the row's name in tables."""
        return f"rank {self.rank}"

    key = label


def summarize(result: ProfileResult, *, rank: int, world_size: int | None = None,
              backend: str = "", file: str = "", step_comm_us: list[float] | None = None,
              collectives: list[Arrival] | None = None) -> RankSummary:
    """The ``RankSummary`` of one rank's result: its breakdown (``result.breakdown``, made
    by ``build_result`` from the rank's iterations) and its ops; ``step_comm_us`` and
    ``collectives`` come from the rank's events (the result does not keep them)."""
    on_gpu = result.profiles_device
    parts = result.breakdown or Breakdown(device=result.device)
    stats = result.stats
    steps = max(result.iters, 1)
    op_us: dict[str, float] = {}
    for row in result.op_totals:
        mine = self_time(row, on_gpu)
        if mine > 0:
            op_us[row.key] = op_us.get(row.key, 0.0) + mine / steps
    return RankSummary(
        rank=rank, world_size=world_size, backend=backend, file=file, device=result.device,
        steps=len(result.timings), step_median_us=stats.median * 1e6,
        step_iqr_us=stats.iqr * 1e6, compute_us=parts.compute,
        communication_us=parts.communication, memcpy_us=parts.memcpy,
        idle_us=parts.idle, overlap=parts.overlap, op_us=op_us,
        step_us=[t * 1e6 for t in result.timings[:HEATMAP_STEPS]],
        step_comm_us=list(step_comm_us or [])[:HEATMAP_STEPS],
        collectives=list(collectives or []),
    )


def summarize_with_events(result: ProfileResult, table: EventTable, windows: list[Window], *,
                          rank: int, world_size: int | None = None, backend: str = "",
                          file: str = "") -> RankSummary:
    """``summarize``, with the figures only the rank's events give: each of the first
    ``HEATMAP_STEPS`` steps' communication time and the rank's first collectives
    (``windows``: its steps, as ``result`` was built over them)."""
    return summarize(result, rank=rank, world_size=world_size, backend=backend, file=file,
                     step_comm_us=communication_per_window(table, windows[:HEATMAP_STEPS]),
                     collectives=collective_arrivals(table, windows))
