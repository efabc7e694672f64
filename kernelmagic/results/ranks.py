"""``ManyRanksResult``: one report for a distributed run, one ``ProfileResult`` per rank.

The report (summary, table, findings) reads only each rank's ``RankSummary`` (a few kB).
**Rank reports on demand**: a job of a thousand ranks does not fit its ranks' full reports
in a notebook, so loaded from trace files, ``ranks`` is a ``RankReports`` holding the file
each rank came from: ``reports[n]`` parses rank n's file again (with the ``parse`` function
the loader gives, so this layer imports no reader) and keeps the last ``keep`` reports
asked for, least recently used first out: memory bounded in ranks and independent of the
traces' size. Made in memory (``--gather``, a saved file), ``ranks`` is a plain dict.

**Each collective across ranks** (``match_collectives``): the ranks' ``Arrival`` rows
(``RankSummary.collectives``) matched by (step, name, index) into ``Collective`` rows: by
the step's position on each rank (its first step is 0), the collective's name and its order
among those of that name in the step; the same collective on every rank, as long as the
ranks run the same collectives in the same order (what NCCL requires). A collective kept by
some ranks only (a summary keeps its first ones, ``kernelmagic/views/collectives.py:
COLLECTIVES_KEPT``) is matched over those. ``skew_us`` = last arrival − first arrival,
``transfer_us`` = the median over ranks of the end, minus the last arrival (never below 0):
the median, not the minimum, so that one rank whose clock or step start is off does not
decide it. Times are from each rank's own step start (the module docstring of
``views/collectives.py`` says why, and its limit); a collective whose median end comes
before its last arrival is not ``aligned``: its ranks' step starts were not simultaneous.

Like ``ProfileResult``, its convenience methods (``findings``, ``summary``, ``save``,
display) import the findings, renderers and storage lazily, inside the method: the data
imports nothing above it.
"""

from __future__ import annotations

import statistics
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelmagic.core.collective_rows import Arrival, Collective
from kernelmagic.core.records import from_json, to_json
from kernelmagic.core.units import counted
from kernelmagic.results.rank_summary import RankSummary
from kernelmagic.results.result import ProfileResult, Shown, read_saved

if TYPE_CHECKING:  # the convenience methods' return types
    import pandas

    from kernelmagic.findings.base import Finding

#: Identifies the JSON written by ``ManyRanksResult.to_dict``.
RANKS_FORMAT_NAME = "kernelmagic.ranks"
RANKS_FORMAT_VERSION = 1


#: How many full reports ``RankReports`` keeps at once.
KEEP_REPORTS = 4


class RankReports(Mapping[int, ProfileResult]):
    """Rank -> its full report, parsed again from ``files[rank]`` when asked for."""

    def __init__(self, files: Mapping[int, str], parse: Callable[[str], ProfileResult],
                 keep: int = KEEP_REPORTS) -> None:
        self.files = dict(sorted(files.items()))
        self._parse = parse
        self._keep = max(1, keep)
        self._cache: OrderedDict[int, ProfileResult] = OrderedDict()

    def __getitem__(self, rank: int) -> ProfileResult:
        if rank not in self.files:
            raise KeyError(rank)
        if rank in self._cache:
            self._cache.move_to_end(rank)
            return self._cache[rank]
        report = self._parse(self.files[rank])
        self._cache[rank] = report
        while len(self._cache) > self._keep:
            self._cache.popitem(last=False)
        return report

    def __iter__(self) -> Iterator[int]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    @property
    def cached(self) -> list[int]:
        """The ranks whose reports are held now, least recently used first."""
        return list(self._cache)

    def __repr__(self) -> str:
        return f"<RankReports: {len(self)} ranks, {len(self._cache)} held>"


def _matched(key: tuple[int, str, int], arrivals: list[tuple[int, Arrival]]) -> Collective:
    first = min(arrivals, key=lambda p: (p[1].arrival_us, p[0]))
    last = max(arrivals, key=lambda p: (p[1].arrival_us, -p[0]))
    end = statistics.median(a.end_us for _, a in arrivals)
    step, name, index = key
    return Collective(step=step, name=name, index=index, ranks=len(arrivals),
                      first_rank=first[0], last_rank=last[0],
                      skew_us=last[1].arrival_us - first[1].arrival_us,
                      transfer_us=max(0.0, end - last[1].arrival_us),
                      late_busy=list(last[1].busy), aligned=end >= last[1].arrival_us)


def match_collectives(summaries: Iterable[RankSummary]) -> list[Collective]:
    """One ``Collective`` per (step, name, index) some rank kept, in step order, then by
    the median arrival in the step."""
    by_key: dict[tuple[int, str, int], list[tuple[int, Arrival]]] = {}
    for summary in summaries:
        for arrival in summary.collectives:
            by_key.setdefault((arrival.step, arrival.name, arrival.index), []).append(
                (summary.rank, arrival))
    order = sorted(by_key, key=lambda k: (
        k[0], statistics.median(a.arrival_us for _, a in by_key[k]), k[1], k[2]))
    return [_matched(key, by_key[key]) for key in order]


@dataclass(frozen=True)
class _Rank:
    """One item of a saved many-ranks result's ``ranks``."""

    summary: RankSummary
    result: ProfileResult


