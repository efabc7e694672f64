"""Real GPU traces (tests/data, see NOTICE) opened as results: rows, kernels, busy, findings.

Every expected figure is worked out in this file from the raw JSON, with its own plain
Python model of the trace (``Truth``): json.load with exact decimals, torch's nesting rule
per thread, GPU work owned through its runtime call. Nothing is read back from
kernelmagic's output to build an expectation.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from decimal import Decimal
from functools import cache
from pathlib import Path

import pytest
from loaded import loaded
from torch_releases import OLD_TORCH
from trace_json import dumps, raw, write_trace

import kernelmagic
from kernelmagic.core.op_names import SYNC_OPS
from kernelmagic.core.units import format_us
from kernelmagic.findings.gpu import launch_bound

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parent.parent
#: Device work and runtime calls, CUDA's categories and MTIA's (``mtia_ccp_events`` is the
#: device's work, ``mtia_runtime`` its runtime calls: Kineto's names).
GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset", "mtia_ccp_events")
GPU_SIDE = {*GPU_WORK, "gpu_user_annotation", "cuda_sync"}
RUNTIME = ("cuda_runtime", "cuda_driver", "mtia_runtime")


def us(value) -> Decimal:
    return Decimal(str(value))


def marker_key(name: str) -> str | None:
    """The row of what an iteration marker launched itself: ``ProfilerStep`` for
    ``ProfilerStep#N``, ``NAME/iter`` for kernelmagic's ``NAME/iter i``; None for any
    other name."""
    if re.fullmatch(r"ProfilerStep#\d+", name):
        return "ProfilerStep"
    found = re.fullmatch(r"(.+)/iter \d+", name)
    return f"{found[1]}/iter" if found else None


class Truth:
    """The trace's figures, computed the plain way from the JSON."""

    def __init__(self, doc: dict) -> None:
        self.events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        for e in self.events:
            e["_start"], e["_end"] = us(e["ts"]), us(e["ts"]) + us(e["dur"])
        cpu = [e for e in self.events
               if e.get("cat") not in GPU_SIDE and isinstance(e.get("tid"), int)
               and e.get("cat") != "Trace"]
        work = [e for e in self.events if e.get("cat") in GPU_WORK]
        self.windows = self._steps(cpu)
        if self.windows:  # only the steps' events; GPU work goes with its launch
            calls = self._calls(cpu)
            cpu = [e for e in cpu if self.inside(e["_start"])]
            kept = {id(e) for e in cpu}
            work = [g for g in work if (id(calls[g["args"]["correlation"]]) in kept
                                        if g["args"].get("correlation") in calls
                                        else self.inside(g["_start"]))]
        self.cpu, self.work = cpu, work
        self._nest()
        self._own_work()

    @staticmethod
    def _calls(cpu: list[dict]) -> dict:
        """The runtime calls by correlation id: the first of an id (MTIA's runtime writes
        one id on two calls, and some calls with none)."""
        calls: dict = {}
        for e in cpu:
            if e.get("cat") in RUNTIME and e["args"].get("correlation"):
                calls.setdefault(e["args"]["correlation"], e)
        return calls

    def inside(self, t: Decimal) -> bool:
        return any(s <= t <= e for s, e in self.windows)

    @staticmethod
    def _steps(cpu: list[dict]) -> list[tuple[Decimal, Decimal]]:
        """ProfilerStep windows that hold an op (the stub step at the profiler's stop: not)."""
        found = sorted((e["_start"], e["_end"]) for e in cpu
                       if e["name"].startswith("ProfilerStep#"))
        ops = [e["_start"] for e in cpu if e.get("cat") == "cpu_op"]
        return [(s, t) for s, t in found if any(s <= o <= t for o in ops)]

    def _nest(self) -> None:
        """Torch's rule: per thread, by (start, -end); pop the top unless we fit inside it."""
        by_tid = defaultdict(list)
        for e in self.cpu:
            e["_parent"], e["_children"], e["_work"] = None, [], []
            by_tid[e["tid"]].append(e)
        for events in by_tid.values():
            events.sort(key=lambda e: (e["_start"], -e["_end"]))
            stack: list[dict] = []
            for e in events:
                while stack:
                    top = stack[-1]
                    if e["_start"] >= top["_end"] or e["_end"] > top["_end"]:
                        stack.pop()
                    else:
                        e["_parent"] = top
                        top["_children"].append(e)
                        break
                stack.append(e)

    def _own_work(self) -> None:
        """A GPU event belongs to the event around the runtime call of its correlation."""
        calls = self._calls(self.cpu)
        self.owner = {}
        self.unlaunched = []  # no runtime call of its correlation in the trace
        for g in self.work:
            call = calls.get(g["args"].get("correlation"))
            if call is None:
                self.unlaunched.append(g)
                continue
            owner = call["_parent"] or call  # nothing open around the call: the call
            owner["_work"].append(g)
            self.owner[id(g)] = owner
        # torch's _remove_dup_nodes: an only child with its parent's name goes away.
        self.dropped = set()
        changed = True
        while changed:
            changed = False
            for e in self.cpu:
                p = e["_parent"]
                if id(e) in self.dropped or p is None or p["name"] != e["name"] \
                        or len(p["_children"]) != 1:
                    continue
                p["_children"] = e["_children"]
                p["_work"] = e["_work"]
                for c in e["_children"]:
                    c["_parent"] = p
                for g in e["_work"]:
                    self.owner[id(g)] = p
                self.dropped.add(id(e))
                changed = True

    def _device_total(self, e: dict) -> Decimal:
        if "_dev" not in e:
            e["_dev"] = sum((us(g["dur"]) for g in e["_work"]), Decimal(0)) + \
                sum((self._device_total(c) for c in e["_children"]), Decimal(0))
        return e["_dev"]

    def _has_op_below(self, e: dict) -> bool:
        return any(c.get("cat") in ("cpu_op", *RUNTIME) or self._has_op_below(c)
                   for c in e["_children"])

    def row_kind(self, e: dict) -> str | None:
        """"op" for ops and runtime calls; "range" for a range that launched GPU work
        itself or (a user range) has no op under it; None for any other event (an
        iteration marker among them: what it launched is a "no op" row, ``rows``)."""
        if marker_key(e["name"]) is not None:
            return None
        if e.get("cat") in ("cpu_op", *RUNTIME):
            return "op"
        if e.get("cat") == "user_annotation" and (
                e["_work"] or (not e["name"].startswith("ProfilerStep#") and e["_end"] > e["_start"]
                               and not self._has_op_below(e))):
            return "range"
        return None

    def rows(self) -> dict[tuple[str, str], dict[str, Decimal]]:
        """Per (name, kind): the op rows, the range rows and GPU work with no launch."""
        rows = self.op_rows(kinds=("op", "range"))
        for e in self.cpu:  # what an iteration marker launched itself: one row per kind
            key = marker_key(e["name"])
            if key is None or not e["_work"] or id(e) in self.dropped:
                continue
            row = rows[(key, "no op")]
            row["count"] += len(e["_work"])
            row["self_device_time_total"] += sum((us(g["dur"]) for g in e["_work"]), Decimal(0))
            row["device_time_total"] += sum((us(g["dur"]) for g in e["_work"]), Decimal(0))
        for g in self.unlaunched:
            row = rows[(g["name"], "unlaunched")]
            row["count"] += 1
            row["self_device_time_total"] += us(g["dur"])
            row["device_time_total"] += us(g["dur"])
        return rows

    def op_rows(self, kinds: tuple[str, ...] = ("op",)) -> dict:
        """Per op name (cpu_op and runtime events): count, CPU and device self and total (µs);
        with more ``kinds``, keyed by (name, kind)."""
        rows: dict = defaultdict(lambda: defaultdict(Decimal))
        for e in self.cpu:
            kind = self.row_kind(e)
            if id(e) in self.dropped or kind not in kinds:
                continue
            row = rows[e["name"] if kinds == ("op",) else (e["name"], kind)]
            total = us(e["dur"])
            row["count"] += 1
            row["cpu_time_total"] += total
            row["self_cpu_time_total"] += total - sum((us(c["dur"]) for c in e["_children"]),
                                                      Decimal(0))
            row["self_device_time_total"] += sum((us(g["dur"]) for g in e["_work"]), Decimal(0))
            row["device_time_total"] += self._device_total(e)
        return rows

    def kernel_rows(self) -> dict[str, tuple[int, Decimal, set[str]]]:
        """Per GPU work name: launches, total µs, and the op(s) that launched it most."""
        count, time = Counter(), defaultdict(Decimal)
        owners: dict[str, Counter] = defaultdict(Counter)
        for g in self.work:
            count[g["name"]] += 1
            time[g["name"]] += us(g["dur"])
            if id(g) in self.owner:
                owners[g["name"]][self.owner[id(g)]["name"]] += 1
        top = {k: {n for n, c in owners[k].items() if c == max(owners[k].values())}
               for k in count if owners[k]}
        return {k: (count[k], time[k], top.get(k, {""})) for k in count}

    def steps(self) -> list[tuple[Decimal, Decimal]]:
        return self.windows

    def busy(self, window: tuple[Decimal, Decimal]) -> Decimal:
        """Union of the GPU work within the window, clipped to it (overlaps counted once)."""
        start, end = window
        spans = sorted((max(g["_start"], start), min(g["_end"], end)) for g in self.work
                       if g["_start"] < end and g["_end"] > start)
        total, reach = Decimal(0), start
        for s, e in spans:
            if e > reach:
                total += e - max(s, reach)
                reach = e
        return total


