"""Findings across ranks: a straggler, a rank the collectives wait for, and communication
that compute does not hide; and the one-result rule for the last, ``communication_bound``
(one of ``RULES``), with the same threshold and advice.

The many-ranks rules are pure functions of the ranks' ``RankSummary`` objects, with their
own ``find``; thresholds are module constants.

**Straggler.** With at least two ranks, take the rank S with the slowest median step
(ties: the lowest rank) and the others O. Let ``center`` be the median of O's median
steps and ``spread`` the largest of: ``STRAGGLER_IQR_FACTOR`` × the IQR of O's median
steps (between-rank spread), the median of O's own step IQRs (step-to-step noise), and
``STRAGGLER_MIN_SHARE`` × ``center`` (a floor, so that two ranks a hair apart are not a
finding). S is a straggler when its median step exceeds ``center`` by more than
``spread``. The finding names it ``rank N`` and lists the ``STRAGGLER_TOP_OPS`` ops
whose time per step differs most (in absolute value) from the median rank's, the
median rank being the one of O whose median step is closest to ``center``.

**Collective skew.** Over the collectives matched across at least two ranks
(``ManyRanksResult.collectives()``) and ``aligned`` (their median end not before their
last arrival: else the ranks' step starts differ and the skew is an artefact), each
collective's skew is charged to the rank that arrived last. The rank L charged the most
skew (ties: the most collectives, then the lowest rank) is named when the skew charged to
it per step exceeds ``SKEW_MIN_SHARE`` of the median step (steps: those with a matched
collective). The finding gives how often L was last, the skew per step it caused against
the transfer time per step of the same collectives, and L's top ``SKEW_TOP_OPS`` ops by
self time in the windows before its late arrivals (``Collective.late_busy`` summed, per
step): what it was doing meanwhile.

**Communication-bound.** Per rank, the exposed communication share is the
communication time not overlapped by compute (on a CPU-only trace, all of it) over the
median step. The finding fires when the median of that share over the ranks exceeds
``COMM_BOUND_SHARE``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kernelmagic.core.timing import TimingStats
from kernelmagic.core.units import counted, format_us, percent, signed_us
from kernelmagic.findings.base import Finding, per_iter_self
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.breakdown import is_comm_op

if TYPE_CHECKING:
    from kernelmagic.core.collective_rows import Collective
    from kernelmagic.results.rank_summary import RankSummary

COMM_BOUND_SHARE = 0.2        # exposed communication above this fraction of the iteration
#: What to do about it (the advice of ``communication_bound`` and of its many-ranks rule).
COMM_BOUND_ADVICE = ("overlap collectives with compute (DDP gradient buckets, FSDP prefetch, "
                     "async collectives), or communicate less per step (larger local "
                     "batches, gradient accumulation, compression)")
STRAGGLER_IQR_FACTOR = 1.5
STRAGGLER_MIN_SHARE = 0.05
STRAGGLER_TOP_OPS = 3
SKEW_MIN_SHARE = 0.05
SKEW_TOP_OPS = 3


def straggler_spread(others: Sequence[RankSummary]) -> tuple[float, float]:
    """(center, spread) of the other ranks' median steps, µs (see the module docstring)."""
    medians = [s.step_median_us for s in others]
    center = statistics.median(medians)
    spread = max(STRAGGLER_IQR_FACTOR * TimingStats.of(medians).iqr,
                 statistics.median(s.step_iqr_us for s in others),
                 STRAGGLER_MIN_SHARE * center)
    return center, spread


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
    listed = ", ".join(f"{k} {signed_us(d)}" for d, k in diffs if d != 0)
    n = len(others)
    evidence = (f"median step {format_us(slow.step_median_us)} against {format_us(center)} "
                f"for the other {counted(n, 'rank')} (median), "
                f"{format_us(excess)} slower, beyond their spread of {format_us(spread)}")
    if listed:
        evidence += f"; ops per step against {ref.label} (the median rank): {listed}"
    return Finding(
        "straggler", f"{slow.label} is a straggler", evidence,
        f"compare result.ranks[{slow.rank}] with result.ranks[{ref.rank}]: uneven data or work "
        "per rank, a slower or throttled GPU, or another process on its host hold every rank "
        "back at each collective")


