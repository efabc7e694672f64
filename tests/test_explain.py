"""``result.explain(name)`` (#47): a row taken apart, on a trace built here whose every
figure is worked out by hand, then on the real traces (each row's own GPU work adds up to
its self device time), saved profiles and the text/HTML/pandas forms."""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from pathlib import Path

import pytest
import torch
from fakes import table_of
from loaded import loaded

import kernelmagic
from kernelmagic.core.events import Kind
from kernelmagic.core.units import format_us
from kernelmagic.render.table import row_label
from kernelmagic.results.builder import build_result
from kernelmagic.results.explain import UnknownRow
from kernelmagic.results.result import ProfileResult

DATA = Path(__file__).parent / "data"
STREAM, COMM = 7, 20
FRAME = "/tmp/user_code.py(3): forward"


def launch(start: float, end: float, corr: int) -> tuple:
    return (Kind.RUNTIME, "cudaLaunchKernel", start, end, 1, {"correlation": corr})


def kernel(name: str, start: float, end: float, corr: int, stream: int = STREAM) -> tuple:
    return (Kind.KERNEL, name, start, end, stream, {"device": 0, "correlation": corr})


def two_iterations(views: tuple[str, ...] = ()) -> ProfileResult:
    """Two ProfilerSteps of 100 µs.

    1: a frame of the user's code (0-45) around aten::linear (0-40) around aten::addmm
       (5-35, shapes A, dtypes float, float) whose launches (10-15, 20-25) start gemm
       (20-50) and reduce (50-55); nccl:all_reduce (50-60) launches (52-54) ncclKernel
       (60-80) on another stream; a Memcpy HtoD (85-90) whose launch is not recorded.
    2: aten::linear (100-130) around aten::addmm (105-125, shapes B) whose launch
       (110-112) starts gemm (115-135).
    """
    return build_result(table_of(
        (Kind.STEP, "ProfilerStep#1", 0, 100, 1),
        (Kind.PYTHON, FRAME, 0, 45, 1),
        (Kind.OP, "aten::linear", 0, 40, 1),
        (Kind.OP, "aten::addmm", 5, 35, 1, {"shapes": "[[2, 3], [3, 4]]",
                                            "dtypes": "float, float"}),
        launch(10, 15, 1), kernel("gemm", 20, 50, 1),
        launch(20, 25, 2), kernel("reduce", 50, 55, 2),
        (Kind.RANGE, "nccl:all_reduce", 50, 60, 1),
        launch(52, 54, 3), kernel("ncclKernel", 60, 80, 3, stream=COMM),
        kernel("Memcpy HtoD", 85, 90, 99),
        (Kind.STEP, "ProfilerStep#2", 100, 200, 1),
        (Kind.OP, "aten::linear", 100, 130, 1),
        (Kind.OP, "aten::addmm", 105, 125, 1, {"shapes": "[[4, 3], [3, 4]]"}),
        launch(110, 112, 4), kernel("gemm", 115, 135, 4),
    ), name="t", views=views)


@pytest.fixture(scope="module")
def result() -> ProfileResult:
    return two_iterations()


def by_kernel(rows) -> dict[str, tuple[int, float, int, float]]:
    return {k.kernel: (k.calls, k.device_time_total, k.own_calls, k.own_device_time_total)
            for k in rows}


def test_an_op_lists_the_work_it_launched_per_iteration(result: ProfileResult) -> None:
    e = result.explain("aten::addmm")
    assert e.iters == 2 and e.kind == "op"
    assert e.calls == 1.0  # 2 calls over 2 iterations
    # self CPU: (30 - 5 - 5) + (20 - 2) = 38 µs over 2 iterations
    assert e.self_cpu_us == pytest.approx(19.0)
    # gemm 30 + 20 µs, reduce 5 µs: all launched by addmm itself
    assert by_kernel(e.kernels) == {"gemm": (2, pytest.approx(50.0), 2, pytest.approx(50.0)),
                                    "reduce": (1, pytest.approx(5.0), 1, pytest.approx(5.0))}
    assert e.self_device_us == pytest.approx(27.5)
    frame = e.to_pandas("kernels")
    assert list(frame["kernel"]) == ["gemm", "reduce"]  # largest first
    assert list(frame["device_us_per_iter"]) == pytest.approx([25.0, 2.5])
    assert list(frame["share"]) == pytest.approx([50 / 55, 5 / 55])


def test_an_op_without_work_of_its_own_lists_the_work_under_it(result: ProfileResult) -> None:
    e = result.explain("aten::linear")
    assert by_kernel(e.kernels) == {"gemm": (2, pytest.approx(50.0), 0, 0.0),
                                    "reduce": (1, pytest.approx(5.0), 0, 0.0)}
    assert e.self_device_us == 0.0 and e.device_us == pytest.approx(27.5)


