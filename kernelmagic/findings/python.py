"""On the CPU, most of the iteration outside any op: the Python between ops
(``python_between_ops``).

The time no op covers is the CPU breakdown's ``idle`` (Python between ops, waits). With the
``python`` view (``--python``, or a trace's ``python_function`` frames) the evidence quotes
that view's top lines, in its order (the most time first), the time a line waited for a
DataLoader included and marked ``(data loading)``; its advice is the GPU-idle finding's for
the time between ops (``findings/gpu.py``), led by the DataLoader's when the top line is
data loading. Nothing but the CPU runs the iteration, so taking that time out saves at
most all of it.
"""

from __future__ import annotations

from kernelmagic.core.rows import DATA_LOADING, PythonLineRow
from kernelmagic.core.units import format_us, percent
from kernelmagic.findings.base import NAMED, Finding, wall_us
from kernelmagic.findings.gpu import CAUSE_FIX, where_lines_are
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.gpu_idle import BETWEEN_OPS

PYTHON_SHARE = 0.5  # time outside any op above this fraction of a CPU iteration
#: The advice when the python view's top line waited for a DataLoader (on the CPU).
LOADING_FIX = ("load the data in worker processes (DataLoader(num_workers=..., "
               "persistent_workers=True)) or ahead of the loop")


def top_lines(result: ProfileResult) -> list[PythonLineRow]:
    """The python view's top lines, as its table lists them (the most time per iteration
    first), data loading included: the first ``NAMED`` with time."""
    rows = sorted(result.python_lines, key=lambda r: (-r.self_us, r.location))
    return [r for r in rows if r.self_us > 0][:NAMED]


def between_detail(result: ProfileResult) -> str:
    """What the time outside any op was: the ``python`` view's top lines (``--python``, or
    a trace's ``python_function`` frames), else the generic words."""
    lines = top_lines(result)
    if not lines:
        return "(Python between ops, waits)"
    return "(most at " + ", ".join(
        f"{r.location} `{r.code or r.function}` {format_us(r.self_us)}"
        + (f" ({r.cause})" if r.cause else "") for r in lines) + ")"


def _fix(result: ProfileResult) -> str:
    """The time-between-ops advice, led by the DataLoader's when the top line loads data."""
    fix = CAUSE_FIX[BETWEEN_OPS].format(python=where_lines_are(result))
    lines = top_lines(result)
    return f"{LOADING_FIX}; {fix}" if lines and lines[0].cause == DATA_LOADING else fix


def python_between_ops(result: ProfileResult) -> Finding | None:
    """On the CPU, no op runs for more than ``PYTHON_SHARE`` of the iteration."""
    parts = result.breakdown
    wall = wall_us(result)
    if parts is None or parts.device != "cpu" or wall <= 0:
        return None
    share = parts.share("idle")  # the summary's "other" share
    if share <= PYTHON_SHARE:
        return None
    return Finding(
        "python_between_ops",
        f"Python between ops takes {percent(share)} of the iteration",
        f"no op runs for {format_us(parts.idle)} of the mean {format_us(wall)} iteration "
        + between_detail(result),
        _fix(result), share,
        side="cpu", saves_us=parts.idle, iteration_us=wall)
