"""The measurement itself: other processes competing for the CPU while it ran
(``busy_machine``: every figure is off, so it comes first), a first run far slower than
steady state (``slow_warmup``), iterations too spread to trust (``noisy``). The last two
explain none of the iteration (``share`` 0)."""

from __future__ import annotations

import math

from kernelmagic.core.timing import NOISY_BEST
from kernelmagic.core.units import counted, format_ratio, format_seconds, percent
from kernelmagic.findings.base import Finding
from kernelmagic.results.result import ProfileResult, more_iterations

SLOW_WARMUP_RATIO = 5.0       # first warm-up run vs steady median
# What is noisy is core/timing.py's rule (TimingStats.noisy), as for --compare and --try.
# The busy-machine thresholds live with the load they judge (core/machine.py: CpuLoad.busy).


def slow_warmup(result: ProfileResult) -> Finding | None:
    if not result.warmup_timings or not result.timings:
        return None
    first, steady = result.warmup_timings[0], result.stats.median
    if steady <= 0 or first < SLOW_WARMUP_RATIO * steady:
        return None
    return Finding(
        "slow_warmup", "The first run was far slower than steady state",
        f"first warm-up run {format_seconds(first)} vs {format_seconds(steady)} per profiled "
        f"iteration ({format_ratio(first / steady, 0)}): compilation, autotuning or "
        "allocator growth",
        "that cost is outside the measurement; if it matters in production, warm up at "
        "start-up or cache compiled code (torch.compile's cache, fixed shapes)")


def noisy(result: ProfileResult) -> Finding | None:
    """The iterations too spread to trust (``core/timing.py: TimingStats.noisy``): the
    middle half spans more than ``NOISY_SPREAD`` of the median, or the best run is below
    ``NOISY_BEST`` of it (a quiet moment on a busy machine)."""
    if len(result.timings) < 2 or not result.stats.noisy:
        return None
    stats = result.stats
    spread, best = stats.relative_spread, stats.best_share
    more = max(50, 5 * result.iters)
    evidence = (f"the middle half of the {stats.n} iterations spans {percent(spread)} "
                f"of the median (IQR {format_seconds(stats.iqr)})")
    if best < NOISY_BEST:
        evidence += (f"; the best run took {format_seconds(stats.best)}, "
                     f"{percent(best)} of the median {format_seconds(stats.median)}")
    return Finding(
        "noisy", "The measurement is noisy", evidence,
        f"{more_iterations(result, more)} and keep other work off the machine")


def busy_machine(result: ProfileResult) -> Finding | None:
    """Other processes used at least ``BUSY_OTHER_CORES`` (``core/machine.py``) of the
    cores while the profiled iterations ran (a live run's ``cpu_load``), and either
    ``BUSY_SHARE`` of them or so
    much that fewer cores were free than torch has threads: every time in the report is
    inflated by waiting for a core, so this comes first (``share`` 1)."""
    load = result.cpu_load
    if load is None or not load.busy:
        return None
    crowded = load.crowded
    free = load.free_cores
    threads = counted(load.torch_threads, "thread")
    evidence = (f"other processes kept {load.other_cores:.1f} of the "
                f"{counted(load.cores, 'core')} busy ({percent(load.other_share)}) while the "
                f"iterations ran, leaving {free:.1f} free for torch's {threads}")
    if load.load_average:
        evidence += f"; load average {load.load_average:.1f}"
    fewer = max(1, math.floor(free))
    threads = crowded and fewer < load.torch_threads
    hint = ("profile on a quieter machine (stop the other work)"
            + (f", or use fewer threads than free cores: torch.set_num_threads({fewer})"
               if threads else ""))
    return Finding("busy_machine", "The machine is busy: other processes compete for the CPU",
                   evidence, hint, share=1.0,
                   variants=(f"threads={fewer}",) if threads else ())
