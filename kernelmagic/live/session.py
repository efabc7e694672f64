"""A finished torch profiler session's raw Kineto events -> ``EventTable``.

Reads ``prof.kineto_results.events()`` once, each raw attribute into a list by one
comprehension, never touching ``prof.function_events`` (torch's slow parse). What
torch's parse (``torch/autograd/profiler.py: _parse_kineto_results``) does to the raw
events is reproduced here so the report's numbers stay torch's:

- the utility events torch ignores (``profiler::_record_function_*``, ``aten::is_leaf``,
  ``aten::output_nr``, ``aten::_version``, hidden events) are dropped; ``[memory]``
  records become MEMORY instants (CPU ones on device -1), not events of the tree
- names are demangled as torch's ``StringTable`` does (once per distinct name)
- a CPU event starting and ending on different threads (or flagged async) stays out of
  the tree (``tid`` -1), as torch keeps async events out of it
- a runtime call (``cudaLaunchKernel``) is moved to the thread of the op it is linked
  to, and each GPU event is attributed (``launcher``) to the op (or range) whose
  correlation id is its linked correlation id, as torch's ``FunctionEvent.kernels``;
  unlike torch, never to a runtime call or a profiler ``overhead`` event that merely
  shares the number (their CUPTI ids are counted apart from the ops' ids)
- each event's kind comes from the rules the trace readers apply too
  (``kernelmagic/core/event_rules.py``): ``overhead`` events (Kineto's "Activity Buffer
  Request") are OTHER, not op rows
- a range's GPU-side copy (``gpu_user_annotation``) keeps no correlation id: Kineto gives
  it its CPU range's id (no linked id), a number from the ops' count that may equal a
  runtime call's CUPTI id; torch attaches it to nothing then, and so does kernelmagic
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from kernelmagic.core.event_rules import (
    MEMORY_NAME,
    NAMED_KINDS,
    categories_meta,
    category_kind,
    known_category,
    name_kind,
)
from kernelmagic.core.events import (
    NO_PARENT,
    EventTable,
    Kind,
    TableBuilder,
    derive_links,
    key_finder,
    table_of_columns,
)
from kernelmagic.core.op_names import is_runtime_call

_IGNORED = frozenset({
    "[OutOfMemory]", "profiler::_record_function_enter",
    "profiler::_record_function_enter_new", "profiler::_record_function_exit",
    "aten::is_leaf", "aten::output_nr", "aten::_version",
})

_D = torch.autograd.DeviceType
_CPU_MEMORY = {_D.CPU, _D.MKLDNN, _D.IDEEP}
_DEVICE_MEMORY = {_D.CUDA, _D.PrivateUse1, _D.HIP, _D.XPU}
# What torch attaches to ops as kernels, and MTIA's device work (torch's parse leaves it
# unattached; its category, ``mtia_ccp_events``, is device work by the shared rules).
_GPU_WORK = {_D.CUDA, _D.PrivateUse1, _D.XPU, _D.MTIA}


def _demangle(name: str) -> str:
    return torch._C._demangle(name) if len(name) > 1 else name


#: A Python frame recorded by ``with_stack``: ``file.py(12): f``, a built-in, a module.
_PYTHON_NAME = re.compile(r"^(.+\(\d+\): .+|<built-in (method|function) .+>|nn\.Module: .+)$")


def activity_types(events: list[Any], event_type: Any) -> list[str]:
    """Kineto's activity type of each event (``cpu_op``, ``kernel``, ...).

    torch reads it with ``activity_type()`` from 2.12 on; before (2.11 has neither it
    nor ``is_python_function()``), it is worked out as torch's own parse did: the
    device type says CPU or GPU, ``is_user_annotation()`` says range, and names say
    the rest (runtime calls, memcpy, memset, Python frames, profiler overhead).
    """
    if hasattr(event_type, "activity_type"):
        return list(map(event_type.activity_type, events))
    cpu = torch.autograd.DeviceType.CPU
    on_cpu = [event.device_type() == cpu for event in events]
    ranges = [event.is_user_annotation() for event in events]
    # A range's copy on the GPU timeline carries the CPU range's name.
    range_names = {e.name() for e, c, r in zip(events, on_cpu, ranges, strict=True) if c and r}
    out = []
    for event, here, is_range in zip(events, on_cpu, ranges, strict=True):
        name = event.name()
        if name == MEMORY_NAME:
            out.append("cpu_instant_event")
        elif here:
            if is_range:
                out.append("user_annotation")
            elif name == "Activity Buffer Request":
                out.append("overhead")
            elif is_runtime_call(name):  # where torch cannot say: cudaLaunchKernel, ...
                out.append("cuda_runtime")
            elif _PYTHON_NAME.match(name):
                out.append("python_function")
            else:
                out.append("cpu_op")
        elif is_range or name in range_names:
            out.append("gpu_user_annotation")
        elif name.startswith("Memcpy"):
            out.append("gpu_memcpy")
        elif name.startswith("Memset"):
            out.append("gpu_memset")
        else:
            out.append("kernel")
    return out


class _RawEvents:
    """A session's raw events once their names and activity types are interned: what the
    steps of ``table_from_session`` read, one column at a time."""

    def __init__(self, events: list[Any]) -> None:
        self.events = events
        self.event_type = type(events[0])
        names = list(map(self.event_type.name, events))
        distinct: dict[str, None] = {"": None}  # id 0: the empty text (no shapes)
        distinct.update(dict.fromkeys(names))
        self.distinct_names = distinct
        self.name_ids = {x: i for i, x in enumerate(distinct)}
        self.name = np.fromiter(map(self.name_ids.__getitem__, names), dtype=np.int32,
                                count=len(names))
        del names
        activities = activity_types(events, self.event_type)
        self.activity_ids = {x: i for i, x in enumerate(dict.fromkeys(activities))}
        self.activity = np.fromiter(map(self.activity_ids.__getitem__, activities),
                                    dtype=np.int16, count=len(activities))

    @property
    def n(self) -> int:
        return len(self.events)

    def column(self, method: str, dtype: Any) -> np.ndarray:
        """One raw attribute of every event (``start_ns``, ``correlation_id``, ...)."""
        return np.fromiter(map(getattr(self.event_type, method), self.events), dtype=dtype,
                           count=len(self.events))

    def drop_ignored(self) -> None:
        """Leave out the utility events torch's parse ignores, and hidden events."""
        ignored = np.fromiter((text in _IGNORED for text in self.name_ids), dtype=bool,
                              count=len(self.name_ids))  # per name id (ids in dict order)
        keep = ~ignored[self.name]
        if hasattr(self.event_type, "is_hidden_event"):  # not in every torch release
            keep &= ~self.column("is_hidden_event", bool)
        if not keep.all():
            self.events = [self.events[i] for i in np.flatnonzero(keep).tolist()]
            self.name, self.activity = self.name[keep], self.activity[keep]


