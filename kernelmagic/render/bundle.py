"""Display bundles: each holds the widget view together with its static fallbacks.

Viewers pick the richest type they can show: JupyterLab, VS Code and Colab render the
widget; nbconvert and GitHub show ``text/html``; terminal IPython prints ``text/plain``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from kernelmagic.render.text import text_report
from kernelmagic.result import ProfileResult

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

#: Live widgets, oldest first, keyed by the notebook cell that showed them. A re-run
#: cell replaces its output, so its old widgets are closed; beyond LIVE_LIMIT cells the
#: oldest are closed too, so a long session does not grow without bound (an old
#: output whose widget was closed can be shown again by displaying the result).
LIVE_LIMIT = 30
_live: OrderedDict[object, tuple[object | None, list[Any]]] = OrderedDict()


def rich_types(include: Any = None) -> tuple[bool, bool]:
    """Whether to build (HTML, widget): not for terminal IPython, which shows text only.

    The widget needs IPython (a comm); outside IPython only HTML is built.
    """
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency
        shell = None
    else:
        shell = get_ipython()
    if include:
        wanted = set(include)
    elif shell is not None:
        wanted = set(shell.display_formatter.active_types)
    else:
        wanted = {"text/html"}
    html = "text/html" in wanted
    return html, html and shell is not None


def widget_view(build: Callable[[], Any]) -> dict[str, Any] | None:
    """Build a widget and return its view reference, or None without ipywidgets."""
    try:
        view = build()
    except ImportError:
        return None
    _keep_live(view)
    return {"version_major": 2, "version_minor": 0, "model_id": view.model_id}


def mime_bundle(result: ProfileResult, include: Any = None,
                findings: bool = True) -> dict[str, Any]:
    """The report: ``text/plain`` always; HTML, chart and widget where they can be shown."""
    bundle: dict[str, Any] = {"text/plain": text_report(result, findings=findings)}
    html, widget = rich_types(include)
    if not html:
        return bundle
    from kernelmagic.render.chart import chart_svg
    from kernelmagic.render.html import html_report

    chart = chart_svg(result)
    timeline = None
    if "timeline" in result.views:
        from kernelmagic.render.chart import timeline_png

        timeline = timeline_png(result)
    roofline = None
    if "roofline" in result.views and result.roofline:
        from kernelmagic.render.roofline import roofline_png

        roofline = roofline_png(result)
    bundle["text/html"] = html_report(result, chart, findings=findings, timeline_png=timeline,
                                      roofline_png=roofline)
    if widget:
        def build() -> Any:
            return report_box(result, findings=findings, chart=chart, timeline=timeline,
                              roofline=roofline)

        view = widget_view(build)
        if view is not None:
            bundle[WIDGET_MIME] = view
    return bundle


def report_box(result: ProfileResult, findings: bool = True, chart: bytes | None = None,
               timeline: bytes | None = None, roofline: bytes | None = None) -> Any:
    """The report's widget (charts drawn here unless given): also a rank's report in the
    many-ranks widget (``render/ranks.py``)."""
    from kernelmagic.render.chart import chart_svg, timeline_png
    from kernelmagic.render.widget import report_widget

    if chart is None:
        chart = chart_svg(result)
    if timeline is None and "timeline" in result.views:
        timeline = timeline_png(result)
    if roofline is None and "roofline" in result.views and result.roofline:
        from kernelmagic.render.roofline import roofline_png

        roofline = roofline_png(result)
    return report_widget(result, chart, findings=findings, timeline_png=timeline,
                         roofline_png=roofline)


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
