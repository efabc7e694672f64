"""Events kernelmagic cannot place are said, never dropped in silence; other accelerators'
backends are named.

A category no rule of ``kernelmagic/core/event_rules.py`` knows is OTHER (no row, no device
time). Both trace readers (msgspec's and the streaming one) and the live source count its
events and their time as they read them, and the report says so in one line. Every expected
count and time here is worked out from the JSON the test writes (or edits), never read back
from kernelmagic.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from decimal import Decimal

import pytest
from ci_gate import need_modules
from fake_kineto import CUDA, FakeEvent, session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trace_json import dumps, raw, write_trace

import kernelmagic
from kernelmagic.core.event_rules import BACKEND_KEY, NO_CATEGORY, UNPLACED_KEY
from kernelmagic.core.units import counted, format_us
from kernelmagic.live.session import table_from_session
from kernelmagic.render.text import text_report
from kernelmagic.render.views import unplaced_note
from kernelmagic.sources import trace_fast
from kernelmagic.sources.trace_file import read_table

MADE_UP = "npu_frobnicate"  # a category no rule knows


def _readers(path):
    """The table each trace reader makes of ``path``: the streaming one, then msgspec's."""
    need_modules("msgspec", install="pip install -e .")
    fast = trace_fast.read_table(path)
    assert fast is not None, "the fast reader left a file it should read"
    return {"stream": read_table(path, fast=False), "fast": fast}


def _tally(events: list[dict]) -> dict[str, list[int]]:
    """Per unknown category: complete events and their time in ns, from the JSON alone."""
    known = {"cpu_op", "user_annotation", "cuda_runtime", "kernel", "gpu_memcpy",
             "gpu_memset", "cuda_sync", "gpu_user_annotation", "trace", "mtia_runtime",
             "mtia_ccp_events"}
    found: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    for e in events:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() not in known:
            cat = e["cat"] if isinstance(e.get("cat"), str) else NO_CATEGORY
            found[cat][0] += 1
            found[cat][1] += Decimal(str(e["dur"])) * 1000
    return {cat: [int(n), int(ns)] for cat, (n, ns) in found.items() if ns > 0}


def _alexnet_with_memsets_relabelled(tmp_path):
    """``a100_alexnet`` with its ``gpu_memset`` events given a made-up category."""
    doc = raw("a100_alexnet")
    relabelled = [e for e in doc["traceEvents"] if e.get("cat") == "gpu_memset"]
    for e in relabelled:
        e["cat"] = MADE_UP
    return write_trace(tmp_path / "alexnet_made_up.json.gz", doc), doc, relabelled


def test_both_readers_count_a_made_up_category_with_its_time(tmp_path):
    path, doc, relabelled = _alexnet_with_memsets_relabelled(tmp_path)
    ns = int(sum(Decimal(str(e["dur"])) for e in relabelled) * 1000)
    assert len(relabelled) == 3 and ns > 0
    for reader, table in _readers(path).items():
        assert table.meta[UNPLACED_KEY] == {MADE_UP: [3, ns]}, reader
        assert table.meta[UNPLACED_KEY] == _tally(doc["traceEvents"]), reader


def test_the_report_says_so_in_one_line_and_the_rest_stays_whole(tmp_path, monkeypatch):
    path, doc, relabelled = _alexnet_with_memsets_relabelled(tmp_path)
    time_us = float(sum(Decimal(str(e["dur"])) for e in relabelled))
    line = (f"The trace holds {counted(3, 'event')} of category {MADE_UP!r} "
            f"({format_us(time_us)}) that kernelmagic cannot place: counted as neither ops "
            "nor device work (a [range] row where one launched some)")
    work = sum(Decimal(str(e["dur"])) for e in doc["traceEvents"]
               if e.get("cat") in ("kernel", "gpu_memcpy"))
    for reader in ("fast", "stream"):
        if reader == "stream":
            monkeypatch.setattr(trace_fast, "msgspec", None)  # as without msgspec
        result = kernelmagic.load(path)
        report = text_report(result)
        assert [x for x in report.splitlines() if "cannot place" in x] == [line], reader
        assert [(u.category, u.events) for u in result.unplaced] == [(MADE_UP, 3)]
        assert result.unplaced[0].time_us == pytest.approx(time_us, rel=1e-12)
        # conservation: every µs of the device work that is placed is in one row
        rows = sum(r.self_device_time_total for r in result.rows)
        assert rows == pytest.approx(float(work), rel=1e-9), reader
        # and the note survives a save and a load
        saved = kernelmagic.load(result.save(tmp_path / f"saved_{reader}.json"))
        assert saved.unplaced == result.unplaced
    assert "cannot place" not in text_report(kernelmagic.load(_real("a100_alexnet")))


