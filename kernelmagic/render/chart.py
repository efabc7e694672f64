"""The report's charts, drawn with matplotlib's object-oriented API (no pyplot state): the
top-k bar chart (a cached Figure per bar count, updated in place) and the timeline."""

from __future__ import annotations

import io
import struct
import threading
import zlib
from typing import Any

from kernelmagic.result import OpRow, ProfileResult
from kernelmagic.timing import format_us

MAX_LABEL = 40

_AXIS_LABEL = {
    "self_cpu": "self CPU time per iteration",
    "cpu": "total CPU time per iteration (nested ops overlap)",
    "self_device": "self device time per iteration",
    "device": "total device time per iteration (nested ops overlap)",
    "calls": "calls per iteration",
    "avg": "time per call",
}


def _bar_label(result: ProfileResult, key: str, row: OpRow) -> str:
    """Share of total self time for time keys; the count or time itself otherwise."""
    value = result.value(row, key)
    if key == "calls":
        return f" · {value / result.iters:g}"
    if key == "avg":
        return f" · {format_us(value)}"
    on_device = key in ("self_device", "device")
    total = result.self_device_time_total if on_device else result.self_cpu_time_total
    share = value / total if total > 0 else 0.0
    return f" · {share:.0%}" if share >= 0.1 else f" · {share:.1%}"


def chart_png(result: ProfileResult, by: str | None = None, k: int | None = None) -> bytes:
    """A horizontal bar chart of the top ``k`` ops (default: ``result.topk``) as PNG.

    matplotlib, on a transparent background with mid-grey ink (light and dark themes).
    """
    key = by or result.sort
    k = k or result.topk
    rows = result.top(k, by=key)
    # Bars show per-iteration figures (per-call for "avg"): ms, or µs for short ones.
    per = 1 if key == "avg" else result.iters
    raw = [result.value(r, key) / per for r in rows]
    unit = "" if key == "calls" else " (ms)" if max(raw, default=0) >= 1000 else " (µs)"
    scale = 1e-3 if unit == " (ms)" else 1.0
    names = [r.key if len(r.key) <= MAX_LABEL else r.key[: MAX_LABEL - 1] + "…" for r in rows]
    if key in ("self_cpu", "self_device"):
        covered = sum(result.share(r, device=key == "self_device") for r in rows)
        title = f"{result.name}: top {len(rows)} ops, {covered:.0%} of self time"
    else:
        title = f"{result.name}: top {len(rows)} ops by {key}"
    # Each bar's share (or count) sits in its label: one text per bar, not two (each text
    # drawn costs about a millisecond, most of the chart's time).
    labels = [f"{name}{_bar_label(result, key, row)}" for name, row in zip(names, rows,
                                                                          strict=True)]
    with _LOCK:
        return _bars_layout(len(rows)).draw([v * scale for v in raw], labels, title,
                                            _AXIS_LABEL[key] + unit)


#: The bar colour: matplotlib's muted blue, readable on white and on dark grey alike.
BAR = "#4C72B0"
DPI = 100
ROW_INCHES = 0.32

_LOCK = threading.Lock()


