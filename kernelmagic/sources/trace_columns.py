"""The rules both trace readers apply: what each event, and the document's top-level keys,
become in the ``EventTable``.

``Columns`` is the table being read; ``Columns.adders()`` gives the per-event functions
the streaming reader (``trace_stream.py``) and the msgspec reader (``trace_fast.py``)
both call, so both give equal tables. Which ``args`` values they read, and into which
columns, is the one table of trace fields (``core/events.py``: ``TRACE_FIELDS``): the
fields the rules here read (``OP_RULES``, ``MEMORY_RULES``), and any field without a
rule, which goes into its own column as it is. ``trace_meta`` turns the top-level keys
(``META_KEYS``: ``deviceProperties``, ``distributedInfo``, ...) into the table's
``meta``.

A ``tid`` string holding an integer is that thread, ``"stream N"`` is stream N, any
other ``tid`` string is a named lane of its own. What each event is (its ``Kind``) comes
from the rules the live source shares (``kernelmagic/core/event_rules.py``): the
category, then the names that override it (``ProfilerStep#N`` is STEP, DataLoader ranges
are RANGE, a bracketed op name is OTHER). Each distinct category is looked up once; the
events of a category no rule knows are counted with their time as they are read (no
second pass), and ``freeze_relative`` puts that count, and the backend the categories
name (MTIA, XPU, ...), in the table's ``meta`` (``Columns.categories_meta``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kernelmagic.core.arrays import unique
from kernelmagic.core.event_rules import (
    MEMORY_NAME,
    UNPAIRED,
    UNPLACED_KEY,
    categories_meta,
    category_kind,
    kinds_by_name,
    known_category,
)
from kernelmagic.core.events import (
    FIRST_NAMED_LANE,
    TRACE_FIELDS,
    EventTable,
    Kind,
    TableBuilder,
    TraceField,
    plain_fields,
)
from kernelmagic.sources.counter_ranges import RawRange, join_ranges, metric_values
from kernelmagic.sources.trace_numbers import (
    MAX_DURATION_NS,
    MAX_TIME_NS,
    Number,
    int_of,
    thread_id,
)

#: An unknown category's kind while reading: OTHER's value, but not ``Kind.OTHER`` itself,
#: so that ``add_op`` tells it apart (and counts it) with one identity test.
_UNPLACED = int(Kind.OTHER)

#: The top-level keys a trace's ``meta`` is read from (``trace_meta``).
META_KEYS = ("deviceProperties", "distributedInfo", "traceName", "schemaVersion", "format")


class Columns(TableBuilder):
    """The table being read, with the per-event rules both trace readers apply to the
    event's own keys and to the ``args`` values of ``fields`` (``core/events.py``:
    ``TRACE_FIELDS``); ``op_fields`` are those of complete events, ``memory_fields``
    those of ``[memory]`` instants, each the fields its rules read first (``OP_RULES``,
    ``MEMORY_RULES``), then those without a rule."""

    def __init__(self, fields: tuple[TraceField, ...] = TRACE_FIELDS) -> None:
        super().__init__(fields)
        self.op_fields = _rules_first(fields, "op", OP_RULES)
        self.memory_fields = _rules_first(fields, "memory", MEMORY_RULES)
        self.string_tids: dict[str, int] = {}  # every tid string seen -> its id
        self.lanes = 0  # named lanes so far
        self.counter_ranges: list[RawRange] = []  # cuda_profiler_range events (counters)
        self.categories: dict[Any, tuple[Kind, bool]] = {}  # each category seen -> its rule
        self.unplaced: dict[Any, list[int]] = {}  # unknown category -> [events, ns]
        # duration events ("B", "E") in file order, until ``pair_durations``
        self.durations: list[tuple[str, int, Any, Any, Any, Any, tuple[Any, ...]]] = []
        self.unpaired = 0  # "B" or "E" events without their pair

    def add_counters(self, name: Any, start: int, args: Any) -> None:
        """Keep a ``cuda_profiler_range`` event's metric values (``--counters``); both
        readers call this, after ``add_op``, for each complete event of that category."""
        if type(name) is str:
            self.counter_ranges.append((start, name, metric_values(args)))

    def add_duration_event(self, ph: str, name: Any, cat: Any, start: int, tid: Any,
                           pid: Any, args: tuple[Any, ...]) -> None:
        """Keep a duration event, "B" (begins) or "E" (ends): the Chrome trace format's other
        way to write a complete event. Both readers call this in file order, and
        ``pair_durations`` once all are read."""
        self.durations.append((ph, start, name, cat, tid, pid, args))

    def pair_durations(self) -> None:
        """Each "E" closes the latest "B" still open on its (pid, tid), in time order (file
        order at one instant, as trace viewers read them); each pair is then read as a
        complete event of the "B"'s name, category and args (``add_op``), in the file order
        of the "B"s. A "B" never closed or an "E" that closes none is counted
        (``unpaired``: the report's line of what cannot be placed)."""
        if not self.durations:
            return
        events, self.durations = self.durations, []
        threads: dict[tuple[str, str], list[int]] = {}
        for i, (_, _, _, _, tid, pid, _) in enumerate(events):
            threads.setdefault((repr(pid), repr(tid)), []).append(i)
        pairs: list[tuple[int, int]] = []  # (the "B", the "E")
        for found in threads.values():
            found.sort(key=lambda i: events[i][1])  # (stable: file order at one instant)
            open_: list[int] = []
            for i in found:
                if events[i][0] == "B":
                    open_.append(i)
                elif open_:
                    pairs.append((open_.pop(), i))
                else:
                    self.unpaired += 1
            self.unpaired += len(open_)
        add_op, _ = self.adders()
        for b, e in sorted(pairs):
            _, start, name, cat, tid, pid, args = events[b]
            add_op(name, cat, start, events[e][1] - start, tid, pid, args)

    def tid_of(self, tid: Any) -> int:
        """A thread id as written -> an int.

        An int, a string holding one (``"123"``, ``"-5"``) or a whole number written as a
        float (``123.0``) is that thread (a 32-bit id written as signed is the unsigned
        one); ``"stream 7"`` is stream 7; any other string is a named lane ("PyTorch
        Profiler"), with a negative id of its own (the event tree leaves negative ids out);
        none (no ``tid``, or null) is 0. Anything else (an array, an object, true) is no
        thread id: TypeError (the streaming reader names the fault).
        """
        if type(tid) is int:
            return thread_id(tid)
        if type(tid) is str:
            found = self.string_tids.get(tid)
            if found is None:
                found = self.string_tids[tid] = self._string_tid(tid)
            return found
        if type(tid) is float or type(tid) is Number:  # (each reader's number with a point)
            number = int_of(tid)
            return thread_id(number) if number is not None else 0
        if tid is None:
            return 0
        raise TypeError

    def _string_tid(self, tid: str) -> int:
        number = int_of(tid)
        if number is not None:  # "123": the thread, as the int would be
            return thread_id(number)
        text = tid.strip()
        if text.startswith("stream "):  # old traces: "stream 7"
            stream = text[7:].strip()
            if stream.isascii() and stream.isdigit():
                return int(stream)
        self.lanes += 1  # a named lane
        return FIRST_NAMED_LANE - self.lanes

    def adders(self) -> tuple[Any, Any]:
        """``(add_op, add_memory)``, the per-event functions every reader calls.

        ``add_op(name, cat, start, dur, tid, pid, args)`` takes one complete ("X") event,
        ``add_memory(start, tid, args)`` one ``[memory]`` instant; ``start`` and ``dur`` are
        integer nanoseconds; ``args`` is the tuple of the event's values of ``op_fields``
        (``memory_fields``), in their order, each its field's ``default`` where the event
        lacks it (each reader makes it from the fields its own way). Ids may be ints or
        strings holding ints (``int_of``). A value of the wrong type raises TypeError or
        ValueError. Locals are bound once: this is the readers' hot loop.
        """
        ids, intern, columns = self.ids, self.intern, self.columns
        kinds, names, starts, ends, tids, devices, correlations, flops_col, shapes_col, \
            nbytes_col, dtypes_col = (columns[c].append for c in (
                "kind", "name", "start", "end", "tid", "device", "correlation", "flops",
                "shapes", "nbytes", "dtypes"))
        tid_of, id_of = self.tid_of, int_of
        categories, rule_of, unplaced = self.categories, self._rule, self.unplaced
        by_name: dict[str, Any] = {}  # name -> its kind for each kind its category says
        longest, latest = MAX_DURATION_NS, MAX_TIME_NS
        op, rng, other, memory = Kind.OP, Kind.RANGE, Kind.OTHER, Kind.MEMORY
        unknown = _UNPLACED
        op_plain, memory_plain = self._plain(self.op_fields), self._plain(self.memory_fields)
        op_rules, memory_rules = len(OP_RULES), len(MEMORY_RULES)
        op_exact = len(self.op_fields) == op_rules  # args holds the rules' values alone
        memory_exact = len(self.memory_fields) == memory_rules

        def add_op(name: Any, cat: Any, start: int, dur: int, tid: Any, pid: Any,
                   args: tuple[Any, ...]) -> None:
            found = categories.get(cat)
            if found is None:
                found = rule_of(cat)
            kind, on_device = found
            if not 0 <= dur <= longest or not -latest < start < latest:
                raise ValueError
            end = start + dur
            name_id = ids.get(name)
            if name_id is None:
                if type(name) is not str:
                    raise TypeError
                name_id = intern(name)
            device, stream, correlation, flops, dims, types = (args if op_exact
                                                               else args[:op_rules])
            if on_device:
                if type(device) is not int:
                    device = id_of(device)
                    if device is None:
                        device = id_of(pid) or 0
                if type(stream) is not int:
                    stream = id_of(stream)
                tid = stream if stream is not None else tid_of(tid)
            else:
                device = -1
                if type(tid) is not int or tid < 0:
                    tid = tid_of(tid)
                if kind is unknown:  # a category no rule places: counted, then OTHER
                    tally = unplaced[cat]
                    tally[0] += 1
                    tally[1] += dur
                    kind = other
                if kind is op or kind is rng or kind is other:
                    again = by_name.get(name)
                    if again is None:
                        again = by_name[name] = kinds_by_name(name)
                    kind = again[kind]
            kinds(kind)
            names(name_id)
            starts(start)
            ends(end)
            tids(tid)
            devices(device)
            # cuda_sync ("Stream Sync", "Event Sync") shares its runtime call's correlation
            # but is a wait, not GPU work: unlinked, it never counts as an op's device time.
            if type(correlation) is not int:
                correlation = 0 if correlation is None else id_of(correlation) or 0
            correlations(correlation if kind is not other else 0)
            flops_col(float(flops) if flops else 0.0)
            shapes_col(intern(_shapes_text(dims)) if dims else 0)
            nbytes_col(0)
            dtypes_col(intern(_types_text(types)) if types else 0)
            if op_plain:  # the fields without a rule
                for append, cast, default, at in op_plain:
                    value = args[at] if at >= 0 else None
                    append(default if value is None else cast(value))

        def add_memory(start: int, tid: Any, args: tuple[Any, ...]) -> None:
            nbytes, device_type, device_id = (args if memory_exact
                                              else args[:memory_rules])
            if type(nbytes) is not int or not -latest < start < latest:
                raise TypeError
            kinds(memory)
            names(intern(MEMORY_NAME))
            starts(start)
            ends(start)
            tids(tid_of(tid))
            devices(device_id if device_type and type(device_id) is int else -1)
            correlations(0)
            flops_col(0.0)
            shapes_col(0)
            nbytes_col(nbytes)
            dtypes_col(0)
            if memory_plain:
                for append, cast, default, at in memory_plain:
                    value = args[at] if at >= 0 else None
                    append(default if value is None else cast(value))

        return add_op, add_memory

    def _plain(self, read: tuple[TraceField, ...]) -> tuple[Any, ...]:
        """What one kind of event (whose ``args`` hold ``read``) puts in the columns of the
        fields without a rule: ``(append, cast, default, position in args)`` each, the
        position -1 for the other kind's fields (the default, always)."""
        at = {f: i for i, f in enumerate(read)}
        return tuple((self.columns[f.column].append, _CASTS[f.dtype], f.default, at.get(f, -1))
                     for f in plain_fields(self.fields))

    def _rule(self, category: Any) -> tuple[Any, bool]:
        """A category's (kind, on the device), kept for the next event of it; an unknown
        one's kind is ``_UNPLACED`` (OTHER, which ``add_op`` counts: ``unplaced``)."""
        if known_category(category):
            found = category_kind(category)
        else:
            found = (_UNPLACED, False)
            self.unplaced[category] = [0, 0]
        self.categories[category] = found
        return found

    def categories_meta(self) -> dict[str, Any]:
        """What the categories seen say, for the table's ``meta``: the backend they name
        (``BACKEND_KEY``) and the unknown ones' events and time (``UNPLACED_KEY``)."""
        meta = categories_meta(self.categories, ((category, count, ns) for category, (count, ns)
                                                 in self.unplaced.items()))
        if self.unpaired:  # (no time to count: said by their number alone)
            meta.setdefault(UNPLACED_KEY, {})[UNPAIRED] = [self.unpaired, 0]
        return meta

    def freeze_relative(self, meta: dict[str, Any]) -> EventTable:
        """The table, its times made relative to the trace's first timestamp, and named
        lanes that hold CPU work made threads (``_named_threads``)."""
        table = self.freeze(meta={**meta, **self.categories_meta()})
        _named_threads(table)
        if self.counter_ranges:
            table.meta.update(join_ranges(table, self.counter_ranges))
        if table.n:
            table.origin_ns = int(table.start.min())
            table.start -= table.origin_ns
            table.end -= table.origin_ns
        return table


#: The first thread id given to a named lane that holds CPU work (``_named_threads``):
#: above any real thread id (a 64-bit pthread id, or a 32-bit one made unsigned).
FIRST_NAMED_THREAD = 1 << 62


def _named_threads(table: EventTable) -> None:
    """A named lane (a ``tid`` string that names no number) holding CPU work, ops, runtime
    calls or ranges (a tool that names its threads: ``"MainThread"``), is a thread: it gets
    a thread id of its own (``FIRST_NAMED_THREAD`` on, in the order the lanes were first
    seen), so its events nest as any thread's. A lane of the profiler's own records alone
    (Kineto's session span "PyTorch Profiler (0)") stays a lane (``FIRST_NAMED_LANE``)."""
    lanes = (table.tid <= FIRST_NAMED_LANE) & (table.device < 0)
    if not lanes.any():
        return
    working = unique(table.tid[lanes & (table.kind != Kind.OTHER)])  # (ascending)
    if not working.size:
        return
    on = np.flatnonzero(lanes)
    at = np.minimum(np.searchsorted(working, table.tid[on]), working.size - 1)
    on, at = on[working[at] == table.tid[on]], at[working[at] == table.tid[on]]
    # (lane ids go down as lanes are first seen: the first seen is the largest)
    table.tid[on] = FIRST_NAMED_THREAD + (working.size - 1 - at)


def trace_meta(path: Path, found: dict[str, Any]) -> dict[str, Any]:
    """The EventTable's ``meta`` from a trace's top-level keys (``META_KEYS``)."""
    meta: dict[str, Any] = {"file": path.name, "source": "trace"}
    props = found.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], dict):
        if type(props[0].get("name")) is str:  # (not a float the streaming reader keeps as text)
            meta["device_name"] = props[0]["name"]
        if type(props[0].get("computeMajor")) is int:
            meta["compute_major"] = props[0]["computeMajor"]
            if type(props[0].get("computeMinor")) is int:
                meta["compute_minor"] = props[0]["computeMinor"]
    info = found.get("distributedInfo")
    if isinstance(info, dict):
        for key in ("rank", "world_size", "backend"):
            value = info.get(key)
            if type(value) is str or (type(value) is int and abs(value) < 1 << 63):
                meta[key] = value  # (what a saved profile's ``distributed`` takes back)
    if type(found.get("traceName")) is str:
        meta["trace_name"] = found["traceName"]
    return meta