@cache
def truth_of(name: str) -> Truth:
    """The ``Truth`` of ``tests/data/<name>.json.gz``, built once per test process (about
    0.5 s for the V100 trace, which five tests read): the tests only read it."""
    return Truth(raw(name))


def close(a: float, b: Decimal) -> bool:
    return a == pytest.approx(float(b), rel=1e-9, abs=1e-6)


# --- op rows, kernels -------------------------------------------------------------------


SHARED_TRACES = REPO.parent / "shared" / "traces"
ALL_TRACES = sorted({p.relative_to(DATA).as_posix(): p for p in DATA.rglob("*.json.gz")}.items())
ALL_TRACES += [(f"shared/{p.relative_to(SHARED_TRACES).as_posix()}", p)
               for p in sorted(SHARED_TRACES.rglob("*.json.gz"))
               if not (DATA / p.relative_to(SHARED_TRACES)).exists()]


@pytest.mark.parametrize(("name", "path"), ALL_TRACES, ids=[n for n, _ in ALL_TRACES])
def test_every_microsecond_of_gpu_work_is_in_exactly_one_row(name, path):
    """The rows' self device time adds up to all the GPU work in the trace."""
    with gzip.open(path, "rt") as f:
        events = json.load(f, parse_float=Decimal)["traceEvents"]
    work = sum((us(e["dur"]) for e in events
                if e.get("ph") == "X" and e.get("cat", "").lower() in
                (*GPU_WORK, "memcpy", "memset")), Decimal(0))
    result = loaded(path)
    rows = sum(r.self_device_time_total for r in result.rows)
    assert rows == pytest.approx(float(work), rel=1e-9, abs=1e-6)
    assert sum(k.device_time_total for k in result.kernels) == pytest.approx(float(work),
                                                                              rel=1e-9, abs=1e-6)