class _BarsLayout:
    """One Figure, Axes and artists for charts of ``n`` bars, drawn again for each result.

    Building a Figure and its Axes costs more than drawing them; a report's chart only
    changes the bars' lengths and the texts, so the artists are made once per bar count
    and updated in place, then rendered straight from the Agg canvas to a PNG.
    """

    def __init__(self, n: int) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator

        self.n = n
        self.height = 1.0 + ROW_INCHES * max(n, 1)
        self.fig = Figure(figsize=(8, self.height), dpi=DPI)
        self.canvas = FigureCanvasAgg(self.fig)
        ax = self.ax = self.fig.add_subplot()
        self.ys = list(range(n))[::-1]
        self.bars = list(ax.barh(self.ys, [1.0] * n, color=BAR)) if n else []
        ax.set_yticks(self.ys)
        ax.tick_params(axis="y", length=0, labelsize=9)
        ax.tick_params(axis="x", labelsize=8)
        self.empty = ax.text(0.5, 0.5, "" if n else "no operators recorded", ha="center",
                             transform=ax.transAxes)
        if not n:
            ax.set_yticks([])
        ax.grid(True, axis="x", alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
        # A fixed place for the axis label: placing it from the tick labels' boxes costs
        # a layout of every tick label on each draw.
        ax.xaxis.set_label_coords(0.5, -0.25 / (self.height - 1.04), transform=ax.transAxes)
        ax.yaxis.set_label_coords(0.0, 0.5, transform=ax.transAxes)  # (no label)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        # A figure text, not ax.set_title: the title's place is then not worked out
        # again from the axes' contents on every draw.
        self.title = self.fig.text(0.5, 1 - 0.3 / self.height, " ", ha="center",
                                   va="baseline", fontsize=10, color=INK)
        _for_any_theme(self.fig)

    def draw(self, values: list[float], names: list[str], title: str,
             axis_label: str) -> bytes:
        ax = self.ax
        for bar, value in zip(self.bars, values, strict=True):
            bar.set_width(value)
        ax.set_yticks(self.ys, names)
        top = max(values, default=0.0)
        ax.set_xlim(0.0, top * 1.05 if top > 0 else 1.0)
        self.title.set_text(title)
        ax.set_xlabel(axis_label, color=INK)
        # Fixed margins from the longest label: tight_layout would cost a second draw.
        longest = max((len(n) for n in names), default=10)
        left = min(0.55, (0.35 + 0.07 * longest) / 8)
        self.fig.subplots_adjust(left=left, right=0.97, top=1 - 0.42 / self.height,
                                 bottom=0.62 / self.height)
        self.title.set_x((left + 0.97) / 2)  # centred over the axes, as a title is
        for label in ax.get_yticklabels():
            label.set_color(INK)
        return _canvas_png(self.canvas)


_LAYOUTS: dict[int, _BarsLayout] = {}


def _bars_layout(n: int) -> _BarsLayout:
    layout = _LAYOUTS.get(n)
    if layout is None:
        if len(_LAYOUTS) >= 8:  # a handful of --topk values in one session at most
            _LAYOUTS.pop(next(iter(_LAYOUTS)))
        layout = _LAYOUTS[n] = _BarsLayout(n)
    return layout


def _canvas_png(canvas: Any) -> bytes:
    """Render the Agg canvas and encode its RGBA buffer as PNG (``rgba_png``): savefig
    would draw a second time and compress harder, a third of the time more."""
    import matplotlib
    import numpy as np

    # FreeType's hinting is a fifth of the drawing time; at 100 dpi the unhinted
    # DejaVu Sans reads the same.
    hinting = matplotlib.rcParams["text.hinting"]
    matplotlib.rcParams["text.hinting"] = "no_hinting"
    try:
        canvas.draw()
    finally:
        matplotlib.rcParams["text.hinting"] = hinting
    return rgba_png(np.asarray(canvas.buffer_rgba()))


def rgba_png(rgba: Any) -> bytes:
    """An (h, w, 4) uint8 array as a PNG: no row filter, zlib level 1.

    On a chart (mostly transparent, flat colours) that is 2.5 ms where Pillow's
    adaptive filters at level 1 take 6 ms, for a file about a tenth larger.
    """
    import numpy as np

    height, width, _ = rgba.shape
    raw = np.zeros((height, width * 4 + 1), dtype=np.uint8)  # column 0: filter "none"
    raw[:, 1:] = rgba.reshape(height, width * 4)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw.tobytes(), 1)) + chunk(b"IEND", b""))


#: Text and axes colour: a mid grey that keeps >= 4.3:1 contrast on white and on
#: JupyterLab Dark's #111 alike (the PNG is transparent and shows the page behind it).
INK = "#7a7a7a"


def _for_any_theme(fig: Any) -> None:
    """A transparent background, and INK for every text and axis line left at black."""
    fig.patch.set_alpha(0.0)
    for ax in fig.axes:
        ax.set_facecolor("none")
        for spine in ax.spines.values():
            spine.set_edgecolor(INK)
        ax.tick_params(colors=INK)
        for text in (ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts):
            if text.get_color() in ("black", "k", "#000000"):
                text.set_color(INK)
        legend = ax.get_legend()
        if legend is not None:
            legend.get_frame().set_alpha(0.0)
            for text in legend.get_texts():
                text.set_color(INK)


def _png(fig: Any) -> bytes:
    """Encode with light compression: encoding dominates otherwise (~9 ms vs ~2 ms)."""
    _for_any_theme(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", pil_kwargs={"compress_level": 1})
    return buf.getvalue()


def timeline_png(result: ProfileResult, dpi: int = 100) -> bytes:
    """One profiled iteration: top-level CPU ops and, on CUDA, kernels per stream."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    lanes = sorted({s.lane for s in result.timeline}, key=lambda lane: (lane != "CPU", lane))
    height = 1.4 + 0.5 * max(len(lanes), 1)
    fig = Figure(figsize=(10, height), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    names = sorted({s.key for s in result.timeline})
    palette = [f"C{i}" for i in range(10)]
    color = {n: palette[i % len(palette)] for i, n in enumerate(names)}
    end = max((s.end for s in result.timeline), default=1.0) / 1e3
    for y, lane in enumerate(reversed(lanes)):
        spans = [s for s in result.timeline if s.lane == lane]
        ax.broken_barh([(s.start / 1e3, (s.end - s.start) / 1e3) for s in spans], (y - 0.4, 0.8),
                       facecolors=[color[s.key] for s in spans], edgecolor="white", linewidth=0.3)
        for s in spans:
            width = (s.end - s.start) / 1e3
            if width > end / 12:
                ax.text(s.start / 1e3 + width / 2, y, s.key.replace("aten::", "")[:24],
                        ha="center", va="center", fontsize=7, color="white", clip_on=True)
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels(list(reversed(lanes)), fontsize=9)
    ax.set_xlim(0, end * 1.01 if end > 0 else 1)
    ax.set_xlabel("time within the iteration (ms)")
    ax.set_title(f"{result.name}: one profiled iteration (the median one)", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    if not result.timeline:
        ax.text(0.5, 0.5, "no events in this iteration", ha="center", transform=ax.transAxes)
    fig.subplots_adjust(left=0.1, right=0.98, top=1 - 0.4 / height, bottom=0.6 / height)
    return _png(fig)
