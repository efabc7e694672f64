"""``--memory``'s own category analysis: a live session's allocations, paired into blocks by
address, each named by what is known of it, column-wise over the ``EventTable``.

The rules, first that applies:

1. **known by address**: a block alive at the address of a storage the run saw as a
   parameter, optimizer state, gradient (each step's, at that step) or a module's input
   (``KnownStorages``, from ``live/memory_owners.py``) is that. Such a storage with no
   block in the session existed before profiling: a block from ``BEFORE``.
2. **temporary**: allocated and freed inside one outermost op (an op inside no other op),
   or allocated inside an optimizer step (``Optimizer.step#...``): AdamW's ``sqrt`` and
   ``div`` of the moments, which torch's data-flow analysis names "parameter" and
   "activation".
3. **autograd detail**: allocated inside the backward pass (an
   ``autograd::engine::evaluate_function``) and not a gradient.
4. **activation**: allocated outside backward and optimizer steps, in a cell that called a
   module or stepped an optimizer (the forward pass).
5. **unknown**: the rest (tensor code with no module: nothing says what it is for).

A block's category is the same for its whole life. Pairing: an allocation opens a block at
its address; the next free there closes it. A free with no allocation before it (a GPU
allocator's, of memory from before profiling) closes a block that opened at ``BEFORE``.
"""

from __future__ import annotations

import numpy as np

from kernelmagic.core.arrays import isin
from kernelmagic.core.events import EventTable, Kind, Window
from kernelmagic.core.memory_rows import (
    AT_END,
    BEFORE,
    CATEGORIES,
    NEVER,
    UNKNOWN,
    AllocationRecords,
    BlockColumns,
    KnownStorages,
    MemoryLedger,
)
from kernelmagic.views.breakdown import merge, span_index
from kernelmagic.views.tree import in_start_order, nearest_ancestor

#: The range torch's optimizers open around ``step`` ("Optimizer.step#AdamW.step").
STEP_RANGE = "Optimizer.step#"
#: The op the autograd engine runs each backward function in.
BACKWARD_OP = "autograd::engine::evaluate_function: "

_TEMPORARY = CATEGORIES.index("temporary")
_AUTOGRAD = CATEGORIES.index("autograd_detail")
_ACTIVATION = CATEGORIES.index("activation")
_INPUT = CATEGORIES.index("input")
#: Which known category wins when one storage is seen as several (highest last).
_PRIORITY = [CATEGORIES.index(c) for c in ("input", "gradient", "optimizer_state",
                                           "parameter")]


def _named(table: EventTable, prefix: str, kinds: tuple[Kind, ...]) -> np.ndarray:
    """Indices of the events of ``kinds`` whose name starts with ``prefix``, by start."""
    ids = np.asarray([i for i, text in enumerate(table.names) if text.startswith(prefix)],
                     dtype=np.int32)
    return in_start_order(table, isin(table.name, ids) & isin(table.kind, kinds))


def optimizer_steps(table: EventTable) -> list[Window]:
    """Each optimizer step's span (torch's ``Optimizer.step#...`` range), in order."""
    idx = _named(table, STEP_RANGE, (Kind.RANGE, Kind.OP, Kind.OTHER))
    return list(zip(table.start[idx].tolist(), table.end[idx].tolist(), strict=True))


def _outermost_ops(table: EventTable) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the CPU ops inside no other op, by start."""
    ops = (table.kind == Kind.OP) & (table.tid >= 0) & (table.device < 0)
    idx = in_start_order(table, ops & (nearest_ancestor(table.parent, ops) < 0))
    return table.start[idx], table.end[idx]


class _Blocks:
    """Blocks being paired: columns as lists, and each address's blocks in order."""

    def __init__(self) -> None:
        self.device: list[int] = []
        self.ptr: list[int] = []
        self.nbytes: list[int] = []
        self.created: list[int] = []
        self.freed: list[int] = []
        self.op: list[str] = []
        self.source: list[str] = []
        self.at: dict[tuple[int, int], list[int]] = {}  # (device, ptr) -> blocks, by time

    def open(self, device: int, ptr: int, nbytes: int, created: int, op: str = "",
             source: str = "") -> int:
        b = len(self.device)
        for column, value in ((self.device, device), (self.ptr, ptr), (self.nbytes, nbytes),
                              (self.created, created), (self.freed, NEVER),
                              (self.op, op), (self.source, source)):
            column.append(value)  # type: ignore[attr-defined]
        held = self.at.setdefault((device, ptr), [])
        if created == BEFORE:
            held.insert(0, b)
        else:
            held.append(b)
        return b

    def alive(self, device: int, ptr: int, when: int) -> int:
        """The block at ``ptr`` alive at ``when`` (``AT_END``: never freed), -1 if none."""
        for b in reversed(self.at.get((device, ptr), ())):
            if when == AT_END:
                if self.freed[b] == NEVER:
                    return b
            elif self.created[b] <= when < self.freed[b]:
                return b
        return -1


