"""Random well-formed Kineto traces for the property tests, with their answers worked out
by brute force.

A ``Trace`` is a list of ``Event``s in integer nanoseconds: ops, ranges and runtime calls
properly nested on a few CPU threads (no partial overlaps, no two events of a thread with
the same start and end, no child named as its parent), runtime calls launching kernels,
memcpys and memsets on a few streams, and GPU work that no runtime call in the trace
launched. ``to_text(trace, style)`` writes it as the JSON ``torch.profiler`` writes, in
today's categories and ids or in the TensorBoard era's (``Operator``, ``"tid": "stream 7"``,
numeric strings). ``expected_rows(trace)`` is the reference: the rows the attribution rule
gives, computed from the events with plain O(n^2) Python, independently of kernelmagic
(nothing here imports it).

The attribution rule (issue "Every microsecond in exactly one row"):

- the parent of a CPU event is the innermost event of its thread that contains it;
- every op and runtime call is a row (kind "op", by name): count, total CPU time (sum of
  durations), self CPU time (duration minus the durations of its direct children, of any
  kind), self device time (the GPU work it owns);
- GPU work is owned by the innermost op or range around the runtime call of its
  correlation; by that call when nothing is around it; by a row of its own (kind
  "unlaunched", by the GPU event's name) when no runtime call has its correlation;
- a range is a row (kind "range", by name) when it owns GPU work directly or when no op
  and no runtime call is anywhere under it; its figures are computed as an op's.
"""

from __future__ import annotations

import gzip
import json
import math
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

CPU_KINDS = ("op", "range", "runtime")
GPU_KINDS = ("kernel", "memcpy", "memset")

