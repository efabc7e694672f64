"""Live progress: silent for fast runs, then warm-up/iteration/reading lines (fake clock)."""

from __future__ import annotations

import io

import pytest
import torch
from IPython.utils.capture import capture_output
from test_magic import report_data

import kernelmagic
from kernelmagic.core.options import ProfileOptions
from kernelmagic.live import progress as km_progress
from kernelmagic.live import runner
from kernelmagic.live.progress import LineSink, Progress, ProgressUpdate, WidgetSink
from kernelmagic.render.bundle import WIDGET_MIME


class FakeClock:
    """Time stands still except when the profiled code advances it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def workload(clock: FakeClock, step: float):
    def fn() -> None:
        torch.ones(2).add(1)
        clock.now += step
    return fn


def run_with(step: float, warmup: int = 2, iters: int = 5) -> list[ProgressUpdate]:
    clock = FakeClock()
    seen: list[ProgressUpdate] = []
    reporter = Progress(km_progress.CallbackSink(seen.append), clock)
    plan = runner.plan(ProfileOptions(iters=iters, warmup=warmup, name="p"))
    runner.execute(workload(clock, step), plan, clock=clock, progress=reporter)
    return seen


def test_fast_run_shows_nothing():
    assert run_with(step=0.05) == []  # 7 runs x 50 ms = 0.35 s < 1 s


def test_slow_run_reports_each_stage_after_a_second():
    seen = run_with(step=0.4)  # warm-ups end at 0.4, 0.8 s; iterations every 0.4 s
    texts = [u.text() for u in seen]
    # Nothing before 1 s of wall time: the warm-ups (0.4, 0.8 s) stay silent.
    assert texts[:5] == [
        "profiled iteration 1/5 · 400 ms elapsed · ~1.60 s left",
        "profiled iteration 2/5 · 800 ms elapsed · ~1.20 s left",
        "profiled iteration 3/5 · 1.20 s elapsed · ~800 ms left",
        "profiled iteration 4/5 · 1.60 s elapsed · ~400 ms left",
        "profiled iteration 5/5 · 2.00 s elapsed",
    ]
    assert texts[5] == "stopping the profiler, reading its events"
    assert texts[6].startswith("reading ") and texts[6].endswith(" events")
    assert int(texts[6].split()[1].replace(",", "")) > 5  # ops and our ranges
    assert [u.fraction for u in seen[:5]] == pytest.approx([3 / 7, 4 / 7, 5 / 7, 6 / 7, 1.0])


def test_warmup_progress_and_redraw_throttle():
    clock = FakeClock()
    seen: list[ProgressUpdate] = []
    reporter = Progress(km_progress.CallbackSink(seen.append), clock)
    reporter.start(warmup=10, iters=2)
    for done, t in [(1, 0.5), (2, 1.05), (3, 1.1), (4, 1.3), (10, 1.31)]:
        clock.now = t
        reporter.warmup(done)
    # 1.1 s is within 0.2 s of the last draw; the stage's last run is always drawn.
    assert [u.text() for u in seen] == ["warm-up 2/10", "warm-up 4/10", "warm-up 10/10"]


def test_line_sink_redraws_one_line_and_erases_it():
    out = io.StringIO()
    clock = FakeClock()
    reporter = Progress(LineSink(out), clock)
    reporter.start(warmup=0, iters=2)
    reporter.profiling()
    clock.now = 1.5
    reporter.iteration(1)
    clock.now = 3.0
    reporter.iteration(2)
    reporter.close()
    text = out.getvalue()
    assert "\n" not in text
    first = "%%profile: profiled iteration 1/2 · 1.50 s elapsed · ~1.50 s left"
    second = "%%profile: profiled iteration 2/2 · 3.00 s elapsed"
    assert text == (f"\r{first}\r{second}{' ' * (len(first) - len(second))}"
                    f"\r{' ' * len(second)}\r")


def test_api_progress_flag_and_callback(capsys, monkeypatch):
    # The API's progress reads a fake clock that only the workload moves, so a run is as
    # fast or slow as the test says, however busy the machine (the real one: ~0.1 s each).
    clock = FakeClock()
    monkeypatch.setattr(km_progress.for_api, "__defaults__", (clock,))
    seen: list[ProgressUpdate] = []
    kernelmagic.profile(workload(clock, 0.05), iters=2, warmup=0, progress=seen.append)
    assert seen == []  # a fast run (2 x 50 ms): the callback is never called
    kernelmagic.profile(workload(clock, 0.05), iters=2, warmup=0, progress=True)
    assert capsys.readouterr().err == ""
    kernelmagic.profile(workload(clock, 0.6), iters=2, warmup=0, progress=seen.append)
    assert [u.text() for u in seen[:2]] == ["profiled iteration 2/2 · 1.20 s elapsed",
                                             "stopping the profiler, reading its events"]
    kernelmagic.profile(workload(clock, 0.6), iters=2, warmup=0, progress=True)
    err = capsys.readouterr().err
    assert "\r%%profile: profiled iteration 2/2 · 1.20 s elapsed" in err
    assert err.endswith("\r") and not err.split("\r")[-2].strip()  # erased at the end
    with pytest.raises(TypeError, match="progress"):
        kernelmagic.profile(lambda: None, iters=1, progress=3)


def test_sink_for_shell_picks_by_front_end():
    class ZMQInteractiveShell:
        pass

    class TerminalInteractiveShell:
        pass

    assert isinstance(km_progress.sink_for_shell(ZMQInteractiveShell()), WidgetSink)
    assert isinstance(km_progress.sink_for_shell(TerminalInteractiveShell()), LineSink)
    assert km_progress.sink_for_shell(object()) is None
    assert km_progress.sink_for_shell(None) is None


@pytest.fixture
def widget_bar(ip, monkeypatch):
    """The magic with the notebook's progress bar and no delay; yields the sink used."""
    sinks: list[WidgetSink] = []

    def make(shell):
        sinks.append(WidgetSink())
        return sinks[-1]

    monkeypatch.setattr(km_progress, "sink_for_shell", make)
    monkeypatch.setattr(km_progress, "DELAY", 0.0)
    monkeypatch.setattr(km_progress, "REDRAW", 0.0)
    return sinks


