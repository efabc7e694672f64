"""The ``python`` view (``--python``): time no op covers, per user Python line (issue 31).

Live tests compare the view's shares with the same run's own measurements (load moves
both alike); the fakes check the arithmetic by hand.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time

import numpy as np
import pytest
import torch
from fakes import table_of
from IPython.utils.capture import capture_output
from pyline_helpers import HELPER_LINE, busy_python
from torch_releases import needs_session_frames

import kernelmagic
from kernelmagic.core.events import Frame, Kind, PythonSamples
from kernelmagic.core.units import format_us
from kernelmagic.findings.python import between_detail
from kernelmagic.render.text import text_report
from kernelmagic.results.builder import build_result
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.python_lines import TRACE_HINT, python_lines, samples_from_trace

US = 1000


def _fastest_seconds(fn, runs: int = 5) -> float:
    """The fastest of ``runs`` calls: the machine's own speed (other processes only add to
    it, and a median taken in a busy moment sized the test's work ten times too small)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


# --- by hand ---------------------------------------------------------------------------


def test_other_time_is_shared_out_among_the_lines_sampled_outside_ops():
    # One 100 µs iteration: aten::mm 0-40 µs, aten::add 70-90 µs, so 40 µs no op covers.
    table = table_of((Kind.OP, "aten::mm", 0, 40, 1), (Kind.OP, "aten::add", 70, 90, 1))
    frames = [Frame("/u/train.py", 3, "step", False), Frame("/u/train.py", 7, "log", False)]
    # A sample every 10 µs: 10-30 and 70-80 fall in ops; 40, 50 in line 3, 60 in line 7,
    # 90 in no user frame (kernelmagic's own loop).
    t = np.arange(10, 100, 10, dtype=np.int64) * US
    frame = np.array([0, 0, 0, 0, 0, 1, 0, 0, -1], dtype=np.int32)
    samples = PythonSamples(t_ns=t, frame=frame, frames=frames, interval_s=10e-6)
    view = python_lines(table, [(0, 100 * US)], samples)
    by_line = {r.line: r for r in view.rows}
    assert by_line[3].self_us == pytest.approx(20.0) and by_line[3].share == pytest.approx(0.2)
    assert by_line[7].self_us == pytest.approx(10.0) and by_line[7].function == "log"
    assert by_line[3].location == "/u/train.py:3" and by_line[3].samples == 2
    assert view.unattributed_us == pytest.approx(10.0)
    # Conservation: ops (60 µs) + Python lines + unattributed = the iteration.
    assert 60 + view.python_us + view.unattributed_us == pytest.approx(100.0)


def test_a_trace_with_python_frames_gives_rows_per_function():
    # with_stack frames: step() for the whole 10 ms iteration, load_batch() 1-5 ms inside
    # it, and aten::mm 6-9 ms: 4 ms in load_batch and 3 ms in step outside any op.
    table = table_of((Kind.RANGE, "cell/iter 0", 0, 10_000, 1),
                     (Kind.PYTHON, "/home/u/train.py(10): step", 0, 10_000, 1),
                     (Kind.PYTHON, "/home/u/train.py(30): load_batch", 1_000, 5_000, 1),
                     (Kind.OP, "aten::mm", 6_000, 9_000, 1))
    result = build_result(table, name="cell", views=["python"], iterations=[(0, 10_000 * US)])
    rows = {r.function: r for r in result.python_lines}
    assert rows["load_batch"].self_us == pytest.approx(4000.0)
    assert rows["step"].self_us == pytest.approx(3000.0)
    assert rows["load_batch"].location == "/home/u/train.py:30"
    assert result.python_note == ""


def test_a_trace_without_python_frames_says_how_to_record_them():
    table = table_of((Kind.RANGE, "cell/iter 0", 0, 100, 1), (Kind.OP, "aten::mm", 0, 50, 1))
    result = build_result(table, name="cell", views=["python"], iterations=[(0, 100 * US)])
    assert result.python_lines == [] and result.python_note == TRACE_HINT
    assert "with_stack=True" in result.python_note
    assert not samples_from_trace(table, [(0, 100 * US)]).n
    assert TRACE_HINT in text_report(result)


