"""Kineto / Chrome trace files (``.json``, ``.json.gz``, ``.pt.trace.json[.gz]``) -> EventTable.

What ``torch.profiler`` writes (``export_chrome_trace``, ``tensorboard_trace_handler``)
is one JSON object: ``{"schemaVersion": 1, "deviceProperties": [...],
"distributedInfo": {...}, "traceEvents": [...]}``. ``read_table`` picks the reader:
``trace_fast`` (msgspec: the whole file decoded at once, about half the time) for what it
takes, else ``trace_stream`` (the standard library's ``json``, one event at a time, flat
memory, and the one that names any fault). Both apply the same rules to each event
(``trace_columns``); times become exact integer nanoseconds (``trace_numbers``), relative
to the trace's first timestamp. torch is never imported here.

The modules, bottom to top: ``trace_numbers`` (number and id parsing), ``json_scanner``
(the chunked JSON tokeniser), ``trace_text`` (the whole file's bytes, gunzipped on a
thread), ``trace_columns`` (the per-event rules and ``trace_meta``), ``trace_stream`` and
``trace_fast`` (the two readers), this dispatcher. This one imports only the standard
library and ``trace_text`` at first, so that the gunzip starts before numpy is imported.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

from kernelmagic.sources import trace_text

if TYPE_CHECKING:
    from kernelmagic.core.events import EventTable

__all__ = ["TRACE_SUFFIXES", "find_traces", "is_profile_json", "read_table", "start_reading"]

TRACE_SUFFIXES = (".json", ".json.gz")
_PROFILE_HEAD = re.compile(r'\s*\{\s*"format"\s*:\s*"kernelmagic\.(?:profile|ranks)"')


def is_profile_json(path: Path) -> bool:
    """Whether ``path`` starts like a saved kernelmagic result (``{"format":
    "kernelmagic.profile"`` or ``"kernelmagic.ranks"``): read as JSON, not as a trace."""
    try:
        with open(path, "rb") as raw:
            head = raw.read(4096)
    except OSError:
        return False
    return bool(_PROFILE_HEAD.match(head.decode("utf-8", errors="replace")))


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
    return _stream_read(source)


def start_reading(path: str | os.PathLike[str]) -> Callable[[], EventTable]:
    """``read_table(path)`` in two halves: this begins gunzipping the file on a thread
    (msgspec's reader's first step; nothing but the standard library imported yet), and
    the function it returns finishes the read, so that what the caller does in between
    (its imports: numpy, the readers, the views) overlaps the gunzip."""
    source = Path(path)
    if not _msgspec_found():
        return lambda: _stream_read(source)
    text = trace_text.text_ahead(source)

    def finish() -> EventTable:
        from kernelmagic.sources import trace_fast

        table = trace_fast.read_table(source, text)
        return table if table is not None else _stream_read(source)

    return finish


def _msgspec_found() -> bool:
    """Whether msgspec can be imported, without importing it (a look along the path)."""
    if "msgspec" in sys.modules:  # (None: made unimportable on purpose)
        return sys.modules["msgspec"] is not None
    return find_spec("msgspec") is not None


def _stream_read(source: Path) -> EventTable:
    """``source`` read by the streaming reader, imported only when a file needs it."""
    from kernelmagic.sources.trace_stream import StreamReader

    return StreamReader(source).read()


def find_traces(folder: Path) -> list[Path]:
    """The trace files directly inside ``folder`` (``*.json``, ``*.json.gz``), sorted."""
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
