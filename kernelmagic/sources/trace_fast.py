"""Trace files decoded by msgspec, when it is installed (the ``fast`` extra).

The same EventTable as the streaming reader (``trace_stream``), in about half the time:

* msgspec decodes the whole document in C into small typed records, picking the record
  type by each event's ``"ph"`` and skipping every key the table does not use (a flow
  arrow's fields, a kernel's grid and occupancy, ...): the ``args`` record is made from
  the trace fields (``core/events.py``: ``TRACE_FIELDS``; ``_records``);
* timestamps stay as their JSON text and become integer nanoseconds a column at a time
  (``_ns_column``), exactly;
* each record then goes through the very function the streaming reader uses
  (``Columns.adders``), so both readers give equal tables; ``tests/test_trace_readers.py``
  checks that on every trace in ``tests/data``.

It holds the whole decompressed file in memory (about three times the JSON at the peak;
``trace_text`` reads and gunzips it), so files over ``trace_text.MAX_TEXT`` bytes of JSON
are left to the streaming reader, whose memory stays flat. Anything this reader does not
take as it expects (a document of another shape, an event type outside the Chrome trace
format, invalid JSON, a value of the wrong type) returns None: the streaming reader then
reads the file and names any fault.
"""

from __future__ import annotations

import codecs
import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import numpy as np

from kernelmagic.core.counter_metrics import COUNTER_CATEGORY
from kernelmagic.core.event_rules import MEMORY_NAME
from kernelmagic.core.events import TRACE_FIELDS, EventTable, TraceField
from kernelmagic.sources.trace_columns import Columns, trace_meta
from kernelmagic.sources.trace_numbers import ns_of_string, ns_of_text
from kernelmagic.sources.trace_text import text_bytes

try:
    import msgspec
except ImportError:  # the streaming reader does the work
    msgspec = None

#: Files whose brackets nest deeper than this (a torch trace: 5) go to the streaming reader.
MAX_NESTING = 64
_NESTING_CHUNK = 1 << 20
_AS_SQUARE = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
_COUNTER_TEXT = b'"cuda_profiler_range"'  # a file holding counter ranges has this text
#: The Chrome trace format's other event types ("ph"): decoded as empty records. ("B" and
#: "E", a duration's begin and end, are read: ``Columns.pair_durations``.)
_SKIPPED_PHASES = "sftMCbneSTpFPONDVvRc"


def read_table(path: Path, text: Callable[[], bytes | None] | None = None,
               fields: tuple[TraceField, ...] = TRACE_FIELDS) -> EventTable | None:
    """``path`` as an EventTable, or None where the streaming reader must read it;
    ``text`` gives its JSON bytes when ``trace_text.text_ahead`` has begun reading them;
    ``fields``: the ``args`` values read (``core/events.py``)."""
    if msgspec is None:
        return None
    try:
        data = text() if text is not None else text_bytes(path)
        if (data is None or not _nesting_within(data, MAX_NESTING) or not _utf8(data)
                or data.count(b'"traceEvents"') != 1):  # (twice: the streaming reader refuses)
            return None
        records = _records(fields)
        doc = records.decoder.decode(data)
        # Counter ranges' args are metric names the typed records skip: read apart.
        counter_args = (_counter_args(data) if _COUNTER_TEXT in data else None)
        del data
        cols = Columns(fields)
        _fill(cols, records, doc.traceEvents, counter_args)
        cols.pair_durations()
    except Exception:  # any fault: the streaming reader names it
        return None
    found = {"deviceProperties": doc.deviceProperties, "distributedInfo": doc.distributedInfo,
             "traceName": doc.traceName}
    return cols.freeze_relative(trace_meta(path, found))


