"""The event model on hand-made tables: tree, links and rows with exact numbers."""

from __future__ import annotations

import numpy as np
from fakes import US, table_of
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelmagic.core.events import NO_PARENT, Kind, _nested_parents, _stack_sweep
from kernelmagic.core.range_names import SYNC_RANGE
from kernelmagic.core.rows import KernelRow, OpRow
from kernelmagic.results.builder import build_result
from kernelmagic.views.ops import kernel_rows, op_rows
from kernelmagic.views.tree import Figures


def rows_of(table, **kw):
    return op_rows(table, Figures(table), **kw)


def test_rows_copy_figures_and_drop_non_ops():
    table = table_of(
        (Kind.RANGE, "cell[1]", 0, 1000, 1),
        (Kind.RANGE, "cell[1]/iter 0", 10, 960, 1),
        (Kind.OP, "aten::mm", 20, 420, 1),
        (Kind.RUNTIME, "cudaLaunchKernel", 30, 40, 1, {"correlation": 7}),
        (Kind.OP, "aten::add", 100, 330, 1),
        (Kind.OP, "aten::mm", 500, 800, 1),
        (Kind.MEMORY, "[memory]", 600, 600, 1, {"nbytes": 64}),
        (Kind.PYTHON, "cell.py(3): f", 850, 900, 1),
        (Kind.KERNEL, "gemm_kernel", 50, 350, 7, {"device": 0, "correlation": 7}),
    )
    assert table.parent.tolist() == [-1, 0, 1, 2, 2, 1, -1, 1, -1]
    assert table.launcher[8] == 2, "the kernel belongs to the op around its launch"
    assert rows_of(table) == [
        OpRow("aten::mm", 2, 400.0 - 10 - 230 + 300, 700.0, 300.0, 300.0),
        OpRow("cudaLaunchKernel", 1, 10.0, 10.0, 0.0, 0.0),
        OpRow("aten::add", 1, 230.0, 230.0, 0.0, 0.0),
    ]


def test_tree_follows_torchs_stack_rule():
    # B starts inside A but ends after it: A is popped, so C (inside A by time) is not
    # A's child either; D on another thread has its own stack.
    table = table_of(
        (Kind.OP, "A", 0, 100, 1),
        (Kind.OP, "B", 50, 150, 1),
        (Kind.OP, "C", 60, 70, 1),
        (Kind.OP, "D", 60, 70, 2),
        (Kind.OP, "E", 150, 150, 1),  # an instant at B's end is not B's child
        (Kind.OP, "async", 10, 20, -1),  # async events stay out of the tree
    )
    assert table.parent.tolist() == [-1, -1, 1, -1, -1, -1]
    rows = {r.key: r for r in rows_of(table)}
    assert rows["A"].self_cpu_time_total == 100.0
    assert rows["B"].self_cpu_time_total == 90.0
    assert (rows["async"].self_cpu_time_total, rows["async"].cpu_time_total) == (0.0, 10.0)


def test_only_child_of_the_same_name_is_dropped_as_torch_does():
    table = table_of(
        (Kind.OP, "aten::foo", 0, 100, 1),
        (Kind.OP, "aten::foo", 10, 90, 1),
        (Kind.OP, "aten::bar", 20, 50, 1),
        (Kind.RUNTIME, "cudaLaunchKernel", 60, 70, 1, {"correlation": 3}),
        (Kind.KERNEL, "k", 200, 240, 7, {"device": 0, "correlation": 3}),
    )
    assert table.n == 4, "the inner aten::foo is gone"
    rows = {r.key: r for r in rows_of(table)}
    assert rows["aten::foo"] == OpRow("aten::foo", 1, 100.0 - 30 - 10, 100.0, 40.0, 40.0)
    assert table.launcher[3] == 0, "its GPU work moved up to the outer one"


