"""Display bundles: each holds the widget view together with its static fallbacks.

Viewers pick the richest type they can show: JupyterLab, VS Code and Colab render the
widget; nbconvert and GitHub show ``text/html``; terminal IPython prints ``text/plain``.
``display_bundle`` builds every bundle kernelmagic shows: a report's (``mime_bundle``
here), a comparison's (``render/compare.py``) and a run of many ranks' (``render/ranks.py``).

A notebook shows a bundle with a widget as two outputs (``display_outputs``, ``show``):
a front end shows only the widget part of an output that has one, so a notebook saved
without widget state would show "could not be displayed" where the report was. The static
HTML is an output of its own, and its CSS hides what should not show: the widget's output
while it holds only text (loading, or the missing-model message), and the static report
itself once its live widget has rendered.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from kernelmagic.render.chart import chart_svg
from kernelmagic.render.html import html_report
from kernelmagic.render.text import text_report
from kernelmagic.render.views import Picture, view_pictures
from kernelmagic.results.result import ProfileResult

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

#: Live widgets, oldest first, keyed by the notebook cell that showed them. A re-run
#: cell replaces its output, so its old widgets are closed; beyond LIVE_LIMIT cells the
#: oldest are closed too, so a long session does not grow without bound (an old
#: output whose widget was closed can be shown again by displaying the result).
LIVE_LIMIT = 30
_live: OrderedDict[object, tuple[object | None, list[Any]]] = OrderedDict()

Drawn = TypeVar("Drawn")


def rich_types(include: Any = None) -> tuple[bool, bool]:
    """Whether to build (HTML, widget): not for terminal IPython, which shows text only.

    The widget needs IPython (a comm); outside IPython only HTML is built.
    """
    from IPython import get_ipython  # (a dependency: outside IPython, no shell)

    shell = get_ipython()
    if include:
        wanted = set(include)
    elif shell is not None:
        wanted = set(shell.display_formatter.active_types)
    else:
        wanted = {"text/html"}
    html = "text/html" in wanted
    return html, html and shell is not None


#: The class of each widget kernelmagic shows (a report's, a comparison's, many ranks'),
#: given as it is built: rendered, it hides the static report beside it.
LIVE_CLASS = "km-live"

#: The widget's own output says only this (GitHub and nbconvert show the report once:
#: the static output's ``text/html``).
WIDGET_TEXT = "(the report above as a widget: sortable tables, a view per tab)"

#: The static output's CSS, in JupyterLab and the classic Notebook (a rule each, as a
#: browser drops a whole rule for one selector it rejects): in an output area holding a
#: static report (``km-static``), a widget output that holds only text ("Loading
#: widget...", or the missing-model message of a notebook saved without widget state) is
#: hidden, and so is the static report once a live widget (``km-live``) has rendered
#: there. A viewer without CSS (GitHub) shows the static report and the widget output's
#: ``WIDGET_TEXT``. (``:has`` may not hold another ``:has``.)
STATIC_CSS = "".join(selector + " {display: none}" for selector in (
    ".jp-OutputArea:has(.km-static) > .jp-OutputArea-child"
    " > .lm-Panel.jp-OutputArea-output:not(:has(*))",
    ".output:has(.km-static) > .output_area > .jupyter-widgets-view:not(:has(*))",
    ".jp-OutputArea:has(.km-live) > .jp-OutputArea-child:has(.km-static)",
    ".output:has(.km-live) > .output_area:has(.km-static)",
))


def display_outputs(bundle: dict[str, Any]) -> list[dict[str, Any]]:
    """The outputs a notebook shows for ``bundle``: itself without a widget; with one, the
    static report (``text/plain``, ``text/html`` with ``STATIC_CSS``) and then
    the widget (its view and ``WIDGET_TEXT``)."""
    view = bundle.get(WIDGET_MIME)
    if view is None or "text/html" not in bundle:
        return [bundle]
    html = f'<div class="km-static"><style>{STATIC_CSS}</style>{bundle["text/html"]}</div>'
    rest = {key: value for key, value in bundle.items() if key != WIDGET_MIME}
    return [{**rest, "text/html": html}, {"text/plain": WIDGET_TEXT, WIDGET_MIME: view}]


def show(bundle: dict[str, Any]) -> None:
    """Display ``bundle`` as its outputs (``display_outputs``)."""
    from IPython.display import display

    for output in display_outputs(bundle):
        display(output, raw=True)


def display_bundle(text: str, include: Any, draw: Callable[[], Drawn],
                   html: Callable[[Drawn], str], widget: Callable[[Drawn], Any]) -> dict[str, Any]:
    """``text/plain`` always; where rich output can be shown (``rich_types``), the pictures
    drawn once (``draw()``), ``text/html`` made with them, and the widget's view built
    with the same pictures where a widget can be shown."""
    bundle: dict[str, Any] = {"text/plain": text}
    want_html, want_widget = rich_types(include)
    if not want_html:
        return bundle
    drawn = draw()
    bundle["text/html"] = html(drawn)
    if want_widget:
        try:
            view = widget(drawn)
        except ImportError:  # no ipywidgets: the HTML is the richest
            return bundle
        _keep_live(view)
        bundle[WIDGET_MIME] = {"version_major": 2, "version_minor": 0, "model_id": view.model_id}
    return bundle


class ReportPictures(NamedTuple):
    """A report's pictures: the bar chart (SVG), the timeline (SVG, shown inline for its
    hover titles) of a run that recorded one, and each view's picture by the view's name
    (``render/views.py: view_pictures``)."""

    chart: bytes
    timeline: bytes | None
    views: dict[str, Picture]


def report_pictures(result: ProfileResult) -> ReportPictures:
    """Draw the report's pictures, once for its HTML and its widget."""
    timeline = None
    if "timeline" in result.views:
        from kernelmagic.render.timeline import timeline_svg

        timeline = timeline_svg(result)
    return ReportPictures(chart_svg(result), timeline, view_pictures(result))


