"""The top-k bar chart (Pillow): geometry, labels' room, transparency and tick steps."""

from __future__ import annotations

import io

import pytest
from fakes import cpu_result
from PIL import Image

from kernelmagic.render import bars
from kernelmagic.render.chart import chart_png


def _image(png: bytes) -> Image.Image:
    assert png.startswith(b"\x89PNG")
    return Image.open(io.BytesIO(png)).convert("RGBA")


def _bar_widths(image: Image.Image) -> list[int]:
    """Width in px of the bar colour along each bar's middle row, top to bottom."""
    widths = []
    for i in range((image.height - bars.TOP - bars.BOTTOM) // bars.ROW):
        y = bars.TOP + i * bars.ROW + bars.ROW // 2
        widths.append(sum(image.getpixel((x, y)) == bars.BAR for x in range(image.width)))
    return widths


def test_bars_are_proportional_to_the_plotted_values():
    result = cpu_result()  # topk=3: addmm 5000, gelu 2000, copy_ 800 µs self CPU in all
    image = _image(chart_png(result))
    assert image.size == (bars.WIDTH, bars.TOP + 3 * bars.ROW + bars.BOTTOM)
    widths = _bar_widths(image)
    assert widths[0] > widths[1] > widths[2] > 0
    assert widths[1] / widths[0] == pytest.approx(2000 / 5000, abs=0.01)
    assert widths[2] / widths[0] == pytest.approx(800 / 5000, abs=0.01)


def test_background_is_transparent_and_text_is_mid_grey():
    image = _image(chart_png(cpu_result()))
    assert image.getpixel((0, 0))[3] == 0  # the page shows through: light or dark
    assert image.getpixel((image.width - 1, image.height - 1))[3] == 0
    colours = {image.getpixel((x, y)) for x in range(0, image.width, 2)
               for y in range(0, image.height, 2)}
    assert bars.INK in colours  # axis lines and fully covered glyph pixels


def test_empty_result_still_draws():
    image = _image(chart_png(cpu_result(rows=[])))
    assert image.size == (bars.WIDTH, bars.TOP + bars.ROW + bars.BOTTOM)


@pytest.mark.parametrize(("limit", "expected"), [
    (4.8, [0, 1, 2, 3, 4]),
    (115.0, [0, 20, 40, 60, 80, 100]),
    (0.6, [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]),
    (17.0, [0, 2.5, 5, 7.5, 10, 12.5, 15]),
    (0.0, [0]),
])
def test_nice_ticks(limit, expected):
    assert bars.nice_ticks(limit) == pytest.approx(expected)


@pytest.mark.parametrize(("value", "step", "text"), [
    (40.0, 20.0, "40"), (7.5, 2.5, "7.5"), (0.3, 0.1, "0.3"), (0.75, 0.25, "0.75"),
])
def test_tick_text(value, step, text):
    assert bars.tick_text(value, step) == text