@pytest.mark.parametrize("name", ["a100_alexnet", "v100_gpu_annotations", "rank0_steps",
                                  "mi250_rocm", "a100_nccl_rank", "ranks/rank-0",
                                  "a100_triton", "a100_multi_stream_sync", "mtia_inference"])
def test_each_ops_self_and_total_times(name):
    truth = truth_of(name).rows()
    result = loaded(DATA / f"{name}.json.gz")
    assert {(r.key, r.kind) for r in result.rows} == set(truth)
    device_rows = 0
    for row in result.rows:
        want = truth[(row.key, row.kind)]
        assert row.count == want["count"], row.key
        for field in ("self_cpu_time_total", "cpu_time_total", "self_device_time_total",
                      "device_time_total"):
            assert close(getattr(row, field), want[field]), (row.key, field)
        device_rows += row.device_time_total > 0
    # The device columns are really exercised (the two small traces have two launchers).
    assert device_rows > (1 if name in ("a100_triton", "a100_multi_stream_sync") else 5)


def test_memcpy_and_memset_count_as_device_time():
    truth = truth_of("a100_alexnet")
    copies = [g for g in truth.work if g["cat"] in ("gpu_memcpy", "gpu_memset")]
    assert len(copies) == 19
    owners = Counter(truth.owner[id(g)]["name"] for g in copies if id(g) in truth.owner)
    result = loaded(DATA / "a100_alexnet.json.gz")
    rows = {r.key: r for r in result.rows}
    want = truth.op_rows()
    for op in owners:  # aten::copy_, aten::zero_ ...: their device time is the copies'
        assert close(rows[op].self_device_time_total, want[op]["self_device_time_total"])
        assert rows[op].self_device_time_total > 0
    kernels = {k.key: k for k in result.kernels}
    for name, n in Counter(g["name"] for g in copies).items():
        assert kernels[name].count == n


@pytest.mark.parametrize("name", ["a100_alexnet", "v100_gpu_annotations", "rank0_steps",
                                  "mtia_inference"])
def test_kernel_counts_times_and_launchers(name):
    want = truth_of(name).kernel_rows()
    result = loaded(DATA / f"{name}.json.gz")
    got = {k.key: k for k in result.kernels}
    assert set(got) == set(want)
    for key, (count, time, launchers) in want.items():
        assert got[key].count == count
        assert close(got[key].device_time_total, time)
        assert got[key].launched_by in launchers, key
    if name == "v100_gpu_annotations":
        assert sum(k.count for k in result.kernels) == 4350 + 1600 + 145


def test_steps_gpu_busy_and_idle_per_iteration():
    truth = truth_of("v100_gpu_annotations")
    steps = truth.steps()
    assert len(steps) == 5
    result = loaded(DATA / "v100_gpu_annotations.json.gz")
    assert result.iters == 5 and result.device == "cuda"
    assert result.device_name == "Tesla V100-SXM2-32GB"
    for got, (s, e) in zip(result.timings, steps, strict=True):
        assert got == pytest.approx(float((e - s) / 1000000), rel=1e-12)
    for got, window in zip(result.gpu_busy, steps, strict=True):
        assert close(got, truth.busy(window))
    idle = [t * 1e6 - b for t, b in zip(result.timings, result.gpu_busy, strict=True)]
    want_idle = [float((e - s) - truth.busy((s, e))) for s, e in steps]
    assert idle == pytest.approx(want_idle, rel=1e-9)
    from kernelmagic.render.text import text_report

    wall = float(sum(e - s for s, e in steps)) / 5
    busy = wall - sum(want_idle) / len(want_idle)
    assert f"GPU per iteration (mean): busy {format_us(busy)}, idle" in text_report(result)


