"""Real GPU traces (tests/data, see NOTICE) read into an EventTable: kinds, times, links.

Every expected number is worked out here from the raw JSON (json.load and plain Python),
never read back from kernelmagic's own output.
"""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from trace_json import dumps, raw, write_trace

from kernelmagic.core.events import Kind
from kernelmagic.core.records import TraceFileError
from kernelmagic.sources import json_scanner
from kernelmagic.sources.trace_file import read_table

DATA = Path(__file__).parent / "data"
TRACES = ["a100_alexnet", "a100_multi_stream_sync", "a100_triton", "cpu_only", "mi250_rocm",
          "rank0_steps", "v100_gpu_annotations"]

# The test's own reading of the categories (modern and TensorBoard-era spellings).
EXPECTED_KIND = {
    "cpu_op": Kind.OP, "Operator": Kind.OP, "user_annotation": Kind.RANGE,
    "gpu_user_annotation": Kind.GPU_RANGE, "python_function": Kind.PYTHON,
    "cuda_runtime": Kind.RUNTIME, "Runtime": Kind.RUNTIME, "cuda_driver": Kind.RUNTIME,
    "kernel": Kind.KERNEL, "Kernel": Kind.KERNEL, "gpu_memcpy": Kind.MEMCPY,
    "Memcpy": Kind.MEMCPY, "gpu_memset": Kind.MEMSET, "Memset": Kind.MEMSET,
}
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "Kernel", "Memcpy",
            "Memset"}


def expected_kind(event: dict) -> Kind:
    cat, name = event.get("cat"), event["name"]
    kind = EXPECTED_KIND.get(cat, Kind.OTHER)
    if cat not in GPU_CATS and kind in (Kind.OP, Kind.RANGE, Kind.OTHER):
        if name.startswith("ProfilerStep#"):
            return Kind.STEP
        if name.startswith("enumerate(DataLoader)"):
            return Kind.OTHER
    return kind


