"""``RankReports``: rank n's full ``ProfileResult`` on demand, a handful kept at a time.

A job of a thousand ranks does not fit its ranks' full reports in a notebook: the client of
``kernelmagic.load(folder)`` keeps only each rank's ``RankSummary`` (a few kB) and, here,
the file each rank came from. ``reports[n]`` parses rank n's file again (with the
``parse`` function the loader gives, so this layer imports no reader) and keeps the last
``keep`` reports asked for, least recently used first out: memory bounded in ranks and
independent of the traces' size.

Results made in memory (``--gather``, a saved many-ranks file) are held as given.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping

from kernelmagic.results.result import ProfileResult

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