def _utf8(data: bytes) -> bool:
    """Whether ``data`` is UTF-8 throughout (msgspec does not check the keys it skips),
    decoded a chunk at a time so that memory stays that of one chunk."""
    if data.isascii():
        return True
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for at in range(0, len(data), _NESTING_CHUNK):
            decoder.decode(data[at:at + _NESTING_CHUNK])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _nesting_within(data: bytes, limit: int) -> bool:
    """Whether brackets nest at most about ``limit`` deep, counted over the raw bytes: the
    spread (highest minus lowest) of the running count of openers minus closers. Brackets
    in strings (a kernel's ``<...>[...]`` name) move it, but a file it passes nests at most
    ``2 * limit`` deep (a depth D needs a spread of D/2 or more whatever the strings hold),
    far below the streaming reader's limit (Python's recursion depth, about 990): deeper
    files go to that reader, so this one never takes a file that one would refuse."""
    # The brackets alone, "{" read as "[" and "}" as "]": one C pass over the text, no
    # copies of it (the result's buffer holds the brackets only).
    brackets = data.translate(_AS_SQUARE, _NOT_BRACKETS)
    depth, highest, lowest = 0, 0, 0
    # A chunk at a time, into two buffers made once: memory first written costs more than
    # the sum itself here (benchmarks/README.md). int32 holds it: the depth stays within
    # ``limit`` of 0, a chunk moves it by at most its length.
    step = np.empty(min(_NESTING_CHUNK, len(brackets)), np.int8)
    running = np.empty(step.size, np.int32)
    for at in range(0, len(brackets), _NESTING_CHUNK):
        chunk = np.frombuffer(brackets, dtype=np.int8, offset=at,
                              count=min(_NESTING_CHUNK, len(brackets) - at))
        n = chunk.size
        np.subtract(92, chunk, out=step[:n])  # "[" 1, "]" -1
        np.cumsum(step[:n], dtype=np.int32, out=running[:n])
        running[:n] += depth
        highest = max(highest, int(running[:n].max()))
        lowest = min(lowest, int(running[:n].min()))
        if highest - lowest > limit:
            return False
        depth = int(running[n - 1])
    return True


def _fill(cols: Columns, records: _Records, events: list[Any],
          counter_args: list[Any] | None = None) -> None:
    """Every event into ``cols``, in file order, by the streaming reader's rules;
    ``counter_args`` holds each event's ``args`` (by index) when the file has counter
    ranges (``_counter_args``)."""
    add_op, add_memory = cols.adders()
    complete, instant, no_args = records.complete, records.instants, records.no_args
    op_values = operator.attrgetter(*(f.name for f in cols.op_fields))
    memory_values = operator.attrgetter(*(f.name for f in cols.memory_fields))
    begin = records.begin  # (a "B"; else an "E": both kept for ``pair_durations``)
    wanted = records.timed
    timed = [e for e in events if type(e) in wanted]
    starts = iter(_ns_column([e.ts for e in timed]))
    durations = iter(_ns_column([e.dur for e in timed if type(e) is complete]))
    for e in timed:
        start = next(starts)
        if type(e) is complete:
            add_op(e.name, e.cat, start, next(durations), e.tid, e.pid,
                   op_values(e.args or no_args))
        elif type(e) in instant:
            if e.name == MEMORY_NAME:
                add_memory(start, e.tid, memory_values(e.args or no_args))
        else:
            cols.add_duration_event("B" if type(e) is begin else "E", e.name, e.cat, start,
                                    e.tid, e.pid, op_values(e.args or no_args))
    if counter_args is not None:  # the counter ranges' metric values (not in the hot loop)
        ranges = [(i, e) for i, e in enumerate(events)
                  if type(e) is complete and e.cat == COUNTER_CATEGORY]
        range_starts = _ns_column([e.ts for _, e in ranges])
        for (i, e), start in zip(ranges, range_starts, strict=True):
            cols.add_counters(e.name, start, counter_args[i])


def _counter_args(data: bytes) -> list[Any]:
    """Every event's ``args`` as a dict (or None), by index: a second, lighter decode,
    done only for files holding counter ranges."""
    doc = _ARGS_DECODER.decode(data)
    return [e.args if type(e.args) is dict else None for e in doc.traceEvents]


def _ns_column(texts: list[Any]) -> list[int]:
    """JSON number texts (microseconds) -> integer nanoseconds, exactly.

    The usual case, every value with exactly three decimals ("1712195495505582.988"), is
    one C-level parse of the values without their dots; anything else goes value by value,
    a JSON string holding a number (``"12.5"``) included. Anything else (a string that
    holds no number, null, ...) raises TypeError or ValueError.
    """
    if not texts:
        return []
    joined = b",".join(texts)
    if not joined.translate(None, b"0123456789.,-"):  # digits, dots and signs only
        chars = np.frombuffer(joined, dtype=np.uint8)
        dots = np.flatnonzero(chars == ord("."))
        ends = np.append(np.flatnonzero(chars == ord(",")), chars.size)
        starts = np.append(0, ends[:-1] + 1)
        length = ends - starts
        # One dot per value, 3 decimals after it, a digit before it; below 9e18 ns (int64).
        if (dots.size == len(texts) and (ends - dots == 4).all() and (dots > starts).all()
                and ((length <= 19) | ((length == 20) & (chars[starts] <= ord("8")))).all()):
            values = np.fromstring(joined.replace(b".", b""), dtype=np.int64, sep=",")
            return values.tolist()  # type: ignore[no-any-return]
    return [_ns(text) for text in texts]


