"""``--memory``'s categories from torch's private records: the session's allocations with
their addresses (``allocation_records``, for kernelmagic's own rules in
``views/memory_rules.py``), and torch's own analysis (``torch.profiler._memory_profiler``)
read into a plain ``MemoryLedger`` (``memory_ledger``: what the tests compare with).

torch's ``MemoryProfile`` walks the finished session's op tree and data flow and names
what every tensor was (parameter, optimizer state, input, activation, gradient, autograd
detail, temporary); ``MemoryProfileTimeline`` is the same timeline torch's
``export_memory_timeline`` writes. This module is the only place that reads it: its
private classes stay here, and what leaves is numpy columns and ``MemoryBlock`` records.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np

from kernelmagic.core.memory_rows import (
    BEFORE,
    CATEGORIES,
    NEVER,
    UNKNOWN,
    AllocationRecords,
    MemoryBlock,
    MemoryLedger,
)
from kernelmagic.live.memory_owners import Owners, device_index
from kernelmagic.live.torch_compat import dtype_name


def _code(category: Any) -> int:
    """The index into ``CATEGORIES`` of torch's ``Category`` (its name in lower case;
    ``None``, or one kernelmagic does not know: "unknown")."""
    name = category.name.lower() if category is not None else ""
    return CATEGORIES.index(name) if name in CATEGORIES else UNKNOWN


def torch_timeline(prof: Any) -> Any:
    """torch's ``MemoryProfileTimeline`` of a finished session (tests compare with it)."""
    from torch.profiler._memory_profiler import MemoryProfile, MemoryProfileTimeline

    return MemoryProfileTimeline(MemoryProfile(prof.kineto_results))


def _ancestors(event: Any) -> Iterator[Any]:
    """The events above ``event`` in torch's event tree, innermost first."""
    node = event.parent
    while node is not None:
        yield node
        node = node.parent


def _user_line(event: Any, is_library: Any) -> str:
    """The innermost user ``file:line`` a Python call above ``event`` was made from."""
    from torch._C._profiler import _EventType

    for node in _ancestors(event):
        if node.typed[0] in (_EventType.PyCall, _EventType.PyCCall):
            caller = node.typed[1].caller
            path = caller.file_name
            if path and not is_library(path):
                return f"{os.path.basename(path)}:{caller.line_number}"
    return ""


def _creator(event: Any) -> str:
    """The innermost op above an allocation."""
    from torch._C._profiler import _EventType

    return next((str(n.name) for n in _ancestors(event) if n.tag == _EventType.TorchOp), "")


def allocation_records(prof: Any, is_library: Any = None) -> AllocationRecords:
    """The session's allocations and frees with their addresses (torch's event tree, which
    holds them as ``Allocation`` events under the op they were made in), in time order:
    times in ns from the session's start (the ``EventTable``'s origin). ``is_library``: as
    for ``memory_ledger`` (with it, each record names the user's line, with ``--stack``)."""
    from torch._C._profiler import _EventType

    allocation, op_event = _EventType.Allocation, _EventType.TorchOp
    found: list[tuple[Any, Any]] = []  # (allocation, the event it sits under)
    stack = [(root, None) for root in reversed(prof.kineto_results.experimental_event_tree())]
    pop, push = stack.pop, stack.extend
    while stack:  # depth first, children in order: each thread's records in time order
        event, parent = pop()
        children = event.children
        if children:  # an allocation has none: only leaves are asked what they are
            push([(child, event) for child in reversed(children)])
        elif event.tag == allocation:
            found.append((event, parent))
    origin = int(prof.kineto_results.trace_start_ns())
    rows: list[tuple[int, int, int, int, str, str]] = []  # time, device, ptr, delta, op, line
    op_of: dict[int, str] = {}  # id of the event above -> the op the allocation was made in
    for event, parent in found:
        fields = event.extra_fields
        size = fields.alloc_size
        dev = device_index(fields.device) if size else None
        if dev is None:  # another device's, or a record of no bytes
            continue
        op = op_of.get(id(parent))
        if op is None:
            direct = parent is not None and parent.tag == op_event
            op = op_of[id(parent)] = str(parent.name) if direct else _creator(event)
        source = _user_line(event, is_library) if is_library is not None else ""
        rows.append((event.start_time_ns - origin, dev, fields.ptr, size, op, source))
    rows.sort(key=lambda row: row[0])  # stable: records of one time keep their order
    time, device, ptr, delta, ops, sources = zip(*rows, strict=True) if rows else ((),) * 6
    return AllocationRecords(
        time=np.asarray(time, dtype=np.int64), device=np.asarray(device, dtype=np.int16),
        ptr=np.asarray(ptr, dtype=np.int64), delta=np.asarray(delta, dtype=np.int64),
        op=list(ops), source=list(sources))


