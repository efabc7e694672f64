"""The report's charts, drawn with matplotlib's object-oriented API (no pyplot state): the
top-k bar chart (a cached Figure per bar count, updated in place). The timeline is an SVG
of its own (``render/timeline.py``)."""

from __future__ import annotations

import functools
import io
import threading
from typing import Any

from kernelmagic.core.rows import OpRow
from kernelmagic.core.sorting import self_time, sort_key
from kernelmagic.core.units import counted, cut_end, format_us, percent, percent_of
from kernelmagic.render.table import gain_value, row_label
from kernelmagic.results.result import ProfileResult

MAX_LABEL = 40
#: The most characters of a result's name in a chart's title.
MAX_NAME = 40

def per_iteration(result: ProfileResult, key: str, row: OpRow) -> float:
    """A bar's length: the row's figure for ``key`` as the op table shows it, per iteration
    (per call for ``avg``; ``max_gain`` as the table's ``max gain/iter``:
    ``OpRow.gain_per_iteration``)."""
    if key == "max_gain":  # (no bar where the model cannot see the row: ``gain_shown``)
        return result.gain_shown(row) or 0.0
    value = result.value(row, key)
    return value if key == "avg" else value / result.iters


def top_rows(result: ProfileResult, key: str, k: int | None) -> list[OpRow]:
    """The chart's rows: the ``k`` largest by the figure their bars show, as the op table
    orders them (ties by name)."""
    def figure(r: OpRow) -> float:  # (max gain as the table: a row the model cannot see
        return (gain_value(result, r) if key == "max_gain"  # below every gain)
                else per_iteration(result, key, r))

    return sorted(result.rows, key=lambda r: (-figure(r), r.key))[: k or result.topk]


def _figures(result: ProfileResult, key: str, row: OpRow) -> str:
    """What a bar stands for, as its label gives it after the op's name: for time keys the
    op's share of the total self time and its time per iteration (the bar's length);
    calls per iteration; total time per call."""
    if key == "max_gain" and result.gain_shown(row) is None:
        return "— (the model cannot see its removal)"
    value = per_iteration(result, key, row)
    if key == "calls":
        return counted(value, "call")
    if key == "avg":
        return f"{format_us(value)} per call"
    sort = sort_key(key)
    if sort.is_self_time:  # the table's "% self" figure, read from the same place
        share = percent(result.share(row, device=sort.device))
    else:  # an inclusive time, over the self time on the key's side (per iteration)
        share = percent_of(value, self_time(result, sort.device) / result.iters)
    return f"{share} · {format_us(value)}"


def _texts(result: ProfileResult, key: str,
           rows: list[OpRow]) -> tuple[str, list[tuple[str, str]]]:
    """The title (what the bars measure: the sort key's ``measure``, as the chart has no x
    axis), and each bar's (name, figures)."""
    name = cut_end(result.name, MAX_NAME)
    sort = sort_key(key)
    if not rows:
        return f"{name}: ops by {sort.measure}", []
    title = f"{name}: top {counted(len(rows), 'op')} by {sort.measure}"
    if sort.is_self_time:
        title += f", {percent(result.share_of(rows, device=sort.device))} of self time"
    return title, [(cut_end(row_label(r), MAX_LABEL), _figures(result, key, r)) for r in rows]


def chart_texts(result: ProfileResult, by: str | None = None,
                k: int | None = None) -> tuple[str, list[str]]:
    """The bar chart's title (what the bars measure) and its bars' labels, top bar first:
    ``name · share · time per iteration`` for time keys, ``name · N calls`` for
    ``calls``, ``name · time per call`` for ``avg``. (A name too wide for the chart
    is shortened further when drawn.)"""
    key = by or result.sort
    title, labels = _texts(result, key, top_rows(result, key, k))
    return title, [f"{name} · {figures}" for name, figures in labels]


def chart_svg(result: ProfileResult, by: str | None = None, k: int | None = None) -> bytes:
    """A horizontal bar chart of the top ``k`` ops (default: ``result.topk``) as SVG.

    matplotlib, on a transparent background with mid-grey ink (light and dark themes).
    No x axis: each bar's label carries its figures and the title says what they
    measure (``chart_texts``). The texts stay text (``svg.fonttype`` "none"): the
    browser draws them, sharp at any zoom, and the chart costs a third of a PNG's time,
    whose glyphs matplotlib renders one by one. The report shows this chart.
    """
    key = by or result.sort
    rows = top_rows(result, key, k)
    title, labels = _texts(result, key, rows)
    # Bar lengths: per-iteration figures (per-call for "avg"), as the labels give them.
    values = [per_iteration(result, key, r) for r in rows]
    with _LOCK:
        return _bars_layout(len(rows)).draw(values, labels, title)


