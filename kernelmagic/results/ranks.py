"""``ManyRanksResult``: one report for a distributed run, one ``ProfileResult`` per rank.

The report (summary, table, findings) reads only each rank's ``RankSummary``. Loaded from
trace files, ``ranks`` is a ``RankReports`` (``kernelmagic/results/rank_store.py``): rank
n's full report is parsed again when asked for, a handful kept, so the client's memory does
not grow with the traces; made in memory (``--gather``, a saved file) it is a plain dict.

Like ``ProfileResult``, its convenience methods (``findings``, ``summary``, ``save``,
display) import the findings, renderers and storage lazily, inside the method: the data
imports nothing above it.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelmagic.core.collective_rows import Collective
from kernelmagic.core.records import RecordError, from_json, to_json
from kernelmagic.core.units import counted
from kernelmagic.results.collectives import match_collectives
from kernelmagic.results.rank_summary import RankSummary
from kernelmagic.results.result import ProfileResult

if TYPE_CHECKING:  # the convenience methods' return types
    import pandas

    from kernelmagic.findings.base import Finding

#: Identifies the JSON written by ``ManyRanksResult.to_dict``.
RANKS_FORMAT_NAME = "kernelmagic.ranks"
RANKS_FORMAT_VERSION = 1


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
class ManyRanksResult:
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
        """Each collective matched across ranks (``kernelmagic/results/collectives.py``):
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
        if not isinstance(data, dict) or data.get("format") != RANKS_FORMAT_NAME:
            raise ValueError("not a kernelmagic many-ranks result (missing 'format' field)")
        if data.get("version") != RANKS_FORMAT_VERSION:
            raise ValueError(f"kernelmagic many-ranks format version {data.get('version')!r} "
                             f"is not supported (this kernelmagic reads version "
                             f"{RANKS_FORMAT_VERSION})")
        try:
            items = from_json(_RanksFile, data).ranks
        except RecordError as exc:
            raise ValueError(f"malformed kernelmagic many-ranks result: {exc}") from None
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
