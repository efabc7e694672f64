"""The top-k bar chart (matplotlib): bars to scale, transparent, theme-neutral ink, and a
cached Figure that carries nothing from one result over to the next."""

from __future__ import annotations

import dataclasses
import io

import pytest
from fakes import cpu_result
from matplotlib.colors import to_rgba
from PIL import Image

from kernelmagic.render import chart
from kernelmagic.render.chart import chart_png

BAR = tuple(round(c * 255) for c in to_rgba(chart.BAR))
INK = tuple(round(c * 255) for c in to_rgba(chart.INK))


def _image(png: bytes) -> Image.Image:
    assert png.startswith(b"\x89PNG")
    return Image.open(io.BytesIO(png)).convert("RGBA")


def _bar_widths(image: Image.Image) -> list[int]:
    """Width in px of each bar (a band of rows holding the bar colour), top to bottom."""
    pixels = image.load()
    per_row = [sum(pixels[x, y] == BAR for x in range(image.width))
               for y in range(image.height)]
    bands: list[list[int]] = []
    for y, count in enumerate(per_row):
        if count and (not bands or per_row[y - 1] == 0):
            bands.append([])
        if count:
            bands[-1].append(count)
    return [max(band) for band in bands]


def test_bars_are_proportional_to_the_plotted_values():
    result = cpu_result()  # topk=3: addmm 5000, gelu 2000, copy_ 800 µs self CPU in all
    image = _image(chart_png(result))
    assert image.size == (8 * chart.DPI, round((1.0 + 3 * chart.ROW_INCHES) * chart.DPI))
    widths = _bar_widths(image)
    assert len(widths) == 3
    assert widths[0] > widths[1] > widths[2] > 0
    assert widths[1] / widths[0] == pytest.approx(2000 / 5000, abs=0.01)
    assert widths[2] / widths[0] == pytest.approx(800 / 5000, abs=0.02)


def test_background_is_transparent_and_text_is_mid_grey():
    image = _image(chart_png(cpu_result()))
    assert image.getpixel((0, 0))[3] == 0  # the page shows through: light or dark
    assert image.getpixel((image.width - 1, image.height - 1))[3] == 0
    colours = {image.getpixel((x, y)) for x in range(image.width) for y in range(image.height)}
    assert INK in colours  # axis lines and fully covered glyph pixels
    assert (0, 0, 0, 255) not in colours  # no black text left to vanish on a dark theme


def test_cached_figure_carries_nothing_over():
    small = cpu_result()
    wide = dataclasses.replace(cpu_result(), name="another run with a much longer name")
    first = chart_png(small)
    chart_png(wide)
    chart_png(small, k=5)
    assert chart_png(small) == first  # the same picture after other charts were drawn


def test_empty_result_still_draws():
    image = _image(chart_png(cpu_result(rows=[])))
    assert image.size == (8 * chart.DPI, round((1.0 + chart.ROW_INCHES) * chart.DPI))
    assert _bar_widths(image) == []


def test_png_encoder_round_trips_exactly():
    import numpy as np

    rng = np.random.default_rng(0)
    rgba = rng.integers(0, 256, size=(7, 5, 4), dtype=np.uint8)
    image = _image(chart.rgba_png(rgba))
    assert image.size == (5, 7)
    assert (np.asarray(image) == rgba).all()
