"""``--steps``: what the steps of a loop show (``kernelmagic/views/steps.py``).

- ``step_overhead``: a group of steps bound by overhead: on a GPU, the device idle most of
  each step (the CPU launching, or in Python between ops); on the CPU, most of each step
  outside ops (Python)
- ``steps_slow_down``: step time rising with the step's place in its group (attention
  without a KV cache, a cache that grows)
- ``slow_first_step``: each iteration's first step of a group far slower than the rest
  (compilation named only where torch.compile compiled in that step)
- ``time_between_steps``: the loop spending much of the iteration outside the target
"""

from __future__ import annotations

import numpy as np

from kernelmagic.core.step_rows import StepGroupRow
from kernelmagic.core.units import counted, format_ratio, format_us, percent
from kernelmagic.findings.base import NAMED, Finding, of_wall, profiler_note, wall_us
from kernelmagic.results.result import ProfileResult

STEP_BUSY = 0.5             # GPU work below this fraction of a step's wall time: overhead
STEP_IN_OPS = 0.5           # CPU: ops below this fraction of a step's wall time: Python
SLOWDOWN_MIN_STEPS = 4      # steps per iteration a group needs for a trend
SLOWDOWN_RISE = 0.1         # fitted rise from the group's first step to its last
SLOWDOWN_AGREEMENT = 0.4   # Kendall's tau of step time with the step's place (70% of pairs)
FIRST_STEP_RATIO = 3.0      # a group's first step vs its median step
FIRST_STEP_MIN = 3          # steps per iteration a group needs for a first step to stand out
BETWEEN_SHARE = 0.2         # the loop outside the steps above this share of the iteration


def _groups(result: ProfileResult) -> list[StepGroupRow]:
    return [g for g in result.step_groups if g.median_us > 0]


def _overhead_us(result: ProfileResult, group: StepGroupRow) -> float:
    """The µs per step not covered by device work (GPU) or by ops (CPU); 0 below the bar."""
    busy, bar = ((group.device_us, STEP_BUSY) if result.profiles_device
                 else (group.cpu_us, STEP_IN_OPS))
    return group.median_us - busy if busy < bar * group.median_us else 0.0


def step_overhead(result: ProfileResult) -> Finding | None:
    """The group of steps that loses the most time per iteration to overhead."""
    found = [(g.count * _overhead_us(result, g), g) for g in _groups(result)]
    found = [(us, g) for us, g in found if us > 0]
    if not found:
        return None
    us, g = max(found, key=lambda pair: pair[0])
    each = (f"{g.group} steps ({counted(g.count, 'step')} per iteration, "
            f"{format_us(g.median_us)} each)")
    if result.profiles_device:
        launching = g.cpu_us >= STEP_BUSY * g.median_us
        evidence = (f"{each}: the GPU works {format_us(g.device_us)} of each step "
                    f"({percent(g.device_us / g.median_us)}); the CPU spends "
                    f"{format_us(g.cpu_us)} of it in ops, "
                    + ("launching kernels: launch-bound" if launching
                       else "the rest in Python between ops"))
        fix = ("replay the step as a CUDA graph (torch.compile(mode=\"reduce-overhead\")) or "
               "fuse its small kernels (torch.compile); batch more sequences per step")
    else:
        evidence = (f"{each}: ops run {format_us(g.cpu_us)} of each step "
                    f"({percent(g.cpu_us / g.median_us)}); the rest is Python outside "
                    "ops")
        fix = ("compile the step (torch.compile) to cut the Python between ops, or do more "
               "work per step (several sequences or a larger batch)")
    evidence += profiler_note(result)
    return Finding("step_overhead", f"The {g.group} steps are overhead-bound", evidence, fix,
                   of_wall(result, us))


def _trend(times: np.ndarray) -> tuple[float, float]:
    """(rise, tau) of ``times`` by place: the Theil-Sen line's rise from the first place to
    the last over its value at the first, and Kendall's tau (the share of pairs where the
    later step is slower, less the share where it is faster). Both are medians and counts
    of pairs, so one stalled step moves neither much."""
    n = times.size
    i, j = np.triu_indices(n, k=1)
    slope = float(np.median((times[j] - times[i]) / (j - i)))
    start = float(np.median(times - slope * np.arange(n)))
    rise = slope * (n - 1) / start if start > 0 else 0.0
    tau = float(np.mean(np.sign(times[j] - times[i])))
    return rise, tau