def test_python_lines_survive_the_json_text_round_trip():
    table = table_of((Kind.RANGE, "cell/iter 0", 0, 10_000, 1),
                     (Kind.PYTHON, "/home/u/train.py(10): step", 0, 10_000, 1),
                     (Kind.OP, "aten::mm", 6_000, 9_000, 1))
    result = build_result(table, name="cell", views=["python"], iterations=[(0, 10_000 * US)])
    assert result.python_lines
    back = ProfileResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert back == result and back.python_lines == result.python_lines
    assert back.python_unattributed == result.python_unattributed
    frame = result.to_pandas("python")
    assert list(frame["location"]) == [r.location for r in result.python_lines]


def test_a_stack_read_that_straddled_a_wait_is_dropped():
    # The clock gives 1000 then 1020 ns around the first read (20 ns: kept, timed at its
    # middle), then 5000 and 5000 + MAX_READ_NS + 1 around the second: the frame could be of
    # any moment in that stretch, so no sample.
    from kernelmagic.live.python_sampler import MAX_READ_NS, Sampler
    readings = iter([1000, 1020, 5000, 5000 + MAX_READ_NS + 1])
    sampler = Sampler(stop=_fastest_seconds.__code__)  # not on the stack: walks to the top
    sampler.take_one(clock=lambda: next(readings))
    sampler.take_one(clock=lambda: next(readings))
    samples = sampler.samples()
    assert list(samples.t_ns) == [1010] and samples.n == 1
    this = test_a_stack_read_that_straddled_a_wait_is_dropped.__name__
    assert samples.frames[samples.frame[0]].function == this


# --- live --------------------------------------------------------------------------------


def test_a_pure_python_helper_is_named_with_its_measured_share():
    # Two matmuls of at least 10 ms together, so that the helper's third of the iteration
    # spans several of the sampler's milliseconds (an iteration of 4 ms, with about 1.5 ms
    # of Python, had windows with no sample outside the ops: 4-9% unattributed).
    # Sized by the fastest of five calls, once: CI saw a busy moment's median pass 10 ms at a
    # small size and the next median give 0.15 ms, an iteration of 1 ms (39% unattributed).
    for size in (192, 384, 512, 768, 1024):
        a = torch.randn(size, size)

        def matmuls() -> None:
            torch.mm(a, a)  # noqa: B023 (called in this pass of the loop only)
            torch.mm(a, a)  # noqa: B023

        matmul_s = _fastest_seconds(matmuls)
        if matmul_s >= 0.010:
            break

    # Size the helper to about half the matmuls' time: about a third of the iteration.
    per_unit = _fastest_seconds(lambda: busy_python(100_000)) / 100_000
    n = int(min(max(matmul_s / 2 / per_unit, 20_000), 5_000_000))
    spent: list[float] = []

    def step() -> None:
        torch.mm(a, a)
        start = time.perf_counter()
        busy_python(n)
        spent.append(time.perf_counter() - start)
        torch.mm(a, a)

    iters = 20
    result = kernelmagic.profile(step, iters=iters, warmup=2, python=True)
    measured = sum(spent[-iters:]) / sum(result.timings)
    top = result.python_lines[0]
    assert top.function == "busy_python" and top.line == HELPER_LINE
    assert top.location.endswith(f"pyline_helpers.py:{HELPER_LINE}")
    assert top.code.startswith("for i in range(n): total += i * i")
    # The helper's time is the iteration's time outside the ops, less what the samples gave
    # to the step's other lines or to no line: on a loaded machine the sampler's thread
    # waits for a core, a sample then stands for a longer stretch, and a stretch of the
    # helper can go to the line after it (CI under a CPU hog: 0.77 against 0.88). That
    # share is measured in the same run, and widens the bound by as much.
    elsewhere = (sum(r.share for r in result.python_lines[1:])
                 + result.python_unattributed / result.breakdown.wall)
    assert abs(top.share - measured) < 0.10 + elsewhere, (top.share, measured, elsewhere)
    # ops + Python lines + unattributed = the iteration, unattributed under 10% of it; on a
    # machine other processes crowd (fewer free cores than torch's threads, or a fifth of
    # the cores taken), under 20%: the sampler's thread waits for a core, and what its
    # samples miss is no line's (CI's lowest-releases run beside another test worker: 10.7%).
    parts = result.breakdown
    python = sum(r.self_us for r in result.python_lines)
    assert parts.compute + python + result.python_unattributed == pytest.approx(parts.wall)
    load = result.cpu_load
    crowded = load is not None and (load.crowded or load.other_share > 0.2)
    assert result.python_unattributed < (0.20 if crowded else 0.10) * parts.wall


