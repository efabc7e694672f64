"""The live report: core ipywidgets only, so Colab needs no extra widget manager.

Clicking a column header sorts by that column; clicking it again flips the order.
Only the top rows are rendered (one HTML widget for the body), so a table of
thousands of rows re-sorts as fast as a short one. In the op table and the kernels tab,
a radio button before each shown row (one ``RadioButtons`` widget for all of them) opens
the row's panel under the table (``RowPanel``: ``result.explain`` of the row and a what-if
control); the body stays one HTML widget, each of its rows as high as a radio item (the
widgets' own CSS variable), so that the two line up in every front end.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from html import escape
from typing import Any

import ipywidgets as w

from kernelmagic.core.units import counted
from kernelmagic.render.bundle import LIVE_CLASS
from kernelmagic.render.explain import explanation_html, what_if_text
from kernelmagic.render.html import (
    FG,
    RULE,
    findings_html,
    first_min_width,
    inline_svg,
    summary_html,
    table_html,
    table_widths,
)
from kernelmagic.render.table import (
    ROWS_SHOWN,
    Table,
    dash_notes,
    more_columns,
    op_table,
    row_label,
)
from kernelmagic.render.views import Picture, view_reports
from kernelmagic.results.explain import Explanation, holds
from kernelmagic.results.result import ProfileResult

PAGE = ROWS_SHOWN  # the same first rows as the text and HTML reports
ARROWS = {True: " ▼", False: " ▲"}
#: A clickable table's rows are as high as the widgets' radio items (the front end's CSS
#: variable, 20 px in JupyterLab and the classic Notebook), in a column of radio buttons
#: this wide before the table; the tabs whose rows open a panel besides the ops.
ROW_HEIGHT = "var(--jp-widgets-radio-item-height, 20px)"
PICKER_PX = 24
EXPLAINED_TABS = ("kernels",)
#: Invisible characters that spell each radio item's label (the front end finds an item
#: by its label: they must differ), in base 4.
_INVISIBLE = "\u200b\u200c\u200d\u2060"
#: The what-if control's steps (``inf``: the row gone) and sides.
SLIDER_FACTORS = (("1x", 1.0), ("1.25x", 1.25), ("1.5x", 1.5), ("2x", 2.0), ("3x", 3.0),
           ("5x", 5.0), ("10x", 10.0), ("gone", math.inf))
SIDES = (("CPU", "cpu"), ("device", "device"), ("both", "both"))


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
        self._styles: dict[type, Any] = {}  # each kind of widget's, from its first one
        self._layouts: dict[str, w.Layout] = {}

    def layout(self, name: str, **kwargs: Any) -> w.Layout:
        """The report's one layout called ``name`` (made on first use with ``kwargs``),
        for widgets whose layout never changes."""
        found = self._layouts.get(name)
        if found is None:
            found = self._layouts[name] = w.Layout(**kwargs)
        return found

    def styled(self, kind: type[w.Widget], **kwargs: Any) -> Any:
        """A ``kind`` widget (``w.RadioButtons``, ``w.HTML``) with the style its kind
        shares, the first one's (whichever style class this ipywidgets gives it)."""
        style = self._styles.get(kind)
        widget = kind(**kwargs, **({} if style is None else {"style": style}))
        self._styles[kind] = widget.style
        return widget

    def html(self, value: str = "", layout: w.Layout | None = None) -> w.HTML:
        """An HTML widget with the shared style."""
        return self.styled(w.HTML, value=value, layout=layout or self.plain)


