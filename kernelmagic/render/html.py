"""Static HTML report: what nbconvert, GitHub and other widget-less viewers show."""

from __future__ import annotations

import base64
from html import escape

from kernelmagic.render.columns import Column, column_for_sort, columns, sorted_rows
from kernelmagic.render.text import summary_line
from kernelmagic.result import OpRow, ProfileResult

#: Fixed column widths (px), shared with the widget so its header buttons line up.
OP_WIDTH = 360
NUM_WIDTH = 104

TABLE_STYLE = (
    "border-collapse:collapse;table-layout:fixed;font-size:12px;"
    "font-family:var(--jp-code-font-family, monospace)"
)


def width(col: Column) -> int:
    return NUM_WIDTH if col.numeric else OP_WIDTH


def table_rows_html(result: ProfileResult, cols: list[Column], rows: list[OpRow]) -> str:
    """``<tr>`` elements for ``rows``; every op name is HTML-escaped."""
    out = []
    for r in rows:
        cells = []
        for c in cols:
            align = "right" if c.numeric else "left"
            text = escape(c.show(result, r))
            title = f' title="{escape(r.key)}"' if not c.numeric else ""
            cells.append(
                f'<td class="km-cell km-col-{c.id}"{title} style="text-align:{align};'
                f'padding:2px 6px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap">'
                f"{text}</td>"
            )
        out.append('<tr class="km-row">' + "".join(cells) + "</tr>")
    return "".join(out)


def colgroup(cols: list[Column]) -> str:
    return "<colgroup>" + "".join(f'<col style="width:{width(c)}px">' for c in cols) + "</colgroup>"


def table_html(result: ProfileResult, limit: int | None = 50, header: bool = True,
               column_id: str | None = None, descending: bool = True) -> str:
    """A static table of the top ``limit`` ops, sorted by the result's sort key."""
    cols = columns(result)
    rows = sorted_rows(result, column_id or column_for_sort(result, result.sort), descending)
    shown = rows if limit is None else rows[:limit]
    head = ""
    if header:
        head = "<thead><tr>" + "".join(
            f'<th class="km-head" style="text-align:{"right" if c.numeric else "left"};'
            f'padding:2px 6px;border-bottom:1px solid #999">{escape(c.title)}</th>'
            for c in cols
        ) + "</tr></thead>"
    total_width = sum(width(c) for c in cols)
    more = ""
    if len(rows) > len(shown):
        more = (f'<p class="km-more" style="font-size:12px;color:#666">'
                f"{len(rows) - len(shown)} more ops not shown.</p>")
    return (
        f'<table class="km-table" style="{TABLE_STYLE};width:{total_width}px">'
        f"{colgroup(cols)}{head}<tbody>{table_rows_html(result, cols, shown)}</tbody></table>"
        f"{more}"
    )


def summary_html(result: ProfileResult) -> str:
    warning = result.stats.warning()
    warn = (f'<div class="km-warning" style="color:#a15c00">⚠ {escape(warning)}</div>'
            if warning else "")
    return f'<div class="km-summary"><b>{escape(summary_line(result))}</b></div>{warn}'


def html_report(result: ProfileResult, png: bytes | None = None, limit: int | None = 50) -> str:
    """Summary, chart (inline PNG) and table in one self-contained HTML fragment."""
    img = ""
    if png is not None:
        data = base64.b64encode(png).decode("ascii")
        img = f'<img class="km-chart" alt="top ops chart" src="data:image/png;base64,{data}"/>'
    return (f'<div class="kernelmagic-report">{summary_html(result)}{img}'
            f"{table_html(result, limit=limit)}</div>")
