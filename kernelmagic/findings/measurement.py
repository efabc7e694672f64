"""The run as a whole rather than its ops. The measurement itself: other processes
competing for the CPU while it ran (``busy_machine``: every figure is off, so it comes
first), a trace timed while the GPU's counters were counted (``timed_while_counting``:
likewise), a first run far slower than steady state (``slow_warmup``), iterations too spread
to trust (``noisy``); the last two explain none of the iteration (``share`` 0). And
``--memory``'s memory that every iteration keeps and never gives back (``memory_growth``:
a leak runs out of memory however fast the run is, so it comes first too)."""

from __future__ import annotations

import math
import statistics

from kernelmagic.core.memory_rows import MemoryGrowthRow
from kernelmagic.core.op_names import LAUNCH_CALLS
from kernelmagic.core.timing import NOISY_BEST, SETTLED_SPREAD, settling
from kernelmagic.core.units import (
    counted,
    format_bytes,
    format_ratio,
    format_seconds,
    format_us,
    percent,
)
from kernelmagic.findings.base import NAMED, Finding
from kernelmagic.results.result import ProfileResult, more_iterations, warm_up

#: Bytes kept per iteration below which growth is not reported (a few scalars kept by
#: a logging list are not worth a finding).
GROWTH_MIN_BYTES = 1024
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
    first = settling(result.timings)
    if first:
        return _not_settled(result, first)
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


def _not_settled(result: ProfileResult, first: int) -> Finding:
    """The spread is the first ``first`` iterations, before a steady state the rest keep
    (``core/timing.py: settling``): say so, and how to leave them out."""
    timings = result.timings
    steady = statistics.median(timings[first:])
    head = ", ".join(format_seconds(t) for t in timings[:first])
    shorter = timings[0] < steady  # (all on one side: ``settling``)
    model = result.dependency_model
    if not shorter:
        why = "; the first ones are slower: warm-up (caches, the allocator, autotuning)"
    elif model is not None and model.overhang_ns > 0:
        why = ("; the first ones are shorter: the GPU runs behind the CPU, and its queue of "
               "launched work was still filling")
    else:
        why = "; the first ones are shorter"
    return Finding(
        "noisy", "The first iterations are not steady state",
        f"the first {counted(first, 'iteration')} took {head}, the last "
        f"{len(timings) - first} {format_seconds(steady)} (within "
        f"{percent(SETTLED_SPREAD)} of each other){why}",
        f"profile steady state: {warm_up(result)}")


def busy_machine(result: ProfileResult) -> Finding | None:
    """Other processes used at least ``BUSY_OTHER_CORES`` (``core/machine.py``) of the
    cores while the profiled iterations ran (a live run's ``cpu_load``), and either
    ``BUSY_SHARE`` of them or so
    much that fewer cores were free than torch has threads: every time in the report is
    inflated by waiting for a core, so this comes first (``share`` 1)."""
    load = result.cpu_load
    if load is None or not load.busy:
        return None
    free = load.free_cores
    evidence = (f"other processes kept {load.other_cores:.1f} of the "
                f"{counted(load.cores, 'core')} busy ({percent(load.other_share)}) while the "
                f"iterations ran, leaving {free:.1f} free for torch's "
                f"{counted(load.torch_threads, 'thread')}")
    if load.load_average:
        evidence += f"; load average {load.load_average:.1f}"
    fewer = max(1, math.floor(free))
    use_fewer = load.crowded and fewer < load.torch_threads
    hint = ("profile on a quieter machine (stop the other work)"
            + (f", or use fewer threads than free cores: torch.set_num_threads({fewer})"
               if use_fewer else ""))
    return Finding("busy_machine", "The machine is busy: other processes compete for the CPU",
                   evidence, hint, share=1.0,
                   variants=(f"threads={fewer}",) if use_fewer else ())


def timed_while_counting(result: ProfileResult) -> Finding | None:
    """A trace recorded with profiler metrics (``ProfileResult.timed_while_counting``):
    CUPTI's range profiler serialises each kernel and replays it several times, so its
    launches wait for the passes and every time in the report is the counting's, not the
    run's. Like a busy machine, this comes first (``share`` 1)."""
    if not result.timed_while_counting:
        return None
    evidence = (f"the trace holds hardware counts for {counted(len(result.counters), 'kernel')} "
                "(CUPTI's range profiler, which runs each kernel alone and replays it "
                "several times)")
    launches = [r for r in result.op_totals if r.key in LAUNCH_CALLS and r.count]
    if launches:
        top = max(launches, key=lambda r: r.self_cpu_time_total)
        evidence += (f": every launch waits for its kernel's passes ({top.key} "
                     f"{format_us(top.self_cpu_time_total / top.count)} a call on average, "
                     "where a launch takes µs)")
    evidence += (f", so the iteration's {format_seconds(result.stats.median)} and every time "
                 "in this report are the counting's, not the run's")
    return Finding("timed_while_counting",
                   "The times were taken while the GPU's counters were counted", evidence,
                   "time the run from a recording without profiler metrics (kernel "
                   "tracing on); keep this one for its counts", share=1.0)


def _kept(row: MemoryGrowthRow) -> str:
    """``"3.91 KiB per iteration"``, or with the range when iterations kept different
    amounts: ``"256.75 KiB per iteration on average (1.00 KiB to 1.00 MiB)"``."""
    text = f"{format_bytes(row.per_iter)} per iteration"
    if row.least != row.most:
        text += (f" on average ({format_bytes(row.least)} to {format_bytes(row.most)})")
    return text


def memory_growth(result: ProfileResult) -> Finding | None:
    """Memory allocated in every profiled iteration and still held when profiling ended:
    a list that keeps a tensor each step, a cache that never evicts, a graph kept alive."""
    rows = [r for r in result.memory_growth if r.per_iter >= GROWTH_MIN_BYTES]
    if not rows:
        return None
    rows.sort(key=lambda r: -r.per_iter)
    per_iter = sum(r.per_iter for r in rows)
    named = "; ".join(f"{_kept(r)} from {r.op or 'an unknown op'}"
                      + (f" at {r.source}" if r.source else "") + f" ({r.device})"
                      for r in rows[:NAMED])
    n = rows[0].iterations
    if all(r.least == r.most for r in rows):  # the same bytes every iteration
        kept = (f"{format_bytes(per_iter)} allocated in each of the "
                f"{counted(n, 'profiled iteration')}")
    else:
        kept = (f"{format_bytes(sum(r.total for r in rows))} allocated over the "
                f"{counted(n, 'profiled iteration')} ({format_bytes(per_iter)} per iteration "
                "on average)")
    return Finding(
        "memory_growth", "Memory grows every iteration",
        f"{kept} is still held at the end: {named}",
        "find what keeps a reference to these tensors (a list appended to each step, a "
        "loss kept without .item() or .detach(), a cache); free it or store a Python "
        "number instead",
        share=1.0,  # a leak: the run will run out of memory, however fast it is
    )
