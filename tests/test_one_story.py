"""One page, one story (#28): the figures of one report agree with each other and with their
titles, and every renderer lists the same rows or says how many more there are."""

from __future__ import annotations

import re

from fakes import cpu_result

from kernelmagic.core.memory_rows import LiveBlockRow
from kernelmagic.core.rows import OpRow, RooflineRow

MIB = 2**20


def forty_ops():
    """40 ops whose self CPU times are 40, 39, ..., 1 ms over 10 iterations: the first 25
    by self time are op00..op24, and 15 are left."""
    rows = [OpRow(f"op{i:02d}", 10, (40 - i) * 1000.0, (40 - i) * 1000.0) for i in range(40)]
    return cpu_result(rows=rows)


def test_summary_line_says_which_statistic_each_per_iteration_figure_is():
    line = cpu_result().summary()
    # The wall time is the median (with its IQR and best), the rows' time is a mean: both
    # say so. 810 µs = (200 + 5000 + 800 + 2000 + 100) µs / 10 iterations.
    assert "1.00 ms per iteration (median; IQR 75.0 µs, best 900 µs)" in line
    assert "810 µs self CPU time per iteration (mean; " in line
    for figure in re.findall(r"[^·]*per iteration[^·]*", line):
        assert "median" in figure or "mean" in figure, figure


def test_text_html_and_widget_list_the_same_rows_or_say_how_many_more():
    from kernelmagic.render.html import html_report
    from kernelmagic.render.text import text_report
    from kernelmagic.render.widget import report_widget

    result = forty_ops()
    first_25 = [f"op{i:02d}" for i in range(25)]
    text = text_report(result, findings=False)
    listed = re.findall(r"^(op\d\d) ", text, re.M)
    assert listed == first_25
    assert "... 15 more ops" in text
    html = html_report(result, findings=False)
    # (the table's default columns; under "more columns" the same rows with them all)
    narrow, wide = html.split("<details", 1)
    assert re.findall(r'title="(op\d\d)"', narrow) == first_25
    assert re.findall(r'title="(op\d\d)"', wide) == first_25
    assert "15 more ops not shown." in html
    box = report_widget(result, None, findings=False)
    assert box.km_table.order == first_25
    assert ">25 of 40 ops<" in box.km_table.status.value


def test_one_more_row_is_one_more_op():
    rows = [OpRow(f"op{i:02d}", 10, (26 - i) * 1000.0, (26 - i) * 1000.0) for i in range(26)]
    from kernelmagic.render.text import text_report

    assert "... 1 more op (" in text_report(cpu_result(rows=rows), findings=False)


def test_roofline_time_column_is_not_titled_self_time():
    # aten::relu's roofline time holds the aten::clamp_min it calls: 30.8 ms against its
    # 371 µs of self time in the op table; the column must not call that "self".
    from kernelmagic.render.roofline import roofline_table
    from kernelmagic.render.text import render_table

    row = RooflineRow("aten::relu", 10, 1e6, 8e6, 0.125, 3.2e8, 2.6e9, "memory",
                      time=30800.0, dtype="float32", roof_share=0.2)
    result = cpu_result(rows=[OpRow("aten::relu", 10, 371.0, 30800.0)], roofline=[row],
                        views=["roofline"])
    table = roofline_table(result)
    titles = [c.title for c in table.columns]
    assert "CPU time (10 it.)" in titles and "% CPU time" in titles
    assert not any("self" in t or "total" in t for t in titles)
    assert "30.8 ms" in render_table(table)


def test_alive_at_the_peak_is_titled_so_and_never_at_a_negative_time():
    from kernelmagic.render.html import html_report
    from kernelmagic.render.text import text_report
    from kernelmagic.render.widget import report_widget

    alive = [LiveBlockRow("CPU", 4 * MIB, "activation", "(8, 64)", "float32", "aten::relu",
                          "", 1200.0, False),
             LiveBlockRow("CPU", 2 * MIB, "gradient", "(64,)", "float32", "aten::mm", "",
                          -799.0, False),
             LiveBlockRow("CPU", MIB, "parameter", "(64,)", "float32", "", "", 0.0, True)]
    result = cpu_result(memory_alive=alive, views=["memory"])
    text = text_report(result, findings=False)
    assert "[memory alive at the peak]" in text
    section = text[text.index("[memory alive at the peak]"):]
    assert "allocated (into the iteration)" in section
    assert "1.20 ms" in section and len(re.findall(r" before  CPU$", section, re.M)) == 2
    assert "-799" not in text
    html = html_report(result, findings=False)
    assert ">memory alive at the peak</h4>" in html and "-799" not in html
    box = report_widget(result, None, findings=False)
    assert "memory alive at the peak" in box.km_selector.options
    assert "-799" not in box.km_views["memory alive at the peak"].body.value