def test_magic_progress_bar_is_replaced_by_the_report(ip, widget_bar):
    import ipywidgets

    with capture_output() as cap:
        res = ip.run_cell("%%profile -n 3 -w 1 --name bar\ntorch.ones(8).add(1)")
    assert res.success
    bar, widget = cap.outputs[0], cap.outputs[-1]
    display_id = bar.transient["display_id"]
    assert bar.data["text/plain"] == "%%profile: running…"
    # Every later output but the widget's updates that same display: the static report
    # takes the bar's place, its widget follows as an output of its own.
    assert all(o.update and o.transient["display_id"] == display_id
               for o in cap.outputs[1:-1])
    assert not widget.update
    report = report_data(cap.outputs)
    assert report["text/plain"].startswith("bar · CPU · 3 iterations")
    # Text first (so no front end re-uses the bar's widget view for the report).
    assert cap.outputs[-3].data == {"text/plain": report["text/plain"]}
    registry = getattr(ipywidgets.widgets.widget, "_instances", None)
    if registry is None:  # ipywidgets 7
        registry = ipywidgets.Widget.widgets
    assert bar.data[WIDGET_MIME]["model_id"] not in registry  # closed: not saved
    assert widget_bar[0].handle is None


def test_magic_quiet_or_failing_run_leaves_an_empty_output(ip, widget_bar):
    with capture_output() as cap:
        ip.run_cell("%%profile -n 2 -w 0 -q\ntorch.ones(8).add(1)")
    assert cap.outputs[-1].update and cap.outputs[-1].data == {"text/plain": ""}
    with capture_output() as cap:
        res = ip.run_cell("%%profile -n 2 -w 0\nraise ValueError('no')")
    assert isinstance(res.error_in_exec, ValueError)
    assert cap.outputs[-1].update and cap.outputs[-1].data == {"text/plain": ""}


def test_magic_fast_cell_shows_only_the_report(ip, monkeypatch):
    monkeypatch.setattr(km_progress, "sink_for_shell", lambda shell: WidgetSink())
    # The magic's progress on a fake clock that the cell moves by 0.1 s a run: 0.3 s in all,
    # a fast cell however busy the machine is.
    clock = FakeClock()
    real = km_progress.Progress
    monkeypatch.setattr(km_progress, "Progress", lambda sink: real(sink, clock))
    ip.user_ns["clock"] = clock
    with capture_output() as cap:
        ip.run_cell("%%profile -n 2 -w 1\ntorch.ones(8).add(1)\nclock.now += 0.1")
    assert clock.now == pytest.approx(0.3)
    # no bar for a fast cell: the static report and its widget
    assert len(cap.outputs) == 2 and not any(o.update for o in cap.outputs)
    assert WIDGET_MIME in report_data(cap.outputs)


def test_magic_terminal_line_is_erased_before_the_report(ip, monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(km_progress, "sink_for_shell", lambda shell: LineSink(out))
    monkeypatch.setattr(km_progress, "DELAY", 0.0)
    monkeypatch.setattr(km_progress, "REDRAW", 0.0)
    with capture_output() as cap:
        ip.run_cell("%%profile -n 2 -w 1 --name t\ntorch.ones(8).add(1)")
    text = out.getvalue()
    lines = [part.rstrip() for part in text.split("\r") if part.strip()]
    assert lines[0] == "%%profile: warm-up 1/1"
    assert lines[1].startswith("%%profile: profiled iteration 0/2 · ")
    assert lines[2].startswith("%%profile: profiled iteration 1/2 · ")
    assert lines[-2] == "%%profile: stopping the profiler, reading its events"
    assert lines[-1].startswith("%%profile: reading ") and lines[-1].endswith(" events")
    assert text.endswith("\r") and not text.split("\r")[-2].strip()  # erased at the end
    assert cap.outputs[0].data["text/plain"].startswith("t · CPU")


def test_magic_interrupt_puts_the_partial_report_in_the_bar_place(ip, widget_bar):
    ip.run_cell("n = 0")
    with capture_output() as cap:
        res = ip.run_cell("%%profile -n 5 -w 1\nn += 1\ntorch.ones(4).add(1)\n"
                          "if n == 1 + 3:\n    raise KeyboardInterrupt")
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    display_id = cap.outputs[0].transient["display_id"]
    static = cap.outputs[-2]
    assert static.update and static.transient["display_id"] == display_id
    report = report_data(cap.outputs)
    assert "interrupted after 2 of 5 iterations" in report["text/plain"]
    assert WIDGET_MIME in report
    assert widget_bar[0].handle is None
