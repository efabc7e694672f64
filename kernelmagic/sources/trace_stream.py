"""The streaming trace reader: a Kineto / Chrome trace file, one event at a time, into
``Columns``, with memory holding columns, never the whole document.

The text is decompressed and decoded in chunks (``json_scanner.BufferedText``); ``traceEvents``
is decoded one event at a time (``json_scanner.Scanner``) and each event goes into the
columns at once by the rules both readers share (``trace_columns.Columns.adders``).
Metadata keys may come before or after ``traceEvents``. Any fault is a ``TraceFileError``
whose one-line message names the file, the event and what is wrong with it.
"""

from __future__ import annotations

import ast
import gzip
import io
import os
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from kernelmagic.core.counter_metrics import COUNTER_CATEGORY
from kernelmagic.core.event_rules import MEMORY_NAME
from kernelmagic.core.events import TRACE_FIELDS, EventTable, TraceField
from kernelmagic.core.records import NotATrace, TraceFileError
from kernelmagic.core.units import format_bytes, format_us
from kernelmagic.sources.json_scanner import BufferedText, JsonFault, Scanner, json_type
from kernelmagic.sources.trace_columns import META_KEYS, Columns, trace_meta
from kernelmagic.sources.trace_numbers import (
    MAX_DURATION_NS,
    MAX_TIME_NS,
    NUMBER_TEXT,
    NonFinite,
    Number,
    ns_of_value,
)

_COMMA = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")
#: A flow event ("ph" "s"/"f"/"t": ac2g, fwdbwd arrows), flat, with plain strings: skipped
#: without decoding. Anything else (an escape, a nested value) goes through the scanner.
_FLOW = re.compile(r'\{\s*"ph":\s*"[sft]"(?:\s*,\s*"[^"\\]*":\s*(?:"[^"\\]*"|-?[0-9][0-9.eE+-]*))*'
                   r"\s*\}")


#: The most bytes a ``.gz`` trace may decompress to (default 4 GiB, four times the largest
#: trace the benchmarks read, tens of millions of events) before reading stops with an
#: error: a small file that unpacks to terabytes (a "gzip bomb") then costs about 25 s on
#: this project's machine, not hours. Set it with the
#: environment variable ``KERNELMAGIC_MAX_GUNZIP_BYTES`` or by assigning this attribute.
MAX_GUNZIP_BYTES = 4 << 30
_MAX_GUNZIP_ENV = "KERNELMAGIC_MAX_GUNZIP_BYTES"


class GunzipLimit(Exception):
    """A ``.gz`` file decompressed past ``gunzip_limit()`` bytes."""


def gunzip_limit() -> int:
    """``MAX_GUNZIP_BYTES``, or the environment's ``KERNELMAGIC_MAX_GUNZIP_BYTES``."""
    text = os.environ.get(_MAX_GUNZIP_ENV, "").strip()
    return int(text) if text.isdigit() else MAX_GUNZIP_BYTES


class _Capped(io.RawIOBase):
    """A decompressing stream that raises ``GunzipLimit`` past ``limit`` bytes."""

    def __init__(self, inner: IO[bytes], limit: int) -> None:
        self.inner, self.limit, self.total = inner, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self.inner.readinto(buffer)  # type: ignore[attr-defined]
        self.total += n
        if self.total > self.limit:
            raise GunzipLimit
        return n  # type: ignore[no-any-return]

    def close(self) -> None:
        self.inner.close()
        super().close()


def _open_text(path: Path) -> tuple[IO[str], bool]:
    """The file as text (gunzipped when it starts with gzip's magic bytes, at most
    ``gunzip_limit()`` bytes of it)."""
    with open(path, "rb") as raw:
        magic = raw.read(2)
    if magic == b"\x1f\x8b":
        capped = io.BufferedReader(_Capped(gzip.open(path, "rb"), gunzip_limit()), 1 << 20)
        return io.TextIOWrapper(capped, encoding="utf-8-sig"), True
    return open(path, encoding="utf-8-sig"), False  # (a byte-order mark is dropped)


