"""Hardware counters per kernel (--counters, traces recorded with profiler metrics) and the
Nsight capture (--nsight), all on the CPU: a real A100 trace, hand-written traces, fake
counter sessions and a faked CUDA device."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pytest
import torch
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import kernelmagic
from kernelmagic.core.counter_metrics import (
    DRAM_READ_METRIC,
    DRAM_WRITE_METRIC,
    FLOP_METRICS,
    OCCUPANCY_METRIC,
    TENSOR_METRIC,
    CounterRow,
)
from kernelmagic.core.events import derive_links
from kernelmagic.core.options import ProfileOptions
from kernelmagic.core.roofline_bounds import Peaks
from kernelmagic.core.rows import KernelRow, RooflineRow
from kernelmagic.findings import find
from kernelmagic.findings.counters import dram_near_peak, poor_reuse
from kernelmagic.live import counter_run, runner, torch_compat
from kernelmagic.render.html import html_report
from kernelmagic.render.text import text_report
from kernelmagic.results.result import ProfileResult
from kernelmagic.sources import trace_fast
from kernelmagic.sources.trace_file import read_table
from kernelmagic.views.counters import counter_rows

DATA = Path(__file__).parent / "data"
A100 = DATA / "a100_cupti_counters.json.gz"
FFMA, FADD = ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
              "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum")


# --- the recorded A100 trace ---------------------------------------------------------


def _expected_from_raw_json() -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """Per kernel name, FLOPs by precision summed from the raw ranges; and the op around
    the k-th cudaLaunchKernel for the k-th range (innermost enclosing cpu_op)."""
    with gzip.open(A100, "rt") as f:
        events = json.load(f)["traceEvents"]
    ranges = sorted((e for e in events if e.get("cat") == "cuda_profiler_range"),
                    key=lambda e: e["ts"])
    launches = sorted((e for e in events if e.get("cat") == "cuda_runtime"
                       and e["name"] == "cudaLaunchKernel"), key=lambda e: e["ts"])
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    assert len(ranges) == len(launches) == 77
    flops: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    owner: dict[str, list[str]] = defaultdict(list)
    for r, launch in zip(ranges, launches, strict=True):
        for metric, value in r["args"].items():
            precision, per = FLOP_METRICS[metric]
            flops[r["name"]][precision] += value * per
        around = [o for o in ops if o["tid"] == launch["tid"] and o["ts"] <= launch["ts"]
                  and launch["ts"] + launch["dur"] <= o["ts"] + o["dur"]]
        owner[r["name"]].append(min(around, key=lambda o: o["dur"])["name"] if around else "")
    most = {k: max(set(v), key=v.count) for k, v in owner.items()}
    return flops, most


def test_a100_counter_trace_opens_with_counters_per_kernel():
    result = kernelmagic.load(A100)
    assert "counters" in result.views
    assert result.counters_note == ("77 counter ranges joined to the 77 kernel launches in "
                                    "order (the trace has no kernel events)")
    flops, owner = _expected_from_raw_json()
    rows = {r.key: r for r in result.counters}
    assert set(rows) == set(flops)
    assert sum(r.count for r in rows.values()) == 77
    for name, want in flops.items():
        row = rows[name]
        assert row.fp64_flops == want["fp64"]
        assert row.fp32_flops == want["fp32"]
        assert row.fp16_flops == want["fp16"]
        assert row.launched_by == owner[name], name
        assert row.has_flops and not row.has_dram and row.occupancy == -1.0
        assert row.time == 0.0 and row.flops_per_s == 0.0  # no kernel events: no rates
    sgemm = rows["ampere_sgemm_32x32_sliced1x4_tn"]
    assert sgemm.launched_by == "aten::addmm" and sgemm.count == 6
    # A number worked out by hand from the JSON: the first sgemm range alone.
    with gzip.open(A100, "rt") as f:
        first = next(e for e in sorted(json.load(f)["traceEvents"], key=lambda e: e["ts"])
                     if e.get("name") == "ampere_sgemm_32x32_sliced1x4_tn")
    assert first["args"][FFMA] > 0 and sgemm.fp32_flops >= 2 * first["args"][FFMA]


def test_a100_counter_trace_renders_and_survives_json():
    result = kernelmagic.load(A100)
    text = text_report(result)
    assert "[counters]" in text and "ampere_sgemm_32x32_sliced1x4_tn" in text
    assert ("Hardware counters: 77 counter ranges joined to the 77 kernel launches in order "
            "(the trace has no kernel events); no kernel times to go with them, so counts "
            "without rates") in text  # how they were joined, and what that leaves
    assert "device time" not in text.split("[counters]")[1]  # no rates without kernel times
    html = html_report(result)
    assert "FP32 FLOP" in html
    again = ProfileResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again == result and again.counters == result.counters
    # The counter ranges are no op rows.
    assert not any(r.key.startswith("ampere_sgemm") for r in result.rows)


def test_both_readers_carry_the_counter_ranges_identically():
    fast, slow = trace_fast.read_table(A100), read_table(A100, fast=False)
    assert fast is not None
    assert fast.meta["counter_ranges"] == slow.meta["counter_ranges"]
    assert len(fast.meta["counter_ranges"]) == 77


# --- hand-written traces --------------------------------------------------------------


def _trace(tmp_path: Path, *, kernels: bool, ranges: int = 2, extra_launch: bool = False,
           floats: bool = False) -> Path:
    """One op launching two kernels (5 µs and 20 µs) and their counter ranges, whose
    timestamps (as in real traces) say nothing about the kernels'."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100,
         "dur": 50},
    ]
    for k, (corr, ts) in enumerate(((7, 110), (8, 120))):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                       "pid": 1, "tid": 1, "ts": ts, "dur": 5, "args": {"correlation": corr}})
        if kernels:
            events.append({"ph": "X", "cat": "kernel", "name": f"k{k}", "pid": 0, "tid": 7,
                           "ts": 200 + 100 * k, "dur": 5 + 15 * k,
                           "args": {"device": 0, "stream": 7, "correlation": corr}})
    if extra_launch:
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                       "pid": 1, "tid": 1, "ts": 140, "dur": 5, "args": {"correlation": 9}})
    for k in range(ranges):
        value = 1.5e6 if floats else 1_000_000
        events.append({"ph": "X", "cat": "cuda_profiler_range", "name": f"k{k % 2}",
                       "pid": 0, "tid": 0, "ts": 1000 + 500 * k, "dur": 500,
                       "args": {FFMA: 1000 * (k + 1), FADD: 10, DRAM_READ_METRIC: value,
                                DRAM_WRITE_METRIC: 500_000, OCCUPANCY_METRIC: 50.0 + k,
                                "note": "not a number"}})
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_ranges_join_the_kernels_in_order_and_take_their_times(tmp_path):
    table = derive_links(read_table(_trace(tmp_path, kernels=True)))
    assert table.meta["counter_join"] == ("2 counter ranges joined to the trace's 2 kernels "
                                          "in order")
    rows = {r.key: r for r in counter_rows(table, peak_bytes_per_s=1e12)}
    k0, k1 = rows["k0"], rows["k1"]
    assert (k0.fp32_flops, k1.fp32_flops) == (2 * 1000 + 10, 2 * 2000 + 10)
    assert (k0.time, k1.time) == (5.0, 20.0)  # µs, from the kernel events
    assert k0.dram_bytes == 1_500_000 and k0.dram_bytes_per_s == 1_500_000 / 5e-6
    assert k0.dram_peak_share == pytest.approx(1_500_000 / 5e-6 / 1e12)
    assert k0.flops_per_s == pytest.approx(2010 / 5e-6)
    assert (k0.occupancy, k1.occupancy) == (50.0, 51.0)
    assert k0.launched_by == "aten::mm" and k1.launched_by == "aten::mm"


