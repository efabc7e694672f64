"""--memory: the timeline by category, its peak, what was alive at it, what grows, out of
memory, trace files, and agreement with torch's own MemoryProfileTimeline."""

from __future__ import annotations

import dataclasses
import html
import os
import re

import numpy as np
import pytest
import torch
from fakes import table_of
from hypothesis import given, settings
from hypothesis import strategies as st
from IPython.utils.capture import capture_output
from workloads import training_step

import kernelmagic
from kernelmagic.core.events import Kind
from kernelmagic.core.memory_rows import BEFORE, CATEGORIES, NEVER, MemoryBlock, MemoryLedger
from kernelmagic.core.units import format_bytes
from kernelmagic.findings.measurement import memory_growth
from kernelmagic.live import memory_categories, torch_compat
from kernelmagic.render.memory import highest_peaks, memory_svg, peak_sentence
from kernelmagic.render.text import text_report
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.memory import ledger_from_table, memory_views
from kernelmagic.views.timeline import peak_memory

MIB = 2**20
US = 1000


def _ledger(rows, blocks=()):
    """rows: (time µs or BEFORE, category name, delta bytes, block)."""
    time = [t if t == BEFORE else t * US for t, *_ in rows]
    return MemoryLedger(time=np.asarray(time, dtype=np.int64),
                        device=np.full(len(rows), -1, dtype=np.int16),
                        category=np.asarray([CATEGORIES.index(c) for _, c, _, _ in rows],
                                            dtype=np.int8),
                        delta=np.asarray([d for *_, d, _ in rows], dtype=np.int64),
                        block=np.asarray([b for *_, b in rows], dtype=np.int32),
                        blocks=list(blocks))


def _synthetic():
    """Two iterations [0, 100) and [100, 200) µs; parameters of 8 MiB before profiling;
    each iteration makes a 4 MiB activation (freed), a 2 MiB temporary inside aten::mm
    (freed), and keeps 1 MiB from aten::empty at a line of the user's."""
    mem = [(Kind.MEMORY, "[memory]", t, t, 1, {"nbytes": n}) for t, n in [
        (10, 4 * MIB), (30, 2 * MIB), (35, -2 * MIB), (50, MIB), (60, -4 * MIB),
        (110, 4 * MIB), (130, 2 * MIB), (135, -2 * MIB), (150, MIB), (160, -4 * MIB)]]
    table = table_of(
        (Kind.RANGE, "profile/iter 0", 0, 100, 1), (Kind.OP, "aten::relu", 5, 15, 1),
        (Kind.RANGE, "module: ff.0 (Linear)", 25, 40, 1), (Kind.OP, "aten::mm", 28, 38, 1),
        (Kind.RANGE, "profile/iter 1", 100, 200, 1), (Kind.OP, "aten::relu", 105, 115, 1),
        (Kind.RANGE, "module: ff.0 (Linear)", 125, 140, 1), (Kind.OP, "aten::mm", 128, 138, 1),
        *mem)
    blocks = [MemoryBlock(-1, 8 * MIB, BEFORE, NEVER, "[2048, 1024]", "float32")]
    rows = [(BEFORE, "parameter", 8 * MIB, 0)]
    for it in (0, 100):
        b = len(blocks)
        blocks += [MemoryBlock(-1, 4 * MIB, (it + 10) * US, (it + 60) * US, "[1024, 1024]",
                               "float32", "aten::relu", "train.py:7"),
                   MemoryBlock(-1, 2 * MIB, (it + 30) * US, (it + 35) * US, "", "",
                               "aten::mm", "train.py:8"),
                   MemoryBlock(-1, MIB, (it + 50) * US, NEVER, "[262144]", "float32",
                               "aten::empty", "train.py:9")]
        rows += [(it + 10, "activation", 4 * MIB, b), (it + 30, "temporary", 2 * MIB, b + 1),
                 (it + 35, "temporary", -2 * MIB, b + 1), (it + 50, "unknown", MIB, b + 2),
                 (it + 60, "activation", -4 * MIB, b)]
    return table, _ledger(rows, blocks), [(0, 100 * US), (100 * US, 200 * US)]


def test_peak_alive_and_growth_on_a_synthetic_run():
    table, ledger, windows = _synthetic()
    views = memory_views(table, windows, ledger, show=0)
    first, second = views.peaks
    assert (first.iteration, first.t_us, first.fraction) == (0, 30.0, 0.3)
    assert (first.op, first.scope) == ("aten::mm", "ff.0")
    assert first.rise == 6 * MIB == peak_memory(table, windows[:1])
    assert (first.parameter, first.activation, first.temporary) == (8 * MIB, 4 * MIB, 2 * MIB)
    assert first.total == 14 * MIB
    # The second iteration starts 1 MiB higher (the first one kept it).
    assert (second.total, second.rise, second.unknown) == (15 * MIB, 6 * MIB, MIB)
    # Alive at the highest peak: equal rises, and on the CPU the first of several
    # iterations is not taken (its rise can read high: views.timeline.peak_iterations),
    # so the second's, with the 1 MiB the first kept.
    assert [(r.nbytes, r.category, r.op, r.created_us) for r in views.alive] == [
        (8 * MIB, "parameter", "", 0.0), (4 * MIB, "activation", "aten::relu", 10.0),
        (2 * MIB, "temporary", "aten::mm", 30.0), (MIB, "unknown", "aten::empty", -50.0)]
    assert views.alive[0].before_profiling and views.alive[1].created_us == 10.0
    # The timeline of iteration 0: its start, each change, its end.
    totals = [p.total for p in views.points]
    assert totals == [8 * MIB, 12 * MIB, 14 * MIB, 12 * MIB, 13 * MIB, 9 * MIB, 9 * MIB]
    assert {p.iteration for p in views.points} == {0}
    (grow,) = views.growth
    assert (grow.op, grow.source, grow.per_iter, grow.blocks) == (
        "aten::empty", "train.py:9", MIB, 2)
    everything = memory_views(table, windows, ledger, show=None)
    assert {p.iteration for p in everything.points} == {0, 1}


