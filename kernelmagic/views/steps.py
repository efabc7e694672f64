"""The steps view (``--steps TARGET``): each call of the target, from its ``NAME/step j``
range (``core/range_names.py``), as column arithmetic over the ``EventTable``.

Per step: its wall time (the range's length), the time inside ops during it (their self
CPU time), the GPU work it launched and, with ``--memory``, the bytes held at its end.
Steps are grouped by their inputs' shapes and dtypes (the text after the range's ``: ``):
a generation loop's prefill and decode steps fall apart, a training loop's batches stay
together. When the inputs differ at almost every step (a model without a KV cache sees
the sequence grow by one token each step), steps whose inputs differ only in their sizes
form one group. Two groups, the first holding only each iteration's first step with the
larger input, are named ``prefill`` and ``decode``.

Every figure that sums a step up is a median: a group's times over its steps, its top ops
each op's median self time per step; between the steps, the median iteration's time there
and the ops of the iteration at that median, so that they add up to at most it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from kernelmagic.core.arrays import isin, unique
from kernelmagic.core.events import EventTable, Kind, Window
from kernelmagic.core.op_names import is_compile_event
from kernelmagic.core.range_names import INPUT_SEPARATOR, SYNC_RANGE, parse_step
from kernelmagic.core.step_rows import StepGroupRow, StepRow, StepsSummary
from kernelmagic.views.breakdown import span_index
from kernelmagic.views.ops import is_op, ranges_named
from kernelmagic.views.tree import Figures, in_start_order, memory_running, nearest_ancestor

__all__ = ["MAX_GROUPS", "REPEAT_HINT_CALLS", "StepsView", "steps_view"]

#: More distinct inputs than this: steps whose inputs differ only in sizes are one group.
MAX_GROUPS = 4
#: A module whose forward runs this many times or more at the top level in one run of
#: the code gets the note suggesting ``--steps`` (when it was not given).
REPEAT_HINT_CALLS = 4
#: Ops named per group and between the steps.
TOP_OPS = 3

_NUMBER = re.compile(r"\d+")
_SHAPE = re.compile(r"\(([\d, ]*)\)")


@dataclass
class StepsView:
    """The steps view's rows (``summary`` is None when no step was asked for or found)."""

    rows: list[StepRow] = field(default_factory=list)
    groups: list[StepGroupRow] = field(default_factory=list)
    summary: StepsSummary | None = None


@dataclass
class _Steps:
    """The step ranges found, in time order: event index, iteration, index in it, inputs."""

    idx: np.ndarray
    iteration: np.ndarray
    index: np.ndarray
    inputs: list[str]


def _find_steps(table: EventTable, windows: list[Window], name: str) -> _Steps:
    parsed = {i: p for i, text in enumerate(table.names)
              if (p := parse_step(text, name)) is not None}
    is_step = np.zeros(len(table.names), dtype=bool)
    is_step[list(parsed)] = True
    idx = in_start_order(table, (table.kind == Kind.RANGE) & is_step[table.name])
    it = span_index(table.start[idx], *np.asarray(windows, dtype=np.int64).reshape(-1, 2).T)
    idx, it = idx[it >= 0], it[it >= 0]
    index = np.zeros(idx.size, dtype=np.int64)
    for i in unique(it).tolist():
        mine = it == i
        index[mine] = np.arange(int(mine.sum()))
    return _Steps(idx, it, index, [parsed[int(n)][1] for n in table.name[idx]])


def _merged_label(members: list[str]) -> str:
    """Inputs that share a pattern, each size written as its range: ``x (1, 65…79) int64``."""
    numbers = [[int(x) for x in _NUMBER.findall(m)] for m in members]
    parts = _NUMBER.split(members[0])
    out = [parts[0]]
    for k, rest in enumerate(parts[1:]):
        lo, hi = min(n[k] for n in numbers), max(n[k] for n in numbers)
        out.append(f"{lo}" if lo == hi else f"{lo}…{hi}")
        out.append(rest)
    return "".join(out)


def _group_keys(inputs: list[str]) -> tuple[list[str], dict[str, str]]:
    """Each step's group key, and each key's inputs as the report shows them."""
    distinct = list(dict.fromkeys(inputs))
    if len(distinct) <= MAX_GROUPS:
        return inputs, {k: k for k in distinct}
    keys = [_NUMBER.sub("#", x) for x in inputs]  # inputs alike but for their sizes
    members: dict[str, list[str]] = {}
    for key, text in zip(keys, inputs, strict=True):
        members.setdefault(key, []).append(text)
    return keys, {k: _merged_label(list(dict.fromkeys(v))) for k, v in members.items()}


