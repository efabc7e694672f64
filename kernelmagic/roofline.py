"""The roofline view (``--roofline``): is each op bound by compute, memory or overhead?

The counts come from one extra, unprofiled run of the cell (``op_counter.count_ops``,
run after the profiled iterations). ``collect_roofline`` joins them to the profiled
session's events:

- An op event whose name the counting run counted, and that no counted op encloses, owns
  its FLOPs and bytes, and its time is its own self time **plus the self time of the
  ops it calls internally** (``aten::addmm``'s internal ``aten::copy_``,
  ``aten::convolution``'s ``aten::mkldnn_convolution``): the counts describe all of that
  work. (Fused ops that call matmuls are opened instead: see ``ops_to_open``.)
- Every other op event (a composite wrapper such as ``aten::linear``, an op only ever
  called from inside another op) keeps its own self time under its own name, with 0
  FLOPs and bytes: its time is dispatch overhead.

Times are self device time on CUDA, self CPU time otherwise. ``classify`` then places
each op against the device's roofs (``kernelmagic/device_peaks.py``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Any

from kernelmagic import torch_compat
from kernelmagic.device_peaks import Peaks
from kernelmagic.op_counter import OpCount
from kernelmagic.rows import RooflineRow

#: An op is overhead-bound when it reaches less than this fraction of *both* roofs
#: (achieved FLOP/s / peak FLOP/s and achieved bytes/s / peak bytes/s). Tiny ops,
#: whose time is dispatch and kernel launch, stay far below 1% (an 8-element multiply
#: on a CPU reaches ~0.1% of the copy bandwidth, on a GPU ~0.001%), while real work
#: stays above it even when slowed down 5-10x (a 16M-element add that page-faults
#: its fresh output on every call still reaches ~5% of the CPU's copy bandwidth).
OVERHEAD_FRACTION = 0.01

BOUNDS = ("compute", "memory", "overhead")


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


def _is_op(event: Any) -> bool:
    return (not torch_compat.is_python_function(event)
            and not torch_compat.is_user_range(event)
            and not torch_compat.is_pseudo_row(event))


def attribute_times(roots: list[Any], counted: set[str],
                    on_device: bool) -> tuple[dict[str, float], dict[str, int]]:
    """Per owner name: time (µs) and calls, by the rule in the module docstring.

    Walks the event tree down from ``roots``: a counted op takes its inclusive time
    (its own and everything below it) and the walk stops there; any other op takes its
    self time and the walk goes on into its children. kernelmagic's own synchronize
    range is skipped.
    """
    time: defaultdict[str, float] = defaultdict(float)
    calls: defaultdict[str, int] = defaultdict(int)
    sync = torch_compat.SYNC_RANGE
    stack = list(roots)
    while stack:
        event = stack.pop()
        name = str(event.name)
        if name == sync:
            continue
        if _is_op(event):
            calls[name] += 1
            if name in counted:
                time[name] += torch_compat.total_time(event, on_device)
                continue
            time[name] += torch_compat.self_time(event, on_device)
        stack.extend(event.cpu_children)
    return dict(time), dict(calls)


def build_rows(times: dict[str, float], calls: dict[str, int], counts: dict[str, OpCount],
               peaks: Peaks) -> tuple[list[RooflineRow], Peaks]:
    """One ``RooflineRow`` per op with time, most time first, and the roofs they used.

    A roof is a ceiling: when an op went faster than a measured peak (a noisy
    measurement), that roof is raised to the op's rate before classifying.
    """
    rates = []
    for key, spent in times.items():
        if spent <= 0:
            continue
        count = calls.get(key, 0)
        seen = counts.get(key)
        flops = seen.flops / seen.calls if seen and seen.calls else 0.0
        moved = seen.bytes / seen.calls if seen and seen.calls else 0.0
        seconds = spent / 1e6
        rates.append((key, count, flops, moved, seen, spent,
                      flops * count / seconds, moved * count / seconds))
    peaks = raise_roofs(peaks, [(seen.dtype if seen else "", f, b)
                                for *_, seen, _, f, b in rates])
    rows = []
    for key, count, flops, moved, seen, spent, flops_per_s, bytes_per_s in rates:
        dtype = seen.dtype if seen else ""
        bound, reached = classify(flops_per_s, bytes_per_s, dtype, peaks)
        rows.append(RooflineRow(
            key=key, count=count, flops=flops, bytes=moved,
            intensity=flops / moved if moved > 0 else 0.0,
            flops_per_s=flops_per_s, bytes_per_s=bytes_per_s, bound=bound,
            time=spent, dtype=dtype, roof_share=reached,
            counted=seen is not None and not seen.opened))
    return sorted(rows, key=lambda r: (-r.time, r.key)), peaks


def raise_roofs(peaks: Peaks, rates: list[tuple[str, float, float]]) -> Peaks:
    """``peaks`` with each roof at least the best (dtype, FLOP/s, bytes/s) achieved."""
    flops = dict(peaks.flops_per_s)
    bandwidth = peaks.bytes_per_s
    raised = []
    for dtype, flops_per_s, bytes_per_s in rates:
        roof = dtype if dtype in flops else "float32"
        if flops_per_s > flops.get(roof, 0.0):
            flops[roof] = flops_per_s
            raised.append(roof)
        if bytes_per_s > bandwidth:
            bandwidth = bytes_per_s
            raised.append("memory")
    if not raised:
        return peaks
    note = (f"{', '.join(sorted(set(raised)))} roof raised to the fastest op's rate "
            "(the peak measurement saw less)")
    return replace(peaks, flops_per_s=flops, bytes_per_s=bandwidth,
                   note="; ".join(n for n in (peaks.note, note) if n))


def ops_to_open(prof: Any) -> frozenset[str]:
    """Ops without a FLOP formula that the profile shows calling ops that have one.

    The counting run opens them (``op_counter``): a fused kernel's matmuls count where
    their time is, not as 0 FLOPs of the fused op.
    """
    formula_ops = torch_compat.flop_formula_names()
    found: set[str] = set()
    for event in torch_compat.all_events(prof):
        if str(event.name) not in formula_ops or not torch_compat.is_host_event(event):
            continue
        node = event.cpu_parent
        while node is not None:
            name = str(node.name)
            if name in formula_ops:
                break  # e.g. convolution -> _convolution: the outer one has the formula
            if _is_op(node):
                found.add(name)
            node = node.cpu_parent
    return frozenset(found)


def collect_roofline(prof: Any, counts: dict[str, OpCount], peaks: Peaks,
                     on_device: bool) -> tuple[list[RooflineRow], Peaks]:
    """The roofline rows of a finished session and the roofs they were placed under."""
    counted = {k for k, c in counts.items() if (c.flops > 0 or c.bytes > 0) and not c.opened}
    roots = [e for e in torch_compat.all_events(prof)
             if e.cpu_parent is None and torch_compat.is_host_event(e)]
    times, calls = attribute_times(roots, counted, on_device)
    return build_rows(times, calls, counts, peaks)


def verdict(rows: list[RooflineRow]) -> dict[str, float]:
    """The share of the ops' time in each regime: compute, memory, overhead."""
    total = sum(r.time for r in rows)
    shares = {b: 0.0 for b in BOUNDS}
    if total <= 0:
        return shares
    for r in rows:
        shares[r.bound] += r.time / total
    return shares
