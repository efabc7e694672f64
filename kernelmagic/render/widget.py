"""The live report: core ipywidgets only, so Colab needs no extra widget manager.

Clicking a column header sorts by that column; clicking it again flips the order.
Only the top rows are rendered (one HTML widget for the body), so a table of
thousands of rows re-sorts as fast as a short one.
"""

from __future__ import annotations

import re
from html import escape
from typing import Any

import ipywidgets as w

from kernelmagic.core.units import counted
from kernelmagic.render.bundle import LIVE_CLASS
from kernelmagic.render.html import (
    findings_html,
    first_min_width,
    inline_svg,
    summary_html,
    table_html,
    table_widths,
)
from kernelmagic.render.table import ROWS_SHOWN, Table, more_columns, op_table
from kernelmagic.render.views import Picture, view_reports
from kernelmagic.results.result import ProfileResult

PAGE = ROWS_SHOWN  # the same first rows as the text and HTML reports
ARROWS = {True: " ▼", False: " ▲"}


class Shared:
    """Models the widgets of one report share.

    Every widget is a model the front end syncs (a comm, opened with its whole state), and
    a widget given no layout or style makes its own: widgets whose layout never changes
    share ``plain``, all buttons one style, all HTML widgets one style. Only within one
    report: closing a report closes its layouts and styles (``bundle.close_tree``).
    """

    def __init__(self) -> None:
        self.plain = w.Layout()
        self.button_style = w.ButtonStyle()
        self._html_style: Any = None

    def html(self, value: str = "", layout: w.Layout | None = None) -> w.HTML:
        """An HTML widget with the shared style (whichever class this ipywidgets uses)."""
        extra = {} if self._html_style is None else {"style": self._html_style}
        widget = w.HTML(value=value, layout=layout or self.plain, **extra)
        self._html_style = widget.style
        return widget


class SortableTable:
    """Header buttons over an HTML body; holds the sort state of one table."""

    def __init__(self, table: Table, page: int = PAGE, shared: Shared | None = None,
                 classes: tuple[str, ...] = ()) -> None:
        self.full = table
        self.table = table.narrow  # the default columns; "more columns" shows them all
        self.page = page
        self.column_id = self.table.sort_column
        self.descending = True
        self.visible = page
        self._order = self.full.sorted_rows(self.column_id, self.descending)
        shared = shared or Shared()
        # Each widget is made in its final state (sorted, rendered): a change after it
        # is opened is one more message to the front end.
        self.headers: dict[str, w.Button] = {}
        layouts: dict[tuple[int, int, bool], w.Layout] = {}  # header buttons alike share
        shown_ids = {c.id for c in self.table.columns}
        for n, col in enumerate(table.columns):
            key = (min(n, 1), col.width, col.id not in shown_ids)
            layout = layouts.get(key)
            if layout is None:
                # The first column shrinks with the output area (the body's first column
                # does the same), every other keeps its width: the buttons stay over their
                # columns. The extra columns' buttons show with "more columns".
                size = (dict(width="auto", flex="1 1 0px",
                             min_width=f"{first_min_width(table)}px",
                             max_width=f"{col.width}px") if n == 0
                        else dict(width=f"{col.width}px", flex="0 0 auto"))
                layout = layouts[key] = w.Layout(margin="0", padding="0 6px",
                                                 display="none" if key[2] else None, **size)
            button = w.Button(description=self._title(col.id), tooltip=f"sort by {col.title}",
                              layout=layout, style=shared.button_style,
                              _dom_classes=("km-header",))
            button.on_click(lambda _b, cid=col.id: self.click(cid))
            self.headers[col.id] = button
        self._extra_layouts = [lay for (_, _, hidden), lay in layouts.items() if hidden]
        narrowest, widest = table_widths(self.table)
        # The header row and the body: as wide as the output area, between the two.
        self.fit = w.Layout(margin="0", width="100%", min_width=f"{narrowest}px",
                            max_width=f"{widest}px")
        shown, status = self._page()
        self.body = shared.html(table_html(self.table, shown, header=False, scroll=False),
                                layout=self.fit)
        self.status = shared.html(status)
        # The two buttons show and hide together: one layout.
        more = w.Layout(width="auto", display="none" if len(shown) >= len(self._order)
                        else None)
        self.more_button = w.Button(description=f"show {page} more", layout=more,
                                    style=shared.button_style)
        self.more_button.on_click(lambda _b: self.show(self.visible + self.page))
        self.all_button = w.Button(description="show all", layout=more,
                                   style=shared.button_style)
        self.all_button.on_click(lambda _b: self.show(len(self.table.rows)))
        controls = [self.status, self.more_button, self.all_button]
        self.columns_button: w.Button | None = None
        if self.table is not self.full:
            self.columns_button = w.Button(description=more_columns(self.full),
                                           layout=w.Layout(width="auto"),
                                           style=shared.button_style,
                                           _dom_classes=("km-more-columns",))
            self.columns_button.on_click(lambda _b: self.toggle_columns())
            controls.append(self.columns_button)
        # The table fits the output area down to its narrowest; below that, header and
        # body scroll together inside the output.
        self.widget = w.VBox([
            w.HBox(list(self.headers.values()), layout=self.fit),
            self.body,
            w.HBox(controls, layout=shared.plain),
        ], layout=w.Layout(overflow="auto"), _dom_classes=classes)

    def toggle_columns(self) -> None:
        """Show every column ("more columns"), or the default ones again."""
        wide = self.table is not self.full
        self.table = self.full if wide else self.full.narrow
        for layout in self._extra_layouts:
            layout.display = None if wide else "none"
        if self.columns_button is not None:
            self.columns_button.description = ("fewer columns" if wide
                                               else more_columns(self.full))
        if not any(c.id == self.column_id for c in self.table.columns):
            self.column_id, self.descending = self.table.sort_column, True
            self._resort()  # (sorted by a column no longer shown)
        narrowest, widest = table_widths(self.table)
        self.fit.min_width, self.fit.max_width = f"{narrowest}px", f"{widest}px"
        self._render()

    def click(self, column_id: str) -> None:
        """A header click: sort by that column, or flip the order if it is active."""
        if column_id == self.column_id:
            self.descending = not self.descending
        else:
            self.column_id = column_id
            self.descending = self.full.column(column_id).numeric
        self._resort()

    def show(self, n: int) -> None:
        self.visible = max(self.page, n)
        self._render()

    @property
    def order(self) -> list[str]:
        """Keys of the rendered rows, top to bottom."""
        return [r.key for r in self._order[: self.visible]]

    def _title(self, column_id: str) -> str:
        """A header's text: the column's title, with an arrow on the sort column."""
        arrow = ARROWS[self.descending] if column_id == self.column_id else ""
        return self.full.column(column_id).title + arrow

    def _page(self) -> tuple[list[Any], str]:
        """The rows shown, and the status line saying how many of how many."""
        shown = self._order[: self.visible]
        n, total = len(shown), len(self._order)
        noun = self.table.noun
        return shown, (f'<span class="km-status">{n:,} of '
                       f'{counted(total, noun[:-1], noun)}</span>')

    def _resort(self) -> None:
        self._order = self.full.sorted_rows(self.column_id, self.descending)
        for col in self.full.columns:
            self.headers[col.id].description = self._title(col.id)
        self._render()

    def _render(self) -> None:
        shown, status = self._page()
        self.body.value = table_html(self.table, shown, header=False, scroll=False)
        self.status.value = status
        self.more_button.layout.display = "none" if len(shown) >= len(self._order) else None