def _first_elements(inputs: str) -> int:
    """Elements of the first tensor input (0 when none is written)."""
    found = _SHAPE.search(inputs.split(INPUT_SEPARATOR)[0])
    if found is None:
        return 0
    dims = [int(x) for x in _NUMBER.findall(found.group(1))]
    return int(np.prod(dims)) if dims else 1


def _labels(steps: _Steps, keys: list[str], shown: dict[str, str]) -> dict[str, str]:
    """Each group's name: ``prefill``/``decode`` for a generation loop, else its inputs."""
    order = list(dict.fromkeys(keys))
    if len(order) == 2:
        first, rest = order
        firsts = [k for k, i in zip(keys, steps.index.tolist(), strict=True) if i == 0]
        only_first = all(k == first for k in firsts) and keys.count(first) == len(firsts)
        if only_first and _first_elements(shown[first]) > _first_elements(shown[rest]):
            return {first: "prefill", rest: "decode"}
    if len(order) == 1 and not shown[order[0]]:
        return {order[0]: "all steps"}
    return {k: shown[k] or "no tensor inputs" for k in order}


def _top(names: list[str], ids: np.ndarray, values: np.ndarray) -> dict[str, float]:
    """The ``TOP_OPS`` ops with the most time, summed by name (ties: by name)."""
    sums: Counter[int] = Counter()
    for i, v in zip(ids.tolist(), values.tolist(), strict=True):
        sums[i] += v
    ranked = sorted(sums.items(), key=lambda kv: (-kv[1], names[kv[0]]))[:TOP_OPS]
    return {names[i]: v for i, v in ranked if v > 0}


def _top_median(names: list[str], ids: np.ndarray, step: np.ndarray, values: np.ndarray,
                steps: int) -> dict[str, float]:
    """Each op's median self time per step over ``steps`` steps (``step``: each value's
    step, 0 to steps - 1; a step without the op counts 0), the ``TOP_OPS`` largest."""
    if not ids.size or not steps:
        return {}
    kinds, which = np.unique(ids, return_inverse=True)
    per_step = np.zeros((steps, kinds.size))
    np.add.at(per_step, (step, which), values)
    medians = np.median(per_step, axis=0)
    return _top(names, kinds, medians)


def _group_row(label: str, inputs: str, sel: np.ndarray, steps: _Steps, wall: np.ndarray,
               cpu: np.ndarray, device: np.ndarray, grown: np.ndarray, median_it: int,
               top_ops: dict[str, float], compiled: np.ndarray) -> StepGroupRow:
    its = steps.iteration[sel]
    first_of = [sel[its == i][0] for i in unique(its).tolist()]
    firsts = wall[first_of]
    slow = sel[int(np.argmax(wall[sel]))]
    in_median = int((its == median_it).sum())
    return StepGroupRow(
        group=label, inputs=inputs,
        count=in_median if in_median else round(sel.size / max(unique(its).size, 1)),
        median_us=float(np.median(wall[sel])), first_us=float(np.median(firsts)),
        slowest_us=float(wall[slow]), slowest_index=int(steps.index[slow]),
        slowest_iteration=int(steps.iteration[slow]), cpu_us=float(np.median(cpu[sel])),
        device_us=float(np.median(device[sel])), memory_per_step=float(np.median(grown[sel])),
        top_ops=top_ops, first_compiles=int(compiled[first_of].sum()))


