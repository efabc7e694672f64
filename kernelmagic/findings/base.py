"""``Finding``, and the figures every rule reads the same way (the iteration's length, a
share of it, an op's self time per iteration, what bounds the iteration)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelmagic.core.rows import OpRow
from kernelmagic.core.sorting import self_time
from kernelmagic.core.units import format_us, percent
from kernelmagic.results.result import ProfileResult

NAMED = 3  # ops or calls named in a finding's evidence
#: A change the dependency model says saves less than this share of the iteration is not
#: suggested: the finding says what bounds the iteration instead (``Finding.bound``).
NEGLIGIBLE_SAVING = 0.01

#: What bounds the iteration, by the critical path's largest category
#: (``views/dependencies.py: CATEGORY_NAMES``).
BOTTLENECKS = {
    "GPU work": "the GPU is the bottleneck",
    "CPU ops": "the CPU's ops are the bottleneck",
    "launches": "launching kernels on the CPU is the bottleneck",
    "waiting on syncs": "waiting on host-device syncs is the bottleneck",
    "CPU outside ops": "the CPU outside any op (Python between ops) is the bottleneck",
    "idle": "time with nothing recorded (untraced Python, waits) is the bottleneck",
}
#: The profiler's overhead (a share of the unprofiled iteration) above which the findings
#: that measure small per-op CPU costs say it is a large part of what they measure.
PROFILER_HEAVY = 0.25


@dataclass(frozen=True)
class Finding:
    """One observation: a title, the numbers that triggered it, and one suggestion.

    ``share`` is the fraction of the iteration the finding explains (0 when it explains
    none of it, e.g. a noisy measurement). A finding that suggests a change names the
    rows it would change (``rows``, on ``side``; ``change`` says it in words, "making
    aten::mm faster"); ``find`` asks the dependency model what removing their time would
    save at most (``saves_us`` of ``iteration_us``) and orders the findings by that, or by
    ``share`` where the model has no answer. Where the model says the change saves under
    ``NEGLIGIBLE_SAVING`` of the iteration, ``bound`` says what bounds the iteration
    instead, and the finding suggests nothing. ``variants`` names what ``--try`` can
    measure of the suggestion (``bf16``, ``compile``, ``threads=1``), ``against`` what the
    finding advises against (``bf16`` where this CPU runs bfloat16 slower): ``--try auto``
    reads these fields, never the words.
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
    change: str = field(default="", compare=False)
    bound: str = field(default="", compare=False)
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
    def suggests_change(self) -> bool:
        """Whether the finding suggests a change the model prices (and says it is worth
        making: not ``bound``)."""
        return self.saves_us is not None and not self.bound

    @property
    def saving(self) -> str:
        """``saves at most 3.1 ms of 222 ms (1.4%)`` ("" without a prediction, or when
        the change is not worth it: ``bound``)."""
        if self.saves_us is None or self.saves_share is None or self.bound:
            return ""
        return (f"saves at most {format_us(self.saves_us)} of {format_us(self.iteration_us)} "
                f"({percent(self.saves_share)})")

    @property
    def after_evidence(self) -> str:
        """What follows the evidence: ``; saves at most ...``, ``; making X faster saves
        nothing while ...`` (``bound``), or ""."""
        said = self.bound or self.saving
        return f"; {said}" if said else ""

    def __str__(self) -> str:
        text = f"{self.title}: {self.evidence}{self.after_evidence}."
        return text if self.bound else f"{text} Try: {self.suggestion}"


def change_words(finding: Finding) -> str:
    """The change ``finding`` suggests, in words: its ``change``, else "making ROW faster"
    for one row, else "the change it suggests"."""
    if finding.change:
        return finding.change
    return f"making {finding.rows[0]} faster" if len(finding.rows) == 1 else \
        "the change it suggests"


def bottleneck(result: ProfileResult) -> str:
    """What bounds the median iteration, from its critical path's largest category: ``the
    GPU is the bottleneck (GPU work: 97% of the critical path)``."""
    by: dict[str, float] = {}
    for row in result.critical_path:
        by[row.category] = by.get(row.category, 0.0) + row.time
    total = sum(by.values())
    if total <= 0:
        return "other work bounds the iteration"
    category, time = max(by.items(), key=lambda x: x[1])
    words = BOTTLENECKS.get(category, f"{category} is the bottleneck")
    return f"{words} ({category}: {percent(time / total)} of the critical path)"


def bound_by(result: ProfileResult, finding: Finding) -> str:
    """``making X faster saves nothing while the GPU is the bottleneck (...)``: what a
    priced ``finding`` whose change saves under ``NEGLIGIBLE_SAVING`` says instead."""
    saves = finding.saves_us or 0.0
    saved = ("saves nothing" if saves <= 0 else
             f"saves under {percent(NEGLIGIBLE_SAVING)} of the iteration "
             f"({format_us(saves)} of {format_us(finding.iteration_us)})")
    return f"{change_words(finding)} {saved} while {bottleneck(result)}"


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
    return (f"; profiling adds {percent(overhead)} to the iteration "
            f"({format_us(unprofiled * 1e6)} unprofiled), much of it in these per-op CPU "
            "costs, so they weigh less without it")


def of_wall(result: ProfileResult, us_per_iter: float) -> float:
    """``us_per_iter`` as a share of the iteration, clamped to [0, 1] (0 without one)."""
    wall = wall_us(result)
    return min(1.0, max(0.0, us_per_iter / wall)) if wall > 0 else 0.0


def per_iter_self(result: ProfileResult, row: OpRow) -> float:
    """``row``'s self time per iteration, µs: device time where the device is profiled."""
    return self_time(row, result.profiles_device) / result.iters