@dataclass(frozen=True)
class _RanksFile:
    """What a saved many-ranks result holds besides its format name and version."""

    ranks: list[_Rank]


@dataclass(eq=False)
class ManyRanksResult(Shown):
    """A distributed run: ``ranks`` maps each rank to its ``ProfileResult``, ``summaries``
    to its ``RankSummary`` (step time and its breakdown, ``kernelmagic/results/rank_summary.py``).

    Displays as one report (per-rank table, chart, findings); ``ranks[n]`` is rank n's
    full report (parsed again on demand when loaded from trace files).
    """

    ranks: Mapping[int, ProfileResult]
    summaries: dict[int, RankSummary]

    @classmethod
    def from_parts(cls, parts: list[tuple[ProfileResult, RankSummary]]) -> ManyRanksResult:
        """From (result, summary) pairs, in rank order."""
        ordered = sorted(parts, key=lambda p: p[1].rank)
        return cls(ranks={s.rank: r for r, s in ordered},
                   summaries={s.rank: s for _, s in ordered})

    # --- derived ---------------------------------------------------------------------

    @property
    def world_size(self) -> int | None:
        """The job's world size from the traces (None when they do not say)."""
        sizes = [s.world_size for s in self.summaries.values() if s.world_size is not None]
        return sizes[0] if sizes else None

    @property
    def missing_ranks(self) -> list[int]:
        """Ranks 0 to ``world_size`` − 1 with no trace here (none when it is unknown)."""
        if not self.world_size:
            return []
        return sorted(set(range(self.world_size)) - set(self.summaries))

    @property
    def backend(self) -> str:
        return next((s.backend for s in self.summaries.values() if s.backend), "")

    @property
    def profiles_device(self) -> bool:
        # from the summaries: asking ``ranks`` would parse every rank's file again
        return any(s.device != "cpu" for s in self.summaries.values())

    @property
    def median_step_us(self) -> float:
        """Median over ranks of each rank's median step (µs)."""
        values = [s.step_median_us for s in self.summaries.values()]
        return statistics.median(values) if values else 0.0

    def collectives(self) -> list[Collective]:
        """Each collective matched across ranks (``match_collectives``):
        who arrived first and last, the skew and the transfer time."""
        return list(self._collectives)

    @cached_property
    def _collectives(self) -> list[Collective]:
        return match_collectives(self.summaries.values())

    def findings(self) -> list[Finding]:
        """Straggler, collective skew and communication-bound findings
        (``kernelmagic/findings/ranks.py``)."""
        return list(self._findings)

    @cached_property
    def _findings(self) -> list[Finding]:
        from kernelmagic.findings.ranks import find

        return find(list(self.summaries.values()), self._collectives)

    # --- presentation ----------------------------------------------------------------

    def summary(self) -> str:
        """One line: ranks, job, median step and the slowest rank, breakdown medians."""
        from kernelmagic.render.ranks import summary_line

        return summary_line(self)

    def table(self) -> str:
        """One line per rank: step time median and IQR, compute, communication, memcpy,
        idle (µs per step) and the share of communication overlapped by compute."""
        from kernelmagic.render.ranks import ranks_table

        return ranks_table(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        from kernelmagic.render.ranks import text_report

        p.text(text_report(self))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from kernelmagic.render.ranks import mime_bundle

        return mime_bundle(self, include=include)

    def __repr__(self) -> str:
        return (f"<ManyRanksResult: {counted(len(self.ranks), 'rank')}"
                f"{f' of {self.world_size}' if self.world_size else ''}>")

    # --- serialisation ---------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``from_dict`` restores an equal result. Each rank is one item
        of ``ranks``: its summary and its result, each written from its fields (loaded from
        trace files, each rank's file is parsed again, one at a time)."""
        return {
            "format": RANKS_FORMAT_NAME,
            "version": RANKS_FORMAT_VERSION,
            "ranks": [to_json(_Rank(self.summaries[r], res))
                      for r, res in self.ranks.items()],
        }

    @classmethod
    def from_dict(cls, data: Any) -> ManyRanksResult:
        """Rebuild from ``to_dict`` output, every field checked against its declared type;
        ValueError on another format or version, or naming the field that does not fit."""
        items = read_saved(data, RANKS_FORMAT_NAME, RANKS_FORMAT_VERSION, "many-ranks result",
                           lambda d: from_json(_RanksFile, d).ranks)
        return cls.from_parts([(item.result, item.summary) for item in items])

    def to_pandas(self, view: str = "ranks") -> pandas.DataFrame:
        """``"ranks"``: one row per rank (step time, compute, communication, idle, ...);
        ``"collectives"``: one row per collective matched across ranks (step, name, index,
        first and last rank, skew and transfer time); any view of
        ``ProfileResult.to_pandas`` (``"ops"``, ``"kernels"``, ...): that view
        of every rank, with a ``rank`` column. Needs pandas."""
        from kernelmagic.io.frames import ranks_frame

        return ranks_frame(self, view)

    def save(self, path: str | Path) -> Path:
        """Write as one JSON file; ``kernelmagic.load(path)`` reads it back."""
        from kernelmagic.io.storage import save

        return save(self, path)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ManyRanksResult):
            return NotImplemented
        return self.to_dict() == other.to_dict()
