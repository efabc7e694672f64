"""Findings across ranks: a straggler, and communication that compute does not hide.

Pure functions of the ranks' ``RankSummary`` objects; thresholds are module constants.

**Straggler.** With at least two ranks, take the rank S with the slowest median step
(ties: the lowest rank) and the others O. Let ``center`` be the median of O's median
steps and ``spread`` the largest of: ``STRAGGLER_IQR_FACTOR`` × the IQR of O's median
steps (between-rank spread), the median of O's own step IQRs (step-to-step noise), and
``STRAGGLER_MIN_SHARE`` × ``center`` (a floor, so that two ranks a hair apart are not a
finding). S is a straggler when its median step exceeds ``center`` by more than
``spread``. The finding names it ``rank N`` and lists the ``STRAGGLER_TOP_OPS`` ops
whose time per step differs most (in absolute value) from the median rank's, the
median rank being the one of O whose median step is closest to ``center``.

**Communication-bound.** Per rank, the exposed communication share is the
communication time not overlapped by compute (on a CPU-only trace, all of it) over the
median step. The finding fires when the median of that share over the ranks exceeds
``COMM_BOUND_SHARE``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kernelmagic.core.units import counted, format_us, whole_percent
from kernelmagic.findings.base import Finding
from kernelmagic.findings.communication import COMM_BOUND_SHARE

if TYPE_CHECKING:
    from kernelmagic.results.rank_summary import RankSummary

STRAGGLER_IQR_FACTOR = 1.5
STRAGGLER_MIN_SHARE = 0.05
STRAGGLER_TOP_OPS = 3


def _iqr(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q3 - q1


def straggler_spread(others: Sequence[RankSummary]) -> tuple[float, float]:
    """(center, spread) of the other ranks' median steps, µs (see the module docstring)."""
    medians = [s.step_median_us for s in others]
    center = statistics.median(medians)
    spread = max(STRAGGLER_IQR_FACTOR * _iqr(medians),
                 statistics.median(s.step_iqr_us for s in others),
                 STRAGGLER_MIN_SHARE * center)
    return center, spread


def _signed(us: float) -> str:
    return ("+" if us >= 0 else "−") + format_us(abs(us))


def straggler(summaries: Sequence[RankSummary]) -> Finding | None:
    """The rank whose median step is slowest beyond the others' spread, or None."""
    if len(summaries) < 2:
        return None
    slow = max(summaries, key=lambda s: (s.step_median_us, -s.rank))
    others = [s for s in summaries if s is not slow]
    center, spread = straggler_spread(others)
    excess = slow.step_median_us - center
    if excess <= spread:
        return None
    ref = min(others, key=lambda s: (abs(s.step_median_us - center), s.rank))
    ops = set(slow.op_us) | set(ref.op_us)
    diffs = sorted(((slow.op_us.get(k, 0.0) - ref.op_us.get(k, 0.0), k) for k in ops),
                   key=lambda d: (-abs(d[0]), d[1]))[:STRAGGLER_TOP_OPS]
    listed = ", ".join(f"{k} {_signed(d)}" for d, k in diffs if d != 0)
    n = len(others)
    evidence = (f"median step {format_us(slow.step_median_us)} against {format_us(center)} "
                f"for the other {counted(n, 'rank')} (median), "
                f"{format_us(excess)} slower, beyond their spread of {format_us(spread)}")
    if listed:
        evidence += f"; ops per step against {ref.label} (the median rank): {listed}"
    return Finding(
        rule="straggler",
        title=f"{slow.label} is a straggler",
        evidence=evidence,
        suggestion=(f"compare result.ranks[{slow.rank}] with result.ranks[{ref.rank}]: "
                    "uneven data or work per rank, a slower or throttled GPU, or another "
                    "process on its host hold every rank back at each collective"),
    )


def exposed_share(summary: RankSummary) -> float:
    """Communication not hidden by compute, as a fraction of the median step."""
    if summary.step_median_us <= 0:
        return 0.0
    return summary.exposed_communication_us / summary.step_median_us


def communication_bound(summaries: Sequence[RankSummary]) -> Finding | None:
    """Exposed communication above ``COMM_BOUND_SHARE`` of the step (median over ranks)."""
    if not summaries:
        return None
    shares = [exposed_share(s) for s in summaries]
    typical = statistics.median(shares)
    if typical <= COMM_BOUND_SHARE:
        return None
    worst = max(summaries, key=lambda s: (exposed_share(s), -s.rank))
    hidden = ("overlap not measured on the CPU" if worst.overlap is None
              else f"{whole_percent(worst.overlap)} of its {format_us(worst.communication_us)} "
                   "communication overlapped by compute")
    n = len(summaries)
    return Finding(
        rule="communication_bound",
        title="Communication-bound",
        evidence=(f"communication not hidden by compute takes {whole_percent(typical)} of the step "
                  f"(median over {counted(n, 'rank')}); worst {worst.label}: "
                  f"{format_us(worst.exposed_communication_us)} of a "
                  f"{format_us(worst.step_median_us)} step exposed ({hidden})"),
        suggestion=("overlap collectives with compute (DDP gradient buckets, FSDP prefetch, "
                    "async collectives), or communicate less per step (larger local batches, "
                    "gradient accumulation, compression)"),
    )


def find(summaries: Sequence[RankSummary]) -> list[Finding]:
    """Every rule that fires, straggler first."""
    found = [straggler(summaries), communication_bound(summaries)]
    return [f for f in found if f is not None]