def test_peak_sentence_names_op_scope_share_and_makeup():
    table, ledger, windows = _synthetic()
    peak = memory_views(table, windows, ledger).peaks[0]
    assert peak_sentence(peak, iterations=2) == (
        "CPU memory peak 14.00 MiB (+6.00 MiB in the iteration) during aten::mm in ff.0, "
        "30% into iteration 0: parameters 8.0, activations 4.0, temporaries 2.0 MiB")


def test_uncategorised_ledger_from_the_table_gives_the_same_peak():
    table, _, windows = _synthetic()
    views = memory_views(table, windows, ledger_from_table(table))
    assert [p.rise for p in views.peaks] == [6 * MIB, 6 * MIB]
    assert views.peaks[1].unknown == views.peaks[1].total == 7 * MIB  # 1 MiB kept + 6
    assert views.alive == [] and views.growth == []


# --- live runs ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def training():
    """The issue's training step (Linear 512->2048->512, AdamW, batch 64), profiled with
    --memory; the torch session is kept to compare with torch's own timeline."""
    step = training_step()
    held = {}
    result = kernelmagic.profile(step, iters=3, warmup=2, memory=True,
                                 on_trace_ready=lambda p: held.setdefault("prof", p))
    return result, held["prof"]


def test_training_step_peak_agrees_with_the_peak_note(training):
    result, _ = training
    (peak,) = highest_peaks(result)
    assert peak.rise == result.peak_memory["cpu"] > 0
    text = text_report(result)
    assert "Peak memory rise within an iteration: CPU" in text
    assert peak_sentence(peak, result.iters) in text
    # Parameters (8 MiB of weights) and AdamW's two moments (16 MiB) are there at the peak.
    assert peak.parameter >= 8 * MIB and peak.optimizer_state >= 16 * MIB
    assert peak.gradient >= 8 * MIB
    assert result.memory_note == ""
    # The chart is the iteration the peak note names (#46), not the median one.
    assert {p.iteration for p in result.memory_timeline} == {peak.iteration}


def test_training_step_categories_match_torch_memory_timeline(training):
    result, prof = training
    origin = prof.kineto_results.trace_start_ns()
    times, sizes = memory_categories.torch_timeline(prof)._coalesce_timeline("cpu")
    ledger = memory_categories.memory_ledger(prof, lambda path: True)
    # torch's columns (_CATEGORY_TO_INDEX, after one unused): PARAMETER, OPTIMIZER_STATE,
    # INPUT, TEMPORARY, ACTIVATION, GRADIENT, AUTOGRAD_DETAIL, None; ours by name.
    order = ["parameter", "optimizer_state", "input", "temporary", "activation", "gradient",
             "autograd_detail", "unknown"]
    steps = np.zeros((ledger.time.size, len(CATEGORIES)), dtype=np.int64)
    steps[np.arange(ledger.time.size), ledger.category] = ledger.delta
    levels = np.cumsum(steps, axis=0)
    # torch buckets each change by int(t_ns / 1000), in floating point: the same here.
    buckets = np.asarray([-1 if t == BEFORE else int((t + origin) / 1000)
                          for t in ledger.time.tolist()])
    assert (np.diff(buckets) >= 0).all()
    for t_us, row in zip(times[1:], sizes[1:], strict=True):
        upto = int(np.searchsorted(buckets, t_us, "right"))
        ours = levels[upto - 1]
        theirs = dict(zip(order, row[1:], strict=True))
        assert {c: int(ours[CATEGORIES.index(c)]) for c in order} == theirs
    assert len(times) > 100
    # The peak: torch's highest total inside the peak's iteration is ours (torch merges the
    # changes of one microsecond, so it can only miss a peak shorter than that).
    (peak,) = highest_peaks(result)
    (span,) = [(e.start_ns(), e.end_ns()) for e in prof.kineto_results.events()
               if e.name() == f"{result.name}/iter {peak.iteration}"]
    inside = [sum(row[1:]) for t, row in zip(times, sizes, strict=True)
              if span[0] / 1000 <= t <= span[1] / 1000]
    assert max(inside) <= peak.total


def test_alive_at_peak_lists_tensors_with_shape_dtype_category(training):
    result, _ = training
    rows = result.memory_alive
    assert rows and rows == sorted(rows, key=lambda r: -r.nbytes)
    weights = [r for r in rows if r.category == "parameter" and r.shape in
               ("[2048, 512]", "[512, 2048]")]
    assert len(weights) >= 2 and all(r.nbytes == 4 * MIB and r.dtype == "float32"
                                     for r in weights)
    assert any(r.category == "gradient" and r.op == "aten::mm" for r in rows)
    assert all(r.source == "" for r in rows)  # lines only with --stack


