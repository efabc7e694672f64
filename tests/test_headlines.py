"""Each report leads with the biggest problem it can see: the headline of every real trace,
and each headline rule on hand-built profiles that trigger it and that do not."""

from __future__ import annotations

import dataclasses
import html
import math
from pathlib import Path

import pytest
import torch
from fakes import cpu_result
from loaded import loaded

import kernelmagic
from kernelmagic import findings
from kernelmagic.core import roofline_bounds
from kernelmagic.core.counter_metrics import CounterRow
from kernelmagic.core.rows import (
    DATA_LOADING,
    Breakdown,
    CriticalPathRow,
    GpuIdleRow,
    KernelRow,
    OpRow,
    PythonLineRow,
    RooflineRow,
)
from kernelmagic.findings import roofline as roofline_findings
from kernelmagic.findings.base import NEGLIGIBLE_SAVING, Finding
from kernelmagic.findings.gpu import gpu_idle, launch_bound
from kernelmagic.findings.measurement import timed_while_counting
from kernelmagic.findings.ops import dominant_op, train_mode_under_no_grad
from kernelmagic.findings.python import PYTHON_SHARE, python_between_ops
from kernelmagic.findings.startup import startup_in_window
from kernelmagic.render.html import findings_html
from kernelmagic.results.result import ProfileResult

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).parents[2] / "shared" / "traces"

# --- the headline of every real trace --------------------------------------------------

#: Trace -> (the rule of the first finding, text its title or evidence holds). The
#: headline a performance engineer gives each trace, with its key number.
HEADLINES = {
    # 29.9 s of cudaDeviceGetStreamPriorityRange (CUDA start-up) in a 43.4 s window,
    # 3.06 s of first launches, the model's warm-up forward inside.
    "a100_alexnet.json.gz": ("startup_in_window", "set-up calls take 42.2 s per iteration "
                             "(mean; 97% of the iteration): cudaDeviceGetStreamPriorityRange"),
    # 6 kernels in a 19.9 ms window; the CPU runs 1.1 ms of ops: the rest is outside them.
    "a100_multi_stream_sync.json.gz": ("gpu_idle", "idle 98% of the iteration (CPU-bound: "
                                       "Python between ops)"),
    # The GPU idles 170 of 222 ms while the CPU runs 193 ms of ops (DDP ResNet step).
    "a100_nccl_rank.json.gz": ("gpu_idle", "idle 76% of the iteration (CPU-bound: CPU work "
                               "inside ops)"),
    # One 1.76 µs kernel in a step cut at the recording's end, 1.67 ms (its range runs on
    # 13.3 s past it): idle 1 - 1.76 µs / 1.67 ms, 99.9% (never "100%", which is only
    # for exactly all). The gpu idle view puts it at the iteration's edges: the compiled
    # region's 1.35 ms before that one kernel, 317 µs after it.
    "a100_triton.json.gz": ("gpu_idle", "idle 99.9% of the iteration (CPU-bound: the "
                            "iteration's start or end)"),
    # gloo all-reduce: 179 of 210 ms communicating on the CPU.
    "cpu_only.json.gz": ("communication_bound",
                         "179 ms per iteration (mean; 85% of the iteration) on the CPU"),
    # A small transformer training step: 80 short kernels, 582 op calls per step.
    "h200_km_train_step.json.gz": ("gpu_idle", "idle 75% of the iteration (CPU-bound: CPU "
                                   "work inside ops)"),
    "h200_train_step.json.gz": ("gpu_idle", "idle 75% of the iteration (CPU-bound: CPU work "
                                "inside ops)"),
    # 50 tiny ops and 50 .item() per step.
    "h200_launch_and_sync.json.gz": ("gpu_idle", "idle 85% of the iteration (CPU-bound: CPU "
                                     "work inside ops)"),
    # One 6.5 ms hipLaunchKernel (a first launch loading its code object) in a 9.3 ms step.
    "mi250_rocm.json.gz": ("startup_in_window", "set-up calls take 6.63 ms per iteration "
                           "(mean; 71% of the iteration): hipLaunchKernel 6.63 ms"),
    # Idle 341 of 615 ms per step comes before the 168 ms of exposed communication (27%).
    # Judged stretch by stretch (the gpu idle view), no op runs for 214 ms of the idle
    # time (rank 1: 191 of 329 ms); _foreach_mul_ and a scripted forward hold 116 ms.
    "rank0_steps.json.gz": ("gpu_idle", "idle 55% of the iteration (CPU-bound: Python "
                            "between ops)"),
    "ranks/rank-0.json.gz": ("gpu_idle", "idle 55% of the iteration (CPU-bound: Python "
                             "between ops)"),
    "ranks/rank-1.json.gz": ("gpu_idle", "idle 53% of the iteration (CPU-bound: Python "
                             "between ops)"),
    # The GPU is busy 97% of the step, 64% of its time in float32 convolutions (cuDNN's
    # sgemm/scudnn kernels) and their backward: float16 autocast and channels_last first.
    # (The CPU-side step lengths vary, 35 to 96 ms: noisy comes after.)
    "v100_gpu_annotations.json.gz": ("fp32_conv", "convolutions and their backward take 64% "
                                     "of device time"),
    # Meta MTIA inference (1,313 device events on 12 streams, 0.81 s): the device is busy
    # 92% of the window; the only finding is the 75 .item() per iteration, whose removal
    # the model says saves almost nothing (issue 43 item 3 words such findings).
    "mtia_inference.json.gz": ("sync_points", "aten::item ×75"),
    # Recorded with profiler metrics: CUPTI's range profiler replays each kernel, so each
    # launch takes 67 ms and every time is the counting's; context creation, streams and
    # the model's warm-up are in the window too (startup_in_window, after it).
    "a100_cupti_counters.json.gz": ("timed_while_counting", "every launch waits for its "
                                    "kernel's passes (cudaLaunchKernel 67.1 ms a call on "
                                    "average, where a launch takes µs)"),
}
#: Rules whose findings may come after a headline without contradicting it, per trace.
ALSO = {
    "v100_gpu_annotations.json.gz": "noisy",
    "a100_cupti_counters.json.gz": "startup_in_window",
    "rank0_steps.json.gz": "communication_bound",
    "ranks/rank-0.json.gz": "communication_bound",
    "ranks/rank-1.json.gz": "communication_bound",
}


