"""H200 traces recorded for kernelmagic, against torch's key_averages() of the same session.

``tests/data/h200_key_averages.json`` holds, for each trace, the rows torch's own
``prof.key_averages()`` gave in the session that wrote it (on the H200, torch 2.11+cu130).
A loaded trace's op rows must equal them field by field, bit for bit; the only
differences are the events outside every iteration, which a trace's result leaves out,
each one counted here from the raw JSON.
"""

from __future__ import annotations

import gzip
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
from loaded import loaded

DATA = Path(__file__).parent / "data"
FIELDS = ("count", "self_cpu_time_total", "cpu_time_total", "self_device_time_total",
          "device_time_total")
ROWS = ("cpu_op", "cuda_runtime", "cuda_driver")


def key_averages(name: str) -> dict[str, dict]:
    data = json.loads((DATA / "h200_key_averages.json").read_text())
    assert data["device"] == "NVIDIA H200"
    return {row["key"]: row for row in data["rows"][name]}


def raw_events(name: str) -> list[dict]:
    with gzip.open(DATA / f"{name}.json.gz", "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


def windows(events: list[dict], pattern: str) -> list[tuple[Decimal, Decimal]]:
    return [(e["ts"], e["ts"] + e["dur"]) for e in events
            if e.get("cat") == "user_annotation" and re.fullmatch(pattern, e["name"])]


def outside(events: list[dict], spans: list[tuple[Decimal, Decimal]]) -> list[dict]:
    """The op and runtime events that start outside every iteration."""
    return [e for e in events if e.get("cat") in ROWS
            and not any(s <= e["ts"] <= t for s, t in spans)]


@pytest.mark.parametrize("name", ["h200_train_step", "h200_launch_and_sync"])
def test_rows_equal_key_averages_of_the_same_session(name):
    torch_rows = key_averages(name)
    events = raw_events(name)
    steps = windows(events, r"ProfilerStep#\d+")
    assert len(steps) == 3
    left_out = outside(events, steps)
    assert [e["name"] for e in left_out] == ["cudaDeviceSynchronize"]  # the profiler's stop
    result = loaded(DATA / f"{name}.json.gz")
    assert result.device == "cuda" and result.device_name == "NVIDIA H200"
    assert result.iters == 3
    assert result.timings == [pytest.approx(float((t - s) / 1000000), rel=1e-12)
                              for s, t in steps]
    ours = {r.key: r for r in result.rows}
    # Every op and runtime call torch lists is a row, and so is a range that owns time
    # itself: zero_grad(set_to_none=True) is Python with no op under its range (torch
    # lists every range; its figures are torch's too).
    names = {e["name"] for e in events if e.get("cat") in ROWS}
    ranges = {"Optimizer.zero_grad#AdamW.zero_grad"} if name == "h200_train_step" else set()
    assert {k for k, r in ours.items() if r.kind == "range"} == ranges
    assert set(ours) == {k for k in torch_rows if k in names} | ranges
    for key, row in ours.items():
        want = dict(torch_rows[key])
        for e in left_out:
            if e["name"] == key:  # torch also counted the call after the last step
                want["count"] -= 1
                want["self_cpu_time_total"] -= float(e["dur"])
                want["cpu_time_total"] -= float(e["dur"])
        for field in FIELDS:
            if key in {e["name"] for e in left_out} and field.endswith("cpu_time_total"):
                assert getattr(row, field) == pytest.approx(want[field], rel=1e-12), key
            else:
                assert getattr(row, field) == want[field], (key, field)
    assert sum(r.self_device_time_total > 0 for r in ours.values()) >= 5


def test_kernelmagic_own_trace_of_a_training_step():
    """``%%profile --trace`` output: iterations from its ``NAME/iter i`` ranges."""
    name = "h200_km_train_step"
    torch_rows = key_averages(name)
    events = raw_events(name)
    iters = windows(events, r"km_train_step/iter \d+")
    assert len(iters) == 5
    result = loaded(DATA / f"{name}.json.gz")
    assert result.name == "km_train_step" and result.iters == 5
    assert result.timings == [pytest.approx(float((t - s) / 1000000), rel=1e-12)
                              for s, t in iters]
    ours = {r.key: r for r in result.rows}
    # kernelmagic's own per-iteration synchronize is not a row, and the profiler's closing
    # one lies outside the iterations: together they are all of torch's count.
    syncs = [e for e in events if e["name"] == "cudaDeviceSynchronize"]
    under_ours = [e for e in syncs if any(
        r["name"] == "kernelmagic: synchronize" and r["ts"] <= e["ts"] <= r["ts"] + r["dur"]
        for r in events)]
    assert len(under_ours) == 5 and len(outside(syncs, iters)) == 1
    assert torch_rows["cudaDeviceSynchronize"]["count"] == 6
    assert "cudaDeviceSynchronize" not in ours
    # Kineto wrote its "Activity Buffer Request" overhead on a lane of its own (pid -1), so
    # the trace cannot nest it in the aten::native_layer_norm it interrupted, as torch did.
    overhead, = [e for e in events if e.get("cat") == "overhead"]
    (layer_norm,) = [e for e in events if e["name"] == "aten::native_layer_norm"
                     and e["ts"] <= overhead["ts"] <= e["ts"] + e["dur"]]
    buffer = torch_rows["Activity Buffer Request"]
    assert buffer["cpu_time_total"] == pytest.approx(float(overhead["dur"]))
    for key, row in ours.items():
        want = dict(torch_rows[key])
        if key == "aten::native_layer_norm":
            want["self_cpu_time_total"] += float(overhead["dur"])
        if key in ("aten::native_layer_norm", "aten::layer_norm"):
            want["device_time_total"] -= buffer["device_time_total"]
        for field in FIELDS:
            assert getattr(row, field) == pytest.approx(want[field], rel=1e-12, abs=1e-9), \
                (key, field)
    assert layer_norm["dur"] > overhead["dur"]
    assert "Activity Buffer Request" not in ours


def test_launch_and_sync_findings_fire_with_their_numbers():
    events = raw_events("h200_launch_and_sync")
    steps = windows(events, r"ProfilerStep#\d+")
    items = [e for e in events if e["name"] == "aten::item"
             and any(s <= e["ts"] <= t for s, t in steps)]
    assert len(items) == 150
    result = loaded(DATA / "h200_launch_and_sync.json.gz")
    found = {f.rule: f for f in result.findings()}
    assert {"launch_bound", "sync_points", "fp32_matmul"} <= set(found)
    assert "aten::item ×50" in found["sync_points"].evidence
    assert result.matmul_precision == "highest"  # fp32 GEMM kernels on a TF32-capable GPU
    kernels = {g["name"] for g in events if g.get("cat") == "kernel"}
    assert any("sgemm" in k or "f32f32_f32" in k for k in kernels)
    assert found["fp32_matmul"].evidence.startswith("matmuls take ")