def _real(name: str):
    from trace_json import DATA

    return DATA / f"{name}.json.gz"


def test_an_event_of_an_unknown_category_that_launched_gpu_work_is_a_range_row(tmp_path):
    # As any profiler record: its launch's kernel is its device time, in a [range] row
    # (conservation), and the line says so rather than "in no row".
    base = 1_700_000_000_000_000

    def event(cat, name, ts, dur, tid=1, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 0 if cat == "kernel" else 100,
                "tid": tid, "ts": base + ts, "dur": dur, "args": args}

    doc = {"traceEvents": [
        event("user_annotation", "ProfilerStep#1", 0, 1000),
        event("npu_frobnicate", "aten::mm", 10, 200),
        event("cuda_runtime", "cudaLaunchKernel", 20, 10, correlation=1),
        event("kernel", "kernA", 300, 100, tid=7, device=0, stream=7, correlation=1)]}
    result = kernelmagic.load(write_trace(tmp_path / "t.json", doc))
    (row,) = [r for r in result.rows if r.kind == "range"]
    assert (row.key, row.self_device_time_total) == ("aten::mm", 100.0)
    assert unplaced_note(result).endswith(
        "cannot place: counted as neither ops nor device work (a [range] row where one "
        "launched some)")


def test_a_duration_without_its_pair_is_said_by_its_number(tmp_path):
    base = 1_700_000_000_000_000
    doc = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": base,
         "dur": 100},
        {"ph": "B", "cat": "cpu_op", "name": "never ends", "pid": 1, "tid": 1,
         "ts": base + 200},
        {"ph": "E", "pid": 1, "tid": 2, "ts": base + 300}]}
    result = kernelmagic.load(write_trace(tmp_path / "t.json", doc))
    assert [r.key for r in result.rows] == ["aten::mm"]
    assert unplaced_note(result) == ('The trace holds 2 duration events ("B" or "E") without '
                                     "its pair, which kernelmagic cannot place (a duration "
                                     "needs both)")
    doc["traceEvents"][0]["cat"] = "zzz_other"
    both = unplaced_note(kernelmagic.load(write_trace(tmp_path / "u.json", doc)))
    assert both.startswith("The trace holds 1 event of category 'zzz_other' (100 µs) that ")
    assert both.endswith('; and 2 duration events ("B" or "E") without its pair, which '
                         "kernelmagic cannot place (a duration needs both)")


def test_several_categories_and_events_without_one_share_one_line(tmp_path):
    doc = raw("a100_alexnet")
    memsets = [e for e in doc["traceEvents"] if e.get("cat") == "gpu_memset"]
    memsets[0]["cat"] = "zzz_other"
    for e in memsets[1:]:
        del e["cat"]
    path = write_trace(tmp_path / "t.json.gz", doc)
    want = _tally(doc["traceEvents"])
    assert set(want) == {"zzz_other", NO_CATEGORY}
    for reader, table in _readers(path).items():
        assert table.meta[UNPLACED_KEY] == want, reader
    result = kernelmagic.load(path)
    notes = [x for x in text_report(result).splitlines() if "cannot place" in x]
    assert len(notes) == 1 and notes[0] == unplaced_note(result)
    assert notes[0].startswith("The trace holds events that kernelmagic cannot place, "
                               "counted as neither ops nor device work (a [range] row where "
                               "one launched some): ")
    n, ns = want["zzz_other"]
    assert f"{counted(n, 'event')} of category 'zzz_other' ({format_us(ns / 1000)})" in notes[0]
    n, ns = want[NO_CATEGORY]
    assert f"{counted(n, 'event')} without a category ({format_us(ns / 1000)})" in notes[0]