def test_a_list_that_keeps_a_tensor_each_step_is_a_finding():
    kept = []

    def leaky() -> None:
        torch.ones(8).add(1)
        kept.append(torch.zeros(1000))  # the line the finding names

    line = leaky.__code__.co_firstlineno + 2
    result = kernelmagic.profile(leaky, iters=4, warmup=1, memory=True, stack=True)
    (grow,) = result.memory_growth
    assert grow.per_iter == 4000 and grow.iterations == 4 and grow.blocks == 4
    assert grow.source == f"{os.path.basename(__file__)}:{line}"
    assert grow.op in ("aten::zeros", "aten::empty")
    finding = memory_growth(result)
    assert finding is not None and result.findings()[0] == finding  # a leak comes first
    (peak,) = highest_peaks(result)
    assert peak.scope == ""  # the run's own ranges (profile, profile/iter i) are no scope
    assert "3.91 KiB allocated in each of the 4 profiled iterations" in finding.evidence
    assert f"at {os.path.basename(__file__)}:{line}" in finding.evidence
    again = ProfileResult.from_dict(result.to_dict())
    assert again == result and again.memory_growth == result.memory_growth


def test_steady_memory_is_no_finding(training):
    result, _ = training
    assert memory_growth(result) is None


def test_old_files_have_no_memory_rows():
    from fakes import cpu_result

    data = cpu_result().to_dict()
    assert "memory" not in data["view_records"]  # a file from before --memory
    result = ProfileResult.from_dict(data)
    assert result.memory_peaks == [] and memory_svg(result) is None


def test_memory_all_shows_every_iteration():
    result = kernelmagic.profile(lambda: torch.ones(1000).add(1), iters=3, warmup=1,
                                 memory=True, memory_all=True)
    assert {p.iteration for p in result.memory_timeline} == {0, 1, 2}
    with pytest.raises(ValueError, match="--memory-all needs --memory"):
        kernelmagic.profile(lambda: None, iters=1, memory_all=True)


# --- out of memory --------------------------------------------------------------------


def _runs_out_on(run: int):
    n = 0
    keep = []

    def fn() -> None:
        nonlocal n
        n += 1
        keep.append(torch.zeros(2**18))  # 1 MiB more each run
        if n == run:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    return fn


def test_out_of_memory_under_memory_reports_up_to_the_failure():
    with pytest.raises(torch.OutOfMemoryError) as info:
        kernelmagic.profile(_runs_out_on(run=1 + 3), iters=5, warmup=1, memory=True,
                            name="oom")
    assert not torch_compat.profiler_running()
    result = info.value.result
    assert (result.iters, result.planned_iters) == (3, 5)
    assert "OutOfMemoryError in iteration 2" in result.memory_note
    assert "Tried to allocate 2.00 GiB" in result.memory_note
    assert [p.iteration for p in result.memory_peaks] == [0, 1, 2]
    assert all(p.rise == MIB for p in result.memory_peaks)
    assert "Memory: OutOfMemoryError in iteration 2" in text_report(result)


def test_out_of_memory_without_memory_is_only_the_error():
    with pytest.raises(torch.OutOfMemoryError) as info:
        kernelmagic.profile(_runs_out_on(run=1 + 2), iters=5, warmup=1)
    assert not hasattr(info.value, "result")


def test_magic_shows_the_memory_report_then_raises_out_of_memory(ip):
    ip.user_ns["oom_fn"] = _runs_out_on(run=1 + 2)
    with capture_output() as cap:
        res = ip.run_cell("%%profile -n 4 -w 1 --memory --name oom -o res\noom_fn()")
    assert isinstance(res.error_in_exec, torch.OutOfMemoryError)
    assert len(cap.outputs) == 2  # the static report and its widget
    from test_magic import report_data
    data = report_data(cap.outputs)
    assert "Memory: OutOfMemoryError in iteration 1" in data["text/plain"]
    assert "memory timeline" in data["text/html"]
    assert ip.user_ns["res"].memory_note


@pytest.mark.cuda
def test_real_cuda_out_of_memory_reports_the_timeline():
    _free, total = torch.cuda.mem_get_info()
    torch.cuda.set_per_process_memory_fraction(0.05)
    kept = []

    def grow() -> None:
        kept.append(torch.empty(int(total * 0.02), dtype=torch.uint8, device="cuda"))

    try:
        with pytest.raises(torch.OutOfMemoryError) as info:
            kernelmagic.profile(grow, iters=10, warmup=0, memory=True)
    finally:
        kept.clear()
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.empty_cache()
    result = info.value.result
    assert "OutOfMemoryError" in result.memory_note
    assert any(p.device.startswith("cuda") for p in result.memory_peaks)


# --- quiet, traces, display --------------------------------------------------------------


def test_unknown_block_warning_is_held_back_and_the_rest_kept(capfd):
    with memory_categories.quiet_unknown_blocks():
        os.write(2, b"[W CPUAllocator.cpp:245] Memory block of unknown size was allocated "
                    b"before the profiling started, profiler results will not include the "
                    b"deallocation event\n")
        os.write(2, b"something else\n")
    err = capfd.readouterr().err
    assert "unknown size" not in err and "something else" in err


