"""Per-iteration wall-time statistics, summarised the way ``%timeit`` does (how a time is
written: ``kernelmagic/core/units.py``)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

__all__ = ["OUTLIER_RATIO", "TimingStats"]

#: The slowest iteration is flagged when it took this many times the median of the rest.
OUTLIER_RATIO = 2.0


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
        stdev = 0.0
        ratio = None
        if len(ordered) >= 2:
            q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
            stdev = statistics.stdev(ordered)
            median_rest = statistics.median(ordered[:-1])
            ratio = ordered[-1] / median_rest if median_rest > 0 else float("inf")
        return cls(
            n=len(ordered),
            median=statistics.median(ordered),
            q1=q1,
            q3=q3,
            mean=statistics.fmean(ordered),
            stdev=stdev,
            best=ordered[0],
            worst=ordered[-1],
            outlier_ratio=ratio,
        )

    @property
    def iqr(self) -> float:
        """Interquartile range: the spread of the middle half of the iterations."""
        return self.q3 - self.q1

    @property
    def relative_spread(self) -> float:
        """IQR as a fraction of the median (0 when the median is 0)."""
        return self.iqr / self.median if self.median > 0 else 0.0

    def warning(self, advice: str = "Consider more --warmup or --iters.") -> str | None:
        """A one-line warning when the slowest iteration is far slower than the rest,
        ending in ``advice`` (``kernelmagic/results/advice.py`` words it for a trace file)."""
        if self.outlier_ratio is None or self.outlier_ratio < OUTLIER_RATIO:
            return None
        return (
            f"The slowest iteration took {self.outlier_ratio:.1f}x the median of the "
            "others: something may be cached after the first runs, or another process "
            f"competed for the machine. {advice}"
        )

