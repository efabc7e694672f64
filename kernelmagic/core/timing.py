"""Per-iteration wall-time statistics, summarised the way ``%timeit`` does (how a time is
written: ``kernelmagic/core/units.py``), with the one rule for a run too spread to trust
(``TimingStats.noisy``), and the one noise rule for a change: a speed-up with its 95%
interval (``SpeedUp``; paired rounds: ``paired_speedup``, two runs apart:
``unpaired_speedup``), beyond the noise only when the whole interval is past 1 ±
``MIN_EFFECT``."""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass

from kernelmagic.core.units import format_ratio, percent, ratio_range, speedup_text

__all__ = ["CONFIDENCE", "LOAD_DIFFERS", "MIN_EFFECT", "MIN_PAIRS", "MIN_UNPAIRED",
           "NOISY_BEST", "NOISY_SPREAD", "OUTLIER_RATIO", "SpeedUp", "TimingStats",
           "median_interval", "paired_speedup", "unpaired_speedup"]

#: The slowest iteration is flagged when it took this many times the median of the rest.
OUTLIER_RATIO = 2.0
#: One run's iterations are too spread to trust (``TimingStats.noisy``) when the middle
#: half spans more than this fraction of the median...
NOISY_SPREAD = 0.15
#: ... or the best run took under this fraction of the median (a quiet moment on a busy
#: machine).
NOISY_BEST = 0.6


@dataclass(frozen=True)
class TimingStats:
    """Statistics of the profiled iterations' wall times, in seconds.

    ``outlier_ratio`` is how many times the median of the other iterations the slowest
    one took (``None`` with a single iteration).
    """

    n: int
    median: float
    q1: float
    q3: float
    mean: float
    stdev: float
    best: float
    worst: float
    outlier_ratio: float | None

    @classmethod
    def of(cls, timings: list[float]) -> TimingStats:
        if not timings:
            raise ValueError("no timings to summarise")
        ordered = sorted(timings)
        q1 = q3 = ordered[0]
        stdev, ratio = 0.0, None
        if len(ordered) >= 2:
            q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
            stdev = statistics.stdev(ordered)
            median_rest = statistics.median(ordered[:-1])
            ratio = ordered[-1] / median_rest if median_rest > 0 else float("inf")
        return cls(n=len(ordered), median=statistics.median(ordered), q1=q1, q3=q3,
                   mean=statistics.fmean(ordered), stdev=stdev, best=ordered[0],
                   worst=ordered[-1], outlier_ratio=ratio)

    @property
    def iqr(self) -> float:
        """Interquartile range: the spread of the middle half of the iterations."""
        return self.q3 - self.q1

    @property
    def relative_spread(self) -> float:
        """IQR as a fraction of the median (0 when the median is 0)."""
        return self.iqr / self.median if self.median > 0 else 0.0

    @property
    def best_share(self) -> float:
        """The best run as a fraction of the median (1 when the median is 0)."""
        return self.best / self.median if self.median > 0 else 1.0

    @property
    def noisy(self) -> bool:
        """The one rule for a single run's spread: the middle half spans more than
        ``NOISY_SPREAD`` of the median, or the best run is under ``NOISY_BEST`` of it;
        never with fewer than two iterations (no spread to judge)."""
        return self.n >= 2 and (self.relative_spread > NOISY_SPREAD
                                or self.best_share < NOISY_BEST)

    def warning(self, advice: str = "Consider more --warmup or --iters.") -> str | None:
        """A one-line warning when the slowest iteration is far slower than the rest,
        ending in ``advice`` (``kernelmagic/results/result.py`` words it for a trace file)."""
        if self.outlier_ratio is None or self.outlier_ratio < OUTLIER_RATIO:
            return None
        return (f"The slowest iteration took {format_ratio(self.outlier_ratio, 1)} the median of "
                "the others: something may be cached after the first runs, or another process "
                f"competed for the machine. {advice}")


#: The iterations after a ramp are steady when every one lies within this of their median.
SETTLED_SPREAD = 0.05