def _pair(allocs: AllocationRecords, blocks: _Blocks) -> np.ndarray:
    """Each record's block: an allocation opens one, the next free at its address closes
    it; a free of nothing opened closes a block from ``BEFORE``."""
    owner = np.empty(allocs.time.size, dtype=np.int32)
    live: dict[tuple[int, int], int] = {}
    for i, (t, dev, ptr, delta) in enumerate(zip(
            allocs.time.tolist(), allocs.device.tolist(), allocs.ptr.tolist(),
            allocs.delta.tolist(), strict=True)):
        where = (dev, ptr)
        if delta > 0:
            b = live.get(where)
            if b is None:  # else torch re-records a live block: it stays one
                b = live[where] = blocks.open(dev, ptr, delta, t, allocs.op[i],
                                              allocs.source[i])
        else:
            b = live.pop(where, -1)
            if b < 0:
                b = blocks.open(dev, ptr, -delta, BEFORE)
            blocks.freed[b] = t
        owner[i] = b
    return owner


def _known(known: KnownStorages, blocks: _Blocks) -> dict[int, tuple[int, str, str]]:
    """Each known storage's block (opened at ``BEFORE`` when the session had none alive
    there): block -> (category, shape, dtype), the highest priority winning."""
    rank = {c: r for r, c in enumerate(_PRIORITY)}
    named: dict[int, tuple[int, str, str]] = {}
    for i in range(known.when.size):
        dev, ptr = int(known.device[i]), int(known.ptr[i])
        b = blocks.alive(dev, ptr, int(known.when[i]))
        if b < 0:  # alive then, allocated in no record: from before profiling
            b = blocks.open(dev, ptr, int(known.nbytes[i]), BEFORE)
        category = int(known.category[i])
        if category == _INPUT and blocks.created[b] != BEFORE:
            continue  # an argument the session made is what its own rule says
        held = named.get(b)
        if held is None or rank[category] >= rank[held[0]]:
            named[b] = (category, known.shape[i], known.dtype[i])
    return named


def _by_rules(blocks: _Blocks, table: EventTable, saw_model: bool) -> np.ndarray:
    """Rules 2 to 5 for every block, column-wise."""
    created = np.asarray(blocks.created, dtype=np.int64)
    freed = np.asarray(blocks.freed, dtype=np.int64)
    category = np.full(created.size, _ACTIVATION if saw_model else UNKNOWN, dtype=np.int8)
    backward = _named(table, BACKWARD_OP, (Kind.OP,))
    bw = span_index(created, *merge(table.start[backward], table.end[backward]))
    category[bw >= 0] = _AUTOGRAD
    steps = np.asarray(optimizer_steps(table), dtype=np.int64).reshape(-1, 2)
    in_step = span_index(created, *merge(steps[:, 0], steps[:, 1])) >= 0
    starts, ends = _outermost_ops(table)
    op = span_index(created, starts, ends)
    in_one_op = (op >= 0) & (freed <= ends[np.maximum(op, 0)]) if starts.size else op >= 0
    category[in_step | in_one_op] = _TEMPORARY
    category[created == BEFORE] = UNKNOWN
    return category


def categorised_ledger(allocs: AllocationRecords, known: KnownStorages, table: EventTable,
                       saw_model: bool) -> MemoryLedger:
    """The session's memory changes, categorised by the rules above. ``saw_model``: a
    module was called or an optimizer stepped (rule 4 applies)."""
    blocks = _Blocks()
    owner = _pair(allocs, blocks)
    named = _known(known, blocks)
    category = _by_rules(blocks, table, saw_model)
    shapes = {b: (shape, dtype) for b, (_, shape, dtype) in named.items()}
    for b, (c, _, _) in named.items():
        category[b] = c
    before = [b for b, t in enumerate(blocks.created) if t == BEFORE]
    time = np.concatenate([np.full(len(before), BEFORE, dtype=np.int64), allocs.time])
    device = np.concatenate([np.asarray([blocks.device[b] for b in before], dtype=np.int16),
                             allocs.device.astype(np.int16)])
    delta = np.concatenate([np.asarray([blocks.nbytes[b] for b in before], dtype=np.int64),
                            allocs.delta.astype(np.int64)])
    block = np.concatenate([np.asarray(before, dtype=np.int32), owner])
    count = len(blocks.device)
    out = BlockColumns(np.asarray(blocks.device, dtype=np.int16),
                       np.asarray(blocks.nbytes, dtype=np.int64),
                       np.asarray(blocks.created, dtype=np.int64),
                       np.asarray(blocks.freed, dtype=np.int64),
                       [shapes.get(b, ("", ""))[0] for b in range(count)],
                       [shapes.get(b, ("", ""))[1] for b in range(count)],
                       blocks.op, blocks.source)
    return MemoryLedger(time=time, device=device, category=category[block].astype(np.int8),
                        delta=delta, block=block, blocks=out)
