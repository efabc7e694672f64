"""Any valid Chrome trace of the same run gives the same report.

One small hand-made trace (ops nested on two threads; runtime calls launching a kernel
on stream 7 and a memcpy on stream 13, inside one ``ProfilerStep``) written in every
form the Chrome trace format and torch's generations of it allow: ``pid``/``tid`` as
integers or strings (a 32-bit thread id signed or not, ``"stream 7"`` lanes), ``args``
ids as strings, times as numbers with or without a fraction, exponents, floats or
strings, events in any order, and both category generations. Every form must give the
same ``result.rows``, ``result.kernels`` and ``result.timings`` (bit for bit), those must
be the figures worked out by hand below, and both trace readers must give one table.
"""

from __future__ import annotations

import tempfile
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trace_json import DATA, dumps, raw

import kernelmagic
from kernelmagic.core.records import TraceFileError
from kernelmagic.sources import trace_fast
from kernelmagic.sources.trace_file import read_table

BASE = Decimal("1712195495505000")  # µs: an absolute timestamp as torch writes them
PID = 77
A, B = 4242, (1 << 32) - 100  # thread B: a 32-bit id that a writer may sign (-100)
GEMM = "ampere_sgemm_128x64_nn"
MEMCPY = "Memcpy HtoD (Pageable -> Device)"

# name, category (today's), thread or stream, start (µs from BASE), duration (µs), id
# (External id of an op, correlation of a runtime call and its GPU work).
EVENTS = [
    ("ProfilerStep#1", "user_annotation", A, "0", "112", 1),
    ("aten::linear", "cpu_op", A, "1", "100.5", 10),
    ("aten::addmm", "cpu_op", A, "10.5", "50", 11),
    ("cudaLaunchKernel", "cuda_runtime", A, "20", "10.25", 501),
    (GEMM, "kernel", 7, "40.5", "50.75", 501),
    ("aten::copy_", "cpu_op", A, "70", "25", 12),
    ("cudaMemcpyAsync", "cuda_runtime", A, "75", "10.5", 502),
    (MEMCPY, "gpu_memcpy", 13, "90", "20.25", 502),
    ("aten::add", "cpu_op", B, "30", "50", 13),
    ("aten::empty", "cpu_op", B, "35.5", "10", 14),
]

# By hand. Thread A: linear [1, 101.5] holds addmm [10.5, 60.5] (holding the kernel's
# launch [20, 30.25]) and copy_ [70, 95] (holding the memcpy's launch [75, 85.5]);
# thread B: add [30, 80] holds empty [35.5, 45.5]. Self CPU = duration - children's
# durations; the kernel (50.75) is addmm's self device time, the memcpy (20.25) copy_'s,
# both linear's total device time.
# name: (calls, self CPU, total CPU, self device, total device), µs
EXPECTED = {
    "aten::linear": (1, 100.5 - 50 - 25, 100.5, 0, 50.75 + 20.25),
    "aten::addmm": (1, 50 - 10.25, 50, 50.75, 50.75),
    "cudaLaunchKernel": (1, 10.25, 10.25, 0, 0),
    "aten::copy_": (1, 25 - 10.5, 25, 20.25, 20.25),
    "cudaMemcpyAsync": (1, 10.5, 10.5, 0, 0),
    "aten::add": (1, 50 - 10, 50, 0, 0),
    "aten::empty": (1, 10, 10, 0, 0),
}
KERNELS = {GEMM: (1, 50.75, "aten::addmm"), MEMCPY: (1, 20.25, "aten::copy_")}
TIMINGS = [112e-6]  # the one ProfilerStep

OLD_CATEGORIES = {"cpu_op": "Operator", "user_annotation": "Operator",
                  "cuda_runtime": "Runtime", "kernel": "Kernel", "gpu_memcpy": "Memcpy"}
ON_GPU = ("kernel", "gpu_memcpy")

# --- the forms ----------------------------------------------------------------------------

# How each choice is written; "canonical" is the first of each.
CATEGORIES = ("new", "old")
THREADS = ("int", "signed int", "string", "unsigned string", "padded string")
PIDS = ("int", "string")
LANES = ("stream tid and arg", "stream N tid", "stream N tid and arg", "string tid and arg",
         "int tid only")
ARG_IDS = ("int", "string")
TIMES = ("decimal", "whole as int", "float", "string", "exponent", "padded string")