def test_a_sleep_in_a_cell_is_named_by_its_cell_line(ip):
    ip.run_cell("import time", store_history=False)
    with capture_output() as cap:
        ip.run_cell("%%profile -n 5 -w 1 --python -o r\n"
                    "x = torch.randn(64, 64) @ torch.randn(64, 64)\n"
                    "time.sleep(0.01)\n", store_history=True)
    assert not cap.stderr, cap.stderr
    result = ip.user_ns["r"]
    top = result.python_lines[0]
    assert re.fullmatch(r"cell\[\d+\]:2", top.location), top.location
    assert top.code == "time.sleep(0.01)" and top.function == "<module>"
    # At least half the sleep's 10 ms, at most the time no op covered (a loaded machine
    # wakes the sleep late: 22 ms seen, so no fixed upper bound)
    parts = result.breakdown
    assert 0.5 * 10_000 < top.self_us <= parts.wall - parts.compute + 1e-6, top
    assert top.share == pytest.approx(top.self_us / result.breakdown.wall)
    assert result.python_unattributed < 0.10 * result.breakdown.wall
    assert "Python lines" in result.summary() and "unattributed" in result.summary()
    from test_magic import report_data
    data = report_data(cap.outputs)  # the text, HTML and widget reports list the view
    assert "[python]" in data["text/plain"] and "time.sleep(0.01)" in data["text/plain"]
    assert "time.sleep(0.01)" in data["text/html"]
    from test_magic import widget_of

    assert "python" in widget_of(data).km_views


def test_a_helper_from_an_earlier_cell_is_named_by_that_cells_line(ip):
    defined = ip.run_cell("def helper(n):\n"
                          "    return sum(map(int.__mul__, range(n), range(n)))\n",
                          store_history=True)
    with capture_output():
        ip.run_cell("%%profile -n 5 -w 1 --python -o r -q\n"
                    "x = torch.randn(64, 64) @ torch.randn(64, 64)\n"
                    "helper(300_000)\n", store_history=True)
    top = ip.user_ns["r"].python_lines[0]
    # Not the file IPython compiled that cell as (``<ipython-input-...>``, or
    # ``/tmp/ipykernel_.../....py`` in a kernel): the cell's number, as In [n] shows it.
    assert top.location == f"cell[{defined.execution_count}]:2", top
    assert top.code == "return sum(map(int.__mul__, range(n), range(n)))"


