"""The top-k bar chart (matplotlib): bars to scale, each labelled with its op, share and
value (no x axis), a title naming the measure, transparent, theme-neutral ink, and a
cached Figure that carries nothing from one result over to the next."""

from __future__ import annotations

import dataclasses
import io

import pytest
from fakes import cpu_result, cuda_result
from matplotlib.colors import to_rgba
from PIL import Image

from kernelmagic.core.rows import OpRow
from kernelmagic.render import chart
from kernelmagic.render.chart import chart_png, chart_texts

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
    assert image.size == (8 * chart.DPI,
                          round((chart.PAD_INCHES + 3 * chart.ROW_INCHES) * chart.DPI))
    widths = _bar_widths(image)
    assert len(widths) == 3
    assert widths[0] > widths[1] > widths[2] > 0
    assert widths[1] / widths[0] == pytest.approx(2000 / 5000, abs=0.01)
    assert widths[2] / widths[0] == pytest.approx(800 / 5000, abs=0.02)


# cpu_result: 10 iterations, 8100 µs of self CPU time in all; topk=3.


def test_time_labels_carry_share_and_time_per_iteration():
    title, labels = chart_texts(cpu_result())
    # addmm 5000 µs self of 8100 (62%), gelu 2000 (25%), copy_ 800 (9.9%), over 10 iterations
    assert labels == ["aten::addmm · 62% · 500 µs", "aten::gelu · 25% · 200 µs",
                      "aten::copy_ · 9.9% · 80.0 µs"]
    assert title == "cell[7]: top 3 ops by self CPU time per iteration, 96% of self time"


def test_total_time_labels_share_of_self_time_and_title_says_they_overlap():
    title, labels = chart_texts(cpu_result(), by="cpu")
    # linear 6200 µs total (77% of the 8100 µs of self time), addmm 5800 (72%), gelu 2000
    assert labels == ["aten::linear · 77% · 620 µs", "aten::addmm · 72% · 580 µs",
                      "aten::gelu · 25% · 200 µs"]
    assert title == ("cell[7]: top 3 ops by total CPU time per iteration "
                     "(nested ops overlap)")


def test_calls_and_per_call_labels():
    title, labels = chart_texts(cpu_result(), by="calls")
    assert labels == ["aten::view · 20 calls", "aten::copy_ · 4 calls",
                      "aten::addmm · 2 calls"]  # addmm and linear tie: by name
    assert title == "cell[7]: top 3 ops by calls per iteration"
    title, labels = chart_texts(cpu_result(), by="avg", k=2)
    assert labels == ["aten::linear · 310 µs per call", "aten::addmm · 290 µs per call"]
    assert title == "cell[7]: top 2 ops by time per call"
    _, labels = chart_texts(cpu_result(rows=[OpRow("aten::mm", 10, 50.0, 50.0)]), by="calls")
    assert labels == ["aten::mm · 1 call"]


def test_device_labels_use_device_time():
    title, labels = chart_texts(cuda_result())
    # mm 9000 µs self device time of 10000, add 1000; 10 iterations
    assert labels[:2] == ["aten::mm · 90% · 900 µs", "aten::add · 10% · 100 µs"]
    assert title == "gpu: top 3 ops by self device time per iteration, 100% of self time"


def test_title_never_rounds_a_partial_cover_up_to_all():
    rows = [OpRow("aten::mm", 10, 9960.0, 9960.0), OpRow("aten::add", 10, 40.0, 40.0)]
    title, _ = chart_texts(cpu_result(rows=rows, topk=1))
    assert title.endswith(", 99.6% of self time")


def test_chart_draws_its_texts_and_no_x_axis():
    result = cpu_result()
    chart_png(result)
    layout = chart._bars_layout(3)
    title, labels = chart_texts(result)
    assert [t.get_text() for t in layout.labels] == labels  # top bar first
    assert layout.title.get_text() == title
    assert not layout.ax.xaxis.get_visible() and not layout.ax.yaxis.get_visible()
    assert not layout.ax.spines["bottom"].get_visible()


