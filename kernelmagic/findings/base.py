"""``Finding``, and the figures every rule reads the same way (the iteration's length, a
share of it, an op's self time per iteration)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelmagic.core.rows import OpRow
from kernelmagic.core.sorting import self_time
from kernelmagic.core.units import format_us, short_percent
from kernelmagic.results.result import ProfileResult

NAMED = 3  # ops or calls named in a finding's evidence
#: The profiler's overhead (a share of the unprofiled iteration) above which the findings
#: that measure small per-op CPU costs say it is a large part of what they measure.
PROFILER_HEAVY = 0.25


@dataclass(frozen=True)
class Finding:
    """One observation: a title, the numbers that triggered it, and one suggestion.

    ``share`` is the fraction of the iteration the finding explains (0 when it explains
    none of it, e.g. a noisy measurement). A finding that suggests a change names the
    rows it would change (``rows``, on ``side``); ``find`` asks the dependency model what
    removing their time would save at most (``saves_us`` of ``iteration_us``) and orders
    the findings by that, or by ``share`` where the model has no answer. ``variants``
    names what ``--try`` can measure of the suggestion (``bf16``, ``compile``,
    ``threads=1``), ``against`` what the finding advises against (``bf16`` where this
    CPU runs bfloat16 slower): ``--try auto`` reads these fields, never the words.
    """

    rule: str
    title: str
    evidence: str
    suggestion: str
    share: float = field(default=0.0, compare=False)
    rows: tuple[str, ...] = field(default=(), compare=False)
    side: str = field(default="both", compare=False)
    saves_us: float | None = field(default=None, compare=False)
    iteration_us: float = field(default=0.0, compare=False)
    # ``--try`` names (live/variants.py) the suggestion tries, and those it advises against
    # (``--try auto`` runs the first, never the second)
    variants: tuple[str, ...] = field(default=(), compare=False)
    against: tuple[str, ...] = field(default=(), compare=False)

    @property
    def saves_share(self) -> float | None:
        """``saves_us`` as a share of the iteration (None without a prediction)."""
        if self.saves_us is None:
            return None
        return self.saves_us / self.iteration_us if self.iteration_us > 0 else 0.0

    @property
    def saving(self) -> str:
        """``saves at most 3.1 ms of 222 ms (1.4%)`` ("" without a prediction)."""
        if self.saves_us is None or self.saves_share is None:
            return ""
        return (f"saves at most {format_us(self.saves_us)} of {format_us(self.iteration_us)} "
                f"({short_percent(self.saves_share)})")

    def __str__(self) -> str:
        saving = f"; {self.saving}" if self.saving else ""
        return f"{self.title}: {self.evidence}{saving}. Try: {self.suggestion}"


def wall_us(result: ProfileResult) -> float:
    """The iteration's length, µs: the breakdown's, else the timings' mean (0 without)."""
    parts = result.breakdown
    if parts is not None and parts.wall > 0:
        return parts.wall
    return result.stats.mean * 1e6 if result.timings else 0.0


def profiler_note(result: ProfileResult) -> str:
    """``; profiling adds 65% to the iteration (12.1 ms unprofiled), much of it in these
    per-op CPU costs`` when the profiler's overhead is ``PROFILER_HEAVY`` or more; ""
    otherwise or when unknown."""
    overhead, unprofiled = result.profiler_overhead, result.unprofiled_s
    if overhead is None or unprofiled is None or overhead < PROFILER_HEAVY:
        return ""
    return (f"; profiling adds {short_percent(overhead)} to the iteration "
            f"({format_us(unprofiled * 1e6)} unprofiled), much of it in these per-op CPU "
            "costs, so they weigh less without it")


def of_wall(result: ProfileResult, us_per_iter: float) -> float:
    """``us_per_iter`` as a share of the iteration, clamped to [0, 1] (0 without one)."""
    wall = wall_us(result)
    return min(1.0, max(0.0, us_per_iter / wall)) if wall > 0 else 0.0


def per_iter_self(result: ProfileResult, row: OpRow) -> float:
    """``row``'s self time per iteration, µs: device time where the device is profiled."""
    return self_time(row, result.profiles_device) / result.iters