#: The bar colour: matplotlib's muted blue, readable on white and on dark grey alike.
BAR = "#4C72B0"
DPI = 100
WIDTH_INCHES = 8.0
ROW_INCHES = 0.32
BAR_HEIGHT = 0.75  # of a row
#: Height besides the bars: the title above them, a little space below.
PAD_INCHES = 0.5
LABEL_SIZE = 9
TITLE_SIZE = 10
#: Space (px) left of the longest label and the title, and between a label and its bar.
EDGE_PX = 10
GAP_PX = 6
#: The labels take at most this share of the width; longer names are shortened to fit.
MAX_LEFT = 0.6

_LOCK = threading.Lock()


class _TextWidths:
    """Widths of single-line texts in matplotlib's default font, in pixels at ``DPI``:
    the sum of each character's unhinted advance (the chart is drawn unhinted), cached
    per character. Asking matplotlib to lay a text out costs about as much as drawing it.
    """

    def __init__(self, path: str, size: float) -> None:
        from matplotlib import ft2font
        from matplotlib.font_manager import get_font

        self.font = get_font(path)
        self.size = size
        load_flags = getattr(ft2font, "LoadFlags", None)  # matplotlib >= 3.10
        self.flags = (load_flags.NO_HINTING if load_flags is not None
                      else ft2font.LOAD_NO_HINTING)
        self.advance: dict[str, float] = {}
        # Advances are in the font's own horizontal scale (older matplotlib sets the size
        # at ``text.hinting_factor`` times the resolution): scale them to the laid-out
        # width of a reference text.
        self.scale = 1.0
        reference = "aten::native_layer_norm 0123456789 %·µs"
        self.font.set_size(size, DPI)
        self.font.set_text(reference, 0.0, flags=self.flags)
        laid_out = self.font.get_width_height()[0] / 64
        self.scale = laid_out / self(reference)
        self.advance.clear()

    def _measure(self, char: str) -> float:
        font = self.font
        font.set_size(self.size, DPI)
        if font.get_char_index(ord(char)):
            width = font.load_char(ord(char), flags=self.flags).linearHoriAdvance / 65536
            width *= self.scale
        else:  # drawn from a fallback font: assume a wide glyph
            width = self.size * DPI / 72
        self.advance[char] = width
        return float(width)

    def __call__(self, text: str) -> float:
        advance = self.advance
        return sum(advance[c] if c in advance else self._measure(c) for c in text)

    def fit(self, head: str, tail: str, width: float) -> tuple[str, float]:
        """``head + tail``, ``head`` shortened (ending in "…") to fit ``width``; and its
        width."""
        used = self(head + tail)
        if used <= width:
            return head + tail, used
        room = width - self(tail) - self("…")
        while head and self(head) > room:
            head = head[:-1]
        return head + "…" + tail, self(head + "…" + tail)


#: One ``_TextWidths`` per font file and size.
_widths_in = functools.lru_cache(maxsize=None)(_TextWidths)


def _widths(prop: Any) -> _TextWidths:
    """Widths in the font of ``FontProperties`` ``prop``."""
    from matplotlib.font_manager import findfont

    return _widths_in(str(findfont(prop)), prop.get_size_in_points())


