"""The synthetic rank-trace generator (benchmarks/rank_traces.py, issue #34): deterministic,
sized as asked, and its slow rank and collectives come out of kernelmagic as built."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import kernelmagic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import rank_traces as rt

KB = 1 << 10


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    job = rt.Job(world_size=2, seed=3, slow_rank=1, slow_by=0.2)
    a = rt.write_job(tmp_path / "a", job, 64 * KB)
    b = rt.write_job(tmp_path / "b", rt.Job(world_size=2, seed=3, slow_rank=1, slow_by=0.2),
                     64 * KB)
    c = rt.write_job(tmp_path / "c", rt.Job(world_size=2, seed=4, slow_rank=1, slow_by=0.2),
                     64 * KB)
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    assert a[0].read_bytes() != c[0].read_bytes()


@pytest.mark.parametrize("size", [64 * KB, 1 << 20])
def test_file_reaches_the_size_asked_and_not_much_more(tmp_path, size):
    (path,) = rt.write_job(tmp_path, rt.Job(world_size=1), size)
    # one step of 24 kernels and 2 collectives is ~15 kB of JSON
    assert size <= path.stat().st_size < size + 20 * KB


def test_trace_structure(tmp_path):
    (path,) = rt.write_job(tmp_path, rt.Job(world_size=1, kernels=4, collectives=2), 1)
    data = json.loads(path.read_text())
    assert data["distributedInfo"] == {"backend": "nccl", "rank": 0, "world_size": 1}
    events = data["traceEvents"]
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
    assert [e["name"] for e in steps] == ["ProfilerStep#0", "ProfilerStep#1"]
    kernels = [e for e in events if e["cat"] == "kernel"]
    nccl = [e for e in kernels if e["name"].startswith("ncclKernel")]
    # per step: 4 compute kernels on stream 7, 2 NCCL kernels on stream 20
    assert len(kernels) == 2 * 6 and len(nccl) == 2 * 2
    assert {e["args"]["stream"] for e in nccl} == {rt.COMM_STREAM}
    assert {e["args"]["stream"] for e in kernels if e not in nccl} == {rt.COMPUTE_STREAM}
    launches = {e["args"]["correlation"] for e in events if e["name"] == "cudaLaunchKernel"}
    assert launches == {e["args"]["correlation"] for e in kernels}
    assert sum(e["name"] == "nccl:all_reduce" for e in events) == 4


def test_slow_rank_computes_longer_and_the_others_wait(tmp_path):
    job = rt.Job(world_size=4, seed=1, slow_rank=2, slow_by=0.5, jitter=0.0)
    rt.write_job(tmp_path, job, 64 * KB)
    run = kernelmagic.load(tmp_path)
    s = run.summaries
    assert sorted(s) == [0, 1, 2, 3] and run.world_size == 4
    # jitter 0: ranks 0, 1, 3 identical; rank 2's compute kernels 1.5x as long
    assert s[2].compute_us == pytest.approx(1.5 * s[0].compute_us, rel=1e-4)
    assert s[0].compute_us == pytest.approx(s[3].compute_us, rel=1e-6)
    # a collective ends together on every rank, so steps are equal and the fast ranks'
    # communication holds the slow rank's extra compute (its wait)
    assert s[2].step_median_us == pytest.approx(s[0].step_median_us, rel=1e-4)
    extra = s[2].compute_us - s[0].compute_us
    assert s[0].communication_us - s[2].communication_us == pytest.approx(extra, rel=1e-3)
