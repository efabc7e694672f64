"""JSON read in chunks, one value at a time: the streaming trace reader's tokeniser.

``BufferedText`` holds decoded text read ``CHUNK`` characters at a time, with a cursor,
and knows the line and column of any position for error messages; ``Scanner`` decodes
one JSON value at a time from it with the C scanner of the standard ``json`` module,
asking for more text as a value runs past the buffer (floats stay their text:
``trace_numbers.Number``). Nothing here knows what a trace is.
"""

from __future__ import annotations

import json
import re
import sys
from typing import IO, Any

from kernelmagic.sources.trace_numbers import NonFinite, Number

CHUNK = 1 << 20  # characters decoded per read
MAX_EVENT = 256 << 20  # one event larger than this is an error, not a reason to buffer more
_WS = re.compile(r"[ \t\n\r]*")


class JsonFault(Exception):
    """Invalid JSON found by ``Scanner``; the reader adds the file and the context."""


class BufferedText:
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
        data = self.stream.read(CHUNK)
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


class Scanner:
    """Decodes one JSON value at a time from a ``BufferedText``, asking for more text as needed."""

    def __init__(self, text: BufferedText) -> None:
        self.text = text
        # Floats as text (exact ns later); NaN and Infinity as a marker no number field takes.
        self.decoder = json.JSONDecoder(parse_float=Number, parse_constant=NonFinite)
        self.scan_once = self.decoder.scan_once

    def value(self) -> Any:
        """The next JSON value; ``JsonFault`` naming where and why when it is not one."""
        text = self.text
        while True:
            try:
                obj, end = self.scan_once(text.buf, text.pos)
            except RecursionError:
                raise JsonFault(f"invalid JSON at {text.where()} (a value nested deeper than "
                                "any trace: arrays or objects inside each other about a "
                                "thousand levels deep)") from None
            except (StopIteration, json.JSONDecodeError):
                if self._partial() and text.fill():
                    continue
                raise JsonFault(self.problem()) from None
            except ValueError:  # not JSON's fault: an integer beyond Python's digit limit
                raise JsonFault(f"invalid JSON at {text.where()} (a number of more than "
                                f"{_max_digits()} digits)") from None
            if end >= len(text.buf) and not isinstance(obj, (dict, list, str)) and text.fill():
                continue  # a number may go on in the next chunk
            text.pos = end
            return obj

    def _error(self) -> json.JSONDecodeError | None:
        try:
            self.decoder.raw_decode(self.text.buf, self.text.pos)
        except json.JSONDecodeError as exc:
            return exc
        except (ValueError, RecursionError):  # (reported by ``value`` when it is the fault)
            return None
        return None

    def _partial(self) -> bool:
        """Whether the failed value may just be cut by the end of the buffered text."""
        text = self.text
        if text.eof or len(text.buf) - text.pos > MAX_EVENT:
            return False
        exc = self._error()
        return (exc is None or exc.msg.startswith("Unterminated string")
                or exc.pos >= len(text.buf) - 16)

    def problem(self) -> str:
        """Why the value at the cursor is not JSON: ``invalid JSON at line L column C (...)``."""
        text = self.text
        if not text.eof and len(text.buf) - text.pos > MAX_EVENT:
            return f"invalid JSON at {text.where()} (a value larger than {MAX_EVENT >> 20} MB)"
        exc = self._error()
        if exc is None:
            return f"invalid JSON at {text.where()}"
        if exc.pos >= len(text.buf) - 1 or exc.msg.startswith("Unterminated string"):
            return f"invalid JSON at {text.where(len(text.buf))} (the file ends early: truncated?)"
        return f"invalid JSON at {text.where(exc.pos)} ({exc.msg})"


def _max_digits() -> int:
    """Python's limit on the digits of an integer read from text (``sys.int_info``)."""
    return int(getattr(sys, "get_int_max_str_digits", lambda: 4300)() or 4300)


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type (a ``dict``: ``object``)."""
    name = type(value).__name__
    return {"str": "string", "int": "number", "float": "number", "dict": "object",
            "list": "array", "bool": "boolean", "NoneType": "null",
            "NonFinite": "NaN or Infinity"}.get(name, name)