class _BarsLayout:
    """One Figure, Axes and artists for charts of ``n`` bars, drawn again for each result.

    Building a Figure and its Axes costs more than drawing them; a report's chart only
    changes the bars' lengths and the texts, so the artists are made once per bar count
    and updated in place, then written as SVG (``_figure_svg``). Neither axis is drawn
    (no ticks, tick labels or grid): each bar's label is a plain text left of the axes,
    and the only line is the left spine the bars start from.
    """

    def __init__(self, n: int) -> None:
        from matplotlib.collections import PolyCollection
        from matplotlib.font_manager import FontProperties
        from matplotlib.transforms import ScaledTranslation, blended_transform_factory

        self.n = n
        self.height = PAD_INCHES + ROW_INCHES * max(n, 1)
        self.fig = new_figure((WIDTH_INCHES, self.height))
        self.canvas = self.fig.canvas
        ax = self.ax = self.fig.add_subplot()
        ys = list(range(n))[::-1]
        # One collection of n rectangles: one draw call, where n bar patches take n.
        self.ys = ys
        self.bars = PolyCollection([], facecolors=BAR, edgecolors="none", snap=True)
        ax.add_collection(self.bars, autolim=False)
        ax.set_ylim(-0.5, max(n, 1) - 0.5)
        ax.xaxis.set_visible(False)
        ax.yaxis.set_visible(False)
        for side in ("top", "right", "bottom") if n else ax.spines:
            ax.spines[side].set_visible(False)
        # Labels right-aligned a few pixels left of the axes, each centred on its bar.
        at_left = blended_transform_factory(ax.transAxes, ax.transData) + ScaledTranslation(
            -GAP_PX / DPI, 0, self.fig.dpi_scale_trans)
        self.label_font = FontProperties(size=LABEL_SIZE)
        self.labels = [ax.text(0, y, " ", transform=at_left, ha="right", va="center",
                               fontproperties=self.label_font, color=INK, parse_math=False)
                       for y in ys]
        self.empty = ax.text(0.5, 0.5, "" if n else "no operators recorded", ha="center",
                             va="center", transform=ax.transAxes, color=INK)
        # A figure text, not ax.set_title: the title's place is then not worked out
        # again from the axes' contents on every draw. Left-aligned with the longest
        # label, it never runs off the right edge.
        self.title = self.fig.text(EDGE_PX / (WIDTH_INCHES * DPI), 1 - 0.3 / self.height,
                                   " ", ha="left", va="baseline", fontsize=TITLE_SIZE,
                                   color=INK, parse_math=False)
        self.fig.subplots_adjust(right=0.97, top=1 - 0.4 / self.height,
                                 bottom=0.1 / self.height)
        _for_any_theme(self.fig)

    def draw(self, values: list[float], labels: list[tuple[str, str]], title: str) -> bytes:
        """Draw bars of ``values`` labelled ``name · figures`` (``labels``) as SVG."""
        half = BAR_HEIGHT / 2
        self.bars.set_verts([[(0, y - half), (v, y - half), (v, y + half), (0, y + half)]
                             for y, v in zip(self.ys, values, strict=True)])
        top = max(values, default=0.0)
        self.ax.set_xlim(0.0, top * 1.01 if top > 0 else 1.0)
        # Fixed margins from the longest label: tight_layout would cost a second draw.
        # A label too long for its room keeps its figures and loses the end of its name.
        px = WIDTH_INCHES * DPI
        fit = _widths(self.label_font).fit
        room = MAX_LEFT * px - EDGE_PX - GAP_PX
        longest = 0.0
        for text, (name, figures) in zip(self.labels, labels, strict=True):
            label, width = fit(name, f" · {figures}", room)
            text.set_text(label)
            longest = max(longest, width)
        self.fig.subplots_adjust(left=(EDGE_PX + longest + GAP_PX) / px)
        self.title.set_text(_widths(self.title.get_fontproperties()).fit(
            title, "", px - 2 * EDGE_PX)[0])
        return _figure_svg(self.fig, self.canvas)


#: The layout of ``n`` bars (a handful of --topk values in one session at most).
_bars_layout = functools.lru_cache(maxsize=8)(_BarsLayout)


def _figure_svg(fig: Any, canvas: Any) -> bytes:
    """``fig`` as SVG with its texts as text; the same bytes for the same chart (no date,
    fixed ids), then ``canvas`` (its Agg canvas) is attached again."""
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    buf = io.BytesIO()
    dpi = fig.dpi  # print_svg leaves the Figure at SVG's 72 dpi
    try:
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "kernelmagic"}):
            FigureCanvasSVG(fig).print_svg(buf, metadata={"Date": None})
    finally:
        fig.set_canvas(canvas)
        fig.set_dpi(dpi)
    return buf.getvalue()


#: Text and axes colour: a mid grey that keeps >= 4.3:1 contrast on white and on
#: JupyterLab Dark's #111 alike (the picture is transparent and shows the page behind it).
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


def new_figure(figsize: tuple[float, float], dpi: int = DPI, **kwargs: Any) -> Any:
    """A matplotlib ``Figure`` on its own Agg canvas (no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=dpi, **kwargs)
    FigureCanvasAgg(fig)
    return fig


def figure_png(fig: Any) -> bytes:
    """A matplotlib Figure as PNG, for every renderer's pictures: its ink made readable on
    light and dark themes, encoded with light compression (encoding dominates otherwise:
    ~9 ms vs ~2 ms)."""
    _for_any_theme(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", pil_kwargs={"compress_level": 1})
    return buf.getvalue()