def test_trace_gives_the_same_timeline_and_peak(tmp_path):
    def known_peak() -> None:
        a = torch.empty(2**18)  # 1 MiB
        b = torch.empty(2**19)  # 2 MiB: 3 MiB at the peak
        del a, b
        torch.empty(2**17)  # 0.5 MiB after

    path = str(tmp_path / "mem.json")
    live = kernelmagic.profile(known_peak, iters=3, warmup=1, memory=True, trace=path,
                               name="mem")
    loaded = kernelmagic.load(path)
    assert "memory" in loaded.views
    assert [p.rise for p in loaded.memory_peaks] == [3 * MIB] * 3
    assert [p.rise for p in live.memory_peaks] == [3 * MIB] * 3
    assert loaded.peak_memory["cpu"] == live.peak_memory["cpu"] == 3 * MIB
    assert all(p.unknown == p.total for p in loaded.memory_timeline)
    import ipywidgets as w

    from kernelmagic.render.widget import report_widget

    box = report_widget(loaded, None)  # no table to follow: the timeline alone
    assert any(isinstance(c, w.Image) and b"peak" in bytes(c.value) for c in box.children)
    assert [p.op for p in loaded.memory_peaks] == ["aten::empty"] * 3
    # The same steps, uncategorised: totals above the iteration's start agree.
    live_steps = [p.total - live.memory_timeline[0].total for p in live.memory_timeline]
    trace_steps = [p.total - loaded.memory_timeline[0].total for p in loaded.memory_timeline]
    assert live_steps == trace_steps


def test_magic_memory_report_shows_timeline_table_and_sentence(ip):
    ip.run_cell("import torch\nlin = torch.nn.Linear(64, 64)\nxx = torch.randn(8, 64)")
    with capture_output() as cap:
        ip.run_cell("%%profile -n 2 -w 1 --memory -o res\nlin(xx).sum().backward()")
    from test_magic import report_data
    data = report_data(cap.outputs)
    assert "CPU memory peak" in data["text/plain"]
    # Titled for what it lists in every renderer (#28): not a bare "[memory]".
    assert "[memory alive at the peak]" in data["text/plain"]
    html = data["text/html"]
    assert 'alt="memory timeline"' in html and "km-view-memory-alive-at-the-peak" in html
    svg = memory_svg(ip.user_ns["res"]).decode()
    assert "peak" in svg and "parameters" in svg


def test_widget_shows_the_timeline_above_the_memory_table(training):
    import ipywidgets as w

    from kernelmagic.render.widget import report_widget

    result, _ = training
    box = report_widget(result, None)
    assert "memory alive at the peak" in box.km_views  # the view's title (#28)
    box.km_selector.value = "memory alive at the peak"  # (made when shown)
    first = box.km_boxes["memory alive at the peak"].children[0]
    assert isinstance(first, w.Image) and first.format == "svg+xml"
    assert b"peak" in bytes(first.value)


