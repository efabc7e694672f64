"""One set of event rules (``kernelmagic/core/event_rules.py``) for every source: the same
names and categories fed through the live source (``live/session.py``, from fake raw
Kineto events) and both trace readers (msgspec's and the streaming one) give the same
kinds, and those kinds are the ones worked out by hand below."""

from __future__ import annotations

import json

import pytest
from ci_gate import need_modules
from fake_kineto import CUDA, FakeEvent, session

from kernelmagic.core.event_rules import category_kind, name_kind
from kernelmagic.core.events import EventTable, Kind
from kernelmagic.live.session import table_from_session
from kernelmagic.sources import trace_fast
from kernelmagic.sources.trace_file import read_table

LOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"

#: (category, name, on the GPU, the kind expected): one event each.
CASES = [
    ("cpu_op", "aten::mm", False, Kind.OP),
    ("Operator", "aten::add", False, Kind.OP),  # TensorBoard-era category
    ("user_annotation", "my range", False, Kind.RANGE),
    ("user_annotation", "ProfilerStep#4", False, Kind.STEP),
    ("cpu_op", "ProfilerStep#5", False, Kind.STEP),  # older torch: a cpu_op
    ("user_annotation", LOADER, False, Kind.RANGE),  # what torch records today
    ("cpu_op", "enumerate(DataLoader)#_DataLoaderIter", False, Kind.RANGE),  # older torch
    ("cpu_op", "[pgle]", False, Kind.OTHER),  # a profiler record, not an op
    ("user_annotation", "[param|cuda]", False, Kind.RANGE),  # a range may be bracketed
    ("python_function", "train.py(12): step", False, Kind.PYTHON),
    ("cuda_runtime", "cudaLaunchKernel", False, Kind.RUNTIME),
    ("cuda_driver", "cuLaunchKernel", False, Kind.RUNTIME),
    ("Runtime", "hipLaunchKernel", False, Kind.RUNTIME),
    ("overhead", "Activity Buffer Request", False, Kind.OTHER),
    ("a_category_from_the_future", "mystery", False, Kind.OTHER),  # unknown: never an op
    ("kernel", "void gemm_kernel()", True, Kind.KERNEL),
    ("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", True, Kind.MEMCPY),
    ("Memset", "Memset (Device)", True, Kind.MEMSET),
    ("gpu_user_annotation", "my gpu range", True, Kind.GPU_RANGE),
    ("cuda_sync", "Stream Sync", True, Kind.OTHER),  # a wait, not GPU work
    # Other accelerators, by Kineto's names: MTIA's runtime calls and its device's work,
    # Intel's and Habana's runtime calls, a wait on an XPU; Kineto's span of the session.
    ("mtia_runtime", "runFunction - job_prep_and_submit_for_execution", False, Kind.RUNTIME),
    ("mtia_ccp_events", "pe_exe", True, Kind.KERNEL),
    ("xpu_runtime", "zeCommandListAppendLaunchKernel", False, Kind.RUNTIME),
    ("hpu_op", "hpu launch", False, Kind.RUNTIME),
    ("xpu_sync", "xpu wait", True, Kind.OTHER),
    ("Trace", "PyTorch Profiler (0)", False, Kind.OTHER),
]


def _live_events() -> list[FakeEvent]:
    events = []
    for i, (cat, name, gpu, _) in enumerate(CASES):
        start = 10 * i
        if gpu:
            events.append(FakeEvent(name, start, start + 5, activity=cat, device=CUDA,
                                    stream=7))
        else:
            events.append(FakeEvent(name, start, start + 5, activity=cat))
    events.append(FakeEvent("[memory]", 500, 500, activity="cpu_instant_event", bytes_=64))
    return events


def _trace_doc() -> dict:
    events = []
    for i, (cat, name, gpu, _) in enumerate(CASES):
        event = {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": 10 * i,
                 "dur": 5, "args": {}}
        if gpu:
            event.update(pid=0, tid="stream 7", args={"device": 0, "stream": 7})
        events.append(event)
    events.append({"ph": "i", "s": "t", "cat": "cpu_instant_event", "name": "[memory]",
                   "pid": 1, "tid": 1, "ts": 500,
                   "args": {"Bytes": 64, "Device Type": 0, "Device Id": -1}})
    return {"schemaVersion": 1, "traceEvents": events}


def _kinds(table: EventTable) -> dict[str, Kind]:
    found: dict[str, set[Kind]] = {}
    for kind, name in zip(table.kind.tolist(), table.name.tolist(), strict=True):
        found.setdefault(table.names[name], set()).add(Kind(kind))
    assert all(len(k) == 1 for k in found.values()), found
    return {name: kinds.pop() for name, kinds in found.items()}


EXPECTED = {name: kind for _, name, _, kind in CASES} | {"[memory]": Kind.MEMORY}


def test_the_live_source_gives_each_event_its_kind():
    assert _kinds(table_from_session(session(_live_events()))) == EXPECTED


def test_the_streaming_trace_reader_gives_the_same_kinds(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_trace_doc()))
    assert _kinds(read_table(path, fast=False)) == EXPECTED


def test_the_msgspec_trace_reader_gives_the_same_kinds(tmp_path):
    need_modules("msgspec", install="pip install -e .")
    path = tmp_path / "t.json"
    path.write_text(json.dumps(_trace_doc()))
    table = trace_fast.read_table(path)
    assert table is not None, "the fast reader left a file it should read"
    assert _kinds(table) == EXPECTED


@pytest.mark.parametrize(("cat", "name", "gpu", "kind"), CASES)
def test_the_rules_themselves(cat, name, gpu, kind):
    said, on_gpu = category_kind(cat)
    assert on_gpu == gpu
    assert (name_kind(name, said) if not on_gpu else said) == kind


def test_names_never_override_gpu_work_or_runtime_calls():
    assert name_kind("ProfilerStep#1", Kind.KERNEL) == Kind.KERNEL
    assert name_kind("[x]", Kind.RUNTIME) == Kind.RUNTIME
    assert category_kind(None) == (Kind.OTHER, False)