def test_a_runtime_call_lists_the_work_it_launched(result: ProfileResult) -> None:
    e = result.explain("cudaLaunchKernel")
    assert by_kernel(e.kernels) == {"gemm": (2, pytest.approx(50.0), 0, 0.0),
                                    "reduce": (1, pytest.approx(5.0), 0, 0.0),
                                    "ncclKernel": (1, pytest.approx(20.0), 0, 0.0)}
    assert e.calls == 2.0  # 4 launches over 2 iterations


def test_a_range_and_work_without_a_launch_own_their_work(result: ProfileResult) -> None:
    assert by_kernel(result.explain("[range] nccl:all_reduce").kernels) == {
        "ncclKernel": (1, pytest.approx(20.0), 1, pytest.approx(20.0))}
    e = result.explain("[no launch] Memcpy HtoD")
    assert e.kind == "unlaunched"
    assert by_kernel(e.kernels) == {"Memcpy HtoD": (1, pytest.approx(5.0), 1,
                                                    pytest.approx(5.0))}


def test_a_kernel_lists_the_rows_that_launched_it(result: ProfileResult) -> None:
    e = result.explain("gemm")
    assert e.kind == "kernel"
    assert [(k.row, k.own_calls, k.own_device_time_total) for k in e.launched_by] == [
        ("aten::addmm", 2, pytest.approx(50.0))]
    assert e.device_us == pytest.approx(25.0)
    assert list(e.to_pandas("launched_by")["calls_per_iter"]) == [1.0]


def test_shapes_sites_and_iterations(result: ProfileResult) -> None:
    e = result.explain("aten::addmm")
    # (the first call's dtypes recorded beside its shapes, the second's not)
    assert [(s.group, s.calls, s.self_cpu_time_total, s.cpu_time_total) for s in e.shapes] == [
        ("[[2, 3], [3, 4]] (float, float)", 1, pytest.approx(20.0), pytest.approx(30.0)),
        ("[[4, 3], [3, 4]]", 1, pytest.approx(18.0), pytest.approx(20.0))]
    # only the first iteration's call ran under the user's frame
    assert [(s.group, s.calls, s.self_cpu_time_total) for s in e.sites] == [
        ("/tmp/user_code.py:3 forward", 1, pytest.approx(20.0))]
    assert e.series is not None
    assert e.series.self_cpu_us == pytest.approx([20.0, 18.0])
    assert e.series.self_device_us == pytest.approx([35.0, 20.0])  # by launching iteration
    assert e.slowest_iteration == 0
    assert list(e.to_pandas("iterations")["self_cpu_us"]) == pytest.approx([20.0, 18.0])


def test_what_ifs_are_the_models(result: ProfileResult) -> None:
    e = result.explain("aten::addmm")
    assert [k for k, _ in e.what_ifs] == [2.0, math.inf]
    for k, answer in e.what_ifs:
        assert answer == result.what_if({"aten::addmm": k})


def test_a_panel_with_what_ifs_says_the_saving_once() -> None:
    # The op table caps a row's max gain at its mean time per iteration; "gone" is the
    # model's saving for the median iteration, which can be a little more (a reviewer
    # saw "saves at most 5.41 ms", then "if it were gone: saves 5.43 ms"). A panel that
    # lists the what-ifs says the saving there only; the widget's row panel, whose
    # what-if is a control of its own, keeps the table's figure in its head.
    from kernelmagic.render.explain import explanation_head, explanation_html

    result = two_iterations()
    e = result.explain("aten::addmm")
    gone = e.what_ifs[-1][1]
    for panel in (e.text(), e.html()):
        assert "saves at most" not in panel
        assert f"if it were gone: saves {format_us(gone.saved_us)}" in panel
    head = explanation_head(e)
    assert f"saves at most {format_us(e.max_gain_us)} per iteration" in head
    assert head in explanation_html(e, what_ifs=False)


def test_an_unknown_name_gets_the_nearest_in_one_line(result: ProfileResult) -> None:
    with pytest.raises(UnknownRow) as info:
        result.explain("aten::adm")
    message = str(info.value)
    assert "\n" not in message and "nearest: aten::addmm" in message
    with pytest.raises(LookupError, match="nearest: aten::addmm"):
        result.explain("addmm")  # a fragment: the names that hold it


def test_text_and_html_say_the_same_figures(result: ProfileResult) -> None:
    e = result.explain("aten::addmm")
    text, html = e.text(), e.html()
    for part in ("aten::addmm", "GPU work", "gemm", "25.0 µs", "input shapes",
                 "[[4, 3], [3, 4]]", "call sites", "/tmp/user_code.py:3 forward",
                 "slowest: iteration 0"):
        assert part in text and part in html, part
    assert "<svg" in html  # the iterations picture
    # ... drawn once: the HTML's line points at it, the text draws it in block characters
    assert "self time per iteration: (above)" in html and "█" not in html
    assert "self time per iteration: (above)" not in text and "█" in text
    assert "memory: run with --memory" in text  # what an option would add
    # one markup for the static panel and the widget's row panel (render/explain.py)
    assert html.startswith('<div class="km-explain"') and 'class="km-explain-head"' in html
    assert html.count("<div") == html.count("</div>")


