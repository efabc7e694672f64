"""Static HTML report: what nbconvert, GitHub and other widget-less viewers show."""

from __future__ import annotations

import base64
import re
from html import escape
from typing import TYPE_CHECKING, Any

from kernelmagic.render.names import cut_middle
from kernelmagic.render.table import (
    ROWS_SHOWN,
    Table,
    dash_notes,
    more_columns,
    name_chars,
    op_table,
    title_width,
)
from kernelmagic.render.text import summary_line
from kernelmagic.render.views import Picture, view_notes, view_reports
from kernelmagic.results.result import ProfileResult, timing_warning

if TYPE_CHECKING:
    from kernelmagic.results.ranks import ManyRanksResult

# Colours follow the front end's theme: JupyterLab's variables, then VS Code's and
# Colab's, then whatever the output area inherits. Greys are translucent, so they read
# on light and dark backgrounds alike.
FG = ("var(--jp-content-font-color1, var(--vscode-editor-foreground, "
      "var(--colab-primary-text-color, inherit)))")
FG_MUTED = ("var(--jp-content-font-color2, var(--vscode-descriptionForeground, "
            "var(--colab-secondary-text-color, inherit)))")
WARN = "var(--jp-warn-color0, var(--vscode-editorWarning-foreground, #c77800))"
RULE = "rgba(127, 127, 127, 0.55)"  # header underline
STRIPE = "rgba(127, 127, 127, 0.09)"  # every other row
TABLE_STYLE = (
    "border-collapse:collapse;table-layout:fixed;font-size:12px;line-height:1.4;"
    f"font-family:var(--jp-code-font-family, monospace);color:{FG};background:transparent"
)
CELL_STYLE = "padding:2px 6px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap"
#: The first column (the op/kernel/module name) takes the width the others leave, its
#: names on one line (cut in the middle past ``NAME_CHARS``, whole on hover); below this
#: width the report scrolls inside its output instead.
MIN_NAME_WIDTH = 120
#: Text cells (reasons, hints) wrap, at the places ``breakable`` marks first and mid-word
#: only where one part is wider than its column: nothing is cut.
NAME_STYLE = "padding:2px 6px;overflow-wrap:break-word;word-break:normal;white-space:normal"
#: Header cells never wrap.
HEAD_STYLE = "padding:2px 6px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis"
#: Where a long name may break: after a namespace, a dot, a ``#``, an underscore, a slash
#: or a comma (``Optimizer.zero_grad#AdamW.zero_grad`` breaks as ``AdamW.|zero_grad``).
BREAK_AFTER = re.compile(r"(::|[.#_/,])")
#: Each table scrolls inside its own box when it is wider than the output area.
SCROLL_BOX = '<div class="km-scroll" style="max-width:100%;overflow-x:auto">'


def breakable(text: str) -> str:
    """``text`` HTML-escaped, with ``<wbr>`` where ``BREAK_AFTER`` says it may break."""
    parts = BREAK_AFTER.split(text)  # names and separators alternate
    out = []
    for i, part in enumerate(parts):
        out.append(escape(part))
        if i % 2 and i < len(parts) - 1 and parts[i + 1]:
            out.append("<wbr>")
    return "".join(out)


def _text_cell(shown: str, first: int | None) -> tuple[str, str]:
    """(extra style, HTML) of a text cell: leading spaces (the module tree's depth) become
    an indent that HTML keeps; the first column's name (``first``: its width, px) is cut
    in its middle to fit it, the others' text may break at ``breakable``'s places."""
    name = shown.lstrip(" ")
    depth = len(shown) - len(name)
    indent = f";padding-left:calc(6px + {depth}ch)" if depth else ""
    if first is None:
        return indent, breakable(name)
    return indent, escape(cut_middle(name, max(8, name_chars(first) - depth)))


def first_min_width(table: Table) -> int:
    """px the first column shrinks to: ``MIN_NAME_WIDTH``, or its title's width on one
    line where that is wider (header labels are whole)."""
    first = table.columns[0]
    return min(first.width, max(MIN_NAME_WIDTH, title_width(first.title)))


