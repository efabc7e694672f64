"""Plain-text rendering: the summary line and aligned tables (what a terminal shows)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelmagic.core.rows import Breakdown
from kernelmagic.core.units import counted, cut_end, format_seconds, format_us, percent, percent_of
from kernelmagic.render.names import NAME_WIDTH, cut_middle
from kernelmagic.render.table import (
    ROWS_SHOWN,
    Table,
    column_for_sort,
    dash_notes,
    more_columns,
    op_table,
)
from kernelmagic.render.views import view_notes, view_tables
from kernelmagic.results.result import ProfileResult, timing_warning

if TYPE_CHECKING:
    from kernelmagic.results.ranks import ManyRanksResult


def summary_line(result: ProfileResult) -> str:
    """Name, device, iterations, per-iteration time and total self time, on one line."""
    s = result.stats
    device = result.device_label
    per_iter_cpu = result.self_cpu_time_total / result.iters
    warmup = f" (+{result.warmup} warm-up)" if result.warmup else ""
    wall_us = s.mean * 1e6  # op totals are sums over iterations: compare with mean wall
    parts = [
        f"{result.name}",
        device,
        f"{counted(result.iters, 'iteration')}{warmup}" if not result.interrupted_after
        else f"interrupted after {result.iters} of {counted(result.planned_iters, 'iteration')}"
             f"{warmup}",
        f"{format_seconds(s.median)} per iteration (median; IQR {format_seconds(s.iqr)}, "
        f"best {format_seconds(s.best)})",
    ]
    cost = profiler_cost(result)
    if cost:
        parts.append(cost)
    if result.capture == "nsight":  # no profiler ran: nothing to say of busy time or rows
        parts.append("wall clock only (Nsight capture)")
    elif result.profiles_device:
        per_iter_dev = result.self_device_time_total / result.iters
        if result.breakdown is None:  # (a profile saved before the breakdown existed)
            parts.append(f"GPU busy {percent_of(per_iter_dev, wall_us)} of the mean wall time")
        parts.append(f"rows: {format_us(per_iter_dev)} self device, "
                     f"{format_us(per_iter_cpu)} self CPU time per iteration (mean)")
    else:
        share = ("" if result.breakdown is not None  # (else a profile saved before it existed)
                 else f"; {percent_of(per_iter_cpu, wall_us)} of the mean wall time")
        parts.append(f"rows: {format_us(per_iter_cpu)} self CPU time per iteration (mean{share})")
    if result.breakdown is not None:
        parts.append(breakdown_text(result.breakdown, python_split(result),
                                    result.device_word))
    return " · ".join(parts)


def profiler_cost(result: ProfileResult) -> str:
    """The iteration without the profiler beside the profiled one: ``12.1 ms per iteration
    unprofiled (the best of 2 warm-up runs after the first); profiling adds 65%``; for a live run
    that has no unprofiled time, how to get one; "" for a trace or Nsight's capture."""
    if result.from_trace or result.capture == "nsight":
        return ""
    unprofiled = result.unprofiled_s
    overhead = result.profiler_overhead
    if unprofiled is None or overhead is None:  # (a result saved without warm-up times)
        return "no unprofiled time (--warmup 2 or more times it)" if result.warmup < 2 else ""
    medians = bool(result.unprofiled_timings)  # (like against like: ``profiler_overhead``)
    share = (f"profiling adds {percent(overhead)} ({'medians' if medians else 'best against best'})"
             if overhead >= 0 else
             f"{'the profiled median' if medians else 'the best profiled iteration'} ran "
             f"{percent(-overhead)} faster")
    return (f"{format_seconds(unprofiled)} per iteration unprofiled "
            f"({result.unprofiled_source}); {share}")


def python_split(result: ProfileResult) -> tuple[float, float] | None:
    """With ``--python``: the time no op covered as (Python lines, unattributed), µs per
    iteration, which add up to the breakdown's "other" (``views/python_lines.py``)."""
    if "python" not in result.views or result.python_note:
        return None
    return (sum(r.self_us for r in result.python_lines), result.python_unattributed)