def test_cell_files_are_named_by_ipythons_map_or_ipython_7s_names():
    from kernelmagic.core.rows import GpuIdleRow, PythonLineRow, SourceRow
    from kernelmagic.results.cell_names import cell_of, name_cells

    cells = {"/tmp/ipykernel_16049/916454563.py": "cell[3]"}
    assert cell_of("/tmp/ipykernel_16049/916454563.py", cells) == "cell[3]"
    assert cell_of("<ipython-input-12-4f4ef54203bc>", cells) == "cell[12]"  # IPython 7
    assert cell_of("/u/train.py", cells) is None
    result = ProfileResult(
        name="r", iters=1, warmup=0, device="cpu", rows=[], timings=[0.001],
        python_lines=[PythonLineRow("/tmp/ipykernel_16049/916454563.py:5", "helper", "s += 1",
                                    600.0, 0.6),
                      PythonLineRow("/u/train.py:7", "log", "print(x)", 100.0, 0.1)],
        gpu_idle=[GpuIdleRow("sync", "aten::item", 50.0, 0.05,
                             location="<ipython-input-4-0a1b2c3d>:2", code="loss.item()")])
    named = name_cells(result, cells)
    assert [r.location for r in named.python_lines] == ["cell[3]:5", "/u/train.py:7"]
    assert named.gpu_idle[0].location == "cell[4]:2"
    assert named.python_lines[0].self_us == 600.0 and named.name == "r"
    renamed = name_cells(named, cells)  # nothing left to rename
    assert renamed.python_lines == named.python_lines and renamed.gpu_idle == named.gpu_idle
    stack = SourceRow(key="/tmp/ipykernel_16049/916454563.py:4 helper",
                      file="/tmp/ipykernel_16049/916454563.py", line=4, function="helper",
                      code="s += 1", in_cell=False, self_cpu_time_total=10.0)
    (row,) = name_cells(dataclasses.replace(result, sources=[stack]), cells).sources
    assert row.key == "cell[3]:4 helper" and row.self_cpu_time_total == 10.0
    # --memory's lines too: they read "3317971694.py:1" in a kernel, where --stack says
    # cell[3] (the profiled cell's own lines are not labelled when its result is built).
    from kernelmagic.core.memory_rows import LiveBlockRow, MemoryGrowthRow

    alive = LiveBlockRow("CPU", 8192.0, "activations", "", "", "aten::addmm",
                         "/tmp/ipykernel_16049/916454563.py:1", 23.1, False)
    growth = MemoryGrowthRow("CPU", "aten::empty", "<ipython-input-4-0a1b2c3d>:2", 64.0, 1,
                             1, 64.0)
    held = name_cells(dataclasses.replace(result, memory_alive=[alive],
                                          memory_growth=[growth]), cells)
    assert [r.source for r in held.memory_alive] == ["cell[3]:1"]
    assert [r.source for r in held.memory_growth] == ["cell[4]:2"]
    assert held.memory_alive[0].nbytes == 8192.0 and not name_cells(result, cells).memory_alive


def test_negligible_python_shows_no_large_row():
    # An iteration of ~50 ms with no Python to speak of: what a loaded machine takes from the
    # thread between ops (CI's fresh-clone run: 3 samples, 3.3% of a 1024² matmul's
    # iteration) stays far under the 50% at which Python between ops leads the findings.
    a = torch.randn(1536, 1536)
    result = kernelmagic.profile(lambda: torch.mm(a, a), iters=5, warmup=1, python=True)
    assert all(r.share <= 0.1 for r in result.python_lines), result.python_lines
    parts = result.breakdown
    python = sum(r.self_us for r in result.python_lines)
    # ops + Python lines + unattributed = the iteration (µs per iteration)
    assert parts.compute + python + result.python_unattributed == pytest.approx(parts.wall)


@needs_session_frames
def test_stack_names_the_cells_top_level_lines(ip):
    ip.run_cell("a = torch.randn(512, 512)\nb = torch.randn(64, 64)", store_history=False)
    with capture_output():
        ip.run_cell("%%profile -n 5 -w 1 --stack -o r\n"
                    "y = torch.mm(a, a)\n"
                    "z = b.add(1)\n", store_history=True)
    sources = [s for s in ip.user_ns["r"].sources if s.in_cell]
    assert sources and all(s.line > 0 for s in sources), sources
    first = max(sources, key=lambda s: s.self_cpu_time_total)
    assert (first.line, first.code) == (1, "y = torch.mm(a, a)")


# --- why the GPU waits -------------------------------------------------------------------