def memory_ledger(prof: Any, is_library: Any = None) -> MemoryLedger:
    """The session's memory changes with torch's categories, times in ns from the
    session's start (the ``EventTable``'s origin). ``is_library(path)`` says which
    Python files are not the user's (``views/source_lines.is_library_file``); without it
    the blocks name no source line (``--stack`` asks for them)."""
    from torch._C._profiler import _EventType, _TensorMetadata
    from torch.profiler._memory_profiler import Action, MemoryProfile, TensorKey

    results = prof.kineto_results
    origin = int(results.trace_start_ns())
    profile = MemoryProfile(results)
    categories = profile._categories
    shapes: dict[Any, tuple[str, str]] = {}
    created_in: dict[Any, tuple[str, str]] = {}  # TensorKey -> (op, user line)
    # Blocks torch ties to no tensor (a tensor no op ever took as an input: torch.empty,
    # a last op's output kept in a list) are one anonymous key in torch's timeline; they
    # are followed here by address, as torch's timeline pairs their allocation and free.
    spans: list[list[Any]] = []  # per block: [device, bytes, created, freed, op, line]
    live_untied: dict[tuple[int, int], int] = {}  # (address, device) -> span
    untied_at: dict[tuple[Any, ...], list[int]] = {}  # (action, t, device, bytes) -> spans

    def created_by(event: Any) -> tuple[str, str]:
        line = _user_line(event, is_library) if is_library is not None else ""
        return _creator(event), line

    for event in profile._op_tree.dfs():
        kind = event.typed[0]
        if kind == _EventType.TorchOp:
            for value in event.typed[1].inputs:
                for meta in (value if isinstance(value, list) else [value]):
                    if isinstance(meta, _TensorMetadata):
                        key = TensorKey.from_tensor(meta)
                        if key is not None and key not in shapes:
                            shapes[key] = (str(list(meta.sizes)), dtype_name(meta.dtype))
        elif kind == _EventType.Allocation:
            fields = event.typed[1]
            allocated = TensorKey.from_allocation(fields)
            if allocated is not None:  # keyed by the tensor: two may share a timestamp
                if fields.alloc_size > 0:
                    created_in[allocated] = created_by(event)
                continue
            dev = device_index(fields.device)
            if dev is None:
                continue
            t, size, where = event.start_time_ns, int(fields.alloc_size), (fields.ptr, dev)
            if size > 0:
                if where not in live_untied:  # else torch counts a new version: no change
                    live_untied[where] = len(spans)
                    untied_at.setdefault((Action.CREATE, t, dev, size), []).append(len(spans))
                    spans.append([dev, size, t - origin, NEVER, *created_by(event)])
                continue
            b = live_untied.pop(where, None)
            if b is None:  # allocated before profiling: torch counts it from the start
                b = len(spans)
                untied_at.setdefault((Action.PREEXISTING, -1, dev, -size), []).append(b)
                spans.append([dev, -size, BEFORE, NEVER, "", ""])
            spans[b][3] = t - origin
            untied_at.setdefault((Action.DESTROY, t, dev, -size), []).append(b)

    changes: list[tuple[int, int, int, int, int]] = []  # time, device, category, bytes, block
    block_of: dict[Any, int] = {}
    tensor_of: dict[int, Any] = {}  # span -> TensorKey

    def change(t: int, dev: int, cat: Any, nbytes: int, b: int) -> None:
        changes.append((BEFORE if t < 0 else t - origin, dev, _code(cat), int(nbytes), b))

    for t, action, (key, version), nbytes in profile.timeline:
        dev = device_index(key.device)
        if dev is None:
            continue
        tensor = isinstance(key, TensorKey)
        cat = categories.get(key, version) if tensor else None
        if tensor and action in (Action.PREEXISTING, Action.CREATE) and key not in block_of:
            block_of[key] = len(spans)
            tensor_of[len(spans)] = key
            op, line = created_in.get(key, ("", ""))
            spans.append([dev, int(nbytes), BEFORE if t < 0 else t - origin, NEVER, op, line])
        if tensor:
            b = block_of.get(key, -1)
        else:
            waiting = untied_at.get((action, t, dev, abs(int(nbytes))))
            b = waiting.pop(0) if waiting else -1
        if action in (Action.PREEXISTING, Action.CREATE):
            change(t, dev, cat, nbytes, b)
        elif action == Action.INCREMENT_VERSION:
            after = categories.get(key, version + 1) if tensor else None
            if _code(after) != _code(cat):
                change(t, dev, cat, -nbytes, b)
                change(t, dev, after, nbytes, b)
        elif action == Action.DESTROY:
            change(t, dev, cat, -abs(nbytes), b)
            if tensor and b >= 0:
                spans[b][3] = t - origin
    blocks = [MemoryBlock(dev, nbytes, created, freed, *shapes.get(tensor_of.get(b), ("", "")),
                          op, source)
              for b, (dev, nbytes, created, freed, op, source) in enumerate(spans)]
    time, device, category, delta, owner = zip(*changes, strict=True) if changes else ((),) * 5
    return MemoryLedger(time=np.asarray(time, dtype=np.int64),
                        device=np.asarray(device, dtype=np.int16),
                        category=np.asarray(category, dtype=np.int8),
                        delta=np.asarray(delta, dtype=np.int64),
                        block=np.asarray(owner, dtype=np.int32), blocks=blocks)