def trace_path(name: str) -> Path | None:
    for folder in (DATA, SHARED):
        if (folder / name).exists():
            return folder / name
    return None


def test_the_table_names_every_trace():
    ours = {p.relative_to(DATA).as_posix() for p in DATA.rglob("*.json.gz")}
    shared = ({p.relative_to(SHARED).as_posix() for p in SHARED.rglob("*.json.gz")}
              if SHARED.is_dir() else set())
    assert ours | shared <= set(HEADLINES)


@pytest.mark.parametrize("name", sorted(HEADLINES))
def test_each_trace_leads_with_its_headline(name):
    path = trace_path(name)
    if path is None:
        pytest.skip(f"{name} is not in tests/data or ../shared/traces")
    found = loaded(path).findings()
    rule, text = HEADLINES[name]
    first = found[0]
    assert first.rule == rule, [str(f) for f in found]
    assert text in f"{first.title}: {first.evidence}"
    if name in ALSO:
        assert ALSO[name] in {f.rule for f in found[1:]}
    # Biggest first: no later finding explains more of the iteration.
    assert all(f.share <= first.share for f in found)


def test_startup_on_a_trace_says_how_to_record_steady_state():
    f = first(loaded(DATA / "a100_alexnet.json.gz"))
    assert f.suggestion.startswith("profile steady state: a warm-up before the profiler "
                                   "records (torch.profiler.schedule(wait=1, warmup=1, ")
    rocm = first(loaded(DATA / "mi250_rocm.json.gz"))
    assert rocm.title == "ROCm start-up or first-call set-up inside the profiled window"
    assert ("552 µs a call on average where a launch takes µs: a first launch loads its "
            "kernel's module") in rocm.evidence


def test_a_trace_timed_while_counting_says_so_first_and_keeps_its_launches_out_of_setup():
    # a100_cupti_counters: 77 launches of 16 kernels, none under 1.5 ms (median 53 ms, the
    # raw JSON): the range profiler's passes, not first launches loading modules.
    path = trace_path("a100_cupti_counters.json.gz")
    if path is None:
        pytest.skip("a100_cupti_counters.json.gz is not in tests/data or ../shared/traces")
    found = loaded(path).findings()
    assert found[0].rule == "timed_while_counting" and found[0].share == 1.0
    assert "hardware counts for 16 kernels" in found[0].evidence
    assert "the iteration's 11.8 s and every time in this report are the counting's" \
        in found[0].evidence
    startup = next(f for f in found if f.rule == "startup_in_window")
    assert "cudaLaunchKernel" not in startup.rows
    assert startup.evidence.startswith("set-up calls take 2.97 s per iteration")
    # Warm-up ranges are named with their calls, not a time: their total counts the one
    # nested in another of its name twice (25.5 s in a 12.8 s parent on a100_alexnet).
    assert startup.evidence.endswith(
        "the window holds warm-up ranges: [param|pytorch.model.alex_net|0|0|0|warmup|forward] "
        "(×2)")


def test_counting_in_a_run_of_its_own_leaves_the_times_alone():
    # --counters counts in a run that is never timed: a live result with counters is timed
    # as usual, and its slow launches are first launches.
    launches = OpRow("cudaLaunchKernel", 10, 3000.0, 3000.0)
    live = dataclasses.replace(gpu([MM, launches], iters=1, idle=4000.0, wall=5000.0),
                               counters=[CounterRow("k", 10)])
    assert not live.timed_while_counting
    assert timed_while_counting(live) is None
    assert "cudaLaunchKernel" in startup_in_window(live).rows
    trace = dataclasses.replace(live, source="trace")
    assert trace.timed_while_counting
    assert timed_while_counting(trace) is not None
    assert startup_in_window(trace) is None  # (the launches were all of it)


def test_no_finding_blames_startup_on_an_op():
    for name in ("a100_alexnet.json.gz", "mi250_rocm.json.gz", "a100_cupti_counters.json.gz"):
        path = trace_path(name)
        if path is None:
            continue
        rules = {f.rule for f in loaded(path).findings()}
        assert not rules & {"dominant_op", "gpu_idle", "launch_bound"}, name


# --- hand-built profiles ---------------------------------------------------------------


def gpu(rows=(), *, idle=800.0, wall=1000.0, communication=0.0, overlap=None, iters=10,
        kernels=(), ranges=(), timings=None, warmup=3, why=None):
    """A CUDA profile whose iteration is ``wall`` µs, ``idle`` of it with no GPU work, for
    the reasons ``why`` (the gpu idle view's rows; by default all of it Python between
    ops)."""
    parts = Breakdown(device="cuda", wall=wall, compute=wall - idle - communication,
                      communication=communication, idle=idle, overlap=overlap)
    if why is None:
        why = [GpuIdleRow("launch gap", "Python between ops", idle, idle / wall)]
    return ProfileResult(name="g", iters=iters, warmup=warmup, device="cuda", rows=list(rows),
                         timings=timings or [wall / 1e6] * iters, sort="self_device",
                         kernels=list(kernels), ranges=list(ranges), breakdown=parts,
                         gpu_idle=list(why))


MM = OpRow("aten::mm", 10, 300.0, 300.0, 2000.0, 2000.0)  # 30 µs of CPU per iteration


def first(result):
    return result.findings()[0]


# --- the GPU idles ---------------------------------------------------------------------


# The finding quotes the gpu idle view's causes (views/gpu_idle.py), a launch gap told
# apart by whether an op ran: the hand-built profiles give its rows.


