"""The rows of the collectives view across ranks (times in µs; plain, frozen records).

``Arrival`` is one rank's side of one collective, as a worker reads it from the rank's
trace (``kernelmagic/views/collectives.py``) and keeps it in the rank's ``RankSummary``;
``Collective`` is one collective matched across ranks by (step, name, index)
(``kernelmagic/results/ranks.py: match_collectives``): who arrived first and last, the skew between
them and the transfer once all had arrived.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelmagic.core.records import Record, unit

__all__ = ["Arrival", "Collective"]


@dataclass(frozen=True, slots=True)  # a summary holds dozens: no __dict__ each
class Arrival(Record):
    """One collective on one rank, its times from the start of the rank's own step.

    ``step`` is the step's position among the rank's steps (0 for its first),
    ``index`` the collective's order among those of the same ``name`` in the step.
    ``arrival_us`` is when the rank reached it (its NCCL kernel's start; on a CPU-only
    trace, its ``gloo:*``/``nccl:*`` range's start), ``end_us`` when it ended there.
    ``busy`` is the rank's top ops by self time (kernels on a GPU) between its previous
    collective's end (or the step's start) and this arrival: (name, µs), largest first.
    """

    step: int
    name: str
    index: int
    arrival_us: float
    end_us: float
    busy: list[tuple[str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Collective(Record):
    """One collective matched across ``ranks`` ranks (see ``Arrival`` for the key).

    ``skew_us`` is the last arrival minus the first (how long the first rank waited),
    ``transfer_us`` the median over the ranks of their end minus the last arrival (the
    time the collective took once every rank was there; 0 at least). ``late_busy`` is
    the last rank's ``Arrival.busy``: what it was doing while the others waited.
    ``aligned`` is False when that median end comes before the last arrival: a collective
    cannot end before every rank has arrived, so the ranks' step starts (from which the
    times are counted) were not simultaneous, and the skew is not to be trusted.
    """

    step: int
    name: str
    index: int
    ranks: int = unit("ranks that kept it")
    first_rank: int
    last_rank: int
    skew_us: float = unit("µs")
    transfer_us: float = unit("µs")
    late_busy: list[tuple[str, float]] = unit(
        "(op, µs) the last rank ran before it arrived", factory=list)
    aligned: bool = True

    @property
    def key(self) -> str:
        """``step/name#index``: what tables break ties on."""
        return f"{self.step}/{self.name}#{self.index}"
