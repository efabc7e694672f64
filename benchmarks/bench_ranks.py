"""Benchmark 11: loading a run of many ranks, in parallel and in bounded client memory.

* Speed: a temporary folder of ``--copies`` copies of each of the two real ranks in
  ``tests/data/ranks/`` (64 copies: 128 files, a 128-rank job; ``distributedInfo.rank``
  rewritten in each copy so the ranks are distinct), loaded by ``kernelmagic.load(folder)``
  with the default executor (a process pool of min(files, CPUs) workers: 2 on the 2-core
  machine) against serial loading in one process (``executor=ThreadPoolExecutor(1)``).
  Each load runs in a fresh interpreter, the two sides alternating. Target: parallel at
  most 0.6x serial.
* Client memory: peak RSS (``VmHWM``) of a fresh client process loading
  ``--rss-ranks`` ranks with the default process pool, at two sizes of events per rank
  (the real traces, and ``--scale`` times as many events: the trace repeated after
  itself with new steps and correlation ids). Target: the larger within 10% of the
  smaller. Serial loading (events parsed in the client) is shown for contrast.

    python benchmarks/bench_ranks.py [--copies 64] [--rounds 3] [--scale 8]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import tempfile
from decimal import Decimal
from pathlib import Path

import _common as c

RATIO_TARGET = 0.6
RSS_TARGET = 1.10
DATA = c.REPO_ROOT / "tests" / "data" / "ranks"
RANK_FILES = [DATA / "rank-0.json.gz", DATA / "rank-1.json.gz"]
_INFO = re.compile(r'"distributedInfo"\s*:\s*\{[^{}]*\}')
_STEP = re.compile(r"ProfilerStep#(\d+)")

LOAD_CHILD = """\
import json, resource, time
from concurrent.futures import ThreadPoolExecutor
import kernelmagic
def cpu(who):
    u = resource.getrusage(who)
    return u.ru_utime + u.ru_stime
c0 = cpu(resource.RUSAGE_SELF)
t0 = time.perf_counter()
if {serial!r}:
    with ThreadPoolExecutor(max_workers=1) as pool:
        run = kernelmagic.load({folder!r}, executor=pool)
else:
    run = kernelmagic.load({folder!r})
t1 = time.perf_counter()
assert len(run.ranks) == {n}, len(run.ranks)
# VmHWM: this process's own peak (ru_maxrss would include the parent's, kept over exec)
peak = next(int(line.split()[1]) for line in open("/proc/self/status")
            if line.startswith("VmHWM:"))
print(json.dumps({{"seconds": t1 - t0, "peak_rss_mb": peak / 1024,
                   "client_cpu": cpu(resource.RUSAGE_SELF) - c0,
                   "workers_cpu": cpu(resource.RUSAGE_CHILDREN),
                   "findings": [f.rule for f in run.findings()]}}))
