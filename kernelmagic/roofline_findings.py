"""Findings from the roofline view (``--roofline``): the regime that holds the time, and
its remedy. Each rule is a pure function of a ``ProfileResult``, like those in
``kernelmagic/findings.py``, which lists these after its own.
"""

from __future__ import annotations

from collections.abc import Callable

from kernelmagic.findings import Finding
from kernelmagic.result import ProfileResult
from kernelmagic.roofline import OVERHEAD_FRACTION
from kernelmagic.rows import RooflineRow

REGIME_SHARE = 0.5        # memory- or overhead-bound ops holding at least this share of time
COMPUTE_SHARE = 0.3       # compute-bound ops' share of time worth a precision hint
COMPUTE_FAR = 0.5         # compute-bound ops reaching less than this share of their roof
LOW_PRECISION_GAIN = 2.0  # or in float32 where the bf16/fp16 roof is this many times higher
NAMED = 3                 # ops named in a finding's evidence


def _in(result: ProfileResult, bound: str) -> tuple[list[RooflineRow], float]:
    rows = [r for r in result.roofline if r.bound == bound]
    return rows, result.roofline_verdict.get(bound, 0.0)


def _rate(x: float, unit: str) -> str:
    from kernelmagic.render.roofline import si

    return si(x, unit)


def _names(rows: list[RooflineRow], total: float, show: Callable[[RooflineRow], str]) -> str:
    return ", ".join(f"{r.key} {r.time / total:.0%} ({show(r)})" for r in rows[:NAMED])


def memory_bound(result: ProfileResult) -> Finding | None:
    rows, share = _in(result, "memory")
    if share < REGIME_SHARE:
        return None
    total = sum(r.time for r in result.roofline)
    peak = float(result.roofline_peaks.get("bytes_per_s", 0.0))
    named = _names(rows, total, lambda r: f"{_rate(r.bytes_per_s, 'B/s')}, "
                                          f"{r.bytes_per_s / peak:.0%} of the memory roof"
                   if peak else _rate(r.bytes_per_s, "B/s"))
    return Finding(
        "memory_bound", "Most of the time is memory-bound",
        f"{share:.0%} of op time is in ops limited by memory bandwidth "
        f"(peak {_rate(peak, 'B/s')}): {named}",
        "move fewer bytes: fuse chains of elementwise ops and reductions with torch.compile "
        "(one pass over memory instead of one per op), and use lower precision "
        "(bfloat16 halves the bytes)")


def overhead_bound(result: ProfileResult) -> Finding | None:
    rows, share = _in(result, "overhead")
    if share < REGIME_SHARE:
        return None
    total = sum(r.time for r in result.roofline)
    calls = sum(r.count for r in rows) / result.iters
    per_call = sum(r.time for r in rows) / max(1, sum(r.count for r in rows))
    named = _names(rows, total, lambda r: f"{r.roof_share:.2%} of its nearer roof")
    return Finding(
        "overhead_bound", "Most of the time is overhead, not work",
        f"{share:.0%} of op time is in ops that reach under {OVERHEAD_FRACTION:.0%} of both "
        "roofs "
        f"({calls:g} calls per iteration, {per_call:.1f} µs each): {named}",
        "give each op more work and launch fewer of them: larger batches, "
        "torch.compile (fuses ops), and on CUDA CUDA graphs "
        "(torch.compile(mode=\"reduce-overhead\"))")


def compute_far_from_peak(result: ProfileResult) -> Finding | None:
    rows, share = _in(result, "compute")
    if share < COMPUTE_SHARE or not rows:
        return None
    flops = result.roofline_peaks.get("flops_per_s", {})
    time = sum(r.time for r in rows)
    achieved = sum(r.flops * r.count for r in rows) / (time / 1e6) if time > 0 else 0.0
    dtype = max({r.dtype for r in rows}, key=lambda d: sum(r.time for r in rows
                                                            if r.dtype == d))
    roof = float(flops.get(dtype) or flops.get("float32") or 0.0)
    fast = max(("bfloat16", "float16"), key=lambda d: float(flops.get(d, 0.0)))
    low = float(flops.get(fast, 0.0))
    reached = achieved / roof if roof else 0.0
    gain = low / roof if dtype == "float32" and roof else 0.0
    if reached >= COMPUTE_FAR and gain < LOW_PRECISION_GAIN:
        return None
    hint = (f"lower precision: torch.autocast(dtype=torch.{fast}) "
            f"(the {fast} roof is {gain:.1f}x the float32 one on this device)"
            if gain >= LOW_PRECISION_GAIN else
            "larger, better-shaped matmuls (multiples of 64/128), and lower precision for "
            "tensor cores")
    title = ("Compute-bound, far from the roof" if reached < COMPUTE_FAR else
             "Compute-bound in float32, below a faster low-precision roof")
    return Finding(
        "compute_far_from_peak", title,
        f"{share:.0%} of op time is compute-bound at {_rate(achieved, 'FLOP/s')} in "
        f"{dtype}, {reached:.0%} of its {_rate(roof, 'FLOP/s')} roof", hint)


RULES: list[Callable[[ProfileResult], Finding | None]] = [
    memory_bound, overhead_bound, compute_far_from_peak,
]
