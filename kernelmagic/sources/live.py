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
  to, and each GPU event is attributed (``launcher``) to the op whose correlation id is
  its linked correlation id, exactly torch's ``FunctionEvent.kernels``
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from kernelmagic.events import NO_PARENT, EventTable, Kind, derive_links

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
}
_GPU_ACTIVITY = {
    "kernel": Kind.KERNEL, "gpu_memcpy": Kind.MEMCPY, "gpu_memset": Kind.MEMSET,
    "gpu_user_annotation": Kind.GPU_RANGE,
}

_D = torch.autograd.DeviceType
_CPU_MEMORY = {_D.CPU, _D.MKLDNN, _D.IDEEP}
_DEVICE_MEMORY = {_D.CUDA, _D.PrivateUse1, _D.HIP, _D.XPU}
_GPU_WORK = {_D.CUDA, _D.PrivateUse1, _D.XPU}  # what torch attaches to ops as kernels


def _kind(name: str, activity: str, user: bool, python: bool) -> Kind:
    if user:
        return Kind.STEP if name.startswith("ProfilerStep#") else Kind.RANGE
    if python:
        return Kind.PYTHON
    found = _CPU_ACTIVITY.get(activity)
    if found is not None:
        return found
    return Kind.OTHER if name.startswith("[") and name.endswith("]") else Kind.OP


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


def table_from_session(prof: Any, *, shapes: bool = False, flops: bool = False,
                       meta: dict[str, Any] | None = None) -> EventTable:
    """The session's events as an ``EventTable`` with parents and launchers derived."""
    raw = prof.kineto_results
    origin = int(raw.trace_start_ns())
    events = [e for e in raw.events()]
    names = [e.name() for e in events]
    keep = [i for i, n in enumerate(names) if n not in _IGNORED]
    if len(keep) != len(events):
        events = [events[i] for i in keep]
        names = [names[i] for i in keep]
    hidden = [e.is_hidden_event() for e in events]
    if any(hidden):
        events = [e for e, h in zip(events, hidden, strict=True) if not h]
        names = [n for n, h in zip(names, hidden, strict=True) if not h]
    device_types = [e.device_type() for e in events]
    n = len(events)

    # Names: interned once, demangled once per distinct name.
    ids: dict[str, int] = {"": 0}
    name_col = np.fromiter((ids.setdefault(x, len(ids)) for x in names), dtype=np.int32,
                           count=n)
    distinct = [_demangle(x) if x else x for x in ids]

    kind = np.empty(n, dtype=np.int8)
    device = np.full(n, -1, dtype=np.int16)
    on_cpu = np.fromiter((d == _D.CPU for d in device_types), dtype=bool, count=n)
    is_memory = name_col == ids.get(MEMORY_NAME, -1)
    cpu_idx = np.flatnonzero(on_cpu & ~is_memory).tolist()
    activity = [events[i].activity_type() for i in cpu_idx]
    user = [events[i].is_user_annotation() for i in cpu_idx]
    python = [events[i].is_python_function() for i in cpu_idx]
    kind[cpu_idx] = [_kind(names[i], a, u, p)
                     for i, a, u, p in zip(cpu_idx, activity, user, python, strict=True)]

    start = np.fromiter((e.start_ns() for e in events), dtype=np.int64, count=n) - origin
    end = np.fromiter((e.end_ns() for e in events), dtype=np.int64, count=n) - origin
    tid = _thread_ids(np.fromiter((e.start_thread_id() for e in events), dtype=np.uint64,
                                  count=n))
    correlation = np.fromiter((e.correlation_id() for e in events), dtype=np.int64, count=n)
    linked = np.fromiter((e.linked_correlation_id() for e in events), dtype=np.int64, count=n)
    if cpu_idx:
        asynchronous = np.fromiter(
            (events[i].is_async() or events[i].end_thread_id() != events[i].start_thread_id()
             for i in cpu_idx), dtype=bool, count=len(cpu_idx))
        tid[np.asarray(cpu_idx)[asynchronous]] = -1

    nbytes = np.zeros(n, dtype=np.int64)
    mem_idx = np.flatnonzero(is_memory).tolist()
    if mem_idx:
        kind[mem_idx] = Kind.MEMORY
        nbytes[mem_idx] = [events[i].nbytes() for i in mem_idx]
        mem_device = [device_types[i] for i in mem_idx]
        index = [events[i].device_index() for i in mem_idx]
        device[mem_idx] = [-1 if d in _CPU_MEMORY else (ix if d in _DEVICE_MEMORY else -2)
                           for d, ix in zip(mem_device, index, strict=True)]
        end[mem_idx] = start[mem_idx]

    gpu_idx = np.flatnonzero(~on_cpu & ~is_memory).tolist()
    launcher = np.full(n, NO_PARENT, dtype=np.int32)
    if gpu_idx:
        kind[gpu_idx] = [_GPU_ACTIVITY.get(events[i].activity_type(), Kind.OTHER)
                         for i in gpu_idx]
        device[gpu_idx] = [events[i].device_index() for i in gpu_idx]
        tid[gpu_idx] = [events[i].device_resource_id() for i in gpu_idx]
        _link_device_work(events, gpu_idx, device_types, kind, tid, correlation, linked,
                          launcher)

    flops_col = np.zeros(n, dtype=np.float64)
    if flops:
        flops_col[:] = [e.flops() for e in events]
    shapes_col = np.zeros(n, dtype=np.int32)
    if shapes:
        text_ids: dict[str, int] = {"": 0}
        op_idx = np.flatnonzero(kind == Kind.OP).tolist()
        texts = [_shapes_text(events[i].shapes()) for i in op_idx]
        shapes_col[op_idx] = [text_ids.setdefault(t, len(distinct) + len(text_ids) - 1)
                              for t in texts]
        distinct.extend(t for t in text_ids if t)
    keep_mem = device != -2  # memory records of other devices count nowhere
    table = EventTable(
        names=distinct, kind=kind, name=name_col, start=start, end=end, tid=tid,
        device=device, correlation=correlation, parent=np.full(n, NO_PARENT, dtype=np.int32),
        launcher=launcher, flops=flops_col, shapes=shapes_col, nbytes=nbytes,
        origin_ns=origin, meta=dict(meta or {}))
    if not keep_mem.all():
        from kernelmagic.events import select

        table = select(table, keep_mem)
    return derive_links(table)


def _link_device_work(events: list[Any], gpu_idx: list[int], device_types: list[Any],
                      kind: np.ndarray, tid: np.ndarray, correlation: np.ndarray,
                      linked: np.ndarray, launcher: np.ndarray) -> None:
    """Torch's association by linked correlation id (``_parse_kineto_results``)."""
    n = kind.shape[0]
    cpu = np.ones(n, dtype=bool)
    cpu[gpu_idx] = False
    frontend = np.flatnonzero(cpu & (linked == 0) & (tid >= 0) & (kind != Kind.MEMORY))
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