def test_ranges_join_launches_when_the_trace_has_no_kernels(tmp_path):
    table = derive_links(read_table(_trace(tmp_path, kernels=False)))
    assert "joined to the 2 kernel launches" in table.meta["counter_join"]
    rows = counter_rows(table)
    assert {r.launched_by for r in rows} == {"aten::mm"}
    assert all(r.time == 0.0 and r.dram_bytes_per_s == 0.0 for r in rows)


def test_counts_that_differ_join_nothing_but_keep_the_counts(tmp_path):
    table = derive_links(read_table(_trace(tmp_path, kernels=False, extra_launch=True)))
    assert table.meta["counter_join"] == ("2 counter ranges, 0 kernels and 3 kernel launches:"
                                          " not joined (kernels are named, their ops unknown)")
    rows = {r.key: r for r in counter_rows(table)}
    assert rows["k0"].launched_by == "" and rows["k0"].fp32_flops == 2010


def test_ranges_at_cuptis_limit_join_the_first_launches(tmp_path, monkeypatch):
    # Kineto's range profiler stops at its range limit: that many ranges are the first
    # kernels run, so they join the first launches (here the limit is 2, launches 3).
    monkeypatch.setattr("kernelmagic.core.counter_metrics.MAX_RANGES", 2)
    table = derive_links(read_table(_trace(tmp_path, kernels=False, extra_launch=True)))
    assert table.meta["counter_join"] == ("2 counter ranges joined to the first 2 kernel "
                                          "launches in order (the trace has no kernel events)")
    assert [r["correlation"] for r in table.meta["counter_ranges"]] == [7, 8]
    assert {r.launched_by for r in counter_rows(table)} == {"aten::mm"}


