"""``--memory``'s data: the categorised ledger a session's memory changes are read into,
and the flat rows of the memory timeline, the peak, what was alive at it and what grows.

The ledger (``MemoryLedger``) is what a source hands to ``views/memory.py``: numpy columns,
one entry per change of allocated bytes, each with its category. A live run fills it from
its allocations by kernelmagic's own rules (``views/memory_rules.py``, over the
``AllocationRecords`` and ``KnownStorages`` of ``live/``); a trace, which holds
only the raw ``[memory]`` records, fills it from the ``EventTable`` with every category
"unknown". The rows are what the result keeps (no torch, no numpy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np

from kernelmagic.core.records import Record, unit


@dataclass(frozen=True)
class MemoryCategory(Record):
    """What allocated bytes were: ``name`` (torch's ``Category`` in lower case, and the
    field of ``MemoryPoint`` and ``MemoryPeakRow``), ``words`` (in a sentence: "optimizer
    state 16.0 MiB"), ``colour`` (the timeline's, torch's memory timeline's)."""

    name: str
    words: str
    colour: str


#: The categories, declared once, in the order the timeline stacks them (torch's
#: ``torch.profiler._memory_profiler.Category``, then "unknown" for what it cannot say).
#: Their colours (matplotlib's tab10, olive for autograd detail) stay clearly apart from
#: one another and from the page, light or dark, at the chart's 0.8 opacity: at least 30
#: CIE76 ΔE for every pair (``tests/test_memory.py`` measures it).
MEMORY_CATEGORIES = (
    MemoryCategory("parameter", "parameters", "#2ca02c"),
    MemoryCategory("optimizer_state", "optimizer state", "#ff7f0e"),
    MemoryCategory("input", "inputs", "#17becf"),
    MemoryCategory("activation", "activations", "#d62728"),
    MemoryCategory("gradient", "gradients", "#1f77b4"),
    MemoryCategory("autograd_detail", "autograd detail", "#bcbd22"),
    MemoryCategory("temporary", "temporaries", "#9467bd"),
    MemoryCategory("unknown", "unknown", "#8c8c8c"),
)
CATEGORIES = tuple(c.name for c in MEMORY_CATEGORIES)
UNKNOWN = CATEGORIES.index("unknown")
#: How categories read in a sentence ("optimizer state 16.0 MiB").
CATEGORY_WORDS = {c.name: c.words for c in MEMORY_CATEGORIES}


def with_category_bytes(cls: type) -> type:
    """``cls`` (before ``@dataclass``) with one ``float`` field of bytes per category, in
    ``CATEGORIES`` order, after its own fields: the categories' columns of ``MemoryPoint``
    and ``MemoryPeakRow``, from their one declaration (``by_category`` fills them)."""
    if "__annotations__" not in cls.__dict__:  # not a base class's
        cls.__annotations__ = {}
    for name in CATEGORIES:
        cls.__annotations__[name] = "float"
        setattr(cls, name, unit("bytes", 0.0))
    return cls


def by_category(values: Sequence[float]) -> dict[str, float]:
    """Bytes per category (``values`` in ``CATEGORIES`` order) as the records' keywords."""
    return {name: float(v) for name, v in zip(CATEGORIES, values, strict=True)}


#: The time of a change that was there before the session started (ns; before any event).
BEFORE = -(2**62)
#: The time a block is freed when the session never saw it freed (ns; after any event).
NEVER = 2**62


@dataclass(frozen=True)
class MemoryBlock(Record):
    """One allocation the analysis could follow from creation to free (or the end)."""

    device: int  # -1: CPU, else the GPU index
    nbytes: int
    created: int  # ns from the table's origin; BEFORE: it existed when profiling started
    freed: int  # ns from the table's origin; NEVER: still held when profiling ended
    shape: str = ""  # "[64, 2048]" where known
    dtype: str = ""  # "float32" where known
    op: str = ""  # the op it was allocated in ("aten::empty")
    source: str = ""  # the user's file:line that led to it, where a Python frame says


class BlockColumns(Sequence[MemoryBlock]):
    """Many ``MemoryBlock`` records held as columns (a live run follows thousands of
    blocks, and a view reads a few): ``MemoryBlock`` objects are made when indexed."""

    def __init__(self, device: np.ndarray, nbytes: np.ndarray, created: np.ndarray,
                 freed: np.ndarray, shape: list[str], dtype: list[str], op: list[str],
                 source: list[str]) -> None:
        self.device, self.nbytes, self.created, self.freed = device, nbytes, created, freed
        self.shape, self.dtype, self.op, self.source = shape, dtype, op, source

    def __len__(self) -> int:
        return int(self.nbytes.size)

    @overload
    def __getitem__(self, b: int) -> MemoryBlock: ...

    @overload
    def __getitem__(self, b: slice) -> list[MemoryBlock]: ...

    def __getitem__(self, b: int | slice) -> MemoryBlock | list[MemoryBlock]:
        if isinstance(b, slice):
            return [self[i] for i in range(*b.indices(len(self)))]
        return MemoryBlock(int(self.device[b]), int(self.nbytes[b]), int(self.created[b]),
                           int(self.freed[b]), self.shape[b], self.dtype[b], self.op[b],
                           self.source[b])


def block_spans(blocks: Sequence[MemoryBlock]) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                        np.ndarray]:
    """(device, nbytes, created, freed) of ``blocks`` as int64 columns."""
    if isinstance(blocks, BlockColumns):
        return (blocks.device.astype(np.int64), blocks.nbytes.astype(np.int64),
                blocks.created.astype(np.int64), blocks.freed.astype(np.int64))
    rows = np.asarray([(b.device, b.nbytes, b.created, b.freed) for b in blocks],
                      dtype=np.int64).reshape(-1, 4)
    return rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3]


