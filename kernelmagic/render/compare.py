"""Rendering a ``Comparison``: text, HTML, a paired bar chart and a sortable widget."""

from __future__ import annotations

from html import escape
from typing import Any

from kernelmagic.core.units import cut_end, format_ratio, format_seconds, format_us, signed_us
from kernelmagic.render.bundle import display_bundle
from kernelmagic.render.chart import figure_png, new_figure
from kernelmagic.render.html import image_tag, static_table_html
from kernelmagic.render.table import ROWS_SHOWN, Column, Table, name_column, time_column
from kernelmagic.render.text import render_table
from kernelmagic.results.compare import Comparison, OpDelta


def _speedup(d: OpDelta) -> str:
    if d.speedup is not None:
        return format_ratio(d.speedup)
    return "—" if d.status == "both" else d.status


def comparison_table(cmp: Comparison) -> Table:
    """Op, before, after (self time per iteration: the titles say so), change and speed-up,
    largest absolute change first."""
    label = cmp.time_label
    cols = [
        name_column(),
        time_column("before", f"before ({label} / it.)", lambda d: d.before),
        time_column("after", f"after ({label} / it.)", lambda d: d.after),
        Column("change", "change", lambda d: abs(d.delta), lambda d: signed_us(d.delta)),
        Column("speedup", "speed-up", lambda d: d.speedup or 0.0, _speedup),
    ]
    return Table(cols, list(cmp.rows), "change")


def headline(cmp: Comparison) -> str:
    """One line: names, per-iteration medians with IQRs, speed-up and the noise verdict."""
    b, a = cmp.before.stats, cmp.after.stats
    return (
        f"{cmp.after_name} vs {cmp.before_name}: {cmp.verdict()} · per iteration (median) "
        f"{format_seconds(b.median)} (IQR {format_seconds(b.iqr)}) → "
        f"{format_seconds(a.median)} (IQR {format_seconds(a.iqr)}) · total {cmp.time_label} "
        f"time per iteration (mean) {format_us(cmp.self_time_before)} → "
        f"{format_us(cmp.self_time_after)}"
    )


def changes_line(cmp: Comparison) -> str:
    changes = (("new ops", cmp.appeared), ("gone", cmp.vanished))
    return "; ".join(f"{what}: {', '.join(ops)}" for what, ops in changes if ops)


def comparison_text(cmp: Comparison, limit: int | None = ROWS_SHOWN) -> str:
    parts = [headline(cmp)]
    changes = changes_line(cmp)
    if changes:
        parts.append(changes)
    parts += ["", render_table(comparison_table(cmp), limit)]
    return "\n".join(parts)


def comparison_png(cmp: Comparison, k: int = 10, dpi: int = 100) -> bytes:
    """Paired horizontal bars (before, after) of the ``k`` ops with the most time."""
    rows = sorted(cmp.rows, key=lambda d: (-max(d.before, d.after), d.key))[:k]
    height = 1.2 + 0.45 * max(len(rows), 1)
    fig = new_figure((8, height), dpi)
    ax = fig.add_subplot()
    ys = list(range(len(rows)))[::-1]
    bar = 0.38
    ax.barh([y + bar / 2 for y in ys], [d.before / 1e3 for d in rows], height=bar,
            color="#B0B0B0", label=f"before: {cmp.before_name}")
    ax.barh([y - bar / 2 for y in ys], [d.after / 1e3 for d in rows], height=bar,
            color="#4C72B0", label=f"after: {cmp.after_name}")
    names = [cut_end(d.key, 40) for d in rows]
    ax.set_yticks(ys, names, fontsize=9)
    for y, d in zip(ys, rows, strict=True):
        ax.text(max(d.before, d.after) / 1e3, y, f"  {_speedup(d)}", va="center", fontsize=8)
    ax.set_xlabel(f"{cmp.time_label} time per iteration (ms)")
    ax.set_title(f"{cmp.after_name} vs {cmp.before_name}: {cmp.verdict()}", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, axis="x", alpha=0.3)
    ax.margins(x=0.15)
    longest = max((len(n) for n in names), default=10)
    fig.subplots_adjust(left=min(0.55, (0.35 + 0.07 * longest) / 8), right=0.97,
                        top=1 - 0.42 / height, bottom=0.62 / height)
    return figure_png(fig)


def comparison_html(cmp: Comparison, png: bytes | None, limit: int | None = ROWS_SHOWN) -> str:
    changes = changes_line(cmp)
    extra = f'<div class="km-changes">{escape(changes)}</div>' if changes else ""
    return (f'<div class="kernelmagic-compare"><div class="km-summary"><b>'
            f"{escape(headline(cmp))}</b></div>{extra}{image_tag(png, 'comparison chart')}"
            f"{static_table_html(comparison_table(cmp), limit)}</div>")


def comparison_widget(cmp: Comparison, png: bytes | None) -> Any:
    import ipywidgets as w

    from kernelmagic.render.bundle import LIVE_CLASS
    from kernelmagic.render.widget import SortableTable

    changes = changes_line(cmp)
    parts: list[Any] = [w.HTML(f"<b>{escape(headline(cmp))}</b>")]
    if changes:
        parts.append(w.HTML(escape(changes)))
    if png is not None:
        parts.append(w.Image(value=png, format="png", layout=w.Layout(width="auto")))
    table = SortableTable(comparison_table(cmp))
    parts.append(table.widget)
    box = w.VBox(parts, _dom_classes=(LIVE_CLASS,))
    box.km_table = table
    return box


def comparison_bundle(cmp: Comparison, include: Any = None) -> dict[str, Any]:
    """Widget view with ``text/html`` and ``text/plain`` fallbacks, as for a report."""
    return display_bundle(comparison_text(cmp), include, lambda: comparison_png(cmp),
                          lambda png: comparison_html(cmp, png),
                          lambda png: comparison_widget(cmp, png))
