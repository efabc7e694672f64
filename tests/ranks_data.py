"""Real rank traces for the many-ranks tests, and an independent reading of their JSON."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import statistics
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
RANKS = DATA / "ranks"
RANK_FILES = [RANKS / "rank-0.json.gz", RANKS / "rank-1.json.gz"]
NCCL_RANK = DATA / "a100_nccl_rank.json.gz"
CPU_ONLY = DATA / "cpu_only.json.gz"

_INFO = re.compile(r'"distributedInfo"\s*:\s*\{[^{}]*\}')


def read_text(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode("utf-8")


def write_with_info(src: Path, dst: Path, info: dict[str, Any] | None) -> Path:
    """Copy ``src`` to ``dst`` with its ``distributedInfo`` replaced (removed with None);
    every other byte of the JSON unchanged."""
    text = read_text(src)
    assert _INFO.search(text), src
    new = "" if info is None else '"distributedInfo": ' + json.dumps(info)
    text = _INFO.sub(lambda _m: new, text, count=1)
    if info is None:
        text = re.sub(r",\s*,", ",", text)
        text = re.sub(r"\{\s*,", "{", text)
    dst.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=1))
    return dst


def copy_ranks(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for f in RANK_FILES:
        shutil.copy(f, folder / f.name)
    return folder


# --- an independent reading of the raw JSON (pure Python, exact decimals) ----------------


def _ns(value: Any) -> int:
    return int((Decimal(str(value)) * 1000).to_integral_value())


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _length(intervals: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in intervals)


def _intersection(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Length of the intersection of two sorted disjoint interval lists (two pointers)."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def _clip(intervals: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    return [(max(s, lo), min(e, hi)) for s, e in intervals if min(e, hi) > max(s, lo)]


def expected_breakdown(path: Path) -> dict[str, Any]:
    """Step median/IQR and compute/communication/memcpy/idle (µs per step) and overlap,
    worked out from the raw events as the README defines them (GPU traces)."""
    events = json.loads(read_text(path), parse_float=Decimal)["traceEvents"]
    steps, comm, compute, copies = [], [], [], []
    for ev in events:
        if ev.get("ph") != "X":
            continue
        span = (_ns(ev["ts"]), _ns(ev["ts"]) + _ns(ev["dur"]))
        cat, name = ev.get("cat"), ev.get("name", "")
        if name.startswith("ProfilerStep#"):
            steps.append(span)
        elif cat == "kernel":
            low = name.lower()
            (comm if low.startswith("nccl") or "gloo" in low else compute).append(span)
        elif cat in ("gpu_memcpy", "gpu_memset"):
            copies.append(span)
    steps.sort()
    total = {"compute": 0, "communication": 0, "memcpy": 0, "idle": 0, "both": 0}
    for lo, hi in steps:
        c = _union(_clip(comm, lo, hi))
        k = _union(_clip(compute, lo, hi))
        total["communication"] += _length(c)
        total["compute"] += _length(k)
        total["both"] += _intersection(c, k)
        total["memcpy"] += _length(_union(_clip(copies, lo, hi)))
        total["idle"] += (hi - lo) - _length(_union(_clip(comm + compute + copies, lo, hi)))
    n = len(steps)
    durations = [(hi - lo) / 1000 for lo, hi in steps]
    q1, _, q3 = statistics.quantiles(durations, n=4, method="inclusive")
    out = {f"{k}_us": total[k] / n / 1000
           for k in ("compute", "communication", "memcpy", "idle")}
    out.update(steps=n, step_median_us=statistics.median(durations), step_iqr_us=q3 - q1,
               overlap=total["both"] / total["communication"] if total["communication"] else None)
    return out


def stretched(src: Path, dst: Path, factor: float) -> Path:
    """A copy of ``src`` whose every event lasts ``factor`` times as long and starts
    ``factor`` times as late (from the first event): the same rank, uniformly slower."""
    data = json.loads(read_text(src), parse_float=Decimal)
    events = data["traceEvents"]
    t0 = min(Decimal(str(e["ts"])) for e in events if "ts" in e)
    scale = Decimal(str(factor))
    for e in events:
        if "ts" in e:
            e["ts"] = t0 + (Decimal(str(e["ts"])) - t0) * scale
        if "dur" in e:
            e["dur"] = Decimal(str(e["dur"])) * scale
    text = json.dumps(data, default=lambda d: float(round(d, 3)))
    dst.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=1))
    return dst


@contextmanager
def spawnable_main() -> Iterator[None]:
    """Let multiprocessing's spawn start children after an IPython shell ran in this
    process: the shell makes its user namespace ``__main__``, a module without
    ``__spec__``, which spawn's preparation reads."""
    main = sys.modules["__main__"]
    if hasattr(main, "__spec__"):
        yield
        return
    main.__spec__ = None
    try:
        yield
    finally:
        del main.__spec__


# --- tiny hand-built rank traces (collectives, issue #34) --------------------------------


def _event(name: str, cat: str, ts: float, dur: float, tid: int, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0 if cat == "kernel" else 1,
            "tid": tid, "ts": ts, "dur": dur, "args": args}


def tiny_rank(path: Path, rank: int, world_size: int, step: tuple[float, float],
              kernels: list[tuple[str, float, float]],
              collectives: list[tuple[str, float, float, float]],
              clock: float = 0.0) -> Path:
    """One GPU rank's trace with one ``ProfilerStep#1`` ``step`` (start, end, µs): compute
    ``kernels`` (name, start, end) on stream 7 each launched by an ``aten::mm`` op, and
    ``collectives`` (range name, range start, kernel start, kernel end): an ``nccl:*``
    range holding the launch of an ``ncclKernel_*`` on stream 20. Every time is shifted by
    ``clock`` (another rank's clock)."""
    t = clock
    events = [_event("ProfilerStep#1", "user_annotation", t + step[0], step[1] - step[0], 1)]
    corr = 0
    for name, start, end in kernels:
        corr += 1
        events += [_event("aten::mm", "cpu_op", t + start - 6, 4, 1),
                   _event("cudaLaunchKernel", "cuda_runtime", t + start - 5, 2, 1,
                          correlation=corr),
                   _event(name, "kernel", t + start, end - start, 7, correlation=corr,
                          stream=7, device=0)]
    for name, at, start, end in collectives:
        corr += 1
        kind = name.split(":")[1].title().replace("_", "")
        events += [_event(name, "user_annotation", t + at, 10, 1),
                   _event("cudaLaunchKernel", "cuda_runtime", t + at + 1, 3, 1,
                          correlation=corr),
                   _event(f"ncclKernel_{kind}_RING_LL_Sum_float(ncclDevComm*)", "kernel",
                          t + start, end - start, 20, correlation=corr, stream=20, device=0)]
    data = {"schemaVersion": 1,
            "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world_size},
            "traceEvents": events}
    path.write_text(json.dumps(data))
    return path