def breakdown_text(parts: Breakdown, python: tuple[float, float] | None = None,
                   device: str = "GPU") -> str:
    """Where an iteration's time went, as shares of it (``ProfileResult.breakdown``);
    communication is named only where there was some. ``python`` (``python_split``)
    splits the CPU's "other" into Python lines and unattributed; ``device`` names the
    device (``ProfileResult.device_word``: "GPU", "MTIA", ...)."""
    share = parts.share
    comm = ""
    if parts.communication > 0:
        comm = f"communication {percent(share('communication'))}"
        if parts.overlap:
            comm += f" ({percent(parts.overlap)} of it overlapped by compute)"
        comm += ", "
    if parts.device == "cpu" and python is not None and parts.wall > 0:
        lines, rest = python
        return (f"CPU: ops {percent(share('compute'))}, {comm}Python lines "
                f"{percent(lines / parts.wall)}, unattributed "
                f"{percent(rest / parts.wall)} of the iteration")
    if parts.device == "cpu":
        return (f"CPU: ops {percent(share('compute'))}, {comm}other (Python between ops, "
                f"waits) {percent(share('idle'))} of the iteration")
    return (f"{device}: compute {percent(share('compute'))}, {comm}memcpy/memset "
            f"{percent(share('memcpy'))}, idle {percent(share('idle'))} of the "
            "iteration")


def _cut(text: str, first: bool) -> str:
    """A cell at most ``NAME_WIDTH`` characters: a name (the first column) cut in its
    middle, where names differ most; other text (lists, reasons) at its end."""
    return cut_middle(text, NAME_WIDTH) if first else cut_end(text, NAME_WIDTH)


def render_table(table: Table, limit: int | None = ROWS_SHOWN, column_id: str | None = None,
                 more_hint: str = "") -> str:
    """Any ``Table`` as aligned text: the top ``limit`` rows by one column, descending."""
    rows = table.sorted_rows(column_id)
    shown = rows if limit is None else rows[:limit]
    cols = table.columns
    cells = [[c.title for c in cols]]
    cells += [[_cut(c.show(r), first=n == 0) for n, c in enumerate(cols)] for r in shown]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    lines = []
    for n, row in enumerate(cells):
        out = [cell.rjust(w) if c.numeric else cell.ljust(w)
               for cell, w, c in zip(row, widths, cols, strict=True)]
        lines.append("  ".join(out).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    if len(rows) > len(shown):
        lines.append(f"... {table.more(len(rows) - len(shown))}{more_hint}")
    lines += dash_notes(table, shown)
    if not rows:
        lines.append(f"(no {table.noun} were recorded)")
    return "\n".join(lines)


def text_table(result: ProfileResult, limit: int | None = ROWS_SHOWN, by: str | None = None,
               all_columns: bool = False) -> str:
    """The top ``limit`` ops by sort key ``by`` as an aligned table (all with ``None``):
    the default columns, every column with ``all_columns``."""
    full = op_table(result)
    column = column_for_sort(result, by or result.sort)
    by_column = Table(full.columns, full.rows, column)  # (its sort column is shown)
    table = full if all_columns else by_column.narrow
    text = render_table(table, limit, column, more_hint=" (result.table(None) lists all)")
    if table is full or table is by_column or not full.rows:  # (every column shown)
        return text
    return f"{text}\n{more_columns(by_column)}: result.table(all_columns=True)"


def findings_text(result: ProfileResult | ManyRanksResult) -> str:
    """The findings as a bulleted list ("" when there are none); one rank's report and the
    many ranks' alike."""
    found = result.findings()
    if not found:
        return ""
    return "\n".join(["Findings:", *(f"- {f}" for f in found)])


def text_report(result: ProfileResult | ManyRanksResult, limit: int | None = ROWS_SHOWN,
                findings: bool = True) -> str:
    """Summary, warning, notes, findings (what to do first), op table and deeper views:
    ``text/plain``. A ``ManyRanksResult`` (``kernelmagic.load`` of several ranks' traces)
    gets its own report (``render/ranks.py``), as its display does."""
    if not isinstance(result, ProfileResult):
        from kernelmagic.render import ranks  # (it builds on this module)

        return ranks.text_report(result, findings=findings)
    parts = [summary_line(result)]
    warning = timing_warning(result)
    if warning:
        parts.append(f"Warning: {warning}")
    parts += view_notes(result)
    notes = findings_text(result) if findings else ""
    if notes:
        parts += ["", notes]
    parts += ["", text_table(result, limit=limit)]
    for title, view in view_tables(result):
        body = render_table(view, limit) if isinstance(view, Table) else str(view)
        parts += ["", f"[{title}]", body]
    return "\n".join(parts)
