"""Pictures that explain themselves (#28): the timeline's legend, labels and hover titles,
the roofline's labels that never overlap, and HTML tables that wrap at word boundaries,
scroll inside their box and keep the module tree's indentation."""

from __future__ import annotations

import re
from html import unescape
from itertools import combinations

from fakes import cpu_result

from kernelmagic.core.rows import ModuleRow, RooflineRow, Span
from kernelmagic.results.result import ProfileResult


def _timeline_result() -> ProfileResult:
    # A 10 ms iteration: a long op whose label fits, a 0.1 ms one whose label cannot, and
    # a kernel on stream 7.
    spans = [Span("autograd::engine::evaluate_function: AddmmBackward0", "CPU", 0.0, 6000.0),
             Span("aten::addmm", "CPU", 6000.0, 9900.0),
             Span("aten::relu", "CPU", 9900.0, 10000.0),
             Span("sgemm_kernel", "stream 7", 100.0, 5000.0)]
    return cpu_result(timeline=spans, views=["timeline"])


def test_timeline_has_a_legend_of_colours_and_lanes():
    from kernelmagic.render.timeline import PALETTE, timeline_svg

    svg = timeline_svg(_timeline_result()).decode()
    # The op with most time first in the legend, in the palette's first colour.
    legend = re.findall(r'<g><title>([^<]*)</title><rect[^>]*fill="(#\w+)"', svg)
    assert legend[0] == ("autograd::engine::evaluate_function: AddmmBackward0", PALETTE[0])
    assert [name for name, _ in legend] == [
        "autograd::engine::evaluate_function: AddmmBackward0", "sgemm_kernel",
        "aten::addmm", "aten::relu"]
    assert "Lanes: CPU = top-level ops; stream N = GPU work on stream N" in svg
    assert ">CPU</text>" in svg and ">stream 7</text>" in svg


def test_timeline_labels_fit_or_are_left_out_and_every_bar_has_its_full_name():
    from kernelmagic.render.timeline import CHAR, timeline_svg

    svg = timeline_svg(_timeline_result(), width=900).decode()
    bars = re.findall(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"[^>]*><title>([^<]*)',
                      svg)
    assert len(bars) == 4
    titles = [unescape(t) for _, _, t in bars]
    assert titles[0].startswith("autograd::engine::evaluate_function: AddmmBackward0 · "
                                "6.00 ms · CPU, from 0 µs")
    labels = re.findall(r'<text x="([\d.]+)"[^>]*fill="white"[^>]*>([^<]*)</text>', svg)
    drawn = {unescape(text) for _, text in labels}
    # 810 px for 10 ms: the 6 ms bar (486 px) holds its 52-character name; the 0.1 ms bar
    # (8 px) holds nothing; no label is ever cut short.
    assert "autograd::engine::evaluate_function: AddmmBackward0" in drawn
    assert "addmm" in drawn and "relu" not in drawn
    assert not any(t.endswith("…") for t in drawn)
    widths = {unescape(t): float(w) for _, w, t in bars}
    for text in drawn:
        bar = next(w for name, w in widths.items() if name.split(" · ")[0].endswith(text))
        assert len(text) * CHAR <= bar - 6


def _crowded() -> ProfileResult:
    """Ten ops in five pairs of nearly coinciding points."""
    names = ["aten::addmm", "aten::mm", "aten::bmm", "aten::gelu", "aten::_softmax",
             "aten::native_layer_norm", "aten::add", "aten::mul", "aten::relu", "aten::copy_"]
    rows = []
    for i, name in enumerate(names):
        x = [140, 140, 19.7, 0.125, 0.125][i // 2] * (1 + 0.02 * (i % 2))
        y = [2.2e11, 2.2e11, 1.86e11, 2.9e9, 2.9e9][i // 2] * (1 + 0.03 * (i % 2))
        rows.append(RooflineRow(name, 10, 1e9, 1e9 / x, x, y, y / x,
                                "compute" if x > 1 else "memory", time=1000.0 * (10 - i),
                                dtype="float32", roof_share=0.5))
    return ProfileResult(name="crowded", iters=10, warmup=3, device="cpu", rows=[],
                         timings=[1e-3] * 10, views=["roofline"], roofline=rows, topk=10,
                         roofline_peaks={"flops_per_s": {"float32": 2.33e11},
                                         "bytes_per_s": 1.16e11, "source": "measured"})


def test_roofline_labels_never_overlap_and_the_key_names_every_point():
    from kernelmagic.render.roofline import roofline_figure

    fig = roofline_figure(_crowded())
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    texts = [t for t in [*ax.texts, *fig.texts] if t.get_text().strip()]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    for (a, box_a), (b, box_b) in combinations(boxes, 2):
        overlap = not (box_a.x1 <= box_b.x0 or box_b.x1 <= box_a.x0
                       or box_a.y1 <= box_b.y0 or box_b.y1 <= box_a.y0)
        assert not overlap, (a, b)
    numbers = {t.get_text() for t in ax.texts}
    assert {str(i) for i in range(1, 11)} <= numbers  # each point has its number
    key = [t.get_text() for t in fig.texts]
    assert " 1  addmm · 18%" in key  # 10,000 of the 55,000 µs of op time
    assert "10  copy_ · 1.8%" in key  # 1,000 of 55,000 µs


def test_html_names_stay_on_one_line_cut_in_the_middle_and_whole_on_hover():
    from kernelmagic.render.html import table_html
    from kernelmagic.render.table import op_table

    result = cpu_result()
    name = "Optimizer.zero_grad#torch.optim.adamw.AdamW.zero_grad"  # 53 characters
    result.rows[0] = result.rows[0].__class__(name, 1, 1.0, 1.0)
    html = table_html(op_table(result), result.rows)
    # 39 characters fit the 300 px column: the first 19, "…", the last 19
    assert f">{name[:19]}…{name[-19:]}</td>" in html
    assert f'title="{name}"' in html
    cell = re.search(r'<td class="km-cell km-col-op"[^>]*>', html)
    assert cell is not None and "white-space:nowrap" in cell.group(0)
    assert "<wbr>" not in html


def test_module_tree_keeps_its_indentation_in_html():
    from kernelmagic.render.html import static_table_html
    from kernelmagic.render.views import module_table

    mods = [ModuleRow("block", "Block", 0, 10, 100.0, 10.0),
            ModuleRow("block.ff", "Sequential", 1, 10, 80.0, 5.0),
            ModuleRow("block.ff.0", "Linear", 2, 10, 70.0, 70.0)]
    result = cpu_result(modules=mods, views=["modules"])
    html = static_table_html(module_table(result))
    cells = re.findall(r'<td class="km-cell km-col-op"[^>]*>', html)
    pads = [int(m.group(1)) if (m := re.search(r"padding-left:calc\(6px \+ (\d+)ch\)", c))
            else 0 for c in cells]
    assert pads == [0, 2, 4]  # two characters per level, as the text report indents


def test_every_html_table_scrolls_inside_its_own_box():
    from kernelmagic.render.html import html_report

    html = html_report(cpu_result(), None)
    tables = html.count('<table class="km-table"')
    assert tables >= 1
    assert html.count('<div class="km-scroll" style="max-width:100%;overflow-x:auto">'
                      '<table class="km-table"') == tables
