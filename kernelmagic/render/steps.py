"""The steps view (``--steps``) as notes and tables: one line per group of steps
(``prefill: idx (1, 64) int64, 1 step, 11.8 ms``), the groups with their top ops, and the
median iteration's steps in order with a bar each (a bar chart in text, HTML and widget).
Every per-step and per-iteration figure is a median, and says so.
"""

from __future__ import annotations

from kernelmagic.core.step_rows import StepGroupRow, StepRow
from kernelmagic.core.units import counted, format_bytes, format_us
from kernelmagic.render.table import Column, Table, text_column, time_column
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.steps import REPEAT_HINT_CALLS

#: Characters in the longest step's bar.
BAR_WIDTH = 30


def unprofiled_scale(result: ProfileResult) -> float | None:
    """How much faster an unprofiled iteration ran than a profiled one (profiled median /
    unprofiled), None when the unprofiled time is unknown."""
    overhead = result.profiler_overhead
    return 1 + overhead if overhead is not None and overhead > -1 else None


def group_sentence(g: StepGroupRow, scale: float | None = None) -> str:
    """``decode: idx (1, 1) int64, 15 steps, 2.90 ms each (median), 345 steps/s profiled
    (about 520 unprofiled)``: the steps are timed under the profiler; ``scale``
    (``unprofiled_scale``) takes the profiler's share out of the rate in proportion."""
    inputs = f": {g.inputs}" if g.inputs and g.inputs != g.group else ""
    if g.count == 1:
        return f"{g.group}{inputs}, 1 step, {format_us(g.median_us)}"
    rate = f"{g.steps_per_s:,.0f} steps/s profiled"
    if scale is not None:
        rate += f" (about {g.steps_per_s * scale:,.0f} unprofiled)"
    return (f"{g.group}{inputs}, {counted(g.count, 'step')}, {format_us(g.median_us)} each "
            f"(median), {rate}")


def steps_notes(result: ProfileResult) -> list[str]:
    """The steps' summary and one line per group; without ``--steps``, the hint to use it
    when one module's forward ran ``REPEAT_HINT_CALLS`` times or more."""
    summary = result.steps_summary
    if summary is None:
        return _hint(result)
    if not result.steps:
        return []  # the view's note says the target was not called
    target = f" ({summary.target})" if summary.target else ""
    between = ", ".join(f"{op} {format_us(us)}" for op, us in summary.between_top_ops.items())
    line = (f"Steps{target}: {counted(summary.steps, 'step')} per iteration, "
            f"{format_us(summary.median_us)} each (median); first {format_us(summary.first_us)}, "
            f"slowest {format_us(summary.slowest_us)} (step {summary.slowest_index} of "
            f"iteration {summary.slowest_iteration}; in order: iteration "
            f"{summary.median_iteration}, the median); between the steps "
            f"{format_us(summary.between_us)} per iteration (median"
            + (f"; ops there: {between})" if between else ")"))
    scale = unprofiled_scale(result)
    return [line] + [f"  {group_sentence(g, scale)}" for g in result.step_groups]


def _hint(result: ProfileResult) -> list[str]:
    call = result.repeated_call
    if call is None or call.calls < REPEAT_HINT_CALLS:
        return []
    who = f"{call.target} ({call.module_type})" if call.target else f"a {call.module_type}"
    flag = f"--steps {call.target}" if call.target else "--steps <its name>"
    return [f"{who} ran its forward {counted(call.calls, 'time')} per run of the code, each "
            f"at the top level: see each call as a step with {flag}"]


def group_table(result: ProfileResult) -> Table:
    """The groups of steps, in the order they first ran."""
    order = {g.group: i for i, g in enumerate(result.step_groups)}
    cols = [
        text_column("op", "group", lambda g: g.group, width=140),
        text_column("inputs", "inputs", lambda g: g.inputs, width=240),
        Column("count", "steps per iteration", lambda g: g.count, lambda g: f"{g.count:,}"),
        time_column("median", "median step", lambda g: g.median_us),
        Column("rate", "steps/s (profiled)", lambda g: g.steps_per_s,
               lambda g: f"{g.steps_per_s:,.0f}"),
        time_column("first", "first", lambda g: g.first_us),
        time_column("slowest", "slowest", lambda g: g.slowest_us),
        time_column("cpu", "in ops (CPU)", lambda g: g.cpu_us),
    ]
    if result.profiles_device:
        cols.append(time_column("device", "device", lambda g: g.device_us))
    if "memory" in result.views:
        cols.append(Column("memory", "memory growth per step", lambda g: g.memory_per_step,
                           lambda g: format_bytes(g.memory_per_step), width=150))
    cols += [
        Column("top_ops", "top ops per step (median self time)",
               lambda g: next(iter(g.top_ops.values()), 0.0),
               lambda g: ", ".join(f"{op} {format_us(t)}" for op, t in g.top_ops.items()),
               numeric=False, width=420),
        Column("order", "#", lambda g: -order[g.group], lambda g: str(order[g.group] + 1),
               width=40),
    ]
    return Table(cols, list(result.step_groups), "order", noun="groups")


def step_table(result: ProfileResult) -> Table:
    """The median iteration's steps in order, each with a bar as long as its time (the
    summary line names the iteration)."""
    summary = result.steps_summary
    median = summary.median_iteration if summary is not None else 0
    rows = [s for s in result.steps if s.iteration == median]
    longest = max((s.wall_us for s in rows), default=0.0)

    def bar(s: StepRow) -> str:
        return "█" * max(1, round(BAR_WIDTH * s.wall_us / longest)) if longest > 0 else ""

    cols = [
        Column("step", "step", lambda s: -s.index, lambda s: str(s.index), width=60),
        text_column("op", "group", lambda s: s.group, width=140),
        time_column("wall", "time", lambda s: s.wall_us),
        time_column("cpu", "in ops (CPU)", lambda s: s.cpu_us),
    ]
    if result.profiles_device:
        cols.append(time_column("device", "device", lambda s: s.device_us))
    if "memory" in result.views:
        cols.append(Column("memory", "memory held", lambda s: s.memory_held,
                           lambda s: format_bytes(s.memory_held), width=120))
    cols.append(Column("bar", "", lambda s: s.wall_us, bar, numeric=False, width=260))
    return Table(cols, rows, "step", noun="steps")


def steps_tables(result: ProfileResult) -> list[tuple[str, object]]:
    """(title, Table or note) of the steps view; nothing when it was not asked for."""
    summary = result.steps_summary
    if summary is None:
        return []
    if not result.steps:
        return [("steps", summary.note)]
    return [("steps", group_table(result)), ("steps in order", step_table(result))]
