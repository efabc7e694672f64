"""A trace file's JSON bytes, read whole and gunzipped, for msgspec's reader (``trace_fast``).

Only the standard library (and python-isal's gunzip where it is installed) is imported
here, so that ``load`` can begin the gunzip on a thread (``text_ahead``) before it imports
numpy and the views: the two overlap on a second core.

The gunzip is python-isal's (``isal_zlib``, Intel's ISA-L: about twice zlib's speed on a
trace) where it can be imported, else the standard library's ``zlib``; both let go of the
GIL while they work, and both are bounded the same way (``gunzip``).
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable
from pathlib import Path

try:
    from isal import isal_zlib as _zlib
except ImportError:  # the standard library's, about half the speed
    _zlib = zlib

#: The largest JSON text (decompressed) read whole.
MAX_TEXT = 512 << 20
_GZIP_MAGIC = b"\x1f\x8b"


def text_ahead(path: Path) -> Callable[[], bytes | None]:
    """Begin gunzipping ``path`` on a thread of its own (the gunzip lets go of the GIL, so
    the caller's imports run meanwhile, on another core); the function returned waits for
    the JSON bytes (None where ``text_bytes`` gives None or raises: the streaming reader
    then reads the file and names any fault)."""
    found: list[bytes | None] = []

    def work() -> None:
        try:
            found.append(text_bytes(path))
        except Exception:  # (named by the streaming reader)
            found.append(None)

    thread = threading.Thread(target=work, name="kernelmagic-gunzip", daemon=True)
    thread.start()

    def text() -> bytes | None:
        thread.join()
        return found.pop() if found else None  # (held here no longer: read_table frees it)

    return text


def text_bytes(path: Path) -> bytes | None:
    """The file's JSON bytes (gunzipped), or None when it is too large to hold whole."""
    if path.stat().st_size > MAX_TEXT:  # (compressed or not)
        return None
    with open(path, "rb") as f:
        if f.read(2) != _GZIP_MAGIC:
            f.seek(0)
            return f.read()
        f.seek(-4, 2)  # gzip's trailer: the decompressed size (mod 4 GiB) of the last member
        if int.from_bytes(f.read(4), "little") > MAX_TEXT:
            return None
        f.seek(0)
        compressed = f.read()
    return gunzip(compressed, MAX_TEXT)


def gunzip(compressed: bytes, limit: int) -> bytes | None:
    """Every gzip member of ``compressed``, or None past ``limit`` bytes or on any fault.

    Bounded whatever the trailer says: a forged size field cannot make this reader hold a
    gzip bomb whole (the streaming reader then names the fault or the limit).
    """
    out: list[bytes] = []
    total = 0
    while compressed:
        unzip = _zlib.decompressobj(wbits=31)
        try:
            out.append(unzip.decompress(compressed, limit - total + 1))
        except _zlib.error:
            return None
        total += len(out[-1])
        if total > limit or unzip.unconsumed_tail or not unzip.eof:
            return None
        compressed = unzip.unused_data.lstrip(b"\0")  # (padding between members)
    return b"".join(out)
