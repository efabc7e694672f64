"""One columnar event model for live profiler sessions and trace files.

Sources (``kernelmagic/live/session.py``: a finished torch session's raw Kineto events;
``kernelmagic/sources/trace_file.py``: a Kineto / Chrome trace JSON) fill an
``EventTable``; every view (op rows, kernels, ranges, modules, sources, memory,
timeline, GPU busy, findings) is column arithmetic over it. No Python object per
event survives parsing: names are interned once, everything else is a numpy array.

Times are integer nanoseconds from the trace's start (``EventTable.origin_ns`` is that
start on the source's own clock), so float rounding never depends on how large the
absolute timestamps of a trace are.

Beside the events, on the same clock: ``PythonSamples``, the profiled thread's Python stack
sampled while the iterations ran. The sampler (``kernelmagic/live/python_sampler.py``)
fills it; the ``python`` view (``kernelmagic/views/python_lines.py``) joins it by time to
the table's ops. Plain arrays and tuples, so that views never see a frame object.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from enum import IntEnum
from typing import Any, NamedTuple

import numpy as np

from kernelmagic.core.arrays import isin


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
    OTHER = 10  # anything else (profiler overhead, bracketed records, unknown categories)


NO_PARENT = -1
#: Thread ids at or below this are lanes a trace names by a string (``sources/trace_columns``):
#: the profiler's own records, such as Kineto's session span "PyTorch Profiler (0)".
FIRST_NAMED_LANE = -(1 << 40)
#: Kinds that are work on a GPU (their time is device time).
_DEVICE_WORK_KINDS = np.asarray((Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET), dtype=np.int8)

#: A stretch of time, ``(start, end)`` ns from the trace's start (an iteration, a step).
Window = tuple[int, int]


@dataclass(frozen=True)
class TraceField:
    """One value kernelmagic reads from a trace event's ``args`` into a column of the
    ``EventTable``, in the spirit of HolisticTraceAnalysis's ``AttributeSpec``.

    ``name`` is what the readers call it (an identifier: the msgspec record's attribute),
    ``key`` its name in the file, ``column`` the ``EventTable`` column it fills, ``dtype``
    that column's numpy type, ``default`` its value where an event lacks the key (and on
    the events that never carry it: ``on`` says which do, ``"op"`` complete events or
    ``"memory"`` instants; the live source's events, which have no ``args``). A field
    whose ``rule`` is empty goes into its column as it is (cast to the column's type;
    null: the default); the others are read by the rule it names, in
    ``sources/trace_columns.py``.
    """

    name: str
    key: str
    column: str
    dtype: str
    default: Any
    on: str = "op"
    rule: str = ""


#: Every ``args`` value the trace readers read (``sources/trace_fast.py``,
#: ``sources/trace_stream.py``), and the columns they fill: a new field is one line here.
#: The event's own keys (``ph``, ``name``, ``cat``, ``ts``, ``dur``, ``pid``, ``tid``) are
#: the Chrome trace format's, read by ``trace_columns.Columns.adders``.
TRACE_FIELDS: tuple[TraceField, ...] = (
    TraceField("device", "device", "device", "int16", None,
               rule="a GPU event's device (else its pid's); -1 on the CPU"),
    TraceField("stream", "stream", "tid", "int64", None, rule="a GPU event's stream, as tid"),
    TraceField("correlation", "correlation", "correlation", "int64", None,
               rule="an id (0: none, and on OTHER events)"),
    TraceField("flops", "flops", "flops", "float64", None,
               rule="a number (none, 0 or an empty value: 0.0)"),
    TraceField("dims", "Input Dims", "shapes", "int32", None,
               rule="the shapes as text (`[8, 16], [16, 4]`), interned in names"),
    TraceField("types", "Input type", "dtypes", "int32", None,
               rule="the inputs' dtypes as text (`float, float, Scalar`), interned in names"),
    TraceField("nbytes", "Bytes", "nbytes", "int64", 0, on="memory",
               rule="an allocation's (+) or free's (-) size: an integer"),
    TraceField("device_type", "Device Type", "device", "int16", 0, on="memory",
               rule="0 on the CPU (device -1)"),
    TraceField("device_id", "Device Id", "device", "int16", -1, on="memory",
               rule="the device, where Device Type is not the CPU"),
)

#: ``array`` type codes of the columns' numpy types (``TableBuilder``).
_TYPECODES = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "float64": "d"}


def plain_fields(fields: tuple[TraceField, ...]) -> tuple[TraceField, ...]:
    """The fields that go into their columns as they are (no ``rule``), one column each."""
    return tuple(f for f in fields if not f.rule)


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
      (``NO_PARENT`` for roots, GPU events, MEMORY instants and CPU events with a
      negative ``tid``, which sources use for async events), derived once by
      ``derive_links``
    - ``launcher`` (int32): for GPU events, the CPU event the work is attributed to:
      the innermost enclosing event (not a Python frame) of the RUNTIME call with the
      same correlation (``NO_PARENT`` when none); a source may set it beforehand
      (the live source does, from torch's own links) and ``derive_links`` keeps it
    - ``flops`` (float64), ``shapes`` (int32 index into ``names``; the empty string when
      shapes were not recorded)
    - ``nbytes`` (int64): MEMORY events' signed size; 0 elsewhere
    - ``extra["dtypes"]`` (int32 index into ``names``), where the source recorded them: each
      op's input dtypes as text (``float, float, Scalar``; the empty string: none)
    - ``extra``: the columns of ``TRACE_FIELDS`` not named above, by column name
      (``column(name)`` reads any column)
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
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.kind.shape[0])

    @property
    def duration(self) -> np.ndarray:
        return self.end - self.start

    def column(self, name: str) -> np.ndarray:
        """The column called ``name``: one of the fields above, or one in ``extra``."""
        if name in self.extra:
            return self.extra[name]
        if name in _COLUMNS:
            return getattr(self, name)  # type: ignore[no-any-return]
        raise KeyError(f"the event table has no column {name!r}")


#: The columns ``EventTable`` names as fields (the rest of a source's are ``extra``).
_COLUMNS = frozenset(f.name for f in dataclass_fields(EventTable)
                     if f.name not in ("names", "origin_ns", "meta", "extra"))


def table_of_columns(names: list[str], columns: dict[str, np.ndarray], origin_ns: int = 0,
                     meta: dict[str, Any] | None = None,
                     fields: tuple[TraceField, ...] = TRACE_FIELDS) -> EventTable:
    """An ``EventTable`` of a source's columns (every source makes its table here): each
    column of ``fields`` that ``columns`` lacks is its field's default throughout, and
    ``parent``/``launcher`` are ``NO_PARENT`` unless given."""
    n = int(columns["kind"].shape[0])
    filled = dict(columns)
    for f in plain_fields(fields):
        if f.column not in filled:
            filled[f.column] = np.full(n, f.default, dtype=f.dtype)
    for link in ("parent", "launcher"):
        if link not in filled:
            filled[link] = np.full(n, NO_PARENT, dtype=np.int32)
    named = {k: filled.pop(k) for k in _COLUMNS}
    return EventTable(names=names, **named, origin_ns=origin_ns, meta=dict(meta or {}),
                      extra=filled)


#: The columns of the event's own keys (``ph``, ``name``, ``cat``, ``ts``, ``dur``, ``tid``),
#: with their types; ``TRACE_FIELDS`` gives the others'.
_OWN_COLUMNS = {"kind": "int8", "name": "int32", "start": "int64", "end": "int64",
                "tid": "int64"}


class TableBuilder:
    """Appends events one at a time, then freezes them into an EventTable.

    Values go into typed arrays (8 bytes or less each, no Python object per event), so
    a source streaming millions of events (``sources/trace_file.py``) holds only columns:
    ``columns``, by name, those of the event's own keys and one per column of ``fields``.
    """

    def __init__(self, fields: tuple[TraceField, ...] = TRACE_FIELDS) -> None:
        self.fields = fields
        self.ids: dict[str, int] = {"": 0}  # interned text -> its index in ``names``
        self.names: list[str] = [""]
        self.dtypes = {**_OWN_COLUMNS, **{f.column: f.dtype for f in fields}}
        self.columns = {column: array(_TYPECODES[dtype]) for column, dtype in self.dtypes.items()}

    def intern(self, text: str) -> int:
        found = self.ids.get(text)
        if found is None:
            found = self.ids[text] = len(self.names)
            self.names.append(text)
        return found

    def add(self, kind: Kind, name: str, start: int, end: int, tid: int, device: int = -1,
            correlation: int = 0, flops: float = 0.0, shapes: str = "", nbytes: int = 0,
            dtypes: str = "", **values: Any) -> None:
        """One event; the columns of fields without a rule from ``values`` by column name,
        their defaults where not given."""
        given = {"kind": kind, "name": self.intern(name), "start": start, "end": end,
                 "tid": tid, "device": device, "correlation": correlation, "flops": flops,
                 "shapes": self.intern(shapes) if shapes else 0, "nbytes": nbytes,
                 "dtypes": self.intern(dtypes) if dtypes else 0}
        for f in plain_fields(self.fields):
            given[f.column] = values.pop(f.column, f.default)
        if values:
            raise TypeError(f"no field fills the column {', '.join(values)}")
        for column, append in self.columns.items():
            append.append(given[column])

    def freeze(self, origin_ns: int = 0, meta: dict[str, Any] | None = None) -> EventTable:
        columns = {column: np.array(values, dtype=self.dtypes[column])  # (a copy)
                   for column, values in self.columns.items()}
        return table_of_columns(self.names, columns, origin_ns, meta, self.fields)


def device_work(table: EventTable) -> np.ndarray:
    """Per event: whether it is work on a GPU (a kernel, memcpy or memset)."""
    return isin(table.kind, _DEVICE_WORK_KINDS)


def derive_links(table: EventTable) -> EventTable:
    """Fill ``parent`` and ``launcher`` in place (and return the table); both sources call it.

    ``parent`` follows torch's ``EventList._populate_cpu_children``: per thread, events
    sorted by (start, -end) (ties keep table order), one stack sweep; an event is the
    child of the stack's top when it starts before the top ends and does not end after
    it, otherwise the top is popped. Then, as torch's ``_remove_dup_nodes``, an event
    that is the only child of a parent of the same name is dropped (its children and its
    GPU work move up to the parent), so the table may come back shorter.

    ``launcher`` of GPU work (KERNEL/MEMCPY/MEMSET where the source left ``NO_PARENT``)
    is the innermost enclosing non-Python event of the RUNTIME call of the same
    correlation, or that call itself when nothing encloses it (a launch from a thread
    with no op or range open); other GPU events (a range's GPU copy) never get one this
    way. Work with no runtime call of its correlation keeps ``NO_PARENT``: the op rows
    give it a row of its own (``views/ops.py``).
    """
    tree = np.flatnonzero((table.device < 0) & (table.kind != Kind.MEMORY) & (table.tid >= 0))
    if tree.size:
        order = tree[np.lexsort((-table.end[tree], table.start[tree], table.tid[tree]))]
        tids, starts, ends = table.tid[order], table.start[order], table.end[order]
        found = _nested_parents(tids, starts, ends)
        if found is None:  # some events overlap without nesting: torch's sweep decides
            found = _stack_sweep(tids.tolist(), starts.tolist(), ends.tolist())
        parent = np.full(table.n, NO_PARENT, dtype=np.int32)
        has = found >= 0
        parent[order[has]] = order[found[has]]
        table.parent = parent
    _derive_launchers(table)
    return _remove_duplicate_nodes(table)


#: Sort keys stay below this (int64), else the sweep decides.
_KEY_LIMIT = 1 << 62


def _nested_parents(tids: np.ndarray, starts: np.ndarray,
                    ends: np.ndarray) -> np.ndarray | None:
    """The stack sweep's answer without a Python loop, when intervals nest properly.

    With events sorted by (thread, start, -end), an event's depth is the number of earlier
    events of its thread that end after it starts (``_depths``). Where intervals nest,
    those are its ancestors, and its parent is the last earlier event of its thread one
    level up: every event between the two lies inside the parent, deeper. That event is
    found for all at once, by a sort on (thread, depth) and a binary search in it. If a
    found parent does not contain its event, some events overlap partially (the first such
    event in order always shows up this way) and None tells the caller to run the sweep;
    None as well where a sort key would not fit in 64 bits.
    """
    n = starts.shape[0]
    if not n:
        return np.zeros(0, np.int64)
    first = np.empty(n, bool)
    first[0] = True
    np.not_equal(tids[1:], tids[:-1], out=first[1:])
    thread = np.cumsum(first)
    thread -= 1
    depth = _depths(thread, starts, ends)
    if depth is None:
        return None
    levels = int(depth.max()) + 1
    if (int(thread[-1]) + 1) * levels * n >= _KEY_LIMIT:
        return None
    group = thread * levels
    group += depth
    order = group.argsort(kind="stable")  # by (thread, depth), then position
    key = group[order]
    key *= n
    key += order
    group -= 1  # the parent's: the same thread, a level up
    group *= n
    group += np.arange(n)  # (before the event itself)
    at = key.searchsorted(group)
    at -= 1
    parent = order[np.maximum(at, 0)]
    deep = depth > 0
    del group, key, order
    if (at[deep] < 0).any():
        return None
    parent[~deep] = -1
    p = parent[deep]
    if (thread[p] != thread[deep]).any() or (depth[p] != depth[deep] - 1).any() \
            or (ends[deep] > ends[p]).any() or (ends[p] <= starts[deep]).any():
        return None
    return parent


def _depths(thread: np.ndarray, starts: np.ndarray,
            ends: np.ndarray) -> np.ndarray | None:
    """Per event (sorted by thread, start, -end): the earlier events of its thread that end
    after it starts; None where the sort key of (thread, end) would not fit in 64 bits."""
    n = starts.size
    low = int(min(starts.min(), ends.min()))
    span = int(max(starts.max(), ends.max())) - low + 1
    if (int(thread[-1]) + 1) * span >= _KEY_LIMIT:
        return None
    base = thread * span
    base -= low
    ended = np.sort(ends + base)  # each thread's ends, sorted, thread after thread
    ended = ended.searchsorted(starts + base, "right")  # ends by each start, all threads
    # The events of its thread before it, less its thread's ends by its start: the threads
    # before it hold as many events as ends, so both counts may include them.
    depth = np.arange(n) - ended
    # An event of no length at the same start, at or after the event, was counted as ended
    # but is not earlier: counted back.
    zero = starts == ends
    if zero.any():
        same = np.empty(n, bool)
        same[0] = True
        same[1:] = (thread[1:] != thread[:-1]) | (starts[1:] != starts[:-1])
        group_first = np.flatnonzero(same)
        last = np.append(group_first[1:], n)[np.cumsum(same) - 1] - 1
        zeros = np.cumsum(zero)
        depth += zeros[last] - zeros + zero
    return depth


def _stack_sweep(tids: list[int], starts: list[int], ends: list[int]) -> np.ndarray:
    """Parent position of each event (events sorted by thread, start, -end), -1 for roots."""
    parent = [-1] * len(starts)
    stack: list[int] = []
    stack_ends: list[int] = []
    thread = None
    for i, (tid, start, end) in enumerate(zip(tids, starts, ends, strict=True)):
        if tid != thread:
            thread, stack, stack_ends = tid, [], []
        while stack_ends:
            top_end = stack_ends[-1]
            if start >= top_end or end > top_end:
                stack.pop()
                stack_ends.pop()
            else:
                parent[i] = stack[-1]
                break
        stack.append(i)
        stack_ends.append(end)
    return np.asarray(parent, dtype=np.int64)


def _derive_launchers(table: EventTable) -> None:
    # Only work a runtime call launched shares its CUPTI id (not a range's GPU copy).
    gpu = np.flatnonzero(device_work(table) & (table.device >= 0) & (table.launcher == NO_PARENT)
                         & (table.correlation != 0))
    runtime = np.flatnonzero((table.kind == Kind.RUNTIME) & (table.correlation != 0))
    if not gpu.size or not runtime.size:
        return
    hit, first = key_finder(table.correlation[runtime])(table.correlation[gpu])
    calls = runtime[first[hit]]
    owner = table.parent[calls].astype(np.int64)
    # Python frames are not RecordFunctions: the work belongs to the op around them.
    while True:
        python = (owner >= 0) & (table.kind[np.maximum(owner, 0)] == Kind.PYTHON)
        if not python.any():
            break
        owner[python] = table.parent[owner[python]]
    top_level = owner < 0  # nothing open around the call: the call owns its work
    owner[top_level] = calls[top_level]
    launcher = table.launcher.copy()
    launcher[gpu[hit]] = owner
    table.launcher = launcher


def key_finder(keys: np.ndarray) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``find(wanted)``: per element of ``wanted``, whether ``keys`` (not empty) holds it,
    and the first index of ``keys`` that does (meaningless where it does not)."""
    by_key = np.argsort(keys, kind="stable")
    ordered = keys[by_key]

    def find(wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at = np.minimum(np.searchsorted(ordered, wanted), ordered.size - 1)
        return ordered[at] == wanted, by_key[at]

    return find


def _grouped(keys: np.ndarray, n: int):  # type: ignore[no-untyped-def]
    """``members(k)``: the indices i with ``keys[i] == k`` (k in 0..n-1), in index order."""
    has = np.flatnonzero(keys >= 0)
    by_key = has[np.argsort(keys[has], kind="stable")]
    bounds = np.concatenate(([0], np.cumsum(np.bincount(keys[has], minlength=n))))

    def members(k: int) -> list[int]:
        return by_key[bounds[k]:bounds[k + 1]].tolist()

    return members


def _remove_duplicate_nodes(table: EventTable) -> EventTable:
    """Torch's ``_remove_dup_nodes``: drop an only child that has its parent's name.

    Its children move up to the parent, and its GPU work replaces the parent's. Each
    removal touches only the lists involved, so the work is O(n + removals).
    """
    parent = table.parent
    has = parent >= 0
    same = np.zeros(table.n, dtype=bool)
    same[has] = table.name[parent[has]] == table.name[has]
    if not same.any():
        return table
    n = table.n
    parent = parent.astype(np.int64)
    launcher = table.launcher.astype(np.int64)
    children = np.bincount(parent[has], minlength=n)
    csr_children, csr_work = _grouped(parent, n), _grouped(launcher, n)
    kids: dict[int, list[int]] = {}  # current children, where they changed
    work: dict[int, list[int]] = {}  # current GPU work, where it changed
    name = table.name
    alive = np.ones(n, dtype=bool)
    key = np.lexsort((-table.end, table.start))  # torch's list order
    while True:
        removed = False
        for idx in key[same[key] & alive[key]].tolist():
            up = int(parent[idx])
            if up < 0 or name[up] != name[idx] or children[up] != 1:
                continue
            alive[idx] = False
            removed = True
            moved = kids.pop(idx) if idx in kids else csr_children(idx)
            parent[moved] = up
            kids[up] = moved
            children[up] = len(moved)
            launcher[work[up] if up in work else csr_work(up)] = NO_PARENT
            lifted = work.pop(idx) if idx in work else csr_work(idx)
            launcher[lifted] = up
            work[up] = lifted
            work[idx] = []
        if not removed:
            break
        has = (parent >= 0) & alive
        same[:] = False
        same[has] = name[parent[has]] == name[has]
    table.parent = parent.astype(np.int32)
    table.launcher = launcher.astype(np.int32)
    return select(table, alive)


def select(table: EventTable, keep: np.ndarray) -> EventTable:
    """The events where ``keep`` is true, with ``parent``/``launcher`` renumbered."""
    new_index = np.cumsum(keep) - 1
    def renumber(links: np.ndarray) -> np.ndarray:
        kept = links[keep]
        ok = kept >= 0
        out = np.full(kept.shape, NO_PARENT, dtype=np.int32)
        out[ok] = new_index[kept[ok]]
        return out
    kept = {name: getattr(table, name)[keep] for name in _COLUMNS - {"parent", "launcher"}}
    return EventTable(
        names=table.names, **kept, parent=renumber(table.parent),
        launcher=renumber(table.launcher), origin_ns=table.origin_ns, meta=table.meta,
        extra={name: column[keep] for name, column in table.extra.items()})


# --- samples of the profiled thread's Python stack ---------------------------------------


class Frame(NamedTuple):
    """Where a sample's time goes: the user's line. ``top_level`` is True for code at the
    top level of a cell or script (``<module>``); ``loading`` when the line was waiting
    for a DataLoader (a ``torch/utils/data/`` frame above it: the sample goes to the user
    line that asked for the batch, not to the dataset's own code)."""

    file: str
    line: int
    function: str
    top_level: bool
    loading: bool = False


@dataclass(eq=False)
class PythonSamples:
    """One entry per sample: ``t_ns`` its time on the profiler's clock (Unix ns, as
    ``EventTable.origin_ns``), ``frame`` an index into ``frames`` (-1: no user frame was
    running, e.g. kernelmagic's own loop between iterations)."""

    t_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    frame: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))
    frames: list[Frame] = field(default_factory=list)
    interval_s: float = 0.0

    @property
    def n(self) -> int:
        return int(self.t_ns.size)
