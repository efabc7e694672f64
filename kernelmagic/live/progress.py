"""Live progress for long runs: warm-up i/N, iteration i/N with elapsed and time left.

The runner calls a ``Progress`` between runs of the code (never inside the timed span);
it shows nothing until ``DELAY`` seconds of wall time have passed, so fast cells print
nothing at all. Where the progress goes is a ``sink``: one updating line on stderr
(terminal IPython, scripts), a core-ipywidgets bar that the report replaces (notebooks),
or any callable of ``ProgressUpdate``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from kernelmagic.core.units import counted, format_seconds

#: Seconds of wall time before anything is shown.
DELAY = 1.0
#: Seconds between two redraws (the last update of a stage is always drawn).
REDRAW = 0.2


@dataclass(frozen=True)
class ProgressUpdate:
    """Where a run stands: ``stage`` is ``warmup``, ``profile``, ``reading`` or
    ``rounds`` (``--try``'s interleaved timing: ``done`` rounds of at most ``total``)."""

    stage: str
    done: int  # runs finished in this stage (events read, for "reading")
    total: int  # runs planned in this stage (0 for "reading" before the count is known)
    elapsed: float  # seconds since the profiled iterations began (0 during warm-up)
    remaining: float | None  # seconds, estimated from the profiled iterations so far
    fraction: float  # 0..1 of all runs (warm-up and profiled)
    label: str = ""  # what runs, before the stage: ``variant 2/4 compile`` (--try)
    note: str = ""  # after the stage: ``compiling``

    def text(self) -> str:
        """One line, e.g. ``profiled iteration 4/10 · 12.1 s elapsed · ~18.2 s left``,
        after the ``label`` and before the ``note`` when there are:
        ``variant 2/4 compile: warm-up 0/3 (compiling)``."""
        line = self._stage_text()
        if self.note:
            line += f" ({self.note})"
        return f"{self.label}: {line}" if self.label else line

    def _stage_text(self) -> str:
        if self.stage == "warmup":
            return f"warm-up {self.done}/{self.total}"
        if self.stage == "rounds":
            return f"round {self.done}/{self.total} (at most)"
        if self.stage == "reading":
            return (f"reading {counted(self.done, 'event')}" if self.done
                    else "stopping the profiler, reading its events")
        line = (f"profiled iteration {self.done}/{self.total} · "
                f"{format_seconds(self.elapsed)} elapsed")
        if self.remaining is not None and self.done < self.total:
            line += f" · ~{format_seconds(self.remaining)} left"
        return line


class Sink(Protocol):
    def show(self, update: ProgressUpdate) -> None: ...

    def close(self) -> None: ...


class Silent:
    """A reporter that shows nothing (``Progress``' calls, ignored): the runner's when
    nobody watches, so that the runner tells it everything without asking first whether
    anyone listens."""

    def _ignore(self, *args: Any) -> None:
        pass

    start = warmup = profiling = iteration = reading = close = _ignore


class Progress:
    """Turns the runner's calls into updates; silent until ``delay`` seconds have passed."""

    def __init__(self, sink: Sink, clock: Callable[[], float] = time.perf_counter,
                 delay: float | None = None, redraw: float | None = None) -> None:
        self.sink = sink
        self.clock = clock
        self.delay = DELAY if delay is None else delay
        self.redraw = REDRAW if redraw is None else redraw
        self.warmup_total = 0
        self.iters_total = 0
        self.began = clock()
        self.profiling_began: float | None = None
        self.shown = False  # whether the sink has shown anything
        self._last_draw = -float("inf")
        self.label = ""  # shown before each update's stage (ProgressUpdate.label)
        self.note = ""  # shown after it (ProgressUpdate.note)

    # --- the runner's calls (between runs of the code) -------------------------------

    def start(self, warmup: int, iters: int) -> None:
        self.warmup_total, self.iters_total = warmup, iters
        self.began = self.clock()

    def warmup(self, done: int) -> None:
        """``done`` warm-up runs have finished."""
        self._update("warmup", done, self.warmup_total, final=done == self.warmup_total)

    def profiling(self) -> None:
        """The profiled iterations are about to begin."""
        self.profiling_began = self.clock()
        self._update("profile", 0, self.iters_total)

    def iteration(self, done: int) -> None:
        """``done`` profiled iterations have finished."""
        self._update("profile", done, self.iters_total, final=done == self.iters_total)

    def reading(self, events: int = 0) -> None:
        """The profiler is stopping (``events`` = 0), or its ``events`` are being read."""
        self._update("reading", events, 0, final=True)

    def rounds(self, done: int, most: int) -> None:
        """``done`` interleaved rounds of at most ``most`` have finished (``--try``)."""
        self._update("rounds", done, most, final=done == 0)

    def close(self) -> None:
        """Take the progress off the screen (if it was ever shown)."""
        if self.shown:
            self.sink.close()
            self.shown = False

    # --- internals -------------------------------------------------------------------

    def _update(self, stage: str, done: int, total: int, final: bool = False) -> None:
        now = self.clock()
        if now - self.began < self.delay:
            return
        if not final and now - self._last_draw < self.redraw:
            return
        self._last_draw = now
        self.shown = True
        self.sink.show(self._snapshot(stage, done, total, now))

    def _snapshot(self, stage: str, done: int, total: int, now: float) -> ProgressUpdate:
        elapsed = now - self.profiling_began if self.profiling_began is not None else 0.0
        remaining = None
        if stage == "profile" and done > 0:
            remaining = elapsed / done * (self.iters_total - done)
        runs = self.warmup_total + self.iters_total
        finished = (done if stage == "warmup" else
                    self.warmup_total + (done if stage == "profile" else self.iters_total))
        return ProgressUpdate(stage, done, total, elapsed, remaining,
                              finished / runs if runs else 1.0, self.label, self.note)


#: What the runner tells where the run stands, between runs of the code.
Reporter = Progress | Silent


class LineSink:
    """One line on ``stream`` (stderr), redrawn in place and erased at the end."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self._width = 0

    def _out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    def show(self, update: ProgressUpdate) -> None:
        text = f"%%profile: {update.text()}"
        pad = " " * max(0, self._width - len(text))
        self._width = len(text)
        out = self._out()
        out.write(f"\r{text}{pad}")
        out.flush()

    def close(self) -> None:
        out = self._out()
        out.write("\r" + " " * self._width + "\r")
        out.flush()
        self._width = 0


class CallbackSink:
    """Hands every update to a function (the plain API's ``progress=callable``)."""

    def __init__(self, callback: Callable[[ProgressUpdate], Any]) -> None:
        self.callback = callback

    def show(self, update: ProgressUpdate) -> None:
        self.callback(update)

    def close(self) -> None:
        pass


class WidgetSink:
    """A core-ipywidgets bar and label, shown under a display id so the report replaces it.

    Built on first use (so fast cells create no widget); ``replace(bundle)`` puts the
    report where the bar was and closes the bar's widgets, so nothing of it is left in
    the saved notebook.
    """

    def __init__(self) -> None:
        self.box: Any = None
        self.bar: Any = None
        self.label: Any = None
        self.handle: Any = None

    def show(self, update: ProgressUpdate) -> None:
        if self.box is None:
            self._build()
        self.bar.value = update.fraction
        self.label.value = update.text()

    def _build(self) -> None:
        import ipywidgets as w
        from IPython.display import display

        self.bar = w.FloatProgress(value=0.0, min=0.0, max=1.0, description="%%profile",
                                   layout=w.Layout(width="320px"))
        self.label = w.Label()
        self.box = w.HBox([self.bar, self.label])
        self.box.add_class("km-progress")
        bundle = {"text/plain": "%%profile: running…",
                  "application/vnd.jupyter.widget-view+json": {
                      "version_major": 2, "version_minor": 0, "model_id": self.box.model_id}}
        self.handle = display(bundle, raw=True, display_id=True)

    def replace(self, bundle: dict[str, Any] | None) -> bool:
        """Show ``bundle`` in the bar's place (or an empty output); False if none was shown.

        The bar becomes plain text first and only then are its widgets closed: a
        front end that re-used the bar's widget view for the report would hide the
        report when the bar's view goes (JupyterLab does).
        """
        handle = self.handle
        if handle is None:
            return False
        from kernelmagic.render.bundle import close_tree

        handle.update({"text/plain": (bundle or {}).get("text/plain", "")}, raw=True)
        close_tree(self.box)
        self.box = self.bar = self.label = self.handle = None
        if bundle is not None and set(bundle) != {"text/plain"}:
            handle.update(bundle, raw=True)
        return True

    def close(self) -> None:
        """Left to ``replace``: the bar stays until the report takes its place."""


def sink_for_shell(shell: Any) -> Sink | None:
    """The widget bar in a kernel (notebooks), the stderr line in terminal IPython."""
    kind = type(shell).__name__ if shell is not None else ""
    if kind == "ZMQInteractiveShell":
        try:
            import ipywidgets  # noqa: F401
        except ImportError:
            return LineSink()
        return WidgetSink()
    if kind == "TerminalInteractiveShell":
        return LineSink()
    return None


def for_api(progress: bool | Callable[[ProgressUpdate], Any] | Progress | None,
            clock: Callable[[], float] = time.perf_counter) -> Progress | None:
    """The plain API's ``progress`` argument as a ``Progress`` (or None for off)."""
    if progress is None or progress is False:
        return None
    if isinstance(progress, Progress):
        return progress
    if progress is True:
        return Progress(LineSink(), clock)
    if callable(progress):
        return Progress(CallbackSink(progress), clock)
    raise TypeError(f"progress must be a bool or a callable, got {type(progress).__name__}")