def test_gpu_idle_names_python_between_ops():
    f = gpu_idle(gpu([MM]))
    assert f is not None and f.share == pytest.approx(0.8)
    assert f.title == "The GPU is idle 80% of the iteration (CPU-bound: Python between ops)"
    assert f.evidence == ("no GPU work runs for 800 µs per iteration (mean); by cause: "
                          "Python between ops 800 µs")
    assert "py-spy" in f.suggestion
    assert f.rows == ()  # no op row owns the time between ops


def test_gpu_idle_names_work_inside_ops_and_prices_every_op():
    rows = [MM, OpRow("aten::_foreach_mul_", 10, 8000.0, 8000.0, 10.0, 10.0),
            OpRow("aten::item", 10, 100.0, 100.0), OpRow("cudaLaunchKernel", 20, 200.0, 200.0)]
    why = [GpuIdleRow("launch gap", "aten::_foreach_mul_", 600.0, 0.6),
           GpuIdleRow("launch gap", "aten::mm", 150.0, 0.15, location="cell[3]:2",
                      code="y = x @ w"),
           GpuIdleRow("launch gap", "Python between ops", 50.0, 0.05)]
    f = gpu_idle(gpu(rows, why=why))
    assert f.title.endswith("(CPU-bound: CPU work inside ops)")
    assert f.evidence.endswith("; by cause: CPU work inside ops 750 µs (aten::_foreach_mul_ "
                               "600 µs, aten::mm at cell[3]:2 `y = x @ w` 150 µs); Python "
                               "between ops 50.0 µs")
    assert "torch.compile" in f.suggestion
    # Fewer, cheaper ops: every op's CPU time, not the syncs' or the launches'.
    assert set(f.rows) == {"aten::mm", "aten::_foreach_mul_"}


def test_gpu_idle_names_synchronisation():
    rows = [MM, OpRow("aten::item", 50, 100.0, 6100.0)]
    why = [GpuIdleRow("sync", "aten::item", 610.0, 0.61, location="train.py:20",
                      code="loss.item()"),
           GpuIdleRow("launch gap", "Python between ops", 190.0, 0.19)]
    f = gpu_idle(gpu(rows, why=why))
    assert f.title.endswith("(CPU-bound: host-device synchronisation)")
    assert "host-device synchronisation 610 µs (aten::item at train.py:20 `loss.item()` " \
        "610 µs)" in f.evidence
    assert ".item()" in f.suggestion
    assert f.rows == ("aten::item",)


def test_gpu_idle_names_data_loading_and_copies():
    why = [GpuIdleRow("data loading", "enumerate(DataLoader)", 700.0, 0.7,
                      location="train.py:10"),
           GpuIdleRow("host-to-device copy", "Memcpy HtoD (Pageable -> Device)", 100.0, 0.1)]
    f = gpu_idle(gpu([MM], why=why))
    assert f.title.endswith("(CPU-bound: data loading)")
    assert ("by cause: data loading 700 µs (at train.py:10 700 µs); host-to-device copies "
            "100 µs (Memcpy HtoD (Pageable -> Device) 100 µs)") in f.evidence
    assert "num_workers" in f.suggestion
    between = GpuIdleRow("launch gap", "Python between ops", 50.0, 0.05)
    copies = gpu_idle(gpu([MM], why=[why[1], between]))
    assert copies.title.endswith("(CPU-bound: host-to-device copies)")
    assert "pin_memory=True" in copies.suggestion


def test_gpu_idle_puts_the_iterations_edges_last():
    # 500 µs before the first kernel and after the last: the first launch on its way and
    # the last work draining; what the iteration itself waits for comes first.
    why = [GpuIdleRow("iteration edge", "start", 500.0, 0.5),
           GpuIdleRow("launch gap", "Python between ops", 300.0, 0.3)]
    f = gpu_idle(gpu([MM], why=why))
    assert f.title.endswith("(CPU-bound: Python between ops)")
    assert f.evidence.endswith("by cause: Python between ops 300 µs; the iteration's start "
                               "or end 500 µs (start 500 µs)")
    # Only the edges: they are the cause.
    alone = gpu_idle(gpu([MM], why=[why[0], GpuIdleRow("iteration edge", "end", 300.0, 0.3)]))
    assert alone.title.endswith("(CPU-bound: the iteration's start or end)")
    assert "the timeline" in alone.suggestion


def test_gpu_idle_without_the_view_says_only_how_long():
    f = gpu_idle(gpu([MM], why=[]))
    assert f.title == "The GPU is idle 80% of the iteration (CPU-bound)"
    assert f.evidence == "no GPU work runs for 800 µs per iteration (mean)"


def test_gpu_idle_silent_when_busy_on_the_cpu_or_without_a_breakdown():
    assert gpu_idle(gpu([MM], idle=400.0)) is None
    assert gpu_idle(cpu_result(breakdown=Breakdown(device="cpu", wall=1000.0,
                                                            idle=900.0))) is None
    assert gpu_idle(cpu_result()) is None


# --- on the CPU, Python between ops ---------------------------------------------------

#: A CPU iteration of 1 ms in which no op runs for 700 µs.
CPU_PARTS = Breakdown(device="cpu", wall=1000.0, compute=300.0, idle=700.0)


def test_python_between_ops_leads_on_the_cpu_and_names_the_lines():
    lines = [PythonLineRow("cell[4]:2", "<module>", "time.sleep(0.0005)", 500.0, 0.5),
             PythonLineRow("/u/train.py:7", "log", "print(loss)", 150.0, 0.15)]
    result = cpu_result(breakdown=CPU_PARTS, python_lines=lines)
    f = python_between_ops(result)
    assert f.title == "Python between ops takes 70% of the iteration"
    assert f.evidence == ("no op runs for 700 µs of the mean 1.00 ms iteration (most at "
                          "cell[4]:2 `time.sleep(0.0005)` 500 µs, /u/train.py:7 `print(loss)` "
                          "150 µs)")
    # Only the CPU runs the iteration: taking the time out saves at most all of it.
    assert f.saving == "saves at most 700 µs of 1.00 ms (70%)"
    assert "the python view lists your lines" in f.suggestion
    # aten::addmm holds most of the ops' self time, but the 70% outside them comes first.
    assert [x.rule for x in findings.find(result)] == ["python_between_ops", "dominant_op"]