"""


def scaled_text(path: Path, scale: int) -> tuple[str, int]:
    """The trace's JSON text with its events repeated ``scale`` times, each repetition
    after the previous one (new step numbers, correlation and external ids)."""
    data = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    events = data["traceEvents"]
    timed = [e for e in events if "ts" in e]
    t0 = min(Decimal(str(e["ts"])) for e in timed)
    t1 = max(Decimal(str(e["ts"])) + Decimal(str(e.get("dur", 0))) for e in timed)
    out = list(events)
    for k in range(1, scale):
        shift = (t1 - t0 + 1000) * k
        for e in events:
            if e.get("ph") != "X":
                continue
            copy = dict(e, ts=Decimal(str(e["ts"])) + shift)
            name = copy.get("name", "")
            if name.startswith("ProfilerStep#"):
                copy["name"] = _STEP.sub(lambda m, k=k: f"ProfilerStep#{int(m[1]) + 10 * k}",
                                         name)
            args = copy.get("args")
            if isinstance(args, dict):
                args = dict(args)
                for key in ("correlation", "External id", "external id"):
                    if isinstance(args.get(key), int):
                        args[key] += 10_000_000 * k
                copy["args"] = args
            out.append(copy)
    data["traceEvents"] = out
    return json.dumps(data, default=lambda d: float(d)), sum(
        1 for e in out if e.get("ph") == "X")


def make_run(folder: Path, copies: int, scale: int = 1) -> int:
    """``copies`` copies of each real rank, ranks 0..2*copies-1; events per rank."""
    folder.mkdir(parents=True, exist_ok=True)
    events = 0
    for which, path in enumerate(RANK_FILES):
        text, events = scaled_text(path, scale)
        for k in range(copies):
            rank = 2 * k + which
            info = json.dumps({"backend": "nccl", "rank": rank, "world_size": 2 * copies})
            body = _INFO.sub(lambda _m, info=info: '"distributedInfo": ' + info, text, count=1)
            (folder / f"rank{rank}.pt.trace.json.gz").write_bytes(
                gzip.compress(body.encode("utf-8"), compresslevel=1))
    return events


def load_child(folder: Path, n: int, serial: bool) -> dict:
    return c.run_child(LOAD_CHILD.format(folder=str(folder), n=n, serial=serial),
                       timeout=1800)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=64, help="copies of each rank (64)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rss-ranks", type=int, default=16, help="ranks in the RSS runs")
    parser.add_argument("--scale", type=int, default=8, help="events multiplier (8)")
    args = parser.parse_args()
    c.header("bench_ranks: many ranks, parallel loading and client memory")
    import os

    with tempfile.TemporaryDirectory(prefix="km-ranks-") as tmp:
        run = Path(tmp) / "run"
        per_rank = make_run(run, args.copies)
        n = 2 * args.copies
        print(f"  {n} trace files of ~{per_rank} events, {os.cpu_count()} CPUs", flush=True)
        cpu: dict[str, list[tuple[float, float]]] = {"parallel": [], "serial": []}

        def side(serial: bool) -> float:
            out = load_child(run, n, serial=serial)
            cpu["serial" if serial else "parallel"].append(
                (out["client_cpu"], out["workers_cpu"]))
            return out["seconds"]

        times = c.alternate({"parallel": lambda: side(False), "serial": lambda: side(True)},
                            args.rounds)
        print(c.describe("default (process pool)", times["parallel"]))
        print(c.describe("serial (one process)", times["serial"]))
        ratio = c.paired_ratio(times["parallel"], times["serial"])
        workers = min(n, os.cpu_count() or 1)
        client_cpu = c.median([x for x, _ in cpu["parallel"]])
        workers_cpu = c.median([y for _, y in cpu["parallel"]])
        serial_cpu = c.median([x for x, _ in cpu["serial"]])
        # With the machine to itself, the pool's wall time is bounded below by the busier
        # of the client and the (evenly shared) workers: the ratio its CPU time allows.
        cpu_ratio = max(client_cpu, workers_cpu / workers) / serial_cpu
        print(f"  CPU time: serial {serial_cpu:.1f} s; pool: client {client_cpu:.1f} s, "
              f"{workers} workers {workers_cpu:.1f} s together -> {cpu_ratio:.2f}x serial "
              "on otherwise idle cores", flush=True)
        c.verdict("ranks", f"load {n} rank traces: default pool vs serial",
                  km=c.median(times["parallel"]), manual=c.median(times["serial"]),
                  ratio=ratio, target=f"<= {RATIO_TARGET}x serial",
                  passed=ratio <= RATIO_TARGET,
                  note=f"{workers} worker processes; 'manual' = serial; CPU time allows "
                       f"{cpu_ratio:.2f}x (client {client_cpu:.1f} s, workers "
                       f"{workers_cpu:.1f} s, serial {serial_cpu:.1f} s)")

        sizes = {}
        copies = max(1, args.rss_ranks // 2)
        for scale in (1, args.scale):
            folder = Path(tmp) / f"rss{scale}"
            events = make_run(folder, copies, scale)
            pool = load_child(folder, 2 * copies, serial=False)
            serial = load_child(folder, 2 * copies, serial=True)
            sizes[scale] = (events, pool["peak_rss_mb"], serial["peak_rss_mb"])
            print(f"  {2 * copies} ranks of ~{events} events: client peak RSS "
                  f"{pool['peak_rss_mb']:.1f} MB with the pool, "
                  f"{serial['peak_rss_mb']:.1f} MB serial", flush=True)
            shutil_rmtree(folder)
        (e1, small, s_small), (e2, big, s_big) = sizes[1], sizes[args.scale]
        c.verdict("ranks", f"client peak RSS, {2 * copies} ranks: {e2} vs {e1} events per "
                  "rank", km=big, manual=small, ratio=big / small, unit="MB",
                  target=f"<= {RSS_TARGET}x", passed=big / small <= RSS_TARGET,
                  note=f"'manual' = {e1} events per rank; serial in one process: "
                       f"{s_small:.0f} MB -> {s_big:.0f} MB")


def shutil_rmtree(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