def test_gpu_idle_names_the_python_line_of_a_trace():
    # 10 ms iteration: aten::add launches a kernel (0.5-1 ms), load_batch() runs 1-8 ms
    # with no op, then aten::mm launches one 1.2 ms kernel. The GPU idles; the time outside
    # ops is load_batch's 7 ms (1.9 ms of it in no user frame), and 1-8.3 ms is a launch
    # gap with no op running, in load_batch.
    table = table_of((Kind.RANGE, "ProfilerStep#1", 0, 10_000, 1),
                     (Kind.OP, "aten::add", 300, 400, 1),
                     (Kind.RUNTIME, "cudaLaunchKernel", 320, 380, 1, {"correlation": 2}),
                     (Kind.KERNEL, "add_kernel", 500, 1_000, 7, {"device": 0, "correlation": 2}),
                     (Kind.PYTHON, "/home/u/train.py(30): load_batch", 1_000, 8_000, 1),
                     (Kind.OP, "aten::mm", 8_000, 9_000, 1),
                     (Kind.RUNTIME, "cudaLaunchKernel", 8_100, 8_200, 1, {"correlation": 1}),
                     (Kind.KERNEL, "gemm", 8_300, 9_500, 7, {"device": 0, "correlation": 1}))
    from kernelmagic.core.options import trace_views

    assert "python" in trace_views(table)
    result = build_result(table, name="t", views=trace_views(table),
                          iterations=[(0, 10_000 * US)])
    (row,) = result.python_lines
    assert (row.location, row.function) == ("/home/u/train.py:30", "load_batch")
    assert row.self_us == pytest.approx(7000.0)
    assert result.python_unattributed == pytest.approx(1900.0)
    idle = next(f for f in result.findings() if f.rule == "gpu_idle")
    assert "by cause: Python between ops 7.30 ms (at /home/u/train.py:30 7.30 ms)" \
        in idle.evidence, idle.evidence
    # the lines are already named: the advice points at them, not at how to record them
    assert "the python view lists your lines" in idle.suggestion
    assert "with_stack" not in idle.suggestion


def test_a_trace_without_frames_says_how_to_name_the_lines():
    from pathlib import Path

    path = Path(__file__).parent / "data" / "a100_multi_stream_sync.json.gz"
    result = kernelmagic.load(path)
    assert "python" not in result.views  # no python_function events in it
    idle = next(f for f in result.findings() if f.rule == "gpu_idle")
    assert "by cause: Python between ops 18.8 ms;" in idle.evidence
    assert "torch.profiler.profile(with_stack=True) names your lines" in idle.suggestion


def _gpu_iteration(*middle):
    """A 1 ms step: a kernel 100-200 µs, another GPU work 600-700 µs, and ``middle`` events;
    so the GPU idles 0-100 (start), 200-600 (the stretch under test) and 700-1000 (end)."""
    from kernelmagic.core.events import Kind as K

    return table_of((K.STEP, "ProfilerStep#1", 0, 1000, 1),
                    (K.OP, "aten::mm", 40, 70, 1),
                    (K.RUNTIME, "cudaLaunchKernel", 50, 60, 1, {"correlation": 1}),
                    (K.KERNEL, "gemm", 100, 200, 7, {"device": 0, "correlation": 1}),
                    *middle)


def _idle_of(table):
    from kernelmagic.views.gpu_idle import gpu_idle_rows

    return {(r.cause, r.detail): r for r in gpu_idle_rows(table, [(0, 1000 * US)])}


def test_gpu_idle_names_a_launch_gap_by_the_cpu_op():
    rows = _idle_of(_gpu_iteration(
        (Kind.OP, "aten::index", 210, 590, 1),
        (Kind.OP, "aten::empty", 300, 310, 1),  # inside it, not at the middle (400 µs)
        (Kind.OP, "aten::add", 590, 598, 1),
        (Kind.RUNTIME, "cudaLaunchKernel", 592, 596, 1, {"correlation": 2}),
        (Kind.KERNEL, "add_kernel", 600, 700, 7, {"device": 0, "correlation": 2})))
    gap = rows[("launch gap", "aten::index")]
    assert gap.idle_us == pytest.approx(400.0) and gap.share == pytest.approx(0.4)
    assert rows[("iteration edge", "start")].idle_us == pytest.approx(100.0)
    assert rows[("iteration edge", "end")].idle_us == pytest.approx(300.0)
    assert sum(r.idle_us for r in rows.values()) == pytest.approx(800.0)  # 1 ms - 200 µs busy