def test_an_accelerator_that_is_neither_cuda_nor_rocm_is_device_work():
    """Meta's MTIA (``tests/data/mtia_inference``): ``mtia_runtime`` calls launch
    ``mtia_ccp_events``, the device's work, on 12 streams; ``deviceProperties`` name the
    device "ARTEMIS". Its work is device time in the rows, the kernels and the breakdown,
    and the report names the device, never CUDA or a GPU."""
    truth = truth_of("mtia_inference")
    work = [e for e in truth.events if e["cat"] == "mtia_ccp_events"]
    total = sum((us(e["dur"]) for e in work), Decimal(0))
    assert len(work) == 1313 and round(total) == 812125  # 0.81 s of device time
    result = loaded(DATA / "mtia_inference.json.gz")
    assert result.profiles_device and result.device == "mtia" and result.iters == 1
    assert close(sum(r.self_device_time_total for r in result.rows), total)
    assert close(sum(r.self_device_time_total for r in result.rows if r.kind == "unlaunched"),
                 sum((us(g["dur"]) for g in truth.unlaunched), Decimal(0)))
    assert sum(k.count for k in result.kernels) == 1313
    # No steps: the iteration is the whole trace, its first to its last op, range, call or
    # device event (the profiler's own "Trace" span is none of them).
    placed = [e for e in truth.events if e["cat"] != "Trace"]
    window = (min(e["_start"] for e in placed), max(e["_end"] for e in placed))
    assert result.timings == [pytest.approx(float((window[1] - window[0]) / 1000000))]
    busy = truth.busy(window)  # the union of the device's intervals: streams overlap
    assert busy < total
    parts = result.breakdown
    assert close(parts.wall - parts.idle, busy) and close(parts.compute, busy)
    assert parts.memcpy == 0 and result.gpu_busy == [pytest.approx(float(busy))]
    from kernelmagic.render.text import summary_line, text_report

    line = summary_line(result)
    assert " · MTIA (ARTEMIS) · " in line and "MTIA: compute " in line
    report = text_report(result)
    assert f"MTIA per iteration (mean): busy {format_us(float(busy))}, idle" in report
    head = report.split("\n\n")[0]  # the summary and its notes
    assert "CUDA" not in head and "GPU" not in head.replace("GPU work", "")
    assert "cannot place" not in report  # every category of this trace is placed


def test_trailing_empty_step_is_not_an_iteration():
    truth = truth_of("mi250_rocm")
    all_steps = [e for e in truth.events if e["name"].startswith("ProfilerStep#")
                 and e["cat"] == "user_annotation"]
    assert len(all_steps) == 2 and len(truth.steps()) == 1  # #2 is the stub at the stop
    result = loaded(DATA / "mi250_rocm.json.gz")
    assert result.iters == 1
    (s, e), = truth.steps()
    assert result.timings == [pytest.approx(float((e - s) / 1000000))]


def test_whole_trace_is_one_iteration_without_steps():
    truth = truth_of("a100_alexnet")
    spans = [e for e in truth.events if e.get("cat") not in ("Trace", "cuda_sync")]
    start, end = min(e["_start"] for e in spans), max(e["_end"] for e in spans)
    result = loaded(DATA / "a100_alexnet.json.gz")
    assert result.iters == 1
    assert result.timings == [pytest.approx(float((end - start) / 1000000), rel=1e-12)]
    assert close(result.gpu_busy[0], truth.busy((start, end)))


def test_several_streams_in_the_timeline():
    truth = truth_of("rank0_steps")
    result = loaded(DATA / "rank0_steps.json.gz")
    assert "timeline" in result.views and result.iters == 2
    median = sorted(range(2), key=result.timings.__getitem__)[1]
    s, e = truth.steps()[median]
    streams = {g["args"]["stream"] for g in truth.work if s <= g["_start"] <= e}
    lanes = {span.lane for span in result.timeline}
    assert len(streams) >= 3
    assert lanes == {"CPU"} | {f"stream {x}" for x in streams}
    gpu_spans = [span for span in result.timeline if span.lane != "CPU"]
    assert len(gpu_spans) == sum(1 for g in truth.work if s <= g["_start"] <= e)


# --- GPU-side ranges, steps, DataLoader --------------------------------------------------


def test_gpu_side_ranges_are_ranges_not_kernels():
    truth = truth_of("v100_gpu_annotations")
    gpu_ranges = [e for e in truth.events if e.get("cat") == "gpu_user_annotation"]
    assert len(gpu_ranges) == 15
    result = loaded(DATA / "v100_gpu_annotations.json.gz")
    names = {e["name"] for e in gpu_ranges}
    assert not names & {k.key for k in result.kernels}
    assert not names & {r.key for r in result.rows}
    # The kernels' total is GPU work only: the ranges' GPU copies are not added in.
    assert close(sum(k.device_time_total for k in result.kernels),
                 sum((us(g["dur"]) for g in truth.work), Decimal(0)))
    # CPU ranges: count and time from the user_annotation events; device time is the GPU
    # work launched inside them (not the length of their GPU-side copy).
    ranges = {r.key: r for r in result.ranges}
    cpu_ranges = [e for e in truth.cpu if e.get("cat") == "user_annotation"
                  and id(e) not in truth.dropped and not e["name"].startswith("ProfilerStep#")]
    assert set(ranges) == {e["name"] for e in cpu_ranges}
    for key, row in ranges.items():
        mine = [e for e in cpu_ranges if e["name"] == key]
        assert row.count == len(mine)
        assert close(row.cpu_time_total, sum((us(e["dur"]) for e in mine), Decimal(0)))
        assert close(row.device_time_total,
                     sum((truth._device_total(e) for e in mine), Decimal(0)))
    assert ranges["## forward ##"].device_time_total > 0


