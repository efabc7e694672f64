"""One iteration rule (``views/iterations.py``) for live runs, trace files and many ranks."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import US, table_of

from kernelmagic.core.events import Kind
from kernelmagic.views.iterations import Iterations, find_iterations, iteration_windows

DATA = Path(__file__).parent / "data"


def test_our_ranges_in_time_order_named_after_their_run():
    table = table_of(
        (Kind.RANGE, "run", 0, 3000, 1),
        (Kind.RANGE, "run/warmup", 0, 900, 1),
        (Kind.RANGE, "run/iter 1", 2000, 3000, 1),
        (Kind.RANGE, "run/iter 0", 1000, 2000, 1),
        (Kind.STEP, "ProfilerStep#1", 0, 3000, 1),
        (Kind.OP, "aten::mm", 1100, 1300, 1),
    )
    windows = [(1000 * US, 2000 * US), (2000 * US, 3000 * US)]
    assert find_iterations(table, "run") == Iterations("run", windows, "kernelmagic ranges")
    assert find_iterations(table) == Iterations("run", windows, "kernelmagic ranges")
    assert iteration_windows(table, "run") == windows
    # Another run's name: its ranges are not there, so the next rule (the step) applies.
    assert find_iterations(table, "other").source == "ProfilerStep"


def test_without_a_name_the_run_with_its_outer_range_wins():
    table = table_of(
        (Kind.RANGE, "mine/iter 0", 0, 10, 1),
        (Kind.RANGE, "mine/iter 1", 10, 20, 1),
        (Kind.RANGE, "outer", 30, 60, 1),
        (Kind.RANGE, "outer/iter 0", 30, 40, 1),
    )
    found = find_iterations(table)
    assert found.name == "outer" and found.windows == [(30 * US, 40 * US)]
    assert find_iterations(table, "mine").windows == [(0, 10 * US), (10 * US, 20 * US)]


def test_profiler_steps_of_the_busiest_thread_without_the_closing_stub():
    table = table_of(
        (Kind.STEP, "ProfilerStep#1", 100, 500, 1),
        (Kind.STEP, "ProfilerStep#2", 500, 900, 1),
        (Kind.STEP, "ProfilerStep#3", 900, 905, 1),  # opened at the last prof.step(): no op
        (Kind.STEP, "ProfilerStep#9", 100, 900, 2),  # another thread, once
        (Kind.OP, "aten::mm", 120, 130, 1),
        (Kind.OP, "aten::mm", 520, 530, 1),
        (Kind.RUNTIME, "cudaDeviceSynchronize", 950, 990, 1),  # the profiler's stop
    )
    found = find_iterations(table)
    assert found.name == "" and found.source == "ProfilerStep"
    assert found.windows == [(100 * US, 500 * US), (500 * US, 900 * US)]
    assert found.timings == [0.0004, 0.0004]
    assert find_iterations(table, "run") == found  # a live run's name changes nothing here


def test_a_step_that_runs_past_the_recording_ends_with_it():
    # a100_triton: the profiler stopped inside ProfilerStep#1, whose range closes 13.3 s
    # after the last recorded event (the report said "13.3 s per iteration", GPU idle >
    # 99.9%). Where the trace holds the profiler's session (its own lane), the recording
    # ends with its last event, and so does the step; the trust line says by how much.
    from kernelmagic.core.events import FIRST_NAMED_LANE
    from kernelmagic.views.dependencies import trust_checks

    events = [
        (Kind.STEP, "ProfilerStep#1", 100, 13_000_000, 2),
        (Kind.OP, "aten::mm", 120, 130, 1),
        (Kind.RUNTIME, "cudaDeviceSynchronize", 140, 160, 1),
    ]
    session = (Kind.OTHER, "PyTorch Profiler (0)", 0, 150, FIRST_NAMED_LANE - 1)
    cut = table_of(*events, session)
    assert find_iterations(cut).windows == [(100 * US, 160 * US)]
    assert trust_checks(cut)["step_past_end_us"] == 13_000_000 - 160
    # Without the session, nothing says where the recording ended: the step stays whole.
    whole = table_of(*events)
    assert find_iterations(whole).windows == [(100 * US, 13_000_000 * US)]
    assert trust_checks(whole)["step_past_end_us"] == 0.0


def test_steps_that_all_start_after_the_recording_stay_whole():
    # Nothing to cut them to: kept as they are (before: no window, and the load failed).
    from kernelmagic.core.events import FIRST_NAMED_LANE

    table = table_of((Kind.OP, "aten::a", 0, 40, 1), (Kind.STEP, "ProfilerStep#1", 60, 100, 1),
                     (Kind.OTHER, "PyTorch Profiler (0)", 0, 50, FIRST_NAMED_LANE - 1))
    assert find_iterations(table).windows == [(60 * US, 100 * US)]


def test_a100_triton_is_a_step_cut_at_the_recordings_end():
    from loaded import loaded

    result = loaded(DATA / "a100_triton.json.gz")
    # from the step's start to the session's end (ns, to the trace's rounding)
    assert result.timings == [pytest.approx((355_494_184 - 353_821_000) / 1e9, abs=1e-8)]
    assert result.trust.line().startswith("a ProfilerStep range runs 13.3 s past the last "
                                          "recorded event (the profiler stopped inside it)")


def test_a_closing_step_as_long_as_the_others_stays():
    table = table_of(
        (Kind.STEP, "ProfilerStep#7", 500, 900, 1),
        (Kind.STEP, "ProfilerStep#6", 100, 500, 1),
        (Kind.OP, "aten::mm", 120, 130, 1),
    )
    assert find_iterations(table).windows == [(100 * US, 500 * US), (500 * US, 900 * US)]
    lone = table_of((Kind.STEP, "ProfilerStep#1", 0, 5, 1))  # no op anywhere: kept
    assert find_iterations(lone).windows == [(0, 5 * US)]


def test_whole_trace_from_its_first_to_its_last_op_range_or_gpu_event():
    table = table_of(
        (Kind.OTHER, "enumerate(DataLoader)", 0, 10, 1),
        (Kind.OP, "aten::mm", 20, 30, 1),
        (Kind.KERNEL, "k", 25, 80, 7, {"device": 0}),
        (Kind.MEMORY, "[memory]", 95, 95, 1),
    )
    assert find_iterations(table) == Iterations("", [(20 * US, 80 * US)], "whole trace")
    only_other = table_of((Kind.OTHER, "x", 5, 10, 1))
    assert find_iterations(only_other).windows == [(5 * US, 10 * US)]
    assert find_iterations(table_of()).windows == []


def test_a_live_table_gives_its_iteration_ranges_with_or_without_the_name():
    import torch

    import kernelmagic
    from kernelmagic.live.session import table_from_session

    a = torch.randn(32, 32)
    held = []
    kernelmagic.profile(lambda: a @ a, iters=3, warmup=1, on_trace_ready=held.append)
    table = table_from_session(held[0])
    live, anyhow = find_iterations(table, "profile"), find_iterations(table)
    assert live == anyhow and live.source == "kernelmagic ranges" and live.name == "profile"
    names = [table.names[k] for k in table.name.tolist()]
    ranges = sorted((int(table.start[i]), int(table.end[i])) for i, x in enumerate(names)
                    if x.startswith("profile/iter ") and table.kind[i] == Kind.RANGE)
    assert live.windows == ranges and len(ranges) == 3

