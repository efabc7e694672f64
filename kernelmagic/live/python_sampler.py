"""A sampler of the profiled thread's Python stack, running only during the timed iterations.

Every ``interval`` seconds a daemon thread reads the profiled thread's current frame
(``sys._current_frames()``) and keeps the innermost frame of the user's own code: frames
of torch, the standard library, installed packages and kernelmagic are folded into the
user's line that called them; a DataLoader's frames (``torch/utils/data/``), and the
dataset code they call, into the user's line that asked for the batch, marked as loading
(so each walk goes on up to the runner's frame). Walking stops at kernelmagic's runner
frame (``stop``), so kernelmagic's own loop between iterations, and whatever called
``kernelmagic.profile``, is never the user's line. The cost is one short GIL hand-over per
sample, paid by the profiled thread only while it runs Python (ops release the GIL): see
``docs/views.md``.
"""

from __future__ import annotations

import sys
import threading
import time
from array import array
from collections.abc import Callable
from types import CodeType, FrameType

import numpy as np

from kernelmagic.core.events import Frame, PythonSamples
from kernelmagic.views.source_lines import is_data_loading_file, is_library_file

#: Seconds between samples: 1 kHz, about 36 samples in an iteration of the seed's Block.
INTERVAL = 0.001
#: A read of the stack that took longer than this (ns) is dropped: the sampler lost the GIL
#: or its core partway, so the moment the frame was read is not known (a read takes 1-40 µs).
MAX_READ_NS = 100_000


class Sampler:
    """``with Sampler(stop_code): ...`` samples the calling thread until the block ends."""

    def __init__(self, stop: CodeType, interval: float = INTERVAL) -> None:
        self.stop = stop
        self.interval = interval
        self.target = threading.get_ident()
        self.t_ns = array("q")
        self.frame = array("i")
        self.frames: list[Frame] = []
        self._index: dict[tuple[str, int, str, bool, bool], int] = {}
        self._kinds: dict[CodeType, int] = {}
        self._done = threading.Event()
        self._switch = 0.0
        self._thread = threading.Thread(target=self._run, name="kernelmagic-sampler",
                                        daemon=True)

    def __enter__(self) -> Sampler:
        # Pure Python holds the GIL for the switch interval (5 ms by default) before the
        # sampler can take it: a shorter one lets it sample a stretch of Python shorter than
        # 5 ms at all. Restored on the way out.
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch, self.interval / 4))
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        sys.setswitchinterval(self._switch)

    def samples(self) -> PythonSamples:
        """What was sampled, as arrays (after the block)."""
        return PythonSamples(t_ns=np.frombuffer(self.t_ns, dtype=np.int64).copy(),
                             frame=np.frombuffer(self.frame, dtype=np.int32).copy(),
                             frames=list(self.frames), interval_s=self.interval)

    def _run(self) -> None:
        wait = self._done.wait
        while not wait(self.interval):
            self.take_one()

    def take_one(self, clock: Callable[[], int] = time.time_ns) -> None:
        """One sample, timed by the profiler's clock (Unix ns, ``EventTable.origin_ns``) on
        both sides of the read: a read that straddled a wait (the sampler's thread lost the
        GIL or its core) could give a frame of one moment the time of a later one, a frame
        read in an op the time of the Python after it, so it is dropped, and the next sample
        stands for its stretch."""
        before = clock()
        frame = sys._current_frames().get(self.target)
        after = clock()
        if frame is None or after - before > MAX_READ_NS:
            return
        self.t_ns.append((before + after) // 2)
        self.frame.append(self._user_frame(frame))

    def _user_frame(self, frame: FrameType | None) -> int:
        """Index of the frame the sample goes to (added on first sight), -1 when none runs:
        the innermost user frame, or, when a DataLoader runs (a ``torch/utils/data/`` frame
        on the stack), the user frame that called it, marked ``loading``."""
        found: FrameType | None = None
        loading = False
        while frame is not None:
            code = frame.f_code
            if code is self.stop:
                break
            kind = self._kinds.get(code)
            if kind is None:
                kind = self._kinds[code] = frame_kind(code.co_filename)
            if kind == LOADER:
                found, loading = None, True
            elif kind == USER and found is None:
                found = frame
            frame = frame.f_back
        if found is None:
            return -1
        code = found.f_code
        key = (code.co_filename, found.f_lineno or 0, code.co_name,
               code.co_name == "<module>", loading)
        index = self._index.get(key)
        if index is None:
            index = self._index[key] = len(self.frames)
            self.frames.append(Frame(*key))
        return index


#: What a code object's file is to the sampler: the user's own, a library, or a DataLoader's.
USER, LIBRARY, LOADER = 0, 1, 2


def frame_kind(path: str) -> int:
    """``USER``, ``LIBRARY`` or ``LOADER`` (``is_data_loading_file``) for a code's file."""
    if is_data_loading_file(path):
        return LOADER
    return LIBRARY if is_library_file(path) else USER