def test_steps_and_gpu_ranges_are_never_rows_and_dataloader_is_a_range(tmp_path):
    doc = raw("mi250_rocm")
    events = list(doc["traceEvents"])
    step = next(e for e in events if e.get("name") == "ProfilerStep#1"
                and e["cat"] == "user_annotation")
    loader = {**step, "cat": "cpu_op", "dur": Decimal(5),
              "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"}
    events += [loader, {**step, "cat": "cpu_op", "name": "ProfilerStep#0",
                        "ts": step["ts"] - 100, "dur": Decimal(50)}]
    result = kernelmagic.load(write_trace(tmp_path / "t.json.gz", {**doc, "traceEvents": events}))
    keys = {r.key for r in result.rows} | {k.key for k in result.kernels}
    assert not {k for k in keys if k.startswith("ProfilerStep#")}
    # The DataLoader (written as a cpu_op) is a user range, as in a live run: in the ranges
    # view, and a "range" row of its own 5 µs since no op runs under it, never an op row.
    assert [g.cpu_time_total for g in result.ranges if g.key == loader["name"]] == [5.0]
    assert [(r.kind, r.self_cpu_time_total) for r in result.rows
            if r.key == loader["name"]] == [("range", 5.0)]
    assert "Optimizer.step#SGD.step" not in keys  # a gpu_user_annotation (and a CPU range)
    assert "aten::mse_loss" in keys


MARKER_NAME = re.compile(r"ProfilerStep#\d+|.+/iter \d+")


@pytest.mark.parametrize(("name", "path"), ALL_TRACES, ids=[n for n, _ in ALL_TRACES])
def test_iteration_markers_are_never_rows_bars_or_subjects(name, path):
    """``ProfilerStep#N`` and ``NAME/iter i`` mark the window: no row, no bar, no row of
    the model, no launcher in the kernels table, named by no finding."""
    assert not markers_shown(loaded(path))


def markers_shown(result) -> list[str]:
    """The rows, kernels' launchers, model rows, bars, findings and path rows of ``result``
    that name an iteration marker."""
    from kernelmagic.render.chart import chart_texts

    shown = [r.key for r in result.rows] + [k.launched_by for k in result.kernels]
    shown += result.dependency_model.row_key if result.dependency_model else []
    shown += chart_texts(result, k=len(result.rows))[1]
    shown += [str(f) for f in result.findings()] + [r.key for r in result.critical_path]
    return [s for s in shown if MARKER_NAME.search(s)]


def marked_trace(marker: str, outer: str | None = None,
                 direct_us: int = 50) -> tuple[dict, Decimal]:
    """Three iterations marked ``marker`` (``{i}``: the iteration), each an ``aten::mm``
    launching a 200 µs sgemm and two kernels launched right under the marker (no op
    between; the first ``direct_us`` long), and a memcpy with no launch; with the time the
    markers launched themselves (µs)."""
    events: list[dict] = []
    direct = Decimal(0)

    def event(name, cat, ts, dur, tid=1, **args):
        events.append({"ph": "X", "name": name, "cat": cat, "ts": Decimal(ts),
                       "dur": Decimal(dur), "pid": 0 if cat in GPU_WORK else 1, "tid": tid,
                       "args": args})

    def launch(ts, kernel, kernel_ts, kernel_dur, correlation):
        event("cudaLaunchKernel", "cuda_runtime", ts, 5, correlation=correlation)
        event(kernel, "kernel", kernel_ts, kernel_dur, tid=7, correlation=correlation,
              stream=7, device=0)

    if outer:
        event(outer, "user_annotation", 990, 3020)
    for i in range(3):
        t = 1000 + 1000 * i
        event(marker.format(i=i), "user_annotation", t, 900)
        event("aten::mm", "cpu_op", t + 10, 100)
        launch(t + 20, "sgemm", t + 40, 200, 10 * i + 1)
        launch(t + 200, "triton_poi_fused_0", t + 300, direct_us + i, 10 * i + 2)
        launch(t + 400, "triton_poi_fused_1", t + 450, Decimal("7.125"), 10 * i + 3)
        direct += direct_us + i + Decimal("7.125")
        event("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", t + 600, 11, tid=7,
              correlation=999_000 + i, stream=7, device=0)
    device = [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0}]
    return {"schemaVersion": 1, "deviceProperties": device, "traceEvents": events}, direct


@pytest.mark.parametrize(("marker", "outer", "key"), [("ProfilerStep#{i}", None, "ProfilerStep"),
                                                      ("blk/iter {i}", "blk", "blk/iter")])
