"""Numbers as trace files write them: exact nanoseconds from microsecond text, integer ids.

Timestamps are absolute microseconds, often with a fraction (``1712195495505543.2``):
they are read as decimal text (``Number``: the standard ``json`` module's floats kept as
their text) and turned into integer nanoseconds exactly. The Chrome trace format allows
ids and times as JSON strings, and older traces use them: a string holding an integer is
that integer wherever an integer is read (``int_of``); a ``ts``/``dur`` string holding a
number is read as that number (``ns_of_string``).
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

_PLAIN_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]{1,3})?\Z")
#: A JSON number's text, as a ``ts``/``dur`` written as a string may hold it.
NUMBER_TEXT = re.compile(r"[ \t]*(-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)[ \t]*\Z")
#: An integer written as a string (``"123"``, ``"-5"``, ``" 7"``).
_INTEGER_TEXT = re.compile(r"[ \t]*([+-]?[0-9]+)[ \t]*\Z")


class Number(str):
    """A JSON number with a fraction or exponent, kept as its text (a JSON string stays str)."""

    __slots__ = ()


class NonFinite:
    """``NaN``, ``Infinity`` or ``-Infinity``: not JSON, though Python's ``json`` reads them.

    Kept as a marker, not a float, so that a field kernelmagic reads (``ts``, ``dur``,
    ``flops``, an id, ``Bytes``) refuses it (``float()`` and ``int()`` raise TypeError) while
    a value it never reads may hold one, as before.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


#: The largest ``|ts|`` a trace may hold, in ns (2**62 ns: about the year 2116 as a Unix
#: time; ``ts + dur`` then stays within int64).
MAX_TIME_NS = 1 << 62
#: The longest ``dur`` a trace may hold, in ns (10**15 ns: 11.6 days). Longer is a broken
#: clock or a hostile file, not a profile.
MAX_DURATION_NS = 10**15


def ns_of_text(text: str) -> int:
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
    found = NUMBER_TEXT.match(text)
    if found is None:
        raise ValueError(f"{text!r} is not a number")
    return ns_of_text(found.group(1))


def ns_of_value(value: Any) -> int:
    """A ``ts``/``dur`` as the standard ``json`` module decodes it (an int, a ``Number``, or
    a string holding a number) -> integer nanoseconds; TypeError for any other type. The
    streaming reader calls it for every time it reads."""
    kind = type(value)
    if kind is int:
        return value * 1000
    if kind is Number:
        if value[-4:-3] == ".":  # "123.456" µs: whole nanoseconds, the usual case
            try:  # (JSON number text: int() fails only on an exponent)
                return int(value[:-4] + value[-3:])
            except ValueError:
                pass
        return ns_of_text(value)
    if kind is str:  # "ts": "1712195495505543.2"
        return ns_of_string(value)
    raise TypeError


def int_of(value: Any) -> int | None:
    """An integer id as written (an int, a string holding one, or a whole number written
    as a float: ``7.0``, as tools that keep every number as a double write ids) -> the int,
    else None."""
    if type(value) is int:
        return value
    if type(value) is str:
        found = _INTEGER_TEXT.match(value)
        if found is not None:
            return int(found.group(1))
    if type(value) is float:  # (the msgspec reader's)
        return int(value) if value.is_integer() and abs(value) < 2.0**63 else None
    if type(value) is Number:  # (the streaming reader's: the number's text)
        try:
            exact = Decimal(value)
        except InvalidOperation:
            return None
        if exact == exact.to_integral_value() and abs(exact) < 2**63:
            return int(exact)
    return None


def thread_id(number: int) -> int:
    """A 32-bit thread id written as signed (-(2**31) <= id < 0) is the real, unsigned one."""
    return number + (1 << 32) if -(1 << 31) <= number < 0 else number
