"""The deeper views in the reports: each view's tables, notes and picture, read from its
declaration (``views/registry.py``), and the tables of kernels, source lines, modules and
the user's ranges.

``view_reports(result)`` lists the views a report shows besides the op table, each with its
tables (title, Table or a one-line note) and picture; ``view_tables`` their tables alone;
``view_notes`` the one-line facts that go with them. The text, HTML and widget reports all
read these, so a view's tables and picture are wired here once.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from kernelmagic.core.event_rules import NO_CATEGORY, UNPAIRED
from kernelmagic.core.rows import KernelRow
from kernelmagic.core.units import counted, format_bytes, format_us, percent, percent_of
from kernelmagic.render.names import short_names
from kernelmagic.render.table import Column, Table, name_column, summed, text_column, time_column
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.registry import view_specs


def launcher_text(k: KernelRow) -> str:
    """``launched_by`` as the kernels table shows it: with its share of the calls where
    other rows launched some too (``nccl:all_to_all (4 of 10)``: the row panel,
    ``result.explain(kernel)``, lists them all)."""
    if 0 < k.launched_by_calls < k.count:
        return f"{k.launched_by} ({k.launched_by_calls:,} of {k.count:,})"
    return k.launched_by


def kernel_table(result: ProfileResult) -> Table:
    """The kernels, each named by its short name (``render/names.py``: different kernels
    keep different names); the full name is the column's value (the HTML cell's title)."""
    total = sum(k.device_time_total for k in result.kernels)
    short = short_names(k.key for k in result.kernels)
    cols = [
        Column("op", "kernel", lambda k: k.key, lambda k: short[k.key], numeric=False,
               width=450),  # a short name (60 characters) on one line
        Column("calls", "calls", lambda k: k.count, lambda k: f"{k.count:,}"),
        time_column("device", summed("total device", result.iters),
                    lambda k: k.device_time_total),
        time_column("device_avg", "mean", lambda k: k.device_time),
        Column("pct", "% device", lambda k: k.device_time_total,
               lambda k: percent_of(k.device_time_total, total)),
        text_column("launched_by", "launched by", launcher_text, width=220),
    ]
    return Table(cols, list(result.kernels), "device", noun="kernels")


def source_table(result: ProfileResult) -> Table:
    total = result.self_cpu_time_total
    cols = [
        name_column("file:line function", width=300),
        text_column("code", "code", lambda s: s.code, width=300),
        time_column("self_cpu", summed("self CPU", result.iters), lambda s: s.self_cpu_time_total),
        Column("pct", "% self CPU", lambda s: s.self_cpu_time_total,
               lambda s: percent_of(s.self_cpu_time_total, total)),
        Column("ops", "ops", lambda s: s.ops, lambda s: f"{s.ops:,}"),
    ]
    if result.profiles_device:
        cols.insert(2, time_column("self_device", summed("self device", result.iters),
                                   lambda s: s.self_device_time_total))
    # Cell lines first, then by time: the order collect_sources gave.
    order = {s.key: i for i, s in enumerate(result.sources)}
    cols.append(Column("order", "#", lambda s: -order[s.key], lambda s: str(order[s.key] + 1),
                       width=40))
    return Table(cols, list(result.sources), "order", noun="source locations")


def gpu_idle_table(result: ProfileResult) -> Table:
    """Why the GPU waits: its idle time per cause, per iteration (``views/gpu_idle.py``),
    with the line behind each cause when the run or trace named any."""
    lines = any(r.location for r in result.gpu_idle)  # no samples or frames: no lines
    cols = [
        text_column("op", "cause", lambda r: r.cause, width=160),
        Column("detail", "op" if lines else "op or line", lambda r: r.detail,
               lambda r: r.detail, numeric=False, width=220 if lines else 260),
        *([text_column("location", "line", lambda r: r.location, width=160),
           text_column("code", "code", lambda r: r.code, width=240)] if lines else []),
        time_column("idle_us", "idle per iteration", lambda r: r.idle_us),
        Column("share", "% of iteration", lambda r: r.share, lambda r: percent(r.share)),
        Column("stretches", "stretches", lambda r: r.stretches, lambda r: f"{r.stretches:,}"),
    ]
    return Table(cols, list(result.gpu_idle), "idle_us", noun="causes")


def python_table(result: ProfileResult) -> Table:
    """``--python``: the time no op covered, per user line, per iteration."""
    cols = [
        text_column("op", "line", lambda r: r.key, width=260),
        text_column("function", "function", lambda r: r.function, width=140),
        text_column("code", "code", lambda r: r.code, width=300),
        time_column("self_us", "self per iteration", lambda r: r.self_us),
        Column("share", "% of iteration", lambda r: r.share, lambda r: percent(r.share)),
        Column("samples", "samples", lambda r: r.samples, lambda r: f"{r.samples:,}"),
    ]
    return Table(cols, list(result.python_lines), "self_us", noun="Python lines")


def module_table(result: ProfileResult) -> Table:
    order = {m.key: i for i, m in enumerate(result.modules)}
    cols = [
        Column("op", "module", lambda m: m.key,
               lambda m: "  " * m.depth + m.key, numeric=False, width=260),
        text_column("type", "type", lambda m: m.module_type, width=180),
        Column("calls", "calls", lambda m: m.count, lambda m: f"{m.count:,}"),
        time_column("cpu", summed("total CPU", result.iters), lambda m: m.cpu_time_total),
        time_column("self_cpu", summed("self CPU", result.iters),
                    lambda m: m.self_cpu_time_total),
    ]
    if result.profiles_device:
        cols += [time_column("device", summed("total device", result.iters),
                             lambda m: m.device_time_total),
                 time_column("self_device", summed("self device", result.iters),
                             lambda m: m.self_device_time_total)]
    cols.append(Column("order", "tree", lambda m: -order[m.key],
                       lambda m: str(order[m.key] + 1), width=48))
    return Table(cols, list(result.modules), "order", noun="modules")


def range_table(result: ProfileResult) -> Table:
    cols = [
        name_column("range", width=220),
        Column("calls", "calls", lambda g: g.count, lambda g: f"{g.count:,}"),
        time_column("cpu", summed("total CPU", result.iters), lambda g: g.cpu_time_total),
        time_column("cpu_iter", "CPU per iteration", lambda g: g.cpu_time_total / result.iters),
        Column("top_ops", "top ops inside (self time)",
               lambda g: g.top_ops[0][1] if g.top_ops else 0.0,  # sorts by the biggest op
               lambda g: ", ".join(f"{op} {format_us(t)}" for op, t in g.top_ops[:3]),
               width=460),
    ]
    if result.profiles_device:
        cols.insert(3, time_column("device", summed("total device", result.iters),
                                   lambda g: g.device_time_total))
    return Table(cols, list(result.ranges), "cpu", noun="ranges")


def kernel_tables(result: ProfileResult) -> list[tuple[str, object]]:
    return [("kernels", kernel_table(result))] if result.profiles_device else []


def range_tables(result: ProfileResult) -> list[tuple[str, object]]:
    return [("ranges", range_table(result))] if result.ranges else []


def gpu_idle_tables(result: ProfileResult) -> list[tuple[str, object]]:
    return [("gpu idle", gpu_idle_table(result))] if result.gpu_idle else []


def source_tables(result: ProfileResult) -> list[tuple[str, object]]:
    if "stack" not in result.views:
        return []
    return [("source", source_table(result) if result.sources else
             "No op ran under a Python function of yours.")]


def python_tables(result: ProfileResult) -> list[tuple[str, object]]:
    """The ``python`` view: its table, or the one line that says why there is none."""
    if "python" not in result.views:
        return []
    if result.python_note or not result.python_lines:
        return [("python", result.python_note or "No Python line of yours ran outside the ops.")]
    return [("python", python_table(result))]


def module_tables(result: ProfileResult) -> list[tuple[str, object]]:
    if "modules" not in result.views:
        return []
    return [("modules", module_table(result) if result.modules else "No nn.Module was called.")]


class Picture(NamedTuple):
    """A view's picture: the image's bytes, its MIME type and its alt text."""

    data: bytes
    mime: str
    alt: str


@dataclass(frozen=True)
class ViewReport:
    """What the reports show of one view: its tables (title, Table or a one-line note) and
    its picture (drawn once per report), which goes above the first table."""

    name: str
    tables: list[tuple[str, object]]
    picture: Picture | None = None


def resolve(path: str) -> Callable[..., Any] | None:
    """The renderer function a declaration names, ``"module:function"`` (None for "")."""
    if not path:
        return None
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def _called(path: str, result: ProfileResult, default: Any) -> Any:
    function = resolve(path)
    return default if function is None else function(result)


def view_pictures(result: ProfileResult) -> dict[str, Picture]:
    """Each view's picture (``ViewSpec.picture``), by the view's name: drawn once per report
    and shared by its HTML and widget."""
    drawn = {spec.name: _called(spec.picture, result, None) for spec in view_specs()}
    return {name: picture for name, picture in drawn.items() if picture is not None}


def view_reports(result: ProfileResult,
                 pictures: dict[str, Picture] | None = None) -> list[ViewReport]:
    """Every view the report shows besides the op table, in the declarations' order, with
    its tables and picture (``pictures``: drawn already; default drawn here)."""
    drawn = view_pictures(result) if pictures is None else pictures
    reports = [ViewReport(spec.name, _called(spec.tables, result, []), drawn.get(spec.name))
               for spec in view_specs()]
    return [r for r in reports if r.tables or r.picture is not None]


def view_tables(result: ProfileResult) -> list[tuple[str, object]]:
    """(title, Table or note) for every view the report shows besides the op table."""
    return [entry for spec in view_specs() for entry in _called(spec.tables, result, [])]


def _streams_note(result: ProfileResult) -> str:
    """Why the rows' self device time can exceed the GPU's busy time, when it does: work
    on several streams at once (the work's own time in the windows is more than the busy
    time), or work that ran outside the windows (the rows' is more than the work's in
    them: launched in an iteration, it finished after it, the GPU behind the CPU)."""
    parts = result.breakdown
    if parts is None:
        return ""
    busy = parts.wall - parts.idle
    rows = result.self_device_time_total / max(result.iters, 1)
    if busy <= 0 or rows <= busy * 1.001:
        return ""
    if parts.work <= 0:  # (a profile saved before the breakdown kept the work's own time)
        why = ["work ran on several streams at once, or outside the iterations"]
    else:
        why = []
        if parts.work > busy * 1.001:
            why.append(f"{format_us(parts.work - busy)} of work ran on several streams at "
                       "once")
        if rows > parts.work * 1.001:
            why.append(f"{format_us(rows - parts.work)} ran outside the iterations (launched "
                       "in one, it finished after it: the GPU runs behind the CPU)")
    if not why:  # (both within the rounding of the others)
        return ""
    return f"; the rows' {format_us(rows)} of self device time is more than that: " + \
        "; ".join(why)


def _category_words(category: str) -> str:
    """``of category 'foo'``, or ``without a category``."""
    return "without a category" if category == NO_CATEGORY else f"of category {category!r}"


#: What becomes of such events (``unplaced_note``): read as profiler records, so no op
#: and no device work; like any record, one that launched GPU work is a ``[range]`` row
#: holding that work (views/ops.py: ``range_owners``).
UNPLACED_FATE = "counted as neither ops nor device work (a [range] row where one launched some)"


def unplaced_note(result: ProfileResult) -> str:
    """The events of categories kernelmagic does not know (``ProfileResult.unplaced``), with
    their count and time, in one line, and what becomes of them (``UNPLACED_FATE``); and
    duration events ("B", "E") without their pair (``UNPAIRED``), by their number."""
    where = "trace" if result.from_trace else "profile"
    kinds = [u for u in result.unplaced if u.category != UNPAIRED]
    unpaired = sum(u.events for u in result.unplaced if u.category == UNPAIRED)
    listed = [f"{counted(u.events, 'event')} {_category_words(u.category)} "
              f"({format_us(u.time_us)})" for u in kinds]
    said = []
    if len(listed) == 1:
        said.append(f"The {where} holds {listed[0]} that kernelmagic cannot place: "
                    f"{UNPLACED_FATE}")
    elif listed:
        said.append(f"The {where} holds events that kernelmagic cannot place, "
                    f"{UNPLACED_FATE}: {', '.join(listed)}")
    if unpaired:
        lone = (f"{counted(unpaired, 'duration event')} (\"B\" or \"E\") without its pair, "
                "which kernelmagic cannot place (a duration needs both)")
        said.append(f"and {lone}" if said else f"The {where} holds {lone}")
    return "; ".join(said)


def _overhang(result: ProfileResult) -> str:
    """``; the GPU finishes 66.0 ms after the iteration ends``: the median iteration's own
    device work that runs on past it (the path stays the iteration's length)."""
    model = result.dependency_model
    ns = model.overhang_ns if model and model.window_ns else 0
    if not ns:
        return ""
    after = format_us(ns * result.model_scale / 1000)
    return f"; the {result.device_word} finishes {after} after the iteration ends"


def critical_path_notes(result: ProfileResult) -> list[str]:
    """The median iteration's critical path in one line, and the trust line when the
    dependency model found its own edges wrong (``docs/what-if.md``)."""
    from kernelmagic.views.critical_path import path_summary

    notes = []
    summary = path_summary(result.critical_path)
    if summary:
        notes.append(f"Median iteration's {summary}{_overhang(result)} "
                     "(result.what_if() predicts speed-ups)")
    line = result.trust.line() if result.trust is not None else ""
    if line:
        notes.append(f"Trace check: {line}")
    return notes


def view_notes(result: ProfileResult) -> list[str]:
    """One-line facts: peak memory, GPU busy/idle per iteration, the events in no row, the
    critical path, each view's notes (``ViewSpec.notes``, in the declarations' order),
    where the trace went."""
    notes = []
    if result.peak_memory:
        parts = [f"CPU {format_bytes(result.peak_memory.get('cpu', 0.0))}"]
        if result.profiles_device:
            parts.append(f"device {format_bytes(result.peak_memory.get('device', 0.0))}")
        notes.append("Peak memory rise within an iteration: " + ", ".join(parts))
        from kernelmagic.render.memory import memory_notes

        notes += memory_notes(result)
    parts = result.breakdown
    if result.profiles_device and parts is not None and parts.device != "cpu":
        idle = parts.idle
        notes.append(f"{result.device_word} per iteration (mean): busy "
                     f"{format_us(parts.wall - idle)}, idle {format_us(idle)} of "
                     f"{format_us(parts.wall)} "
                     f"({percent(parts.share('idle'))} idle)" + _streams_note(result))
    if result.unplaced:
        notes.append(unplaced_note(result))
    notes += critical_path_notes(result)
    for spec in view_specs():
        notes += _called(spec.notes, result, [])
    if result.trace_path:
        notes.append(f"Chrome trace written to {result.trace_path} "
                     "(open it in https://ui.perfetto.dev or chrome://tracing)")
    return notes
