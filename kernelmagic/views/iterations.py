"""The profiled iterations of an ``EventTable``: one rule for live runs and trace files.

First match wins:

1. **kernelmagic's ranges**: one iteration per ``NAME/iter i`` range (what a live run and
   ``%%profile --trace`` record). Given ``name``, only that run's ranges count; without
   it, the NAME that also has its outer range ``NAME`` (else any NAME), the one with the
   most iterations. ``Iterations.name`` is that NAME.
2. **ProfilerStep**: one iteration per ``ProfilerStep#N`` range (what
   ``torch.profiler.profile(schedule=...)`` with ``prof.step()`` records). One thread
   steps the profiler: when steps appear on several, the busiest thread's count. The
   closing step is left out when it is the stub torch opens at the last ``prof.step()``
   and closes as the profiler stops a moment later: it holds no op while the steps before
   it do, and it is shorter than any of them (a last step as long as a real one stays).
   A step that runs on past the last recorded event ends there (``recorded_end``).
3. Else the **whole trace** is one iteration, from its first to its last op, range or GPU
   event (any event, when it holds nothing else).

Windows come in time order, as ``(start, end)`` ns from the trace's start. A live table
always has its ``NAME/iter i`` ranges, so a live run's windows are those ranges.

An iteration cut short by Ctrl-C is taken out of the table before any view
(``without_range``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernelmagic.core.arrays import unique
from kernelmagic.core.events import FIRST_NAMED_LANE, EventTable, Kind, Window, select
from kernelmagic.core.range_names import ITERATION_RANGE
from kernelmagic.views.ops import ranges_named
from kernelmagic.views.tree import nearest_ancestor


@dataclass(frozen=True)
class Iterations:
    """The profiled iterations of a table, and where they were found.

    ``name``: the NAME of kernelmagic's ``NAME/iter i`` ranges; "" for the other two.
    ``source``: "kernelmagic ranges", "ProfilerStep" or "whole trace".
    """

    name: str
    windows: list[Window]
    source: str

    @property
    def timings(self) -> list[float]:
        """Each window's duration in seconds."""
        return [(end - start) / 1e9 for start, end in self.windows]


def find_iterations(table: EventTable, name: str | None = None) -> Iterations:
    """The iterations of ``table`` (see the module's docstring); ``name``: the run's name,
    when known (a live run), else whichever run's ranges the table holds."""
    ours = _our_iterations(table, name)
    if ours is not None:
        return ours
    steps = np.flatnonzero(table.kind == Kind.STEP)
    if steps.size:
        real = _real_steps(table, steps)  # in time order
        whole = list(zip(table.start[real].tolist(), table.end[real].tolist(), strict=True))
        last = recorded_end(table)
        cut = whole if last is None else [(s, min(e, last)) for s, e in whole if last > s]
        return Iterations("", cut or whole, "ProfilerStep")  # (all after it: kept whole)
    seen = np.flatnonzero((table.kind != Kind.OTHER) & (table.kind != Kind.MEMORY))
    if not seen.size:
        seen = np.arange(table.n)
    if not seen.size:
        return Iterations("", [], "whole trace")
    return Iterations("", [(int(table.start[seen].min()), int(table.end[seen].max()))],
                      "whole trace")


#: The table's ``meta`` key that keeps ``recorded_end`` once the events outside the
#: iterations, the session's span among them, are left out (``io/traces.py``).
RECORDED_END_KEY = "recorded_end"


def recorded_end(table: EventTable) -> int | None:
    """Where the recording ends, where the trace says so: it holds the profiler's session
    (Kineto's "PyTorch Profiler (0)", on a lane of its own), and the recording ends with
    the last event but a ``ProfilerStep`` range, which can run on past it (the profiler
    stopped inside the step, whose range closes later: 13 s later in ``a100_triton``).
    A step's window ends there (rule 2), and the trust checks say by how much it ran past
    (``views/dependencies.py: trust_checks``). None where the trace does not say (a table
    built by hand, another tool's trace): no step is cut."""
    kept = table.meta.get(RECORDED_END_KEY)  # (a trace's table once cut to its iterations)
    if kept is not None:
        return int(kept)
    session = (table.kind == Kind.OTHER) & (table.tid <= FIRST_NAMED_LANE)
    others = table.kind != Kind.STEP
    if not session.any() or not others.any():
        return None
    return int(table.end[others].max())


def iteration_windows(table: EventTable, name: str | None = None) -> list[Window]:
    """``find_iterations(table, name).windows``."""
    return find_iterations(table, name).windows


def _our_iterations(table: EventTable, name: str | None) -> Iterations | None:
    """kernelmagic's ``NAME/iter i`` ranges (rule 1), or None when there are none."""
    ranges = np.flatnonzero(table.kind == Kind.RANGE)
    groups: dict[str, list[tuple[int, int]]] = {}
    outer: set[str] = set()
    for name_id in unique(table.name[ranges]).tolist():
        text = table.names[name_id]
        found = ITERATION_RANGE.match(text)
        if found is None:
            outer.add(text)
            continue
        if name is not None and found.group(1) != name:
            continue
        rows = ranges[table.name[ranges] == name_id]
        groups.setdefault(found.group(1), []).extend((int(found.group(2)), int(i)) for i in rows)
    named = {k: v for k, v in groups.items() if k in outer} or groups
    if not named:
        return None
    chosen = max(named, key=lambda k: (len(named[k]), k))
    order = sorted(named[chosen], key=lambda pair: (int(table.start[pair[1]]), pair[0]))
    return Iterations(chosen, [(int(table.start[i]), int(table.end[i])) for _, i in order],
                      "kernelmagic ranges")


def _real_steps(table: EventTable, steps: np.ndarray) -> np.ndarray:
    """The busiest thread's steps, in time order, without the closing stub (rule 2)."""
    tids, counts = unique(table.tid[steps], return_counts=True)
    steps = steps[table.tid[steps] == tids[np.argmax(counts)]]
    steps = steps[np.argsort(table.start[steps], kind="stable")]
    op_starts = np.sort(table.start[table.kind == Kind.OP])
    holds = (np.searchsorted(op_starts, table.end[steps], "right")
             > np.searchsorted(op_starts, table.start[steps], "left"))
    if steps.size < 2 or holds[-1] or not holds[:-1].any():
        return steps
    length = table.end[steps] - table.start[steps]
    if length[-1] < length[:-1][holds[:-1]].min():
        return steps[:-1]
    return steps


def without_range(table: EventTable, range_name: str) -> EventTable:
    """``table`` less the range ``range_name`` and everything that ran in it.

    Left out: the range itself, every CPU-side event under it (any depth), CPU-side
    events of other threads and memory records that started inside its span
    (autograd's backward threads), and the GPU work any of those launched. Everything else,
    the completed iterations included, is unchanged.
    """
    ranges = ranges_named(table, range_name)
    if not ranges.any():
        return table
    drop = ranges | (nearest_ancestor(table.parent, ranges) >= 0)
    cpu_side = table.device < 0
    for i in np.flatnonzero(ranges).tolist():
        start, end = int(table.start[i]), int(table.end[i])
        drop |= cpu_side & (table.start >= start) & (table.start < end)
    launched = table.launcher >= 0
    drop[launched] |= drop[table.launcher[launched]]
    return select(table, ~drop)
