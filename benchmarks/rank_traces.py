"""Realistic synthetic rank traces for many-ranks benchmarks and tests (issue #34).

One Chrome trace per rank, as torch.profiler writes it on a GPU: ``ProfilerStep#N``
ranges on the main thread; in each step ``kernels`` compute kernels (``cudaLaunchKernel``
on the CPU, the kernel on stream 7, linked by ``correlation``) then ``collectives``
all-reduces (an ``nccl:all_reduce`` range, its launch and its ``ncclKernel_AllReduce_...``
on communication stream 20). Every rank runs the same kernels; rank ``r``'s compute is
stretched by a small per-rank jitter, and ``slow_rank`` by ``1 + slow_by`` on top. A
collective ends for everyone once the last rank has arrived plus its transfer time, so
a fast rank's NCCL kernel lasts longer (it waits) and every rank's step ends together:
what a real job's traces show.

Deterministic from ``seed``: the same arguments write the same bytes. The size of a
file is chosen by ``size_bytes`` (steps are added until the file reaches it), from a
few kB up to 1 GB and more; events are streamed to the file, never held in memory.

    python benchmarks/rank_traces.py OUT_FOLDER --ranks 64 --size 1MB --slow-rank 5 --slow-by 0.3
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import IO

COMPUTE_STREAM = 7
COMM_STREAM = 20
PID, TID, GPU_PID = 1000, 1000, 0
T0 = 1_700_000_000_000  # µs, a plausible epoch start
KERNEL_NAMES = ("ampere_sgemm_128x64_tn", "void at::native::vectorized_elementwise_kernel",
                "void at::native::reduce_kernel", "ampere_sgemm_64x64_nn",
                "void cunn_SoftMaxForward")


@dataclass(frozen=True)
class Job:
    """What every rank of one synthetic job shares."""

    world_size: int
    seed: int = 0
    kernels: int = 24  # compute kernels per step
    collectives: int = 2  # all-reduces per step
    slow_rank: int | None = None
    slow_by: float = 0.0  # the slow rank's compute is (1 + slow_by) times as long
    jitter: float = 0.02  # other ranks' compute: up to this fraction longer

    def factor(self, rank: int) -> float:
        """How much longer than the base rank ``rank``'s compute kernels run."""
        f = 1.0 + random.Random(self.seed * 1_000_003 + rank).uniform(0.0, self.jitter)
        return f * (1.0 + self.slow_by) if rank == self.slow_rank else f

    @cached_property
    def slowest_factor(self) -> float:
        """The slowest rank's factor: when every collective can start."""
        return max(self.factor(r) for r in range(self.world_size))


def _step_plan(job: Job, step: int) -> tuple[list[float], list[float]]:
    """Base kernel durations (µs) and collective transfer times of one step: the same on
    every rank (seeded by the job's seed and the step)."""
    rng = random.Random(job.seed * 7919 + step)
    kernels = [rng.uniform(20.0, 400.0) for _ in range(job.kernels)]
    transfers = [rng.uniform(200.0, 1500.0) for _ in range(job.collectives)]
    return kernels, transfers


def _x(name: str, cat: str, pid: int, tid: int, ts: float, dur: float,
       args: dict) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid,
            "ts": round(ts, 3), "dur": round(dur, 3), "args": args}


def _launch(name: str, cat: str, ts: float, dur: float, stream: int, cpu_ts: float,
            corr: int) -> Iterator[dict]:
    yield _x("cudaLaunchKernel", "cuda_runtime", PID, TID, cpu_ts, 4.0,
             {"External id": corr, "correlation": corr})
    yield _x(name, cat, GPU_PID, stream, ts, dur,
             {"External id": corr, "device": 0, "stream": stream, "correlation": corr})


def step_events(job: Job, rank: int, step: int, start: float, corr: int) -> tuple[
        list[dict], float, int]:
    """One step of rank ``rank`` starting at ``start``: its events, its end, next id."""
    kernels, transfers = _step_plan(job, step)
    mine, slowest = job.factor(rank), job.slowest_factor
    chunk = max(1, len(kernels) // max(1, job.collectives))
    events: list[dict] = []
    gpu = start + 10.0  # this rank's GPU clock
    base = start + 10.0  # the slowest rank's GPU clock (when the collectives start)
    for c, transfer in enumerate(transfers):
        for i, d in enumerate(kernels[c * chunk:(c + 1) * chunk if c < len(transfers) - 1
                                      else None]):
            corr += 1
            name = KERNEL_NAMES[(i + c) % len(KERNEL_NAMES)]
            events += _launch(name, "kernel", gpu, d * mine, COMPUTE_STREAM, gpu - 8.0, corr)
            gpu += d * mine
            base += d * slowest
        arrive, end = gpu, max(gpu, base) + transfer
        corr += 1
        events.append(_x("nccl:all_reduce", "user_annotation", PID, TID, arrive - 6.0, 10.0,
                         {"External id": corr}))
        events += _launch("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, ...)",
                          "kernel", arrive, end - arrive, COMM_STREAM, arrive - 5.0, corr)
        gpu = base = end
    end = gpu + 10.0
    events.insert(0, _x(f"ProfilerStep#{step}", "user_annotation", PID, TID, start,
                        end - start, {}))
    return events, end, corr


def write_rank(out: IO[str], job: Job, rank: int, size_bytes: int) -> int:
    """Write rank ``rank``'s trace to ``out``, steps added until ``size_bytes``; steps."""
    head = {"schemaVersion": 1, "distributedInfo": {
        "backend": "nccl", "rank": rank, "world_size": job.world_size}}
    text = json.dumps(head)[:-1] + ', "traceEvents": [\n'
    out.write(text)
    written, step, start, corr, first = len(text), 0, float(T0), 0, True
    while written < size_bytes or step < 2:
        events, start, corr = step_events(job, rank, step, start, corr)
        for event in events:
            line = ("" if first else ",\n") + json.dumps(event)
            out.write(line)
            written += len(line)
            first = False
        step += 1
    out.write("\n]}\n")
    return step


def write_job(folder: str | Path, job: Job, size_bytes: int) -> list[Path]:
    """One ``rankN.pt.trace.json`` per rank of ``job`` in ``folder``; the paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in range(job.world_size):
        path = folder / f"rank{rank}.pt.trace.json"
        with path.open("w", encoding="utf-8") as out:
            write_rank(out, job, rank, size_bytes)
        paths.append(path)
    return paths


def parse_size(text: str) -> int:
    """``"1MB"``, ``"500kB"``, ``"1GB"`` or a number of bytes."""
    units = {"GB": 1 << 30, "MB": 1 << 20, "KB": 1 << 10}
    upper = text.strip().upper()
    for unit, scale in units.items():
        if upper.endswith(unit):
            return int(float(upper[:-len(unit)]) * scale)
    return int(upper.rstrip("B"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=str)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--size", type=str, default="1MB", help="bytes per rank (1MB)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--slow-rank", type=int, default=None)
    parser.add_argument("--slow-by", type=float, default=0.0)
    args = parser.parse_args()
    job = Job(world_size=args.ranks, seed=args.seed, slow_rank=args.slow_rank,
              slow_by=args.slow_by)
    paths = write_job(args.folder, job, parse_size(args.size))
    print(f"wrote {len(paths)} rank traces to {args.folder}")


if __name__ == "__main__":
    main()
