"""The live report: core ipywidgets only, so Colab needs no extra widget manager.

Clicking a column header sorts by that column; clicking it again flips the order.
Only the top rows are rendered (one HTML widget for the body), so a table of
thousands of rows re-sorts as fast as a short one.
"""

from __future__ import annotations

from html import escape
from typing import Any

import ipywidgets as w

from kernelmagic.render.html import (
    MIN_NAME_WIDTH,
    findings_html,
    summary_html,
    table_html,
    table_widths,
)
from kernelmagic.render.table import Table, op_table
from kernelmagic.result import ProfileResult

PAGE = 25
ARROWS = {True: " ▼", False: " ▲"}


class SortableTable:
    """Header buttons over an HTML body; holds the sort state of one table."""

    def __init__(self, table: Table, page: int = PAGE) -> None:
        self.table = table
        self.page = page
        self.column_id = table.sort_column
        self.descending = True
        self.visible = page
        self.headers: dict[str, w.Button] = {}
        # Every widget is a model the front end syncs: header buttons of one width share
        # one Layout, and all share one style.
        style = w.ButtonStyle()
        layouts: dict[tuple[int, int], w.Layout] = {}
        for n, col in enumerate(table.columns):
            layout = layouts.get((min(n, 1), col.width))
            if layout is None:
                # The first column shrinks with the output area (the body's first column
                # does the same), every other keeps its width: the buttons stay over their
                # columns.
                size = (dict(width="auto", flex="1 1 0px", min_width=f"{MIN_NAME_WIDTH}px",
                             max_width=f"{col.width}px") if n == 0
                        else dict(width=f"{col.width}px", flex="0 0 auto"))
                layout = layouts[(min(n, 1), col.width)] = w.Layout(margin="0",
                                                                    padding="0 6px", **size)
            button = w.Button(description=col.title, tooltip=f"sort by {col.title}",
                              layout=layout, style=style)
            button.add_class("km-header")
            button.on_click(lambda _b, cid=col.id: self.click(cid))
            self.headers[col.id] = button
        narrowest, widest = table_widths(table)
        fit = dict(width="100%", min_width=f"{narrowest}px", max_width=f"{widest}px")
        self.body = w.HTML(layout=w.Layout(margin="0", **fit))
        self.status = w.HTML()
        self.more_button = w.Button(description=f"show {page} more",
                                    layout=w.Layout(width="auto"))
        self.more_button.on_click(lambda _b: self.show(self.visible + self.page))
        self.all_button = w.Button(description="show all", layout=w.Layout(width="auto"))
        self.all_button.on_click(lambda _b: self.show(len(self.table.rows)))
        # The table fits the output area down to its narrowest; below that, header and
        # body scroll together inside the output.
        self.widget = w.VBox([
            w.HBox(list(self.headers.values()), layout=w.Layout(overflow="visible", **fit)),
            self.body,
            w.HBox([self.status, self.more_button, self.all_button]),
        ], layout=w.Layout(overflow="auto"))
        self._order: list[Any] = []
        self._resort()

    def click(self, column_id: str) -> None:
        """A header click: sort by that column, or flip the order if it is active."""
        if column_id == self.column_id:
            self.descending = not self.descending
        else:
            self.column_id = column_id
            self.descending = self.table.column(column_id).numeric
        self._resort()

    def show(self, n: int) -> None:
        self.visible = max(self.page, n)
        self._render()

    @property
    def order(self) -> list[str]:
        """Keys of the rendered rows, top to bottom."""
        return [r.key for r in self._order[: self.visible]]

    def _resort(self) -> None:
        self._order = self.table.sorted_rows(self.column_id, self.descending)
        for col in self.table.columns:
            arrow = ARROWS[self.descending] if col.id == self.column_id else ""
            self.headers[col.id].description = col.title + arrow
        self._render()

    def _render(self) -> None:
        shown = self._order[: self.visible]
        self.body.value = table_html(self.table, shown, header=False)
        n, total = len(shown), len(self._order)
        self.status.value = f'<span class="km-status">{n} of {total} {self.table.noun}</span>'
        for button in (self.more_button, self.all_button):
            button.layout.display = "none" if n >= total else None


def report_widget(result: ProfileResult, png: bytes | None, findings: bool = True,
                  timeline_png: bytes | None = None,
                  roofline_png: bytes | None = None) -> w.VBox:
    """Summary, charts, a view selector over sortable tables, and findings.

    ``.km_table`` is the op table's state, ``.km_views`` maps the name of each view
    that has rows to its ``SortableTable``, and ``.km_selector`` chooses the view shown
    (hidden when the op table is the only one).
    """
    from kernelmagic.render.views import view_tables

    parts: list[Any] = [w.HTML(summary_html(result))]
    for image in (png, timeline_png):
        if image is not None:
            parts.append(w.Image(value=image, format="png",
                                  layout=w.Layout(width="auto", max_width="100%")))
    table = SortableTable(op_table(result))
    views: dict[str, Any] = {"ops": table}
    empty: list[str] = []  # views asked for that found nothing: a note, not a tab
    for title, view in view_tables(result):
        if isinstance(view, Table) and view.rows:
            views[title] = SortableTable(view)
        elif not isinstance(view, Table):
            empty.append(f"{title}: {view}")
    box_of = {name: v.widget for name, v in views.items()}
    if roofline_png is not None and "roofline" in box_of:  # the chart above its table
        chart = w.Image(value=roofline_png, format="png",
                        layout=w.Layout(width="auto", max_width="100%"))
        box_of["roofline"] = w.VBox([chart, box_of["roofline"]])
    selector = w.ToggleButtons(options=list(views), value="ops", description="view")
    selector.add_class("km-views")
    if len(views) == 1:
        selector.layout.display = "none"  # nothing to choose between

    def show(change: Any = None) -> None:
        for name, widget in box_of.items():
            widget.layout.display = None if name == selector.value else "none"

    selector.observe(show, names="value")
    show()
    parts += [selector, *box_of.values()]
    if empty:
        parts.append(w.HTML("".join(f'<div class="km-note">{escape(n)}</div>' for n in empty)))
    notes = findings_html(result) if findings else ""
    if notes:
        parts.append(w.HTML(notes))
    box = w.VBox(parts)
    box.km_table = table
    box.km_views = views
    box.km_selector = selector
    box.km_boxes = box_of  # what the selector shows per view (a chart above some tables)
    return box
