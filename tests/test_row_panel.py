"""The widget's row panel (#47): a radio button before each shown row of the op table and
the kernels tab opens ``result.explain`` of that row under the table, with a what-if control
whose numbers are ``result.what_if``'s. Widgets with dummy comms (no front end); the real
browser's test is in ``tests/test_browser.py``."""

from __future__ import annotations

import math
import re
from html import escape, unescape
from pathlib import Path

import pytest
from IPython.utils.capture import capture_output
from loaded import loaded

from kernelmagic.render.explain import explanation_head, what_if_text
from kernelmagic.render.table import row_label
from kernelmagic.render.widget import ROW_HEIGHT, SLIDER_FACTORS, SortableTable, report_widget

DATA = Path(__file__).parent / "data"


def report(name: str):
    result = loaded(DATA / name)
    return result, report_widget(result, None)


def pick(table: SortableTable, position: int) -> None:
    """Click the radio button of the shown row at ``position`` (as the front end sets it)."""
    table.picker.value = position


def open_row(table: SortableTable, label: str) -> None:
    """Click the radio button of the row labelled ``label`` (shown all rows first)."""
    if table.all_button is not None:
        table.all_button.click()
    labels = [row_label(r) for r in table._order]
    pick(table, labels.index(label))


def text_of(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def head_of(table: SortableTable) -> str:
    return text_of(re.search(r'<b class="km-explain-head">(.*?)</b>',
                             table.panel.detail.value).group(1))


# --- every row kind -----------------------------------------------------------------------


def test_an_op_row_shows_its_kernels_and_shapes():
    result, box = report("mi250_rocm.json.gz")
    table = box.km_table
    assert table.panel.widget is None  # nothing built before a click
    open_row(table, "aten::addmm")
    e = result.explain("aten::addmm")
    assert table.panel.name == "aten::addmm" and table.panel.widget.layout.display is None
    assert head_of(table) == explanation_head(e)
    shown = text_of(table.panel.detail.value)
    assert e.kernels and e.shapes  # a ROCm trace with shapes recorded
    for k in e.kernels[:3]:  # cut in the middle in their cells, whole in their titles
        assert f'title="{escape(k.kernel)}"' in table.panel.detail.value
    for s in e.shapes[:3]:  # shapes and dtypes: cut in the middle, whole in their titles
        assert f'title="{escape(s.group)}"' in table.panel.detail.value
    assert "Scalar, Scalar)" in shown  # the dtypes beside the shapes (the end of the text)
    assert "GPU work" in shown and "input shapes" in shown
    assert "call sites: record the trace with with_stack=True" in shown  # what is missing
    assert "<svg" not in table.panel.detail.value  # one iteration: no picture


def test_the_iterations_picture():
    _result, box = report("v100_gpu_annotations.json.gz")
    table = box.km_table
    pick(table, 0)
    e = table.panel.explanation
    assert e is not None and e.series is not None and len(e.series.self_cpu_us) >= 2
    assert table.panel.detail.value.count("<rect") == len(e.series.self_cpu_us)


def test_a_range_row():
    result, box = report("a100_nccl_rank.json.gz")
    table = box.km_table
    open_row(table, "[range] nccl:all_reduce")
    e = result.explain("[range] nccl:all_reduce")
    assert e.kind == "range" and head_of(table) == explanation_head(e)
    assert "(a range)" in head_of(table)
    assert table.panel.controls.layout.display is None  # the model holds it: a slider


def test_a_row_the_model_cannot_see_says_so():
    # cpu_only's gloo all-reduces: the median iteration holds them, but no recorded wait
    # ties their threads to the iteration's, so the model cannot see their removal (the
    # table's "—"); the panel said "the median iteration does not hold this row".
    _, box = report("cpu_only.json.gz")
    table = box.km_table
    open_row(table, "[range] gloo:all_reduce")
    assert table.panel.controls.layout.display == "none"  # no slider
    note = text_of(table.panel.note.value)
    assert "cannot see this row's removal" in note and "does not hold" not in note
    # Its status line says what the table's "—" means, as the text table does under it.
    assert text_of(table.status.value) == (
        "1 of 1 op · — in max gain/iter: the model cannot see the row's removal (no recorded "
        "wait ties its threads to the iteration's)")
    _, box = report("rank0_steps.json.gz")
    assert "km-dash" not in box.km_table.status.value  # (no "—" shown: no note)


def test_a_no_launch_row():
    result, box = report("mtia_inference.json.gz")
    table = box.km_table
    open_row(table, "[no launch] event_wait")
    assert "launch not recorded" in head_of(table)
    assert head_of(table) == explanation_head(result.explain("[no launch] event_wait"))


def test_a_no_op_row(tmp_path):
    from test_traces import marked_trace
    from trace_json import write_trace

    import kernelmagic

    doc, _ = marked_trace("ProfilerStep#{i}", None)
    result = kernelmagic.load(write_trace(tmp_path / "t.json.gz", doc))
    table = report_widget(result, None).km_table
    open_row(table, "[no op] ProfilerStep")
    assert "an iteration marker launched" in head_of(table)
    shown = text_of(table.panel.detail.value)
    assert "triton_poi_fused_0" in shown and "triton_poi_fused_1" in shown
    factor = 3.0
    table.panel.slider.value = factor
    expected = what_if_text(factor, result.what_if({"ProfilerStep": factor}))
    assert text_of(table.panel.answer.value) == expected


def test_a_runtime_call_row():
    result, box = report("a100_nccl_rank.json.gz")
    table = box.km_table
    open_row(table, "cudaEventSynchronize")
    assert head_of(table).startswith("cudaEventSynchronize: ")
    assert head_of(table) == explanation_head(result.explain("cudaEventSynchronize"))


def test_a_kernel_row_shows_the_ops_that_launched_it_and_no_slider():
    _result, box = report("v100_gpu_annotations.json.gz")
    kernels = box.km_views["kernels"]
    assert kernels.panel is not None and kernels.panel is not box.km_table.panel
    pick(kernels, 0)
    top = kernels._order[0]
    assert kernels.panel.name == top.key
    shown = text_of(kernels.panel.detail.value)
    assert "launched by" in shown and top.launched_by in shown
    assert kernels.panel.controls.layout.display == "none"
    assert "not a row of the dependency model" in text_of(kernels.panel.note.value)
    # The kernels tab's panel is its own: the op table's stays closed.
    assert box.km_table.panel.name is None


def test_a_result_without_a_dependency_model_says_so():
    from kernelmagic import load

    result = load(DATA / "saved_profile_v1.json")
    table = report_widget(result, None).km_table
    pick(table, 0)
    assert table.panel.controls.layout.display == "none"
    assert "no dependency model" in text_of(table.panel.note.value)


def test_a_live_cpu_run(ip):
    ip.run_cell("a = torch.randn(64, 64)\nb = torch.randn(64, 64)")
    with capture_output() as cap:
        ip.run_cell("%%profile -n 3 -w 1 --shapes -o r\nfor _ in range(5): c = a.add(b)\n"
                    "d = a @ b")
    from test_magic import report_data, widget_of

    box = widget_of(report_data(cap.outputs))
    result = ip.user_ns["r"]
    table = box.km_table
    assert "kernels" not in box.km_views  # a CPU run: no kernels tab
    open_row(table, "aten::add")
    panel = table.panel
    assert panel.side.layout.display == "none"  # no device: no side to choose
    assert "[64, 64], [64, 64], []" in text_of(panel.detail.value)
    assert head_of(table).startswith("aten::add: 5 calls, ")  # per iteration
    assert head_of(table) == explanation_head(result.explain("aten::add"))
    panel.slider.value = math.inf
    assert text_of(panel.answer.value) == what_if_text(math.inf,
                                                       result.what_if({"aten::add": math.inf}))


# --- the what-if ---------------------------------------------------------------------------


@pytest.mark.parametrize("side", ["cpu", "device", "both"])
def test_the_slider_says_what_result_what_if_says(side):
    result, box = report("v100_gpu_annotations.json.gz")
    table = box.km_table
    label = row_label(table._order[0])
    pick(table, 0)
    panel = table.panel
    key = result.explain(label).key
    assert panel.side.layout.display is None  # a device run: the side is a choice
    panel.side.value = side
    for _, factor in SLIDER_FACTORS:
        panel.slider.value = factor
        answer = result.what_if({key: factor}, side)
        assert text_of(panel.answer.value) == what_if_text(factor, answer)
        if factor == 1.0:
            assert answer.saved_us == pytest.approx(0.0, abs=1e-6)
    assert text_of(panel.answer.value).startswith("gone: saves ")
    assert math.isinf(panel.slider.value)


def test_the_first_answer_is_twice_as_fast():
    result, box = report("a100_nccl_rank.json.gz")
    table = box.km_table
    pick(table, 1)
    key = result.explain(row_label(table._order[1])).key
    assert text_of(table.panel.answer_text) == what_if_text(2.0, result.what_if({key: 2.0}))


# --- the panel and the table ---------------------------------------------------------------


def test_another_row_replaces_sorting_keeps_and_close_closes():
    _result, box = report("mi250_rocm.json.gz")
    table = box.km_table
    first, second = (row_label(r) for r in table._order[:2])
    assert table.panel.widget is None  # made, and joins the table, on the first click
    pick(table, 0)
    assert table.widget.children[-1] is table.panel.widget
    built = table.panel.widget.children
    assert table.panel.name == first
    pick(table, 1)
    assert table.panel.name == second and head_of(table).startswith(second + ":")
    assert table.panel.widget.children == built  # the same widgets, new values
    assert table.picker.value == 1
    # Sorting keeps the panel; the checked item follows its row.
    table.headers["op"].click()
    assert table.panel.name == second and table.panel.widget.layout.display is None
    labels = [row_label(r) for r in table._order[: table.visible]]
    assert table.picker.value == (labels.index(second) if second in labels else None)
    table.all_button.click()
    labels = [row_label(r) for r in table._order]
    assert table.picker.value == labels.index(second)
    # Close: hidden, no row marked.
    close = table.panel.widget.children[0].children[0]
    assert close.description == "close"
    close.click()
    assert table.panel.name is None and table.panel.widget.layout.display == "none"
    assert table.picker.value is None
    pick(table, 0)  # the same row again, after a close: opens again
    assert table.panel.name == labels[0] and table.panel.widget.layout.display is None


def test_one_radio_item_per_shown_row_in_rows_of_its_height():
    from fakes import cpu_result

    from kernelmagic.core.rows import OpRow
    from kernelmagic.render.widget import RowPanel

    rows = [OpRow(f"op{i:04d}", 1, float(i), float(i)) for i in range(60)]
    result = cpu_result(rows=rows)
    table = SortableTable(report_widget(result, None).km_table.full, page=25,
                          panel=RowPanel(result))
    labels = table.picker._options_labels
    assert len(labels) == 25 and len(set(labels)) == 25  # the front end finds items by label
    assert not "".join(labels).strip("\u200b\u200c\u200d\u2060")  # and shows none
    assert table.body.value.count(f'style="height:{ROW_HEIGHT};') == 25
    table.more_button.click()
    assert len(table.picker.options) == 50 == table.body.value.count('class="km-row"')
    pick(table, 49)
    assert table.panel.name == "op0010"  # the 50th of 60, largest first
    table.all_button.click()
    assert len(table.picker.options) == 60 and table.picker.value == 49


def test_a_table_without_a_panel_is_as_before():
    from fakes import cpu_result

    from kernelmagic.render.html import table_html
    from kernelmagic.render.table import op_table

    table = SortableTable(op_table(cpu_result()))
    assert table.picker is None and "height:var" not in table.body.value
    shown = table._order[: table.visible]
    assert table.body.value == table_html(table.table, shown, header=False, scroll=False)


def test_the_static_reports_have_no_fixed_rows():
    from kernelmagic.render.bundle import mime_bundle

    result = loaded(DATA / "mi250_rocm.json.gz")
    html = mime_bundle(result, include={"text/html"})["text/html"]
    assert "height:var" not in html and "km-picker" not in html


def test_a_name_explain_does_not_know_says_so_in_the_panel():
    from kernelmagic.render.widget import RowPanel

    result = loaded(DATA / "mi250_rocm.json.gz")
    panel = RowPanel(result)
    panel.show("aten::addmn")
    assert panel.widget.layout.display is None and panel.name == "aten::addmn"
    assert "nearest: aten::addmm" in text_of(panel.detail.value)
    assert panel.controls.layout.display == "none"


def test_memory_and_roofline_lines_where_those_views_ran():
    from fakes import showcase_result

    result = showcase_result()  # --memory and --roofline among its views
    table = report_widget(result, None).km_table
    open_row(table, "aten::addmm")
    shown = text_of(table.panel.detail.value)
    e = result.explain("aten::addmm")
    assert e.roofline is not None and e.memory
    assert f"roofline: {e.roofline.bound}-bound" in shown
    assert "memory per iteration: self CPU memory" in shown
    assert "input shapes: run with --shapes" in shown  # the flag that adds what is missing


def test_the_panels_kernels_are_told_apart_where_their_names_differ_in_the_middle():
    # aten::add_ on a100_nccl_rank runs two vectorized_elementwise_kernel<4, ...> whose
    # names differ only in their functor (CUDAFunctor_add<float>, CUDAFunctorOnSelf_add
    # <long>): cut in the middle, both read "void at::native::vectori…Array<char*, 3>)".
    from kernelmagic.render.explain import explanation_tables
    from kernelmagic.render.text import render_table

    e = loaded(DATA / "a100_nccl_rank.json.gz").explain("aten::add_")
    (table,) = [t for title, t in explanation_tables(e) if title == "GPU work"]
    lines = render_table(table, None).splitlines()[2:]
    shown = [line.split("  ")[0] for line in lines if line.strip()]
    assert len(shown) == len(set(shown)) == len(e.tables()["kernels"][0]) >= 2
    assert any("CUDAFunctor_add<float>" in s for s in shown)
    assert any("CUDAFunctorOnSelf_add" in s for s in shown)
