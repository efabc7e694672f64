"""The report's top-k bar chart, drawn with Pillow (matplotlib's own image library).

matplotlib needs 60-90 ms for ten labelled bars on a small CPU, almost all of it laying
out and rasterising text; Pillow draws the same picture in a few milliseconds, which is
what lets a whole ``%%profile`` cell beat the seed notebook's manual path. The chart
keeps matplotlib's look (DejaVu Sans from matplotlib's fonts, its default blue, a light
grid), on a transparent background with mid-grey text that reads on light and dark
themes alike.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from functools import cache
from typing import Any

#: Mid grey with >= 4.3:1 contrast on white and on JupyterLab Dark's #111.
INK = (122, 122, 122, 255)
BAR = (76, 114, 176, 255)  # matplotlib's seaborn-ish blue, #4C72B0
GRID = (176, 176, 176, 90)

WIDTH = 800  # px: an 8-inch figure at 100 dpi, as the matplotlib chart was
ROW = 32  # px per bar
TOP = 34  # px above the first bar (title)
BOTTOM = 56  # px below the last bar (tick labels and axis label)
RIGHT = 28


@dataclass(frozen=True)
class Bar:
    label: str  # the op name, already shortened
    value: float  # the plotted figure
    note: str  # drawn at the bar's end, e.g. "42%"


@cache
def _font(size: int, bold: bool = False) -> Any:
    """DejaVu Sans from matplotlib's data folder (Pillow's default font if it is missing)."""
    from PIL import ImageFont

    try:
        import matplotlib

        name = "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"
        path = f"{matplotlib.get_data_path()}/fonts/ttf/{name}"
        return ImageFont.truetype(path, size)
    except (ImportError, OSError):
        try:
            return ImageFont.load_default(size)
        except TypeError:  # Pillow < 10.1: one bitmap size
            return ImageFont.load_default()


def nice_ticks(limit: float, most: int = 7) -> list[float]:
    """0 and round steps (1, 2, 2.5 or 5 times a power of ten) up to ``limit``."""
    if limit <= 0:
        return [0.0]
    raw = limit / most
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    count = int(limit / step + 1e-9)
    return [i * step for i in range(count + 1)]


def tick_text(value: float, step: float) -> str:
    """A tick label with only as many decimals as the step needs."""
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 else 0
    if step > 0 and round(step, decimals) != step:
        decimals += 1
    return f"{value:.{decimals}f}"


def _text_width(font: Any, text: str) -> float:
    return float(font.getlength(text))


def bar_chart_png(bars: list[Bar], title: str, axis_label: str) -> bytes:
    """Horizontal bars, largest on top, with names, end notes, a grid and an x axis."""
    from PIL import Image, ImageDraw

    name_font, note_font, tick_font, title_font = _font(12), _font(11), _font(12), _font(13)
    rows = max(len(bars), 1)
    height = TOP + rows * ROW + BOTTOM
    widest = max((_text_width(name_font, b.label) for b in bars), default=60.0)
    left = int(min(WIDTH * 0.55, widest + 18))
    right = WIDTH - RIGHT
    top, bottom = TOP, TOP + rows * ROW
    image = Image.new("RGBA", (WIDTH, height), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)

    top_value = max((b.value for b in bars), default=0.0)
    limit = top_value * 1.15 if top_value > 0 else 1.0
    ticks = nice_ticks(limit)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    scale = (right - left) / limit

    def x_of(value: float) -> float:
        return left + value * scale

    for value in ticks:  # grid, tick marks and labels
        x = round(x_of(value))
        draw.line([(x, top), (x, bottom)], fill=GRID, width=1)
        draw.line([(x, bottom), (x, bottom + 4)], fill=INK, width=1)
        draw.text((x, bottom + 7), tick_text(value, step), font=tick_font, fill=INK, anchor="mt")
    for i, bar in enumerate(bars):
        y0 = top + i * ROW + ROW * 0.1
        y1 = top + (i + 1) * ROW - ROW * 0.1
        mid = (y0 + y1) / 2
        end = x_of(max(bar.value, 0.0))
        if end > left:
            draw.rectangle([(left, round(y0)), (round(end), round(y1))], fill=BAR)
        draw.text((left - 8, mid), bar.label, font=name_font, fill=INK, anchor="rm")
        draw.text((end + 6, mid), bar.note, font=note_font, fill=INK, anchor="lm")
    if not bars:
        draw.text(((left + right) / 2, (top + bottom) / 2), "no operators recorded",
                  font=name_font, fill=INK, anchor="mm")
    draw.line([(left, top), (left, bottom)], fill=INK, width=1)  # spines: left, bottom
    draw.line([(left, bottom), (right, bottom)], fill=INK, width=1)
    draw.text(((left + right) / 2, 16), title, font=title_font, fill=INK, anchor="mm")
    draw.text(((left + right) / 2, bottom + 38), axis_label, font=tick_font, fill=INK,
              anchor="mm")
    buf = io.BytesIO()
    image.save(buf, format="png", compress_level=1)
    return buf.getvalue()
