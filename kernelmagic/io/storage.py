"""Results on disk: one ``save`` and one ``read`` for a profile (``ProfileResult``) and a
run of many ranks (``ManyRanksResult``), each the JSON of its ``to_dict`` with a format
name and version (``result.save(path)`` on either calls ``save`` here).

``read`` (what ``kernelmagic.load`` returns: ``kernelmagic/api.py``) also opens torch's
trace files (``kernelmagic/sources/trace_file.py``) and folders of them, one per rank
(``kernelmagic/io/ranks.py``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelmagic.core.records import NotATrace, ProfileFileError

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from kernelmagic.results.ranks import ManyRanksResult
    from kernelmagic.results.result import ProfileResult


def save(result: ProfileResult | ManyRanksResult, path: str | os.PathLike[str]) -> Path:
    """Write ``result`` (one profile, or a run of many ranks) as JSON to ``path`` and return
    the path; ``read(path)`` reads it back."""
    target = Path(path)
    target.write_text(json.dumps(result.to_dict(), indent=1) + "\n", encoding="utf-8")
    return target


def read(path: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
         executor: Executor | None = None) -> ProfileResult | ManyRanksResult:
    """``kernelmagic.load(path, executor)`` (``kernelmagic/api.py`` says what it takes): a
    saved profile, a trace, or a folder or list of rank traces, by what ``path`` is."""
    if not isinstance(path, (str, os.PathLike)) or Path(path).is_dir():
        from kernelmagic.io.ranks import load_ranks

        return load_ranks(path, executor=executor)
    source = Path(path)
    from kernelmagic.sources import trace_file

    if not source.exists():
        raise ProfileFileError(f"{source}: no such file")
    if trace_file.is_profile_json(source):
        return _load_profile(source)
    # The gunzip begins on a thread before numpy and the views are imported (below).
    reading = trace_file.start_reading(source)
    from kernelmagic.io.traces import load_trace

    try:
        return load_trace(source, reading=reading)
    except NotATrace:
        return _load_profile(source)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key written twice: ``save`` never writes one, and readers
    disagree on which of the two counts."""
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {key!r} twice in one object")
            seen.add(key)
    return found


def _no_constant(name: str) -> Any:
    """``NaN`` and ``Infinity`` are not JSON, and no field of a profile holds one."""
    raise ValueError(f"{name} is not a JSON number")


def _load_profile(source: Path) -> ProfileResult:
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileFileError(f"{source}: no such file") from None
    except UnicodeDecodeError as exc:
        raise ProfileFileError(f"{source}: not a kernelmagic profile (not UTF-8 text: byte "
                               f"{exc.start})") from None
    except OSError as exc:
        raise ProfileFileError(f"{source}: cannot read it ({exc.strerror or exc})") from None
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ProfileFileError(
            f"{source}: not a kernelmagic profile (invalid JSON at line {exc.lineno})"
        ) from None
    except RecursionError:
        raise ProfileFileError(f"{source}: not a kernelmagic profile (values nested about a "
                               "thousand levels deep)") from None
    except ValueError as exc:  # a duplicate key, NaN, an integer past Python's digit limit
        why = "a number of thousands of digits" if "integer string" in str(exc) else str(exc)
        raise ProfileFileError(f"{source}: not a kernelmagic profile ({why})") from None
    from kernelmagic.results.result import ProfileResult

    try:
        if isinstance(data, dict) and data.get("format") == "kernelmagic.ranks":
            from kernelmagic.results.ranks import ManyRanksResult

            return ManyRanksResult.from_dict(data)  # type: ignore[return-value]
        return ProfileResult.from_dict(data)
    except ValueError as exc:
        raise ProfileFileError(f"{source}: {exc}") from None
