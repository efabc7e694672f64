"""The roofline's records and rules: a device's roofs (``Peaks``), an op's counts
(``OpCount``), the bounds, their thresholds and the verdict. Torch-free, imports nothing
heavy.

Each roofline row (``RooflineRow``) has one bound (``classify``): **compute** or **memory**
(the roof it is nearer), **overhead** (far below both: dispatch and launch), or
**unexplained** (no FLOPs, well below the memory roof, and a name that says random numbers,
sorting or indexing). ``kernelmagic/live/op_counter.py`` counts (with torch),
``kernelmagic/live/device_peaks.py`` finds the roofs (with torch) and
``kernelmagic/views/roofline.py`` joins the counts to the profiled run's table; the
result's verdict, the renderers and the findings read the rows with what is here, so a
saved profile's roofline is shown without torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kernelmagic.core.records import Record
from kernelmagic.core.rows import RooflineRow

#: An op is overhead-bound when it reaches less than this fraction of *both* roofs
#: (achieved FLOP/s / peak FLOP/s and achieved bytes/s / peak bytes/s). Tiny ops,
#: whose time is dispatch and kernel launch, stay far below 1% (an 8-element multiply
#: on a CPU reaches ~0.1% of the copy bandwidth, on a GPU ~0.001%), while real work
#: stays above it even when slowed down 5-10x (a 16M-element add that page-faults
#: its fresh output on every call still reaches ~5% of the CPU's copy bandwidth).
OVERHEAD_FRACTION = 0.01

#: An op with no FLOPs counted that reaches at least ``OVERHEAD_FRACTION`` but less than
#: this share of the memory roof, and whose name says it draws random numbers, sorts or
#: indexes (``UNEXPLAINED_PATTERNS``), is limited by neither roof (the generator's
#: arithmetic, comparisons, scattered reads): its bound is "unexplained", not "memory".
UNEXPLAINED_REACH = 0.25
UNEXPLAINED_PATTERNS: dict[str, re.Pattern[str]] = {
    "random numbers": re.compile(
        r"^(bernoulli|rand|normal|uniform|multinomial|exponential|geometric|cauchy"
        r"|log_normal|poisson|native_dropout|fused_dropout)"),
    "sorting": re.compile(r"^(sort|argsort|msort|topk|unique|kthvalue|median|nanmedian|mode"
                          r"|searchsorted|bucketize)"),
    "indexing": re.compile(r"^(index|gather|scatter|nonzero|masked_select|masked_scatter|take"
                           r"|embedding)"),
}

BOUNDS = ("compute", "memory", "overhead", "unexplained")


@dataclass(frozen=True)
class Peaks(Record):
    """The roofs of one device.

    ``flops_per_s`` maps ``float32``/``bfloat16``/``float16`` to FLOP/s; ``bytes_per_s``
    is memory bandwidth; ``source`` says where they came from (``"measured"``,
    ``"datasheet: H100 SXM"``, ``"set_peaks"``); ``measured`` holds what the short
    measurement saw (the same figures on CPU); ``note`` any doubt about them.
    """

    device: str
    flops_per_s: dict[str, float]
    bytes_per_s: float
    source: str
    measured: dict[str, float] = field(default_factory=dict)
    note: str = ""

    def flops_for(self, dtype: str) -> float:
        """The compute roof for ``dtype`` (the float32 roof for other dtypes)."""
        return self.flops_per_s.get(dtype) or self.flops_per_s.get("float32", 0.0)


@dataclass
class OpCount:
    """One op's calls and totals over the counted run (``live/op_counter.py``)."""

    key: str
    calls: int = 0
    flops: float = 0.0
    bytes: float = 0.0
    dtype: str = ""  # of its first floating-point input: float32, bfloat16, float16...
    opened: bool = False  # its kernel's inner ops were counted instead of it


def classify(flops_per_s: float, bytes_per_s: float, dtype: str, peaks: Peaks) -> tuple[str, float]:
    """(bound, share of the nearer roof reached) for an op's achieved rates.

    Compute-bound when the op is nearer the compute roof than the memory roof (the
    same as: its intensity is at or right of the ridge point), memory-bound otherwise,
    overhead-bound when both shares are below ``OVERHEAD_FRACTION``.
    """
    peak_flops = peaks.flops_for(dtype)
    compute = flops_per_s / peak_flops if peak_flops > 0 else 0.0
    memory = bytes_per_s / peaks.bytes_per_s if peaks.bytes_per_s > 0 else 0.0
    reached = max(compute, memory)
    if reached < OVERHEAD_FRACTION:
        return "overhead", reached
    return ("compute" if compute >= memory else "memory"), reached


def unexplained_kind(key: str, flops: float, reached: float) -> str | None:
    """The kind of work (``UNEXPLAINED_PATTERNS``) the roofline cannot explain, else None."""
    if flops > 0 or not OVERHEAD_FRACTION <= reached < UNEXPLAINED_REACH:
        return None
    return work_kind(key)


def work_kind(key: str) -> str | None:
    """The kind in ``UNEXPLAINED_PATTERNS`` op ``key``'s name says (after ``aten::`` and
    leading underscores), else None."""
    name = key.rsplit("::", 1)[-1].lstrip("_")
    return next((kind for kind, pattern in UNEXPLAINED_PATTERNS.items()
                 if pattern.match(name)), None)


def verdict(rows: list[RooflineRow]) -> dict[str, float]:
    """The share of the ops' time in each regime: compute, memory, overhead."""
    total = sum(r.time for r in rows)
    shares = {b: 0.0 for b in BOUNDS}
    if total <= 0:
        return shares
    for r in rows:
        shares[r.bound] += r.time / total
    return shares
