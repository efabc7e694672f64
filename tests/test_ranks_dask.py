"""Parsing ranks on a real Dask cluster (worker processes) gives the default's result."""

from __future__ import annotations

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
