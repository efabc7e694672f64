"""Parsing ranks on a real Dask cluster (worker processes) gives the default's result."""

from __future__ import annotations

import pytest
from ci_gate import need_modules

import kernelmagic

need_modules("dask", "distributed", install="pip install 'dask[distributed]'")

from distributed import Client, LocalCluster, get_task_stream  # noqa: E402
from ranks_data import RANKS, spawnable_main  # noqa: E402


def test_dask_cluster_result_equals_the_default():
    default = kernelmagic.load(RANKS)
    with spawnable_main(), LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                        dashboard_address=None) as cluster, \
            Client(cluster) as client:
        workers = set(client.scheduler_info()["workers"])
        with get_task_stream(client) as stream:
            on_dask = kernelmagic.load(RANKS, executor=client.get_executor())
    assert on_dask == default
    assert on_dask.findings() == default.findings()
    ran = [task for task in stream.data if task["key"].startswith("parse_rank")]
    assert len(ran) == 2 and {task["worker"] for task in ran} <= workers


def test_64_synthetic_ranks_same_report_on_the_pool_and_a_cluster(tmp_path):
    import sys
    from pathlib import Path

    from kernelmagic.render.ranks import text_report

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import rank_traces as rt

    job = rt.Job(world_size=64, seed=11, slow_rank=41, slow_by=0.25, jitter=0.0)
    rt.write_job(tmp_path, job, 16 << 10)
    pool = kernelmagic.load(tmp_path)
    with spawnable_main(), LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                        dashboard_address=None) as cluster, \
            Client(cluster) as client:
        on_dask = kernelmagic.load(tmp_path, executor=client.get_executor())
    assert on_dask.summaries == pool.summaries and len(pool.summaries) == 64
    assert text_report(on_dask) == text_report(pool)
    # the known answer: rank 41's compute 1.25x every other rank's, which are all equal
    s = pool.summaries
    assert s[41].compute_us == pytest.approx(1.25 * s[0].compute_us, rel=1e-4)
    assert {round(s[r].compute_us, 3) for r in s if r != 41} == {round(s[0].compute_us, 3)}
    assert on_dask.ranks[41] == pool.ranks[41]  # a full report on demand, either way
