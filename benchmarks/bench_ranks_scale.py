"""Benchmark: client memory and wall time of ``kernelmagic.load(folder)`` as ranks grow (#34).

For each number of ranks (``--ranks 16 64 128``), a synthetic job from
``benchmarks/rank_traces.py`` (``--size`` per rank, rank 5 made 30% slower) is loaded in a
fresh client process on each executor: a local process pool as the default makes it, and a
``distributed.LocalCluster`` of 1 and of 2 worker processes (``client.get_executor()``;
the pool's workers and the cluster are started before the clock starts). Measured in the
client:

* wall time of the load, and time per rank;
* memory held: Python allocations still held after the load (``tracemalloc``, after
  ``gc.collect()``; the modules a load imports are imported first). Per rank: the growth
  from the fewest to the most ranks, divided by the ranks added (what each added rank
  costs, without the fixed cost of a Dask client). Target: under 50 KB;
* peak RSS of the client process (``VmHWM``), whose growth with ranks is what the client
  pays (on Dask it includes the scheduler, which runs in the client process).

    python benchmarks/bench_ranks_scale.py [--ranks 16 64 128] [--size 1MB]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import _common as c
import rank_traces as rt

PER_RANK_TARGET_KB = 50.0
EXECUTORS = ("pool", "dask-1", "dask-2")

CHILD = """\
import gc, json, sys, time, tracemalloc
import kernelmagic
# what a load imports, imported first: module code is not what the ranks cost
import kernelmagic.findings.ranks, kernelmagic.io.ranks, kernelmagic.io.traces
import kernelmagic.render.ranks, kernelmagic.views

def peak_rss_mb():
    return next(int(l.split()[1]) for l in open("/proc/self/status")
                if l.startswith("VmHWM:")) / 1024

def load(folder, executor):
    gc.collect()
    tracemalloc.start()
    t0 = time.perf_counter()
    run = kernelmagic.load(folder, executor=executor)
    seconds = time.perf_counter() - t0
    slowest = max(run.summaries.values(), key=lambda s: s.compute_us).rank
    gc.collect()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return run, seconds, held, slowest

if __name__ == "__main__":
    folder, kind, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if kind == "pool":
        import os
        from concurrent.futures import ProcessPoolExecutor
        # the default's pool (min(files, CPUs) workers), its workers started before
        # tracemalloc: forked after, they would trace (and slow) every allocation
        workers = max(1, min(n, os.cpu_count() or 1))
        with ProcessPoolExecutor(max_workers=workers) as pool:
            list(pool.map(abs, range(workers)))
            run, seconds, held, slowest = load(folder, pool)
    else:
        from distributed import Client, LocalCluster
        workers = int(kind.split("-")[1])
        with LocalCluster(n_workers=workers, processes=True, threads_per_worker=1,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            run, seconds, held, slowest = load(folder, client.get_executor())
    assert len(run.summaries) == n, len(run.summaries)
    print(json.dumps({"seconds": seconds, "held_bytes": held, "slowest": slowest,
                      "peak_rss_mb": peak_rss_mb()}))
"""


def measure(script: Path, folder: Path, kind: str, n: int) -> dict:
    proc = subprocess.run([sys.executable, str(script), str(folder), kind, str(n)],
                          capture_output=True, text=True, env=c.child_env(), timeout=3600,
                          cwd=str(c.REPO_ROOT))
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[16, 64, 128])
    parser.add_argument("--size", type=str, default="1MB", help="bytes per rank (1MB)")
    parser.add_argument("--executors", nargs="+", default=list(EXECUTORS),
                        choices=EXECUTORS)
    args = parser.parse_args()
    c.header("bench_ranks_scale: client memory and time as ranks grow")
    size = rt.parse_size(args.size)
    rows = []
    with tempfile.TemporaryDirectory(prefix="km-scale-") as tmp:
        script = Path(tmp) / "client.py"
        script.write_text(CHILD)
        for n in args.ranks:
            folder = Path(tmp) / f"job{n}"
            rt.write_job(folder, rt.Job(world_size=n, seed=n, slow_rank=5 % n, slow_by=0.3),
                         size)
            for kind in args.executors:
                out = measure(script, folder, kind, n)
                per_rank_kb = out["held_bytes"] / n / 1024
                rows.append((kind, n, out))
                print(f"  {kind:7} {n:4} ranks of {args.size}: {out['seconds']:7.2f} s "
                      f"({out['seconds'] / n * 1e3:6.1f} ms/rank), held "
                      f"{out['held_bytes'] / 2**20:6.2f} MB ({per_rank_kb:5.1f} KB/rank), "
                      f"peak RSS {out['peak_rss_mb']:6.1f} MB, slowest rank "
                      f"{out['slowest']}", flush=True)
            _rmtree(folder)
    lo, hi = min(args.ranks), max(args.ranks)
    slopes = []
    for kind in args.executors:
        held = {n: o["held_bytes"] for k, n, o in rows if k == kind}
        slope = (held[hi] - held[lo]) / (hi - lo) / 1024 if hi > lo else held[lo] / lo / 1024
        slopes.append(slope)
        print(f"  {kind}: {slope:.1f} KB held per added rank ({lo} -> {hi} ranks)")
    worst = max(slopes)
    c.verdict("ranks_scale", f"client memory held per added rank, {lo}-{hi} ranks, "
              f"{', '.join(args.executors)}", km=round(worst, 1), unit="KB",
              target=f"< {PER_RANK_TARGET_KB:.0f} KB", passed=worst < PER_RANK_TARGET_KB,
              note="tracemalloc, held after the load; the worst executor")


def _rmtree(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