def test_memory_is_counted_inclusively_from_every_thread():
    table = table_of(
        (Kind.OP, "aten::outer", 0, 100, 1),
        (Kind.OP, "aten::empty", 10, 20, 1),
        (Kind.MEMORY, "[memory]", 10, 10, 1, {"nbytes": 4096}),
        (Kind.MEMORY, "[memory]", 20, 20, 1, {"nbytes": 1024}),
        (Kind.MEMORY, "[memory]", 50, 50, 2, {"nbytes": -4096}),  # another thread
        (Kind.MEMORY, "[memory]", 60, 60, 1, {"nbytes": 512, "device": 0}),
        (Kind.MEMORY, "[memory]", 200, 200, 1, {"nbytes": 8}),  # outside every op
    )
    rows = {r.key: r for r in rows_of(table, memory=True)}
    assert (rows["aten::empty"].cpu_memory_usage, rows["aten::empty"].self_cpu_memory_usage) \
        == (5120.0, 5120.0)
    outer = rows["aten::outer"]
    assert (outer.cpu_memory_usage, outer.self_cpu_memory_usage) == (1024.0, -4096.0)
    assert (outer.device_memory_usage, outer.self_device_memory_usage) == (512.0, 512.0)


def test_kernels_grouped_with_launching_op():
    table = table_of(
        (Kind.OP, "aten::mm", 0, 10, 1),
        (Kind.RUNTIME, "cudaLaunchKernel", 1, 2, 1, {"correlation": 1}),
        (Kind.OP, "aten::mm", 20, 30, 1),
        (Kind.PYTHON, "torch/x.py(1): f", 21, 29, 1),
        (Kind.RUNTIME, "cudaLaunchKernel", 22, 23, 1, {"correlation": 2}),
        (Kind.OP, "aten::addmm", 40, 50, 1),
        (Kind.RUNTIME, "cudaLaunchKernel", 41, 42, 1, {"correlation": 3}),
        (Kind.RUNTIME, "cudaMemsetAsync", 43, 44, 1, {"correlation": 4}),
        (Kind.KERNEL, "sgemm_128x64", 100, 140, 7, {"device": 0, "correlation": 1}),
        (Kind.KERNEL, "sgemm_128x64", 150, 194, 7, {"device": 0, "correlation": 2}),
        (Kind.KERNEL, "sgemm_128x64", 200, 210, 7, {"device": 0, "correlation": 3}),
        (Kind.MEMSET, "Memset (Device)", 220, 222, 7, {"device": 0, "correlation": 4}),
        (Kind.GPU_RANGE, "my range", 90, 300, 7, {"device": 0}),
    )
    assert table.launcher[9] == 2, "through the Python frame to the op"
    assert kernel_rows(table) == [
        KernelRow("sgemm_128x64", 3, 94.0, "aten::mm", 2),  # (aten::addmm launched one)
        KernelRow("Memset (Device)", 1, 2.0, "aten::addmm", 1),
    ]
    # The kernels table says the share where other rows launched some too.
    from kernelmagic.render.views import launcher_text

    assert [launcher_text(k) for k in kernel_rows(table)] == ["aten::mm (2 of 3)",
                                                              "aten::addmm"]
    assert launcher_text(KernelRow("saved before", 3, 94.0, "aten::mm")) == "aten::mm"
    rows = {r.key: r for r in rows_of(table)}
    assert rows["aten::mm"].self_device_time_total == 84.0
    assert rows["aten::addmm"].device_time_total == 12.0


def test_a_range_gpu_copy_sharing_a_launch_id_is_no_work_of_the_op():
    """Only kernels, copies and memsets take their launcher from the runtime call of the
    same correlation: a range's GPU copy whose id equals that call's (by coincidence)
    stays unattributed, else its whole span would be device time of the op."""
    table = table_of(
        (Kind.RANGE, "module: attn (Attention)", 0, 100, 1),
        (Kind.OP, "aten::copy_", 10, 20, 1),
        (Kind.RUNTIME, "cudaLaunchKernel", 12, 14, 1, {"correlation": 5}),
        (Kind.KERNEL, "copy_kernel", 30, 34, 7, {"device": 0, "correlation": 5}),
        (Kind.GPU_RANGE, "module: attn (Attention)", 30, 230, 7,
         {"device": 0, "correlation": 5}),
    )
    assert table.launcher.tolist() == [NO_PARENT, NO_PARENT, NO_PARENT, 1, NO_PARENT]
    rows = {r.key: r for r in rows_of(table)}
    assert rows["aten::copy_"].device_time_total == 4.0


