"""Kineto / Chrome trace files (``.json``, ``.json.gz``, ``.pt.trace.json[.gz]``) -> EventTable.

What ``torch.profiler`` writes (``export_chrome_trace``, ``tensorboard_trace_handler``)
is one JSON object: ``{"schemaVersion": 1, "deviceProperties": [...],
"distributedInfo": {...}, "traceEvents": [...]}``. The reader streams it: the text is
decompressed and decoded in chunks, ``traceEvents`` is decoded one event at a time with
the C scanner of the standard ``json`` module, and each event goes into plain typed
arrays at once, so memory holds columns, never the whole document. Metadata keys may come
before or after ``traceEvents``.

Timestamps are absolute microseconds, often with a fraction (``1712195495505543.2``):
they are read as decimal text and turned into integer nanoseconds exactly, then made
relative to the trace's first timestamp. torch is never imported here.

The Chrome trace format allows ids and times as JSON strings, and older traces (the
TensorBoard plugin's era) use them: ``"tid": "123"``, ``"tid": "stream 7"``, ``"pid":
"0"``. A string holding an integer is that integer wherever an integer is read (``pid``,
``tid``, ``args`` ``device``, ``stream``, ``correlation``), ``"stream N"`` is stream N,
any other ``tid`` string is a named lane of its own; a ``ts``/``dur`` string holding a
number is read as that number.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import zlib
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path
from typing import IO, Any

from kernelmagic.events import EventTable, Kind, TableBuilder
from kernelmagic.storage import ProfileFileError

#: Category -> kind, for torch >= 1.13 traces and for the older TensorBoard-era names.
CATEGORIES: dict[str, Kind] = {
    "cpu_op": Kind.OP,
    "operator": Kind.OP,
    "user_annotation": Kind.RANGE,
    "gpu_user_annotation": Kind.GPU_RANGE,
    "python_function": Kind.PYTHON,
    "python": Kind.PYTHON,
    "cuda_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,
    "kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET,
}
_ON_DEVICE = frozenset({Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.GPU_RANGE})
_GPU_SIDE_CATEGORIES = frozenset({"cuda_sync"})  # GPU-timeline events that are not work
#: CPU-side ranges that become STEP or OTHER whatever their category says.
STEP_PREFIX = "ProfilerStep#"
DATALOADER_PREFIX = "enumerate(DataLoader)"
TRACE_SUFFIXES = (".json", ".json.gz")

_CHUNK = 1 << 20  # characters decoded per read
_MAX_EVENT = 256 << 20  # one event larger than this is an error, not a reason to buffer more
_META_KEYS = ("deviceProperties", "distributedInfo", "traceName", "schemaVersion", "format")
_WS = re.compile(r"[ \t\n\r]*")
_COMMA = re.compile(r"[ \t\n\r]*,[ \t\n\r]*")
#: A flow event ("ph" "s"/"f"/"t": ac2g, fwdbwd arrows), flat, with plain strings: skipped
#: without decoding. Anything else (an escape, a nested value) goes through the scanner.
_FLOW = re.compile(r'\{\s*"ph":\s*"[sft]"(?:\s*,\s*"[^"\\]*":\s*(?:"[^"\\]*"|-?[0-9][0-9.eE+-]*))*'
                   r"\s*\}")
_PLAIN_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]{1,3})?\Z")
#: A JSON number's text, as a ``ts``/``dur`` written as a string may hold it.
_NUMBER_TEXT = re.compile(r"[ \t]*(-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)[ \t]*\Z")
#: An integer written as a string (``"123"``, ``"-5"``, ``" 7"``).
_INTEGER_TEXT = re.compile(r"[ \t]*([+-]?[0-9]+)[ \t]*\Z")
_PROFILE_HEAD = re.compile(r'\s*\{\s*"format"\s*:\s*"kernelmagic\.profile"')


class TraceFileError(ProfileFileError):
    """A trace file that cannot be read: its one-line message names the file and the fault."""


class NotATrace(Exception):
    """The JSON has a top-level ``format`` key and no ``traceEvents``: a profile, not a trace."""


# --- numbers ----------------------------------------------------------------------------


class _Number(str):
    """A JSON number with a fraction or exponent, kept as its text (a JSON string stays str)."""

    __slots__ = ()


def _ns_of_text(text: str) -> int:
    """Microseconds as JSON number text -> integer nanoseconds, exactly (half-even)."""
    if _PLAIN_NUMBER.match(text):  # the usual case: at most 3 decimals (whole nanoseconds)
        dot = text.find(".")
        if dot < 0:
            return int(text) * 1000
        return int(text[:dot] + text[dot + 1:] + "000"[len(text) - dot - 1:])
    try:
        return int((Decimal(text) * 1000).to_integral_value(ROUND_HALF_EVEN))
    except (InvalidOperation, ValueError, OverflowError):
        raise ValueError(f"{text!r} is not a number") from None


def ns_of_string(text: str) -> int:
    """A ``ts``/``dur`` written as a JSON string (``"1712195495505543.2"``) -> integer ns.

    The string must hold a JSON number (blanks around it allowed); ValueError otherwise.
    """
    found = _NUMBER_TEXT.match(text)
    if found is None:
        raise ValueError(f"{text!r} is not a number")
    return _ns_of_text(found.group(1))


def _ns(value: Any) -> int:
    """A ``ts``/``dur`` as decoded (int, float text, or a string) -> integer nanoseconds."""
    if type(value) is int:
        return value * 1000
    if type(value) is _Number:
        return _ns_of_text(value)
    if type(value) is str:
        return ns_of_string(value)
    raise TypeError


def _int_of(value: Any) -> int | None:
    """An integer id as written (an int, or a string holding one) -> the int, else None."""
    if type(value) is int:
        return value
    if type(value) is str:
        found = _INTEGER_TEXT.match(value)
        if found is not None:
            return int(found.group(1))
    return None


def _thread_id(number: int) -> int:
    """A 32-bit thread id written as signed (-(2**31) <= id < 0) is the real, unsigned one."""
    if -(1 << 31) <= number < 0:
        return number + (1 << 32)
    return number


# --- the buffered text ------------------------------------------------------------------


class _Fault(Exception):
    """Invalid JSON found by ``_Scanner``; the reader adds the file and the context."""


class _Text:
    """Decoded text read in chunks, with a cursor; knows lines dropped for error messages."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.buf = ""
        self.pos = 0
        self.eof = False
        self.dropped_lines = 0  # newlines in the text dropped from the buffer
        self.column0 = 0  # the column of buf[0] on its line, counted from 0

    def fill(self) -> bool:
        """Append the next chunk (dropping what was consumed); False at the end."""
        if self.eof:
            return False
        data = self.stream.read(_CHUNK)
        if not data:
            self.eof = True
            return False
        if self.pos:
            newlines = self.buf.count("\n", 0, self.pos)
            if newlines:
                self.dropped_lines += newlines
                self.column0 = self.pos - self.buf.rfind("\n", 0, self.pos) - 1
            else:
                self.column0 += self.pos
            self.buf = self.buf[self.pos:] + data
            self.pos = 0
        else:
            self.buf += data
        return True

    def peek(self) -> str:
        """The next non-blank character (the cursor moves to it), or "" at the end."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.fill():
                return ""

    def where(self, pos: int | None = None) -> str:
        """``line L column C`` of buffer position ``pos`` (default: the cursor), from 1."""
        at = self.pos if pos is None else pos
        newlines = self.buf.count("\n", 0, at)
        column = at - self.buf.rfind("\n", 0, at) - 1 if newlines else self.column0 + at
        return f"line {self.dropped_lines + newlines + 1} column {column + 1}"


class _Scanner:
    """Decodes one JSON value at a time from a ``_Text``, asking for more text as needed."""

    def __init__(self, text: _Text) -> None:
        self.text = text
        decoder = json.JSONDecoder(parse_float=_Number)  # floats as text: exact ns later
        self.decoder = decoder
        self.scan_once = decoder.scan_once

    def value(self) -> Any:
        """The next JSON value; ``_Fault`` naming where and why when it is not one."""
        text = self.text
        while True:
            try:
                obj, end = self.scan_once(text.buf, text.pos)
            except (StopIteration, json.JSONDecodeError):
                if self._partial() and text.fill():
                    continue
                raise _Fault(self.problem()) from None
            if end >= len(text.buf) and not isinstance(obj, (dict, list, str)) and text.fill():
                continue  # a number may go on in the next chunk
            text.pos = end
            return obj

    def _error(self) -> json.JSONDecodeError | None:
        try:
            self.decoder.raw_decode(self.text.buf, self.text.pos)
        except json.JSONDecodeError as exc:
            return exc
        return None

    def _partial(self) -> bool:
        """Whether the failed value may just be cut by the end of the buffered text."""
        text = self.text
        if text.eof or len(text.buf) - text.pos > _MAX_EVENT:
            return False
        exc = self._error()
        return (exc is None or exc.msg.startswith("Unterminated string")
                or exc.pos >= len(text.buf) - 16)

    def problem(self) -> str:
        """Why the value at the cursor is not JSON: ``invalid JSON at line L column C (...)``."""
        text = self.text
        if not text.eof and len(text.buf) - text.pos > _MAX_EVENT:
            return f"invalid JSON at {text.where()} (a value larger than {_MAX_EVENT >> 20} MB)"
        exc = self._error()
        if exc is None:
            return f"invalid JSON at {text.where()}"
        if exc.pos >= len(text.buf) - 1 or exc.msg.startswith("Unterminated string"):
            return f"invalid JSON at {text.where(len(text.buf))} (the file ends early: truncated?)"
        return f"invalid JSON at {text.where(exc.pos)} ({exc.msg})"


# --- columns ----------------------------------------------------------------------------


class _Columns(TableBuilder):
    """The table being read, with the per-event rules both trace readers apply."""

    def __init__(self) -> None:
        super().__init__()
        self.string_tids: dict[str, int] = {}  # every tid string seen -> its id
        self.lanes = 0  # named lanes so far

    def tid_of(self, tid: Any) -> int:
        """A thread id as written -> an int.

        An int, or a string holding one (``"123"``, ``"-5"``), is that thread (a 32-bit id
        written as signed is the unsigned one); ``"stream 7"`` is stream 7; any other
        string is a named lane ("PyTorch Profiler"), with a negative id of its own (the
        event tree leaves negative ids out); anything else is 0.
        """
        if type(tid) is int:
            return _thread_id(tid)
        if type(tid) is str:
            found = self.string_tids.get(tid)
            if found is None:
                found = self.string_tids[tid] = self._string_tid(tid)
            return found
        return 0

    def _string_tid(self, tid: str) -> int:
        number = _int_of(tid)
        if number is not None:  # "123": the thread, as the int would be
            return _thread_id(number)
        text = tid.strip()
        if text.startswith("stream "):  # old traces: "stream 7"
            stream = text[7:].strip()
            if stream.isascii() and stream.isdigit():
                return int(stream)
        self.lanes += 1  # a named lane
        return -self.lanes - (1 << 40)

    def adders(self) -> tuple[Any, Any, Any]:
        """``(add_op, add_memory, ns)``, the per-event functions every reader calls.

        ``add_op(name, cat, start, dur, tid, pid, device, stream, correlation, flops,
        dims)`` takes one complete ("X") event, ``add_memory(start, tid, nbytes,
        device_type, device_id)`` one ``[memory]`` instant; ``start`` and ``dur`` are
        integer nanoseconds, ``args`` values None where absent; ids may be ints or
        strings holding ints (``_int_of``). ``ns(value)`` turns a ``ts``/``dur`` as the
        standard ``json`` module decodes it here (an int, a ``_Number``, or a string
        holding a number) into integer nanoseconds. A value of the wrong type raises
        TypeError or ValueError.
        Locals are bound once: this is the readers' hot loop.
        """
        ids, intern = self.ids, self.intern
        kinds, names, starts, ends = (self.kind.append, self.name.append, self.start.append,
                                      self.end.append)
        tids, devices = self.tid.append, self.device.append
        correlations, flops_col = self.correlation.append, self.flops.append
        shapes_col, nbytes_col = self.shapes.append, self.nbytes.append
        tid_of, id_of, string_ns = self.tid_of, _int_of, ns_of_string
        categories: dict[Any, tuple[Kind, bool]] = {}
        special: dict[str, Any] = {}  # CPU-side names that are steps or DataLoader
        number, text_ns = _Number, _ns_of_text
        op, rng, other, memory = Kind.OP, Kind.RANGE, Kind.OTHER, Kind.MEMORY
        unseen = object()

        def ns(value: Any) -> int:
            kind = type(value)
            if kind is int:
                return value * 1000
            if kind is number:
                if value[-4:-3] == ".":  # "123.456" µs: whole nanoseconds, the usual case
                    try:  # (JSON number text: int() fails only on an exponent)
                        return int(value[:-4] + value[-3:])
                    except ValueError:
                        pass
                return text_ns(value)
            if kind is str:  # "ts": "1712195495505543.2"
                return string_ns(value)
            raise TypeError

        def add_op(name: Any, cat: Any, start: int, dur: int, tid: Any, pid: Any, device: Any,
                   stream: Any, correlation: Any, flops: Any, dims: Any) -> None:
            found = categories.get(cat)
            if found is None:
                found = categories[cat] = _category(cat)
            kind, on_device = found
            if dur < 0:
                raise ValueError
            end = start + dur
            name_id = ids.get(name)
            if name_id is None:
                if type(name) is not str:
                    raise TypeError
                name_id = intern(name)
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
                if kind is op or kind is rng or kind is other:
                    again = special.get(name, unseen)
                    if again is unseen:
                        again = special[name] = _special(name)
                    if again is not None:
                        kind = again
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

        def add_memory(start: int, tid: Any, nbytes: Any, device_type: Any,
                       device_id: Any) -> None:
            if type(nbytes) is not int:
                raise TypeError
            kinds(memory)
            names(intern("[memory]"))
            starts(start)
            ends(start)
            tids(tid_of(tid))
            devices(device_id if device_type and type(device_id) is int else -1)
            correlations(0)
            flops_col(0.0)
            shapes_col(0)
            nbytes_col(nbytes)

        return add_op, add_memory, ns

    def freeze_relative(self, meta: dict[str, Any]) -> EventTable:
        """The table, its times made relative to the trace's first timestamp."""
        table = self.freeze(meta=meta)
        if table.n:
            table.origin_ns = int(table.start.min())
            table.start -= table.origin_ns
            table.end -= table.origin_ns
        return table


