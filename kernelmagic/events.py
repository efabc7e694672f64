"""One columnar event model for live profiler sessions and trace files.

Sources (``kernelmagic/sources/live.py``: a finished torch session's raw Kineto events;
``kernelmagic/sources/trace_file.py``: a Kineto / Chrome trace JSON) fill an
``EventTable``; every view (op rows, kernels, ranges, modules, sources, memory,
timeline, GPU busy, findings) is column arithmetic over it. No Python object per
event survives parsing: names are interned once, everything else is a numpy array.

Times are integer nanoseconds from the trace's start (``EventTable.origin_ns`` is that
start on the source's own clock), so float rounding never depends on how large the
absolute timestamps of a trace are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np


class Kind(IntEnum):
    """What an event is. Views select by kind; names never decide it."""

    OP = 0  # a CPU operator (aten::mm, a custom op): the rows of the report
    RANGE = 1  # a record_function / user_annotation range on the CPU (ours or the user's)
    PYTHON = 2  # a Python frame recorded by with_stack ("file(line): func")
    KERNEL = 3  # GPU kernel
    MEMCPY = 4  # GPU memcpy
    MEMSET = 5  # GPU memset
    GPU_RANGE = 6  # gpu_user_annotation: a range's copy on the GPU timeline, not GPU work
    RUNTIME = 7  # cuda_runtime / cuda_driver call on the CPU (cudaLaunchKernel, ...)
    MEMORY = 8  # an allocation (+bytes) or free (-bytes), an instant
    STEP = 9  # ProfilerStep#N: one training iteration
    OTHER = 10  # anything else (DataLoader ranges, overhead, flows' hosts, ...)


#: Kinds that are work on a GPU (their time is device time).
DEVICE_WORK = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET)

NO_PARENT = -1


@dataclass(eq=False)
class EventTable:
    """Every event of one process (one rank) as columns of equal length ``n``.

    Columns (index i is one event):

    - ``kind`` (int8, ``Kind``), ``name`` (int32 index into ``names``)
    - ``start``, ``end`` (int64 ns from the trace's start); instants have start == end
    - ``tid`` (int64): the host thread for CPU-side events; the stream for GPU events
    - ``device`` (int16): -1 on the CPU, else the GPU index
    - ``correlation`` (int64): links a RUNTIME call to the GPU events it launched (0: none)
    - ``parent`` (int32): innermost enclosing CPU-side event on the same thread
      (``NO_PARENT`` for roots and for GPU events), derived once by ``derive_parents``
    - ``launcher`` (int32): for GPU events, the innermost OP enclosing the runtime call
      of the same correlation on the same thread (``NO_PARENT`` when none)
    - ``flops`` (float64), ``shapes`` (int32 index into ``names``; the empty string when
      shapes were not recorded)
    - ``nbytes`` (int64): MEMORY events' signed size; 0 elsewhere
    """

    names: list[str]
    kind: np.ndarray
    name: np.ndarray
    start: np.ndarray
    end: np.ndarray
    tid: np.ndarray
    device: np.ndarray
    correlation: np.ndarray
    parent: np.ndarray
    launcher: np.ndarray
    flops: np.ndarray
    shapes: np.ndarray
    nbytes: np.ndarray
    origin_ns: int = 0
    meta: dict[str, Any] = field(default_factory=dict)  # device_name, rank, world_size, ...

    @property
    def n(self) -> int:
        return int(self.kind.shape[0])

    @property
    def duration(self) -> np.ndarray:
        return self.end - self.start


class TableBuilder:
    """Appends events one at a time (plain lists), then freezes them into an EventTable."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {"": 0}
        self.names: list[str] = [""]
        self.kind: list[int] = []
        self.name: list[int] = []
        self.start: list[int] = []
        self.end: list[int] = []
        self.tid: list[int] = []
        self.device: list[int] = []
        self.correlation: list[int] = []
        self.flops: list[float] = []
        self.shapes: list[int] = []
        self.nbytes: list[int] = []

    def intern(self, text: str) -> int:
        found = self._ids.get(text)
        if found is None:
            found = self._ids[text] = len(self.names)
            self.names.append(text)
        return found

    def add(self, kind: Kind, name: str, start: int, end: int, tid: int, device: int = -1,
            correlation: int = 0, flops: float = 0.0, shapes: str = "", nbytes: int = 0) -> None:
        self.kind.append(kind)
        self.name.append(self.intern(name))
        self.start.append(start)
        self.end.append(end)
        self.tid.append(tid)
        self.device.append(device)
        self.correlation.append(correlation)
        self.flops.append(flops)
        self.shapes.append(self.intern(shapes) if shapes else 0)
        self.nbytes.append(nbytes)

    def freeze(self, origin_ns: int = 0, meta: dict[str, Any] | None = None) -> EventTable:
        n = len(self.kind)
        table = EventTable(
            names=self.names,
            kind=np.asarray(self.kind, dtype=np.int8),
            name=np.asarray(self.name, dtype=np.int32),
            start=np.asarray(self.start, dtype=np.int64),
            end=np.asarray(self.end, dtype=np.int64),
            tid=np.asarray(self.tid, dtype=np.int64),
            device=np.asarray(self.device, dtype=np.int16),
            correlation=np.asarray(self.correlation, dtype=np.int64),
            parent=np.full(n, NO_PARENT, dtype=np.int32),
            launcher=np.full(n, NO_PARENT, dtype=np.int32),
            flops=np.asarray(self.flops, dtype=np.float64),
            shapes=np.asarray(self.shapes, dtype=np.int32),
            nbytes=np.asarray(self.nbytes, dtype=np.int64),
            origin_ns=origin_ns,
            meta=dict(meta or {}),
        )
        return table
