"""The measurement itself: a first run far slower than steady state (``slow_warmup``),
iterations too spread to trust (``noisy``). Neither explains any of the iteration
(``share`` 0)."""

from __future__ import annotations

from kernelmagic.core.units import format_seconds, whole_percent
from kernelmagic.findings.base import Finding
from kernelmagic.results.advice import more_iterations
from kernelmagic.results.result import ProfileResult

SLOW_WARMUP_RATIO = 5.0       # first warm-up run vs steady median
NOISY_SPREAD = 0.15           # IQR / median above this is noisy


def slow_warmup(result: ProfileResult) -> Finding | None:
    if not result.warmup_timings or not result.timings:
        return None
    first, steady = result.warmup_timings[0], result.stats.median
    if steady <= 0 or first < SLOW_WARMUP_RATIO * steady:
        return None
    return Finding(
        "slow_warmup", "The first run was far slower than steady state",
        f"first warm-up run {format_seconds(first)} vs {format_seconds(steady)} per profiled "
        f"iteration ({first / steady:.0f}x): compilation, autotuning or allocator growth",
        "that cost is outside the measurement; if it matters in production, warm up at "
        "start-up or cache compiled code (torch.compile's cache, fixed shapes)")


def noisy(result: ProfileResult) -> Finding | None:
    if len(result.timings) < 2:
        return None
    spread = result.stats.relative_spread
    if spread <= NOISY_SPREAD:
        return None
    more = max(50, 5 * result.iters)
    return Finding(
        "noisy", "The measurement is noisy",
        f"the middle half of the {result.stats.n} iterations spans {whole_percent(spread)} "
        "of the median "
        f"(IQR {format_seconds(result.stats.iqr)})",
        f"{more_iterations(result, more)} and keep other work off the machine")
