"""Each collective across ranks: the ranks' ``Arrival`` rows (``RankSummary.collectives``)
matched by (step, name, index) into ``Collective`` rows.

Matched by the step's position on each rank (its first step is 0), the collective's name
and its order among those of that name in the step: the same collective on every rank,
as long as the ranks run the same collectives in the same order (what NCCL requires).
A collective kept by some ranks only (a summary keeps its first ones,
``kernelmagic/views/collectives.py: COLLECTIVES_KEPT``) is matched over those.

``skew_us`` = last arrival − first arrival, ``transfer_us`` = the median over ranks of the
end, minus the last arrival (never below 0): the median, not the minimum, so that one rank
whose clock or step start is off does not decide it. Times are from each rank's own step
start (the module docstring of ``views/collectives.py`` says why, and its limit); a
collective whose median end comes before its last arrival is not ``aligned``: its ranks'
step starts were not simultaneous.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from kernelmagic.core.collective_rows import Arrival, Collective
from kernelmagic.results.rank_summary import RankSummary

__all__ = ["match_collectives"]


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
