"""The roofline view's renderings: its table, its one-line verdict and its chart."""

from __future__ import annotations

from typing import Any

from kernelmagic.core.rows import RooflineRow
from kernelmagic.core.units import counted, cut_end, format_count, format_us, percent, si
from kernelmagic.render.chart import INK, figure_png, new_figure
from kernelmagic.render.table import Column, Table, name_column, summed, text_column
from kernelmagic.render.views import Picture
from kernelmagic.results.result import ProfileResult

COLORS = {"compute": "#C44E52", "memory": "#4C72B0", "overhead": "#8C8C8C",
          "unexplained": "#DD8452"}
MAX_LABEL = 28


def roofline_table(result: ProfileResult) -> Table:
    """Per op: calls, FLOPs and bytes per call, intensity, rates, roof reached, bound, time.

    The time is what the counts describe: a counted op's own time plus that of the ops it
    calls inside it (``aten::relu``'s ``aten::clamp_min``), other ops' self time.
    """
    total = sum(r.time for r in result.roofline) or 1.0  # (no time: every share 0)
    side = "device" if result.profiles_device else "CPU"
    bound_order = {"compute": 3, "memory": 2, "unexplained": 1, "overhead": 0}
    cols = [
        name_column(width=300),
        Column("calls", "calls", lambda r: r.count, lambda r: f"{r.count:,}", width=64),
        text_column("dtype", "dtype", lambda r: r.dtype, width=80),
        Column("flops", "FLOP/call", lambda r: r.flops, lambda r: format_count(r.flops)),
        Column("bytes", "bytes/call", lambda r: r.bytes, lambda r: si(r.bytes, "B")),
        Column("intensity", "FLOP/byte", lambda r: r.intensity,
               lambda r: f"{r.intensity:.3g}" if r.bytes else "—", width=84),
        Column("flops_per_s", "FLOP/s", lambda r: r.flops_per_s,
               lambda r: format_count(r.flops_per_s)),
        Column("bytes_per_s", "bytes/s", lambda r: r.bytes_per_s,
               lambda r: si(r.bytes_per_s, "B/s")),
        Column("roof_share", "% of roof", lambda r: r.roof_share, lambda r: percent(r.roof_share),
               width=84),
        Column("bound", "bound", lambda r: bound_order.get(r.bound, -1), lambda r: r.bound,
               width=84),
        # Not self time: a counted op owns the time of the ops it calls inside it too
        # (``live/roofline.py``), so the title names neither "self" nor "total".
        Column("time", summed(f"{side} time", result.iters), lambda r: r.time,
               lambda r: format_us(r.time)),
        Column("pct", f"% {side} time", lambda r: r.time, lambda r: percent(r.time / total)),
    ]
    return Table(cols, list(result.roofline), "time", noun="ops")


def peaks_text(peaks: dict[str, Any]) -> str:
    """``float32 175 GFLOP/s, bfloat16 ..., memory 40.6 GB/s (measured)``."""
    if not peaks:
        return ""
    flops = ", ".join(f"{dt} {si(v, 'FLOP/s')}"
                      for dt, v in peaks.get("flops_per_s", {}).items())
    return (f"{flops}, memory {si(peaks.get('bytes_per_s', 0.0), 'B/s')} "
            f"({peaks.get('source', '')})")


def verdict_line(result: ProfileResult) -> str:
    """The cell's verdict: the share of op time in each regime, and the roofs used."""
    note = result.roofline_peaks.get("note", "")
    if not result.roofline:
        return f"Roofline: no op time to place{f' ({note})' if note else ''}"
    shares = result.roofline_verdict
    shown = ["compute", "memory", "overhead"] + (["unexplained"]
                                                  if shares.get("unexplained") else [])
    words = {"overhead": "overhead", "unexplained": "unexplained by the roofline (random "
             "numbers, sorting, indexing)"}
    parts = ", ".join(f"{percent(shares[b])} {words.get(b, b + '-bound')}"
                      for b in shown)
    line = f"Roofline: {parts} (share of op time) · roofs: {peaks_text(result.roofline_peaks)}"
    return f"{line} · {note}" if note else line


#: Offsets (px) tried around a point for its number, nearest first: 8 directions per ring.
_RINGS = (7, 13, 21, 31, 44)
_DIRECTIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1), (1, 0), (0, 1), (-1, 0), (0, -1))


def _overlaps(a: Any, b: Any) -> bool:
    return not (a.x1 <= b.x0 or b.x1 <= a.x0 or a.y1 <= b.y0 or b.y1 <= a.y0)