def time_text(value: Decimal, form: str) -> object:
    """An absolute or relative µs value as JSON would carry it in ``form``."""
    if form == "whole as int" and value == value.to_integral_value():
        return int(value)
    if form == "float":
        number = float(value)
        assert Decimal(repr(number)) == value  # exact and written exactly (no .x5 tails)
        return number
    if form == "string":
        return str(value)
    if form == "padded string":
        return f" {value} "
    if form == "exponent":
        return Decimal(f"{value:E}")  # written as 1.7121954955050105E+15
    return value


def thread_id(tid: int, form: str) -> object:
    signed = tid - (1 << 32) if tid >= 1 << 31 else tid
    return {"int": tid, "signed int": signed, "string": str(signed),
            "unsigned string": str(tid), "padded string": f" {signed} "}[form]


def build(*, categories: str = "new", threads: str = "int", pids: str = "int",
          lanes: str = "stream tid and arg", arg_ids: str = "int",
          times: list[str] | None = None, order: list[int] | None = None) -> dict:
    """The trace as a JSON document, written in the given forms.

    ``times``: one form per value (start and duration of each event, in order).
    """
    times = times or ["decimal"] * (2 * len(EVENTS))
    as_id = str if arg_ids == "string" else (lambda v: v)
    events = []
    for i, (name, cat, where, start, dur, ident) in enumerate(EVENTS):
        event = {"ph": "X", "cat": cat, "name": name,
                 "ts": time_text(BASE + Decimal(start), times[2 * i]),
                 "dur": time_text(Decimal(dur), times[2 * i + 1])}
        if cat in ON_GPU:
            event["pid"] = 0 if pids == "int" else "0"
            args = {"device": as_id(0), "correlation": as_id(ident),
                    "External id": as_id(ident)}
            if lanes == "stream tid and arg":
                event["tid"], args["stream"] = where, as_id(where)
            elif lanes == "stream N tid":
                event["tid"] = f"stream {where}"
                del args["device"]  # the device is then the pid's
            elif lanes == "stream N tid and arg":
                event["tid"], args["stream"] = f"stream {where}", as_id(where)
            elif lanes == "string tid and arg":
                event["tid"], args["stream"] = str(where), str(where)
            else:
                event["tid"] = where
        else:
            event["pid"] = PID if pids == "int" else str(PID)
            event["tid"] = thread_id(where, threads)
            key = "correlation" if cat == "cuda_runtime" else "External id"
            args = {key: as_id(ident)}
            if cat == "cuda_runtime":
                args["External id"] = as_id(ident - 490)
        if categories == "old":
            event["cat"] = OLD_CATEGORIES[cat]
            if cat in ON_GPU or cat == "cuda_runtime":  # lower case in those traces
                args["external id"] = args.pop("External id")
        event["args"] = args
        events.append(event)
    if order is not None:
        events = [events[i] for i in order]
    return {"schemaVersion": 1, "traceEvents": events}


def write(folder: Path, doc: dict) -> Path:
    path = folder / "trace.json"
    path.write_text(dumps(doc))
    return path


def report(path: Path) -> tuple:
    result = kernelmagic.load(path)
    return result.rows, result.kernels, result.timings


def assert_readers_agree(path: Path) -> None:
    slow, fast = read_table(path, fast=False), trace_fast.read_table(path)
    assert fast is not None, "the fast reader left a valid trace"
    for column in ("kind", "name", "start", "end", "tid", "device", "correlation", "nbytes"):
        np.testing.assert_array_equal(getattr(fast, column), getattr(slow, column), column)
    assert fast.names == slow.names and fast.origin_ns == slow.origin_ns


@pytest.fixture(scope="module")
def canonical(tmp_path_factory) -> tuple:
    return report(write(tmp_path_factory.mktemp("canonical"), build()))


# --- the figures, by hand -------------------------------------------------------------------


def test_the_canonical_form_gives_the_figures_worked_out_by_hand(canonical):
    rows, kernels, timings = canonical
    got = {r.key: (r.count, r.self_cpu_time_total, r.cpu_time_total, r.self_device_time_total,
                   r.device_time_total) for r in rows}
    assert set(got) == set(EXPECTED)
    for key, want in EXPECTED.items():  # (approx takes no dict of tuples since pytest 9.2)
        assert got[key] == pytest.approx(want), key
    assert len(rows) == len(EXPECTED)
    got_kernels = {k.key: (k.count, k.device_time_total, k.launched_by) for k in kernels}
    assert set(got_kernels) == set(KERNELS)
    for key, (count, time, launched_by) in KERNELS.items():
        assert got_kernels[key] == (count, pytest.approx(time), launched_by), key
    assert timings == pytest.approx(TIMINGS)


