"""Static HTML report: what nbconvert, GitHub and other widget-less viewers show."""

from __future__ import annotations

import base64
from html import escape
from typing import Any

from kernelmagic.render.table import Table, op_table
from kernelmagic.render.text import summary_line
from kernelmagic.result import ProfileResult

TABLE_STYLE = (
    "border-collapse:collapse;table-layout:fixed;font-size:12px;line-height:1.4;"
    "font-family:var(--jp-code-font-family, monospace)"
)
CELL_STYLE = "padding:2px 6px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap"


def rows_html(table: Table, rows: list[Any]) -> str:
    """``<tr>`` elements for ``rows``; every cell's text is HTML-escaped."""
    out = []
    for r in rows:
        cells = []
        for c in table.columns:
            align = "right" if c.numeric else "left"
            title = "" if c.numeric else f' title="{escape(str(c.value(r)))}"'
            cells.append(f'<td class="km-cell km-col-{c.id}"{title} '
                         f'style="text-align:{align};{CELL_STYLE}">{escape(c.show(r))}</td>')
        out.append('<tr class="km-row">' + "".join(cells) + "</tr>")
    return "".join(out)


def table_html(table: Table, rows: list[Any], header: bool = True) -> str:
    """A fixed-layout ``<table>`` of ``rows`` (column widths match the widget's headers)."""
    cols = "".join(f'<col style="width:{c.width}px">' for c in table.columns)
    head = ""
    if header:
        head = "<thead><tr>" + "".join(
            f'<th class="km-head" style="text-align:{"right" if c.numeric else "left"};'
            f'padding:2px 6px;border-bottom:1px solid #999">{escape(c.title)}</th>'
            for c in table.columns
        ) + "</tr></thead>"
    width = sum(c.width for c in table.columns)
    return (f'<table class="km-table" style="{TABLE_STYLE};width:{width}px">'
            f"<colgroup>{cols}</colgroup>{head}<tbody>{rows_html(table, rows)}</tbody></table>")


def static_table_html(table: Table, limit: int | None = 50) -> str:
    """The top ``limit`` rows in the table's own order, with a note of how many are left."""
    rows = table.sorted_rows()
    shown = rows if limit is None else rows[:limit]
    more = ""
    if len(rows) > len(shown):
        more = (f'<p class="km-more" style="font-size:12px;color:#666">'
                f"{len(rows) - len(shown)} more {table.noun} not shown.</p>")
    return table_html(table, shown) + more


def png_img(png: bytes | None, alt: str) -> str:
    if png is None:
        return ""
    data = base64.b64encode(png).decode("ascii")
    return f'<img class="km-chart" alt="{escape(alt)}" src="data:image/png;base64,{data}"/>'


def summary_html(result: ProfileResult) -> str:
    from kernelmagic.render.views import view_notes

    warning = result.stats.warning()
    warn = (f'<div class="km-warning" style="color:#a15c00">⚠ {escape(warning)}</div>'
            if warning else "")
    notes = "".join(f'<div class="km-note">{escape(n)}</div>' for n in view_notes(result))
    return f'<div class="km-summary"><b>{escape(summary_line(result))}</b></div>{warn}{notes}'


def findings_html(result: ProfileResult) -> str:
    """The findings as a list: title, evidence, suggestion ("" when there are none)."""
    items = "".join(
        f'<li class="km-finding km-rule-{f.rule}"><b>{escape(f.title)}</b>: '
        f"{escape(f.evidence)}. <i>Try:</i> {escape(f.suggestion)}</li>"
        for f in result.findings()
    )
    if not items:
        return ""
    return f'<div class="km-findings"><b>Findings</b><ul style="margin-top:2px">{items}</ul></div>'


def views_html(result: ProfileResult, limit: int | None = 50,
               images: dict[str, bytes | None] | None = None) -> str:
    """Each deeper view under its own heading (``images``: a chart above a view's table)."""
    from kernelmagic.render.views import view_tables

    out = []
    for title, view in view_tables(result):
        body = (static_table_html(view, limit) if isinstance(view, Table)
                else f"<p>{escape(str(view))}</p>")
        body = png_img((images or {}).get(title), f"{title} chart") + body
        out.append(f'<div class="km-view km-view-{escape(title)}">'
                   f'<h4 style="margin:8px 0 2px">{escape(title)}</h4>{body}</div>')
    return "".join(out)


def html_report(result: ProfileResult, png: bytes | None = None, limit: int | None = 50,
                findings: bool = True, timeline_png: bytes | None = None,
                roofline_png: bytes | None = None) -> str:
    """Summary, chart, timeline, tables and findings in one self-contained fragment."""
    notes = findings_html(result) if findings else ""
    return (f'<div class="kernelmagic-report">{summary_html(result)}'
            f"{png_img(png, 'top ops chart')}{png_img(timeline_png, 'timeline')}"
            f"{static_table_html(op_table(result), limit)}"
            f"{views_html(result, limit, {'roofline': roofline_png})}"
            f"{notes}</div>")