def _best_by_place(result: ProfileResult, group: str) -> np.ndarray:
    """Each place in the group's order: its fastest time over the iterations (as %timeit's
    best: a stall in one iteration makes no trend)."""
    places: dict[int, list[float]] = {}
    for it in sorted({s.iteration for s in result.steps if s.group == group}):
        mine = [s.wall_us for s in result.steps if s.group == group and s.iteration == it]
        for k, t in enumerate(mine):
            places.setdefault(k, []).append(t)
    return np.asarray([min(places[k]) for k in sorted(places)])


def steps_slow_down(result: ProfileResult) -> Finding | None:
    """Step time rising with the step's place in its group."""
    for g in _groups(result):
        if g.count < SLOWDOWN_MIN_STEPS:
            continue
        times = _best_by_place(result, g.group)
        rise, tau = _trend(times)
        if rise < SLOWDOWN_RISE or tau < SLOWDOWN_AGREEMENT:
            continue
        extra = float(np.sum(times - times[0])) / max(len(times), 1) * g.count
        return Finding(
            "steps_slow_down", f"The {g.group} steps slow down as they go",
            f"{counted(g.count, 'step')} per iteration: the first takes {format_us(times[0])} "
            f"(best of the iterations), the last {format_us(times[-1])} (a fitted "
            f"rise of {percent(rise)}; later steps are slower in "
            f"{percent((1 + tau) / 2)} of pairs)",
            "keep each step's work constant: a KV cache (pass past keys and values, feed only "
            "the new token), or a preallocated cache written in place (no torch.cat per step)",
            of_wall(result, extra))
    return None


def _first_step_cause(g: StepGroupRow, iterations: int) -> tuple[str, str]:
    """(why, fix) for a slow first step: compilation only where torch.compile compiled in
    that step (``first_compiles``), else what a first call does without it."""
    if g.first_compiles:
        where = (f"in {g.first_compiles} of the {counted(iterations, 'iteration')}"
                 if iterations > 1 else "in the iteration")
        return (f"torch.compile compiled in it ({where})",
                "warm the step up once outside the loop so that it compiles there, and give "
                "its first call the shapes of the rest (no recompiling)")
    return ("allocation or a cache filled on the first call",
            "warm the step up once outside the loop, or give its first call the shapes of "
            "the rest (no growing allocations)")


def slow_first_step(result: ProfileResult) -> Finding | None:
    """A group's first step in each iteration far slower than its median step; compilation
    named as the cause only when a compile ran in that step."""
    iterations = len({s.iteration for s in result.steps})
    for g in _groups(result):
        if g.count < FIRST_STEP_MIN or g.first_us < FIRST_STEP_RATIO * g.median_us:
            continue
        why, fix = _first_step_cause(g, iterations)
        return Finding(
            "slow_first_step", f"The first {g.group} step is far slower than the rest",
            f"{format_us(g.first_us)} against {format_us(g.median_us)} for the median of its "
            f"{counted(g.count, 'step')} per iteration "
            f"({format_ratio(g.first_us / g.median_us, 1)}): {why}",
            fix, of_wall(result, g.first_us - g.median_us))
    return None


def time_between_steps(result: ProfileResult) -> Finding | None:
    """Much of the iteration spent in the loop outside the target."""
    summary = result.steps_summary
    if summary is None or not result.steps or wall_us(result) <= 0:
        return None
    share = of_wall(result, summary.between_us)
    if share < BETWEEN_SHARE:
        return None
    ops = ", ".join(f"{op} {format_us(us)}"
                    for op, us in list(summary.between_top_ops.items())[:NAMED])
    return Finding(
        "time_between_steps", "Much of the loop runs outside the steps",
        f"{format_us(summary.between_us)} per iteration ({percent(share)}) is spent "
        f"between the calls of {summary.target or 'the target'}"
        + (f"; ops there: {ops}" if ops else "; no op ran there (Python)"),
        "move data loading, logging and printing out of the loop (a DataLoader with "
        "num_workers and pin_memory, logging every N steps)", share)


RULES = [step_overhead, steps_slow_down, slow_first_step, time_between_steps]
