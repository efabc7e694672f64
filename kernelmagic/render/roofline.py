"""The roofline view's renderings: its table, its one-line verdict and its chart."""

from __future__ import annotations

import math
from typing import Any

from kernelmagic.core.rows import RooflineRow
from kernelmagic.core.units import format_count, format_us, percent, si, whole_percent
from kernelmagic.render.table import Column, Table, name_column, summed
from kernelmagic.results.result import ProfileResult

COLORS = {"compute": "#C44E52", "memory": "#4C72B0", "overhead": "#8C8C8C",
          "unexplained": "#DD8452"}
MAX_LABEL = 28


def roofline_table(result: ProfileResult) -> Table:
    """Per op: calls, FLOPs and bytes per call, intensity, rates, roof reached, bound, time."""
    total = sum(r.time for r in result.roofline)
    side = "device" if result.profiles_device else "CPU"

    def share(r: RooflineRow) -> float:
        return r.time / total if total > 0 else 0.0

    bound_order = {"compute": 3, "memory": 2, "unexplained": 1, "overhead": 0}
    cols = [
        name_column(width=300),
        Column("calls", "calls", lambda r: r.count, lambda r: f"{r.count:,}", width=64),
        Column("dtype", "dtype", lambda r: r.dtype, lambda r: r.dtype, numeric=False, width=80),
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
        Column("time", summed(f"self {side}", result.iters), lambda r: r.time,
               lambda r: format_us(r.time)),
        Column("pct", f"% self {side}", share, lambda r: percent(share(r))),
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
    parts = ", ".join(f"{percent(shares[b]).replace('.0%', '%')} {words.get(b, b + '-bound')}"
                      for b in shown)
    line = f"Roofline: {parts} (share of op time) · roofs: {peaks_text(result.roofline_peaks)}"
    return f"{line} · {note}" if note else line


def _label(key: str) -> str:
    name = key.replace("aten::", "")
    return name if len(name) <= MAX_LABEL else name[: MAX_LABEL - 1] + "…"


def roofline_png(result: ProfileResult, k: int | None = None, dpi: int = 100) -> bytes:
    """Log-log roofline: intensity vs FLOP/s, both roofs, the top ops sized by their time."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from kernelmagic.render.chart import figure_png

    peaks = result.roofline_peaks
    bandwidth = float(peaks.get("bytes_per_s", 0.0)) or 1.0
    flops_peaks = {dt: float(v) for dt, v in peaks.get("flops_per_s", {}).items() if v}
    total = sum(r.time for r in result.roofline) or 1.0
    k = k or result.topk
    plotted = [r for r in result.roofline if r.flops > 0 and r.bytes > 0 and r.flops_per_s > 0]
    plotted = plotted[:k]  # rows come most time first
    left_out = [r for r in result.roofline if r not in plotted]

    fig = Figure(figsize=(8, 4.8), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = [r.intensity for r in plotted]
    ys = [r.flops_per_s for r in plotted]
    top = max([*flops_peaks.values(), *ys, 1.0])
    x_lo = min([*xs, 0.05]) / 3
    x_hi = max([*xs, *(p / bandwidth for p in flops_peaks.values()), 10.0]) * 5
    y_lo = min([*ys, bandwidth * x_lo]) / 3
    # The roofs: memory (bandwidth x intensity) up to each dtype's compute roof.
    dtypes = [dt for dt in ("float32", "bfloat16", "float16") if dt in flops_peaks]
    used = {r.dtype for r in plotted}
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
    placed: list[tuple[float, float]] = []  # (log10 x, log10 y) of labelled points
    for r in plotted:
        share = r.time / total
        ax.scatter([r.intensity], [r.flops_per_s], s=30 + 900 * share, alpha=0.75,
                   color=COLORS.get(r.bound, "#8C8C8C"), edgecolors="white", linewidths=0.5)
        # Labels of points that nearly coincide are stacked downwards, not overprinted.
        here = (math.log10(r.intensity), math.log10(r.flops_per_s))
        near = sum(1 for x, y in placed if abs(x - here[0]) < 0.4 and abs(y - here[1]) < 0.25)
        placed.append(here)
        ax.annotate(f"{_label(r.key)} ({whole_percent(share)})", (r.intensity, r.flops_per_s),
                    textcoords="offset points", xytext=(8, 4 - 11 * near), fontsize=8)
    for bound, color in COLORS.items():
        ax.scatter([], [], color=color, label=f"{bound}-bound" if bound != "overhead"
                   else "overhead")
    if result.counters:  # --counters: kernels placed by measured numbers, beside the model
        from kernelmagic.render.counters import draw_measured

        mx, my = draw_measured(ax, result, k)
        x_lo, x_hi = min([x_lo, *(x / 3 for x in mx)]), max([x_hi, *(x * 5 for x in mx)])
        y_lo, top = min([y_lo, *(y / 3 for y in my)]), max([top, *my])
    ax.legend(loc="lower right", fontsize=8, frameon=False)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, top * 3)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("achieved FLOP/s")
    title = f"{result.name}: roofline ({peaks.get('source', '')})"
    if left_out:
        hidden = sum(r.time for r in left_out) / total
        title += (f"\n{len(left_out)} ops without FLOPs or beyond the top {k} not drawn "
                  f"({whole_percent(hidden)} of op time)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    if not plotted:
        ax.text(0.5, 0.5, "no op with both FLOPs and bytes to place", ha="center",
                transform=ax.transAxes)
    fig.subplots_adjust(left=0.1, right=0.97, top=0.92, bottom=0.11)
    return figure_png(fig)