def picture_widget(picture: Picture) -> w.Image:
    """A view's picture as an image widget, as wide as the output area at most."""
    return w.Image(value=picture.data, format=picture.mime.split("/")[1],
                   layout=w.Layout(width="auto", max_width="100%"))


def tab_slug(view: str) -> str:
    """A tab's name as a CSS class suffix: ``"python lines"`` -> ``"python-lines"``."""
    return re.sub(r"[^a-z0-9]+", "-", view.lower()).strip("-")


def tab_classes(view: str) -> tuple[str, ...]:
    """The CSS classes of a tab's box: ``km-tab`` and ``km-tab-<view>`` (a browser test
    finds the tab it chose by them)."""
    return ("km-tab", "km-tab-" + tab_slug(view))


def report_widget(result: ProfileResult, chart: bytes | None, findings: bool = True,
                  timeline_svg: bytes | None = None,
                  pictures: dict[str, Picture] | None = None) -> w.VBox:
    """Summary, findings (what to do first), charts, and a view selector over sortable
    tables.

    Each table with rows is a tab: a box of its view's picture (above the view's first
    table) and the table, both always shown within it; the selector shows one tab's box
    and hides the others (hidden when the op table is the only tab). ``.km_table`` is the
    op table's state, ``.km_views`` maps each tab's title to its ``SortableTable``,
    ``.km_boxes`` to the box the selector shows, and ``.km_selector`` chooses the tab.
    ``pictures``: the views' pictures, drawn here when not given.
    """
    shared = Shared()
    parts: list[Any] = [shared.html(summary_html(result))]
    notes = findings_html(result) if findings else ""
    if notes:  # what to do first: under the summary, above the chart and the tabs
        parts.append(shared.html(notes))
    if chart is not None:  # the top-k bars (render/chart.py: chart_svg)
        parts.append(w.Image(value=chart, format="svg+xml",
                             layout=w.Layout(width="auto", max_width="100%")))
    if timeline_svg is not None:  # inline, for its hover titles (render/timeline.py)
        parts.append(shared.html(inline_svg(timeline_svg)))
    table = SortableTable(op_table(result), shared=shared, classes=tab_classes("ops"))
    views: dict[str, Any] = {"ops": table}
    box_of: dict[str, Any] = {"ops": table.widget}
    empty: list[str] = []  # views asked for that found nothing: a note, not a tab
    for view in view_reports(result, pictures):
        picture = view.picture
        for title, shown in view.tables:
            if isinstance(shown, Table) and shown.rows:
                views[title] = SortableTable(shown, shared=shared)
                above = [picture_widget(picture)] if picture is not None else []
                box_of[title] = w.VBox([*above, views[title].widget],
                                       layout=w.Layout(display="none"),
                                       _dom_classes=tab_classes(title))
                picture = None
            elif not isinstance(shown, Table):
                empty.append(f"{title}: {shown}")
        if picture is not None:  # no tab to show it in: on its own (a trace's memory)
            parts.append(picture_widget(picture))
    # Each tab's label whole: buttons as wide as their labels (ipywidgets' default cuts).
    selector = w.ToggleButtons(options=list(views), value="ops", description="view",
                               _dom_classes=("km-views",),
                               style=w.ToggleButtonsStyle(button_width="auto"),
                               layout=w.Layout(display="none" if len(views) == 1 else None))

    def show(change: Any = None) -> None:
        for name, widget in box_of.items():
            widget.layout.display = None if name == selector.value else "none"

    selector.observe(show, names="value")
    parts += [selector, *box_of.values()]
    if empty:
        parts.append(shared.html("".join(f'<div class="km-note">{escape(n)}</div>'
                                         for n in empty)))
    box = w.VBox(parts, layout=shared.plain, _dom_classes=(LIVE_CLASS,))
    box.km_table = table
    box.km_views = views
    box.km_selector = selector
    box.km_boxes = box_of  # what the selector shows per tab (a picture above some tables)
    return box