class SortableTable:
    """Header buttons over an HTML body; holds the sort state of one table. With a
    ``panel``, a radio button before each shown row (``picker``) opens that row in it."""

    def __init__(self, table: Table, page: int = PAGE, shared: Shared | None = None,
                 classes: tuple[str, ...] = (), panel: RowPanel | None = None) -> None:
        self.full = table
        self.table = table.narrow  # the default columns; "more columns" shows them all
        self.page = page
        self.column_id = self.table.sort_column
        self.descending = True
        self.visible = page
        self._order = self.full.sorted_rows(self.column_id, self.descending)
        shared = shared or Shared()
        self.panel = panel
        self._syncing = False  # (the picker's value set here, not by a click)
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
                # A gap over the radio buttons keeps the headers over their columns.
                gap = f"0 0 0 {PICKER_PX}px" if n == 0 and panel is not None else "0"
                layout = layouts[key] = w.Layout(margin=gap, padding="0 6px",
                                                 display="none" if key[2] else None, **size)
            button = w.Button(description=self._title(col.id), tooltip=f"sort by {col.title}",
                              layout=layout, style=shared.button_style,
                              _dom_classes=("km-header",))
            button.on_click(lambda _b, cid=col.id: self.click(cid))
            self.headers[col.id] = button
        self._extra_layouts = [lay for (_, _, hidden), lay in layouts.items() if hidden]
        narrowest, widest = self._widths()
        # The header row and the body: as wide as the output area, between the two.
        self.fit = w.Layout(margin="0", width="100%", min_width=f"{narrowest}px",
                            max_width=f"{widest}px")
        shown, status = self._page()
        self.picker: w.RadioButtons | None = None
        body_layout = self.fit
        if panel is not None:  # the body shares its row with the radio buttons
            body_layout = shared.layout("grow", margin="0", flex="1 1 0px")
            self.picker = shared.styled(
                w.RadioButtons, options=self._picks(len(shown)), value=None,
                layout=shared.layout("picker", margin="0", flex="0 0 auto",
                                     width=f"{PICKER_PX}px", overflow="hidden"),
                _dom_classes=("km-picker",))
            self.picker.observe(self._picked, names="value")
            panel.on_change = self._mark
        self.body = shared.html(self._body_html(shown), layout=body_layout)
        self.status = shared.html(status)
        controls: list[w.Widget] = [self.status]
        self.more_button: w.Button | None = None
        self.all_button: w.Button | None = None
        if len(self._order) > page:  # (a table that fits one page never needs them)
            # The two buttons show and hide together: one layout.
            more = w.Layout(width="auto", display="none" if len(shown) >= len(self._order)
                            else None)
            self.more_button = w.Button(description=f"show {page} more", layout=more,
                                        style=shared.button_style)
            self.more_button.on_click(lambda _b: self.show(self.visible + self.page))
            self.all_button = w.Button(description="show all", layout=more,
                                       style=shared.button_style)
            self.all_button.on_click(lambda _b: self.show(len(self.table.rows)))
            controls += [self.more_button, self.all_button]
        self.columns_button: w.Button | None = None
        if self.table is not self.full:
            self.columns_button = w.Button(description=more_columns(self.full),
                                           layout=shared.layout("auto", width="auto"),
                                           style=shared.button_style,
                                           _dom_classes=("km-more-columns",))
            self.columns_button.on_click(lambda _b: self.toggle_columns())
            controls.append(self.columns_button)
        body: Any = self.body
        if self.picker is not None:
            body = w.HBox([self.picker, self.body], layout=self.fit)
        # The table fits the output area down to its narrowest; below that, header and
        # body scroll together inside the output. (The panel joins under it when a row is
        # first opened.)
        self.widget = w.VBox([w.HBox(list(self.headers.values()), layout=self.fit), body,
                              w.HBox(controls, layout=shared.plain)],
                             layout=w.Layout(overflow="auto"), _dom_classes=classes)

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
        narrowest, widest = self._widths()
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

    def open(self, position: int) -> None:
        """A row picked: the shown row at ``position`` (0: the top) in the panel."""
        if self.panel is None:
            return
        self.panel.show(row_label(self._order[position]))
        if self.panel.widget not in self.widget.children:
            self.widget.children = (*self.widget.children, self.panel.widget)

    @property
    def order(self) -> list[str]:
        """Keys of the rendered rows, top to bottom."""
        return [r.key for r in self._order[: self.visible]]

    def _widths(self) -> tuple[int, int]:
        """(narrowest, widest) px of the header row and the body (the radio buttons'
        column included)."""
        narrowest, widest = table_widths(self.table)
        extra = PICKER_PX if self.panel is not None else 0
        return narrowest + extra, widest + extra

    def _body_html(self, shown: list[Any]) -> str:
        height = ROW_HEIGHT if self.panel is not None else None
        return table_html(self.table, shown, header=False, scroll=False, row_height=height)

    @staticmethod
    def _picks(n: int) -> list[tuple[str, int]]:
        """The radio items of ``n`` shown rows: (an invisible label, the row's position)."""
        digits = max(1, math.ceil(math.log(max(n, 2), 4)))
        return [("".join(_INVISIBLE[i // 4 ** d % 4] for d in range(digits)), i)
                for i in range(n)]

    def _picked(self, change: Any) -> None:
        if not self._syncing and change["new"] is not None:
            self.open(change["new"])

    def _mark(self) -> None:
        """Check the radio item of the row the panel shows (none when it is closed or the
        row is not shown)."""
        if self.picker is None or self.panel is None:
            return
        shown = [row_label(r) for r in self._order[: self.visible]]
        n = len(shown)
        name = self.panel.name
        self._syncing = True
        try:
            if len(self.picker.options) != n:
                self.picker.options = self._picks(n)
            self.picker.value = shown.index(name) if name in shown else None
        finally:
            self._syncing = False

    def _title(self, column_id: str) -> str:
        """A header's text: the column's title, with an arrow on the sort column."""
        arrow = ARROWS[self.descending] if column_id == self.column_id else ""
        return self.full.column(column_id).title + arrow

    def _page(self) -> tuple[list[Any], str]:
        """The rows shown, and the status line saying how many of how many (and what a
        "—" shown means, as under the text and HTML tables: ``dash_notes``)."""
        shown = self._order[: self.visible]
        n, total = len(shown), len(self._order)
        noun = self.table.noun
        notes = "".join(f'<span class="km-dash"> · {escape(note)}</span>'
                        for note in dash_notes(self.table, shown))
        return shown, (f'<span class="km-status">{n:,} of '
                       f'{counted(total, noun[:-1], noun)}</span>{notes}')

    def _resort(self) -> None:
        self._order = self.full.sorted_rows(self.column_id, self.descending)
        for col in self.full.columns:
            self.headers[col.id].description = self._title(col.id)
        self._render()

    def _render(self) -> None:
        shown, status = self._page()
        self.body.value = self._body_html(shown)
        self.status.value = status
        if self.more_button is not None:
            self.more_button.layout.display = ("none" if len(shown) >= len(self._order)
                                               else None)
        self._mark()


class RowPanel:
    """The panel under a table: one row taken apart (``result.explain``) and what making
    it faster would buy (``result.what_if`` at a factor and on a side the user picks).

    Nothing is built until a row is opened; the first opening makes its widgets
    (``widget``: None until then), later ones only change their values. ``name`` is the
    row shown (None: closed); ``on_change`` is called when that changes (the table marks
    the row).
    """

    def __init__(self, result: ProfileResult, shared: Shared | None = None) -> None:
        self.result = result
        self.shared = shared or Shared()
        self.name: str | None = None
        self.explanation: Explanation | None = None
        self.on_change: Callable[[], None] = lambda: None
        self.widget: w.VBox | None = None  # made on the first ``show``

    def show(self, name: str) -> None:
        """Open the panel on row (or kernel) ``name``, replacing the row it showed."""
        try:  # the what-if: one replay of the model, for the slider's factor (_update)
            e = self.result.explain(name, what_if=False)
        except LookupError as err:  # (every row the tables show has one: a safeguard)
            e, detail = None, f'<div class="km-note">{escape(str(err))}</div>'
        else:
            detail = explanation_html(e, what_ifs=False)
        if self.widget is None:
            self.widget = self._build()
        self.explanation, self.name = e, name
        self.detail.value = detail
        held = e is not None and e.kind != "kernel" and holds(self.result, e.key)
        self.controls.layout.display = None if held else "none"
        self.note.value = "" if held or e is None else self._no_what_if(e)
        if held:
            self._update()
        self.widget.layout.display = None
        self.on_change()

    def close(self) -> None:
        self.name = self.explanation = None
        if self.widget is not None:
            self.widget.layout.display = "none"
        self.on_change()

    @property
    def answer_text(self) -> str:
        """The what-if's line as shown, as HTML ("" before a row is opened)."""
        return self.answer.value if self.widget is not None else ""

    def _build(self) -> w.VBox:
        """The panel's widgets (once: later rows change their values)."""
        html = self.shared.html
        self.detail = html()
        self.slider = w.SelectionSlider(options=list(SLIDER_FACTORS), value=2.0,
                                        description="faster by", _dom_classes=("km-factor",))
        device = self.result.profiles_device
        self.side = w.ToggleButtons(options=list(SIDES), value="both",
                                    tooltips=["its CPU time only", "its GPU work only",
                                              "its CPU time and its GPU work"],
                                    _dom_classes=("km-side",),
                                    style=w.ToggleButtonsStyle(button_width="auto"),
                                    layout=w.Layout(display=None if device else "none",
                                                    width="auto", flex="0 0 auto"))
        self.answer = html(layout=w.Layout(margin="0"))
        self.answer.add_class("km-what-if")
        self.note = html()
        self.slider.observe(lambda _c: self._update(), names="value")
        self.side.observe(lambda _c: self._update(), names="value")
        self.controls = w.VBox([w.HBox([self.slider, self.side]), self.answer])
        close = w.Button(description="close", tooltip="close this panel", icon="times",
                         layout=w.Layout(width="auto"), _dom_classes=("km-panel-close",))
        close.on_click(lambda _b: self.close())
        return w.VBox([w.HBox([close]), self.detail, self.controls, self.note],
                      layout=w.Layout(margin="6px 0 0 0", border=f"1px solid {RULE}",
                                      padding="4px"),
                      _dom_classes=("km-panel",))

    def _update(self) -> None:
        """The what-if line for the slider's factor and side."""
        e = self.explanation
        if e is None or e.kind == "kernel" or not holds(self.result, e.key):
            return
        factor, side = self.slider.value, self.side.value
        answer = self.result.what_if({e.key: factor}, side)
        self.answer.value = (f'<span class="km-what-if-text" style="color:{FG}">'
                             f"{escape(what_if_text(factor, answer))}</span>")

    def _no_what_if(self, e: Explanation) -> str:
        if e.kind == "kernel":
            why = "a kernel is not a row of the dependency model: open the row that launches it"
        elif any("what-if" in n for n in e.notes):
            why = "no dependency model in this result"
        elif e.key in self.result.unseen_keys:
            why = ("the dependency model cannot see this row's removal (its threads have no "
                   "recorded wait tied to the iteration's): no saving to give")
        else:
            why = "the median iteration does not hold this row"
        return f'<div class="km-note km-no-what-if">what-if: {escape(why)}</div>'


def picture_widget(picture: Picture) -> w.Image:
    """A view's picture as an image widget, as wide as the output area at most."""
    return w.Image(value=picture.data, format=picture.mime.split("/")[1],
                   layout=w.Layout(width="auto", max_width="100%"))


class Tabs(Mapping[str, "SortableTable"]):
    """The report's tabs by title: each one's ``SortableTable``, made (with its picture,
    into its box) when the tab is first shown or read; until then a tab is an empty box,
    so a report's first display pays for the op table alone. ``boxes``: each tab's box,
    the one the selector shows."""

    def __init__(self, result: ProfileResult, shared: Shared, ops: SortableTable) -> None:
        self._result, self._shared = result, shared
        self._made: dict[str, SortableTable] = {"ops": ops}
        self._pending: dict[str, tuple[Table, Picture | None]] = {}
        self.boxes: dict[str, w.Box] = {"ops": ops.widget}

    def add(self, title: str, table: Table, picture: Picture | None) -> None:
        """A tab of ``table`` with ``picture`` above it, made when first needed."""
        self._pending[title] = (table, picture)
        self.boxes[title] = w.VBox([], layout=w.Layout(display="none"),
                                   _dom_classes=tab_classes(title))

    def __getitem__(self, title: str) -> SortableTable:
        made = self._made.get(title)
        if made is None:
            table, picture = self._pending.pop(title)  # (KeyError: no such tab)
            panel = RowPanel(self._result, self._shared) if title in EXPLAINED_TABS else None
            made = self._made[title] = SortableTable(table, shared=self._shared, panel=panel)
            above = [picture_widget(picture)] if picture is not None else []
            self.boxes[title].children = [*above, made.widget]
        return made

    def __contains__(self, title: object) -> bool:
        return title in self.boxes

    def __iter__(self) -> Iterator[str]:
        return iter(self.boxes)

    def __len__(self) -> int:
        return len(self.boxes)


def view_selector(views: Tabs) -> w.ToggleButtons | None:
    """The tabs' selector, showing one tab's box (its table made then) and hiding the
    others; None for a lone "ops" tab (no choice: not made at all)."""
    if len(views) == 1:
        return None
    # Each tab's label whole: buttons as wide as their labels (ipywidgets' default cuts).
    selector = w.ToggleButtons(options=list(views), value="ops", description="view",
                               _dom_classes=("km-views",),
                               style=w.ToggleButtonsStyle(button_width="auto"))

    def show(change: Any = None) -> None:
        views[selector.value]  # (made on its first showing)
        for name, box in views.boxes.items():
            box.layout.display = None if name == selector.value else "none"

    selector.observe(show, names="value")
    return selector


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
    tables: each table with rows is a tab (``Tabs``), its view's picture above the view's
    first table; the selector shows one tab's box and hides the others. ``.km_table`` is
    the op table's state, ``.km_views`` the ``Tabs``, ``.km_boxes`` each tab's box and
    ``.km_selector`` the selector (None with the op table alone). ``pictures``: the views'
    pictures, drawn here when not given."""
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
    table = SortableTable(op_table(result), shared=shared, classes=tab_classes("ops"),
                          panel=RowPanel(result, shared))
    views = Tabs(result, shared, table)
    empty: list[str] = []  # views asked for that found nothing: a note, not a tab
    for view in view_reports(result, pictures):
        picture = view.picture
        for title, shown in view.tables:
            if isinstance(shown, Table) and shown.rows:
                views.add(title, shown, picture)
                picture = None
            elif not isinstance(shown, Table):
                empty.append(f"{title}: {shown}")
        if picture is not None:  # no tab to show it in: on its own (a trace's memory)
            parts.append(picture_widget(picture))
    selector = view_selector(views)
    parts += [*([selector] if selector is not None else []), *views.boxes.values()]
    if empty:
        parts.append(shared.html("".join(f'<div class="km-note">{escape(n)}</div>'
                                         for n in empty)))
    box = w.VBox(parts, layout=shared.plain, _dom_classes=(LIVE_CLASS,))
    box.km_table = table
    box.km_views = views
    box.km_selector = selector
    box.km_boxes = views.boxes  # what the selector shows per tab (a picture above some tables)
    return box
