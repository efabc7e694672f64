"""Run every benchmark (each in its own process) and print a markdown summary table.

    python benchmarks/run_all.py            # all, default sizes (~10 minutes on 2 cores)
    python benchmarks/run_all.py --quick    # fewer rounds, smaller many-events run
    python benchmarks/run_all.py --only warm_cell cold_start

Each script prints its own figures and verdicts; the summary collects the
``##BENCH##`` lines. Exit code 0 regardless of verdicts (these are reports); 1 only if a
script itself crashed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARKER = "##BENCH## "

#: name -> (script, extra arguments for --quick)
SCRIPTS: dict[str, tuple[str, list[str]]] = {
    "warm_cell": ("bench_warm_cell.py", ["--rounds", "4"]),
    "seed_path": ("bench_seed_path.py", ["--rounds", "4"]),
    "cold_start": ("bench_cold_start.py", ["--rounds", "2"]),
    "many_events": ("bench_many_events.py", ["--iters", "2", "--scale-rounds", "2"]),
    "wide": ("bench_wide.py", ["--rounds", "3"]),
    "loading": ("bench_loading.py", ["--rounds", "3"]),
    "memory": ("bench_memory.py", ["--runs", "60", "--first", "20", "--no-manual"]),
    "measured_region": ("bench_measured_region.py", ["--rounds", "4"]),
    "event_model": ("bench_event_model.py", ["--rounds", "1", "--scale-rounds", "1"]),
    "trace_load": ("bench_trace_load.py", ["--rounds", "3"]),
    "what_if": ("bench_what_if.py", ["--rounds", "3"]),
    "panel": ("bench_panel.py", ["--rounds", "5"]),
    "trace_memory": ("bench_trace_memory.py", ["--mb", "200"]),
    "ranks": ("bench_ranks.py", ["--copies", "16", "--rounds", "2", "--scale", "4"]),
    "ranks_scale": ("bench_ranks_scale.py", ["--ranks", "16", "64", "--size", "256kB"]),
}


def run(name: str, quick: bool) -> tuple[list[dict], int, float]:
    script, quick_args = SCRIPTS[name]
    cmd = [sys.executable, str(HERE / script), *(quick_args if quick else [])]
    env = dict(os.environ, KINETO_LOG_LEVEL="6", PYTHONUNBUFFERED="1")
    print(f"\n$ {' '.join(cmd)}", flush=True)
    t0 = time.perf_counter()
    rows = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=env, cwd=str(HERE.parent)) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(MARKER):
                rows.append(json.loads(line[len(MARKER):]))
            else:
                print(line, end="", flush=True)
    return rows, proc.returncode, time.perf_counter() - t0


def source_state() -> str:
    """The commit the benchmarks ran against, and whether kernelmagic/ had local edits."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], capture_output=True, text=True,
                                  cwd=str(HERE.parent), timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown commit"
    dirty = git("status", "--porcelain", "--", "kernelmagic")
    return f"{commit}{' + uncommitted edits' if dirty else ''}"


def cell(text: object) -> str:
    return str(text if text is not None else "-").replace("|", "\\|")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, smaller runs")
    parser.add_argument("--only", nargs="+", choices=list(SCRIPTS), default=list(SCRIPTS))
    args = parser.parse_args()
    import torch

    machine = (f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
               f"({torch.get_num_threads()} threads), Python {platform.python_version()}, "
               f"kernelmagic {source_state()}")
    results: list[dict] = []
    crashed: list[str] = []
    elapsed: dict[str, float] = {}
    for name in args.only:
        rows, rc, seconds = run(name, args.quick)
        elapsed[name] = seconds
        results += rows
        if rc != 0:
            crashed.append(f"{name} (exit {rc})")
    print("\n## Benchmark summary\n")
    print(f"Machine: {machine}{' -- quick mode' if args.quick else ''}.\n")
    print("| benchmark | measurement | kernelmagic | manual | ratio | target | verdict |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {cell(r['bench'])} | {cell(r['metric'])} | {cell(r['kernelmagic'])} | "
              f"{cell(r['manual'])} | {cell(r['ratio'])} | {cell(r['target'])} | "
              f"**{r['verdict']}** |")
    passed = sum(r["verdict"] == "PASS" for r in results)
    print(f"\n{passed}/{len(results)} targets met. Script times: "
          + ", ".join(f"{n} {s:.0f} s" for n, s in elapsed.items()) + ".")
    if crashed:
        print(f"Crashed: {', '.join(crashed)}")
    sys.exit(1 if crashed else 0)


if __name__ == "__main__":
    main()