def test_python_between_ops_quotes_the_views_top_lines_data_loading_included():
    """A DataLoader loop: the line waiting for the loader holds most of the time outside
    ops; the finding quotes the python view's top lines in its order, that one first."""
    lines = [PythonLineRow("cell[2]:9", "<module>", "acc.update(out, y)", 142.0, 0.142),
             PythonLineRow("cell[2]:5", "<module>", "for x, y in loader:", 594.0, 0.594,
                           cause=DATA_LOADING),
             PythonLineRow("cell[2]:8", "<module>", "opt.step()", 22.0, 0.022),
             PythonLineRow("cell[2]:4", "<module>", "model.train()", 2.0, 0.002)]
    parts = Breakdown(device="cpu", wall=1000.0, compute=240.0, idle=760.0)
    f = python_between_ops(cpu_result(breakdown=parts, python_lines=lines))
    assert f.evidence == ("no op runs for 760 µs of the mean 1.00 ms iteration (most at "
                          "cell[2]:5 `for x, y in loader:` 594 µs (data loading), "
                          "cell[2]:9 `acc.update(out, y)` 142 µs, cell[2]:8 `opt.step()` "
                          "22.0 µs)")
    assert f.suggestion.startswith("load the data in worker processes (DataLoader(")
    # Without the loader on top, the advice is the time-between-ops one alone.
    f = python_between_ops(cpu_result(breakdown=parts, python_lines=lines[:1]))
    assert f.suggestion.startswith("find the Python between ops")


def test_python_between_ops_without_the_view_says_how_to_name_the_lines():
    f = python_between_ops(cpu_result(breakdown=CPU_PARTS))
    assert "(Python between ops, waits)" in f.evidence
    assert "--python names your lines" in f.suggestion


def test_python_between_ops_silent_below_its_share_on_a_gpu_or_without_a_breakdown():
    below = Breakdown(device="cpu", wall=1000.0, compute=1000.0 * (1 - PYTHON_SHARE),
                      idle=1000.0 * PYTHON_SHARE)
    assert python_between_ops(cpu_result(breakdown=below)) is None
    assert python_between_ops(gpu([MM], idle=900.0)) is None
    assert python_between_ops(cpu_result()) is None


def test_a_cell_that_mostly_sleeps_leads_with_its_sleep_line():
    import time

    a = torch.randn(64, 64)

    def step() -> None:
        torch.mm(a, a)
        time.sleep(0.1)

    # (100 ms: far above the matmul, even where a loaded machine stalls it for 20 ms)
    result = kernelmagic.profile(step, iters=5, warmup=1, python=True)
    rules = [f.rule for f in result.findings()]
    # Ahead of the matmul that holds the ops' self time (a busy machine, share 1 whatever
    # its size, may come first: the by-hand test above checks the whole order).
    assert "python_between_ops" in rules, (rules, result.breakdown)
    if "dominant_op" in rules:
        assert rules.index("python_between_ops") < rules.index("dominant_op"), rules
    (f,) = [f for f in result.findings() if f.rule == "python_between_ops"]
    assert "`time.sleep(0.1)`" in f.evidence, (f.evidence, result.python_lines)


def test_gpu_idle_leaves_set_up_to_startup():
    # 600 of the 800 idle µs are CUDA start-up: 20% idle left, under GPU_IDLE_SHARE.
    rows = [MM, OpRow("cudaDeviceGetStreamPriorityRange", 1, 6000.0, 6000.0)]
    result = gpu(rows)
    assert gpu_idle(result) is None
    assert launch_bound(result) is None
    assert first(result).rule == "startup_in_window"


# --- set-up inside the window ----------------------------------------------------------


def test_startup_on_set_up_calls():
    rows = [MM, OpRow("cudaGetDeviceCount", 1, 4000.0, 4000.0),
            OpRow("cudaMalloc", 4, 1000.0, 1000.0)]
    f = startup_in_window(gpu(rows, iters=1, idle=900.0, wall=10000.0))
    assert f is not None and f.share == pytest.approx(0.5)
    assert f.evidence.startswith(
        "set-up calls take 5.00 ms per iteration (mean; 50% of the iteration): "
        "cudaGetDeviceCount 4.00 ms "
        "(×1: the first runtime call creates the context), cudaMalloc 1.00 ms (×4: the caching "
        "allocator growing)")
    assert f.title == "CUDA start-up or first-call set-up inside the profiled window"
    assert f.suggestion.startswith("profile steady state: more warm-up runs (--warmup); ")


def test_startup_on_first_launches_not_on_a_full_launch_queue():
    launches = OpRow("cudaLaunchKernel", 10, 3000.0, 3000.0)  # 300 µs a launch
    f = startup_in_window(gpu([MM, launches], iters=1, idle=4000.0, wall=5000.0))
    assert f is not None
    assert ("cudaLaunchKernel 3.00 ms (×10, 300 µs a call on average where a launch takes µs"
            in f.evidence)
    # The GPU was busy all along: the launches waited for room in the queue.
    assert startup_in_window(gpu([MM, launches], iters=1, idle=100.0,
                                          wall=5000.0)) is None


def test_startup_on_a_slow_first_step():
    result = gpu([MM], iters=4, warmup=0, idle=100.0, wall=3250.0,
                 timings=[0.010, 0.001, 0.001, 0.001])
    f = startup_in_window(result)
    assert f is not None and f.share == pytest.approx(9000 / 4 / 3250)
    assert f.evidence == "the first iteration took 10.0 ms against 1.00 ms for the others " \
                         "(median)"
    # After a warm-up run, or slow by less than SLOW_FIRST_ITER_RATIO, or with two steps.
    assert startup_in_window(gpu([MM], iters=4, warmup=1, idle=100.0, wall=3250.0,
                                          timings=result.timings)) is None
    assert startup_in_window(gpu([MM], iters=3, warmup=0, idle=100.0,
                                          timings=[0.0019, 0.001, 0.001])) is None
    assert startup_in_window(gpu([MM], iters=2, warmup=0, idle=100.0,
                                          timings=[0.010, 0.001])) is None