def table_widths(table: Table) -> tuple[int, int]:
    """(narrowest, widest) px of ``table``: the first column shrinks, the others do not."""
    fixed = sum(c.width for c in table.columns[1:])
    return fixed + first_min_width(table), fixed + table.columns[0].width


def rows_html(table: Table, rows: list[Any], row_height: str | None = None) -> str:
    """``<tr>`` elements for ``rows``; every cell's text is HTML-escaped. ``row_height``
    (a CSS length): every row that high, its text on one line (cut, whole on hover) with
    no padding above or below, so that a widget beside the table lines up with its rows
    (the widget's row pickers)."""
    out = []
    height = "" if row_height is None else f"height:{row_height};"
    fixed = "" if row_height is None else ";padding-top:0;padding-bottom:0"
    for i, r in enumerate(rows):
        cells = []
        for n, c in enumerate(table.columns):
            if c.numeric:
                cells.append(f'<td class="km-cell km-col-{c.id}" style="text-align:right;'
                             f'{CELL_STYLE}{fixed}">{escape(c.show(r))}</td>')
                continue
            indent, text = _text_cell(c.show(r), first=c.width if n == 0 else None)
            # The names stay on one line (``CELL_STYLE``), whole in the hover title.
            style = (CELL_STYLE if n == 0 or row_height is not None else NAME_STYLE) + fixed
            cells.append(f'<td class="km-cell km-col-{c.id}" '
                         f'title="{escape(str(c.value(r)))}" '
                         f'style="text-align:left;{style}{indent}">{text}</td>')
        stripe = f"background:{STRIPE}" if i % 2 else ""
        style = f' style="{height}{stripe}"' if height or stripe else ""
        out.append(f'<tr class="km-row"{style}>' + "".join(cells) + "</tr>")
    return "".join(out)


def table_html(table: Table, rows: list[Any], header: bool = True, scroll: bool = True,
               row_height: str | None = None) -> str:
    """A fixed-layout ``<table>`` of ``rows`` that fits its container.

    Every column but the first keeps its width (the widget's header buttons share
    them); the first takes the rest, between ``MIN_NAME_WIDTH`` and its own width. Wider
    than its container, it scrolls inside its own box (``scroll``; the widget scrolls its
    header buttons and body together instead). ``row_height``: ``rows_html``'s.
    """
    cols = '<col class="km-col-first">' + "".join(
        f'<col style="width:{c.width}px">' for c in table.columns[1:])
    head = ""
    if header:
        head = "<thead><tr>" + "".join(
            f'<th class="km-head" title="{escape(c.title)}" style="text-align:'
            f'{"right" if c.numeric else "left"};{HEAD_STYLE};border-bottom:1px solid {RULE}">'
            f'{escape(c.title)}</th>'
            for c in table.columns
        ) + "</tr></thead>"
    narrowest, widest = table_widths(table)
    html = (f'<table class="km-table" style="{TABLE_STYLE};width:100%;'
            f'min-width:{narrowest}px;max-width:{widest}px">'
            f"<colgroup>{cols}</colgroup>{head}<tbody>{rows_html(table, rows, row_height)}</tbody>"
            "</table>")
    return f"{SCROLL_BOX}{html}</div>" if scroll else html


def static_table_html(table: Table, limit: int | None = ROWS_SHOWN) -> str:
    """The top ``limit`` rows in the table's own order, with a note of how many are left;
    its default columns (``Table.narrow``), the whole table one click away under
    "more columns" (a ``<details>``)."""
    rows = table.sorted_rows()
    shown = rows if limit is None else rows[:limit]
    more = "".join(f'<p class="km-more" style="font-size:12px;color:{FG_MUTED}">'
                   f"{escape(note)}</p>" for note in dash_notes(table, shown))
    if len(rows) > len(shown):
        more += (f'<p class="km-more" style="font-size:12px;color:{FG_MUTED}">'
                 f"{table.more(len(rows) - len(shown))} not shown.</p>")
    narrow = table.narrow
    if narrow is table:
        return table_html(table, shown) + more
    return (table_html(narrow, shown)
            + f'<details class="km-more-columns"><summary style="font-size:12px;'
            f'color:{FG_MUTED};cursor:pointer">{more_columns(table)}</summary>'
            f"{table_html(table, shown)}</details>" + more)