def test_every_category_of_the_real_traces_is_placed():
    from trace_json import DATA

    for path in sorted(DATA.rglob("*.json.gz")):
        for reader, table in _readers(path).items():
            assert UNPLACED_KEY not in table.meta, (path.name, reader)


#: Events of known and unknown categories, with durations as Kineto writes them.
_EVENTS = st.lists(
    st.tuples(st.sampled_from(["cpu_op", "user_annotation", "cuda_runtime", "kernel",
                               "mtia_ccp_events", "Trace", MADE_UP, "Made_Up_2", None]),
              st.integers(0, 5_000_000).map(lambda n: Decimal(n) / 1000)),
    max_size=30)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=_EVENTS)
def test_any_mix_of_categories_is_counted_the_same_by_both_readers(tmp_path, events):
    doc = {"traceEvents": []}
    for i, (cat, dur) in enumerate(events):
        e = {"ph": "X", "name": f"e{i % 3}", "pid": 1, "tid": 1,
             "ts": Decimal(1_000_000 + 10_000 * i), "dur": dur,
             "args": {"device": 0, "stream": 7}}
        if cat is not None:
            e["cat"] = cat
        doc["traceEvents"].append(e)
    doc["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1,
                               "ts": 1, "dur": 1})
    path = tmp_path / "t.json"
    path.write_text(dumps(doc))
    want = _tally(doc["traceEvents"])
    for reader, table in _readers(path).items():
        assert table.meta.get(UNPLACED_KEY, {}) == want, reader


def test_the_live_source_counts_activity_types_it_does_not_know():
    events = [FakeEvent("aten::mm", 0, 100),
              FakeEvent("mystery", 10, 40, activity=MADE_UP),
              FakeEvent("mystery", 50, 52, activity=MADE_UP),
              FakeEvent("on the device", 60, 90, activity="a_device_thing", device=CUDA,
                        stream=7),
              FakeEvent("instant", 95, 95, activity="zero_time")]
    table = table_from_session(session(events))
    assert table.meta[UNPLACED_KEY] == {MADE_UP: [2, 32_000], "a_device_thing": [1, 30_000]}
    assert BACKEND_KEY not in table.meta


def test_the_backend_the_categories_name(tmp_path):
    def doc(cats):
        return {"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2},
                "traceEvents": [{"ph": "X", "cat": c, "name": "x", "pid": 1, "tid": 1,
                                 "ts": 10 * i, "dur": 1, "args": {"device": 0}}
                                for i, c in enumerate(cats)]}

    for cats, backend in ((["cpu_op", "mtia_runtime"], "mtia"),
                          (["cpu_op", "xpu_runtime", "kernel"], "xpu"),
                          (["PrivateUse1_Runtime", "kernel"], "privateuse1"),
                          (["cpu_op", "cuda_runtime", "kernel"], None)):
        path = tmp_path / "t.json"
        path.write_text(dumps(doc(cats)))
        for reader, table in _readers(path).items():
            assert table.meta.get(BACKEND_KEY) == backend, (cats, reader)
            assert table.meta["backend"] == "nccl"  # the job's, never the device's


def test_a_privateuse1_backend_is_named_without_calling_it_a_gpu(tmp_path):
    base = raw("a100_alexnet")
    doc = copy.deepcopy(base)
    for e in doc["traceEvents"]:
        if e.get("cat") == "cuda_runtime":
            e["cat"] = "privateuse1_runtime"
    doc["deviceProperties"] = [{"id": 0, "name": "Acme NPU 3"}]
    result = kernelmagic.load(write_trace(tmp_path / "npu.json.gz", doc))
    line = result.summary()
    assert " · PrivateUse1 (Acme NPU 3) · " in line and "device: compute " in line
    assert "CUDA" not in line and "GPU" not in line
    assert result.device == "privateuse1"
