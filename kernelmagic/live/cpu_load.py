"""What else used the CPU while the profiled iterations ran (``CpuLoad``).

Two readings of the counters, one before the timed loop and one after, nothing inside it:
the busy time of the cores this process may run on (``/proc/stat``'s per-CPU lines, Linux),
this process's own CPU time (``os.times()``, all its threads) and the wall clock. Busy time
that is not ours is other processes'. Where ``/proc/stat`` is missing, the one-minute load
average stands in (the runnable processes beyond this one's threads). No torch here.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from kernelmagic.core.machine import CpuLoad

PROC_STAT = "/proc/stat"
#: ``/proc/stat`` columns after the name: user nice system idle iowait irq softirq steal.
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)  # user, nice, system, irq, softirq, steal (not idle, iowait)


@dataclass(frozen=True)
class Snapshot:
    """The counters at one moment: the cores' busy seconds (None without ``/proc/stat``),
    this process's CPU seconds, the wall clock."""

    busy_s: float | None
    own_s: float
    wall_s: float


def cores() -> list[int]:
    """The CPUs this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def busy_seconds(stat_text: str, cpus: list[int]) -> float | None:
    """The busy seconds of ``cpus`` since boot, from the text of ``/proc/stat``."""
    wanted = {f"cpu{n}" for n in cpus}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    busy, found = 0, 0
    for line in stat_text.splitlines():
        parts = line.split()
        if parts and parts[0] in wanted:
            values = [int(x) for x in parts[1:9]]
            busy += sum(values[i] for i in _BUSY_COLUMNS if i < len(values))
            found += 1
    return busy / tick if found else None


def snapshot(cpus: list[int] | None = None) -> Snapshot:
    """Read the counters once (well under a millisecond; never inside the timed loop)."""
    try:
        # bytes, decoded by the C fast path: a text file's decoder is Python code
        # (encodings/ascii.py) that a profiler recording Python frames would record
        with open(PROC_STAT, "rb") as f:
            text = f.read().decode("ascii", "replace")
        busy = busy_seconds(text, cpus if cpus is not None else cores())
    except OSError:
        busy = None
    times = os.times()
    return Snapshot(busy_s=busy, own_s=times.user + times.system, wall_s=time.perf_counter())


def between(before: Snapshot, after: Snapshot, n_cores: int, torch_threads: int) -> CpuLoad:
    """The load over the span of the two snapshots: other processes' CPU time in cores
    (busy time not this process's, over the wall time), this process's own."""
    wall = max(after.wall_s - before.wall_s, 1e-9)
    own = max(0.0, after.own_s - before.own_s)
    load = _load_average()
    if before.busy_s is not None and after.busy_s is not None:
        other = max(0.0, (after.busy_s - before.busy_s) - own) / wall
    else:  # no per-core counters: the runnable processes beyond ours, from the load average
        other = max(0.0, load - own / wall)
    return CpuLoad(cores=n_cores, torch_threads=torch_threads, other_cores=round(other, 3),
                   own_cores=round(own / wall, 3), load_average=load,
                   seconds=round(wall, 6))


def _load_average() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return 0.0