def _between(table: EventTable, figures: Figures, windows: list[Window], steps: _Steps,
             wall: np.ndarray, owner: np.ndarray) -> tuple[float, dict[str, float]]:
    """The loop's time outside the steps per iteration (the median over the iterations),
    and the ops that ran there in the iteration at that median (the lower of the two
    middle ones of an even count): on the steps' thread, outside any step and outside
    kernelmagic's own synchronise, their self times add up to at most it."""
    sync = ranges_named(table, SYNC_RANGE)
    outside = []
    for i, (lo, hi) in enumerate(windows):
        ours = sync & (table.start >= lo) & (table.start <= hi)
        ours_us = float(figures.cpu_total[ours].sum())
        outside.append(max(0.0, (hi - lo) / 1000.0 - float(wall[steps.iteration == i].sum())
                           - ours_us))
    if not outside:
        return 0.0, {}
    under_sync = nearest_ancestor(table.parent, sync) >= 0
    at = sorted(range(len(outside)), key=lambda i: (outside[i], i))[(len(outside) - 1) // 2]
    lo, hi = windows[at]
    threads = isin(table.tid, unique(table.tid[steps.idx]))
    ops = np.flatnonzero(is_op(table) & (owner < 0) & ~under_sync & threads
                         & (table.start >= lo) & (table.start <= hi))
    top = _top(table.names, table.name[ops], figures.self_cpu[ops])
    return float(np.median(outside)), _within(top, outside[at])


def _within(parts: dict[str, float], total: float) -> dict[str, float]:
    """``parts`` (largest first) as far as they fit in ``total``: ops on one thread cannot
    take more than its time; one that would (a clock's rounding) ends the list."""
    kept: dict[str, float] = {}
    for name, us in parts.items():
        if sum(kept.values()) + us > total * (1 + 1e-9):
            break
        kept[name] = us
    return kept


def _compiled_steps(table: EventTable, owner: np.ndarray, at: np.ndarray,
                    steps: int) -> np.ndarray:
    """Per step, whether torch.compile compiled inside it (dynamo's timed ranges)."""
    marks = [i for i, text in enumerate(table.names) if is_compile_event(text)]
    inside = np.flatnonzero(isin(table.name, np.asarray(marks, dtype=table.name.dtype))
                            & (owner >= 0)) if marks else np.zeros(0, dtype=np.int64)
    compiled = np.zeros(steps, dtype=bool)
    compiled[at[owner[inside]]] = True
    return compiled


def steps_view(table: EventTable, figures: Figures, windows: list[Window], name: str, *,
               target: str = "", on_device: bool = False, memory: bool = False,
               median_iteration: int = 0) -> StepsView:
    """The steps of the run ``name`` inside ``windows`` (the profiled iterations).

    ``target`` names what was profiled as a step (the note when it was never called);
    ``on_device``: top ops by self device time, memory on the GPU; ``memory``: the bytes
    held after each step (the table's memory records); ``median_iteration``: the
    iteration whose steps count as "per iteration".
    """
    steps = _find_steps(table, windows, name)
    label = target or "the target"
    if not steps.idx.size:
        return StepsView(summary=StepsSummary(
            target=target, note=f"{label} was not called during the profiled iterations"))
    idx = steps.idx
    wall = figures.cpu_total[idx]
    step_mask = np.zeros(table.n, dtype=bool)
    step_mask[idx] = True
    owner = nearest_ancestor(table.parent, step_mask)
    ops = np.flatnonzero(is_op(table) & (owner >= 0))
    at = np.full(table.n, -1, dtype=np.int64)
    at[idx] = np.arange(idx.size)
    cpu = np.bincount(at[owner[ops]], weights=figures.self_cpu[ops], minlength=idx.size)
    device = figures.range_device[idx]
    records = memory_running(table, on_device) if memory else None
    held = grown = np.zeros(idx.size)
    if records is not None:  # the bytes held at each step's end, since its iteration began
        when, running = records
        win_start = np.asarray([w[0] for w in windows], dtype=np.int64)[steps.iteration]
        end, start = running[np.searchsorted(when, [table.end[idx], win_start], side="right")]
        held = end.astype(np.float64) - start.astype(np.float64)
        grown = held - np.where(steps.index > 0, np.roll(held, 1), 0.0)  # since the last step
    keys, shown = _group_keys(steps.inputs)
    labels = _labels(steps, keys, shown)
    own_self = figures.self_device if on_device else figures.self_cpu
    compiled = _compiled_steps(table, owner, at, idx.size)
    groups = []
    key_array = np.asarray(keys, dtype=object)
    place = np.zeros(idx.size, dtype=np.int64)  # each step's place in its group
    for key, group_label in labels.items():
        sel = np.flatnonzero(key_array == key)
        place[sel] = np.arange(sel.size)
        mine = ops[isin(at[owner[ops]], sel)]
        top = _top_median(table.names, table.name[mine], place[at[owner[mine]]],
                          own_self[mine], sel.size)
        groups.append(_group_row(group_label, shown[key], sel, steps, wall, cpu, device, grown,
                                 median_iteration, top, compiled))
    rows = [StepRow(iteration=int(steps.iteration[k]), index=int(steps.index[k]),
                    group=labels[keys[k]], wall_us=float(wall[k]), cpu_us=float(cpu[k]),
                    device_us=float(device[k]), memory_held=float(held[k]),
                    inputs=steps.inputs[k]) for k in range(idx.size)]
    between, between_top = _between(table, figures, windows, steps, wall, owner)
    firsts = wall[steps.index == 0]
    slow = int(np.argmax(wall))
    in_median = int((steps.iteration == median_iteration).sum())
    summary = StepsSummary(
        target=target, steps=in_median, median_us=float(np.median(wall)),
        first_us=float(np.median(firsts)), slowest_us=float(wall[slow]),
        slowest_index=int(steps.index[slow]), slowest_iteration=int(steps.iteration[slow]),
        between_us=between, between_top_ops=between_top, median_iteration=median_iteration)
    return StepsView(rows=rows, groups=groups, summary=summary)
