"""Findings from the roofline view (``--roofline``): the regime that holds the time, and
its remedy. Each rule is a pure function of a ``ProfileResult``, like the other findings;
``kernelmagic.findings.find`` lists these with the rest, by the share of the iteration
each explains.

**Unexplained by the roofline.** Rows whose ``bound`` is ``unexplained``
(``kernelmagic/core/roofline_bounds.py`` decides: no FLOPs, far below the memory roof, and a
name that says random numbers, sorting or indexing) are limited by neither roof: by the
generator's arithmetic (not counted as FLOPs), by comparisons and data-dependent moves, or
by scattered reads. ``unexplained_by_roofline`` names them, with ``REMEDIES`` for each kind.
"""

from __future__ import annotations

from collections.abc import Callable

from kernelmagic.core.roofline_bounds import OVERHEAD_FRACTION, UNEXPLAINED_REACH, work_kind
from kernelmagic.core.rows import RooflineRow
from kernelmagic.core.units import counted, format_fixed, format_ratio, percent, si
from kernelmagic.findings.base import NAMED, Finding, of_wall
from kernelmagic.findings.device import fewer_bytes, precision
from kernelmagic.results.result import ProfileResult

REGIME_SHARE = 0.5        # memory- or overhead-bound ops holding at least this share of time
COMPUTE_SHARE = 0.3       # compute-bound ops' share of time worth a precision hint
COMPUTE_FAR = 0.5         # compute-bound ops reaching less than this share of their roof
LOW_PRECISION_GAIN = 2.0  # or in float32 where the bf16/fp16 roof is this many times higher
UNEXPLAINED_SHARE = 0.2   # unexplained ops holding at least this share of op time

#: What to try for each kind of work the roofline does not model
#: (``kernelmagic.core.roofline_bounds.UNEXPLAINED_PATTERNS``).
REMEDIES: dict[str, str] = {
    "random numbers": "for dropout at inference, model.eval() removes it; otherwise draw "
                      "fewer random numbers, or let torch.compile fuse dropout's mask into "
                      "its neighbours",
    "sorting": "sort less: topk or kthvalue instead of a full sort, sort once outside the "
               "loop, or avoid unique (it sorts and synchronises)",
    "indexing": "index contiguous tensors with sorted indices; replace nonzero/masked_select "
                "(they synchronise and give data-dependent shapes) with masks and torch.where",
}


def _in(result: ProfileResult, bound: str) -> tuple[list[RooflineRow], float]:
    """The rows of ``bound``, and their share of op time."""
    rows = [r for r in result.roofline if r.bound == bound]
    return rows, result.roofline_verdict.get(bound, 0.0)


def _share_of_iteration(result: ProfileResult, rows: list[RooflineRow]) -> float:
    """The rows' time per iteration over the iteration (at most 1)."""
    return of_wall(result, sum(r.time for r in rows) / result.iters)


def _names(result: ProfileResult, rows: list[RooflineRow],
           show: Callable[[RooflineRow], str]) -> str:
    """The first ``NAMED`` rows, each with its share of op time and ``show(row)``."""
    total = sum(r.time for r in result.roofline)
    return ", ".join(f"{r.key} {percent(r.time / total)} ({show(r)})" for r in rows[:NAMED])


def memory_bound(result: ProfileResult) -> Finding | None:
    rows, share = _in(result, "memory")
    if share < REGIME_SHARE:
        return None
    peak = float(result.roofline_peaks.get("bytes_per_s", 0.0))
    named = _names(result, rows, lambda r: f"{si(r.bytes_per_s, 'B/s')}, "
                                           f"{percent(r.bytes_per_s / peak)} of the "
                                           "memory roof"
                   if peak else si(r.bytes_per_s, "B/s"))
    return Finding(
        "memory_bound", "Most of the time is memory-bound",
        f"{percent(share)} of op time is in ops limited by memory bandwidth "
        f"(peak {si(peak, 'B/s')}): {named}",
        "move fewer bytes: fuse chains of elementwise ops and reductions with torch.compile "
        f"(one pass over memory instead of one per op), and {fewer_bytes(result)}",
        _share_of_iteration(result, rows))


def overhead_bound(result: ProfileResult) -> Finding | None:
    rows, share = _in(result, "overhead")
    if share < REGIME_SHARE:
        return None
    calls = sum(r.count for r in rows) / result.iters
    per_call = sum(r.time for r in rows) / max(1, sum(r.count for r in rows))
    named = _names(result, rows, lambda r: f"{percent(r.roof_share)} of its nearer roof")
    return Finding(
        "overhead_bound", "Most of the time is overhead, not work",
        f"{percent(share)} of op time is in ops that reach under "
        f"{percent(OVERHEAD_FRACTION)} of both roofs "
        f"({counted(calls, 'call')} per iteration, {format_fixed(per_call, 'µs')} each): {named}",
        "give each op more work and launch fewer of them: larger batches, "
        "torch.compile (fuses ops), and on CUDA CUDA graphs "
        "(torch.compile(mode=\"reduce-overhead\"))", _share_of_iteration(result, rows))


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
    device = "cuda" if result.profiles_device else "cpu"
    if gain >= LOW_PRECISION_GAIN:
        hint = (f'lower precision: torch.autocast("{device}", dtype=torch.{fast}) '
                f"(the {fast} roof is {format_ratio(gain, 1)} the float32 one on this device)")
    else:  # better shapes, and the device's faster precision, if any
        p = precision(result)
        also = f", and {p.call}" if p.call else f"; {p.note}" if p.note else ""
        hint = f"larger, better-shaped matmuls (multiples of 64/128){also}"
    title = ("Compute-bound, far from the roof" if reached < COMPUTE_FAR else
             "Compute-bound in float32, below a faster low-precision roof")
    return Finding(
        "compute_far_from_peak", title,
        f"{percent(share)} of op time is compute-bound at {si(achieved, 'FLOP/s')} in "
        f"{dtype}, {percent(reached)} of its {si(roof, 'FLOP/s')} roof", hint,
        _share_of_iteration(result, rows))


def unexplained_by_roofline(result: ProfileResult) -> Finding | None:
    """Ops the roofline cannot explain holding ``UNEXPLAINED_SHARE`` of op time."""
    rows, share = _in(result, "unexplained")
    if share < UNEXPLAINED_SHARE or not rows:
        return None
    kinds = {r.key: work_kind(r.key) or "" for r in rows}
    named = _names(result, rows, lambda r: f"{kinds[r.key]}, {percent(r.roof_share)} of the "
                                           "memory roof")
    order = sorted({k for k in kinds.values() if k},
                   key=lambda k: -sum(r.time for r in rows if kinds[r.key] == k))
    return Finding(
        "unexplained_by_roofline", "Time the roofline cannot explain",
        f"{percent(share)} of op time is in ops with no FLOPs counted that reach under "
        f"{percent(UNEXPLAINED_REACH)} of the memory roof: {named}; they are bound by "
        f"neither roof but by {' and '.join(order)}, so neither fusing for bandwidth nor lower "
        "precision is the fix",
        "; ".join(REMEDIES[k] for k in order), _share_of_iteration(result, rows))


RULES: list[Callable[[ProfileResult], Finding | None]] = [
    memory_bound, overhead_bound, compute_far_from_peak, unexplained_by_roofline,
]