def test_startup_silent_on_small_set_up_and_on_copies_and_syncs():
    rows = [MM, OpRow("cudaMalloc", 3, 1500.0, 1500.0)]  # 150 of 1000 µs: 15%
    assert startup_in_window(gpu(rows)) is None
    slow = [MM, OpRow("cudaMemcpyAsync", 10, 50000.0, 50000.0),  # 5 ms each: pageable copies
            OpRow("cudaStreamSynchronize", 10, 50000.0, 50000.0)]
    assert startup_in_window(gpu(slow)) is None


def test_dominant_op_does_not_point_at_startup():
    rows = [OpRow("cudaDeviceGetStreamPriorityRange", 1, 9000.0, 9000.0),
            OpRow("aten::mm", 10, 1000.0, 1000.0)]
    result = cpu_result(rows=rows, iters=1, timings=[0.0101])
    assert [f.rule for f in result.findings()] == ["startup_in_window"]


def test_dominant_op_says_the_idle_gpu_comes_first():
    f = dominant_op(gpu([MM, OpRow("aten::add", 10, 100.0, 100.0, 500.0, 500.0)]))
    assert f is not None and f.evidence.startswith("aten::mm takes 80% of self time")
    assert f.suggestion.startswith("first keep the GPU busy (it idles 80% of the iteration")
    assert "torch.autocast" in f.suggestion


# --- training-mode layers with no backward ---------------------------------------------


def dropout_cell(*extra, bernoulli=6000.0, scaling=1500.0):
    rows = [OpRow("aten::dropout", 20, 50.0, bernoulli + scaling),
            OpRow("aten::bernoulli_", 20, bernoulli, bernoulli),
            OpRow("aten::mul", 20, 1000.0, 1000.0), OpRow("aten::addmm", 10, 2000.0, 2000.0),
            *extra]
    return cpu_result(rows=rows, timings=[0.001] * 10)


def test_train_mode_fires_on_dropout_without_backward():
    result = dropout_cell()
    f = train_mode_under_no_grad(result)
    assert f is not None and f.share == pytest.approx(0.75)
    assert f.evidence.startswith("dropout takes 750 µs per iteration (75% of the iteration; "
                                 "random masks: aten::bernoulli_ ×2)")
    assert "model.eval()" in f.suggestion
    # It leads, and dominant_op does not call bernoulli_ (67% of self time) the op to optimise.
    assert first(result).rule == "train_mode_under_no_grad"
    assert "dominant_op" not in {g.rule for g in result.findings()}


def test_train_mode_names_batch_norm_on_the_cpu():
    f = train_mode_under_no_grad(
        dropout_cell(OpRow("aten::native_batch_norm", 10, 900.0, 900.0)))
    assert "batch norm (aten::native_batch_norm, 90.0 µs) computes batch statistics" \
        in f.evidence


def test_train_mode_silent_with_backward_in_eval_or_when_small():
    backward = OpRow("autograd::engine::evaluate_function: AddmmBackward0", 10, 50.0, 900.0)
    assert train_mode_under_no_grad(dropout_cell(backward)) is None
    eval_rows = [OpRow("aten::dropout", 20, 5.0, 5.0), OpRow("aten::addmm", 10, 9000.0, 9000.0)]
    assert train_mode_under_no_grad(cpu_result(rows=eval_rows)) is None
    small = dropout_cell(bernoulli=300.0, scaling=600.0)  # 90 of 1000 µs: under 10%
    assert train_mode_under_no_grad(small) is None


def test_train_mode_on_cuda_batch_norm_kernels():
    bn = "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1, true>"
    rows = [OpRow("aten::cudnn_batch_norm", 10, 100.0, 200.0, 3000.0, 3000.0), MM]
    result = gpu(rows, idle=100.0, kernels=[KernelRow(bn, 10, 3000.0, "aten::cudnn_batch_norm")])
    f = train_mode_under_no_grad(result)
    assert f is not None and f.share == pytest.approx(0.3)
    assert "batch norm computes batch statistics (void cudnn::bn_fw_tr_1C11" in f.evidence
    inference = gpu(rows, idle=100.0, kernels=[KernelRow(bn.replace("_tr_", "_inf_"), 10,
                                                         3000.0, "aten::cudnn_batch_norm")])
    assert train_mode_under_no_grad(inference) is None


def test_train_mode_on_cuda_counts_dropout_launches_too():
    # A launch-bound GPU: dropout's kernels take 10 µs an iteration, its CPU 200 µs.
    rows = [OpRow("aten::dropout", 10, 20.0, 2000.0, 0.0, 100.0),
            OpRow("aten::native_dropout", 10, 1500.0, 1980.0, 100.0, 100.0), MM]
    f = train_mode_under_no_grad(gpu(rows))
    assert f is not None and f.share == pytest.approx(0.2)
    assert "random masks: aten::native_dropout ×1" in f.evidence


def test_dropout_under_no_grad_in_a_real_encoder_layer():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4)
    x = torch.randn(32, 16, 64)

    def run():
        with torch.no_grad():
            layer(x)

    training = kernelmagic.profile(run, iters=3, warmup=1)
    # A loaded test machine may put busy_machine first: the layers' headline comes next.
    lead = next(f for f in training.findings() if f.rule != "busy_machine")
    assert lead.rule == "train_mode_under_no_grad", [str(f) for f in training.findings()]
    assert "aten::bernoulli_" in lead.evidence and ".eval()" in lead.suggestion
    layer.eval()
    inference = kernelmagic.profile(run, iters=3, warmup=1)
    assert "train_mode_under_no_grad" not in {f.rule for f in inference.findings()}