@pytest.mark.parametrize("floats", [False, True])
def test_both_readers_give_equal_counter_ranges(tmp_path, floats):
    path = _trace(tmp_path, kernels=True, ranges=4, floats=floats)
    fast, slow = trace_fast.read_table(path), read_table(path, fast=False)
    assert fast is not None
    assert fast.meta == slow.meta
    first = fast.meta["counter_ranges"][0]
    assert first["metrics"][DRAM_READ_METRIC] == (1.5e6 if floats else 1e6)
    assert "note" not in first["metrics"]  # only numbers are metric values


# --- the live counter run, with fake sessions ----------------------------------------


def _timed_result(kernels: list[KernelRow], iters: int = 2) -> ProfileResult:
    return ProfileResult(name="b", iters=iters, warmup=0, device="cuda", rows=[],
                         timings=[0.001] * iters, kernels=kernels, views=[])


class _FakeSession:
    """Stands in for the counter session: runs nothing, writes a prepared trace."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self.entered = 0

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc):
        return False

    def export_chrome_trace(self, path: str) -> None:
        Path(path).write_text(self.source.read_text())


def test_counter_run_reads_the_sessions_trace(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    session = _FakeSession(_trace(tmp_path, kernels=False))
    ran, asked = [], []

    def make(metrics):
        asked.append(list(metrics))
        return session

    table = counter_run.counter_events(lambda: ran.append(1), ["m"], session=make)
    assert ran == [1] and session.entered == 1 and asked == [["m"]]
    assert len(table.meta["counter_ranges"]) == 2


def test_counter_session_asks_for_no_cuda_activity(monkeypatch):
    # Kineto's range profiler refuses to run beside kernel tracing, so the session must
    # not ask for ProfilerActivity.CUDA even where CUDA is available.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    prof = counter_run.counter_session(["dram__bytes_read.sum"])
    assert prof.kineto_activities == {torch.profiler.ProfilerActivity.CPU}
    assert prof.profiler_kind == torch.autograd.ProfilerState.KINETO
    assert prof.experimental_config is not None


def test_counters_view_rates_use_the_timed_iterations(tmp_path, monkeypatch):
    table = derive_links(read_table(_trace(tmp_path, kernels=False)))
    monkeypatch.setattr("kernelmagic.live.device_peaks.peaks",
                        lambda device=None: Peaks(
                            device="cuda", flops_per_s={}, bytes_per_s=1e12, source="test"))
    # Timed: k0 10 µs and k1 40 µs over 2 iterations -> 5 and 20 µs per run.
    timed = _timed_result([KernelRow("k0", 2, 10.0, "aten::mm"),
                           KernelRow("k1", 2, 40.0, "aten::mm")])
    result = runner.counters_view(timed, lambda: None, table_of=lambda fn, m: table,
                                  forbidden=lambda: "")
    rows = {r.key: r for r in result.counters}
    assert rows["k0"].time == 5.0 and rows["k1"].time == 20.0
    assert rows["k0"].dram_peak_share == pytest.approx(1.5e6 / 5e-6 / 1e12)
    assert result.views == ["counters"] and result.timings == timed.timings
    assert "kernel launches in order" in result.counters_note


def test_rates_hold_when_fewer_calls_were_counted_than_timed(tmp_path, monkeypatch):
    # CUPTI stops counting at its range limit: a kernel timed 2 calls per run (10 µs each)
    # but counted once gets the time of the one call counted, not of the run's two.
    monkeypatch.setattr("kernelmagic.live.device_peaks.peaks",
                        lambda device=None: Peaks(
                            device="cuda", flops_per_s={}, bytes_per_s=1e12, source="test"))
    table = derive_links(read_table(_trace(tmp_path, kernels=False)))
    timed = _timed_result([KernelRow("k0", 4, 40.0), KernelRow("k1", 2, 40.0)])
    result = runner.counters_view(timed, lambda: None, table_of=lambda fn, m: table,
                                  forbidden=lambda: "")
    rows = {r.key: r for r in result.counters}
    assert (rows["k0"].count, rows["k0"].time) == (1, 10.0)
    assert rows["k0"].dram_bytes_per_s == pytest.approx(1.5e6 / 10e-6)
    assert rows["k1"].time == 20.0
    assert "at most" not in result.counters_note

    full = derive_links(read_table(_trace(tmp_path, kernels=False, ranges=1500)))
    capped = runner.counters_view(timed, lambda: None, table_of=lambda fn, m: full,
                                  forbidden=lambda: "")
    assert capped.counters_note.endswith("CUPTI counts at most 1500 kernels per session, so "
                                         "the kernels after them in the run are not counted")
    assert {r.key: r.time for r in capped.counters} == {"k0": 7500.0, "k1": 15000.0}


def test_a_metric_the_gpu_lacks_costs_only_that_metric(tmp_path, monkeypatch):
    # One unknown metric fails CUPTI's whole session (no ranges, no error): the run is
    # asked again for the FLOP and DRAM counters alone, and the note names what was left out.
    full = derive_links(read_table(_trace(tmp_path, kernels=False)))
    empty = derive_links(read_table(_trace(tmp_path, kernels=False, ranges=0)))
    asked: list[list[str]] = []
    monkeypatch.setattr("kernelmagic.live.device_peaks.peaks",
                        lambda device=None: Peaks(
                            device="cuda", flops_per_s={}, bytes_per_s=1e12, source="test"))

    def table_of(fn, metrics):
        asked.append(list(metrics))
        return empty if TENSOR_METRIC in metrics else full

    timed = _timed_result([KernelRow("k0", 2, 10.0), KernelRow("k1", 2, 40.0)])
    result = runner.counters_view(timed, lambda: None, table_of=table_of, forbidden=lambda: "")
    assert len(asked) == 2 and TENSOR_METRIC in asked[0]
    assert TENSOR_METRIC not in asked[1] and OCCUPANCY_METRIC not in asked[1]
    assert FFMA in asked[1] and DRAM_READ_METRIC in asked[1]
    assert {r.key for r in result.counters} == {"k0", "k1"}
    assert result.counters_note.endswith(
        f"read without {TENSOR_METRIC}, {OCCUPANCY_METRIC} (CUPTI gave no counters with them)")


def test_no_permission_no_crash(tmp_path):
    params = tmp_path / "params"
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    reason = counter_run.counters_forbidden(str(params))
    if hasattr(__import__("os"), "geteuid") and __import__("os").geteuid() == 0:
        assert reason == ""  # root may read counters
    else:
        assert "ERR_NVGPUCTRPERM" in reason and "NVreg_RestrictProfilingToAdminUsers=0" in reason
    params.write_text("RmProfilingAdminOnly: 0\n")
    assert counter_run.counters_forbidden(str(params)) == ""
    assert counter_run.counters_forbidden(str(tmp_path / "absent")) == ""

    timed = _timed_result([KernelRow("k0", 2, 10.0)])
    forbidden = runner.counters_view(timed, lambda: None, forbidden=lambda: "no counters: x")
    assert forbidden.counters == [] and forbidden.counters_note == "no counters: x"
    assert forbidden.kernels == timed.kernels and forbidden.timings == timed.timings

    def fails(fn, metrics):
        raise RuntimeError("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES")

    failed = runner.counters_view(timed, lambda: None, table_of=fails, forbidden=lambda: "")
    assert failed.counters_note.startswith("no hardware counters: the counter run failed "
                                           "(RuntimeError: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)")
    empty = derive_links(read_table(_trace(tmp_path, kernels=True, ranges=0)))
    none = runner.counters_view(timed, lambda: None, table_of=lambda fn, m: empty,
                                forbidden=lambda: "")
    assert none.counters_note.startswith("no hardware counters: CUPTI gave none")
    assert none.counters_note.endswith("--nsight under ncu reads them instead")
    for result in (forbidden, failed, none):
        text = text_report(result)
        line = [x for x in text.splitlines() if "no hardware counters" in x
                or "no counters: x" in x]
        assert len(line) == 1  # one line says why
        assert "\n" not in result.counters_note


def test_counters_and_nsight_on_cpu_are_one_line_usage_errors(ip):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    for flag in ("--counters", "--nsight"):
        with capture_output():
            res = ip.run_cell(f"%%profile {flag}\nx = 1")
        assert isinstance(res.error_in_exec, UsageError)
        text = str(res.error_in_exec)
        assert text == (f"{flag} needs a CUDA GPU (it works through CUPTI), but CUDA is "
                        "not available")
        assert "x" not in ip.user_ns


def test_nsight_excludes_what_needs_torchs_profiler():
    with pytest.raises(ValueError, match="--nsight cannot be combined with --counters"):
        ProfileOptions(nsight=True, counters=True)
    with pytest.raises(ValueError, match="--nsight cannot be combined with --memory"):
        ProfileOptions(nsight=True, memory=True)
    assert ProfileOptions(nsight=True).nsight


# --- Nsight capture, on a faked CUDA device --------------------------------------------


@pytest.fixture
def fake_cuda(monkeypatch):
    """CUDA as far as the runner can tell; NVTX and the capture calls recorded."""
    log: list[tuple] = []
    depth: list[str] = []
    monkeypatch.setattr(torch_compat, "cuda_available", lambda: True)
    monkeypatch.setattr(torch_compat, "synchronize", lambda: None)
    monkeypatch.setattr(torch_compat, "device_name", lambda: "Fake GPU")
    monkeypatch.setattr(torch_compat, "gpu_runtime", lambda: "cuda")
    monkeypatch.setattr(torch_compat, "_nvtx_works", True)
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: depth.append(name))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: depth.pop())
    monkeypatch.setattr(counter_run, "capture_start", lambda: log.append(("start", *depth)))
    monkeypatch.setattr(counter_run, "capture_stop", lambda: log.append(("stop", *depth)))

    def no_profiler(*args, **kwargs):
        raise AssertionError("--nsight must not start torch's profiler")

    monkeypatch.setattr(torch_compat, "new_profiler", no_profiler)
    monkeypatch.setattr(torch_compat, "warm_profiler", no_profiler)
    return log, depth


def test_nsight_brackets_exactly_the_profiled_iterations(fake_cuda):
    log, depth = fake_cuda
    result = kernelmagic.profile(lambda: log.append(("run", *depth)), iters=3, warmup=2,
                                 name="cell", nsight=True)
    assert log == [("run", "cell/warmup"), ("run", "cell/warmup"), ("start", "cell"),
                   ("run", "cell", "cell/iter 0"), ("run", "cell", "cell/iter 1"),
                   ("run", "cell", "cell/iter 2"), ("stop", "cell")]
    assert depth == []
    assert result.capture == "nsight" and result.rows == [] and result.kernels == []
    assert len(result.timings) == 3 and len(result.warmup_timings) == 2
    assert ProfileResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_nsight_capture_stops_when_the_block_raises(fake_cuda):
    log, _ = fake_cuda
    calls = []

    def block():
        calls.append(1)
        if len(calls) == 2:  # the first profiled iteration (after one warm-up)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        kernelmagic.profile(block, iters=3, warmup=1, nsight=True)
    assert [x[0] for x in log] == ["start", "stop"]


def test_nsight_report_says_which_capture_and_copes_with_no_rows(fake_cuda):
    result = kernelmagic.profile(lambda: None, iters=2, warmup=0, name="cell", nsight=True)
    text = text_report(result)
    assert ("Nsight capture: cudaProfilerStart/Stop bracketed the 2 timed iterations inside "
            "the NVTX range 'cell'") in text
    # The GPU was not watched: the summary claims no busy share and no row totals.
    summary = result.summary().splitlines()[0]
    assert summary.endswith(" · wall clock only (Nsight capture)")
    assert "GPU busy" not in text and "self device" not in summary
    assert "Nsight capture" in html_report(result)
    result.findings()  # no rule trips over the empty rows
    from kernelmagic.render.bundle import mime_bundle

    assert "Nsight capture" in mime_bundle(result)["text/plain"]


def test_nsight_magic_cell(ip, fake_cuda):
    log, _ = fake_cuda
    with capture_output() as cap:
        res = ip.run_cell("%%profile --nsight -n 2 -w 1 --name nv -o r\nx = 1")
    assert res.error_in_exec is None, res.error_in_exec
    assert [x[0] for x in log] == ["start", "stop"]
    assert ip.user_ns["r"].capture == "nsight"
    assert cap.outputs


# --- findings and the measured roofline -----------------------------------------------


def _counted(**fields) -> CounterRow:
    base = dict(key="k", count=1, launched_by="aten::add", has_dram=True, has_flops=True)
    return CounterRow(**{**base, **fields})


def test_dram_near_peak_and_poor_reuse_findings():
    rows = [_counted(key="copy", dram_read_bytes=40e6, dram_write_bytes=40e6, time=30.0,
                     dram_bytes_per_s=80e6 / 30e-6, dram_peak_share=0.85),
            _counted(key="tiny", time=1.0, dram_peak_share=0.9)]  # 3% of the time: no
    result = ProfileResult(name="b", iters=2, warmup=0, device="cuda", rows=[],
                           timings=[1e-4, 1e-4], counters=rows, views=["counters"])
    near = dram_near_peak(result)
    assert near is not None and "85% of the device's peak bandwidth" in near.evidence
    assert "kernel copy (launched by aten::add)" in near.evidence
    assert poor_reuse(result) is None  # no model without --roofline
    # --roofline says aten::add needs 8 MB per call, 1 call per iteration: 10x measured.
    result.roofline = [RooflineRow(key="aten::add", count=2, flops=1e6, bytes=8e6,
                                   intensity=0.125, flops_per_s=0, bytes_per_s=0,
                                   bound="memory")]
    result.views.append("roofline")
    reuse = poor_reuse(result)
    assert reuse is not None and "10.0x the 8 MB its tensors hold" in reuse.evidence
    assert {f.rule for f in find(result)} >= {"counters.dram_near_peak", "counters.poor_reuse"}
    text = text_report(result)
    assert "[roofline (measured)]" in text and "10x" in text


def test_roofline_chart_places_measured_kernels_beside_the_model(monkeypatch):
    from kernelmagic.render import counters as render_counters
    from kernelmagic.render.roofline import roofline_png

    rows = [_counted(key="gemm", fp32_flops=2e9, dram_read_bytes=1e6, time=10.0,
                     flops_per_s=2e14, dram_bytes_per_s=1e11),
            _counted(key="counted, untimed", fp32_flops=1e6, dram_read_bytes=1e3),
            # A tensor-core GEMM: its FLOPs are not counted, only its instructions.
            _counted(key="hmma gemm", fp32_flops=1e6, tensor_inst=5e6, dram_read_bytes=1e6,
                     time=10.0, flops_per_s=1e11, dram_bytes_per_s=1e11, has_tensor=True)]
    result = ProfileResult(
        name="b", iters=1, warmup=0, device="cuda", rows=[], timings=[1e-4], counters=rows,
        views=["roofline", "counters"],
        roofline=[RooflineRow(key="aten::mm", count=1, flops=2e9, bytes=3e6, intensity=667,
                              flops_per_s=1e14, bytes_per_s=1e11, bound="compute", time=20)],
        roofline_peaks={"flops_per_s": {"float32": 5e13}, "bytes_per_s": 4.8e12,
                        "source": "test"})
    assert [r.key for r in render_counters.measured_points(result, 10)] == ["gemm"]
    drawn = []
    original = render_counters.draw_measured
    monkeypatch.setattr(render_counters, "draw_measured",
                        lambda ax, res, k: drawn.append(original(ax, res, k)) or drawn[-1])
    assert roofline_png(result)[:4] == b"\x89PNG"
    assert drawn == [([2000.0], [2e14])]  # FLOP per DRAM byte, measured FLOP/s


def test_counters_view_is_in_the_widgets_view_selector():
    import ipywidgets

    from kernelmagic.render.bundle import report_box

    def walk(w, out):
        out.append(w)
        for c in getattr(w, "children", ()):
            walk(c, out)
        return out

    box = report_box(kernelmagic.load(A100))
    selectors = [w for w in walk(box, []) if isinstance(w, ipywidgets.ToggleButtons)]
    assert "counters" in selectors[0].options


def test_nsight_ctrl_c_keeps_the_completed_iterations(fake_cuda):
    log, _ = fake_cuda
    calls = []

    def block():
        calls.append(1)
        if len(calls) == 3:  # warm-up, iteration 0, then Ctrl-C in iteration 1
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as caught:
        kernelmagic.profile(block, iters=4, warmup=1, nsight=True)
    partial = caught.value.result
    assert partial.capture == "nsight" and len(partial.timings) == 1
    assert partial.interrupted_after == 1 and partial.planned_iters == 4
    assert [x[0] for x in log] == ["start", "stop"]


def test_ctrl_c_in_the_counter_run_keeps_the_timed_result(monkeypatch):
    # The counter run serialises and replays every kernel: it is the slow part, and Ctrl-C
    # there must not lose the timed iterations already measured.
    monkeypatch.setattr(counter_run, "counters_forbidden", lambda: "")

    def interrupted(fn, metrics):
        raise KeyboardInterrupt

    monkeypatch.setattr(counter_run, "counter_events", interrupted)
    options = ProfileOptions(iters=2, warmup=0, name="b", counters=True)
    run = runner.Plan(options=options, profiles_device=False,
                      sort=options.resolve_sort(False))
    with pytest.raises(KeyboardInterrupt) as caught:
        runner.execute(lambda: torch.ones(4).add_(1), run)
    partial = caught.value.result
    assert len(partial.timings) == 2 and partial.rows and "counters" in partial.views
    assert partial.counters == []
    assert partial.counters_note == "no hardware counters: the counter run was interrupted"
    assert not partial.interrupted_after  # every timed iteration ran


def test_api_refuses_counters_and_nsight_on_the_cpu():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    for flag in ("counters", "nsight"):
        with pytest.raises(ValueError, match=f"--{flag} needs a CUDA GPU"):
            kernelmagic.profile(lambda: None, iters=1, warmup=0, **{flag: True})
