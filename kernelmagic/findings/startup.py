"""Set-up inside the profiled window: ``startup_in_window``, and the estimate (``setup``)
the other rules take out before they blame idle time on anything else.

CUDA start-up or first-call set-up (set-up runtime calls, kernel launches far slower than
a launch, a first iteration far above the others) is not steady state: ``gpu_idle`` and
``launch_bound`` count only the idle time set-up does not explain (``unexplained_idle``),
and ``dominant_op`` is silent while this rule fires.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass

from kernelmagic.core.op_names import ALLOCATOR_CALLS, LAUNCH_CALLS, SETUP_CALLS, is_runtime_call
from kernelmagic.core.rows import OpRow
from kernelmagic.core.units import format_seconds, format_us, percent
from kernelmagic.findings.base import NAMED, Finding, wall_us
from kernelmagic.results.result import ProfileResult, warm_up

STARTUP_SHARE = 0.2           # set-up inside the window above this fraction of the iteration
SETUP_LAUNCH_US = 100.0       # a kernel launch averaging this long is a first launch
SETUP_CALL_US = 1000.0        # any other runtime call (not a sync or copy) averaging this long
SLOW_FIRST_ITER_RATIO = 2.0   # first iteration vs the median of the others

_NOT_SETUP = re.compile(r"Synchronize|Memcpy|Memset|Launch|Event|Wait|Query|Capturing")


@dataclass(frozen=True)
class Setup:
    """Set-up inside the profiled window, µs per iteration (see ``setup``)."""

    calls: list[OpRow]        # set-up runtime calls and first launches, most time first
    calls_us: float           # their self CPU time per iteration
    first_us: float = 0.0     # the first iteration's excess over the others' median, spread
    first: float = 0.0        # the first iteration, s
    others: float = 0.0       # the median of the others, s

    @property
    def us(self) -> float:
        """Per iteration: the larger of the two estimates (the calls run in that iteration)."""
        return max(self.calls_us, self.first_us)


def setup(result: ProfileResult) -> Setup:
    """The set-up a profile's window holds.

    Runtime calls named in ``SETUP_CALLS`` (context creation, streams, the caching
    allocator), kernel launches averaging ``SETUP_LAUNCH_US`` or more (a launch takes
    µs; the first launch of a kernel loads its module) unless the GPU was busy longer
    than they took (then they wait on a full launch queue) or the times were taken while
    the GPU's counters were counted (then each launch waits for its kernel's passes:
    ``measurement.timed_while_counting``), and any other runtime call that
    is not a sync, copy, launch or event averaging ``SETUP_CALL_US`` or more; and, with at
    least three iterations and no warm-up run before them (a trace's steps), a first
    iteration above ``SLOW_FIRST_ITER_RATIO`` × the median of the others.
    """
    parts = result.breakdown
    idle = parts.idle * result.iters if parts is not None and parts.device != "cpu" else None
    calls = []
    for r in result.op_totals:
        if r.kind != "op" or not r.count or not is_runtime_call(r.key):
            continue
        mean = r.self_cpu_time_total / r.count
        if r.key in LAUNCH_CALLS:
            if (mean >= SETUP_LAUNCH_US and not result.timed_while_counting
                    and (idle is None or r.self_cpu_time_total <= idle)):
                calls.append(r)
        elif r.key in SETUP_CALLS or (mean >= SETUP_CALL_US and not _NOT_SETUP.search(r.key)):
            calls.append(r)
    calls.sort(key=lambda r: -r.self_cpu_time_total)
    found = Setup(calls, sum(r.self_cpu_time_total for r in calls) / result.iters)
    times = result.timings
    if len(times) >= 3 and not result.warmup:
        others = statistics.median(times[1:])
        if others > 0 and times[0] > SLOW_FIRST_ITER_RATIO * others:
            excess = (times[0] - others) * 1e6 / len(times)
            found = Setup(calls, found.calls_us, excess, times[0], others)
    return found


def unexplained_idle(result: ProfileResult) -> float:
    """GPU idle µs per iteration that set-up does not explain."""
    parts = result.breakdown
    if parts is None or parts.device == "cpu":
        return 0.0
    return max(0.0, parts.idle - setup(result).us)


def _setup_call(result: ProfileResult, r: OpRow, first_context: bool) -> str:
    """A set-up call with its time per iteration, calls, and what it does in a window."""
    said = f"×{r.count / result.iters:g}"
    if r.key in LAUNCH_CALLS:
        said += (f", {format_us(r.self_cpu_time_total / r.count)} a call on average where a "
                 "launch takes µs: a first launch loads its kernel's module")
    elif r.key in ALLOCATOR_CALLS:
        said += ": the caching allocator growing"
    elif first_context:
        said += ": the first runtime call creates the context"
    return f"{r.key} {format_us(r.self_cpu_time_total / result.iters)} ({said})"


def startup_in_window(result: ProfileResult) -> Finding | None:
    """CUDA start-up or first-call set-up holding ``STARTUP_SHARE`` of the iteration."""
    wall = wall_us(result)
    found = setup(result)
    share = found.us / wall if wall > 0 else 0.0
    if share < STARTUP_SHARE:
        return None
    said = []
    if found.calls_us / wall >= STARTUP_SHARE / 2:
        context = next((r for r in found.calls
                        if r.key not in LAUNCH_CALLS and r.key not in ALLOCATOR_CALLS), None)
        named = ", ".join(_setup_call(result, r, r is context) for r in found.calls[:NAMED])
        said.append(f"set-up calls take {format_us(found.calls_us)} per iteration (mean; "
                    f"{percent(found.calls_us / wall)} of the iteration): {named}")
    if found.first_us:
        said.append(f"the first iteration took {format_seconds(found.first)} against "
                    f"{format_seconds(found.others)} for the others (median)")
    warm = [g for g in result.ranges if "warmup" in g.key.lower().replace("-", "")]
    if warm:  # (named, not timed: a range's total counts one nested in another of its name
        # twice, as torch's does, which is no time the window holds)
        said.append("the window holds warm-up ranges: " + ", ".join(
            f"{g.key} (×{g.count / result.iters:g})" for g in warm[:2]))
    runtime = "ROCm" if any(r.key.startswith("hip") for r in found.calls) else "CUDA"
    return Finding(
        "startup_in_window", f"{runtime} start-up or first-call set-up inside the profiled "
                             "window",
        "; ".join(said),
        f"profile steady state: {warm_up(result)}; if cudaMalloc/cudaFree recur every step, "
        "keep torch.cuda.empty_cache() out of the loop and shapes steady", share,
        rows=tuple(r.key for r in found.calls), side="cpu",
        change="taking the set-up out of the window")
