"""Parsing ranks on a real Dask cluster (worker processes) gives the default's result."""

from __future__ import annotations

import pytest
from ci_gate import need_modules

import kernelmagic

need_modules("dask", "distributed", install="pip install 'dask[distributed]'")

from distributed import Client, LocalCluster, get_task_stream  # noqa: E402
from ranks_data import RANKS, spawnable_main  # noqa: E402


@pytest.fixture(scope="module")
def client():
    """A cluster of two worker processes, shared by the tests that leave it whole (each
    cluster's processes cost ~3 s of CPU to start); the test that kills a worker starts
    its own."""
    with spawnable_main(), LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                        dashboard_address=None) as cluster, \
            Client(cluster) as client:
        yield client


def test_dask_cluster_result_equals_the_default(client):
    default = kernelmagic.load(RANKS)
    workers = set(client.scheduler_info()["workers"])
    with get_task_stream(client) as stream:
        on_dask = kernelmagic.load(RANKS, executor=client.get_executor())
    assert on_dask == default
    assert on_dask.findings() == default.findings()
    ran = [task for task in stream.data if task["key"].startswith("parse_rank")]
    assert len(ran) == 2 and {task["worker"] for task in ran} <= workers


def test_64_synthetic_ranks_same_report_on_the_pool_and_a_cluster(tmp_path, client):
    import sys
    from pathlib import Path

    from kernelmagic.render.ranks import text_report

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import rank_traces as rt

    job = rt.Job(world_size=64, seed=11, slow_rank=41, slow_by=0.25, jitter=0.0)
    rt.write_job(tmp_path, job, 16 << 10)
    pool = kernelmagic.load(tmp_path)
    on_dask = kernelmagic.load(tmp_path, executor=client.get_executor())
    assert on_dask.summaries == pool.summaries and len(pool.summaries) == 64
    assert text_report(on_dask) == text_report(pool)
    # the known answer: rank 41's compute 1.25x every other rank's, which are all equal
    s = pool.summaries
    assert s[41].compute_us == pytest.approx(1.25 * s[0].compute_us, rel=1e-4)
    assert {round(s[r].compute_us, 3) for r in s if r != 41} == {round(s[0].compute_us, 3)}
    assert on_dask.ranks[41] == pool.ranks[41]  # a full report on demand, either way
    # every collective waits for rank 41, on either executor; the report shows it
    assert on_dask.collectives() == pool.collectives()
    assert {(c.ranks, c.last_rank) for c in pool.collectives()} == {(64, 41)}
    assert "Collectives wait for rank 41" in text_report(pool)


def test_a_worker_killed_mid_parse_leaves_a_report_naming_any_missing_rank(tmp_path):
    """Whenever the kill lands, every rank is either in the report or named in a warning:
    Dask reruns a lost worker's tasks (at most ``allowed-failures`` times), and a task that
    still fails is that rank's error, never a hang."""
    import os
    import signal
    import sys
    import threading
    import time
    import warnings
    from pathlib import Path

    from kernelmagic.io.ranks import RankSkipped

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import rank_traces as rt

    rt.write_job(tmp_path, rt.Job(world_size=16, seed=5), 256 << 10)
    with spawnable_main(), LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                        dashboard_address=None) as cluster, \
            Client(cluster) as client:
        victim = sorted(client.scheduler_info()["workers"])[0]
        pid = client.run(os.getpid, workers=[victim])[victim]
        killed = threading.Event()

        def kill_when_busy() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not client.processing().get(victim):
                time.sleep(0.01)
            os.kill(pid, signal.SIGKILL)
            killed.set()

        killer = threading.Thread(target=kill_when_busy, daemon=True)
        killer.start()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run = kernelmagic.load(tmp_path, executor=client.get_executor())
            during = killed.is_set()  # the worker died while the load ran
        killer.join(60)
    assert during
    named = {int(m) for w in caught if issubclass(w.category, RankSkipped)
             for m in __import__("re").findall(r"rank(\d+)\.pt\.trace", str(w.message))}
    assert set(run.summaries) | named == set(range(16))
    assert not set(run.summaries) & named