def test_what_the_markers_launch_is_one_marked_row(tmp_path, marker, outer, key):
    doc, direct = marked_trace(marker, outer)
    truth = Truth(json.loads(dumps(doc), parse_float=Decimal)).rows()
    result = kernelmagic.load(write_trace(tmp_path / "t.json.gz", doc))
    assert result.iters == 3 and (result.name == "blk") == bool(outer)
    # The marked row holds exactly what the markers launched themselves, nothing else.
    marked = [r for r in result.rows if r.kind == "no op"]
    assert [(r.key, r.count) for r in marked] == [(key, 6)]
    assert close(marked[0].self_device_time_total, direct)
    assert close(marked[0].device_time_total, direct)
    assert marked[0].self_cpu_time_total == marked[0].cpu_time_total == 0.0
    # Every row as the plain model of the JSON has it; every µs of GPU work in one row.
    assert {(r.key, r.kind) for r in result.rows} == set(truth)
    for row in result.rows:
        for field in ("count", "self_cpu_time_total", "cpu_time_total",
                      "self_device_time_total", "device_time_total"):
            assert close(getattr(row, field), truth[(row.key, row.kind)][field]), (row, field)
    work = sum((e["dur"] for e in doc["traceEvents"] if e["cat"] in GPU_WORK), Decimal(0))
    assert close(sum(r.self_device_time_total for r in result.rows), work)
    # The kernels table and the model name the same row; what_if takes its label.
    assert {k.key: k.launched_by for k in result.kernels} == {
        "sgemm": "aten::mm", "triton_poi_fused_0": f"[no op] {key}",
        "triton_poi_fused_1": f"[no op] {key}",
        "Memcpy HtoD (Pageable -> Device)": ""}
    model = result.dependency_model
    rows = list(zip(model.row_kind, model.row_key, strict=True))
    assert ("no op", key) in rows
    items = model.item_row
    assert sum(rows[i] == ("no op", key) for i in items.tolist()) == 2  # per iteration
    assert result.what_if({f"[no op] {key}": 2.0}).iteration_us > 0
    assert "[no op] " + key in result.table(None)
    assert not markers_shown(result)


def test_a_marked_row_that_dominates_names_its_kernels(tmp_path):
    # 300 µs of Triton kernels launched right in each step against a 200 µs sgemm.
    doc, direct = marked_trace("ProfilerStep#{i}", direct_us=300)
    result = kernelmagic.load(write_trace(tmp_path / "t.json.gz", doc))
    share = direct / (direct + 3 * 200 + 3 * 11)  # of all the GPU work: sgemm, memcpy
    dominant = next(f for f in result.findings() if f.rule == "dominant_op")
    assert dominant.evidence.startswith(
        "[no op] ProfilerStep (launched with no op around: triton_poi_fused_0, "
        f"triton_poi_fused_1) takes {round(100 * share)}% of self time ")
    assert "2 pieces of GPU work per iteration" in dominant.evidence
    assert not markers_shown(result)


# --- ROCm, old categories, kernelmagic's own traces --------------------------------------


def test_rocm_trace_opens():
    result = loaded(DATA / "mi250_rocm.json.gz")
    truth = truth_of("mi250_rocm")
    assert result.device == "cuda" and result.device_name == "AMD Radeon Graphics"
    assert sum(k.count for k in result.kernels) == 14 + 2
    rows = {r.key: r for r in result.rows}
    assert rows["hipLaunchKernel"].count == sum(1 for e in truth.cpu
                                                if e["name"] == "hipLaunchKernel")


def test_old_categories_give_the_same_result(tmp_path):
    doc = raw("a100_alexnet")
    rename = {"cpu_op": "Operator", "user_annotation": "Operator", "cuda_runtime": "Runtime",
              "kernel": "Kernel", "gpu_memcpy": "Memcpy", "gpu_memset": "Memset"}
    old = []
    for e in doc["traceEvents"]:
        e = dict(e)
        if e.get("cat") == "user_annotation":
            continue  # torch 1.8 had no user_annotation category; drop the ranges
        e["cat"] = rename.get(e.get("cat"), e.get("cat"))
        if "External id" in e.get("args", {}):
            e["args"] = {("external id" if k == "External id" else k): v
                         for k, v in e["args"].items()}
        old.append(e)
    modern = [e for e in doc["traceEvents"] if e.get("cat") != "user_annotation"]
    a = kernelmagic.load(write_trace(tmp_path / "old.json.gz", {**doc, "traceEvents": old}))
    b = kernelmagic.load(write_trace(tmp_path / "new.json.gz", {**doc, "traceEvents": modern}))
    assert a.rows == b.rows and a.kernels == b.kernels and a.gpu_busy == b.gpu_busy
    assert len(a.kernels) > 10 and a.device == "cuda"


def test_kernelmagic_trace_iterations_from_its_own_ranges(tmp_path):
    torch = pytest.importorskip("torch")
    x = torch.randn(64, 64)
    path = tmp_path / "run.json"
    live = kernelmagic.profile(lambda: x @ x + 1, iters=4, warmup=1, name="blk",
                               trace=str(path))
    result = kernelmagic.load(path)
    assert result.name == "blk" and result.iters == 4
    doc = json.loads(path.read_text(), parse_float=Decimal)
    iters = sorted((us(e["ts"]), us(e["dur"])) for e in doc["traceEvents"]
                   if re.fullmatch(r"blk/iter \d", e.get("name", "")))
    assert result.timings == pytest.approx([float(d / 1000000) for _, d in iters], rel=1e-12)
    assert {r.key: r.count for r in result.rows} == {r.key: r.count for r in live.rows}


# --- findings that need CUDA data --------------------------------------------------------


def rules(result) -> set[str]:
    return {f.rule for f in result.findings()}


def edited(tmp_path: Path, name: str, change) -> Path:
    doc = raw(name)
    doc["traceEvents"] = [e for e in (change(dict(e)) for e in doc["traceEvents"]) if e]
    return write_trace(tmp_path / f"{name}.edited.json.gz", doc)