# --- one form at a time -------------------------------------------------------------------


def _one_change() -> list[tuple[str, dict]]:
    changes = [("old categories", {"categories": "old"})]
    changes += [(f"tid {f}", {"threads": f}) for f in THREADS[1:]]
    changes += [(f"pid {f}", {"pids": f}) for f in PIDS[1:]]
    changes += [(f"lanes {f}", {"lanes": f}) for f in LANES[1:]]
    changes += [(f"args ids {f}", {"arg_ids": f}) for f in ARG_IDS[1:]]
    changes += [(f"times {f}", {"times": [f] * (2 * len(EVENTS))}) for f in TIMES[1:]]
    changes.append(("reversed", {"order": list(range(len(EVENTS)))[::-1]}))
    return changes


@pytest.mark.parametrize(("label", "change"), _one_change(), ids=[c[0] for c in _one_change()])
def test_each_form_gives_the_same_report(tmp_path, canonical, label, change):
    path = write(tmp_path, build(**change))
    assert_readers_agree(path)
    assert report(path) == canonical


# --- every form at once ---------------------------------------------------------------------


@st.composite
def forms(draw) -> dict:
    return {
        "categories": draw(st.sampled_from(CATEGORIES)),
        "threads": draw(st.sampled_from(THREADS)),
        "pids": draw(st.sampled_from(PIDS)),
        "lanes": draw(st.sampled_from(LANES)),
        "arg_ids": draw(st.sampled_from(ARG_IDS)),
        "times": draw(st.lists(st.sampled_from(TIMES), min_size=2 * len(EVENTS),
                               max_size=2 * len(EVENTS))),
        "order": draw(st.permutations(range(len(EVENTS)))),
    }


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])  # derandomize: same cases in CI
@given(form=forms())
def test_any_mix_of_forms_gives_the_same_report(canonical, form):
    with tempfile.TemporaryDirectory() as folder:
        path = write(Path(folder), build(**form))
        assert_readers_agree(path)
        assert report(path) == canonical


# --- strings that are not numbers ---------------------------------------------------------


@pytest.mark.parametrize("bad", ["soon", "", "12 µs", "1_000", "nan", "0x10"])
@pytest.mark.parametrize("key", ["ts", "dur"])
def test_a_time_string_that_is_not_a_number_is_a_one_line_error(tmp_path, key, bad):
    doc = build()
    doc["traceEvents"][3][key] = bad
    path = write(tmp_path, doc)
    assert trace_fast.read_table(path) is None  # the streaming reader names the fault
    with pytest.raises(TraceFileError) as err:
        kernelmagic.load(path)
    message = str(err.value)
    assert "\n" not in message
    assert "traceEvents[3] ('cudaLaunchKernel')" in message
    assert f"'{key}' is a JSON string, expected a number" in message


def test_a_tid_string_that_is_not_a_number_is_a_lane_of_its_own(tmp_path):
    # A named lane ("PyTorch Profiler") is no thread: an op on it at 2-5 µs is not a child
    # of thread A's aten::linear (1-101.5 µs), whose figures do not move.
    doc = build()
    doc["traceEvents"].append({"ph": "X", "cat": "cpu_op", "name": "aten::zero_",
                               "pid": PID, "tid": "PyTorch Profiler",
                               "ts": BASE + Decimal("2"), "dur": Decimal("3")})
    rows = kernelmagic.load(write(tmp_path, doc)).rows
    assert {r.key: r.self_cpu_time_total for r in rows}["aten::linear"] == \
        pytest.approx(EXPECTED["aten::linear"][1])


# --- a real trace ---------------------------------------------------------------------------


def test_a_real_trace_with_every_id_a_string_gives_the_same_report(tmp_path):
    # a100_alexnet (an A100 run, tests/data) as the TensorBoard era writes ids: "pid": "1",
    # "tid": "123", GPU lanes "stream 7", args ids as strings.
    doc = raw("a100_alexnet")
    for event in doc["traceEvents"]:
        args = event.get("args") or {}
        if isinstance(event.get("tid"), int):
            on_gpu = event.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
            event["tid"] = f"stream {event['tid']}" if on_gpu else str(event["tid"])
        if isinstance(event.get("pid"), int):
            event["pid"] = str(event["pid"])
        for key in ("stream", "device", "correlation", "External id"):
            if isinstance(args.get(key), int):
                args[key] = str(args[key])
    path = write(tmp_path, doc)
    assert_readers_agree(path)
    assert report(path) == report(DATA / "a100_alexnet.json.gz")