def test_long_names_are_shortened_to_fit_keeping_their_figures():
    wide = "W" * 40  # the widest glyphs, at the name length limit
    rows = [OpRow(wide, 10, 5000.0, 5000.0), OpRow("aten::mm", 10, 100.0, 100.0)]
    result = cpu_result(rows=rows, topk=2)
    image = _image(chart_png(result))
    layout = chart._bars_layout(2)
    drawn = layout.labels[0].get_text()
    assert drawn.startswith("WWW") and drawn.endswith("… · 98% · 500 µs")
    assert layout.labels[1].get_text() == "aten::mm · 2.0% · 10.0 µs"
    # Nothing is cut at the left edge: the first columns are empty.
    pixels = image.load()
    assert all(pixels[x, y][3] == 0 for x in range(4) for y in range(image.height))
    # The margin comes from estimated widths: they match what matplotlib lays out.
    renderer = layout.canvas.get_renderer()
    for text in layout.labels:
        estimate = chart._widths(text.get_fontproperties())(text.get_text())
        assert estimate == pytest.approx(text.get_window_extent(renderer).width, abs=2)


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
    assert image.size == (8 * chart.DPI, round((chart.PAD_INCHES + chart.ROW_INCHES) * chart.DPI))
    assert _bar_widths(image) == []


def test_png_encoder_round_trips_exactly():
    import numpy as np

    rng = np.random.default_rng(0)
    rgba = rng.integers(0, 256, size=(7, 5, 4), dtype=np.uint8)
    image = _image(chart.rgba_png(rgba))
    assert image.size == (5, 7)
    assert (np.asarray(image) == rgba).all()


# --- the SVG the report shows (chart_svg): the same chart, its texts left as text ---

SVG = "{http://www.w3.org/2000/svg}"


def _svg_texts_and_bars(svg: bytes) -> tuple[list[str], list[float]]:
    """(every <text>'s content, each bar's width in SVG units, top to bottom)."""
    import re
    from xml.etree import ElementTree

    root = ElementTree.fromstring(svg)
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    bars: list[tuple[float, float]] = []  # (top y, width)
    for path in root.iter(f"{SVG}path"):
        if chart.BAR.lower() in (path.get("style") or "").lower():
            numbers = [float(v) for v in re.findall(r"-?[0-9.]+", path.get("d") or "")]
            xs, ys = numbers[0::2], numbers[1::2]
            bars.append((min(ys), max(xs) - min(xs)))
    return texts, [width for _, width in sorted(bars)]


def test_report_chart_is_svg_with_its_texts_as_text_and_bars_to_scale():
    result = cpu_result()  # addmm 5000, gelu 2000, copy_ 800 µs self CPU in all
    svg = chart.chart_svg(result)
    texts, widths = _svg_texts_and_bars(svg)
    title, labels = chart_texts(result)
    assert sorted(texts) == sorted([title, *labels])  # text, not glyph outlines
    assert len(widths) == 3
    assert widths[1] / widths[0] == pytest.approx(2000 / 5000, rel=1e-3)
    assert widths[2] / widths[0] == pytest.approx(800 / 5000, rel=1e-3)
    assert svg.count(f"fill: {chart.INK}".encode()) >= len(texts)  # theme-neutral ink
    assert b"sans-serif" in svg  # a font any browser has, where DejaVu Sans is missing


def test_svg_chart_escapes_names_and_is_the_same_bytes_each_time():
    rows = [OpRow("void gemm<float, 128>(T*, T const&)", 10, 900.0, 900.0)]
    result = cpu_result(rows=rows, topk=1)
    first = chart.chart_svg(result)
    png = _image(chart.chart_png(result))  # the PNG path shares the Figure
    assert png.size == (8 * chart.DPI, round((chart.PAD_INCHES + chart.ROW_INCHES) * chart.DPI))
    assert chart.chart_svg(result) == first  # no date, fixed ids: no diff noise in notebooks
    texts, _ = _svg_texts_and_bars(first)
    assert any(t.startswith("void gemm<float, 128>(T*, T const&)") for t in texts)
