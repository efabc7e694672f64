"""What to change in the recording, worded for where the result came from.

A result profiled here (``source == "live"``) is changed with a ``%%profile`` option
(``--iters 50``); one read from a trace file (``source == "trace"``) by changing how
``torch.profiler`` recorded it (``schedule(active=N)``, ``record_shapes=True``, a warm-up
before ``start()``). Findings, warnings and comparisons take their advice from here, so
neither kind of result is told to do what only the other can.
"""

from __future__ import annotations

from kernelmagic.core.options import RECORDING
from kernelmagic.results.result import ProfileResult


def more_iterations(result: ProfileResult, n: int) -> str:
    """Advice to measure ``n`` iterations: ``run more iterations (--iters 50)`` live,
    ``record more steps (torch.profiler.schedule(active=50), prof.step() after each)``
    for a trace."""
    if result.from_trace:
        return (f"record more steps (torch.profiler.schedule(active={n}), "
                "prof.step() after each)")
    return f"run more iterations (--iters {n})"


def at_least_iterations(result: ProfileResult, n: int) -> str:
    """``use --iters 5 or more`` live, ``record 5 or more steps: ...`` for a trace."""
    if result.from_trace:
        return f"record {n} or more steps: torch.profiler.schedule(active={n})"
    return f"use --iters {n} or more"


def warm_up(result: ProfileResult) -> str:
    """What leaves the first, slow runs out of the measurement, as a clause
    (``profile steady state: {warm_up(result)}, and ...``)."""
    if result.from_trace:
        return ("a warm-up before the profiler records (torch.profiler.schedule(wait=1, "
                "warmup=1, active=N), or a few steps before prof.start())")
    return "more warm-up runs (--warmup)"


def record(result: ProfileResult, option: str) -> str:
    """How to record what ``%%profile`` option ``option`` adds (``--shapes``...):
    the option itself live, ``torch.profiler.profile(record_shapes=True)`` for a trace."""
    if option not in RECORDING:
        raise ValueError(f"unknown recording option {option!r}; expected one of "
                         f"{', '.join(RECORDING)}")
    if result.from_trace:
        return f"torch.profiler.profile({RECORDING[option]})"
    return option


def timing_warning(result: ProfileResult) -> str | None:
    """The summary's warning about one slow iteration, with advice that fits the source
    (``TimingStats.warning`` with a trace's own advice in place of ``--warmup``/``--iters``)."""
    if result.from_trace:
        return result.stats.warning(
            advice="Warm up before the profiler records (torch.profiler.schedule(wait=1, "
                   "warmup=1, active=N)) and record more steps.")
    return result.stats.warning()