def test_our_own_synchronize_is_taken_out():
    events = []
    for i in range(3):
        t = 1000 * i
        events += [(Kind.RANGE, SYNC_RANGE, t, t + 101, 1),
                   (Kind.RUNTIME, "cudaDeviceSynchronize", t, t + 100, 1),
                   (Kind.OP, "aten::mm", t + 200, t + 230, 1)]
    events += [(Kind.RANGE, "my range", 5000, 5050, 1),
               (Kind.RUNTIME, "cudaDeviceSynchronize", 5000, 5040, 1)]
    rows = {r.key: r for r in rows_of(table_of(*events))}
    # Three of the four synchronizes were ours: the user's own one stays.
    assert rows["cudaDeviceSynchronize"] == OpRow("cudaDeviceSynchronize", 1, 40.0, 40.0)
    assert rows["aten::mm"].count == 3


def test_build_result_windows_busy_and_timeline():
    table = table_of(
        (Kind.RANGE, "run/iter 1", 1000, 2000, 1),
        (Kind.RANGE, "run/iter 0", 0, 1000, 1),
        (Kind.OP, "aten::mm", 100, 300, 1),
        (Kind.RUNTIME, "cudaLaunchKernel", 110, 120, 1, {"correlation": 1}),
        (Kind.OP, "aten::mm", 1100, 1300, 1),
        (Kind.RUNTIME, "cudaLaunchKernel", 1110, 1120, 1, {"correlation": 2}),
        (Kind.KERNEL, "k", 200, 600, 7, {"device": 0, "correlation": 1}),
        (Kind.KERNEL, "k2", 500, 700, 8, {"device": 0}),
        (Kind.KERNEL, "k", 1200, 1300, 7, {"device": 0, "correlation": 2}),
    )
    result = build_result(table, name="run", views=["timeline"])
    assert result.device == "cuda" and result.sort == "self_device"
    assert result.timings == [0.001, 0.001] and result.iters == 2
    assert result.gpu_busy == [500.0, 100.0], "overlapping streams merged"
    assert [(s.key, s.lane, s.start) for s in result.timeline] == [
        ("aten::mm", "CPU", 100.0), ("k", "stream 7", 200.0)], "the median iteration: 1"
    slow_first = build_result(table, name="run", views=["timeline"], timings=[0.002, 0.001])
    assert [(s.key, s.lane, s.start) for s in slow_first.timeline] == [
        ("aten::mm", "CPU", 100.0), ("k", "stream 7", 200.0), ("k2", "stream 8", 500.0)]
    assert result.kernels[0] == KernelRow("k", 2, 500.0, "aten::mm", 2)
    assert result.kernels[1].launched_by == ""
    assert np.all(table.launcher[:6] == NO_PARENT)


def test_iterations_from_our_ranges_else_profiler_steps_else_whole_trace():
    from kernelmagic.views.iterations import iteration_windows

    steps = table_of(
        (Kind.STEP, "ProfilerStep#7", 500, 900, 1),
        (Kind.STEP, "ProfilerStep#6", 100, 500, 1),
        (Kind.OP, "aten::mm", 120, 130, 1),
    )
    assert iteration_windows(steps, "run") == [(100 * US, 500 * US), (500 * US, 900 * US)]
    assert build_result(steps, name="run").timings == [0.0004, 0.0004]
    plain = table_of((Kind.OP, "aten::mm", 20, 30, 1), (Kind.OP, "aten::add", 50, 70, 1))
    assert iteration_windows(plain, "run") == [(20 * US, 70 * US)]
    ours = table_of((Kind.RANGE, "run/iter 0", 0, 10, 1), (Kind.STEP, "ProfilerStep#1", 0, 9, 1))
    assert iteration_windows(ours, "run") == [(0, 10 * US)]