# --- the biggest problem first ---------------------------------------------------------


def test_findings_are_ordered_by_the_share_they_explain():
    # Idle 60%, communication 30% of the iteration with none of it hidden: idle first.
    result = gpu([MM], idle=600.0, communication=300.0, overlap=0.0)
    assert [f.rule for f in result.findings()][:2] == ["gpu_idle", "communication_bound"]
    # Communication 70%, idle 25%: communication alone.
    result = gpu([MM], idle=250.0, communication=700.0, overlap=0.0)
    assert first(result).rule == "communication_bound"
    assert "gpu_idle" not in {f.rule for f in result.findings()}


def test_equal_shares_keep_the_order_of_the_rules():
    # Neither explains any of the iteration: slow_warmup before noisy, as in RULES.
    result = cpu_result(rows=[OpRow(f"aten::op{i}", 10, 100.0, 100.0) for i in range(4)],
                        timings=[0.001, 0.002, 0.001, 0.003, 0.0015], warmup_timings=[0.05])
    assert [f.rule for f in result.findings()] == ["slow_warmup", "noisy"]
    assert [f.share for f in result.findings()] == [0.0, 0.0]


def test_rules_lists_the_headline_rules():
    names = [rule.__name__ for rule in findings.RULES]
    assert {"startup_in_window", "gpu_idle", "communication_bound",
            "train_mode_under_no_grad"} <= set(names)
    assert "unexplained_by_roofline" in [r.__name__ for r in roofline_findings.RULES]


# --- ops the roofline cannot explain ---------------------------------------------------


def roof(key, time, flops=0.0, moved=1e6, reach=0.02, bound="memory"):
    return RooflineRow(key=key, count=10, flops=flops, bytes=moved, intensity=0.0,
                       flops_per_s=0.0, bytes_per_s=0.0, bound=bound, time=time,
                       dtype="float32", roof_share=reach)


def with_roofline(rows):
    peaks = {"flops_per_s": {"float32": 100e9}, "bytes_per_s": 10e9, "source": "test"}
    return ProfileResult(name="r", iters=10, warmup=1, device="cpu", rows=[],
                         timings=[0.001] * 10, roofline=rows, roofline_peaks=peaks,
                         views=["roofline"])


def test_random_sorting_and_indexing_are_not_memory_bound():
    rows = [roof("aten::bernoulli_", 5000.0, bound="unexplained"),
            roof("aten::sort", 2000.0, bound="unexplained"),
            roof("aten::index_select", 1000.0, bound="unexplained"),
            roof("aten::add", 2000.0, 1e6, reach=0.5)]
    result = with_roofline(rows)
    assert roofline_findings.memory_bound(result) is None  # 20%, not 100%
    f = roofline_findings.unexplained_by_roofline(result)
    assert f is not None and f.share == pytest.approx(0.8)
    assert f.evidence.startswith(
        "80% of op time is in ops with no FLOPs counted that reach under 25% of the memory "
        "roof: aten::bernoulli_ 50% (random numbers, 2.0% of the memory roof), aten::sort 20% "
        "(sorting, 2.0% of the memory roof), aten::index_select 10% (indexing")
    assert "by random numbers and sorting and indexing" in f.evidence
    assert f.suggestion.startswith("for dropout at inference, model.eval() removes it")
    assert "topk" in f.suggestion and "torch.where" in f.suggestion
    assert first(result).rule == "unexplained_by_roofline"


def test_unexplained_needs_no_flops_a_low_reach_and_a_known_name():
    kind = roofline_bounds.unexplained_kind  # (key, FLOPs per call, share of the roof reached)
    assert [kind(k, 0.0, 0.02) for k in ("aten::bernoulli_", "aten::sort",
                                         "aten::index_select", "aten::add")] == \
        ["random numbers", "sorting", "indexing", None]
    assert kind("aten::normal_", 1e6, 0.02) is None
    assert kind("aten::bernoulli_", 0.0, 0.6) is None
    assert kind("aten::sort", 0.0, 0.001) is None  # under 1% of both roofs: overhead
    assert kind("aten::copy_", 0.0, 0.02) is None
    assert kind("aten::_unique2", 0.0, 0.02) == "sorting"
    assert kind("aten::randperm", 0.0, 0.02) == "random numbers"
    assert kind("aten::nonzero", 0.0, 0.02) == "indexing"
    # The finding reads the bound the roofline gave each row; a memory-bound row stays one.
    held = with_roofline([roof("aten::gather", 900.0), roof("aten::add", 100.0, 1e6, reach=0.5)])
    assert roofline_findings.unexplained_by_roofline(held) is None
    assert roofline_findings.memory_bound(held).share == pytest.approx(0.1)
    small = with_roofline([roof("aten::bernoulli_", 100.0, bound="unexplained"),
                           roof("aten::add", 900.0, 1e6, reach=0.5)])
    assert roofline_findings.unexplained_by_roofline(small) is None  # 10% of op time


# --- findings consistent with the dependency model (#43) ---------------------------------


ALL_TRACES = sorted({p.relative_to(DATA).as_posix(): p for p in DATA.rglob("*.json.gz")}.items())
ALL_TRACES += [(f"shared/{p.relative_to(SHARED).as_posix()}", p)
               for p in sorted(SHARED.rglob("*.json.gz")) if SHARED.is_dir()
               and not (DATA / p.relative_to(SHARED)).exists()]