def _values_of(fields: tuple[TraceField, ...]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """``values(args)``: an event's ``args`` values of ``fields``, in their order, each its
    field's default where ``args`` lacks its key.

    Written out as one expression from the fields (``args.get(key, default), ...``), as
    ``collections.namedtuple`` writes its methods: per event that costs what the same
    ``get`` calls written by hand cost, a third of a loop's or a ``map``'s (the streaming
    reader's hot loop). Keys and defaults are the spec's literals, never a file's text.
    """
    for f in fields:
        if ast.literal_eval(repr(f.default)) != f.default:
            raise ValueError(f"trace field {f.name}: its default is not a literal")
    calls = "".join(f"args.get({f.key!r}, {f.default!r}), " for f in fields)
    return eval(f"lambda args: ({calls})")  # type: ignore[no-any-return]


def _time_fault(key: str, value: Any) -> str:
    """Why ``ts`` or ``dur`` ``value`` cannot be a time, or "" when it can."""
    if type(value) is NonFinite:
        return f"'{key}' is {value.text}, expected a finite number"
    if type(value) is str and NUMBER_TEXT.match(value) is None:
        return (f"'{key}' is a JSON string, expected a number "
                f"(or a string holding one, not {value[:40]!r})")
    if type(value) not in (int, str, Number):  # (a float arrives as its text: Number)
        return f"'{key}' is a JSON {json_type(value)}, expected a number"
    ns = ns_of_value(value)
    if key == "dur" and ns < 0:
        return f"'dur' is negative ({value})"
    limit = MAX_DURATION_NS if key == "dur" else MAX_TIME_NS
    if abs(ns) > limit:
        shown = value if len(str(value)) <= 24 else f"{str(value)[:20]}… ({len(str(value))} digits)"
        return (f"'{key}' is {shown} µs, beyond any real trace (at most "
                f"{format_us(limit / 1000)})")
    return ""


class StreamReader:
    """One pass over a trace file, filling ``Columns``."""

    def __init__(self, path: Path, fields: tuple[TraceField, ...] = TRACE_FIELDS) -> None:
        self.path = path
        self.cols = Columns(fields)
        self.meta: dict[str, Any] = {}
        self.events_seen = False

    def fail(self, message: str) -> TraceFileError:
        return TraceFileError(f"{self.path}: {message}")

    def read(self) -> EventTable:
        try:
            stream, zipped = _open_text(self.path)
            with stream:
                self._document(BufferedText(stream), zipped)
        except FileNotFoundError:
            raise self.fail("no such file") from None
        except EOFError:
            raise self.fail("truncated gzip file (it ends before the end of its data)") from None
        except GunzipLimit:
            raise self.fail(f"decompresses to more than {format_bytes(gunzip_limit())}, the "
                            f"limit (set {_MAX_GUNZIP_ENV} to read it)") from None
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise self.fail(f"corrupt gzip file ({exc})") from None
        except UnicodeDecodeError:
            raise self.fail("not a text file (not UTF-8): not a kernelmagic profile or trace") \
                from None
        except OSError as exc:
            raise self.fail(f"cannot read it ({exc.strerror or exc})") from None
        try:
            self.cols.pair_durations()
        except (TypeError, ValueError, AttributeError, OverflowError, KeyError):
            raise self.fail('a duration ("B" and its "E") cannot be read as an event: a '
                            "name, id or time of the wrong type") from None
        return self.cols.freeze_relative(trace_meta(self.path, self.meta))

    # -- document structure --

    def _document(self, text: BufferedText, zipped: bool) -> None:
        scanner = Scanner(text)
        first = text.peek()
        if not first:
            raise self.fail("empty file" + (" (after gunzip)" if zipped else ""))
        try:
            if first == "[":  # Chrome's "JSON array format": the events alone
                self._events(text, scanner, bare=True)
            elif first == "{":
                self._object(text, scanner)
            else:
                scalar = scanner.value()  # a JSON scalar, or not JSON: the scanner says which
                raise self.fail(f"not a kernelmagic profile or trace (a JSON {json_type(scalar)}, "
                                "not an object)")
        except JsonFault as fault:
            prefix = "" if self.events_seen else "not a kernelmagic profile or trace: "
            raise self.fail(prefix + str(fault)) from None
        if text.peek():
            raise self.fail(f"unexpected text after the JSON document at {text.where()}")

    def _expect(self, text: BufferedText, allowed: str) -> str:
        c = text.peek()
        if c and c in allowed:
            text.pos += 1
            return c
        if not c:
            raise JsonFault(f"invalid JSON at {text.where()} (the file ends early: truncated?)")
        raise JsonFault(f"invalid JSON at {text.where()} (expected one of {allowed!r}, "
                     f"found {c!r})")

    def _object(self, text: BufferedText, scanner: Scanner) -> None:
        text.pos += 1
        keys: list[str] = []
        if text.peek() == "}":
            text.pos += 1
        else:
            while True:
                if text.peek() != '"':
                    self._expect(text, '"')
                key = scanner.value()
                self._expect(text, ":")
                keys.append(key)
                if key == "traceEvents":
                    if self.events_seen:
                        raise self.fail("'traceEvents' twice in one document")
                    if text.peek() != "[":  # (the cursor is on the value now)
                        kind = json_type(scanner.value())
                        raise self.fail(f"'traceEvents' is a JSON {kind}, not a list of events")
                    self._events(text, scanner, bare=False)
                    self.events_seen = True
                else:
                    text.peek()
                    value = scanner.value()
                    if key in META_KEYS:
                        self.meta[key] = value
                if self._expect(text, ",}") == "}":
                    break
        if not self.events_seen:
            if "format" in self.meta:
                raise NotATrace
            listed = ", ".join(repr(k) for k in keys[:5]) or "none"
            raise self.fail("not a kernelmagic profile or trace (JSON without 'traceEvents'; "
                            f"its keys: {listed})")

    # -- the events --

    def _events(self, text: BufferedText, scanner: Scanner, bare: bool) -> None:
        text.pos += 1  # the "["
        add = self._adder()
        scan = scanner.scan_once
        comma = _COMMA.match
        skip_flow = _FLOW.match
        index = 0
        while True:
            # The fast path: "," and blanks, then a whole event inside the buffered text.
            event = None
            if index:
                found = comma(text.buf, text.pos)
                if found is not None and found.end() < len(text.buf):
                    flow = skip_flow(text.buf, found.end())
                    if flow is not None:  # a flow arrow: nothing of it is kept
                        text.pos = flow.end()
                        index += 1
                        continue
                    try:
                        event, end = scan(text.buf, found.end())
                    except (StopIteration, ValueError, RecursionError):  # the scanner says why
                        event = None
                    else:
                        if type(event) is dict:
                            text.pos = end
                        else:
                            event = None
            if event is None:
                c = text.peek()
                if c == "]" or (bare and not c):  # (the JSON Array Format may leave out its
                    text.pos += 1                 # "]": a trace cut off as its process ended)
                    return
                if index:
                    if c != ",":
                        self._expect(text, ",]")
                    text.pos += 1
                    after = text.peek()
                    if after == "]":  # tolerate a trailing comma
                        continue
                    if bare and not after:  # (and the "]" left out, as above)
                        return
                try:
                    event = scanner.value()
                except JsonFault as fault:
                    if bare and not index:
                        raise
                    raise self.fail(f"{fault} in traceEvents[{index}]") from None
                if type(event) is not dict:
                    kind = json_type(event)
                    if bare and not index:
                        raise self.fail(f"not a kernelmagic profile or trace (a JSON array of "
                                        f"{kind}s, not of events)")
                    raise self.fail(f"traceEvents[{index}] is a JSON {kind}, "
                                    "not an event object")
            try:
                add(event)
            except (TypeError, ValueError, AttributeError, OverflowError, KeyError):
                raise self.fail(self._explain(event, index)) from None
            index += 1
            self.events_seen = True

    def _adder(self) -> Any:
        """``add(event)``: one decoded event (a dict) into the columns."""
        add_op, add_memory = self.cols.adders()
        ns = ns_of_value
        op_values, memory_values = (_values_of(self.cols.op_fields),
                                    _values_of(self.cols.memory_fields))
        add_counters, counter_category = self.cols.add_counters, COUNTER_CATEGORY
        add_duration = self.cols.add_duration_event
        no_args: dict[str, Any] = {}

        def add(event: dict[str, Any]) -> None:
            ph = event.get("ph")
            if ph != "X" and ph != "B" and ph != "E":
                if ph == "i" or ph == "I":
                    if event.get("name") == MEMORY_NAME:
                        args = event.get("args") or no_args
                        add_memory(ns(event["ts"]), event.get("tid"), memory_values(args))
                    else:
                        ns(event["ts"])
                elif ph is not None and type(ph) is not str:
                    raise TypeError
                return
            args = event.get("args")
            if type(args) is not dict:
                if args is not None:
                    raise TypeError
                args = no_args
            if ph != "X":  # a duration's begin or end: paired once all are read
                add_duration(ph, event.get("name"), event.get("cat"), ns(event["ts"]),
                             event.get("tid"), event.get("pid"), op_values(args))
                return
            cat, start = event.get("cat"), ns(event["ts"])
            add_op(event["name"], cat, start, ns(event["dur"]), event.get("tid"),
                   event.get("pid"), op_values(args))
            if cat == counter_category:
                add_counters(event["name"], start, args)

        return add

    def _explain(self, event: dict[str, Any], index: int) -> str:
        """Why ``event`` could not be read, in one line."""
        where = f"traceEvents[{index}]"
        label = event.get("name")
        if type(label) is str:
            where += f" ({label[:60]!r})"
        ph = event.get("ph")
        if type(ph) is not str:
            return f"{where}: 'ph' is a JSON {json_type(ph)}, expected a string"
        needed = ("name", "ts", "dur") if ph == "X" else ("ts",)
        for key in needed:
            if key not in event:
                return f"{where}: no '{key}'"
        if type(event.get("name", "")) is not str:
            return f"{where}: 'name' is a JSON {json_type(event['name'])}, expected a string"
        for key in ("ts", "dur"):
            if key in needed and (fault := _time_fault(key, event[key])):
                return f"{where}: {fault}"
        args = event.get("args")
        if args is not None and type(args) is not dict:
            return f"{where}: 'args' is a JSON {json_type(args)}, expected an object"
        if ph in ("i", "I") and type((args or {}).get("Bytes", 0)) is not int:
            return f"{where}: args 'Bytes' is not an integer"
        read = {f.key for f in self.cols.fields}
        for key, value in (args or {}).items():
            if key in read and type(value) is NonFinite:
                return f"{where}: args '{key}' is {value.text}, expected a finite number"
        cat = event.get("cat")
        if cat is not None and type(cat) is not str:
            return f"{where}: 'cat' is a JSON {json_type(cat)}, expected a string"
        tid = event.get("tid")
        if tid is not None and type(tid) not in (int, str, float, Number):
            return f"{where}: 'tid' is a JSON {json_type(tid)}, expected an integer or a string"
        ids = [("", "tid", tid)]  # (the ids kept, in 64-bit columns; ``pid`` is not)
        ids += [("args ", key, value) for key, value in (args or {}).items() if key in read]
        for within, key, value in ids:
            if type(value) is int and not -(1 << 63) <= value < 1 << 63:
                return f"{where}: {within}'{key}' is {value}, out of range (a 64-bit integer)"
        return f"{where}: cannot read this event (an id or count out of range?)"
