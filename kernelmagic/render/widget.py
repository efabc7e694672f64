"""The live report: core ipywidgets only, so Colab needs no extra widget manager.

Clicking a column header sorts by that column; clicking it again flips the order.
Only the top rows are rendered (one HTML widget for the body), so a table of
thousands of ops re-sorts as fast as a short one.
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from kernelmagic.render.columns import column_for_sort, columns, sorted_rows
from kernelmagic.render.html import (
    TABLE_STYLE,
    colgroup,
    summary_html,
    table_rows_html,
    width,
)
from kernelmagic.result import OpRow, ProfileResult

PAGE = 25
ARROWS = {True: " ▼", False: " ▲"}


class SortableTable:
    """Header buttons over an HTML body; holds the sort state of one report."""

    def __init__(self, result: ProfileResult, page: int = PAGE) -> None:
        self.result = result
        self.page = page
        self.cols = columns(result)
        self.column_id = column_for_sort(result, result.sort)
        self.descending = True
        self.visible = page
        self.headers: dict[str, w.Button] = {}
        for col in self.cols:
            button = w.Button(
                description=col.title,
                tooltip=f"sort by {col.title}",
                layout=w.Layout(width=f"{width(col)}px", margin="0", padding="0 6px"),
            )
            button.add_class("km-header")
            button.on_click(lambda _b, cid=col.id: self.click(cid))
            self.headers[col.id] = button
        self.body = w.HTML()
        self.status = w.HTML()
        self.more_button = w.Button(description=f"show {page} more",
                                    layout=w.Layout(width="auto"))
        self.more_button.on_click(lambda _b: self.show(self.visible + self.page))
        self.all_button = w.Button(description="show all", layout=w.Layout(width="auto"))
        self.all_button.on_click(lambda _b: self.show(len(self.result.rows)))
        self.widget = w.VBox([
            w.HBox(list(self.headers.values()), layout=w.Layout(overflow="visible")),
            self.body,
            w.HBox([self.status, self.more_button, self.all_button]),
        ])
        self._order: list[OpRow] = []
        self._resort()

    def click(self, column_id: str) -> None:
        """A header click: sort by that column, or flip the order if it is active."""
        if column_id == self.column_id:
            self.descending = not self.descending
        else:
            self.column_id = column_id
            self.descending = column_id != "op"
        self._resort()

    def show(self, n: int) -> None:
        self.visible = max(self.page, n)
        self._render()

    @property
    def order(self) -> list[str]:
        """Op names of the rendered rows, top to bottom."""
        return [r.key for r in self._order[: self.visible]]

    def _resort(self) -> None:
        self._order = sorted_rows(self.result, self.column_id, self.descending)
        for col in self.cols:
            arrow = ARROWS[self.descending] if col.id == self.column_id else ""
            self.headers[col.id].description = col.title + arrow
        self._render()

    def _render(self) -> None:
        shown = self._order[: self.visible]
        total_width = sum(width(c) for c in self.cols)
        self.body.value = (
            f'<table class="km-table" style="{TABLE_STYLE};width:{total_width}px">'
            f"{colgroup(self.cols)}<tbody>{table_rows_html(self.result, self.cols, shown)}"
            "</tbody></table>"
        )
        n, total = len(shown), len(self._order)
        self.status.value = f'<span class="km-status">{n} of {total} ops</span>'
        hidden = n >= total
        for button in (self.more_button, self.all_button):
            button.layout.display = "none" if hidden else None


def report_widget(result: ProfileResult, png: bytes | None) -> w.VBox:
    """Summary, chart and sortable table in one box; ``.km_table`` is the table state."""
    parts: list[Any] = [w.HTML(summary_html(result))]
    if png is not None:
        parts.append(w.Image(value=png, format="png", layout=w.Layout(width="auto")))
    table = SortableTable(result)
    parts.append(table.widget)
    box = w.VBox(parts)
    box.km_table = table
    return box