def test_sync_points_fires_on_syncs_and_not_without(tmp_path):
    truth = truth_of("a100_alexnet")
    syncs = Counter(e["name"] for e in truth.cpu if e["name"] in SYNC_OPS)
    assert syncs["cudaStreamSynchronize"] == 16
    result = loaded(DATA / "a100_alexnet.json.gz")
    found = {f.rule: f for f in result.findings()}
    assert "sync_points" in found
    assert "cudaStreamSynchronize ×16" in found["sync_points"].evidence
    dtoh = Counter(g["name"] for g in truth.work if "DtoH" in g["name"])
    for name, n in dtoh.items():
        assert f"{name} ×{n}" in found["sync_points"].evidence

    # The same trace without its synchronising calls and device-to-host copies.
    def no_sync(e):
        if e.get("name") in SYNC_OPS or "DtoH" in e.get("name", ""):
            return None
        return e

    assert "sync_points" not in rules(kernelmagic.load(edited(tmp_path, "a100_alexnet",
                                                             no_sync)))


def test_launch_bound_fires_when_the_gpu_waits_and_not_when_busy(tmp_path):
    # h200_launch_and_sync: the GPU idles 85% while the CPU launches 152 kernels of 0.97 µs
    # median (and 50 copies) per iteration; the model prices the launches at 24%.
    result = loaded(DATA / "h200_launch_and_sync.json.gz")
    assert launch_bound(result) is not None and "launch_bound" in rules(result)
    # a100_multi_stream_sync's short GPU work is its 3 fills: its 3 kernels run 41 µs each,
    # not launch-bound (it was, with the fills counted as kernels).
    truth = truth_of("a100_multi_stream_sync")
    kernels = [g for g in truth.work if g.get("cat") == "kernel"]
    assert len(kernels) == 3 and min(us(g["dur"]) for g in kernels) > 40
    assert launch_bound(loaded(DATA / "a100_multi_stream_sync.json.gz")) is None

    # Stretch every GPU event 2000x (the same launches, now long kernels): silent.
    def long_kernels(e):
        if e.get("cat") in GPU_WORK:
            e["dur"] = us(e["dur"]) * 2000
        return e

    busy = kernelmagic.load(edited(tmp_path, "h200_launch_and_sync", long_kernels))
    assert launch_bound(busy) is None
    assert launch_bound(loaded(DATA / "v100_gpu_annotations.json.gz")) is None


def test_fp32_matmul_fires_on_sgemm_where_tf32_exists(tmp_path):
    result = loaded(DATA / "a100_multi_stream_sync.json.gz")
    truth = truth_of("a100_multi_stream_sync")
    assert {g["name"] for g in truth.work if g["cat"] == "kernel"} == {"ampere_sgemm_128x64_nn"}
    assert result.matmul_precision == "highest"
    assert "fp32_matmul" in rules(result)
    # Tensor-core (TF32) kernels instead: silent.
    def tf32(e):
        if e.get("cat") == "kernel":
            e["name"] = "ampere_tf32_s1688gemm_tf32_128x64_nn"
        return e

    assert "fp32_matmul" not in rules(kernelmagic.load(edited(tmp_path, "a100_multi_stream_sync",
                                                              tf32)))
    # Same kernels on a GPU without TF32 (V100's compute capability 7): nothing to suggest.
    doc = raw("a100_multi_stream_sync")
    doc["deviceProperties"][0]["computeMajor"] = 7
    volta = kernelmagic.load(write_trace(tmp_path / "volta.json.gz", doc))
    assert volta.matmul_precision == "" and "fp32_matmul" not in rules(volta)
    assert "fp32_matmul" not in rules(loaded(DATA / "v100_gpu_annotations.json.gz"))


def test_dominant_op_on_device_time(tmp_path):
    truth = truth_of("a100_multi_stream_sync").op_rows()
    total = sum(r["self_device_time_total"] for r in truth.values())
    top = max(truth, key=lambda k: truth[k]["self_device_time_total"])
    assert top == "aten::mm" and truth[top]["self_device_time_total"] / total > Decimal("0.5")
    result = loaded(DATA / "a100_multi_stream_sync.json.gz")
    found = {f.rule: f for f in result.findings()}
    assert found["dominant_op"].evidence.startswith("aten::mm takes 100% of self time")
    v100 = truth_of("v100_gpu_annotations").op_rows()
    share = max(r["self_device_time_total"] for r in v100.values()) / \
        sum(r["self_device_time_total"] for r in v100.values())
    assert share < Decimal("0.5")
    assert "dominant_op" not in rules(loaded(DATA / "v100_gpu_annotations.json.gz"))


# --- the result is a result ---------------------------------------------------------------


