"""Records to JSON and back, derived from their dataclass fields and declared types.

Every row and result kernelmagic saves (``core/rows.py``, ``core/compiled_rows.py``,
``core/memory_rows.py``, ``CounterRow``, ``ProfileResult``, ``RankSummary``, ...) is a
dataclass whose fields hold JSON-friendly values. ``to_json`` walks
``dataclasses.fields()``; ``from_json`` walks the declared types
(``typing.get_type_hints``) and checks every value on the way in, so a field added to a
class serialises itself, and a wrong value in a file is one ``RecordError`` naming the
field's path (``rows[0].self_cpu_time_total: expected a number, got "abc"``) instead of a
``TypeError`` far from the file.

The rules, for files written before a field existed or by a newer kernelmagic:

* a field missing from the JSON takes its default (a field without one is an error);
* a key the class does not know is ignored;
* a field whose metadata has ``min`` (``field(metadata={"min": 1})``) takes no less, one
  with ``min_items`` no shorter a list;
* numbers must be finite (no NaN or Infinity) and integers fit in 64 bits; an integer is
  accepted where a float is declared (JSON writes ``2.0`` as ``2.0``, but hand-made files
  may write ``2``), never the other way round; ``true``/``false`` are not numbers.

The errors a file can raise on the way in are here too: ``ProfileFileError`` (a
ValueError) is any file ``kernelmagic.load`` cannot open; ``TraceFileError`` is one of
them, for torch's trace files; ``NotATrace`` tells the trace reader's caller that the JSON
is a kernelmagic profile, not a trace. Each message is one line naming the file.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
from functools import cache
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints, is_typeddict

from kernelmagic.core.units import counted, cut_end

__all__ = ["NotATrace", "ProfileFileError", "Record", "RecordError", "TraceFileError",
           "fields_from_json", "fields_json", "from_json", "to_json", "unit"]

_R = TypeVar("_R", bound="Record")
#: The largest integer a field takes (int64, as numpy keeps them).
INT_LIMIT = 2**63
_NONE = type(None)


class RecordError(ValueError):
    """A JSON value that does not fit the declared type; the message starts with its path."""


class ProfileFileError(ValueError):
    """A profile file that is missing, not JSON, or of another format or version."""


class TraceFileError(ProfileFileError):
    """A trace file that cannot be read: its one-line message names the file and the fault."""


class NotATrace(Exception):
    """The JSON has a top-level ``format`` key and no ``traceEvents``: a profile, not a trace."""


class Record:
    """``to_dict``/``from_dict`` for a dataclass, from its fields (``to_json``/``from_json``)."""

    __slots__ = ()  # so that a record declared with ``slots=True`` has no ``__dict__``

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON-ready values (nested records as objects, tuples as lists)."""
        return fields_json(self)

    @classmethod
    def from_dict(cls: type[_R], data: Any) -> _R:
        """Rebuild from ``to_dict`` output; ``RecordError`` (a ValueError) naming the
        field when a value does not fit its declared type."""
        return from_json(cls, data)  # type: ignore[no-any-return]


def to_json(value: Any) -> Any:
    """``value`` as plain JSON values: a dataclass field by field (one with a ``to_dict`` of
    its own, a result with its format's name and version, by that), tuples as lists, dict
    keys as strings; anything else as it is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        own = getattr(value, "to_dict", None)
        if own is not None and not isinstance(value, Record):
            return own()
        return fields_json(value)
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): to_json(v) for k, v in value.items()}
    return value


def fields_json(value: Any) -> dict[str, Any]:
    """A dataclass's fields as JSON values (``to_json`` of each), by name."""
    return {f.name: to_json(getattr(value, f.name)) for f in _fields(type(value))}


def from_json(tp: Any, value: Any, path: str = "") -> Any:
    """``value`` (decoded JSON) as the declared type ``tp``, checked all the way down."""
    if tp is Any or tp is object:
        return value
    if tp is float:
        return _number(value, path)
    if tp is bool or tp is str or tp is _NONE:
        if type(value) is not tp:
            raise _wrong(path, tp, value)
        return value
    if tp is int:
        return _integer(value, path)
    if dataclasses.is_dataclass(tp):
        own = getattr(tp, "from_json_value", None)  # a result that finishes its own reading
        return own(value, path) if own is not None else fields_from_json(tp, value, path)
    if is_typeddict(tp):
        return _typed_dict(tp, value, path)
    origin, args = get_origin(tp), get_args(tp)
    if origin is Union or origin is types.UnionType:
        return _union(args, value, path)
    if origin is list:
        return [from_json(args[0], v, f"{path}[{i}]") for i, v in enumerate(_list(value, path, tp))]
    if origin is tuple:
        return _tuple(args, value, path)
    if origin is dict:
        return _dict(args, value, path)
    raise TypeError(f"{path or 'value'}: cannot read a field of type {tp!r}")  # a bug, not a file


#: A class's dataclass fields and declared types, each looked up once per class.
_fields = cache(dataclasses.fields)
_hints = cache(get_type_hints)


