"""On the CPU, most of the iteration outside any op: the Python between ops
(``python_between_ops``).

The time no op covers is the CPU breakdown's ``idle`` (Python between ops, waits). With the
``python`` view (``--python``, or a trace's ``python_function`` frames) the evidence names
the lines that held it; its advice is the GPU-idle finding's for the time between ops
(``findings/gpu.py``). Nothing but the CPU runs the iteration, so taking that time
out saves at most all of it.
"""

from __future__ import annotations

from kernelmagic.core.units import format_us, percent
from kernelmagic.findings.base import NAMED, Finding, wall_us
from kernelmagic.findings.gpu import CAUSE_FIX, where_lines_are
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.gpu_idle import BETWEEN_OPS

PYTHON_SHARE = 0.5  # time outside any op above this fraction of a CPU iteration


def between_detail(result: ProfileResult) -> str:
    """What the time outside any op was: the lines of the ``python`` view that took most
    of it (``--python``, or a trace's ``python_function`` frames; not those waiting for a
    DataLoader), else the generic words."""
    lines = [r for r in result.python_lines if r.self_us > 0 and not r.cause][:NAMED]
    if not lines:
        return "(Python between ops, waits)"
    return "(most at " + ", ".join(f"{r.location} `{r.code or r.function}` "
                                   f"{format_us(r.self_us)}" for r in lines) + ")"


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
        f"no op runs for {format_us(parts.idle)} of each {format_us(wall)} iteration "
        + between_detail(result),
        CAUSE_FIX[BETWEEN_OPS].format(python=where_lines_are(result)), share,
        side="cpu", saves_us=parts.idle, iteration_us=wall)