def test_what_a_trace_lacks_is_said_as_the_recording_would_need() -> None:
    e = loaded(DATA / "v100_gpu_annotations.json.gz").explain("aten::addmm")
    assert "record the trace with record_shapes=True" in e.text()
    assert "--memory" not in e.text()


@pytest.mark.parametrize("name", ["v100_gpu_annotations", "a100_nccl_rank", "mi250_rocm",
                                  "a100_alexnet", "mtia_inference", "a100_triton"])
def test_each_rows_own_work_is_its_self_device_time(name: str) -> None:
    result = loaded(DATA / f"{name}.json.gz")
    own: dict[str, float] = defaultdict(float)
    for k in result.view("detail").kernels:
        own[k.row] += k.own_device_time_total
    rows: dict[str, float] = defaultdict(float)
    for row in result.rows:
        rows[row_label(row)] += row.self_device_time_total
    assert set(own) <= set(rows)
    for label, time in rows.items():
        assert own[label] == pytest.approx(time, rel=1e-6, abs=1e-6), label


def test_a_saved_profile_explains_the_same(result: ProfileResult, tmp_path: Path) -> None:
    path = result.save(tmp_path / "p.json")
    again = kernelmagic.load(path)
    assert again.explain("aten::addmm").text() == result.explain("aten::addmm").text()


def test_a_profile_saved_before_the_detail_view_still_explains() -> None:
    old = kernelmagic.load(DATA / "saved_profile_v1.json")
    e = old.explain(old.rows[0].key)
    assert e.kernels == [] and e.series is None
    assert e.calls == old.rows[0].count / old.iters


def test_a_row_split_by_shapes_saves_what_removing_every_shape_saves() -> None:
    result = two_iterations(views=("shapes",))
    assert len([r for r in result.rows if r.key == "aten::addmm"]) == 2
    e = result.explain("aten::addmm")
    gone = result.what_if({"aten::addmm": math.inf}).saved_us
    assert e.max_gain_us == pytest.approx(min(gone, e.cpu_us))  # its time per iteration caps it
    assert e.calls == 1.0 and e.self_cpu_us == pytest.approx(19.0)  # the shapes summed
    quick = result.explain("aten::addmm", what_if=False)
    assert quick.max_gain_us is None and quick.what_ifs == []
    assert "saves at most" not in quick.text().splitlines()[0]


def test_a_cpu_run_shows_no_device_columns() -> None:
    result = two_iterations()
    cpu = dataclasses.replace(result, device="cpu")
    text = cpu.explain("aten::addmm").text()
    assert "self device" not in text


def test_one_iteration_has_no_slowest_to_name() -> None:
    e = loaded(DATA / "mi250_rocm.json.gz").explain("aten::addmm")
    assert e.iters == 1 and "slowest" not in e.text() and "<svg" not in e.html()


def test_a_live_run_with_shapes_records_the_dtypes_beside_them() -> None:
    a, b = torch.randn(64, 64), torch.randn(64, 64, dtype=torch.float64)
    result = kernelmagic.profile(lambda: (a @ a, b @ b), iters=2, warmup=1, shapes=True)
    assert sorted(s.group for s in result.explain("aten::mm").shapes) == [
        "[64, 64], [64, 64] (double, double)", "[64, 64], [64, 64] (float, float)"]
    # the op table's rows stay split by shapes alone, as torch's key_averages() groups them
    assert {r.input_shapes for r in result.rows if r.key == "aten::mm"} == {"[64, 64], [64, 64]"}


def test_work_a_marker_launched_outside_the_run_is_no_rows() -> None:
    # The run's range "t" (0-100) holds ProfilerStep#1, which launches a kernel itself; a
    # ProfilerStep#2 after the run (200-300) launches one too: the op table leaves it out
    # (views/ops.py: _marker_rows), and so does the row's detail.
    result = build_result(table_of(
        (Kind.RANGE, "t", 0, 100, 1),
        (Kind.STEP, "ProfilerStep#1", 0, 100, 1), launch(10, 12, 1), kernel("k", 20, 30, 1),
        (Kind.STEP, "ProfilerStep#2", 200, 300, 1), launch(210, 212, 2),
        kernel("k", 220, 260, 2),
    ), name="t")
    (marker,) = [r for r in result.rows if r.kind == "no op"]
    assert (marker.count, marker.self_device_time_total) == (1, pytest.approx(10.0))
    assert by_kernel(result.explain("[no op] ProfilerStep").kernels) == {
        "k": (1, pytest.approx(10.0), 1, pytest.approx(10.0))}