def fields_from_json(cls: type, value: Any, path: str = "") -> Any:
    """A dataclass from a JSON object, field by field (``from_json``'s rules)."""
    if type(value) is not dict:
        raise _wrong(path, cls, value)
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for f in _fields(cls):
        if not f.init:
            continue
        where = f"{path}.{f.name}" if path else f.name
        if f.name in value:
            values[f.name] = from_json(hints[f.name], value[f.name], where)
            _check_bounds(f, values[f.name], where, hints[f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise RecordError(f"{path + ': ' if path else ''}no '{f.name}'")
    return cls(**values)


def _check_bounds(f: dataclasses.Field[Any], value: Any, where: str, tp: Any) -> None:
    """A field's ``min`` (a number) or ``min_items`` (a list) from its metadata."""
    least = f.metadata.get("min")
    if least is not None and value < least:
        raise RecordError(f"{where}: expected {_expected(tp)} >= {least}, got {_shown(value)}")
    items = f.metadata.get("min_items")
    if items is not None and len(value) < items:
        raise RecordError(f"{where}: expected at least {counted(items, 'item')}, "
                          f"got {len(value)}")


def _typed_dict(tp: Any, value: Any, path: str) -> dict[str, Any]:
    """A TypedDict: its declared keys checked, other keys kept as they are."""
    if type(value) is not dict:
        raise _wrong(path, dict, value)
    hints = _hints(tp)
    return {k: from_json(hints[k], v, f"{path}[{k!r}]") if k in hints else v
            for k, v in value.items()}


def _union(args: tuple[Any, ...], value: Any, path: str) -> Any:
    if value is None and _NONE in args:
        return None
    choices = [a for a in args if a is not _NONE]
    if len(choices) == 1:
        return from_json(choices[0], value, path)
    for choice in choices:
        try:
            return from_json(choice, value, path)
        except RecordError:
            continue
    raise RecordError(f"{path}: expected {' or '.join(_expected(a) for a in args)}, "
                      f"got {_shown(value)}")


def _list(value: Any, path: str, tp: Any) -> list[Any]:
    if type(value) is not list:
        raise _wrong(path, tp, value)
    return value


def _tuple(args: tuple[Any, ...], value: Any, path: str) -> tuple[Any, ...]:
    items = _list(value, path, tuple)
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(from_json(args[0], v, f"{path}[{i}]") for i, v in enumerate(items))
    if len(items) != len(args):
        raise RecordError(f"{path}: expected a list of {len(args)} items, got {len(items)}")
    pairs = enumerate(zip(args, items, strict=True))
    return tuple(from_json(a, v, f"{path}[{i}]") for i, (a, v) in pairs)


def _dict(args: tuple[Any, ...], value: Any, path: str) -> dict[Any, Any]:
    if type(value) is not dict:
        raise _wrong(path, dict, value)
    key_type, value_type = args
    out: dict[Any, Any] = {}
    for key, item in value.items():
        where = f"{path}[{key!r}]"
        if key_type is int:
            if not (key.lstrip("-").isdigit() and len(key) < 19):
                raise RecordError(f"{where}: expected an integer key")
            key = int(key)
        out[key] = from_json(value_type, item, where)
    return out


def _number(value: Any, path: str) -> float:
    if type(value) is float:
        if not math.isfinite(value):
            raise RecordError(f"{path}: expected a finite number, got {_shown(value)}")
        return value
    if type(value) is int:
        if abs(value) >= INT_LIMIT:
            raise RecordError(f"{path}: a number out of range ({_shown(value)})")
        return float(value)
    raise _wrong(path, float, value)


def _integer(value: Any, path: str) -> int:
    if type(value) is not int:
        raise _wrong(path, int, value)
    if abs(value) >= INT_LIMIT:
        raise RecordError(f"{path}: an integer out of range ({_shown(value)})")
    return value


def _expected(tp: Any) -> str:
    """What a value of ``tp`` is, in the words of a message."""
    if dataclasses.is_dataclass(tp) or is_typeddict(tp) or get_origin(tp) is dict or tp is dict:
        return "an object"
    if get_origin(tp) in (list, tuple) or tp in (list, tuple):
        return "a list"
    return {float: "a number", int: "an integer", str: "a string", bool: "true or false",
            _NONE: "null"}.get(tp, repr(tp))


def _shown(value: Any) -> str:
    """``value`` as a message quotes it: short JSON for scalars, the kind for the rest."""
    if type(value) is int and value.bit_length() > 64:
        return f"an integer of about {int(value.bit_length() * math.log10(2))} digits"
    if type(value) is float and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value, ensure_ascii=False)
    return cut_end(text, 40)


def _wrong(path: str, tp: Any, value: Any) -> RecordError:
    return RecordError(f"{path + ': ' if path else ''}expected {_expected(tp)}, "
                       f"got {_shown(value)}")


def unit(text: str, default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING,
         **metadata: Any) -> Any:
    """A row's field declared with the unit of its column (``metadata["unit"]``), which
    ``to_pandas`` puts in ``df.attrs["units"]``: ``count: int = unit("calls, summed over
    {over}", 0)``; ``{over}`` becomes the iterations a sum is over."""
    return dataclasses.field(default=default, default_factory=factory,
                             metadata={"unit": text, **metadata})