@pytest.mark.parametrize(("name", "path"), ALL_TRACES, ids=[n for n, _ in ALL_TRACES])
def test_the_first_change_suggested_saves_something(name, path):
    """Every real trace: a finding that suggests a change saves at least 1% of the
    iteration by the model; one that saves less never ranks above one that saves more and
    never says "saves at most", but what bounds the iteration instead."""
    found = loaded(path).findings()
    suggesting = [f for f in found if f.suggests_change]
    if suggesting:
        assert suggesting[0].saves_us > 0, str(suggesting[0])
    assert all(f.saves_share >= NEGLIGIBLE_SAVING for f in suggesting)
    savings = [f.saves_us for f in suggesting]
    assert savings == sorted(savings, reverse=True)
    for i, f in enumerate(found):
        assert "saves at most 0 µs" not in str(f)
        if f.saves_us is not None and f.saves_share < NEGLIGIBLE_SAVING:
            assert f.bound and " while " in f.bound and "Try:" not in str(f), str(f)
            assert "saves at most" not in str(f)
            assert not [g for g in found[i + 1:] if g.saves_us is not None
                        and g.saves_us > f.saves_us], str(f)


def test_a_change_the_model_prices_at_nothing_says_what_bounds_the_iteration():
    # h200_train_step runs its matmuls in float32, but its CPU's ops hold the iteration:
    # the finding says so, and suggests no change.
    found = loaded(DATA / "h200_train_step.json.gz").findings()
    fp32 = next(f for f in found if f.rule == "fp32_matmul")
    assert fp32.bound.startswith("making the matmuls faster saves nothing while the CPU's "
                                 "ops are the bottleneck (CPU ops: ")
    assert str(fp32).endswith(f"; {fp32.bound}.")
    assert fp32.bound.endswith("% of the critical path)")
    assert fp32.saving == "" and not fp32.suggests_change
    # Launch-bound says only that launches bound the iteration: when the model says they
    # save under 1%, no finding; any other rule says what bounds the iteration instead.
    from kernelmagic.findings import weighed
    from kernelmagic.findings.base import Finding

    result = loaded(DATA / "h200_train_step.json.gz")
    claim = dict(evidence="", suggestion="", rows=("cudaLaunchKernel",), saves_us=1.0,
                 iteration_us=1000.0)
    assert weighed(result, Finding("launch_bound", "launch-bound", **claim)) is None
    other = weighed(result, Finding("sync_points", "syncs", change="removing these", **claim))
    assert other is not None and other.bound.startswith("removing these saves under 1.0%")


def model_result(path_rows: list[CriticalPathRow]) -> ProfileResult:
    """A CUDA profile with only a critical path: the findings' prices are given."""
    return ProfileResult(name="m", iters=10, warmup=1, device="cuda", rows=[MM],
                         timings=[0.001] * 10, critical_path=path_rows)


@pytest.mark.parametrize(("category", "words"), [
    ("GPU work", "the GPU is the bottleneck"),
    ("CPU ops", "the CPU's ops are the bottleneck"),
    ("launches", "launching kernels on the CPU is the bottleneck"),
    ("waiting on syncs", "waiting on host-device syncs is the bottleneck"),
    ("CPU outside ops", "the CPU outside any op (Python between ops) is the bottleneck"),
])
def test_what_bounds_the_iteration_is_the_critical_paths_largest_category(category, words):
    # 970 of the path's 1000 µs in ``category``, 30 µs in the op the finding names.
    result = model_result([CriticalPathRow(category, "k", time=600.0),
                           CriticalPathRow(category, "", time=370.0),
                           CriticalPathRow("idle", "aten::mm", time=30.0)])
    said = findings.weighed(result, Finding(
        "dominant_op", "One op dominates", "aten::mm takes 90%", "optimise it", 0.9,
        rows=("aten::mm",), saves_us=0.0, iteration_us=1000.0))
    assert said.bound == f"making aten::mm faster saves nothing while {words} " \
                         f"({category}: 97% of the critical path)"
    under = findings.weighed(result, dataclasses.replace(said, bound="", saves_us=9.0,
                                                         change="removing these syncs"))
    assert under.bound.startswith("removing these syncs saves under 1.0% of the iteration "
                                  "(9.00 µs of 1.00 ms) while ")
    kept = findings.weighed(result, dataclasses.replace(said, bound="", saves_us=10.0))
    assert kept.bound == "" and kept.saving == "saves at most 10.0 µs of 1.00 ms (1.0%)"


def test_a_change_that_saves_little_never_ranks_above_one_that_saves_more(monkeypatch):
    result = model_result([CriticalPathRow("GPU work", "k", time=1000.0)])

    def priced(rule, share, saves):
        return lambda _: Finding(rule, rule, "evidence", "do it", share,
                                          saves_us=saves, iteration_us=1000.0)

    # Explains 90% but saves 0; explains 5% and saves 50 µs; explains 2%, no prediction.
    monkeypatch.setattr(findings, "RULES", [priced("big", 0.9, 0.0), priced("small", 0.05, 50.0),
                                            priced("unpriced", 0.02, None)])
    found = result.findings()
    assert [f.rule for f in found] == ["small", "unpriced", "big"]
    assert str(found[0]) == "small: evidence; saves at most 50.0 µs of 1.00 ms (5.0%). Try: do it"
    assert str(found[2]) == ("big: evidence; the change it suggests saves nothing while the GPU "
                             "is the bottleneck (GPU work: 100% of the critical path).")
    html = findings_html(result)
    assert "the change it suggests saves nothing" in html and html.count("<i>Try:</i>") == 2


def test_one_op_dominating_the_device_is_priced_on_the_device():
    # a100_multi_stream_sync: aten::mm is all of the device's self time, and the advice
    # (lower precision, TF32) makes its kernels faster: 7 µs of the iteration, under 1%,
    # as the fp32 matmul finding prices the same change. Priced on both sides (its CPU
    # time too) it said "saves at most 225 µs (1.1%)" and suggested the change.
    found = loaded(DATA / "a100_multi_stream_sync.json.gz").findings()
    dominant = next(f for f in found if f.rule == "dominant_op")
    fp32 = next(f for f in found if f.rule == "fp32_matmul")
    assert dominant.side == "device"
    assert dominant.saves_us == pytest.approx(fp32.saves_us) == pytest.approx(7.0)
    assert not dominant.suggests_change and "saves under 1.0%" in dominant.bound


