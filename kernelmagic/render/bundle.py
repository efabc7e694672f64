"""One display bundle per report: the widget view with its static fallbacks.

Viewers pick the richest type they can show: JupyterLab, VS Code and Colab render the
widget; nbconvert and GitHub show ``text/html``; terminal IPython prints ``text/plain``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from kernelmagic.render.text import text_report
from kernelmagic.result import ProfileResult

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

#: Live report widgets, oldest first, keyed by the notebook cell that showed them.
#: A re-run cell replaces its report, so the old one is closed; beyond LIVE_LIMIT
#: reports the oldest are closed too, so a long session does not grow without bound
#: (a closed report's output keeps showing nothing live; re-display the result).
LIVE_LIMIT = 30
_live: OrderedDict[object, Any] = OrderedDict()


def _active_types() -> list[str] | None:
    """The mime types the current IPython front end shows (None outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None:
        return None
    return list(shell.display_formatter.active_types)


def mime_bundle(result: ProfileResult, include: Any = None) -> dict[str, Any]:
    """``text/plain`` always; HTML, chart and widget only where they can be shown.

    Terminal IPython shows only ``text/plain``, so the chart and widget are not built
    there. The widget is built only inside IPython (it needs a comm).
    """
    bundle: dict[str, Any] = {"text/plain": text_report(result)}
    active = _active_types()
    wanted = set(include) if include else (set(active) if active is not None else {"text/html"})
    if "text/html" not in wanted:
        return bundle
    from kernelmagic.render.chart import chart_png
    from kernelmagic.render.html import html_report

    png = chart_png(result)
    bundle["text/html"] = html_report(result, png)
    if active is not None:
        try:
            from kernelmagic.render.widget import report_widget
        except ImportError:
            return bundle
        view = report_widget(result, png)
        _keep_live(view)
        bundle[WIDGET_MIME] = {"version_major": 2, "version_minor": 0, "model_id": view.model_id}
    return bundle


def _cell_key() -> object | None:
    """The id of the notebook cell being run, where the front end sends one."""
    from IPython import get_ipython

    shell = get_ipython()
    header = getattr(shell, "parent_header", None) or {}
    return (header.get("metadata") or {}).get("cellId")


def _keep_live(view: Any) -> None:
    key = _cell_key()
    if key is None:
        key = object()
    replaced = _live.pop(key, None)
    if replaced is not None:
        close_tree(replaced)
    _live[key] = view
    while len(_live) > LIVE_LIMIT:
        close_tree(_live.popitem(last=False)[1])


def close_tree(widget: Any) -> None:
    """Close a widget and all its descendants (``close()`` alone leaves children open)."""
    for child in getattr(widget, "children", ()):
        close_tree(child)
    widget.close()
