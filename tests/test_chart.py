"""The top-k bar chart (matplotlib, SVG): bars to scale, each labelled with its op, share and
value (no x axis), a title naming the measure, transparent, theme-neutral ink, and a
cached Figure that carries nothing from one result over to the next."""

from __future__ import annotations

import dataclasses

import matplotlib
import pytest
from fakes import cpu_result, cuda_result

from kernelmagic.core.rows import OpRow
from kernelmagic.render import chart
from kernelmagic.render.chart import chart_svg, chart_texts

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
    chart_svg(result)
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
    svg = chart_svg(result)
    layout = chart._bars_layout(2)
    drawn = layout.labels[0].get_text()
    assert drawn.startswith("WWW") and drawn.endswith("… · 98% · 500 µs")
    assert layout.labels[1].get_text() == "aten::mm · 2.0% · 10.0 µs"
    # Nothing is cut at the left edge: every label ends right of it, drawn whole.
    texts, _ = _svg_texts_and_bars(svg)
    assert [t for t in texts if t.startswith("WWW")] == [drawn]
    # The margin comes from estimated widths: they match what matplotlib lays out
    # unhinted (the browser draws the SVG's texts at any zoom, unhinted).
    with matplotlib.rc_context({"text.hinting": "no_hinting"}):
        renderer = layout.canvas.get_renderer()
        for text in layout.labels:
            estimate = chart._widths(text.get_fontproperties())(text.get_text())
            assert estimate == pytest.approx(text.get_window_extent(renderer).width, abs=2)


def test_background_is_transparent_and_text_is_mid_grey():
    svg = chart_svg(cpu_result())
    layout = chart._bars_layout(3)
    assert layout.fig.patch.get_alpha() == 0  # the page shows through: light or dark
    assert b"fill: #000000" not in svg  # no black text left to vanish on a dark theme
    assert f"fill: {chart.INK}".encode() in svg


def test_cached_figure_carries_nothing_over():
    small = cpu_result()
    wide = dataclasses.replace(cpu_result(), name="another run with a much longer name")
    first = chart_svg(small)
    chart_svg(wide)
    chart_svg(small, k=5)
    assert chart_svg(small) == first  # the same picture after other charts were drawn


def test_empty_result_still_draws():
    texts, widths = _svg_texts_and_bars(chart_svg(cpu_result(rows=[])))
    assert widths == []
    assert "no operators recorded" in texts


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
    assert chart.chart_svg(result) == first  # no date, fixed ids: no diff noise in notebooks
    texts, _ = _svg_texts_and_bars(first)
    assert any(t.startswith("void gemm<float, 128>(T*, T const&)") for t in texts)
