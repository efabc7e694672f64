"""``Explanation`` (``results/explain.py``) as text, static HTML, and the parts the widget's
row panel shows (``render/widget.py``): a headline, a table per part, the row's time in
each iteration as a small bar picture, and the what-if lines. Pure functions of the record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Any

from kernelmagic.core.units import counted, format_bytes, format_count, format_us, percent
from kernelmagic.render.html import FG, inline_svg, static_table_html
from kernelmagic.render.names import short_names
from kernelmagic.render.table import Column, Table
from kernelmagic.render.text import render_table
from kernelmagic.results.explain import Explanation

__all__ = ["explanation_head", "explanation_html", "explanation_lines", "explanation_tables",
           "explanation_text", "iterations_svg", "sparkline", "what_if_text"]

#: Rows a panel table shows (the rest: ``to_pandas``).
PANEL_ROWS = 8
#: The iterations picture: px per bar (at most), its height, and the widest it gets.
BAR_PX, PICTURE_HEIGHT, PICTURE_WIDTH = 14, 48, 480
SPARKS = "▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class _Row:
    """One line of a panel table: ``key`` (its name, for sorting ties) and its values."""

    key: str
    values: dict[str, Any]


def _get(name: str) -> Any:
    return lambda r: r.values[name]


def _name(id_: str, title: str, width: int = 360,
          short: dict[str, str] | None = None) -> Column:
    """A name column; ``short``: each name's short form (``names.short_names``: kernels
    that differ only in the middle of their names stay told apart)."""
    shown = ((lambda r: short.get(str(r.values[id_]), str(r.values[id_]))) if short
             else (lambda r: str(r.values[id_])))
    return Column(id_, title, _get(id_), shown, numeric=False, width=width)


def _us(id_: str, title: str) -> Column:
    return Column(id_, title, _get(id_), lambda r: format_us(r.values[id_]), width=96)


def _calls(id_: str = "calls_per_iter", title: str = "calls/iter") -> Column:
    return Column(id_, title, _get(id_), lambda r: format_count(r.values[id_]), width=80)


def _share(id_: str = "share", title: str = "% of row") -> Column:
    return Column(id_, title, _get(id_), lambda r: percent(r.values[id_]), width=80)


def _device(e: Explanation, id_: str) -> list[Column]:
    """The self-device column, on a run that profiled a device."""
    return [_us(id_, "self device/iter")] if e.on_device else []


def explanation_tables(e: Explanation) -> list[tuple[str, Table]]:
    """The panel's tables, in order: GPU work (or, for a kernel, the rows that launch it),
    input shapes, call sites."""
    tables = e.tables()
    for r in tables.get("kernels", ([], []))[0]:
        r["launched"] = "itself" if r["own"] else "under it"
    short = short_names(str(r["kernel"]) for r in tables.get("kernels", ([], []))[0])
    device = "device_us_per_iter"
    shown = [  # (title, table, the rows' key, columns, sorted by, noun)
        ("GPU work", "kernels", "kernel", [
            _name("kernel", "kernel", short=short), _calls(), _us(device, "device/iter"),
            _share(),
            _name("launched", "launched", width=96)], device, "kernels"),
        ("launched by", "launched_by", "row", [
            _name("row", "op"), _calls(), _us(device, "device/iter")], device, "ops"),
        ("input shapes and dtypes", "shapes", "shapes", [
            _name("shapes", "input shapes"), _calls(),
            _us("self_cpu_us_per_iter", "self CPU/iter"), _us("cpu_us_per_iter", "total CPU/iter"),
            *_device(e, "self_device_us_per_iter")], "cpu_us_per_iter", "shapes"),
        ("call sites", "sites", "site", [
            _name("site", "your code"), _calls(), _us("self_cpu_us_per_iter", "self CPU/iter"),
            *_device(e, "self_device_us_per_iter")], "self_cpu_us_per_iter", "sites"),
    ]
    return [(title, Table(columns, [_Row(str(r[key]), r) for r in tables[name][0]], sort, noun))
            for title, name, key, columns, sort, noun in shown if name in tables]


def explanation_head(e: Explanation, gain: bool = True) -> str:
    """The row in one line: what it is and its figures per iteration; with ``gain``, what
    it saves at most (the op table's ``max_gain_us``: at most the row's mean time per
    iteration). A panel that lists the what-ifs leaves that out: "gone" says the model's
    saving for the median iteration, which can be a little more than the mean time."""
    if e.kind == "kernel":
        return (f"{e.name} (GPU work): {counted(e.calls, 'call')}, "
                f"{format_us(e.device_us)} per iteration, {percent(e.share)} of device time")
    parts = [counted(e.calls, "call"), f"self CPU {format_us(e.self_cpu_us)}",
             f"total CPU {format_us(e.cpu_us)}"]
    if e.on_device:
        parts += [f"self device {format_us(e.self_device_us)}",
                  f"device {format_us(e.device_us)}"]
    kind = {"op": "", "range": " (a range)", "unlaunched": " (GPU work, launch not recorded)",
            "no op": " (GPU work an iteration marker launched)"}.get(e.kind, "")
    saves = ("" if e.max_gain_us is None or not gain
             else f"; saves at most {format_us(e.max_gain_us)} per iteration")
    return (f"{e.name}{kind}: {', '.join(parts)} per iteration; {percent(e.share)} of "
            f"{'device' if e.on_device else 'CPU'} self time{saves}")


def what_if_text(factor: float, answer: Any) -> str:
    """One what-if: ``2x faster: saves 1.20 ms (12%), iteration 8.80 ms; CPU ops 60%, ...``."""
    how = "gone" if math.isinf(factor) else f"{factor:g}x faster"
    return (f"{how}: saves {format_us(answer.saved_us)} ({percent(answer.saved_share)}), "
            f"iteration {format_us(answer.iteration_us)}; {answer.summary}")


def sparkline(values: list[float]) -> str:
    """``values`` as block characters, the tallest ``█``."""
    top = max(values, default=0.0)
    if top <= 0:
        return SPARKS[0] * len(values)
    return "".join(SPARKS[min(len(SPARKS) - 1, int(v / top * (len(SPARKS) - 1) + 0.5))]
                   for v in values)


def _iteration_values(e: Explanation) -> list[float]:
    if e.series is None:
        return []
    return [c + d for c, d in zip(e.series.self_cpu_us, e.series.self_device_us, strict=True)]


def iterations_line(e: Explanation, drawn: bool = False) -> str:
    """The row's self time in each iteration, in words (and the slowest one, numbered from
    0 as the rest of the report numbers iterations: the memory peak's, the steps');
    ``drawn``: the bars are drawn above it (HTML), so no block characters repeat them."""
    values = _iteration_values(e)
    slow = e.slowest_iteration
    if len(values) < 2 or slow is None:  # (one iteration: nothing to compare)
        return ""
    shown = "(above)" if drawn else sparkline(values)
    return (f"self time per iteration: {shown}  slowest: iteration {slow} "
            f"({format_us(values[slow])}; median of {counted(len(values), 'iteration')} "
            f"{format_us(sorted(values)[len(values) // 2])})")


def iterations_svg(e: Explanation) -> bytes | None:
    """The row's self time per iteration as bars (the slowest one darker), or None."""
    values = _iteration_values(e)
    top = max(values, default=0.0)
    if len(values) < 2 or top <= 0:
        return None
    bar = min(BAR_PX, PICTURE_WIDTH / len(values))
    slow = e.slowest_iteration
    bars = []
    for i, v in enumerate(values):
        h = max(1.0, v / top * (PICTURE_HEIGHT - 2))
        colour = "#1f4e9c" if i == slow else "#7da2d8"
        bars.append(f'<rect x="{i * bar:.1f}" y="{PICTURE_HEIGHT - h:.1f}" '
                    f'width="{max(1.0, bar - 1):.1f}" height="{h:.1f}" fill="{colour}">'
                    f'<title>iteration {i}: {escape(format_us(v))}</title></rect>')
    width = bar * len(values)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
            f'height="{PICTURE_HEIGHT}" viewBox="0 0 {width:.1f} {PICTURE_HEIGHT}">'
            f'{"".join(bars)}</svg>').encode()