def table_from_session(prof: Any, *, shapes: bool = False, flops: bool = False,
                       on_events: Callable[[int], Any] | None = None,
                       python: bool = True) -> EventTable:
    """The session's events as an ``EventTable`` with parents and launchers derived.

    ``python=False`` leaves out the Python frames ``with_stack`` recorded (a session
    recorded with them for another reason than ``--stack``).

    ``on_events`` is told the number of raw events before they are read (progress).
    """
    results = prof.kineto_results
    origin = int(results.trace_start_ns())
    events = results.events()
    if on_events is not None:
        on_events(len(events))
    if not events:
        return derive_links(TableBuilder().freeze(origin_ns=origin))
    raw = _RawEvents(events)
    del events
    raw.drop_ignored()
    distinct = [_demangle(x) if x else x for x in raw.distinct_names]
    is_memory = raw.name == raw.name_ids.get(MEMORY_NAME, -1)
    kind, on_cpu = _kinds(raw.events, raw.activity_ids, raw.activity, raw.distinct_names,
                          raw.name, is_memory)
    start = raw.column("start_ns", np.int64) - origin
    end = raw.column("end_ns", np.int64) - origin
    tid = _tree_threads(raw, on_cpu & ~is_memory)
    correlation, linked = _correlation_ids(raw, (kind == Kind.RUNTIME) | ~on_cpu)
    device = np.full(raw.n, -1, dtype=np.int16)
    nbytes = _memory_records(raw, is_memory, kind, device, start, end)
    launcher = _device_work(raw, ~on_cpu & ~is_memory, kind, device, tid, correlation,
                            linked)
    columns = {"kind": kind, "name": raw.name, "start": start, "end": end, "tid": tid,
               "device": device, "correlation": correlation, "launcher": launcher,
               "nbytes": nbytes,
               "flops": (raw.column("flops", np.float64) if flops
                         else np.zeros(raw.n, dtype=np.float64)),
               "shapes": (_text_ids(raw, kind, distinct, _shapes_text) if shapes
                          else np.zeros(raw.n, np.int32))}
    if shapes:  # torch records the inputs' dtypes with their shapes
        columns["dtypes"] = _text_ids(raw, kind, distinct, _dtypes_text)
    # The columns of the trace fields without a rule (``core/events.py``: ``TRACE_FIELDS``)
    # hold their defaults: a live event has no ``args``.
    table = table_of_columns(distinct, columns, origin,
                             _categories_meta(raw, end - start, is_memory))
    keep = device != -2  # memory records of other devices count nowhere
    if not python:
        keep &= kind != Kind.PYTHON
    if not keep.all():
        from kernelmagic.core.events import select

        table = select(table, keep)
    return derive_links(table)


