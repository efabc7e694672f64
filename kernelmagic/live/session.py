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
- ``overhead`` events (Kineto's "Activity Buffer Request") are OTHER: not op rows
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

from kernelmagic.core.events import NO_PARENT, EventTable, Kind, TableBuilder, derive_links

_IGNORED = frozenset({
    "[OutOfMemory]", "profiler::_record_function_enter",
    "profiler::_record_function_enter_new", "profiler::_record_function_exit",
    "aten::is_leaf", "aten::output_nr", "aten::_version",
})
MEMORY_NAME = "[memory]"

_CPU_ACTIVITY = {
    "cpu_op": Kind.OP, "user_annotation": Kind.RANGE, "python_function": Kind.PYTHON,
    "cuda_runtime": Kind.RUNTIME, "cuda_driver": Kind.RUNTIME,
    "privateuse1_runtime": Kind.RUNTIME, "privateuse1_driver": Kind.RUNTIME,
    "xpu_runtime": Kind.RUNTIME, "xpu_driver": Kind.RUNTIME,
    "overhead": Kind.OTHER,  # the profiler's own work ("Activity Buffer Request")
}
_GPU_ACTIVITY = {
    "kernel": Kind.KERNEL, "gpu_memcpy": Kind.MEMCPY, "gpu_memset": Kind.MEMSET,
    "gpu_user_annotation": Kind.GPU_RANGE,
}

_D = torch.autograd.DeviceType
_CPU_MEMORY = {_D.CPU, _D.MKLDNN, _D.IDEEP}
_DEVICE_MEMORY = {_D.CUDA, _D.PrivateUse1, _D.HIP, _D.XPU}
_GPU_WORK = {_D.CUDA, _D.PrivateUse1, _D.XPU}  # what torch attaches to ops as kernels


#: CPU activities that are operators (or instants: ``[memory]``).
_OTHER_CPU = frozenset({"cpu_op", "cpu_instant_event", "overhead"})


def _lookup(ids: dict[str, int], wanted: Any) -> np.ndarray:
    """Boolean per interned id: whether its text is in ``wanted``."""
    out = np.zeros(len(ids), dtype=bool)
    for text, i in ids.items():
        out[i] = text in wanted
    return out


def _demangle(name: str) -> str:
    return torch._C._demangle(name) if len(name) > 1 else name


def _shapes_text(shapes: Any) -> str:
    return ", ".join(str(list(s)) if s else "[]" for s in shapes)


def _thread_ids(raw: np.ndarray) -> np.ndarray:
    """Thread ids as int64; ids past 2**63 (seen on some frames) become small codes."""
    if not raw.size or int(raw.max()) < 2**62:
        return raw.astype(np.int64)
    _, codes = np.unique(raw, return_inverse=True)
    return codes.astype(np.int64)


#: A runtime or driver call, by name, where torch cannot say (``cudaLaunchKernel``,
#: ``cuLaunchKernelEx``, ``hipMemcpyAsync``).
_RUNTIME_NAME = re.compile(r"^(cuda[A-Z]|cu[A-Z]|hip[A-Z])")
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
            elif _RUNTIME_NAME.match(name):
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
        keep = ~_lookup(self.name_ids, _IGNORED)[self.name]
        if hasattr(self.event_type, "is_hidden_event"):  # not in every torch release
            keep &= ~self.column("is_hidden_event", bool)
        if not keep.all():
            self.events = [self.events[i] for i in np.flatnonzero(keep).tolist()]
            self.name, self.activity = self.name[keep], self.activity[keep]


def table_from_session(prof: Any, *, shapes: bool = False, flops: bool = False,
                       meta: dict[str, Any] | None = None,
                       on_events: Callable[[int], Any] | None = None,
                       python: bool = True) -> EventTable:
    """The session's events as an ``EventTable`` with parents and launchers derived.

    ``python=False`` leaves out the Python frames ``with_stack`` recorded (``--memory``
    records them for its category analysis; only ``--stack`` shows them).

    ``on_events`` is told the number of raw events before they are read (progress).
    """
    results = prof.kineto_results
    origin = int(results.trace_start_ns())
    events = results.events()
    if on_events is not None:
        on_events(len(events))
    if not events:
        return derive_links(TableBuilder().freeze(origin_ns=origin, meta=meta))
    raw = _RawEvents(events)
    del events
    raw.drop_ignored()
    distinct = [_demangle(x) if x else x for x in raw.distinct_names]
    is_memory = raw.name == raw.name_ids.get(MEMORY_NAME, -1)
    on_cpu = _on_cpu(raw, is_memory)
    kind = _cpu_kinds(raw, on_cpu)
    start = raw.column("start_ns", np.int64) - origin
    end = raw.column("end_ns", np.int64) - origin
    tid = _tree_threads(raw, on_cpu & ~is_memory)
    correlation, linked = _correlation_ids(raw, (kind == Kind.RUNTIME) | ~on_cpu)
    device = np.full(raw.n, -1, dtype=np.int16)
    nbytes = _memory_records(raw, is_memory, kind, device, start, end)
    launcher = _device_work(raw, ~on_cpu & ~is_memory, kind, device, tid, correlation,
                            linked)
    flops_col = (raw.column("flops", np.float64) if flops
                 else np.zeros(raw.n, dtype=np.float64))
    shapes_col = _shape_ids(raw, kind, distinct) if shapes else np.zeros(raw.n, np.int32)
    table = EventTable(
        names=distinct, kind=kind, name=raw.name, start=start, end=end, tid=tid,
        device=device, correlation=correlation,
        parent=np.full(raw.n, NO_PARENT, dtype=np.int32), launcher=launcher,
        flops=flops_col, shapes=shapes_col, nbytes=nbytes, origin_ns=origin,
        meta=dict(meta or {}))
    keep = device != -2  # memory records of other devices count nowhere
    if not python:
        keep &= kind != Kind.PYTHON
    if not keep.all():
        from kernelmagic.core.events import select

        table = select(table, keep)
    return derive_links(table)


def _on_cpu(raw: _RawEvents, is_memory: np.ndarray) -> np.ndarray:
    """CPU or GPU: from the activity type; the device type only where that cannot tell."""
    gpu_activity = _lookup(raw.activity_ids, _GPU_ACTIVITY)
    unknown = ~_lookup(raw.activity_ids, _CPU_ACTIVITY) \
        & ~_lookup(raw.activity_ids, _OTHER_CPU) & ~gpu_activity
    on_cpu = ~gpu_activity[raw.activity]
    ask = np.flatnonzero(unknown[raw.activity] & ~is_memory)
    if ask.size:
        events = raw.events
        on_cpu[ask] = [d == _D.CPU for d in (events[i].device_type() for i in ask.tolist())]
    return on_cpu


def _cpu_kinds(raw: _RawEvents, on_cpu: np.ndarray) -> np.ndarray:
    """Each event's kind by its CPU activity (GPU events and memory records are set
    later): ``ProfilerStep#N`` ranges are STEP, bracketed op names (``[memory]``) OTHER."""
    kind = np.full(raw.n, Kind.OP, dtype=np.int8)
    kind_of_activity = np.full(len(raw.activity_ids), Kind.OP, dtype=np.int8)
    for text, i in raw.activity_ids.items():
        kind_of_activity[i] = _CPU_ACTIVITY.get(text, Kind.OP)
    kind[on_cpu] = kind_of_activity[raw.activity[on_cpu]]
    names = raw.distinct_names
    step = np.fromiter((x.startswith("ProfilerStep#") for x in names), dtype=bool,
                       count=len(names))
    kind[on_cpu & (kind == Kind.RANGE) & step[raw.name]] = Kind.STEP
    bracket = np.fromiter((x.startswith("[") and x.endswith("]") for x in names),
                          dtype=bool, count=len(names))
    kind[on_cpu & (kind == Kind.OP) & bracket[raw.name]] = Kind.OTHER
    return kind


def _tree_threads(raw: _RawEvents, cpu_events: np.ndarray) -> np.ndarray:
    """Each event's thread; -1 (out of the tree) for a CPU event that starts and ends on
    different threads or is flagged async, as torch keeps async events out of it."""
    started_on = raw.column("start_thread_id", np.uint64)
    tid = _thread_ids(started_on)
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
    """GPU events' kinds, devices and streams (as ``tid``), and each one's ``launcher``:
    the op or range whose correlation id is its linked one (``NO_PARENT`` elsewhere)."""
    launcher = np.full(raw.n, NO_PARENT, dtype=np.int32)
    gpu_idx = np.flatnonzero(on_gpu).tolist()
    if not gpu_idx:
        return launcher
    events = raw.events
    device_types = {i: events[i].device_type() for i in gpu_idx}
    activity_of = {i: text for text, i in raw.activity_ids.items()}
    kind[gpu_idx] = [_GPU_ACTIVITY.get(activity_of[a], Kind.OTHER)
                     for a in raw.activity[gpu_idx].tolist()]
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


def _shape_ids(raw: _RawEvents, kind: np.ndarray, distinct: list[str]) -> np.ndarray:
    """Each op's input shapes as an id into ``distinct`` (the texts are appended to it;
    0: none)."""
    shapes_col = np.zeros(raw.n, dtype=np.int32)
    text_ids: dict[str, int] = {"": 0}
    op_idx = np.flatnonzero(kind == Kind.OP).tolist()
    texts = [_shapes_text(raw.events[i].shapes()) for i in op_idx]
    shapes_col[op_idx] = [text_ids.setdefault(t, len(distinct) + len(text_ids) - 1)
                          for t in texts]
    distinct.extend(t for t in text_ids if t)
    return shapes_col


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
    ids = correlation[frontend]
    by_id = np.argsort(ids, kind="stable")
    ids = ids[by_id]

    def find(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at = np.minimum(np.searchsorted(ids, keys), ids.size - 1)
        hit = (keys > 0) & (ids[at] == keys)
        return hit, frontend[by_id[at]]

    # Runtime calls (CPU, linked) run on the thread of the op they are linked to.
    runtime = np.flatnonzero(cpu & (linked > 0) & (tid >= 0))
    if runtime.size:
        hit, owner = find(linked[runtime])
        tid[runtime[hit]] = tid[owner[hit]]
    work = np.asarray([i for i in gpu_idx if device_types[i] in _GPU_WORK], dtype=np.int64)
    if work.size:
        hit, owner = find(linked[work])
        launcher[work[hit]] = owner[hit]