def settling(timings: list[float]) -> int:
    """How many of the first iterations ramp to a steady state: the fewest (at least
    one) after which the rest, at least three and at least half of them, all lie within
    ``SETTLED_SPREAD`` of their median, while the first all lie beyond ``NOISY_SPREAD``
    of it, on one side, each nearer than the one before (0: no such ramp). A run that
    ramps to a plateau is not noisy: it had not settled yet (v100_gpu_annotations: 35.1
    and 72.1 ms, then 95.6 ms three times, while the launch queue filled). Noise seldom
    looks like that: on timings drawn at random (lognormal, sigma 0.2, 20,000 runs each)
    it fires on 0.3% of the noisy runs of 4 iterations, 0.5% of 5, 0.1% of 6, none of 3,
    10 or 20."""
    n = len(timings)
    # The rest's range, from each k on: a plateau within SETTLED_SPREAD of its median
    # spans at most (1 + s) / (1 - s), so wider ones are passed without their median.
    # And a ramp on one side, each nearer than the one before, rises or falls strictly:
    # no k beyond the opening run that does is tried; its last one lies beyond NOISY_SPREAD
    # of a median within the rest's range: below (1 - n) x its top or above (1 + n) x its
    # bottom (a slow strict drift passes the other two tests at every k). So a median is
    # taken only for splits that can be the answer: time linear in the iterations.
    low = list(itertools.accumulate(reversed(timings), min))[::-1]
    high = list(itertools.accumulate(reversed(timings), max))[::-1]
    widest = (1 + SETTLED_SPREAD) / (1 - SETTLED_SPREAD)
    last = min(n - max(3, (n + 1) // 2), _monotone_opening(timings))
    for k in range(1, last + 1):
        if high[k] > low[k] * widest or (
                low[k] * (1 + NOISY_SPREAD) >= timings[k - 1] >= high[k] * (1 - NOISY_SPREAD)):
            continue
        tail = timings[k:]
        middle = statistics.median(tail)
        if middle <= 0:
            return 0
        head = [t - middle for t in timings[:k]]
        if (all(abs(t - middle) <= SETTLED_SPREAD * middle for t in tail)
                and all(abs(d) > NOISY_SPREAD * middle for d in head)
                and (all(d < 0 for d in head) or all(d > 0 for d in head))
                and all(abs(a) > abs(b) for a, b in itertools.pairwise(head))):
            return k
    return 0


def _monotone_opening(timings: list[float]) -> int:
    """The length of the longest opening run of ``timings`` that rises strictly or falls
    strictly (1 for a single one, 0 for none)."""
    rising = falling = min(len(timings), 1)
    while rising < len(timings) and timings[rising] > timings[rising - 1]:
        rising += 1
    while falling < len(timings) and timings[falling] < timings[falling - 1]:
        falling += 1
    return max(rising, falling)


# --- the noise rule: a speed-up with its interval, and when it is beyond the noise -------

#: The smallest change called real: a speed-up is "beyond the noise" only when its whole
#: interval lies above ``1 + MIN_EFFECT`` (faster) or below ``1 / (1 + MIN_EFFECT)``
#: (slower). 3%: under it, what a machine's drift and a cell's own jitter move.
MIN_EFFECT = 0.03
#: The intervals' confidence: 95% (each interval says what coverage it reaches exactly).
CONFIDENCE = 0.95
#: The fewest pairs for an exact 95% interval on a median (six: 1 - 2/2**6 = 96.9%).
MIN_PAIRS = 6
#: The fewest samples in each of two runs for the unpaired interval (five: its 95% rank
#: is then the third of 25 differences).
MIN_UNPAIRED = 5
#: Other processes' CPU (cores) differing by this much between two runs timed apart: the
#: runs were not timed under the same load, and no interval of two runs can tell that from
#: a change of the code, so ``--compare`` says so instead of judging.
LOAD_DIFFERS = 0.5
#: The unpaired interval's normal quantile at 95% (two-sided).
_Z95 = 1.959963984540054


@dataclass(frozen=True)
class SpeedUp:
    """A speed-up (above 1: faster) with its interval, and the noise verdict on it.

    ``low`` and ``high`` bound it at ``coverage`` (0 when there are too few samples for
    an interval: then ``low == high == speedup`` and nothing is beyond the noise); ``n``
    counts the pairs (``paired``) or the smaller run's samples (unpaired).
    """

    speedup: float
    low: float
    high: float
    n: int
    coverage: float
    paired: bool = True

    @property
    def has_interval(self) -> bool:
        return self.coverage > 0

    @property
    def faster(self) -> bool:
        """Faster beyond the noise: the whole interval above ``1 + MIN_EFFECT``."""
        return self.has_interval and self.low > 1 + MIN_EFFECT

    @property
    def slower(self) -> bool:
        """Slower beyond the noise: the whole interval below ``1 / (1 + MIN_EFFECT)``."""
        return self.has_interval and self.high < 1 / (1 + MIN_EFFECT)

    @property
    def beyond_noise(self) -> bool:
        return self.faster or self.slower

    @property
    def no_change(self) -> bool:
        """The whole interval within ``1 ± MIN_EFFECT``: no change of that size or more."""
        return (self.has_interval and self.low >= 1 / (1 + MIN_EFFECT)
                and self.high <= 1 + MIN_EFFECT)

    def interval_text(self) -> str:
        """``95% interval 1.25-1.40x`` (as slow-downs when the whole interval is below 1:
        ``95% interval 1.05-1.18x slower``); "" without an interval."""
        if not self.has_interval:
            return ""
        if self.high >= 1:
            return f"95% interval {ratio_range(self.low, self.high)}"
        low = 1 / self.high if self.high > 0 else float("inf")
        high = 1 / self.low if self.low > 0 else float("inf")
        return f"95% interval {ratio_range(low, high)} slower"

    def noise_text(self) -> str:
        """``beyond the noise``, ``within the noise``, ``no change of 3% or more``, or
        why there is no interval."""
        if not self.has_interval:
            least = MIN_PAIRS if self.paired else MIN_UNPAIRED
            return f"too few {'rounds' if self.paired else 'iterations'} for an interval " \
                   f"({least} or more)"
        if self.beyond_noise:
            return "beyond the noise"
        if self.no_change:
            return f"no change of {percent(MIN_EFFECT)} or more"
        return "within the noise"

    def verdict(self) -> str:
        """``1.32x faster, 95% interval 1.25-1.40x: beyond the noise``."""
        interval, change = self.interval_text(), speedup_text(self.speedup)
        head = f"{change}, {interval}" if interval else change
        return f"{head}: {self.noise_text()}"


def median_interval(values: list[float]) -> tuple[float, float, float]:
    """An exact interval on the median of ``values``, from their order statistics:
    ``(low, high, coverage)``, with coverage ``1 - 2 P(Binomial(n, 1/2) < k)`` for the
    k-th smallest and k-th largest values, the largest k whose coverage is at least
    ``CONFIDENCE``; ``(median, median, 0.0)`` with fewer than ``MIN_PAIRS`` values.

    It assumes only that each value is as likely above the median as below it, which a
    randomised order within each round makes true of paired ratios whatever the load did.
    """
    ordered = sorted(values)
    n = len(ordered)
    if n < MIN_PAIRS:
        mid = statistics.median(ordered) if ordered else 0.0
        return mid, mid, 0.0
    tail = 0.0  # P(Bin(n, 1/2) <= k - 1)
    k = 0
    while True:
        nxt = tail + math.comb(n, k) / 2**n
        if 2 * nxt > 1 - CONFIDENCE:
            break
        tail, k = nxt, k + 1
    k = max(k, 1)
    return ordered[k - 1], ordered[n - k], 1 - 2 * tail


def paired_speedup(baseline: list[float], other: list[float]) -> SpeedUp:
    """The speed-up of ``other`` over ``baseline`` from rounds timed together (``other[i]``
    and ``baseline[i]`` in the same round): the inverse of the median of the paired
    ratios ``other[i] / baseline[i]``, with ``median_interval`` of those ratios."""
    ratios = [o / b for b, o in zip(baseline, other, strict=True) if b > 0 and o > 0]
    if not ratios:
        return SpeedUp(0.0, 0.0, 0.0, 0, 0.0)
    mid = statistics.median(ratios)
    low, high, coverage = median_interval(ratios)
    return SpeedUp(1 / mid, 1 / high, 1 / low, len(ratios), coverage)


def unpaired_speedup(before: list[float], after: list[float]) -> SpeedUp:
    """The speed-up of ``after`` over ``before`` from two runs timed apart (no pairs): the
    ratio of their medians, with the Hodges-Lehmann interval of the shift in log time
    (the order statistics of all differences ``log b - log a`` that the Mann-Whitney
    statistic at 95% picks, normal approximation). Valid when each run's samples are
    alike; it cannot tell a change of the machine's load between the runs from a change
    of the code (``results/compare.py`` says when the load differed)."""
    b = [t for t in before if t > 0]
    a = [t for t in after if t > 0]
    if not b or not a:
        return SpeedUp(0.0, 0.0, 0.0, 0, 0.0, paired=False)
    ratio = statistics.median(b) / statistics.median(a)
    n, m = len(b), len(a)
    if min(n, m) < MIN_UNPAIRED:
        return SpeedUp(ratio, ratio, ratio, min(n, m), 0.0, paired=False)
    import numpy as np

    diffs = np.sort(np.subtract.outer(np.log(b), np.log(a)).ravel())
    c = math.floor(n * m / 2 - _Z95 * math.sqrt(n * m * (n + m + 1) / 12))
    c = min(max(c, 1), len(diffs) // 2)
    low, high = math.exp(float(diffs[c - 1])), math.exp(float(diffs[len(diffs) - c]))
    return SpeedUp(ratio, min(low, ratio), max(high, ratio), min(n, m), CONFIDENCE,
                   paired=False)