#: Names per kind. No pool shares a name with another, no name ends with "/iter N", starts
#: with "ProfilerStep#" or "enumerate(DataLoader)", or is a file stem used in the tests.
NAMES = {
    "op": ("aten::mm", "aten::add", "aten::copy_", "aten::linear", 'aten::"quoted"\\op',
           "aten::ünïcode"),
    "range": ("forward", "nccl:all_reduce", "Optimizer.step#FusedAdam.step", "## block ##"),
    "runtime": ("cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
                "cudaStreamSynchronize"),
    "kernel": ("void gemm_kernel<float, 128>(float*)", "elementwise_kernel",
               "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
    "memcpy": ("Memcpy HtoD (Pageable -> Device)", "Memcpy DtoD (Device -> Device)"),
    "memset": ("Memset (Device)",),
}

#: Categories: torch >= 1.13 and the TensorBoard plugin's era (torch 1.8-1.12).
CATEGORIES = {
    "new": {"op": "cpu_op", "range": "user_annotation", "runtime": "cuda_runtime",
            "kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset"},
    "old": {"op": "Operator", "range": "user_annotation", "runtime": "Runtime",
            "kernel": "Kernel", "memcpy": "Memcpy", "memset": "Memset"},
}

#: CPU thread ids; 7 is also a stream number (GPU lanes are apart by device).
THREADS = (7, 20, 4242, 1_234_567)
STREAMS = (7, 13, 20)
#: Trace origins in ns: 0, a few ms, and a realistic absolute time (1.7e15 µs).
BASES = (0, 5_000_000, 1_700_000_000_000_000_000)


@dataclass(frozen=True)
class Event:
    """One complete event; times in integer ns from the trace's base."""

    kind: str  # one of CPU_KINDS or GPU_KINDS
    name: str
    start: int
    dur: int
    lane: int  # the CPU thread id, or the stream of GPU work
    device: int = -1  # GPU work only
    correlation: int | None = None  # runtime calls and GPU work (None: no such arg)

    @property
    def end(self) -> int:
        return self.start + self.dur

    @property
    def on_gpu(self) -> bool:
        return self.kind in GPU_KINDS


@dataclass(frozen=True)
class Trace:
    """A generated trace: its events (in file order) and the absolute origin (ns)."""

    events: tuple[Event, ...]
    base: int = 0
    pid: int = 4321

    def describe(self) -> str:
        """One line per event, for failure messages."""
        lines = [f"Trace(base={self.base}, {len(self.events)} events):"]
        for i, e in enumerate(self.events):
            where = (f"device {e.device} stream {e.lane}" if e.on_gpu else f"thread {e.lane}")
            corr = "" if e.correlation is None else f" corr={e.correlation}"
            lines.append(f"  [{i}] {e.kind:7} {e.name!r} {where} "
                         f"[{e.start}, {e.end}) ns{corr}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.describe()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # hypothesis's falsifying example
        p.text(self.describe())


@dataclass(frozen=True)
class Style:
    """How a trace is written; every style of one trace must give the same rows."""

    ids: str = "int"  # "int": ints; "str": numeric strings, "stream N"; "mixed": per thread
    cats: str = "new"  # "new" or "old" (CATEGORIES)
    numbers: str = "3dec"  # "3dec": 12.340; "trim": 12.34; "int": 12 when whole µs
    order: str = "time"  # "time", "reverse" or "shuffle" (the events in the file)
    noise: bool = False  # metadata events, ac2g flow arrows, extra top-level keys
    gzip: bool = False
    seed: int = 0  # the shuffle's

    @property
    def suffix(self) -> str:
        return ".json.gz" if self.gzip else ".json"


#: Today's trace as torch writes it: the style the reference is checked against.
CANONICAL = Style()


# --- the reference -------------------------------------------------------------------


@dataclass
class Row:
    """Expected figures of one row, integer ns (``us`` gives µs)."""

    count: int = 0
    self_cpu: int = 0
    cpu_total: int = 0
    self_device: int = 0

    def us(self) -> dict[str, Any]:
        return {"count": self.count, "self_cpu_time_total": self.self_cpu / 1000,
                "cpu_time_total": self.cpu_total / 1000,
                "self_device_time_total": self.self_device / 1000}


def contains(a: Event, b: Event) -> bool:
    """Whether CPU event ``a`` encloses ``b`` (another event of the same thread)."""
    return (a is not b and not a.on_gpu and not b.on_gpu and a.lane == b.lane
            and a.start <= b.start and b.end <= a.end)


def parent_of(events: list[Event], b: Event) -> Event | None:
    """The innermost CPU event of ``b``'s thread that contains it."""
    around = [a for a in events if contains(a, b)]
    return min(around, key=lambda a: a.dur) if around else None


def owner_of(events: list[Event], work: Event) -> Event | None:
    """Who owns GPU ``work``: the innermost op or range around its runtime call, that
    call when nothing is around it, None when no runtime call has its correlation."""
    calls = [c for c in events if c.kind == "runtime" and work.correlation is not None
             and c.correlation == work.correlation]
    if not calls:
        return None
    call = calls[0]
    up = parent_of(events, call)
    while up is not None and up.kind not in ("op", "range"):
        up = parent_of(events, up)
    return call if up is None else up


def expected_rows(trace: Trace) -> dict[tuple[str, str], Row]:
    """``{(kind, key): Row}`` for every row the rule gives (see the module's docstring)."""
    events = list(trace.events)
    cpu = [e for e in events if not e.on_gpu]
    owned: dict[int, int] = {}  # id(owner) -> ns of GPU work owned directly
    rows: dict[tuple[str, str], Row] = {}
    for work in (e for e in events if e.on_gpu):
        owner = owner_of(events, work)
        if owner is None:
            row = rows.setdefault(("unlaunched", work.name), Row())
            row.count += 1
            row.self_device += work.dur
        else:
            owned[id(owner)] = owned.get(id(owner), 0) + work.dur
    for e in cpu:
        if e.kind == "range":
            below = [x for x in cpu if contains(e, x) and x.kind in ("op", "runtime")]
            if id(e) not in owned and below:
                continue  # a range that only wraps ops: its time is theirs
        children = [c for c in cpu if parent_of(events, c) is e]
        row = rows.setdefault(("op" if e.kind in ("op", "runtime") else "range", e.name),
                              Row())
        row.count += 1
        row.cpu_total += e.dur
        row.self_cpu += e.dur - sum(c.dur for c in children)
        row.self_device += owned.get(id(e), 0)
    return rows


def device_total(trace: Trace) -> float:
    """µs of every kernel, memcpy and memset in the trace."""
    return sum(e.dur for e in trace.events if e.on_gpu) / 1000


# --- writing -------------------------------------------------------------------------


class Num(str):
    """A JSON number written as this exact text."""

    __slots__ = ()


def micros(ns: int, numbers: str) -> Num:
    """Integer ns as µs text with at most 3 decimals, exactly."""
    sign = "-" if ns < 0 else ""
    whole, frac = divmod(abs(ns), 1000)
    if numbers == "int" and not frac:
        return Num(f"{sign}{whole}")
    text = f"{sign}{whole}.{frac:03d}"
    if numbers == "trim":
        text = text.rstrip("0")
        text += "0" if text.endswith(".") else ""
    return Num(text)


def dumps(value: Any) -> str:
    """JSON text; ``Num`` values as their text (a float would round a 1.7e15 µs stamp)."""
    if isinstance(value, Num):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    return json.dumps(value)


def _thread_id(tid: int, style: Style) -> Any:
    if style.ids == "str" or (style.ids == "mixed" and tid % 2 == 0):
        return str(tid)
    return tid


def event_dict(trace: Trace, e: Event, style: Style, external_id: int) -> dict[str, Any]:
    """One event as torch writes it in ``style``."""
    ts, dur = micros(trace.base + e.start, style.numbers), micros(e.dur, style.numbers)
    cat = CATEGORIES[style.cats][e.kind]
    old = style.ids != "int"
    if e.on_gpu:
        args: dict[str, Any] = {"device": e.device, "context": 1, "stream": e.lane}
        if e.correlation is not None:
            args["correlation"] = e.correlation
            args["External id"] = e.correlation  # as in real traces: the CUPTI id again
        return {"ph": "X", "cat": cat, "name": e.name,
                "pid": str(e.device) if old else e.device,
                "tid": f"stream {e.lane}" if old else e.lane, "ts": ts, "dur": dur,
                "args": args}
    args = {"External id": external_id}
    if e.kind == "runtime":
        args = {"cbid": 211, "correlation": e.correlation, "External id": external_id}
    return {"ph": "X", "cat": cat, "name": e.name,
            "pid": str(trace.pid) if old else trace.pid, "tid": _thread_id(e.lane, style),
            "ts": ts, "dur": dur, "args": args}


def to_document(trace: Trace, style: Style) -> dict[str, Any]:
    """The trace as a JSON-ready dict (numbers as ``Num``)."""
    events = list(trace.events)
    if style.order == "time":
        events.sort(key=lambda e: (e.start, -e.dur))
    elif style.order == "reverse":
        events.sort(key=lambda e: (e.start, -e.dur), reverse=True)
    else:
        random.Random(style.seed).shuffle(events)
    out = [event_dict(trace, e, style, i + 1) for i, e in enumerate(events)]
    if style.noise:
        pid = str(trace.pid) if style.ids != "int" else trace.pid
        out.insert(0, {"name": "process_name", "ph": "M", "ts": Num("0"), "pid": pid,
                       "tid": 0, "args": {"name": "python3"}})
        calls = {e.correlation: e for e in trace.events if e.kind == "runtime"}
        for e in trace.events:
            call = calls.get(e.correlation) if e.on_gpu else None
            if call is None:
                continue
            flow = {"ph": "s", "id": e.correlation, "pid": pid,
                    "tid": _thread_id(call.lane, style),
                    "ts": micros(trace.base + call.start, style.numbers), "cat": "ac2g",
                    "name": "ac2g"}
            out.append(flow)
            out.append({**flow, "ph": "f", "pid": e.device, "tid": e.lane, "bp": "e",
                        "ts": micros(trace.base + e.start, style.numbers)})
    doc: dict[str, Any] = {"schemaVersion": 1}
    if style.noise:
        doc["deviceProperties"] = [{"id": 0, "name": "NVIDIA H200", "computeMajor": 9,
                                    "computeMinor": 0}]
    doc["traceEvents"] = out
    if style.noise:
        doc["traceName"] = "generated"
        doc["displayTimeUnit"] = "ms"
    return doc


def to_text(trace: Trace, style: Style) -> str:
    return dumps(to_document(trace, style))


def write(path: Path, text: str | bytes, zipped: bool) -> Path:
    """Write ``text`` at ``path`` (gzipped when ``zipped``)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data, mtime=0) if zipped else data)
    return path


# --- strategies ----------------------------------------------------------------------


@dataclass
class _Ids:
    next_correlation: int
    used: set[int] = field(default_factory=set)

    def take(self) -> int:
        value = self.next_correlation
        self.next_correlation += 1
        self.used.add(value)
        return value


#: How many children an event may have, by depth (the thread's top level first).
_CHILDREN = ((1, 2, 3, 4, 5, 0), (1, 2, 3, 1, 2, 0), (1, 2, 0, 1), (0, 1, 0))


@st.composite
def _forest(draw: Any, lo: int, hi: int, depth: int, parent: Event | None,
            lane: int) -> list[Event]:
    """Properly nested CPU events within ticks [lo, hi] of one thread."""
    k = draw(st.sampled_from(_CHILDREN[depth])) if depth < len(_CHILDREN) else 0
    out: list[Event] = []
    at = lo  # children one after another (they may touch), never of zero length
    for i in range(k):
        share = (hi - at) // (k - i)  # child i within [at, at + share], the last to hi
        if share < 1:
            break
        a = at + draw(st.integers(0, share - 1))
        b = a + draw(st.integers(1, (at + share if i < k - 1 else hi) - a))
        if parent is not None and (a, b) == (lo, hi):
            b -= 1  # no child with its parent's start and end
            if b == a:
                break
        at = b
        kinds = ("op", "op", "range", "runtime") if depth < 3 else ("op", "runtime")
        kind = draw(st.sampled_from(kinds))
        names = [n for n in NAMES[kind] if parent is None or n != parent.name]
        e = Event(kind, draw(st.sampled_from(names)), a, b - a, lane)
        out.append(e)
        if kind != "runtime":
            out.extend(draw(_forest(a, b, depth + 1, e, lane)))
    return out


@st.composite
def traces(draw: Any) -> Trace:
    """A random well-formed trace (at least one event)."""
    unit = draw(st.sampled_from((1, 1000, 7, 250)))  # ns per tick (1000: whole µs)
    span = draw(st.sampled_from((1, 3, 10, 100, 2000))) * draw(st.integers(1, 5))
    threads = draw(st.lists(st.sampled_from(THREADS), min_size=1, max_size=3, unique=True))
    streams = draw(st.lists(st.sampled_from(STREAMS), min_size=1, max_size=3, unique=True))
    devices = draw(st.sampled_from(((0,), (0, 1))))
    ids = _Ids(draw(st.sampled_from((1, 1000, 2**31 + 5))))
    cpu: list[Event] = []
    for tid in threads:
        cpu.extend(draw(_forest(0, span, 0, None, tid)))
    cpu = [replace(e, start=e.start * unit, dur=e.dur * unit) for e in cpu]
    events: list[Event] = []
    gpu_ticks = st.integers(0, 3000)
    for e in cpu:
        if e.kind != "runtime":
            events.append(e)
            continue
        call = replace(e, correlation=ids.take())
        events.append(call)
        for _ in range(draw(st.sampled_from((0, 1, 1, 1, 2)))):
            kind = draw(st.sampled_from(GPU_KINDS))
            events.append(Event(kind, draw(st.sampled_from(NAMES[kind])),
                                call.start + draw(gpu_ticks) * unit, draw(gpu_ticks) * unit,
                                draw(st.sampled_from(streams)),
                                draw(st.sampled_from(devices)), call.correlation))
    for _ in range(draw(st.integers(0, 3))):  # work launched where the trace cannot see
        kind = draw(st.sampled_from(GPU_KINDS))
        correlation = draw(st.sampled_from((None, -1)))
        if correlation == -1:
            correlation = ids.take() + 10_000  # an id no runtime call has
        events.append(Event(kind, draw(st.sampled_from(NAMES[kind])),
                            draw(st.integers(0, span)) * unit, draw(gpu_ticks) * unit,
                            draw(st.sampled_from(streams)), draw(st.sampled_from(devices)),
                            correlation))
    if not events:  # at least one event: an empty trace is an error, not a property
        events.append(Event("op", NAMES["op"][0], 0, unit, threads[0]))
    return Trace(tuple(events), base=draw(st.sampled_from(BASES)) + draw(st.integers(0, 999)))


def styles() -> st.SearchStrategy[Style]:
    """Any way of writing a trace."""
    return st.builds(
        Style,
        ids=st.sampled_from(("int", "str", "mixed")),
        cats=st.sampled_from(("new", "old")),
        numbers=st.sampled_from(("3dec", "trim", "int")),
        order=st.sampled_from(("time", "reverse", "shuffle")),
        noise=st.booleans(),
        gzip=st.booleans(),
        seed=st.integers(0, 2**16),
    )


def canonical_styles() -> st.SearchStrategy[Style]:
    """Today's ids and categories, any number form, order, noise and compression."""
    return st.builds(Style, numbers=st.sampled_from(("3dec", "trim", "int")),
                     order=st.sampled_from(("time", "reverse", "shuffle")),
                     noise=st.booleans(), gzip=st.booleans(), seed=st.integers(0, 2**16))


# --- malformed traces ------------------------------------------------------------------


#: Values that are not what a key holds: JSON text spliced in place of a value.
WRONG_VALUES = ("[]", "[1]", "{}", '{"a": 1}', "null", '"abc"', '""', "true", '"12"',
                '"1e3"')
#: Numbers a reader may or may not take: loading or a one-line error are both fine.
ODD_NUMBERS = ("-1", "-1700000000000000.5", "1e30", "1E-9", "123456789012345678901234567890",
               "NaN", "Infinity", "-0", "0.0000001", "9223372036854775.807")


@dataclass(frozen=True)
class Broken:
    """A valid trace broken in one way: the file's bytes and what was done."""

    how: str
    data: bytes
    zipped_name: bool  # whether the file is named .json.gz

    def __repr__(self) -> str:
        head = self.data[:300]
        return f"Broken({self.how!r}, {len(self.data)} bytes, head={head!r})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # hypothesis's falsifying example
        p.text(repr(self))


def _complete_events(doc: dict[str, Any]) -> list[int]:
    return [i for i, e in enumerate(doc["traceEvents"]) if e.get("ph") == "X"]


@st.composite
def broken_traces(draw: Any) -> Broken:
    """A generated trace, broken: truncated, a key dropped, a value of the wrong type or an
    odd number, ``traceEvents`` not a list, a character replaced, or a corrupt gzip."""
    trace = draw(traces())
    style = draw(styles())
    doc = to_document(trace, style)
    text = dumps(doc)
    how = draw(st.sampled_from(("truncate", "drop key", "wrong type", "odd number",
                                "events not a list", "character", "gzip")))
    complete = _complete_events(doc)
    if how in ("drop key", "wrong type", "odd number") and complete:
        i = draw(st.sampled_from(complete))
        event = dict(doc["traceEvents"][i])
        if how == "drop key":
            key = draw(st.sampled_from(("ts", "dur", "name", "ph")))
            del event[key]
            detail = f"traceEvents[{i}] without {key!r}"
        else:
            key = draw(st.sampled_from(("ts", "dur", "name") if how == "wrong type"
                                       else ("ts", "dur")))
            value = draw(st.sampled_from(WRONG_VALUES if how == "wrong type"
                                         else ODD_NUMBERS))
            event[key] = Num(value)
            detail = f"traceEvents[{i}][{key!r}] = {value}"
        doc["traceEvents"][i] = event
        return _broken(f"{how}: {detail}", dumps(doc).encode(), style.gzip)
    if how == "events not a list":
        value = draw(st.sampled_from(("{}", '{"0": {}}', '"events"', "3", "null", "true")))
        doc["traceEvents"] = Num(value)
        return _broken(f"traceEvents = {value}", dumps(doc).encode(), style.gzip)
    if how == "character":
        at = draw(st.integers(0, len(text) - 1))
        char = draw(st.sampled_from('{}[],:"\\x0- '))
        return _broken(f"text[{at}] = {char!r}", (text[:at] + char + text[at + 1:]).encode(),
                       style.gzip)
    if how == "gzip":
        data = gzip.compress(text.encode(), mtime=0)
        damage = draw(st.sampled_from(("cut", "flip", "append")))
        if damage == "cut":
            at = draw(st.integers(0, len(data) - 1))
            return Broken(f"gzip cut at byte {at} of {len(data)}", data[:at], True)
        if damage == "flip":
            at = draw(st.integers(0, len(data) - 1))
            bit = draw(st.sampled_from((1, 2, 4, 8, 16, 32, 64, 128, 255)))
            flipped = data[:at] + bytes([data[at] ^ bit]) + data[at + 1:]
            return Broken(f"gzip byte {at} of {len(data)} ^ {bit}", flipped, True)
        tail = draw(st.sampled_from((b"x", b"\x1f\x8b", b"\x00" * 8, b"\x1f\x8b\x08\x00")))
        return Broken(f"gzip + {tail!r}", data + tail, True)
    at = draw(st.integers(0, len(text) - 1))  # truncate (also a fallback for no events)
    return _broken(f"truncated at {at} of {len(text)}", text[:at].encode(), style.gzip)


def _broken(how: str, data: bytes, zipped: bool) -> Broken:
    return Broken(how, gzip.compress(data, mtime=0) if zipped else data, zipped)


# --- helpers for the checks ------------------------------------------------------------


def close(a: float, b: float, rel: float = 1e-6) -> bool:
    """µs figures equal within ``rel`` (and 1e-6 µs absolute, for zeros)."""
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-6)