# --- the reader -------------------------------------------------------------------------


def _open_text(path: Path) -> tuple[IO[str], bool]:
    """The file as text (gunzipped when it starts with gzip's magic bytes)."""
    with open(path, "rb") as raw:
        magic = raw.read(2)
    if magic == b"\x1f\x8b":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig"), True
    return open(path, encoding="utf-8-sig"), False  # (a byte-order mark is dropped)


def is_profile_json(path: Path) -> bool:
    """Whether ``path`` starts like a kernelmagic profile (``{"format": "kernelmagic.profile"``)."""
    try:
        with open(path, "rb") as raw:
            head = raw.read(4096)
    except OSError:
        return False
    return bool(_PROFILE_HEAD.match(head.decode("utf-8", errors="replace")))


class _Reader:
    """One pass over a trace file, filling ``_Columns``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cols = _Columns()
        self.meta: dict[str, Any] = {}
        self.events_seen = False

    def fail(self, message: str) -> TraceFileError:
        return TraceFileError(f"{self.path}: {message}")

    def read(self) -> EventTable:
        try:
            stream, zipped = _open_text(self.path)
        except FileNotFoundError:
            raise self.fail("no such file") from None
        except OSError as exc:
            raise self.fail(f"cannot read it ({exc.strerror or exc})") from None
        try:
            with stream:
                self._document(_Text(stream), zipped)
        except EOFError:
            raise self.fail("truncated gzip file (it ends before the end of its data)") from None
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise self.fail(f"corrupt gzip file ({exc})") from None
        except UnicodeDecodeError:
            raise self.fail("not a text file (not UTF-8): not a kernelmagic profile or trace") \
                from None
        except OSError as exc:
            raise self.fail(f"cannot read it ({exc.strerror or exc})") from None
        return self.cols.freeze_relative(self._meta())

    # -- document structure --

    def _document(self, text: _Text, zipped: bool) -> None:
        scanner = _Scanner(text)
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
                raise self.fail("not a kernelmagic profile or trace (a JSON "
                                f"{_json_type(type(scalar).__name__)}, not an object)")
        except _Fault as fault:
            prefix = "" if self.events_seen else "not a kernelmagic profile or trace: "
            raise self.fail(prefix + str(fault)) from None
        if text.peek():
            raise self.fail(f"unexpected text after the JSON document at {text.where()}")

    def _expect(self, text: _Text, scanner: _Scanner, allowed: str) -> str:
        c = text.peek()
        if c and c in allowed:
            text.pos += 1
            return c
        if not c:
            raise _Fault(f"invalid JSON at {text.where()} (the file ends early: truncated?)")
        raise _Fault(f"invalid JSON at {text.where()} (expected one of {allowed!r}, "
                     f"found {c!r})")

    def _object(self, text: _Text, scanner: _Scanner) -> None:
        text.pos += 1
        keys: list[str] = []
        if text.peek() == "}":
            text.pos += 1
        else:
            while True:
                if text.peek() != '"':
                    self._expect(text, scanner, '"')
                key = scanner.value()
                self._expect(text, scanner, ":")
                keys.append(key)
                if key == "traceEvents":
                    if text.peek() != "[":  # (the cursor is on the value now)
                        kind = _json_type(type(scanner.value()).__name__)
                        raise self.fail(f"'traceEvents' is a JSON {kind}, not a list of events")
                    self._events(text, scanner, bare=False)
                    self.events_seen = True
                else:
                    text.peek()
                    value = scanner.value()
                    if key in _META_KEYS:
                        self.meta[key] = value
                if self._expect(text, scanner, ",}") == "}":
                    break
        if not self.events_seen:
            if "format" in self.meta:
                raise NotATrace
            listed = ", ".join(repr(k) for k in keys[:5]) or "none"
            raise self.fail("not a kernelmagic profile or trace (JSON without 'traceEvents'; "
                            f"its keys: {listed})")

    # -- the events --

    def _events(self, text: _Text, scanner: _Scanner, bare: bool) -> None:
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
                    except (StopIteration, json.JSONDecodeError):
                        event = None
                    else:
                        if type(event) is dict:
                            text.pos = end
                        else:
                            event = None
            if event is None:
                c = text.peek()
                if c == "]":
                    text.pos += 1
                    return
                if index:
                    if c != ",":
                        self._expect(text, scanner, ",]")
                    text.pos += 1
                    if text.peek() == "]":  # tolerate a trailing comma
                        continue
                try:
                    event = scanner.value()
                except _Fault as fault:
                    if bare and not index:
                        raise
                    raise self.fail(f"{fault} in traceEvents[{index}]") from None
                if type(event) is not dict:
                    kind = _json_type(type(event).__name__)
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
        add_op, add_memory, ns = self.cols.adders()
        no_args: dict[str, Any] = {}

        def add(event: dict[str, Any]) -> None:
            ph = event.get("ph")
            if ph != "X":
                if ph == "i" or ph == "I":
                    if event.get("name") == "[memory]":
                        args = event.get("args") or no_args
                        add_memory(ns(event["ts"]), event.get("tid"), args.get("Bytes", 0),
                                   args.get("Device Type", 0), args.get("Device Id", -1))
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
            add_op(event["name"], event.get("cat"), ns(event["ts"]), ns(event["dur"]),
                   event.get("tid"), event.get("pid"), args.get("device"), args.get("stream"),
                   args.get("correlation"), args.get("flops"), args.get("Input Dims"))

        return add

    def _explain(self, event: dict[str, Any], index: int) -> str:
        """Why ``event`` could not be read, in one line."""
        where = f"traceEvents[{index}]"
        label = event.get("name")
        if type(label) is str:
            where += f" ({label[:60]!r})"
        ph = event.get("ph")
        if type(ph) is not str:
            return f"{where}: 'ph' is a JSON {_json_type(type(ph).__name__)}, expected a string"
        needed = ("name", "ts", "dur") if ph == "X" else ("ts",)
        for key in needed:
            if key not in event:
                return f"{where}: no '{key}'"
        if type(event.get("name", "")) is not str:
            return f"{where}: 'name' is a JSON {_json_type(type(event['name']).__name__)}, " \
                   "expected a string"
        for key in ("ts", "dur"):
            if key not in needed:
                continue
            value = event[key]
            if type(value) is str and _NUMBER_TEXT.match(value) is None:
                return f"{where}: '{key}' is a JSON string, expected a number " \
                       f"(or a string holding one, not {value[:40]!r})"
            if type(value) not in (int, str) and not _is_number_text(value):
                return f"{where}: '{key}' is a JSON {_json_type(type(value).__name__)}, " \
                       "expected a number"
        if ph == "X" and _ns(event["dur"]) < 0:
            return f"{where}: 'dur' is negative ({event['dur']})"
        args = event.get("args")
        if args is not None and type(args) is not dict:
            return f"{where}: 'args' is a JSON {_json_type(type(args).__name__)}, " \
                   "expected an object"
        if ph in ("i", "I") and type((args or {}).get("Bytes", 0)) is not int:
            return f"{where}: args 'Bytes' is not an integer"
        return f"{where}: cannot read this event"

    def _meta(self) -> dict[str, Any]:
        return trace_meta(self.path, self.meta)


def trace_meta(path: Path, found: dict[str, Any]) -> dict[str, Any]:
    """The EventTable's ``meta`` from a trace's top-level keys (``_META_KEYS``)."""
    meta: dict[str, Any] = {"file": path.name, "source": "trace"}
    props = found.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], dict):
        if isinstance(props[0].get("name"), str):
            meta["device_name"] = props[0]["name"]
        if type(props[0].get("computeMajor")) is int:
            meta["compute_major"] = props[0]["computeMajor"]
    info = found.get("distributedInfo")
    if isinstance(info, dict):
        for key in ("rank", "world_size", "backend"):
            if key in info and isinstance(info[key], (int, str)):
                meta[key] = info[key]
    if isinstance(found.get("traceName"), str):
        meta["trace_name"] = found["traceName"]
    return meta


def _category(cat: Any) -> tuple[Kind, bool]:
    """(kind, whether on the GPU timeline) of a category; unknown ones are OTHER on the CPU."""
    kind = CATEGORIES.get(cat.lower()) if type(cat) is str else None
    if kind is None:
        return Kind.OTHER, cat in _GPU_SIDE_CATEGORIES
    return kind, kind in _ON_DEVICE


def _special(name: str) -> Kind | None:
    """STEP or OTHER for the CPU-side ranges that are never rows, whatever their category."""
    if name.startswith(STEP_PREFIX):
        return Kind.STEP
    if name.startswith(DATALOADER_PREFIX):
        return Kind.OTHER
    return None


def _shapes_text(dims: Any) -> str:
    """``Input Dims`` as the live source writes shapes: ``[8, 16], [16, 4]`` (``[]``: no tensor)."""
    if type(dims) is not list:
        raise TypeError
    return ", ".join(str(d) if d else "[]" for d in dims)


def _json_type(python_type: str) -> str:
    return {"str": "string", "int": "number", "float": "number", "dict": "object",
            "list": "array", "bool": "boolean", "NoneType": "null"}.get(python_type, python_type)


def _is_number_text(value: Any) -> bool:
    return type(value) is _Number  # floats arrive as their JSON text, strings as plain str


def read_table(path: str | os.PathLike[str], fast: bool = True) -> EventTable:
    """Read one trace file into an EventTable (parents and launchers not yet derived).

    TraceFileError (a ValueError) with a one-line message naming the file otherwise;
    NotATrace when the file is a JSON object with a ``format`` key and no ``traceEvents``.
    With msgspec installed (``fast``), ``trace_fast`` reads what it can, in about
    half the time; ``fast=False``, or any file it leaves, goes through the streaming reader.
    """
    source = Path(path)
    if fast:
        from kernelmagic.sources import trace_fast

        table = trace_fast.read_table(source)
        if table is not None:
            return table
    return _Reader(source).read()


def find_traces(folder: Path) -> list[Path]:
    """The trace files directly inside ``folder`` (``*.json``, ``*.json.gz``), sorted."""
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