def test_save_compare_and_cli_on_traces(tmp_path):
    a = loaded(DATA / "rank0_steps.json.gz")
    saved = a.save(tmp_path / "a.json")
    assert kernelmagic.load(saved) == a
    b = loaded(DATA / "v100_gpu_annotations.json.gz")
    comparison = b.compare(a).table(limit=3)
    assert comparison.startswith("v100_gpu_annotations vs rank0_steps: ")
    out = subprocess.run([sys.executable, "-m", "kernelmagic", "show",
                          str(DATA / "v100_gpu_annotations.json.gz"), "--limit", "3"],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("v100_gpu_annotations · CUDA (Tesla V100-SXM2-32GB) · "
                                 "5 iterations")
    assert "aten::convolution_backward " in out.stdout  # the top op by self device time
    out = subprocess.run([sys.executable, "-m", "kernelmagic", "compare",
                          str(DATA / "rank0_steps.json.gz"), str(saved)],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("rank0_steps vs rank0_steps: ")


def test_the_cli_ends_quietly_when_its_reader_stops():
    # ``python -m kernelmagic show trace | head`` (before: a BrokenPipeError traceback).
    # The read end is closed before the report is written: the write fails at once.
    proc = subprocess.Popen([sys.executable, "-m", "kernelmagic", "show",
                             str(DATA / "cpu_only.json.gz")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=REPO)
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()


def test_loading_a_trace_does_not_import_torch():
    code = ("import sys, kernelmagic; r = kernelmagic.load(sys.argv[1]); "
            "r.findings(); print(len(r.rows), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(DATA / "v100_gpu_annotations.json.gz")],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[1] == "False"


def test_rank_from_distributed_info():
    doc = raw("a100_multi_stream_sync")
    result = loaded(DATA / "rank0_steps.json.gz")
    info = raw("rank0_steps")["distributedInfo"]
    assert result.distributed == {"rank": info["rank"], "world_size": info["world_size"],
                                  "backend": info["backend"]} == {"rank": 0, "world_size": 128,
                                                                  "backend": "nccl"}
    assert loaded(DATA / "a100_multi_stream_sync.json.gz").distributed == \
        {"rank": doc["distributedInfo"]["rank"]}
    assert loaded(DATA / "a100_triton.json.gz").distributed == {}  # none recorded


def test_plain_pt_trace_json(tmp_path):
    plain = tmp_path / "worker0.1712195495.pt.trace.json"  # tensorboard_trace_handler's name
    with gzip.open(DATA / "v100_gpu_annotations.json.gz", "rb") as f:
        plain.write_bytes(f.read())
    from_gz = loaded(DATA / "v100_gpu_annotations.json.gz")
    result = kernelmagic.load(plain)
    assert result.name == "worker0.1712195495"
    assert result.rows == from_gz.rows and result.kernels == from_gz.kernels


def test_profile_json_with_its_keys_in_another_order(tmp_path):
    saved = loaded(DATA / "a100_triton.json.gz")
    data = saved.to_dict()
    reordered = {"version": data.pop("version"), **data}  # "format" no longer first
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(reordered))
    assert kernelmagic.load(path) == saved


def python_frames(path: Path) -> set[str]:
    """The names of the Python frames (``python_function`` events) the trace recorded."""
    doc = json.loads(path.read_text())
    return {e["name"] for e in doc["traceEvents"] if e.get("cat") == "python_function"}


def test_tensorboard_trace_of_a_cpu_training_step_equals_key_averages(tmp_path):
    """torch.profiler with a schedule, tensorboard_trace_handler and every recording option:
    the trace it writes loads into the rows ``key_averages()`` gives for that session."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(32, 64)
    write = tensorboard_trace_handler(str(tmp_path))
    seen = []

    def ready(p):  # what the trace holds, and torch's own averages of the same cycle
        write(p)
        seen.append(p.key_averages())

    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=3),
                 on_trace_ready=ready, record_shapes=True,
                 profile_memory=True, with_stack=True, with_modules=True) as prof:
        for _ in range(4):
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
            prof.step()
    (path,) = tmp_path.glob("*.pt.trace.json")
    result = kernelmagic.load(path)
    assert result.iters == 3 and result.device == "cpu"
    assert "memory" in result.views and "stack" in result.views
    (averages,) = seen
    frames = python_frames(path)  # torch lists them as rows; kernelmagic as the source view
    # zero_grad(set_to_none=True) runs no op: its range owns its time and is a row too.
    own_time = {"Optimizer.zero_grad#AdamW.zero_grad"}
    want = {a.key: a for a in averages
            if (not a.is_user_annotation or a.key in own_time) and a.key not in frames
            and a.key != "[memory]"}
    assert {r.key for r in result.rows} == set(want)
    assert {r.key for r in result.rows if r.kind == "range"} == own_time
    for row in result.rows:
        memory = () if OLD_TORCH else ("self_cpu_memory_usage", "cpu_memory_usage")
        for field in ("count", "self_cpu_time_total", "cpu_time_total", *memory):
            assert getattr(row, field) == pytest.approx(getattr(want[row.key], field),
                                                        rel=1e-9, abs=1e-6), (row.key, field)
    assert result.peak_memory["cpu"] > 0


def test_a_trace_that_names_a_gpu_but_holds_no_gpu_work_says_so():
    # a100_cupti_counters: CUPTI's range profiler replaced the kernel records; the trace's
    # deviceProperties name an A100. The header said "CPU", beside findings about CUDA's
    # start-up.
    result = loaded(DATA / "a100_cupti_counters.json.gz")
    assert not result.profiles_device
    assert result.device_label == ("CPU (no GPU work recorded on the NVIDIA A100-PG509-200 "
                                   "the trace names)")
    assert loaded(DATA / "cpu_only.json.gz").device_label == "CPU"