def place_numbers(ax: Any, points: list[tuple[float, float]], labels: list[str],
                  color: str = INK) -> list[bool]:
    """Write each label near its point where it overlaps no text already on the chart
    (the roofs' names, labels placed before it) and stays inside the axes; a label with no
    free place within ``_RINGS`` is left out. Returns which were placed."""
    renderer = ax.figure.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    taken = [t.get_window_extent(renderer) for t in ax.texts]

    def free_box(text: Any, spot: tuple[float, float]) -> Any:
        """The box of ``text`` moved to ``spot`` (px) when it is free there, else None."""
        text.set_position(ax.transData.inverted().transform(spot))
        box = text.get_window_extent(renderer).expanded(1.1, 1.15)
        fits = (inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0
                and box.y1 <= inside.y1 and not any(_overlaps(box, t) for t in taken))
        return box if fits else None

    placed = []
    for (x, y), label in zip(points, labels, strict=True):
        px, py = ax.transData.transform((x, y))
        text = ax.text(x, y, label, fontsize=8, fontweight="bold", color=color,
                       ha="center", va="center")
        spots = ((px + dx * ring, py + dy * ring) for ring in _RINGS for dx, dy in _DIRECTIONS)
        box = next(filter(None, (free_box(text, spot) for spot in spots)), None)
        if box is None:
            text.remove()
        else:
            taken.append(box)
        placed.append(box is not None)
    return placed


def _key(fig: Any, entries: list[tuple[str, str, str]]) -> None:
    """The numbers' key beside the axes: one line per point, coloured like its bound."""
    fig.text(0.685, 0.93, "key (number on the chart: op, share of op time)", fontsize=8,
             va="top", fontweight="bold", color=INK)
    step = min(0.045, 0.8 / max(len(entries), 1))
    for i, (number, text, color) in enumerate(entries):
        fig.text(0.685, 0.88 - i * step, f"{number:>2}  {text}", fontsize=8, va="top",
                 color=color, family="monospace")


def _limits(plotted: list[RooflineRow], bandwidth: float,
            flops_peaks: dict[str, float]) -> tuple[float, float, float, float]:
    """(x low, x high, y low, y high) that hold the points and both roofs."""
    xs = [r.intensity for r in plotted]
    ys = [r.flops_per_s for r in plotted]
    top = max([*flops_peaks.values(), *ys, 1.0])
    x_lo = min([*xs, 0.05]) / 3
    x_hi = max([*xs, *(p / bandwidth for p in flops_peaks.values()), 10.0]) * 5
    y_lo = min([*ys, bandwidth * x_lo]) / 3
    return x_lo, x_hi, y_lo, top * 3


def _roofs(ax: Any, flops_peaks: dict[str, float], bandwidth: float, used: set[str],
           x_lo: float, x_hi: float) -> None:
    """The memory roof up to each dtype's compute roof (float32's, and those the ops use)."""
    dtypes = [dt for dt in ("float32", "bfloat16", "float16") if dt in flops_peaks]
    styles = ["-", "--", ":"]
    for i, dt in enumerate(dtypes):
        if dt != "float32" and dt not in used:
            continue
        peak = flops_peaks[dt]
        ridge = peak / bandwidth
        ax.plot([x_lo, ridge, x_hi], [bandwidth * x_lo, peak, peak], color="#333333",
                linestyle=styles[i % 3], linewidth=1.2)
        ax.text(ridge * 1.15, peak * 1.12, f"{dt} {si(peak, 'FLOP/s')}", va="bottom",
                ha="left", fontsize=8, color="#333333")
    ax.text(x_lo * 1.2, bandwidth * x_lo * 5, f"memory {si(bandwidth, 'B/s')}",
            fontsize=8, color="#333333", ha="left", va="bottom")