def _ns(raw: Any) -> int:
    """One ``ts``/``dur`` as its raw JSON text -> integer nanoseconds, exactly."""
    text = bytes(raw)
    if text.isdigit():
        return int(text) * 1000
    if text[:1] == b'"':  # a string, as old traces may write times: "12.5"
        value = msgspec.json.decode(text)
        if type(value) is not str:
            raise TypeError
        return ns_of_string(value)
    if not text or text[:1] in b'[{ntf':  # an array, object, null, true, false
        raise TypeError
    return ns_of_text(text.decode())


@dataclass(frozen=True)
class _Records:
    """What decodes a document for one tuple of fields: the decoder, the event records it
    makes (a complete event's, the instants'), and the ``args`` record of an event
    without them (its fields' defaults)."""

    decoder: Any
    complete: type
    instants: frozenset[type]
    no_args: Any
    begin: type  # "B" and "E" (``Columns.pair_durations``)
    end: type

    @functools.cached_property
    def timed(self) -> frozenset[type]:
        """The records read for their time: complete events, instants, "B" and "E"."""
        return frozenset((self.complete, *self.instants, self.begin, self.end))


@functools.cache
def _records(fields: tuple[TraceField, ...]) -> _Records:
    """The decoder of a document whose events' ``args`` keep the values of ``fields`` (their
    keys, each its field's default where absent) and skip every other key.

    The records are made for the fields (``msgspec.defstruct``), not generic in their
    ``args``: msgspec before 0.19 cannot make a generic record without the garbage
    collector's tracking, which costs a third of the decoding time. gc=False: records of
    plain values (JSON holds no cycles) that the cyclic garbage collector need not track.
    """
    args = msgspec.defstruct(
        "_Args", [(f.name, Any, msgspec.field(default=f.default, name=f.key)) for f in fields],
        gc=False)
    times = [("ts", msgspec.Raw, msgspec.Raw())]  # the number's text: exact nanoseconds
    complete = msgspec.defstruct(  # "ph": "X": an op, range, kernel, copy, runtime call, ...
        "_Complete", [("name", Any, None), ("cat", Any, None), ("pid", Any, None),
                      ("tid", Any, None), *times, ("dur", msgspec.Raw, msgspec.Raw()),
                      ("args", args | None, None)],
        tag_field="ph", tag="X", gc=False)
    instant = [("name", Any, None), ("tid", Any, None), *times, ("args", args | None, None)]
    instants = [msgspec.defstruct(f"_Instant_{tag}", instant, tag_field="ph", tag=tag,
                                  gc=False)
                for tag in ("i", "I")]  # [memory] records; "I": the older spelling
    # "B"/"E": a duration's begin and end (told apart by their type), each read as a
    # complete event once paired
    durations = [msgspec.defstruct(f"_Duration_{tag}", [
        ("name", Any, None), ("cat", Any, None), ("pid", Any, None), ("tid", Any, None),
        *times, ("args", args | None, None)], tag_field="ph", tag=tag, gc=False)
        for tag in ("B", "E")]
    skipped = [msgspec.defstruct(f"_Skipped_{p}", [], tag_field="ph", tag=p, gc=False)
               for p in _SKIPPED_PHASES]
    document = msgspec.defstruct(
        "_Document", [("traceEvents", list[Union[(complete, *instants, *durations,  # type: ignore[misc]
                                                  *skipped)]]),
                      ("deviceProperties", Any, None), ("distributedInfo", Any, None),
                      ("traceName", Any, None)])
    return _Records(msgspec.json.Decoder(document), complete, frozenset(instants), args(),
                    durations[0], durations[1])


if msgspec is not None:
    class _ArgsOnly(msgspec.Struct, gc=False):
        """Any event, its ``args`` only (``cuda_profiler_range``'s metric values)."""

        args: Any = None

    class _ArgsDocument(msgspec.Struct):
        traceEvents: list[_ArgsOnly]

    _ARGS_DECODER: Any = msgspec.json.Decoder(_ArgsDocument)