def _categories_meta(raw: _RawEvents, duration: np.ndarray,
                     is_memory: np.ndarray) -> dict[str, Any]:
    """What the activity types say, as the trace readers put it in ``meta``
    (``event_rules.categories_meta``): the backend they name, and the events and time (ns)
    of each type no rule knows."""
    unknown = {i: text for text, i in raw.activity_ids.items() if not known_category(text)}
    if not unknown:
        return categories_meta(raw.activity_ids, ())
    size = len(raw.activity_ids)
    counted = ~is_memory
    events = np.bincount(raw.activity[counted], minlength=size)
    ns = np.bincount(raw.activity[counted], weights=duration[counted], minlength=size)
    return categories_meta(raw.activity_ids, ((text, int(events[i]), int(ns[i]))
                                              for i, text in unknown.items()))


def _tree_threads(raw: _RawEvents, cpu_events: np.ndarray) -> np.ndarray:
    """Each event's thread; -1 (out of the tree) for a CPU event that starts and ends on
    different threads or is flagged async, as torch keeps async events out of it."""
    started_on = raw.column("start_thread_id", np.uint64)
    # as int64: ids past 2**63 (seen on some frames) become small codes
    small = not started_on.size or int(started_on.max()) < 2**62
    tid = (started_on if small else np.unique(started_on, return_inverse=True)[1]).astype(np.int64)
    asynchronous = cpu_events & (raw.column("is_async", bool)
                                 | (raw.column("end_thread_id", np.uint64) != started_on))
    tid[asynchronous] = -1
    return tid


