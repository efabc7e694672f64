"""Ranges that own time are rows, marked as ranges wherever a row's name is shown.

A live CPU run: a ``record_function`` range with no op under it (Python work only) owns
its time, and is a row with torch's own figures for that range; a range around ops is not
a row (its ops are). Then the same row in the text report, the static HTML, the widget's
table and the chart's labels.
"""

from __future__ import annotations

import torch

import kernelmagic
from kernelmagic.render.chart import chart_svg
from kernelmagic.render.html import html_report
from kernelmagic.render.widget import report_widget

X = torch.randn(64, 64)


def work() -> None:
    with torch.profiler.record_function("python work"):
        sum(i * i for i in range(20_000))  # Python only: no op under the range
    with torch.profiler.record_function("matmuls"):
        X @ X  # an op: the range only wraps it


def profiled():
    held: list = []
    result = kernelmagic.profile(work, iters=3, warmup=1, name="ranges",
                                 on_trace_ready=held.append)
    return result, held[0]


def test_a_range_with_no_op_under_it_is_a_row_with_torchs_figures():
    result, prof = profiled()
    rows = {(r.key, r.kind): r for r in result.rows}
    assert ("python work", "range") in rows
    assert not any(r.key == "matmuls" for r in result.rows), "it only wraps an op"
    assert ("aten::mm", "op") in rows
    mine = rows[("python work", "range")]
    events = [e for e in prof.function_events if e.name == "python work"]
    assert mine.count == len(events) == 3
    assert mine.self_cpu_time_total == sum(e.self_cpu_time_total for e in events)
    assert mine.cpu_time_total == sum(e.cpu_time_total for e in events)
    # The rows' self CPU time now covers the Python work: its share is counted.
    assert result.share(mine) > 0


def test_the_range_row_is_marked_in_every_renderer():
    result, _ = profiled()
    assert "[range] python work" in result._repr_mimebundle_()["text/plain"]
    assert "[range] python work" in html_report(result)
    widget = report_widget(result, chart=None)
    assert "[range] python work" in widget.km_table.body.value
    svg = chart_svg(result, by="self_cpu", k=len(result.rows)).decode()
    assert "[range] python work" in svg