@dataclass(eq=False)
class MemoryLedger:
    """Every change of allocated memory in a session, categorised.

    Columns of equal length, sorted by time: ``time`` (int64 ns from the table's origin;
    ``BEFORE`` for what existed before the session), ``device`` (int16, -1 CPU), ``category``
    (int8 index into ``CATEGORIES``), ``delta`` (int64 signed bytes), ``block`` (int32 index
    into ``blocks``, -1 when the change belongs to no followed block). A block whose
    category changes (a new version of a tensor) moves its bytes with a pair of changes
    summing to zero.
    """

    time: np.ndarray
    device: np.ndarray
    category: np.ndarray
    delta: np.ndarray
    block: np.ndarray
    blocks: Sequence[MemoryBlock] = field(default_factory=list)  # or ``BlockColumns``
    note: str = ""  # why categories are missing, when they are


@dataclass(eq=False)
class AllocationRecords:
    """A live session's allocations and frees, in time order, with their addresses: what
    ``views/memory_rules.py`` pairs into blocks and categorises.

    Columns of equal length: ``time`` (int64 ns from the table's origin), ``device``
    (int16, -1 CPU), ``ptr`` (int64 address), ``delta`` (int64 signed bytes); ``op`` (the
    op each record was made in, "" outside any) and ``source`` (the user's ``file:line``,
    "" unless ``--stack``), one string per record.
    """

    time: np.ndarray
    device: np.ndarray
    ptr: np.ndarray
    delta: np.ndarray
    op: list[str] = field(default_factory=list)
    source: list[str] = field(default_factory=list)


#: When a ``KnownStorages`` row was read after the profiled iterations (not at a step).
AT_END = NEVER


@dataclass(eq=False)
class KnownStorages:
    """Storages whose role the run learnt from the objects themselves (the optimizers
    stepped and the modules called while ``--memory`` profiled), by address.

    Columns of equal length: ``when`` (int64 ns from the table's origin at which the storage
    was alive, or ``AT_END``: read after the profiled iterations), ``device`` (int16),
    ``ptr`` (int64), ``nbytes`` (int64), ``category`` (int8 index into ``CATEGORIES``);
    ``shape`` and ``dtype`` one string per row.
    """

    when: np.ndarray
    device: np.ndarray
    ptr: np.ndarray
    nbytes: np.ndarray
    category: np.ndarray
    shape: list[str] = field(default_factory=list)
    dtype: list[str] = field(default_factory=list)


@dataclass(frozen=True)
@with_category_bytes
class MemoryPoint(Record):
    """One step of the memory timeline: bytes allocated per category from that moment
    (a field per category, ``parameter`` to ``unknown``: ``with_category_bytes``)."""

    device: str  # "CPU", "cuda:0"
    iteration: int
    t_us: float = unit("µs from the iteration's start")

    @property
    def total(self) -> float:
        return sum(getattr(self, c) for c in CATEGORIES)


@dataclass(frozen=True)
@with_category_bytes
class MemoryPeakRow(Record):
    """The highest point of allocated memory in one iteration, on one device, and its
    bytes per category (a field each: ``with_category_bytes``)."""

    device: str
    iteration: int
    t_us: float = unit("µs from the iteration's start")
    fraction: float = unit("fraction (0 to 1)")  # how far into the iteration (0..1)
    iteration_us: float = unit("µs")  # the iteration's length
    op: str  # the op running at the peak ("" when none)
    scope: str  # the module, range or backward function around that op ("" none)
    total: float = unit("bytes")  # bytes allocated at the peak, what existed before included
    rise: float = unit("bytes")  # bytes above the iteration's start (the figure of the peak note)


@dataclass(frozen=True)
class LiveBlockRow(Record):
    """One allocation alive at the peak (the largest first)."""

    device: str
    nbytes: float = unit("bytes")
    category: str
    shape: str
    dtype: str
    op: str  # the op that allocated it
    source: str  # the user's file:line (with --stack)
    # from the peak iteration's start; negative: before it
    created_us: float = unit("µs from the iteration's start")
    before_profiling: bool  # allocated before profiling started

    @property
    def key(self) -> str:
        """What the tables break ties by."""
        return f"{self.device} {self.category} {self.shape} {self.op} {self.created_us}"


@dataclass(frozen=True)
class MemoryGrowthRow(Record):
    """Memory allocated in an iteration and still held when profiling ended, in every
    profiled iteration: by the op (and line) that allocated it."""

    device: str
    op: str
    source: str
    # bytes kept per iteration, on average (``total / iterations``)
    per_iter: float = unit("bytes per iteration (mean)")
    iterations: int = unit("profiled iterations")  # iterations that kept some (every profiled one)
    blocks: int = unit("allocations, summed over {over}")  # allocations kept, all iterations
    total: float = unit("bytes")  # bytes kept, all iterations
    least: float = unit("bytes", 0.0)  # bytes kept by the iteration that kept the least
    most: float = unit("bytes", 0.0)  # bytes kept by the iteration that kept the most

    @property
    def key(self) -> str:
        """What the tables break ties by."""
        return f"{self.device} {self.op} {self.source}"