def _memory_line(e: Explanation) -> str:
    if not e.memory:
        return ""
    shown = [(what, b) for what, b in e.memory if e.on_device or "device" not in what]
    return "memory per iteration: " + ", ".join(f"{what} {format_bytes(b)}"
                                                for what, b in shown)


def _roofline_line(e: Explanation) -> str:
    r = e.roofline
    if r is None:
        return ""
    return (f"roofline: {r.bound}-bound, {percent(r.roof_share)} of the nearer roof "
            f"({format_count(r.flops)} FLOP and {format_bytes(r.bytes)} per call)")


def explanation_lines(e: Explanation, what_ifs: bool = True, drawn: bool = False) -> list[str]:
    """The one-line parts, in the panel's order (those the run has); ``what_ifs=False``
    leaves out the fixed what-ifs (the widget's panel has its own control); ``drawn``:
    the iterations' bars are drawn (``iterations_line``)."""
    lines = [iterations_line(e, drawn), _memory_line(e), _roofline_line(e)]
    if what_ifs:
        lines += [f"if it were {what_if_text(k, a)}" for k, a in e.what_ifs]
    if e.notes:
        lines.append("not recorded: " + "; ".join(e.notes))
    return [line for line in lines if line]


def explanation_text(e: Explanation) -> str:
    tables = [f"\n{title}:\n{render_table(table, PANEL_ROWS)}"
              for title, table in explanation_tables(e)]
    return "\n".join([explanation_head(e, gain=not e.what_ifs), *tables, "",
                      *explanation_lines(e)])


def explanation_html(e: Explanation, what_ifs: bool = True) -> str:
    """The panel as HTML: static (``Explanation.html``), and the widget's row panel with
    ``what_ifs=False`` (it has its own what-if control)."""
    parts = [f'<div class="km-explain" style="color:{FG};line-height:1.5">'
             f'<b class="km-explain-head">'
             f'{escape(explanation_head(e, gain=not (what_ifs and e.what_ifs)))}</b>']
    for title, table in explanation_tables(e):
        parts.append(f'<div class="km-explain-table" style="margin-top:4px">'
                     f"{escape(title)}{static_table_html(table, PANEL_ROWS)}</div>")
    bars = iterations_svg(e)
    parts.append(inline_svg(bars))
    parts += [f'<div class="km-note">{escape(line)}</div>'
              for line in explanation_lines(e, what_ifs, drawn=bars is not None)]
    return "".join(parts) + "</div>"