def test_gpu_idle_names_a_sync_and_a_host_to_device_copy():
    sync = _idle_of(_gpu_iteration(
        (Kind.OP, "aten::item", 150, 260, 1),
        (Kind.OP, "aten::_local_scalar_dense", 151, 259, 1),
        (Kind.KERNEL, "add_kernel", 600, 700, 7, {"device": 0})))
    assert sync[("sync", "aten::item")].idle_us == pytest.approx(400.0)
    copy = _idle_of(_gpu_iteration(
        (Kind.MEMCPY, "Memcpy HtoD (Pageable -> Device)", 600, 700, 7, {"device": 0})))
    assert copy[("host-to-device copy", "Memcpy HtoD (Pageable -> Device)")].idle_us == \
        pytest.approx(400.0)
    sync_only = _idle_of(_gpu_iteration(
        (Kind.OP, "aten::_local_scalar_dense", 150, 260, 1),
        (Kind.KERNEL, "add_kernel", 600, 700, 7, {"device": 0})))
    assert ("sync", "aten::_local_scalar_dense") in sync_only


def test_gpu_idle_view_of_a_shared_trace():
    from pathlib import Path

    path = Path(__file__).parent / "data" / "a100_multi_stream_sync.json.gz"
    result = kernelmagic.load(path)
    rows = result.gpu_idle
    assert rows and result.breakdown is not None
    # Every idle stretch has one cause: the rows add up to the breakdown's idle time.
    assert sum(r.idle_us for r in rows) == pytest.approx(result.breakdown.idle, rel=1e-6)
    frame = result.to_pandas("gpu_idle")
    assert list(frame.columns)[:3] == ["cause", "detail", "idle_us"]
    back = ProfileResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert back.gpu_idle == rows


def test_the_gpu_idle_finding_names_the_biggest_cause():
    table = _gpu_iteration((Kind.OP, "aten::item", 150, 260, 1),
                           (Kind.OP, "aten::_local_scalar_dense", 151, 259, 1),
                           (Kind.KERNEL, "add_kernel", 600, 700, 7, {"device": 0}))
    result = build_result(table, name="t", iterations=[(0, 1000 * US)])
    idle = next(f for f in result.findings() if f.rule == "gpu_idle")
    assert idle.title.endswith("(CPU-bound: host-device synchronisation)")
    # the sync's 400 µs first, the iteration's edges (100 + 300 µs) last
    assert idle.evidence.endswith("; by cause: host-device synchronisation 400 µs "
                                  "(aten::item 400 µs); the iteration's start or end 400 µs "
                                  "(end 300 µs, start 100 µs)"), idle.evidence
    assert ".item()" in idle.suggestion


def test_the_sampler_restores_the_switch_interval():
    import sys

    before = sys.getswitchinterval()
    kernelmagic.profile(lambda: torch.randn(8, 8).sum(), iters=2, warmup=0, python=True)
    assert sys.getswitchinterval() == before


def test_a_dataloader_in_the_cell_loop_is_data_loading_at_the_line_that_asked(ip):
    ip.run_cell("from torch.utils.data import DataLoader\n"
                "from pyline_helpers import SlowDataset\n"
                "w = torch.randn(32, 32)\n"
                "loader = DataLoader(SlowDataset(torch.randn(8, 32), seconds=0.002),"
                " batch_size=4)", store_history=False)
    with capture_output() as cap:
        ip.run_cell("%%profile -n 3 -w 1 --python -o r\n"
                    "for (xb,) in loader:\n"
                    "    y = xb @ w\n", store_history=True)
    assert not cap.stderr, cap.stderr
    result = ip.user_ns["r"]
    loading = [r for r in result.python_lines if r.cause == "data loading"]
    assert loading, result.python_lines
    top = loading[0]
    # the cell's for line, which calls next() on the loader: not the dataset's __getitem__
    assert re.fullmatch(r"cell\[\d+\]:1", top.location), top.location
    assert top.code == "for (xb,) in loader:" and top.key.endswith("(data loading)")
    # two batches of four rows, each row sleeping 2 ms: about 16 ms of each iteration
    assert top.self_us > 0.5 * 16_000, top
    assert not any(r.function == "__getitem__" for r in result.python_lines)
    assert "data loading" in cap.outputs[0].data["text/plain"]
    # The Python finding's evidence quotes the view's top line, the loader's, first (#46;
    # whether the finding fires depends on how fast the machine runs the matmul).
    first = result.python_lines[0]
    assert first.cause == "data loading", result.python_lines
    assert between_detail(result).startswith(
        f"(most at {first.location} `for (xb,) in loader:` {format_us(first.self_us)} "
        "(data loading)")