def _correlation_ids(raw: _RawEvents, linking: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(correlation id, linked correlation id) per event; zeros when no event can link
    (``linking``: runtime calls and GPU events; none on a CPU-only run)."""
    if linking.any():
        return (raw.column("correlation_id", np.int64),
                raw.column("linked_correlation_id", np.int64))
    correlation = np.zeros(raw.n, dtype=np.int64)
    return correlation, correlation


def _memory_records(raw: _RawEvents, is_memory: np.ndarray, kind: np.ndarray,
                    device: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``[memory]`` records become MEMORY instants on their device (-1 CPU, -2 another
    device's); their bytes per event (0 elsewhere). Sets ``kind``, ``device``, ``end``."""
    nbytes = np.zeros(raw.n, dtype=np.int64)
    mem_idx = np.flatnonzero(is_memory).tolist()
    if not mem_idx:
        return nbytes
    events = raw.events
    kind[mem_idx] = Kind.MEMORY
    nbytes[mem_idx] = [events[i].nbytes() for i in mem_idx]
    mem_device = [events[i].device_type() for i in mem_idx]
    index = [events[i].device_index() for i in mem_idx]
    device[mem_idx] = [-1 if d in _CPU_MEMORY else (ix if d in _DEVICE_MEMORY else -2)
                       for d, ix in zip(mem_device, index, strict=True)]
    end[mem_idx] = start[mem_idx]
    return nbytes


def _device_work(raw: _RawEvents, on_gpu: np.ndarray, kind: np.ndarray, device: np.ndarray,
                 tid: np.ndarray, correlation: np.ndarray, linked: np.ndarray) -> np.ndarray:
    """GPU events' devices and streams (as ``tid``), and each one's ``launcher``: the op
    or range whose correlation id is its linked one (``NO_PARENT`` elsewhere)."""
    launcher = np.full(raw.n, NO_PARENT, dtype=np.int32)
    gpu_idx = np.flatnonzero(on_gpu).tolist()
    if not gpu_idx:
        return launcher
    events = raw.events
    device_types = {i: events[i].device_type() for i in gpu_idx}
    device[gpu_idx] = [events[i].device_index() for i in gpu_idx]
    tid[gpu_idx] = [events[i].device_resource_id() for i in gpu_idx]
    # A range's GPU-side copy carries its CPU range's id, not a CUPTI id: kept, it
    # could equal a runtime call's id and derive_links would hand the copy's whole
    # span to the op around that call (torch links it by linked id only, usually 0).
    ranges = np.asarray(gpu_idx)[kind[gpu_idx] == Kind.GPU_RANGE]
    correlation[ranges] = 0
    _link_device_work(events, gpu_idx, device_types, kind, tid, correlation, linked,
                      launcher)
    return launcher


def _shapes_text(event: Any) -> str:
    """An op's input shapes: ``[8, 16], [16, 4]`` (``[]``: no tensor)."""
    return ", ".join(str(list(s)) if s else "[]" for s in event.shapes())


def _dtypes_text(event: Any) -> str:
    """An op's input dtypes as a trace's ``Input type`` reads: ``float, float, Scalar``."""
    return ", ".join(event.dtypes())


def _text_ids(raw: _RawEvents, kind: np.ndarray, distinct: list[str],
              text_of: Any) -> np.ndarray:
    """Each op's ``text_of(event)`` as an id into ``distinct`` (new texts are appended to
    it; 0: none, or not an op)."""
    col = np.zeros(raw.n, dtype=np.int32)
    known = {t: i for i, t in enumerate(distinct)}
    op_idx = np.flatnonzero(kind == Kind.OP).tolist()
    ids = []
    for i in op_idx:
        text = text_of(raw.events[i])
        found = known.get(text) if text else 0
        if found is None:
            found = known[text] = len(distinct)
            distinct.append(text)
        ids.append(found)
    col[op_idx] = ids
    return col


def _kinds(events: list[Any], activity_ids: dict[str, int], activity: np.ndarray,
           distinct_names: dict[str, None], name_col: np.ndarray,
           is_memory: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(kind, on the CPU) per event, by the rules every source shares
    (``kernelmagic/core/event_rules.py``): the category (activity type) says, once per
    distinct one, with the device type asked only where the category is unknown; then
    the names that override it on the CPU, once per distinct name. ``[memory]`` records
    are left for the caller (MEMORY)."""
    rules = [category_kind(text) for text in activity_ids]  # in id order
    unknown = np.fromiter((not known_category(text) for text in activity_ids), dtype=bool,
                          count=len(activity_ids))
    on_cpu = ~np.fromiter((gpu for _, gpu in rules), dtype=bool, count=len(rules))[activity]
    ask = np.flatnonzero(unknown[activity] & ~is_memory)
    if ask.size:
        on_cpu[ask] = [d == _D.CPU for d in (events[i].device_type() for i in ask.tolist())]
    kind = np.fromiter((k for k, _ in rules), dtype=np.int8, count=len(rules))[activity]
    said = kind.copy()
    for base in NAMED_KINDS:
        named = on_cpu & (said == base)
        if named.any():
            by_name = np.fromiter((name_kind(x, base) for x in distinct_names), dtype=np.int8,
                                  count=len(distinct_names))
            kind[named] = by_name[name_col[named]]
    return kind, on_cpu


def _link_device_work(events: list[Any], gpu_idx: list[int], device_types: dict[int, Any],
                      kind: np.ndarray, tid: np.ndarray, correlation: np.ndarray,
                      linked: np.ndarray, launcher: np.ndarray) -> None:
    """Torch's association by linked correlation id (``_parse_kineto_results``)."""
    n = kind.shape[0]
    cpu = np.ones(n, dtype=bool)
    cpu[gpu_idx] = False
    # Only RecordFunctions (ops, ranges) launch work. Torch also matches runtime calls and
    # profiler overhead events whose own CUPTI correlation id happens to equal an op's id
    # (the two are numbered apart), which gives them device time; they never get any here.
    launches = (kind == Kind.OP) | (kind == Kind.RANGE) | (kind == Kind.STEP)
    frontend = np.flatnonzero(cpu & (linked == 0) & (tid >= 0) & launches)
    if not frontend.size:
        return
    find = key_finder(correlation[frontend])
    # Runtime calls (CPU, linked) run on the thread of the op they are linked to.
    runtime = np.flatnonzero(cpu & (linked > 0) & (tid >= 0))
    if runtime.size:
        hit, at = find(linked[runtime])
        tid[runtime[hit]] = tid[frontend[at[hit]]]
    work = np.asarray([i for i in gpu_idx if device_types[i] in _GPU_WORK], dtype=np.int64)
    if work.size:
        hit, at = find(linked[work])
        hit &= linked[work] > 0
        launcher[work[hit]] = frontend[at[hit]]