def mime_bundle(result: ProfileResult, include: Any = None,
                findings: bool = True) -> dict[str, Any]:
    """The report: ``text/plain`` always; HTML, chart and widget where they can be shown."""
    return display_bundle(
        text_report(result, findings=findings), include, lambda: report_pictures(result),
        lambda drawn: html_report(result, drawn.chart, findings=findings,
                                  timeline_svg=drawn.timeline, pictures=drawn.views),
        lambda drawn: report_box(result, findings=findings, pictures=drawn))


def report_box(result: ProfileResult, findings: bool = True,
               pictures: ReportPictures | None = None) -> Any:
    """The report's widget (its pictures drawn here unless given): also a rank's report in
    the many-ranks widget (``render/ranks.py``)."""
    from kernelmagic.render.widget import report_widget

    if pictures is None:
        pictures = report_pictures(result)
    return report_widget(result, pictures.chart, findings=findings,
                         timeline_svg=pictures.timeline, pictures=pictures.views)


def _origin() -> tuple[object | None, object | None]:
    """(cell id, execution message id) of the code being run, where the front end sends them."""
    from IPython import get_ipython

    parent = getattr(get_ipython(), "parent_header", None) or {}
    cell = (parent.get("metadata") or {}).get("cellId")
    execution = (parent.get("header") or {}).get("msg_id")
    return cell, execution


def _keep_live(view: Any) -> None:
    """Track ``view``; close the widgets of this cell's previous run and the oldest cells."""
    cell, execution = _origin()
    key: object = object() if cell is None else cell
    views: list[Any] = []
    entry = _live.pop(key, None)
    if entry is not None:
        previous_execution, previous_views = entry
        if previous_execution == execution:
            views = previous_views  # another widget of the same run (e.g. --compare)
        else:
            for old in previous_views:
                close_tree(old)
    views.append(view)
    _live[key] = (execution, views)
    while len(_live) > LIVE_LIMIT:
        for old in _live.popitem(last=False)[1][1]:
            close_tree(old)


def close_tree(widget: Any) -> None:
    """Close a widget, its descendants, and their ``layout``/``style`` models.

    ``close()`` alone leaves children, layouts and styles registered (and alive).
    """
    for child in getattr(widget, "children", ()):
        close_tree(child)
    for part in ("layout", "style"):
        sub = getattr(widget, part, None)
        if sub is not None and hasattr(sub, "close"):
            sub.close()
    widget.close()