def test_a_failing_category_analysis_leaves_the_raw_timeline(monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("a private torch class changed")

    monkeypatch.setattr(memory_categories, "allocation_records", broken)
    result = kernelmagic.profile(lambda: torch.empty(2**19), iters=2, warmup=1, memory=True)
    assert result.memory_note.startswith("categories unavailable: the memory analysis "
                                         "failed (KeyError")
    assert [p.rise for p in result.memory_peaks] == [2 * MIB, 2 * MIB]
    assert all(p.unknown == p.total for p in result.memory_timeline)
    text = text_report(result)
    assert f"Memory: {result.memory_note}" in text
    assert "No allocation could be followed to the peak (a trace, or a run whose category" in text


def test_ctrl_c_under_memory_reports_the_completed_iterations():
    n = 0

    def fn() -> None:
        nonlocal n
        n += 1
        torch.empty(2**19)  # 2 MiB, freed at once
        if n == 1 + 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as info:
        kernelmagic.profile(fn, iters=4, warmup=1, memory=True)
    result = info.value.result
    assert [p.iteration for p in result.memory_peaks] == [0]
    assert result.memory_peaks[0].rise == 2 * MIB == result.peak_memory["cpu"]


def test_magic_memory_all_needs_memory(ip):
    from IPython.core.error import UsageError

    with capture_output():
        res = ip.run_cell("%%profile --memory-all\ntorch.ones(2)")
    assert isinstance(res.error_in_exec, UsageError)
    assert str(res.error_in_exec).startswith("--memory-all needs --memory")
    with capture_output():
        ip.run_cell("%%profile -n 2 -w 0 --memory --memory-all -q -o res\ntorch.ones(2**10)")
    assert {p.iteration for p in ip.user_ns["res"].memory_timeline} == {0, 1}


def test_the_rise_is_the_raw_records_even_when_the_ledger_sizes_differ():
    table, ledger, windows = _synthetic()
    ledger.delta[ledger.delta == 2 * MIB] = 3 * MIB  # torch sized a tensor bigger
    peak = memory_views(table, windows, ledger).peaks[0]
    assert peak.rise == 6 * MIB == peak_memory(table, windows[:1])  # the note's figure
    assert (peak.t_us, peak.temporary, peak.total) == (30.0, 3 * MIB, 15 * MIB)


def test_growth_that_differs_between_iterations_is_not_said_to_be_the_same_each_time():
    table, ledger, windows = _synthetic()
    # The second iteration keeps 3 MiB where the first kept 1 MiB: 2 MiB on average.
    kept = [i for i, b in enumerate(ledger.blocks) if b.op == "aten::empty"][1]
    ledger.blocks[kept] = dataclasses.replace(ledger.blocks[kept], nbytes=3 * MIB)
    (grow,) = memory_views(table, windows, ledger).growth
    assert (grow.per_iter, grow.least, grow.most, grow.total) == (2 * MIB, MIB, 3 * MIB, 4 * MIB)
    from fakes import cpu_result

    finding = memory_growth(cpu_result(iters=2, memory_growth=[grow]))
    assert "allocated in each" not in finding.evidence
    assert finding.evidence.startswith(
        "4.00 MiB allocated over the 2 profiled iterations (2.00 MiB per iteration on "
        "average) is still held at the end: 2.00 MiB per iteration on average (1.00 MiB to "
        "3.00 MiB) from aten::empty at train.py:9 (CPU)")


def test_the_first_iterations_unseen_frees_do_not_make_the_cpu_peak():
    # Each call frees the 4 MiB the previous one made, then makes 4 MiB again: allocated
    # memory never rises above an iteration's start. torch's CPU allocator records no free
    # of a block made before profiling (the warm-up's), so iteration 0 alone reads +4 MiB.
    state = [torch.empty(2**20)]

    def replace() -> None:
        state[0] = None
        state[0] = torch.empty(2**20)

    result = kernelmagic.profile(replace, iters=3, warmup=1, memory=True)
    # 4 MiB, unless the allocator still holds a size for that address from an earlier
    # profiled session (it forgets none freed while not profiling): then that free shows,
    # all of it (0) or, where the earlier block there was smaller, part (CI once read 3 MiB)
    first, *later = [p.rise for p in result.memory_peaks]
    assert 0 <= first <= 4 * MIB and later == [0, 0]
    assert result.peak_memory["cpu"] == 0
    (peak,) = highest_peaks(result)
    assert (peak.iteration, peak.rise) == (1, 0)
    assert peak_sentence(peak, result.iters) == (
        f"CPU memory {format_bytes(peak.total)} at the start of iteration 1, never higher "
        "in it: unknown 4.0 MiB")
    assert "+4.00 MiB" not in text_report(result)


def test_training_step_peak_rise_is_the_steady_iterations(training):
    result, _ = training
    # zero_grad frees the gradients (8 MiB) first; the first iteration cannot see that
    # for the warm-up's gradients, so it alone read +16 MiB.
    (peak,) = highest_peaks(result)
    assert peak.iteration > 0
    assert [p.rise for p in result.memory_peaks[1:]] == [peak.rise] * 2
    assert peak.rise < 9 * MIB  # the 8 MiB of gradients, freed first, made again


def test_out_of_memory_keeps_the_note_that_categories_are_missing(monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("a private torch class changed")

    monkeypatch.setattr(memory_categories, "allocation_records", broken)
    with pytest.raises(torch.OutOfMemoryError) as info:
        kernelmagic.profile(_runs_out_on(run=1 + 2), iters=4, warmup=1, memory=True)
    note = info.value.result.memory_note
    assert note.startswith("OutOfMemoryError in iteration 1: the report runs up to the failure")
    assert "; categories unavailable: the memory analysis failed (KeyError" in note


def test_out_of_memory_counts_the_failed_iterations_device_peak(monkeypatch):
    # A GPU run, its device stood in for by the CPU: the allocator's peak rises 1 MiB more
    # each iteration, and the one that fails rose highest before failing.
    from kernelmagic.core.options import ProfileOptions
    from kernelmagic.live import runner

    real = torch_compat.new_profiler
    monkeypatch.setattr(torch_compat, "new_profiler",
                        lambda device, **kw: real(False, **kw))
    monkeypatch.setattr(torch_compat, "warm_profiler", lambda device: None)
    monkeypatch.setattr(torch_compat, "reset_device_peak", lambda: 0.0)
    rises = iter([1 * MIB, 2 * MIB, 3 * MIB, 4 * MIB])
    monkeypatch.setattr(torch_compat, "device_peak", lambda baseline: next(rises))
    plan = runner.Plan(ProfileOptions(iters=5, warmup=1, memory=True), profiles_device=True,
                       sort="self_device")
    with pytest.raises(torch.OutOfMemoryError) as info:
        runner.execute(_runs_out_on(run=1 + 3), plan)
    result = info.value.result
    assert result.iters == 3
    assert result.peak_memory["device"] == 3 * MIB  # iteration 2, the one that failed


def test_a_peak_outside_any_op_names_the_innermost_scope():
    mem = [(Kind.MEMORY, "[memory]", t, t, 1, {"nbytes": n}) for t, n in [
        (30, 4 * MIB), (45, -4 * MIB)]]
    table = table_of(
        (Kind.RANGE, "profile/iter 0", 0, 100, 1),
        (Kind.RANGE, "my phase", 10, 60, 1),
        (Kind.RANGE, "module: ff (Sequential)", 20, 50, 1),
        (Kind.RANGE, "module: ff.0 (Linear)", 25, 40, 1), *mem)
    (peak,) = memory_views(table, [(0, 100 * US)], ledger_from_table(table)).peaks
    assert (peak.t_us, peak.op, peak.scope) == (30.0, "", "ff.0")


def test_a_trace_that_frees_memory_from_before_it_never_reads_below_zero():
    # A CUDA trace records the free of a block allocated before it started (-2 MiB), so its
    # raw running sum starts below zero: at least 2 MiB existed before, counted "unknown".
    mem = [(Kind.MEMORY, "[memory]", t, t, 1, {"nbytes": n, "device": 0}) for t, n in [
        (10, -2 * MIB), (20, MIB), (30, -MIB)]]
    table = table_of((Kind.RANGE, "profile/iter 0", 0, 100, 1), *mem)
    views = memory_views(table, [(0, 100 * US)], ledger_from_table(table))
    assert [p.total for p in views.points] == [2 * MIB, 0, MIB, 0, 0]
    (peak,) = views.peaks  # the iteration never rose above the 2 MiB it started with
    assert (peak.device, peak.total, peak.rise, peak.unknown) == ("cuda:0", 2 * MIB, 0, 2 * MIB)


def test_alive_table_sorts_blocks_from_before_profiling_first_by_when():
    from fakes import cpu_result

    from kernelmagic.core.memory_rows import LiveBlockRow
    from kernelmagic.render.memory import alive_table

    rows = [LiveBlockRow("CPU", MIB, "activation", "", "", "aten::relu", "", 10.0, False),
            LiveBlockRow("CPU", MIB, "gradient", "", "", "aten::mm", "", -50.0, False),
            LiveBlockRow("CPU", MIB, "parameter", "", "", "", "", 0.0, True)]
    table = alive_table(cpu_result(memory_alive=rows))
    oldest_first = table.sorted_rows("created", descending=False)
    assert [r.category for r in oldest_first] == ["parameter", "gradient", "activation"]


def test_alive_rows_take_the_category_of_the_version_alive_at_the_peak():
    # A 4 MiB block made as an activation becomes a gradient at 20 µs (a new version:
    # a pair of changes summing to zero); the peak at 30 µs sees the gradient.
    mem = [(Kind.MEMORY, "[memory]", t, t, 1, {"nbytes": n}) for t, n in [
        (10, 4 * MIB), (30, 2 * MIB), (35, -2 * MIB)]]
    table = table_of((Kind.RANGE, "profile/iter 0", 0, 100, 1), *mem)
    blocks = [MemoryBlock(-1, 4 * MIB, 10 * US, NEVER, op="aten::mm"),
              MemoryBlock(-1, 2 * MIB, 30 * US, 35 * US, op="aten::add")]
    ledger = _ledger([(10, "activation", 4 * MIB, 0), (20, "activation", -4 * MIB, 0),
                      (20, "gradient", 4 * MIB, 0), (30, "temporary", 2 * MIB, 1),
                      (35, "temporary", -2 * MIB, 1)], blocks)
    views = memory_views(table, [(0, 100 * US)], ledger)
    assert [(r.op, r.category, r.nbytes) for r in views.alive] == [
        ("aten::mm", "gradient", 4 * MIB), ("aten::add", "temporary", 2 * MIB)]
    (peak,) = views.peaks
    assert (peak.gradient, peak.activation, peak.temporary) == (4 * MIB, 0, 2 * MIB)


def test_quiet_unknown_blocks_gives_fd2_back_when_it_cannot_copy_stderr(monkeypatch):
    # Python's stderr writing to fd 2 (a terminal); the copy of fd 2 for it fails (too many
    # open files): the error surfaces and fd 2 is the process's stderr again, not the file.
    import sys

    before = os.fstat(2)
    terminal = open(2, "w", closefd=False)
    monkeypatch.setattr(sys, "stderr", terminal)
    real_dup = os.dup
    calls = []

    def dup(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(24, "Too many open files")
        return real_dup(fd)

    monkeypatch.setattr(os, "dup", dup)
    with pytest.raises(OSError, match="Too many open files"):
        with memory_categories.quiet_unknown_blocks():
            pass
    after = os.fstat(2)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    assert sys.stderr is terminal


def test_quiet_unknown_blocks_leaves_a_stderr_the_cell_set_itself(monkeypatch, tmp_path):
    import sys

    monkeypatch.setattr(sys, "stderr", open(2, "w", closefd=False))
    with open(tmp_path / "log.txt", "w") as log:
        with memory_categories.quiet_unknown_blocks():
            assert sys.stderr.fileno() != 2  # the stand-in writes to the real stderr
            sys.stderr = log  # the cell sends its own messages elsewhere
        assert sys.stderr is log and not log.closed


def test_a_first_iteration_that_reads_high_is_not_the_cpu_peak():
    # Iteration 0 frees a 4 MiB block from before profiling (no record on the CPU), then
    # makes 4 MiB: it reads +4 MiB. Iterations 1 and 2 free the previous one's and make
    # another: +0. The peak note, the sentence and the alive table skip iteration 0.
    mem = [(Kind.MEMORY, "[memory]", t, t, 1, {"nbytes": n}) for t, n in [
        (50, 4 * MIB), (110, -4 * MIB), (150, 4 * MIB), (210, -4 * MIB), (250, 4 * MIB)]]
    table = table_of(*[(Kind.RANGE, f"profile/iter {i}", 100 * i, 100 * i + 100, 1)
                       for i in range(3)], *mem)
    windows = [(0, 100 * US), (100 * US, 200 * US), (200 * US, 300 * US)]
    blocks = [MemoryBlock(-1, 4 * MIB, t * US, (t + 60) * US if t < 250 else NEVER,
                          op="aten::empty") for t in (50, 150, 250)]
    ledger = _ledger([(50, "activation", 4 * MIB, 0), (110, "activation", -4 * MIB, 0),
                      (150, "activation", 4 * MIB, 1), (210, "activation", -4 * MIB, 1),
                      (250, "activation", 4 * MIB, 2)], blocks)
    views = memory_views(table, windows, ledger)
    assert [p.rise for p in views.peaks] == [4 * MIB, 0, 0]
    assert peak_memory(table, windows) == 0
    assert peak_memory(table, windows[:1]) == 4 * MIB  # one iteration: nothing to prefer
    from fakes import cpu_result

    (peak,) = highest_peaks(cpu_result(iters=3, memory_peaks=views.peaks))
    assert (peak.iteration, peak.rise) == (1, 0)
    # Alive at iteration 1's start: the block iteration 0 made (50 µs before it began).
    assert [(r.nbytes, r.created_us) for r in views.alive] == [(4 * MIB, -50.0)]


def test_tensors_no_op_took_as_input_are_followed_too():
    # torch ties a tensor only an op's input names to a tensor; one made by torch.empty and
    # kept (or a last op's output kept in a list) is an anonymous block in its timeline.
    kept = []

    def leaky() -> None:
        kept.append(torch.empty(1000))  # the line the finding names

    line = leaky.__code__.co_firstlineno + 1
    result = kernelmagic.profile(leaky, iters=4, warmup=1, memory=True, stack=True)
    (grow,) = result.memory_growth
    assert (grow.op, grow.per_iter, grow.blocks) == ("aten::empty", 4000, 4)
    assert grow.source == f"{os.path.basename(__file__)}:{line}"
    assert memory_growth(result) is not None
    # Alive at the peak: the three kept before that iteration and its own, "unknown".
    (peak,) = highest_peaks(result)
    assert sorted((r.nbytes, r.category, r.op) for r in result.memory_alive) == [
        (4000, "unknown", "aten::empty")] * (peak.iteration + 1)


def test_an_ops_output_kept_in_a_list_is_growth():
    x = torch.randn(1000)
    kept = []
    result = kernelmagic.profile(lambda: kept.append(x * 2), iters=3, warmup=1, memory=True)
    assert [(g.op, g.per_iter, g.blocks) for g in result.memory_growth] == [
        ("aten::mul", 4000, 3)]


def test_peak_makeup_of_a_small_cell_is_in_kib_not_left_out():
    from kernelmagic.core.memory_rows import MemoryPeakRow

    row = MemoryPeakRow("CPU", 0, 5.0, 0.5, 10.0, "aten::mm", "", total=11 * 1024 + 12,
                        rise=3 * 1024, parameter=8 * 1024, activation=3 * 1024, temporary=12)
    assert peak_sentence(row).endswith(
        "50% into the iteration: parameters 8.0, activations 3.0 KiB")


def test_the_memory_chart_and_the_peak_note_name_one_iteration():
    """Three CPU iterations rising 2, 5 and 3 MiB; iteration 2 is the median by time, the
    peak (the largest trusted rise) is iteration 1's: the chart shows iteration 1, its
    title and the peak note name it, and the timeline rows are its (#46)."""
    from kernelmagic.results.builder import build_result

    events = []
    for i, mib in enumerate((2, 5, 3)):
        base = 100 * i
        events += [(Kind.RANGE, f"run/iter {i}", base, base + 100, 1),
                   (Kind.OP, "aten::empty", base + 10, base + 12, 1),
                   (Kind.MEMORY, "[memory]", base + 11, base + 11, 1, {"nbytes": mib * MIB}),
                   (Kind.OP, "aten::free", base + 60, base + 62, 1),
                   (Kind.MEMORY, "[memory]", base + 61, base + 61, 1, {"nbytes": -mib * MIB})]
    table = table_of(*events)
    windows = [(0, 100 * US), (100 * US, 200 * US), (200 * US, 300 * US)]
    result = build_result(table, name="run", views=["memory"], iterations=windows,
                          timings=[0.001, 0.003, 0.002], device="cpu")
    (peak,) = highest_peaks(result)
    assert (peak.iteration, peak.rise) == (1, 5 * MIB) == (1, result.peak_memory["cpu"])
    assert {p.iteration for p in result.memory_timeline} == {1}
    assert "into iteration 1" in peak_sentence(peak, result.iters)
    svg = memory_svg(result).decode()
    assert "CPU · iteration 1 (the peak's) · allocated memory by category" in svg
    assert "iteration 2" not in svg and "iteration 0" not in svg
    # The timeline draws the same iteration, the peak's (1), not the median one by time
    # (2), and says so; its spans are iteration 1's (aten::empty at 10 µs and aten::free at
    # 60 µs from its start); the critical path, the median iteration's, is not drawn over it.
    from kernelmagic.render.timeline import timeline_svg, timeline_title

    timed = build_result(table, name="run", views=["memory", "timeline"], iterations=windows,
                         timings=[0.001, 0.003, 0.002], device="cpu")
    title = ("run: iteration 1 (the CPU memory peak's; the critical path is the median one's, "
             "iteration 2)")
    assert timeline_title(timed) == title
    drawn = timeline_svg(timed).decode()
    assert f">{html.escape(title)}</text>" in drawn and ">critical path</text>" not in drawn
    assert timed.view("timeline").iteration == 1
    assert [(s.key, s.start, s.end) for s in timed.timeline] == [
        ("aten::empty", 10.0, 12.0), ("aten::free", 60.0, 62.0)]
    # Where the peak's iteration is the median one (timings 1, 2, 3 ms: iteration 1), the
    # title says both are the one drawn.
    same = build_result(table, name="run", views=["memory", "timeline"], iterations=windows,
                        timings=[0.001, 0.002, 0.003], device="cpu")
    assert timeline_title(same) == (
        "run: iteration 1 (the median one, and the CPU memory peak's)")
    assert same.view("timeline").iteration == -1 and ">critical path</text>" in timeline_svg(
        same).decode()
    # Without --memory, only the median.
    plain = build_result(table, name="run", views=["timeline"], iterations=windows,
                         timings=[0.001, 0.003, 0.002], device="cpu")
    assert timeline_title(plain) == "run: iteration 2 (the median one)"
    # --memory-all: every iteration, only the peak's titled as such.
    every = build_result(table, name="run", views=["memory"], iterations=windows,
                         timings=[0.001, 0.003, 0.002], device="cpu", memory_all=True)
    titles = re.findall(r"CPU · iteration \d[^<]*", memory_svg(every).decode())
    assert titles == ["CPU · iteration 0 · allocated memory by category",
                      "CPU · iteration 1 (the peak's) · allocated memory by category",
                      "CPU · iteration 2 · allocated memory by category"]


def _lab(rgb: tuple[float, float, float]) -> tuple[float, float, float]:
    """sRGB (0-255) to CIE L*a*b* (D65)."""
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
           for c in (x / 255 for x in rgb)]
    r, g, b = lin
    xyz = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047,
           0.2126 * r + 0.7152 * g + 0.0722 * b,
           (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)
    fx, fy, fz = (t ** (1 / 3) if t > 216 / 24389 else (24389 / 27 * t + 16) / 116
                  for t in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def _on(colour: str, page: str, opacity: float) -> tuple[float, float, float]:
    """``colour`` painted at ``opacity`` over ``page`` (hex), as sRGB 0-255."""
    fg = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    bg = [int(page[i:i + 2], 16) for i in (1, 3, 5)]
    return tuple(opacity * f + (1 - opacity) * b for f, b in zip(fg, bg, strict=True))


#: CIE76 ΔE between two category colours, and between each and the page: 2.3 is a
#: just-noticeable difference; 30 is "another colour" at a glance.
MIN_DELTA_E = 30.0


@pytest.mark.parametrize("page", ["#ffffff", "#111111"])  # JupyterLab Light, Dark
def test_memory_categories_are_clearly_different_colours_on_light_and_dark(page):
    import itertools
    import math

    from kernelmagic.core.memory_rows import MEMORY_CATEGORIES
    from kernelmagic.results.builder import build_result

    table, ledger, windows = _synthetic()
    result = build_result(table, name="run", views=["memory"], iterations=windows,
                          memory_ledger=ledger, device="cpu")
    opacity = float(re.search(r'<polygon [^>]*fill-opacity="([\d.]+)"',
                              memory_svg(result).decode()).group(1))
    assert opacity == 0.8
    labs = {c.name: _lab(_on(c.colour, page, opacity)) for c in MEMORY_CATEGORIES}
    close = [(round(math.dist(labs[a], labs[b]), 1), a, b)
             for a, b in itertools.combinations(labs, 2)
             if math.dist(labs[a], labs[b]) < MIN_DELTA_E]
    assert close == []
    page_lab = _lab(_on(page, page, 1.0))
    assert [n for n, lab in labs.items() if math.dist(lab, page_lab) < MIN_DELTA_E] == []
    # The gradients and autograd detail were two blues 8.8 apart (#46).
    assert math.dist(labs["gradient"], labs["autograd_detail"]) >= MIN_DELTA_E


@pytest.mark.parametrize("seed", range(6))
def test_the_events_around_a_peak_are_those_that_hold_its_moment(seed):
    # What names a peak's op and scope: the ops and ranges of the thread trees that started
    # by ``t`` and end at or after it, in start order; read by blocks (``_Around``), it must
    # be exactly what a pass over the whole table gives.
    from kernelmagic.views.memory import _Around
    from kernelmagic.views.tree import in_start_order
    rng = np.random.default_rng(seed)
    kinds = [Kind.OP, Kind.RANGE, Kind.RUNTIME, Kind.PYTHON]
    events = []
    for _ in range(int(rng.integers(1, 900))):  # up to several blocks of 256
        start = int(rng.integers(0, 2000))
        length = int(rng.choice([0, 1, 5, 50, 400, 1500]))
        events.append((kinds[int(rng.integers(4))], f"e{int(rng.integers(6))}", start,
                       start + length, int(rng.integers(1, 4))))
    table = table_of(*events)
    around = _Around(table)
    for t in rng.integers(-10, 3600, 40).tolist():
        for tid in (None, 1, 2):
            held = (table.start <= t) & (table.end >= t) & (table.tid >= 0) & (
                (table.kind == Kind.OP) | (table.kind == Kind.RANGE))
            if tid is not None:
                held &= table.tid == tid
            assert around.at(t, tid).tolist() == in_start_order(table, held).tolist()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-5, 40), min_size=1, max_size=12), st.integers(0, 2**31))
def test_the_ledgers_levels_are_the_sums_of_its_first_changes(ks, seed):
    # _Levels keeps its running sums for the iterations asked in order, and starts again
    # for a k below the last: each answer is the plain sum of the first k changes.
    from kernelmagic.views.memory import _Levels

    rng = np.random.default_rng(seed)
    category = rng.integers(0, len(CATEGORIES), 30)
    delta = rng.integers(-2**20, 2**20, 30).astype(np.float64)
    levels = _Levels(category, delta)
    for k in ks:
        upto = min(max(k, 0), 30)
        expected = np.bincount(category[:upto], weights=delta[:upto],
                               minlength=len(CATEGORIES)).astype(np.int64)
        assert levels.before(k).tolist() == expected.tolist()