#: The fields the rules of ``add_op`` and ``add_memory`` read, by name, in the order they
#: take them (``Columns.op_fields`` and ``memory_fields`` begin with them).
OP_RULES = ("device", "stream", "correlation", "flops", "dims", "types")
MEMORY_RULES = ("nbytes", "device_type", "device_id")


def _rules_first(fields: tuple[TraceField, ...], on: str,
                 rules: tuple[str, ...]) -> tuple[TraceField, ...]:
    """The fields of one kind of event (``on``): those ``rules`` names, in that order,
    then those without a rule. ValueError where a rule's field is missing, or a field
    names a rule no reader applies."""
    mine = {f.name: f for f in fields if f.on == on}
    missing = [name for name in rules if name not in mine]
    unknown = [f.name for f in mine.values() if f.rule and f.name not in rules]
    if missing or unknown:
        raise ValueError(f"trace fields: {', '.join(missing)} missing, which the rules read; "
                         f"{', '.join(unknown)} with a rule that no reader applies")
    return (*(mine[name] for name in rules), *(f for f in mine.values() if not f.rule))


def _int_value(value: Any) -> int:
    """An integer field's value as written (an int, or a string holding one)."""
    found = int_of(value)
    if found is None:
        raise TypeError
    return found


#: How a field without a rule becomes its column's value, by the column's type.
_CASTS = {"int8": _int_value, "int16": _int_value, "int32": _int_value,
          "int64": _int_value, "float64": float}


def _types_text(types: Any) -> str:
    """``Input type`` as the live source writes dtypes: ``float, float, Scalar`` (an input
    with none: the empty string between commas)."""
    if not isinstance(types, list):
        return str(types)
    return ", ".join(t if isinstance(t, str) else str(t) for t in types)


def _shapes_text(dims: Any) -> str:
    """``Input Dims`` as the live source writes shapes: ``[8, 16], [16, 4]`` (``[]``: no tensor)."""
    if type(dims) is not list:
        raise TypeError
    return ", ".join(str(d) if d else "[]" for d in dims)