def roofline_figure(result: ProfileResult, k: int | None = None, dpi: int = 100) -> Any:
    """Log-log roofline: intensity vs FLOP/s, both roofs, the top ops sized by their time,
    each numbered where it sits (never over another label) with a key beside the axes."""
    peaks = result.roofline_peaks
    bandwidth = float(peaks.get("bytes_per_s", 0.0)) or 1.0
    flops_peaks = {dt: float(v) for dt, v in peaks.get("flops_per_s", {}).items() if v}
    total = sum(r.time for r in result.roofline) or 1.0
    k = k or result.topk
    plotted = [r for r in result.roofline if r.flops > 0 and r.bytes > 0 and r.flops_per_s > 0]
    plotted = plotted[:k]  # rows come most time first
    left_out = [r for r in result.roofline if r not in plotted]

    fig = new_figure((10.5, 4.8), dpi)
    ax = fig.add_subplot()
    ax.set(xscale="log", yscale="log")
    x_lo, x_hi, y_lo, y_hi = _limits(plotted, bandwidth, flops_peaks)
    _roofs(ax, flops_peaks, bandwidth, {r.dtype for r in plotted}, x_lo, x_hi)
    for r in plotted:
        ax.scatter([r.intensity], [r.flops_per_s], s=30 + 900 * r.time / total, alpha=0.75,
                   color=COLORS.get(r.bound, "#8C8C8C"), edgecolors="white", linewidths=0.5)
    for bound, color in COLORS.items():
        ax.scatter([], [], color=color, label=f"{bound}-bound" if bound != "overhead"
                   else "overhead")
    measured: list[tuple[float, float]] = []
    names: list[str] = []
    if result.counters:  # --counters: kernels placed by measured numbers, beside the model
        from kernelmagic.render.counters import draw_measured, measured_names

        mx, my = draw_measured(ax, result, k)
        measured, names = list(zip(mx, my, strict=True)), measured_names(result, k)
        x_lo, x_hi = min([x_lo, *(x / 3 for x in mx)]), max([x_hi, *(x * 5 for x in mx)])
        y_lo, y_hi = min([y_lo, *(y / 3 for y in my)]), max([y_hi, *(y * 3 for y in my)])
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    ax.set(xlim=(x_lo, x_hi), ylim=(y_lo, y_hi), ylabel="achieved FLOP/s",
           xlabel="arithmetic intensity (FLOP per byte moved)")
    title = f"{result.name}: roofline ({peaks.get('source', '')})"
    if left_out:
        hidden = sum(r.time for r in left_out) / total
        title += (f"\n{counted(len(left_out), 'op')} without FLOPs or beyond the top {k} "
                  f"not drawn ({percent(hidden)} of op time)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    if not plotted:
        ax.text(0.5, 0.5, "no op with both FLOPs and bytes to place", ha="center",
                transform=ax.transAxes)
    fig.subplots_adjust(left=0.08, right=0.665, top=0.9, bottom=0.11)
    entries = _number_points(ax, plotted, total, measured, names)
    _key(fig, entries)
    return fig


def _number_points(ax: Any, plotted: list[RooflineRow], total: float,
                   measured: list[tuple[float, float]], names: list[str]
                   ) -> list[tuple[str, str, str]]:
    """Number the ops (1, 2, ...) and the measured kernels (A, B, ...) on the chart; the
    key's lines, saying which numbers found no free place."""
    numbers = [str(i + 1) for i in range(len(plotted))]
    placed = place_numbers(ax, [(r.intensity, r.flops_per_s) for r in plotted], numbers)
    entries = [(n, f"{cut_end(r.key.replace('aten::', ''), MAX_LABEL)} · "
                f"{percent(r.time / total)}" + ("" if ok else " (no room for its number)"),
                COLORS.get(r.bound, "#8C8C8C"))
               for n, r, ok in zip(numbers, plotted, placed, strict=True)]
    if measured:
        from kernelmagic.render.counters import MEASURED_COLOR

        letters = [chr(ord("A") + i) for i in range(len(measured))]
        placed = place_numbers(ax, measured, letters, color=MEASURED_COLOR)
        entries += [(n, f"{name[:MAX_LABEL]} (measured)"
                     + ("" if ok else " (no room for its letter)"), MEASURED_COLOR)
                    for n, name, ok in zip(letters, names, placed, strict=True)]
    return entries


def roofline_png(result: ProfileResult, k: int | None = None, dpi: int = 100) -> bytes:
    """``roofline_figure`` as PNG."""
    return figure_png(roofline_figure(result, k, dpi))


def roofline_tables(result: ProfileResult) -> list[tuple[str, object]]:
    """``--roofline``'s table, or the verdict when no op was counted."""
    if "roofline" not in result.views:
        return []
    return [("roofline", roofline_table(result) if result.roofline else verdict_line(result))]


def roofline_notes(result: ProfileResult) -> list[str]:
    return [verdict_line(result)] if "roofline" in result.views and result.roofline else []


def roofline_picture(result: ProfileResult) -> Picture | None:
    """The roofline chart (a PNG drawn by matplotlib) of a run that counted ops."""
    if "roofline" not in result.views or not result.roofline:
        return None
    return Picture(roofline_png(result), "image/png", "roofline chart")
