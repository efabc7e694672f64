"""Hardware-counter ranges (``cuda_profiler_range`` events) joined to the kernels they
measured.

A trace recorded with CUPTI profiler metrics carries one ``cuda_profiler_range`` event per
kernel, its ``args`` the metric values. The event names the kernel but carries no
correlation id, and its timestamps are not the kernel's (the counters are read by
replaying each kernel serialised; in ``a100_cupti_counters.json.gz`` the ranges are laid
end to end, all of one length, across the profiler's span). What does hold is the order:
the k-th range is the k-th kernel run, and with kernels serialised that is the k-th kernel
launched. So the ranges are joined by order to the trace's kernel events when it has as
many, else to its kernel launch calls (``cudaLaunchKernel``, ``cuLaunchKernel``, ...) when
it has as many; each range then takes that event's correlation id, which survives every
later cut of the table. Kineto's range profiler stops at ``counter_metrics.MAX_RANGES``
kernels: exactly that many ranges are the first kernels run, joined to the first kernels or
launches. Any other count (or a CUDA graph launch, which runs many kernels from one call)
joins nothing: the ranges keep their kernel names only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernelmagic.core import counter_metrics
from kernelmagic.core.arrays import unique
from kernelmagic.core.events import EventTable, Kind
from kernelmagic.core.op_names import LAUNCH_CALLS
from kernelmagic.core.units import counted
from kernelmagic.sources.trace_numbers import Number

#: Launch calls that run one kernel each (a graph launch runs many).
KERNEL_LAUNCHES = frozenset(x for x in LAUNCH_CALLS if "Graph" not in x)
#: ``EventTable.meta`` keys: the ranges (list of dicts) and how they were joined.
RANGES_KEY = "counter_ranges"
JOIN_KEY = "counter_join"

#: One range as read: (start ns, kernel name, {metric: value}).
RawRange = tuple[int, str, dict[str, float]]


def metric_values(args: Any) -> dict[str, float]:
    """The numeric values of a counter range's ``args`` (anything else is left out); a
    fraction decoded as its text (``Number``, the streaming reader's) is read as a float."""
    if type(args) is not dict:
        return {}
    return {k: float(v) for k, v in args.items()
            if type(k) is str and type(v) in (int, float, Number)}


def join_ranges(table: EventTable, ranges: list[RawRange]) -> dict[str, Any]:
    """``meta`` entries for ``ranges`` read from ``table``'s source: ``RANGES_KEY``, the
    ranges in run order as ``{"name", "metrics", "correlation"}`` (correlation 0: not
    joined), and ``JOIN_KEY``, one line saying how they were joined."""
    ordered = sorted(ranges, key=lambda r: r[0])
    kernels = np.flatnonzero(table.kind == Kind.KERNEL)
    launch_names = np.fromiter((text in KERNEL_LAUNCHES for text in table.names), dtype=bool,
                               count=len(table.names))
    launches = np.flatnonzero((table.kind == Kind.RUNTIME) & launch_names[table.name])
    graphs = any("Graph" in table.names[int(i)] for i in
                 unique(table.name[table.kind == Kind.RUNTIME]).tolist())
    n = len(ordered)
    capped = n == counter_metrics.MAX_RANGES  # the profiler stopped counting: the first n kernels
    if n and (kernels.size == n or (capped and kernels.size > n)):
        chosen, how = kernels, (f"{counted(n, 'counter range')} joined to the trace's "
                                f"{'first ' if kernels.size > n else ''}"
                                f"{counted(n, 'kernel')} in order")
    elif n and not graphs and (launches.size == n or (capped and launches.size > n)):
        chosen, how = launches, (f"{counted(n, 'counter range')} joined to the "
                                 f"{'first ' if launches.size > n else ''}"
                                 f"{counted(n, 'kernel launch', 'kernel launches')} "
                                 "in order (the trace has no kernel events)")
    else:
        chosen = None
        how = (f"{counted(n, 'counter range')}, {counted(kernels.size, 'kernel')} and "
               f"{counted(launches.size, 'kernel launch', 'kernel launches')}: not joined "
               "(kernels are named, their ops unknown)")
    correlations = [0] * n
    if chosen is not None:
        chosen = chosen[np.argsort(table.start[chosen], kind="stable")][:n]
        correlations = table.correlation[chosen].tolist()
    return {
        RANGES_KEY: [{"name": name, "metrics": metrics, "correlation": int(c)}
                     for (_, name, metrics), c in zip(ordered, correlations, strict=True)],
        JOIN_KEY: how,
    }
