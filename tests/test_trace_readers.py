"""The two trace readers give equal tables: msgspec's (``trace_fast``) and the streaming one.

``read_table(path)`` takes msgspec's reader where msgspec is installed (the ``fast`` extra)
and the streaming standard-library reader otherwise, or for whatever the fast one leaves
(too large, another shape, a fault to name). A user must never see a difference.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from ci_gate import need_modules
from trace_json import DATA, dumps

from kernelmagic.core.events import FIRST_NAMED_LANE, derive_links
from kernelmagic.core.records import TraceFileError
from kernelmagic.sources import trace_fast, trace_text
from kernelmagic.sources.trace_file import read_table, start_reading
from kernelmagic.sources.trace_numbers import ns_of_text

need_modules("msgspec", install="pip install -e .")

COLUMNS = ("kind", "name", "start", "end", "tid", "device", "correlation", "flops", "shapes",
           "nbytes")
TRACES = sorted(DATA.glob("*.json.gz")) + sorted((DATA / "ranks").glob("*.json.gz"))


def assert_same_table(fast, slow) -> None:
    assert fast is not None, "the fast reader left a file it should read"
    for column in COLUMNS:
        np.testing.assert_array_equal(getattr(fast, column), getattr(slow, column), column)
    assert fast.names == slow.names
    assert fast.origin_ns == slow.origin_ns
    assert fast.meta == slow.meta


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_both_readers_give_the_same_table_on_every_real_trace(path):
    slow = read_table(path, fast=False)
    fast = trace_fast.read_table(path)
    assert_same_table(fast, slow)
    assert slow.n > 0


def test_read_table_uses_the_fast_reader_when_it_can(monkeypatch):
    taken = []
    original = trace_fast.read_table
    monkeypatch.setattr(trace_fast, "read_table", lambda p: taken.append(p) or original(p))
    table = read_table(DATA / "cpu_only.json.gz")
    assert taken == [DATA / "cpu_only.json.gz"] and table.n == 16


def _event(**fields) -> dict:
    base = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 7,
            "ts": Decimal("1712195495505543.250"), "dur": Decimal("2.5")}
    return {**base, **fields}


def _write(tmp_path: Path, events: list, **top) -> Path:
    path = tmp_path / "t.json"
    path.write_text(dumps({"schemaVersion": 1, **top, "traceEvents": events}))
    return path


def test_every_number_form_gives_the_same_nanoseconds(tmp_path):
    # Three decimals (the usual), fewer, more (half-even rounding), none, an exponent,
    # a negative duration's neighbour (zero), integers: each exact, as the slow reader.
    forms = ["1712195495505543.250", "1712195495505543.25", "1712195495505543.2505",
             "1712195495505543", "1.7121954955055432e15", "0.000"]
    events = [_event(ts=Decimal(ts), dur=Decimal(dur), name=f"op{i}")
              for i, (ts, dur) in enumerate(zip(forms, ["2.5", "0", "1e1", "3.125", "7",
                                                        "0.000"], strict=True))]
    path = _write(tmp_path, events)
    fast, slow = trace_fast.read_table(path), read_table(path, fast=False)
    assert_same_table(fast, slow)
    assert (slow.end - slow.start).tolist() == [2500, 0, 10000, 3125, 7000, 0]


def test_memory_events_keep_their_place_among_the_ops(tmp_path):
    events = [_event(name="a"),
              {"ph": "i", "name": "[memory]", "pid": 1, "tid": 7, "ts": 1712195495505544,
               "args": {"Bytes": 4096, "Device Type": 1, "Device Id": 0}},
              {"ph": "I", "name": "[memory]", "tid": "named lane", "ts": 1712195495505545,
               "args": {"Bytes": -4096}},
              {"ph": "i", "name": "a mark", "ts": 1712195495505546},
              _event(name="b", ph="X", cat="kernel", args={"stream": 7, "device": 1,
                                                          "correlation": 99}),
              {"ph": "s", "id": 1, "pid": 1, "tid": 7, "ts": 1712195495505547, "cat": "ac2g",
               "name": "ac2g"}]
    path = _write(tmp_path, events, deviceProperties=[{"name": "H200", "computeMajor": 9}],
                  distributedInfo={"rank": 3, "world_size": 8}, traceName="t")
    fast, slow = trace_fast.read_table(path), read_table(path, fast=False)
    assert_same_table(fast, slow)
    assert [slow.names[i] for i in slow.name] == ["a", "[memory]", "[memory]", "b"]
    assert slow.nbytes.tolist() == [0, 4096, -4096, 0]
    assert slow.meta["rank"] == 3 and slow.meta["device_name"] == "H200"


@pytest.mark.parametrize("why", ["unknown phase", "array format", "no traceEvents"])
def test_what_the_fast_reader_leaves_the_streaming_one_reads(tmp_path, why):
    if why == "unknown phase":  # not a Chrome trace event type: skipped by the slow reader
        path = _write(tmp_path, [_event(), {"ph": "Z", "ts": 1}])
    elif why == "array format":  # Chrome's bare array of events
        path = tmp_path / "t.json"
        path.write_text(dumps([_event()]))
    else:  # a kernelmagic profile file: the slow reader says NotATrace
        path = tmp_path / "t.json"
        path.write_text(json.dumps({"format": "kernelmagic.profile", "rows": []}))
    assert trace_fast.read_table(path) is None
    if why != "no traceEvents":
        assert read_table(path).n == 1


@pytest.mark.parametrize("bad", [{"ts": "soon"}, {"dur": "2.5 us"}, {"ts": None},
                                 {"dur": [1]}, {"dur": Decimal("-3.000")}, {"name": 7},
                                 {"args": [1, 2]}])
def test_a_fault_is_named_by_the_streaming_reader(tmp_path, bad):
    path = _write(tmp_path, [_event(), _event(**bad)])
    assert trace_fast.read_table(path) is None
    with pytest.raises(TraceFileError, match=r"traceEvents\[1\]"):
        read_table(path)


def test_files_too_large_to_hold_whole_are_streamed(monkeypatch):
    path = DATA / "cpu_only.json.gz"
    monkeypatch.setattr(trace_text, "MAX_TEXT", 1000)  # its JSON is 25 kB
    assert trace_fast.read_table(path) is None
    assert read_table(path).n == 16


@pytest.mark.parametrize("texts", [
    [b"1712195495505543.250", b"-1.000", b"0.001"],  # all three decimals: the vector path
    [b"1712195495505543.250", b"12", b"1.5", b"2e3", b"-0.0005"],  # mixed: value by value
    [b"8999999999999999.999"],  # the largest the vector path takes
    [b"9999999999999999.999"],  # beyond it (int64 ns), exact all the same
])
def test_ns_column_is_exact(texts):
    assert trace_fast._ns_column(texts) == [ns_of_text(t.decode()) for t in texts]


@pytest.mark.parametrize("text", [b'"soon"', b'"1_000"', b'""', b"null", b"true", b"[1]", b""])
def test_ns_column_refuses_what_is_not_a_number(text):
    with pytest.raises((TypeError, ValueError)):
        trace_fast._ns_column([b"1.000", text])


def test_ns_column_reads_strings_that_hold_numbers():
    # Chrome traces may write times as strings: read exactly as the same number would be.
    texts = [b'"1712195495505543.250"', b'" 12.5 "', b'"2e3"', b'"-3"', b'"\\u0031"']
    assert trace_fast._ns_column(texts) == [1712195495505543250, 12500, 2000000, -3000, 1000]


def test_string_ids_and_string_times_give_the_same_table_in_both_readers(tmp_path):
    # The TensorBoard plugin's era: "tid": "123", "tid": "stream 7", "pid": "0", ids and
    # times as strings. Both readers read them, and as the same trace written with numbers.
    def trace(as_strings: bool) -> Path:
        text = str if as_strings else (lambda v: v)
        events = [
            _event(name="op", tid=text(7), pid=text(1), ts=text(Decimal("1712195495505543.250")),
                   dur=text(Decimal("20.5"))),
            _event(name="cudaLaunchKernel", cat="cuda_runtime", tid=text(7),
                   ts=text(Decimal("1712195495505545")), dur=text(Decimal("2")),
                   args={"correlation": text(99), "External id": text(3)}),
            _event(name="k", cat="kernel", pid=text(0), tid="stream 7" if as_strings else 7,
                   ts=text(Decimal("1712195495505550.125")), dur=text(Decimal("5")),
                   args={"correlation": text(99), "stream": text(7), "device": text(0)}),
            _event(name="signed", tid=text(-5), ts=text(Decimal("1712195495505600"))),
            _event(name="PyTorch Profiler (0)", cat="Trace", tid="PyTorch Profiler",
                   ts=text(Decimal("1712195495505600"))),
        ]
        path = tmp_path / ("strings" if as_strings else "numbers") / "t.json"
        path.parent.mkdir()
        path.write_text(dumps({"traceEvents": events}))
        return path

    strings, numbers = trace(True), trace(False)
    slow = read_table(strings, fast=False)
    assert_same_table(trace_fast.read_table(strings), slow)
    assert_same_table(read_table(numbers, fast=False), slow)
    assert slow.tid.tolist()[:4] == [7, 7, 7, (1 << 32) - 5] and slow.tid[4] < 0
    assert slow.correlation.tolist() == [0, 99, 99, 0, 0]
    assert slow.device.tolist()[:3] == [-1, -1, 0]
    assert (slow.end - slow.start).tolist() == [20500, 2000, 5000, 2500, 2500]


def test_a_named_lane_that_holds_cpu_work_is_a_thread_in_both_readers(tmp_path):
    # A tool that names its threads ("tid": "MainThread"): its ops nest as on any thread
    # (on a named lane they did not: aten::mm's self CPU time was 0 where it is 140 µs,
    # and its launch's kernel was the runtime call's). The profiler's own lane stays one.
    def trace(name: str, tid: object) -> Path:
        events = [
            _event(name="aten::mm", tid=tid, ts=Decimal("1000"), dur=Decimal("200")),
            _event(name="aten::t", tid=tid, ts=Decimal("1010"), dur=Decimal("50")),
            _event(name="cudaLaunchKernel", cat="cuda_runtime", tid=tid, ts=Decimal("1100"),
                   dur=Decimal("10"), args={"correlation": 1}),
            _event(name="k", cat="kernel", pid=0, tid=7, ts=Decimal("1300"), dur=Decimal("100"),
                   args={"correlation": 1, "stream": 7, "device": 0}),
            _event(name="PyTorch Profiler (0)", cat="Trace", tid="PyTorch Profiler",
                   ts=Decimal("900"), dur=Decimal("1000")),
        ]
        path = tmp_path / name / "t.json"
        path.parent.mkdir()
        path.write_text(dumps({"traceEvents": events}))
        return path

    named, numbered = trace("named", "MainThread"), trace("numbered", 3)
    slow = read_table(named, fast=False)
    assert_same_table(trace_fast.read_table(named), slow)
    assert slow.tid[0] == slow.tid[1] == slow.tid[2] >= 1 << 62
    assert slow.tid[4] <= FIRST_NAMED_LANE  # (Kineto's session span: a lane)
    # Several named lanes: each its own thread, numbered in the order first seen.
    two = tmp_path / "two.json"
    two.write_text(dumps({"traceEvents": [
        _event(name="a", tid="Session", cat="Trace"),  # (a lane of records alone)
        _event(name="b", tid="Worker"), _event(name="c", tid="MainThread"),
        _event(name="d", tid="Worker")]}))
    for table in (read_table(two, fast=False), trace_fast.read_table(two)):
        assert table.tid[0] <= FIRST_NAMED_LANE
        assert table.tid[1:].tolist() == [1 << 62, (1 << 62) + 1, 1 << 62]
    ours, theirs = (derive_links(read_table(p, fast=False)) for p in (named, numbered))
    np.testing.assert_array_equal(ours.parent, theirs.parent)
    np.testing.assert_array_equal(ours.launcher, theirs.launcher)


def test_ids_written_as_whole_floats_are_those_ints_in_both_readers(tmp_path):
    # Tools that keep every number as a double write ids as 7.0: the same thread, stream
    # and launch as 7 (a correlation of 99.0 read as none unlinked the kernel from its
    # launch; a tid of 7.0 became thread 0). A fraction is no id: as before.
    def trace(name: str, as_float: bool) -> Path:
        num = float if as_float else (lambda v: v)
        events = [
            _event(name="op", tid=num(7), pid=num(1)),
            _event(name="cudaLaunchKernel", cat="cuda_runtime", tid=num(7),
                   args={"correlation": num(99)}),
            _event(name="k", cat="kernel", pid=num(0), tid=num(7),
                   args={"correlation": num(99), "stream": num(7), "device": num(0)}),
            _event(name="signed", tid=num(-5)),
        ]
        path = tmp_path / name / "t.json"
        path.parent.mkdir()
        path.write_text(dumps({"traceEvents": events}))
        return path

    floats, ints = trace("floats", True), trace("ints", False)
    slow = read_table(floats, fast=False)
    assert_same_table(trace_fast.read_table(floats), slow)
    assert_same_table(read_table(ints, fast=False), slow)
    assert slow.tid.tolist() == [7, 7, 7, (1 << 32) - 5]
    assert slow.correlation.tolist() == [0, 99, 99, 0] and slow.device.tolist()[2] == 0


def test_durations_written_as_begin_and_end_are_complete_events_in_both_readers(tmp_path):
    # The Chrome trace format's "B"/"E" pairs (nested, in any order in the file) read as
    # the "X" events they stand for; before, both readers dropped them in silence (a
    # kernel written so was no GPU work at all).
    def x(name, cat, ts, dur, tid=7, **args):
        return _event(name=name, cat=cat, tid=tid, ts=Decimal(ts), dur=Decimal(dur),
                      args=args)

    def b_e(name, cat, ts, dur, tid=7, **args):
        begin = {"ph": "B", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": Decimal(ts),
                 "args": args}
        return begin, {"ph": "E", "pid": 1, "tid": tid, "ts": Decimal(ts) + Decimal(dur)}

    events = [("outer", "cpu_op", "100", "50"), ("inner", "cpu_op", "110", "20"),
              ("k", "kernel", "200", "5")]
    complete = [x(n, c, t, d, **({"correlation": 3} if c == "kernel" else {}))
                for n, c, t, d in events]
    (ob, oe), (ib, ie), (kb, ke) = (b_e(n, c, t, d, **({"correlation": 3} if c == "kernel"
                                                          else {}))
                                    for n, c, t, d in events)
    paired = [ke, ob, ib, ie, oe, kb]  # (an "E" before its "B" in the file: by time)
    written = {name: _write(tmp_path / name, ev) for name, ev in
               (("x", complete), ("be", paired)) if not (tmp_path / name).mkdir()}
    slow = read_table(written["be"], fast=False)
    assert_same_table(trace_fast.read_table(written["be"]), slow)
    want = read_table(written["x"], fast=False)
    by_name = sorted(zip([slow.names[i] for i in slow.name], slow.start.tolist(),
                         (slow.end - slow.start).tolist(), strict=True))
    assert by_name == sorted(zip([want.names[i] for i in want.name], want.start.tolist(),
                                 (want.end - want.start).tolist(), strict=True))
    assert "unplaced" not in slow.meta
    # A "B" never closed and an "E" closing nothing: counted, by number (no time).
    lone = _write(tmp_path, [ob, {**ie, "tid": 8}])  # (the "E" on another thread)
    for table in (read_table(lone, fast=False), trace_fast.read_table(lone)):
        assert table.meta["unplaced"] == {"(B or E without its pair)": [2, 0]}
        assert table.n == 0


def test_without_msgspec_the_streaming_reader_reads_everything(monkeypatch):
    monkeypatch.setattr(trace_fast, "msgspec", None)  # as where msgspec is missing
    assert trace_fast.read_table(DATA / "cpu_only.json.gz") is None
    assert_same_table(read_table(DATA / "cpu_only.json.gz"),
                      read_table(DATA / "cpu_only.json.gz", fast=False))


@pytest.mark.parametrize("path", TRACES[:4], ids=lambda p: p.name)
def test_start_reading_gives_read_tables_table(path):
    # load_trace gunzips on a thread (start_reading) while it imports the builder
    assert_same_table(start_reading(path)(), read_table(path))


def test_start_reading_names_a_fault_as_read_table_does(tmp_path):
    path = tmp_path / "t.json.gz"
    path.write_bytes(b"\x1f\x8b" + b"not gzip at all")
    with pytest.raises(TraceFileError, match="corrupt gzip file"):
        start_reading(path)()
