"""A busy machine is a finding (#28): other processes' CPU time over the timed loop, read
from the counters before and after it, named first when large; and a best run far below
the median makes the measurement noisy."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from fakes import cpu_result

import kernelmagic
from kernelmagic import findings
from kernelmagic.core.machine import CpuLoad
from kernelmagic.core.rows import OpRow
from kernelmagic.live import cpu_load
from kernelmagic.results.result import ProfileResult


def loaded(**fields):
    load = dict(cores=2, torch_threads=2, other_cores=1.6, own_cores=0.4, load_average=5.3,
                seconds=1.0)
    load.update(fields)
    rows = [OpRow("aten::gelu", 10, 9000.0, 9000.0), OpRow("aten::add", 10, 1000.0, 1000.0)]
    return cpu_result(rows=rows, timings=[0.001] * 10, cpu_load=CpuLoad(**load))


def test_busy_machine_names_the_competition_and_comes_first():
    result = loaded()
    f = findings.busy_machine(result)
    assert f is not None and f.share == 1.0
    assert f.evidence == ("other processes kept 1.6 of the 2 cores busy (80%) while the "
                          "iterations ran, leaving 0.4 free for torch's 2 threads; load "
                          "average 5.3")
    assert f.suggestion == ("profile on a quieter machine (stop the other work), or use fewer "
                            "threads than free cores: torch.set_num_threads(1)")
    # gelu holds 90% of self time, yet the machine comes first.
    assert [g.rule for g in result.findings()] == ["busy_machine", "dominant_op"]


def test_busy_machine_silent_when_the_rest_is_small_or_the_span_short():
    assert findings.busy_machine(loaded(other_cores=0.4)) is None  # under half a core
    # 0.6 of 16 cores (4%), 15.4 free for 4 threads: nothing to name.
    assert findings.busy_machine(loaded(cores=16, torch_threads=4, other_cores=0.6)) is None
    # The same 0.6 cores, but torch runs a thread on each of the 16: crowded.
    assert findings.busy_machine(loaded(cores=16, torch_threads=16, other_cores=0.6))
    assert findings.busy_machine(loaded(seconds=0.05)) is None  # 10 ms ticks: too coarse
    assert findings.busy_machine(cpu_result()) is None  # a trace or an older result


def test_cpu_load_round_trips_through_json():
    result = loaded()
    assert ProfileResult.from_dict(result.to_dict()).cpu_load == result.cpu_load


def test_between_takes_our_own_time_out_of_the_cores_busy_time():
    before = cpu_load.Snapshot(busy_s=100.0, own_s=1.0, wall_s=10.0)
    after = cpu_load.Snapshot(busy_s=103.0, own_s=2.0, wall_s=12.0)
    load = cpu_load.between(before, after, n_cores=2, torch_threads=2)
    # 3 busy core-seconds in 2 s, 1 of them ours: 1.0 core of others, 0.5 of ours.
    assert (load.other_cores, load.own_cores, load.seconds) == (1.0, 0.5, 2.0)
    assert load.other_share == 0.5 and load.free_cores == 1.0


def test_busy_seconds_reads_only_our_cores():
    tick = os.sysconf("SC_CLK_TCK")
    text = ("cpu  900 0 300 5000 10 0 0 0 0 0\n"
            "cpu0 100 5 50 2000 7 1 2 3 0 0\n"
            "cpu1 800 0 250 3000 3 0 0 0 0 0\n")
    # cpu0: user 100 + nice 5 + system 50 + irq 1 + softirq 2 + steal 3 (not idle, iowait)
    assert cpu_load.busy_seconds(text, [0]) == pytest.approx(161 / tick)
    assert cpu_load.busy_seconds(text, [0, 1]) == pytest.approx((161 + 1050) / tick)
    assert cpu_load.busy_seconds(text, [5]) is None


def test_noisy_when_the_best_run_is_far_below_the_median():
    # IQR 10% of the median (steady), but the best run is 40% of it: a quiet moment on a
    # busy machine, so the median is not what the code costs.
    timings = [0.010, 0.010, 0.011, 0.010, 0.009, 0.010, 0.004, 0.010, 0.011, 0.010]
    f = findings.noisy(cpu_result(timings=timings))
    assert f is not None
    assert f.evidence.endswith("; the best run took 4.00 ms, 40% of the median 10.0 ms")
    assert findings.noisy(cpu_result(timings=[0.010] * 9 + [0.007])) is None  # 70%


HOG = "while True:\n    pass\n"


@pytest.mark.skipif(not os.path.exists(cpu_load.PROC_STAT), reason="needs /proc/stat")
def test_a_cpu_hog_started_here_is_named():
    import torch

    cores = len(cpu_load.cores())
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(cores)]
    try:
        time.sleep(0.3)  # the hogs are spinning
        a = torch.randn(256, 256)

        def work():  # 50 ms an iteration at least: the finding needs 0.1 s of timed loop
            start = time.perf_counter()
            while time.perf_counter() - start < 0.05:
                a @ a

        result = kernelmagic.profile(work, iters=5, warmup=1)
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()
    load = result.cpu_load
    threads = torch.get_num_threads()
    assert load.cores == cores and load.torch_threads == threads
    # A fair scheduler gives the hogs at least cores * hogs / (hogs + our threads) cores;
    # other work on the machine only adds to it.
    fair = cores * len(hogs) / (len(hogs) + threads)
    assert load.other_cores >= 0.7 * fair, load
    f = result.findings()[0]
    assert f.rule == "busy_machine", [str(x) for x in result.findings()]
    assert f"kept {load.other_cores:.1f} of the {cores} cores busy" in f.evidence