def complete_events(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


def counts_by_kind(table) -> Counter:
    return Counter(Kind(int(k)) for k in table.kind)


def exact_ns(ts, origin) -> int:
    # Decimal arithmetic on the JSON text: independent of the reader's string slicing.
    return int((Decimal(str(ts)) - Decimal(str(origin))) * 1000)


@pytest.mark.parametrize("name", TRACES)
def test_kinds_and_counts(name):
    doc = raw(name)
    table = read_table(DATA / f"{name}.json.gz")
    expected = Counter(expected_kind(e) for e in complete_events(doc))
    assert counts_by_kind(table) == expected
    # Flows, metadata and non-memory instants are not events of the table.
    assert table.n == len(complete_events(doc))


def test_kernel_counts_and_times_are_exact_nanoseconds():
    doc = raw("v100_gpu_annotations")
    table = read_table(DATA / "v100_gpu_annotations.json.gz")
    events = complete_events(doc)
    origin = min(Decimal(str(e["ts"])) for e in events)
    kernels = [e for e in events if e["cat"] == "kernel"]
    assert len(kernels) == 4350
    want = sorted((exact_ns(e["ts"], origin), exact_ns(e["ts"], origin) + exact_ns(e["dur"], 0))
                  for e in kernels)
    rows = np.flatnonzero(table.kind == Kind.KERNEL)
    got = sorted(zip(table.start[rows].tolist(), table.end[rows].tolist(), strict=True))
    assert got == want
    total_us = sum(Decimal(str(e["dur"])) for e in kernels)
    assert int(table.duration[rows].sum()) == int(total_us * 1000)
    assert table.origin_ns == int(origin * 1000)


def test_gpu_events_keep_correlation_stream_and_device():
    doc = raw("rank0_steps")
    table = read_table(DATA / "rank0_steps.json.gz")
    gpu = [e for e in complete_events(doc) if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset")]
    rows = np.flatnonzero(np.isin(table.kind, [Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET]))
    got = Counter(zip([table.names[i] for i in table.name[rows]],
                      table.tid[rows].tolist(), table.correlation[rows].tolist(),
                      table.device[rows].tolist(), strict=True))
    want = Counter((e["name"], e["args"]["stream"], e["args"]["correlation"], e["args"]["device"])
                   for e in gpu)
    assert got == want
    assert {s for _, s, _, _ in want} == {7, 23, 25, 84, 203}  # five streams
    # Every GPU event's correlation names one runtime call of the table.
    runtime = set(table.correlation[table.kind == Kind.RUNTIME].tolist())
    assert set(table.correlation[rows].tolist()) <= runtime
    # CPU-side events are on host threads, device -1.
    cpu = table.kind == Kind.OP
    assert (table.device[cpu] == -1).all()
    assert set(table.tid[cpu].tolist()) == {e["tid"] for e in complete_events(doc)
                                            if e["cat"] == "cpu_op"}


def test_several_streams_and_metadata():
    table = read_table(DATA / "a100_multi_stream_sync.json.gz")
    kernels = table.kind == Kind.KERNEL
    assert sorted(table.tid[kernels].tolist()) == [20, 24, 28]
    assert table.meta["device_name"] == "NVIDIA A100-PG509-200"
    assert table.meta["rank"] == 0 and table.meta["file"] == "a100_multi_stream_sync.json.gz"
    cpu = read_table(DATA / "cpu_only.json.gz")
    assert (cpu.meta["rank"], cpu.meta["world_size"], cpu.meta["backend"]) == (34, 300, "gloo")
    assert "device_name" not in cpu.meta  # deviceProperties is an empty list there


def test_rocm_trace():
    doc = raw("mi250_rocm")
    table = read_table(DATA / "mi250_rocm.json.gz")
    assert table.meta["device_name"] == "AMD Radeon Graphics"
    runtime = [table.names[i] for i in table.name[table.kind == Kind.RUNTIME]]
    assert runtime and all(n.startswith("hip") for n in runtime)
    assert Counter(runtime) == Counter(e["name"] for e in complete_events(doc)
                                       if e["cat"] == "cuda_runtime")
    kernels = table.kind == Kind.KERNEL
    assert kernels.sum() == 14 and (table.device[kernels] == 2).all()  # the GPU of pid 2
    # The GPU-side copy of ProfilerStep#1 stays a GPU range, not a step.
    steps = [table.names[i] for i in table.name[table.kind == Kind.STEP]]
    assert sorted(steps) == ["ProfilerStep#1", "ProfilerStep#2"]
    gpu_ranges = sorted(table.names[i] for i in table.name[table.kind == Kind.GPU_RANGE])
    assert gpu_ranges == ["Optimizer.step#SGD.step", "ProfilerStep#1"]


def old_categories(doc: dict) -> dict:
    """A torch 1.8-1.12 style copy: TensorBoard-era categories, lower-case ``external id``."""
    rename = {"cpu_op": "Operator", "user_annotation": "Operator", "cuda_runtime": "Runtime",
              "kernel": "Kernel", "gpu_memcpy": "Memcpy", "gpu_memset": "Memset"}
    events = []
    for e in doc["traceEvents"]:
        e = dict(e)
        if e.get("cat") in rename:
            e["cat"] = rename[e["cat"]]
        if "args" in e and "External id" in e["args"]:
            args = dict(e["args"])
            args["external id"] = args.pop("External id")
            e["args"] = args
        if e.get("cat") == "Kernel":
            e["tid"] = f"stream {e['args']['stream']}"  # old traces name the stream lanes
        events.append(e)
    return {**doc, "traceEvents": events}


def test_old_categories(tmp_path):
    doc = old_categories(raw("v100_gpu_annotations"))
    table = read_table(write_trace(tmp_path / "old.json.gz", doc))
    want = Counter(expected_kind(e) for e in complete_events(doc))
    assert counts_by_kind(table) == want
    assert want[Kind.KERNEL] == 4350 and want[Kind.STEP] == 5 and want[Kind.RANGE] == 0
    assert set(table.tid[table.kind == Kind.KERNEL].tolist()) == {7}
    # Same times and links as the modern file.
    modern = read_table(DATA / "v100_gpu_annotations.json.gz")
    for kind in (Kind.KERNEL, Kind.MEMCPY, Kind.RUNTIME, Kind.STEP):
        a, b = table.kind == kind, modern.kind == kind
        assert (table.start[a] == modern.start[b]).all()
        assert (table.correlation[a] == modern.correlation[b]).all()


def test_steps_dataloader_and_gpu_ranges_are_never_ops_or_kernels(tmp_path):
    doc = raw("mi250_rocm")
    events = list(doc["traceEvents"])
    step = next(e for e in events if e.get("name") == "ProfilerStep#2")
    events.append({**step, "cat": "cpu_op", "name": "ProfilerStep#3"})  # older torch: cpu_op
    events.append({**step, "cat": "cpu_op",
                   "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"})
    events.append({**step, "cat": "Operator", "name": "enumerate(DataLoader)#_DataLoaderIter"})
    table = read_table(write_trace(tmp_path / "t.json.gz", {**doc, "traceEvents": events}))
    kinds = {}
    for kind, name in zip(table.kind.tolist(), table.name.tolist(), strict=True):
        kinds.setdefault(table.names[name], set()).add(Kind(kind))
    assert kinds["ProfilerStep#3"] == {Kind.STEP}
    # A DataLoader range is a user range whatever the category (as in a live run, where
    # torch records it as a user_annotation: core/event_rules.py), never an op.
    assert kinds["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"] == {Kind.RANGE}
    assert kinds["enumerate(DataLoader)#_DataLoaderIter"] == {Kind.RANGE}
    assert kinds["ProfilerStep#1"] == {Kind.STEP, Kind.GPU_RANGE}
    assert kinds["Optimizer.step#SGD.step"] == {Kind.RANGE, Kind.GPU_RANGE}
    for name, found in kinds.items():
        if name.startswith(("ProfilerStep#", "enumerate(DataLoader)")) or \
                name == "Optimizer.step#SGD.step":
            assert not found & {Kind.OP, Kind.KERNEL}, name


def test_metadata_after_trace_events_and_memory_instants(tmp_path):
    doc = raw("a100_multi_stream_sync")
    pid, tid, ts = 3727853, 3727853, doc["traceEvents"][0]["ts"]
    memory = [
        {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": pid,
         "tid": tid, "ts": ts + 5, "args": {"Total Reserved": 0, "Total Allocated": 4096,
                                             "Bytes": 4096, "Addr": 1, "Device Type": 1,
                                             "Device Id": 0}},
        {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": pid,
         "tid": tid, "ts": ts + 7, "args": {"Bytes": -64, "Device Type": 0, "Device Id": -1}},
    ]
    events = doc["traceEvents"] + memory
    reordered = {"traceEvents": events, **{k: v for k, v in doc.items() if k != "traceEvents"}}
    path = tmp_path / "late_meta.json"
    path.write_text(dumps(reordered))  # plain JSON this time, metadata after the events
    table = read_table(path)
    assert table.meta["device_name"] == "NVIDIA A100-PG509-200" and table.meta["rank"] == 0
    rows = np.flatnonzero(table.kind == Kind.MEMORY)
    assert table.nbytes[rows].tolist() == [4096, -64]
    assert table.device[rows].tolist() == [0, -1]
    assert (table.start[rows] == table.end[rows]).all()
    origin = min(Decimal(str(e["ts"])) for e in complete_events(doc) + memory)
    assert table.start[rows].tolist() == [exact_ns(ts + 5, origin), exact_ns(ts + 7, origin)]


def test_tiny_chunks_read_the_same_table(monkeypatch):
    whole = read_table(DATA / "a100_alexnet.json.gz")
    monkeypatch.setattr(json_scanner, "CHUNK", 7)  # every event straddles many reads
    pieces = read_table(DATA / "a100_alexnet.json.gz")
    assert pieces.names == whole.names and pieces.meta == whole.meta
    for column in ("kind", "name", "start", "end", "tid", "device", "correlation", "nbytes"):
        assert (getattr(pieces, column) == getattr(whole, column)).all(), column


def test_bare_event_array_and_fractional_nanoseconds(tmp_path):
    path = tmp_path / "array.json"
    path.write_text('[{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1,'
                    ' "ts": 1712195495505543.2, "dur": 1.25},'
                    ' {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1,'
                    ' "ts": 1712195495505544.0005, "dur": 2e-3}]')
    table = read_table(path)
    # 1712195495505543.2 as a double is ...543.25: the reader keeps the decimal text.
    assert table.origin_ns == 1712195495505543200
    assert table.start.tolist() == [0, 800] and table.end.tolist() == [1250, 802]


def test_a_bare_event_array_may_leave_out_its_closing_bracket(tmp_path):
    # The JSON Array Format lets a trace end without its "]" (a process that wrote its
    # events as it went and ended): read as if it were there, after a comma too. Cut off
    # inside an event, or in the object form, it is still a truncated file.
    event = ('{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 5, '
             '"dur": 1}')
    whole = tmp_path / "whole.json"
    whole.write_text(f"[{event}, {event}]")
    want = read_table(whole)
    for i, text in enumerate((f"[{event}, {event}", f"[{event}, {event},\n", f"[{event}]")):
        path = tmp_path / f"open{i}.json"
        path.write_text(text)
        got = read_table(path)
        assert got.n == (1 if text.endswith("]") else 2) and got.names == want.names
    for text in (f"[{event}, {event[:20]}", f'{{"traceEvents": [{event}, {event}'):
        (tmp_path / "cut.json").write_text(text)
        with pytest.raises(TraceFileError, match="ends early"):
            read_table(tmp_path / "cut.json")


def test_flow_events_are_skipped_whatever_their_text(tmp_path):
    op = {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 5, "dur": 1}
    flows = [{"ph": "s", "id": 1, "pid": 1, "tid": 1, "ts": 1.5, "cat": "ac2g", "name": "x}y"},
             {"ph": "f", "id": 1, "pid": 1, "tid": 1, "ts": 2, "cat": "ac2g", "name": 'q"}'},
             {"ph": "f", "id": 2, "pid": 1, "tid": 1, "ts": 3, "cat": "ac2g", "bp": "e",
              "args": {"nested": [1, {"x": "}"}]}}]
    path = tmp_path / "flows.json"
    path.write_text(json.dumps({"traceEvents": [op, *flows, op, flows[0]]}, indent=1))
    table = read_table(path)
    assert table.n == 2 and table.start.tolist() == [0, 0]
    bad = tmp_path / "bad.json"  # a flow, then garbage: the error still points at it
    bad.write_text('{"traceEvents": [' + json.dumps(op) + ', {"ph": "f", "id": 1}, {"ph": }]}')
    with pytest.raises(TraceFileError, match=r"traceEvents\[2\]"):
        read_table(bad)