def test_the_gpu_line_says_why_the_rows_exceed_the_busy_time():
    # v100_gpu_annotations runs one stream, 65-89 ms behind the CPU: the rows' work is
    # more than the busy time because work launched in an iteration finished after it
    # (before, the line said "work ran on several streams at once"). a100_nccl_rank's
    # compute and NCCL kernels run at once on two streams.
    from kernelmagic.render.views import view_notes

    def gpu_line(name):
        result = loaded(DATA / name)
        line = next(n for n in view_notes(result) if n.startswith("GPU per iteration"))
        return result, line

    v100, line = gpu_line("v100_gpu_annotations.json.gz")
    parts = v100.breakdown
    assert parts.work == pytest.approx(parts.wall - parts.idle, rel=1e-3)  # one stream
    assert "ran outside the iterations" in line and "several streams" not in line
    nccl, line = gpu_line("a100_nccl_rank.json.gz")
    assert nccl.breakdown.work > (nccl.breakdown.wall - nccl.breakdown.idle) * 1.01
    assert "of work ran on several streams at once" in line


def test_communication_the_model_cannot_see_is_not_priced_at_nothing():
    # cpu_only: gloo's all-reduces run on their own threads, and the step's thread records
    # no wait on them: the model sees no edge from them to the iteration, so removing
    # them "saves nothing" there, its blind spot. The finding is left unpriced (it said
    # "hiding or shrinking the communication saves nothing while the CPU outside any op
    # is the bottleneck"), and says the rows' time is theirs summed over threads.
    from kernelmagic.views.critical_path import priceable_rows

    result = loaded(DATA / "cpu_only.json.gz")
    assert priceable_rows(result.dependency_model).tolist() == [False]  # gloo:all_reduce
    comm = result.findings()[0]
    assert comm.rule == "communication_bound" and comm.saves_us is None and not comm.bound
    assert "saves" not in str(comm) and str(comm).split(". Try: ")[1].startswith("overlap")
    assert "(a row's own time: its threads' or streams' summed)" in comm.evidence
    # The row panel says no saving for it either (it said "saves at most 0 µs").
    panel = result.explain("[range] gloo:all_reduce")
    assert panel.max_gain_us is None and panel.what_ifs == []
    assert "saves" not in panel.text()
    # Nor does the op table ("—", not "0 µs"), the chart or the frame (NaN, not 0.0).
    from kernelmagic.render.chart import chart_texts
    from kernelmagic.render.table import op_table

    row = result.rows[0]
    assert result.unseen_keys == {"gloo:all_reduce"} and result.gain_shown(row) is None
    column = next(c for c in op_table(result).columns if c.id == "max_gain")
    assert column.show(row) == "—" and column.value(row) == -1.0  # (sorted last)
    # The text and HTML tables say what the "—" means, under the table.
    from kernelmagic.render.html import static_table_html
    from kernelmagic.render.text import text_table

    legend = ("— in max gain/iter: the model cannot see the row's removal (no recorded wait "
              "ties its threads to the iteration's)")
    assert legend in text_table(result).splitlines()
    assert html.escape(legend) in static_table_html(op_table(result))
    assert chart_texts(result, by="max_gain")[1] == [
        "[range] gloo:all_reduce · — (the model cannot see its removal)"]
    pytest.importorskip("pandas")
    gains = result.to_pandas("ops")["max_gain_per_iter_us"]
    assert gains.dtype == "float64" and math.isnan(gains.iloc[0])  # (NaN, not None)
    # mtia_inference: two unseen ranges rank below every gain in the chart, 0 µs included.
    from kernelmagic.render.chart import top_rows

    mtia = loaded(DATA / "mtia_inference.json.gz")
    ranked = [mtia.gain_shown(r) for r in top_rows(mtia, "max_gain", 1000)]
    assert ranked[-2:] == [None, None] and None not in ranked[:-2] and ranked[-3] == 0.0
    # The table (text, HTML, widget) puts them last whichever way it is sorted.
    table = op_table(mtia)
    for descending in (True, False):
        shown = [table.column("max_gain").show(r)
                 for r in table.sorted_rows("max_gain", descending)]
        assert shown[-2:] == ["—", "—"] and "—" not in shown[:-2]
    # A row the model can see keeps its figure, the same in the table and the frame.
    rank0 = loaded(DATA / "rank0_steps.json.gz")
    seen = max(rank0.rows, key=lambda r: r.max_gain_us)
    column = next(c for c in op_table(rank0).columns if c.id == "max_gain")
    assert rank0.gain_shown(seen) == seen.gain_per_iteration(rank0.iters) > 0
    assert column.value(seen) == rank0.gain_shown(seen)
    assert "— in " not in text_table(rank0, limit=None)  # (no "—": no legend)
    frame = rank0.to_pandas("ops").set_index("key")
    assert frame.loc[seen.key, "max_gain_per_iter_us"].max() == pytest.approx(
        rank0.gain_shown(seen))
    # rank0_steps: all of its communication (the summary's 32%), then the part compute
    # does not hide (27%), each said as what it is.
    rank0 = loaded(DATA / "rank0_steps.json.gz")
    comm = next(f for f in rank0.findings() if f.rule == "communication_bound")
    assert comm.evidence.startswith("communication takes 198 ms per iteration (mean; 32% of "
                                    "the iteration) on the GPU, 15% of it overlapped by "
                                    "compute: 168 ms (27%) is not")
    assert "communication 32%" in rank0.summary()


def test_launch_bound_counts_kernels_not_copies():
    # h200_launch_and_sync launches 152 kernels and 50 DtoH copies per iteration; the
    # kernels' median is 0.96 µs in the raw JSON (with the copies: 1.41 µs, which the
    # finding said of "202 kernels").
    found = loaded(DATA / "h200_launch_and_sync.json.gz").findings()
    launch = next(f for f in found if f.rule == "launch_bound")
    assert "launches 152 kernels (and 50 copies) with a median of 968 ns each" in launch.evidence