def communication_bound(result: ProfileResult) -> Finding | None:
    """Communication not hidden by compute above ``COMM_BOUND_SHARE`` of the iteration."""
    parts = result.breakdown
    if parts is None or parts.wall <= 0 or parts.communication <= 0:
        return None
    exposed = parts.exposed_communication
    share = parts.share("exposed_communication")
    if share <= COMM_BOUND_SHARE:
        return None
    where = "GPU" if parts.device != "cpu" else "CPU"
    if parts.overlap:  # (the summary's figure for all of it, then the part not hidden)
        said = (f"communication takes {format_us(parts.communication)} per iteration (mean; "
                f"{percent(parts.share('communication'))} of the iteration) on the {where}, "
                f"{percent(parts.overlap)} of it overlapped by compute: "
                f"{format_us(exposed)} ({percent(share)}) is not")
    else:
        said = (f"communication takes {format_us(exposed)} per iteration (mean; "
                f"{percent(share)} of the iteration) on the {where}, none of it overlapped "
                "by compute")
    comm_rows = [r for r in result.op_totals if is_comm_op(r.key)]
    per_row = {r.key: per_iter_self(result, r) for r in comm_rows}
    biggest = ", ".join(f"{k} {format_us(us)}" for k, us in
                        sorted(per_row.items(), key=lambda kv: -kv[1])[:2])
    if biggest:
        said += f"; largest: {biggest} per iteration"
        if sum(per_row.values()) > parts.communication * 1.001:  # (threads at once)
            said += " (a row's own time: its threads' or streams' summed)"
    return Finding(
        "communication_bound", "Communication-bound", said,
        COMM_BOUND_ADVICE, share,
        rows=tuple(r.key for r in comm_rows),
        change="hiding or shrinking the communication")


def exposed_share(summary: RankSummary) -> float:
    """Communication not hidden by compute, as a fraction of the median step."""
    if summary.step_median_us <= 0:
        return 0.0
    return summary.exposed_communication_us / summary.step_median_us


def communication_bound_across_ranks(summaries: Sequence[RankSummary]) -> Finding | None:
    """Exposed communication above ``COMM_BOUND_SHARE`` of the step (median over ranks)."""
    if not summaries:
        return None
    shares = [exposed_share(s) for s in summaries]
    typical = statistics.median(shares)
    if typical <= COMM_BOUND_SHARE:
        return None
    worst = max(summaries, key=lambda s: (exposed_share(s), -s.rank))
    hidden = ("overlap not measured on the CPU" if worst.overlap is None
              else f"{percent(worst.overlap)} of its {format_us(worst.communication_us)} "
                   "communication overlapped by compute")
    return Finding(
        "communication_bound", "Communication-bound",
        f"communication not hidden by compute takes {percent(typical)} of the step (median "
        f"over {counted(len(summaries), 'rank')}); worst {worst.label}: "
        f"{format_us(worst.exposed_communication_us)} of a {format_us(worst.step_median_us)} "
        f"step exposed ({hidden})", COMM_BOUND_ADVICE)


def _late_ops(late: Sequence[Collective], steps: int) -> str:
    """The late rank's top ops over its late windows, µs per step."""
    totals: dict[str, float] = {}
    for c in late:
        for name, us in c.late_busy:
            totals[name] = totals.get(name, 0.0) + us
    top = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:SKEW_TOP_OPS]
    return ", ".join(f"{name} {format_us(us / steps)}" for name, us in top)


def collective_skew(summaries: Sequence[RankSummary],
                    collectives: Sequence[Collective]) -> Finding | None:
    """The rank the collectives wait for most, when it costs more than ``SKEW_MIN_SHARE``
    of the median step (see the module docstring), or None."""
    matched = [c for c in collectives if c.ranks >= 2 and c.aligned]
    if not matched or not summaries:
        return None
    charged: dict[int, list[Collective]] = {}
    for c in matched:
        if c.skew_us > 0:
            charged.setdefault(c.last_rank, []).append(c)
    if not charged:
        return None
    rank, late = max(charged.items(),
                     key=lambda kv: (sum(c.skew_us for c in kv[1]), len(kv[1]), -kv[0]))
    steps = len({c.step for c in matched})
    skew = sum(c.skew_us for c in late) / steps
    center = statistics.median(s.step_median_us for s in summaries)
    if center <= 0 or skew <= SKEW_MIN_SHARE * center:
        return None
    transfer = sum(c.transfer_us for c in late) / steps
    names = sorted({c.name for c in late})
    evidence = (f"rank {rank} is the last to arrive at {len(late)} of "
                f"{counted(len(matched), 'collective')} ({', '.join(names)}; "
                f"{counted(steps, 'step')}): the first rank waits "
                f"{format_us(skew)} per step for it ({percent(skew / center)} of the "
                f"median step {format_us(center)}), against {format_us(transfer)} per step of "
                "transfer once all have arrived")
    ops = _late_ops(late, steps)
    if ops:
        evidence += f"; meanwhile it runs {ops} per step"
    return Finding(
        "collective_skew", f"Collectives wait for rank {rank}", evidence,
        f"see what result.ranks[{rank}] runs before its collectives: uneven work per rank "
        "(data, sequence lengths), a slower GPU or a busy host delay its arrival, and every "
        "other rank waits inside the collective")


def find(summaries: Sequence[RankSummary],
         collectives: Sequence[Collective] = ()) -> list[Finding]:
    """Every rule that fires, straggler first."""
    found = [straggler(summaries), collective_skew(summaries, collectives),
             communication_bound_across_ranks(summaries)]
    return [f for f in found if f is not None]
