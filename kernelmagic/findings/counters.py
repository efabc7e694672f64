"""Findings from hardware counters per kernel (``--counters``): DRAM traffic measured.

``dram_near_peak``: a kernel whose measured DRAM throughput is near the device's peak
bandwidth is memory-bound for real, not by a model. ``poor_reuse`` (with ``--roofline``
too): an op's kernels moved far more DRAM bytes than its tensors hold (the roofline's
modelled bytes), so data is read again and again instead of reused from cache.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from kernelmagic.core.units import format_ratio, percent, si
from kernelmagic.findings.base import Finding, of_wall
from kernelmagic.results.result import ProfileResult

NEAR_PEAK = 0.7  # a kernel's DRAM throughput / peak bandwidth that is "near the peak"
NEAR_PEAK_MIN_TIME = 0.05  # ...and its share of the counted kernels' time (not a blip)
REUSE_RATIO = 4.0  # measured DRAM bytes / the op's modelled bytes that is "far above"
REUSE_MIN_BYTES = 1 << 20  # ...and at least this many measured bytes per run


def modelled_bytes(result: ProfileResult) -> dict[str, float]:
    """Bytes each op's tensors need per run of the block (``--roofline``'s model)."""
    iters = max(result.iters, 1)
    return {r.key: r.bytes * r.count / iters for r in result.roofline if r.counted}


def measured_bytes(result: ProfileResult) -> dict[str, float]:
    """DRAM bytes the kernels each op launched moved, per counted run."""
    out: dict[str, float] = defaultdict(float)
    for row in result.counters:
        if row.launched_by and row.has_dram:
            out[row.launched_by] += row.dram_bytes
    return dict(out)


def dram_near_peak(result: ProfileResult) -> Finding | None:
    """The kernel nearest the DRAM peak, when it is near it and takes real time."""
    total = sum(r.time for r in result.counters)
    near = [r for r in result.counters
            if r.dram_peak_share >= NEAR_PEAK and total > 0 and r.time / total
            >= NEAR_PEAK_MIN_TIME]
    if not near:
        return None
    top = max(near, key=lambda r: r.dram_peak_share)
    op = f" (launched by {top.launched_by})" if top.launched_by else ""
    more = (f"; {len(near) - 1} more kernel(s) above {percent(NEAR_PEAK)}"
            if len(near) > 1 else "")
    return Finding(
        "counters.dram_near_peak",
        "Memory-bound, measured by the GPU's counters",
        f"kernel {top.key[:80]}{op} moved DRAM at {si(top.dram_bytes_per_s, 'B/s')}, "
        f"{percent(top.dram_peak_share)} of the device's peak bandwidth "
        f"({percent(top.time / total)} of the counted kernels' time){more}",
        "less traffic is the only way to make it faster: fuse it with its neighbours "
        "(torch.compile), keep the data in a smaller dtype, or avoid the copy",
        share=of_wall(result, top.time),
    )


def poor_reuse(result: ProfileResult) -> Finding | None:
    """The op whose kernels' measured DRAM traffic is furthest above its modelled bytes."""
    model = modelled_bytes(result)
    if not model:
        return None
    found = [(measured / model[op], op, measured) for op, measured in measured_bytes(result).items()
             if model.get(op, 0.0) > 0 and measured >= REUSE_MIN_BYTES
             and measured / model[op] >= REUSE_RATIO]
    if not found:
        return None
    ratio, op, measured = max(found, key=lambda f: f[0])  # the first of equal ratios
    need = model[op]
    time = sum(r.time for r in result.counters if r.launched_by == op)
    return Finding(
        "counters.poor_reuse",
        "Poor reuse: measured DRAM traffic far above what the tensors hold",
        f"{op}'s kernels moved {si(measured, 'B')} of DRAM traffic per run, "
        f"{format_ratio(ratio, 1)} "
        f"the {si(need, 'B')} its tensors hold (modelled by --roofline)",
        "the kernels read their inputs from DRAM more than once: a blocked or fused "
        "implementation, or a layout they read contiguously, keeps them in cache",
        share=of_wall(result, time),
    )


#: The rules ``find`` adds when a result has counters.
RULES: list[Callable[[ProfileResult], Finding | None]] = [dram_near_peak, poor_reuse]