def image_tag(png: bytes | None, alt: str, mime: str = "image/png") -> str:
    """An ``<img>`` holding the image (a data URL: nothing to fetch, works offline)."""
    if png is None:
        return ""
    data = base64.b64encode(png).decode("ascii")
    return (f'<img class="km-chart" alt="{escape(alt)}" style="max-width:100%" '
            f'src="data:{mime};base64,{data}"/>')


def inline_svg(svg: bytes | None) -> str:
    """An SVG of ours placed inline (not in an ``<img>``), so its ``<title>``s show on hover
    and its ``currentColor`` text follows the page's theme; it scrolls inside its box."""
    if svg is None:
        return ""
    return f'<div class="km-svg" style="max-width:100%;overflow-x:auto">{svg.decode()}</div>'


def summary_html(result: ProfileResult) -> str:
    warning = timing_warning(result)
    warn = (f'<div class="km-warning" style="color:{WARN}">⚠ {escape(warning)}</div>'
            if warning else "")
    notes = "".join(f'<div class="km-note">{escape(n)}</div>' for n in view_notes(result))
    return (f'<div class="km-summary" style="color:{FG}"><b>{escape(summary_line(result))}'
            f"</b></div>{warn}{notes}")


def findings_html(result: ProfileResult | ManyRanksResult) -> str:
    """The findings as a list: title, evidence, saving, suggestion ("" when there are
    none); one rank's report and the many ranks' alike."""
    items = "".join(
        f'<li class="km-finding km-rule-{f.rule}"><b>{escape(f.title)}</b>: '
        f"{escape(f.evidence)}{escape(f.after_evidence)}."
        + ("" if f.bound else f" <i>Try:</i> {escape(f.suggestion)}") + "</li>"
        for f in result.findings()
    )
    if not items:
        return ""
    return (f'<div class="km-findings" style="color:{FG}"><b>Findings</b>'
            f'<ul style="margin-top:2px">{items}</ul></div>')


def view_html(title: str, body: str) -> str:
    """One view's block: its heading over ``body``."""
    return (f'<div class="km-view km-view-{escape(title.replace(" ", "-"))}">'
            f'<h4 style="margin:8px 0 2px">{escape(title)}</h4>{body}</div>')


def views_html(result: ProfileResult, limit: int | None = ROWS_SHOWN,
               pictures: dict[str, Picture] | None = None) -> str:
    """Each deeper view's tables under their own headings, its picture above the first
    (``pictures``: drawn already, ``render/views.py: view_pictures``)."""
    out = []
    for view in view_reports(result, pictures):
        above = (image_tag(view.picture.data, view.picture.alt, view.picture.mime)
                 if view.picture is not None else "")
        if not view.tables:  # a picture with no table to go above
            out.append(view_html(view.name, above))
        for title, table in view.tables:
            body = (static_table_html(table, limit) if isinstance(table, Table)
                    else f"<p>{escape(str(table))}</p>")
            out.append(view_html(title, above + body))
            above = ""
    return "".join(out)


def html_report(result: ProfileResult, chart: bytes | None = None, limit: int | None = ROWS_SHOWN,
                findings: bool = True, timeline_svg: bytes | None = None,
                pictures: dict[str, Picture] | None = None) -> str:
    """What to do first, then the detail, in one self-contained fragment: the summary, the
    findings (the headline first), the chart, the timeline, the tables (``pictures``: the
    views' pictures, drawn here when not given)."""
    notes = findings_html(result) if findings else ""
    return (f'<div class="kernelmagic-report">{summary_html(result)}{notes}'
            f"{image_tag(chart, 'top ops chart', 'image/svg+xml')}"
            f"{inline_svg(timeline_svg)}"
            f"{static_table_html(op_table(result), limit)}"
            f"{views_html(result, limit, pictures)}</div>")
