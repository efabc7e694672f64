"""Many ranks: one report for a distributed run (trace folders, or live ``--gather``).

- ``summary.py``: one rank's step time and its compute / communication / memcpy / idle
  breakdown, from its ``EventTable`` (``RankSummary``)
- ``load.py``: trace files parsed in parallel on any ``concurrent.futures.Executor``
- ``result.py``: ``ManyRanksResult``, its JSON round trip
- ``live.py``: ``gather=True`` (``torch.distributed.gather_object`` to rank 0)

Renderers are in ``kernelmagic/render/ranks.py``, the findings (straggler,
communication-bound) in ``kernelmagic/findings/ranks.py``.
"""

from kernelmagic.ranks.load import (
    DuplicateRank,
    Parsed,
    RanksError,
    RankSkipped,
    WorldSizeMismatch,
    load_ranks,
    parse_rank,
)
from kernelmagic.ranks.result import ManyRanksResult
from kernelmagic.ranks.summary import RankSummary, summarize

__all__ = ["DuplicateRank", "ManyRanksResult", "Parsed", "RankSkipped", "RankSummary",
           "RanksError", "WorldSizeMismatch", "load_ranks", "parse_rank", "summarize"]