#: torch's C++ warning on a free of a block allocated before profiling started (printed
#: by c10's logging straight to the process's stderr, once per 1000 such frees).
UNKNOWN_BLOCK_WARNING = b"Memory block of unknown size was allocated before the profiling"


@contextlib.contextmanager
def quiet_unknown_blocks() -> Iterator[None]:
    """Hold back torch's "Memory block of unknown size" warning.

    The C-level stderr (fd 2) goes to a temporary file meanwhile; on the way out every
    other line written there is copied back to stderr, so nothing else is lost. Python's
    ``sys.stderr``, when it writes to fd 2 (a terminal), writes to the real stderr
    meanwhile, so progress lines and the user's own messages still show as they come.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    original = sys.stderr
    try:
        on_fd2 = original.fileno() == 2
    except (OSError, ValueError, AttributeError):
        on_fd2 = False
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        ours = None  # the stand-in for Python's stderr, while it is in place
        try:  # from here on, whatever fails, fd 2 and sys.stderr are given back
            if on_fd2:
                ours = open(os.dup(saved), "w", buffering=1,
                            encoding=getattr(original, "encoding", None),
                            errors=getattr(original, "errors", None))
                sys.stderr = ours
            yield
        finally:
            if ours is not None:
                if sys.stderr is ours:  # one the cell set itself stays
                    sys.stderr = original
                with contextlib.suppress(OSError, ValueError):
                    ours.close()
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [line for line in held.read().splitlines(keepends=True)
                    if UNKNOWN_BLOCK_WARNING not in line]
            if kept:
                os.write(2, b"".join(kept))


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is torch's out-of-memory error (``torch.OutOfMemoryError``)."""
    import torch

    kind = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError",
                                                               None)
    return kind is not None and isinstance(exc, kind)


def ledger_or_note(prof: Any, table: Any, owners: Owners, lines: bool = False) -> MemoryLedger:
    """The session's categorised ledger (``lines``: with the user's source lines): by
    kernelmagic's own rules (``views/memory_rules.py``) over the session's allocations
    and what ``owners`` saw. When the analysis fails (it reads torch's private event
    tree), the table's records, uncategorised, with a note saying why."""
    from kernelmagic.views.memory import ledger_from_table
    from kernelmagic.views.memory_rules import categorised_ledger
    from kernelmagic.views.source_lines import is_library_file

    is_library = is_library_file if lines else None
    try:
        return categorised_ledger(allocation_records(prof, is_library), owners.known(table),
                                  table, owners.saw_model)
    except Exception as exc:
        return ledger_from_table(table, note=f"categories unavailable: the memory analysis "
                                             f"failed ({type(exc).__name__}: {exc})")
