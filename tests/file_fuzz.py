"""A fuzzer for the files kernelmagic opens: real traces from ``tests/data`` and saved
profiles, mutated byte by byte and structurally, and the outcome rule they must obey.

``mutated_files()`` draws (name, bytes): a seed file's JSON text changed by a few mutations,
each either on the bytes (cut, duplicate a slice, overwrite or insert bytes) or on the
decoded JSON (drop a key, swap a value's type, duplicate a list item, nest a value deeper,
write a key twice), then written plain or gzipped (and maybe cut inside the gzip).
``check_file(path)`` asserts the rule of issue #35: ``kernelmagic.load`` returns a result
(whose summary and findings work, and which saves and loads back) or raises
``ProfileFileError`` (``TraceFileError`` for traces) with one line naming the file; where
msgspec's trace reader takes the file, the streaming reader reads it to an equal table.
``tests/test_file_fuzz.py`` runs it on a few hundred derandomized examples,
``tools/file_fuzz_soak.py`` on many random ones.
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

import kernelmagic
from kernelmagic.core.records import ProfileFileError
from kernelmagic.results.ranks import ManyRanksResult
from kernelmagic.results.result import ProfileResult
from kernelmagic.sources import trace_fast
from kernelmagic.sources.trace_stream import StreamReader

DATA = Path(__file__).parent / "data"
#: Small real files: traces (CPU, CUDA with streams, Triton, ROCm) and saved profiles.
SEEDS = ("cpu_only.json.gz", "a100_triton.json.gz", "a100_multi_stream_sync.json.gz",
         "mi250_rocm.json.gz", "saved_profile_v1.json", "saved_live_cpu_v1.json")
#: Values a structural mutation puts in place of another.
SWAPS: tuple[Any, ...] = ("abc", "", -1, 0, 2.5, -1e308, 10**30, None, True, [], {}, [1, "x"],
                          {"ph": "X"}, "12.5", "NaN")
_DEEP = "\u2063deep\u2063"  # where a deepened value goes (a text no seed file holds)
COLUMNS = ("kind", "name", "start", "end", "tid", "device", "correlation", "flops", "shapes",
           "nbytes")


@cache
def seed_text(name: str) -> bytes:
    raw = (DATA / name).read_bytes()
    return gzip.decompress(raw) if name.endswith(".gz") else raw


def _paths(value: Any, prefix: tuple[Any, ...] = (), limit: int = 400) -> list[tuple[Any, ...]]:
    """Paths to values inside ``value`` (breadth first, at most ``limit``)."""
    found: list[tuple[Any, ...]] = []
    queue = [(prefix, value)]
    while queue and len(found) < limit:
        path, item = queue.pop(0)
        found.append(path)
        if isinstance(item, dict):
            queue.extend(((*path, k), v) for k, v in item.items())
        elif isinstance(item, list):
            queue.extend(((*path, i), v) for i, v in enumerate(item[:20]))
    return found


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        doc = doc[part]
    return doc


@st.composite
def structural(draw: st.DrawFn, text: bytes) -> bytes:
    """One change to the decoded JSON, written back as text."""
    doc = json.loads(text)
    paths = [p for p in _paths(doc) if p]
    if not paths:
        return text
    path = draw(st.sampled_from(paths))
    parent, key = _parent(doc, path), path[-1]
    how = draw(st.sampled_from(["drop", "swap", "duplicate", "deepen", "twice"]))
    if how == "drop":
        del parent[key]
    elif how == "swap":
        parent[key] = draw(st.sampled_from(SWAPS))
    elif how == "duplicate" and isinstance(parent, list):
        parent.insert(key, parent[key])
    deep = ""
    if how == "deepen":  # written as text: json.dumps itself stops near 1000 levels
        depth = draw(st.sampled_from([1, 3, 70, 1200]))
        deep = "[" * depth + json.dumps(parent[key]) + "]" * depth
        parent[key] = _DEEP
    out = json.dumps(doc, allow_nan=True).replace(json.dumps(_DEEP), deep, 1)
    if how == "twice" and isinstance(parent, dict):  # the key written again, another value
        marker = json.dumps({key: parent[key]})[1:-1]
        twice = marker + ", " + json.dumps({key: draw(st.sampled_from(SWAPS))})[1:-1]
        out = out.replace(marker, twice, 1)
    if how == "swap" and isinstance(parent, dict) and parent.get(key) == "NaN":
        out = out.replace('"NaN"', "NaN", 1)  # a bare NaN, as Python's json writes it
    return out.encode()


@st.composite
def bytewise(draw: st.DrawFn, text: bytes) -> bytes:
    """One change to the bytes: cut, duplicate a slice, overwrite or insert bytes."""
    if not text:
        return text
    at = draw(st.integers(0, len(text) - 1))
    how = draw(st.sampled_from(["cut", "duplicate", "overwrite", "insert"]))
    if how == "cut":
        return text[:at]
    if how == "duplicate":
        end = draw(st.integers(at, min(len(text), at + 200)))
        return text[:end] + text[at:end] + text[end:]
    noise = draw(st.binary(min_size=1, max_size=4) | st.sampled_from(
        [b"[", b"]", b"{", b"}", b",", b'"', b":", b"\\", b"\xff", b"\xc3", b"-", b"e9", b"NaN"]))
    if how == "overwrite":
        return text[:at] + noise + text[at + len(noise):]
    return text[:at] + noise + text[at:]


@st.composite
def mutated_files(draw: st.DrawFn) -> tuple[str, bytes]:
    """(file name, content): a seed file, mutated one to three times, maybe gzipped."""
    seed = draw(st.sampled_from(SEEDS))
    text = seed_text(seed)
    for _ in range(draw(st.integers(1, 3))):
        change = structural(text) if draw(st.booleans()) else bytewise(text)
        try:
            text = draw(change)
        except (ValueError, RecursionError):  # no longer JSON (or too deep for json.loads)
            text = draw(bytewise(text))
    if draw(st.booleans()):
        packed = gzip.compress(text, mtime=0)
        if draw(st.integers(0, 9)) == 0:  # a truncated gzip
            packed = packed[:draw(st.integers(0, len(packed) - 1))]
        return "fuzzed.json.gz", packed
    return "fuzzed.json", text


def check_file(path: Path) -> str:
    """The outcome rule on one file; returns "result" or the error's kind (for tallies)."""
    try:
        result = kernelmagic.load(path)
    except ProfileFileError as exc:
        message = str(exc)
        assert "\n" not in message, message
        assert message.startswith(f"{path}: ") and len(message) > len(f"{path}: "), message
        outcome = type(exc).__name__
    else:
        assert isinstance(result, (ProfileResult, ManyRanksResult)), type(result)
        result.summary()  # the report's first line and the findings work on what was loaded
        result.findings()
        again = type(result).from_dict(json.loads(json.dumps(result.to_dict())))
        assert again.to_dict() == result.to_dict()  # and it saves and loads back
        outcome = "result"
    _readers_agree(path)
    return outcome


def _readers_agree(path: Path) -> None:
    """Where msgspec's reader takes the file, the streaming reader gives the same table."""
    fast = trace_fast.read_table(path)
    if fast is None:
        return
    slow = StreamReader(path).read()  # must not raise: the fast reader accepted the file
    for column in COLUMNS:
        np.testing.assert_array_equal(getattr(fast, column), getattr(slow, column), column)
    assert fast.names == slow.names and fast.origin_ns == slow.origin_ns
    assert fast.meta == slow.meta