def _sorted(events: list[tuple[int, int, int]]) -> tuple[np.ndarray, ...]:
    tids, starts, ends = np.array(events, dtype=np.int64).reshape(-1, 3).T
    order = np.lexsort((-ends, starts, tids))  # derive_links' order
    return tids[order], starts[order], ends[order]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 8), st.integers(0, 4)),
                min_size=1, max_size=14))
def test_the_nested_reading_is_the_stack_sweep_or_defers_to_it(events):
    # Few threads and times, so ties, events of no length and partial overlaps are common.
    tids, starts, ends = _sorted([(t, s, s + d) for t, s, d in events])
    swept = _stack_sweep(tids.tolist(), starts.tolist(), ends.tolist())
    found = _nested_parents(tids, starts, ends)
    assert found is None or found.tolist() == swept.tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 6), st.integers(0, 6)),
                min_size=1, max_size=6), st.integers(1, 3))
def test_properly_nested_events_never_need_the_sweep(boxes, depth):
    # Each box [s, s + w] on a thread, with ``depth`` boxes nested inside it (each
    # narrower by one at the end, down to no length): intervals that nest, ties included.
    events = []
    for tid, s, w in boxes:
        span = 8 * s  # boxes of a thread lie apart: [8s, 8s + w] with w < 8
        events += [(tid, span, span + max(w - k, 0)) for k in range(depth + 1)]
    events = list(dict.fromkeys(events))
    tids, starts, ends = _sorted(events)
    found = _nested_parents(tids, starts, ends)
    assert found is not None
    assert found.tolist() == _stack_sweep(tids.tolist(), starts.tolist(), ends.tolist()).tolist()


def test_python_frames_named_two_ways_are_one_source_row():
    # ``u.py(3): f`` and ``u.py(03): f`` are the same frame as parsed: one row, its ops'
    # self time summed (5 + 3 µs), not two rows with one key.
    from kernelmagic.views.source_lines import source_rows
    table = table_of((Kind.PYTHON, "/home/u/u.py(3): f", 0, 10, 1),
                     (Kind.OP, "aten::mm", 2, 7, 1),
                     (Kind.PYTHON, "/home/u/u.py(03): f", 20, 30, 1),
                     (Kind.OP, "aten::add", 22, 25, 1))
    (row,) = source_rows(table, Figures(table))
    assert row.key == "/home/u/u.py:3 f" and row.ops == 2
    assert row.self_cpu_time_total == 8.0
    # and one frame for the python view's samples of a trace (its rows, gpu_idle's lines)
    from kernelmagic.views.python_lines import samples_from_trace
    samples = samples_from_trace(table, [(0, 30 * US)])
    assert [(f.file, f.line, f.function) for f in samples.frames] == [("/home/u/u.py", 3, "f")]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["ProfilerStep#1", "cell/iter 0", "aten::mm",
                                           "cell", "other/iter 2", "x"]),
                          st.sampled_from([Kind.OP, Kind.RANGE, Kind.STEP, Kind.KERNEL])),
                min_size=1, max_size=12))
def test_a_name_mask_among_some_events_tests_only_their_names(events) -> None:
    from kernelmagic.core.events import TableBuilder
    from kernelmagic.views.breakdown import name_mask
    from kernelmagic.views.ops import iteration_markers

    builder = TableBuilder()
    for i, (text, kind) in enumerate(events):
        builder.add(kind, text, i * 10, i * 10 + 5, 1, device=0 if kind == Kind.KERNEL else -1)
    table = builder.freeze()
    among = table.kind == Kind.RANGE
    tested: list[str] = []
    got = name_mask(table, lambda n: tested.append(n) or n.endswith("/iter 0"), among=among)
    assert got.tolist() == [kind == Kind.RANGE and text.endswith("/iter 0")
                            for text, kind in events]
    assert sorted(tested) == sorted({text for text, kind in events if kind == Kind.RANGE})
    assert iteration_markers(table, "cell").tolist() == [
        kind == Kind.STEP or (kind == Kind.RANGE and text == "cell/iter 0")
        for text, kind in events]
