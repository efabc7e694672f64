"""Benchmark: ``kernelmagic.load`` from 10k to 1M events, one window and split by steps (#43).

Traces nobody here built are often one window: a ``with profile():`` around a loop that
never calls ``prof.step()`` leaves no ``ProfilerStep``, and the whole run is one
iteration for the dependency model. This benchmark generates the same events in two
shapes (``benchmarks/synthetic_traces.py``: torch-like nested ops, launches with
correlation ids, two streams joined by ``cudaStreamWaitEvent``, one ``.item()`` and one
``cudaDeviceSynchronize`` every 2k events): **one window**, and **split** by
``ProfilerStep#N`` ranges of ``--step-events`` events each. For 10k, 20k, 40k, ... events
up to ``--max-events`` (and that size itself), each load runs in a fresh interpreter, as
a user runs it (bytecode cached, as after ``pip install``: ``bench_trace_load.py``'s
``installed_env``), and reports per phase:

* **parse**: reading the file into the event table (the gunzip's wait, msgspec's decode,
  the per-event fill: ``trace_fast.read_table``, through ``trace_file.start_reading``);
* **model**: the dependency model, its critical path and every row's ``max_gain_us``
  (``views/critical_path.py: iteration_view``, which ``results/builder.py`` calls) and
  its trust checks (``trust_checks``): what ``bench_what_if.py`` stubs out;
* **rest**: the rest of ``kernelmagic.load`` (iterations, links, the other views);
* the peak resident memory of each of the two phases (the process's high-water mark reset
  before it: ``/proc/self/clear_refs``) and of the whole process;
* the whole process's wall time, interpreter start to exit.

Beside them, in fresh processes too, on the same files: HolisticTraceAnalysis 0.5's
``TraceAnalysis(trace_dir=...)`` (its load only; ``pip install -e ".[bench]"``) and the
**parse floor**: python-isal's gunzip and ``msgspec.json.decode`` of the file (what any
msgspec-based reader pays). Targets (issue #43, item 7), judged in this one run:

* each doubling of the events at most 2.3x the load's time, in both shapes;
* at 1M events in one window: ``kernelmagic.load`` within 2x of the same events split by
  steps, and within 2x of the parse floor (whole processes);
* whole-process ``kernelmagic.load`` at most 0.2x HTA's, one window as split, at the
  largest size and on every trace of 1 MB or more as stored (gzipped: from 40k events);
* the model at most 15% of ``kernelmagic.load`` (item 7's bound, on these traces).

HTA 0.5 needs pandas < 3 (``pip install -e ".[bench]"`` asks for it); where this
interpreter has pandas 3, ``--hta-python`` names one that has not (HTA's loader fails on
the split traces from 40k events under pandas 3).

A load over ``--timeout`` seconds is stopped and printed as "over the timeout"; the larger
sizes of that shape are then skipped (they would be over it too).

    python benchmarks/bench_model_scale.py [--max-events 1000000] [--timeout 600]
        [--step-events 2000] [--rounds 1] [--no-hta | --hta-python PYTHON]
        [--numpy-hugepages off]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _common as c
import synthetic_traces as st
from bench_trace_load import HTA_CHILD, installed_env  # (the same HTA child process)

DOUBLING_TARGET = 2.3
SPLIT_TARGET = 2.0
FLOOR_TARGET = 2.0
HTA_TARGET = 0.2
LARGE_FILE_BYTES = 1_000_000  # #43: "at most 0.2x on every trace of 1 MB or more"
MODEL_SHARE_TARGET = 0.15
FIRST = 10_000
SHAPES = ("one window", "split")

#: ``kernelmagic.load`` in a fresh process, timed by phase. The parse is timed around the
#: read's second half (``start_reading`` begins the gunzip before the imports, as ``load``
#: does); the model is wrapped once the read is due, when ``load`` has imported the
#: builder, so that nothing is imported earlier than ``load`` itself imports it.
KM_CHILD = """\
import json, resource, time
t0 = time.perf_counter()
def peak_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False
phases = {{}}
def timed(name, fn, *args, **kwargs):
    reset = reset_peak()
    t = time.perf_counter()
    try:
        return fn(*args, **kwargs)
    finally:
        phases[name] = time.perf_counter() - t
        phases[name + " peak MB"] = peak_kb() / 1024 if reset else None
import kernelmagic
from kernelmagic.sources import trace_file
begin = trace_file.start_reading
def start_reading(source):
    finish = begin(source)
    def finish_timed():
        from kernelmagic.results import builder
        model, trust = builder.iteration_view, builder.trust_checks
        builder.iteration_view = lambda *a, **k: timed("model", model, *a, **k)
        builder.trust_checks = lambda *a, **k: timed("trust", trust, *a, **k)
        return timed("parse", finish)
    return finish_timed
trace_file.start_reading = start_reading
t1 = time.perf_counter()
result = kernelmagic.load({path!r})
t2 = time.perf_counter()
phases["model"] = phases.get("model", 0.0) + phases.pop("trust", 0.0)  # (as bench_what_if)
phases.pop("trust peak MB", None)
print(json.dumps({{"import": t1 - t0, "load": t2 - t1, **phases, "iters": result.iters,
                  "peak MB": peak_kb() / 1024,
                  "path": sum(p.time for p in result.critical_path) / 1e3}}))
"""


#: The parse floor: the gunzip and msgspec's decode of the whole file into Python objects.
FLOOR_CHILD = """\
import json, time
t0 = time.perf_counter()
import msgspec
from isal import igzip
t1 = time.perf_counter()
with igzip.open({path!r}, "rb") as f:
    data = f.read()
t2 = time.perf_counter()
doc = msgspec.json.decode(data)
t3 = time.perf_counter()
print(json.dumps({{"import": t1 - t0, "gunzip": t2 - t1, "decode": t3 - t2, "load": t3 - t1,
                  "MB": len(data) / 1e6, "events": len(doc["traceEvents"])}}))
"""


@dataclass
class Run:
    """One side's figures in one process: the child's JSON and the whole process's wall."""

    out: dict[str, Any] | None  # None: over the timeout (or failed: ``error``)
    wall: float | None
    error: str = ""


@dataclass
class Point:
    """One (size, shape): its trace and the medians of each side's runs."""

    size: int
    shape: str
    facts: st.TraceFacts
    km: list[Run] = field(default_factory=list)
    hta: list[Run] = field(default_factory=list)
    floor: list[Run] = field(default_factory=list)

    def figure(self, side: str, key: str) -> float | None:
        """The median of ``key`` (``"wall"``: the whole process) over ``side``'s runs;
        None when any run was over the timeout or failed."""
        runs = getattr(self, side)
        if not runs or any(r.out is None for r in runs):
            return None
        values = [r.wall if key == "wall" else r.out.get(key) for r in runs]  # type: ignore
        if any(v is None for v in values):
            return None
        return statistics.median(values)  # type: ignore[arg-type]

    @property
    def over(self) -> bool:
        return any(r.out is None and not r.error for r in self.km)


def sizes(max_events: int) -> list[int]:
    """10k, 20k, 40k, ... below ``max_events``, then ``max_events`` itself."""
    out, n = [], FIRST
    while n < max_events:
        out.append(n)
        n *= 2
    return [*out, max_events]


def run(code: str, env: dict[str, str], timeout: float, python: str = sys.executable) -> Run:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([python, "-c", code], capture_output=True, text=True,
                              env=env, timeout=timeout, cwd=str(c.REPO_ROOT))
    except subprocess.TimeoutExpired:
        return Run(None, None)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return Run(None, wall, error=proc.stderr.strip().splitlines()[-1][:200])
    return Run(json.loads(proc.stdout.strip().splitlines()[-1]), wall)


def measure(point: Point, env: dict[str, str], args: argparse.Namespace, hta: bool) -> None:
    """One round of each side on ``point``'s trace."""
    path = point.facts.path
    point.km.append(run(KM_CHILD.format(path=path), env, args.timeout))
    if hta:
        point.hta.append(run(HTA_CHILD.format(folder=str(Path(path).parent)), env,
                             args.timeout, args.hta_python))
    point.floor.append(run(FLOOR_CHILD.format(path=path), env, args.timeout))


def fmt(seconds: float | None) -> str:
    return "over" if seconds is None else f"{seconds:.2f}"


def fmt_mb(mb: float | None) -> str:
    return "-" if mb is None else f"{mb:.0f}"


def per_doubling(points: list[Point], i: int, side: str, key: str) -> float | None:
    """Growth of ``key`` from point i-1 to i, per doubling of the events."""
    if i == 0:
        return None
    a, b = points[i - 1].figure(side, key), points[i].figure(side, key)
    if a is None or b is None or a <= 0:
        return None
    return (b / a) ** (1 / math.log2(points[i].size / points[i - 1].size))


def print_table(shape: str, points: list[Point], hta: bool) -> None:
    print(f"\n{shape}: seconds (the model's and the parse's peak RSS in MB), "
          "'over': over the timeout")
    head = (f"{'events':>9} {'MB json':>7} {'iters':>5} {'parse':>6} {'(MB)':>5} "
            f"{'model':>7} {'(MB)':>5} {'rest':>6} {'load':>7} {'process':>7} "
            f"{'peak MB':>7} {'x/dbl':>5} {'model x':>7} {'floor':>6}")
    if hta:
        head += f" {'HTA':>6} {'km/HTA':>6}"
    print(head)
    for i, p in enumerate(points):
        f = p.figure
        load, model, parse = f("km", "load"), f("km", "model"), f("km", "parse")
        rest = None if None in (load, model, parse) else load - model - parse  # type: ignore
        grow, grow_model = per_doubling(points, i, "km", "load"), per_doubling(
            points, i, "km", "model")
        iters = f("km", "iters")
        line = (f"{p.facts.events:>9,} {p.facts.json_bytes / 1e6:>7.0f} "
                f"{'-' if iters is None else int(iters):>5} {fmt(parse):>6} "
                f"{fmt_mb(f('km', 'parse peak MB')):>5} {fmt(model):>7} "
                f"{fmt_mb(f('km', 'model peak MB')):>5} {fmt(rest):>6} {fmt(load):>7} "
                f"{fmt(f('km', 'wall')):>7} {fmt_mb(f('km', 'peak MB')):>7} "
                f"{'-' if grow is None else f'{grow:.2f}':>5} "
                f"{'-' if grow_model is None else f'{grow_model:.2f}':>7} "
                f"{fmt(f('floor', 'wall')):>6}")
        if hta:
            km_wall, hta_wall = f("km", "wall"), f("hta", "wall")
            ratio = (f"{km_wall / hta_wall:.2f}" if km_wall is not None and hta_wall
                     else "-")
            cell = "failed" if any(r.error for r in p.hta) else fmt(hta_wall)
            line += f" {cell:>6} {ratio:>6}"
        print(line)
        for run_ in p.km + p.hta + p.floor:
            if run_.error:
                print(f"    a child failed: {run_.error}")


def verdicts(by_shape: dict[str, list[Point]], hta: bool, wanted: int) -> None:
    """The targets, judged on this run's figures."""
    for shape, points in by_shape.items():
        growths = [g for i in range(len(points))
                   if (g := per_doubling(points, i, "km", "load")) is not None]
        over = any(p.over for p in points)
        worst = max(growths, default=float("nan"))
        c.verdict("model_scale", f"{shape}: kernelmagic.load's growth per doubling of the "
                  f"events, {points[0].size:,} to {points[-1].size:,}",
                  km=worst, unit="x", ratio=worst, target=f"<= {DOUBLING_TARGET:g}x",
                  passed=not over and bool(growths) and worst <= DOUBLING_TARGET,
                  note=("some sizes over the timeout; " if over else "")
                  + "per doubling: " + ", ".join(f"{g:.2f}" for g in growths))
        shares = [(p.size, m / ld) for p in points
                  if (m := p.figure("km", "model")) is not None
                  and (ld := p.figure("km", "load"))]
        worst_share = max((s for _, s in shares), default=float("nan"))
        c.verdict("model_scale", f"{shape}: the model's share of kernelmagic.load",
                  km=worst_share, unit="x", ratio=worst_share,
                  target=f"<= {MODEL_SHARE_TARGET:.0%}",
                  passed=not over and bool(shares) and worst_share <= MODEL_SHARE_TARGET,
                  note=", ".join(f"{n // 1000}k {s:.0%}" for n, s in shares))
    window, split = by_shape["one window"][-1], by_shape["split"][-1]
    size = f"{window.size:,} events" + ("" if window.size >= wanted else
                                        f" (the targets are for {wanted:,})")
    km, km_split = window.figure("km", "wall"), split.figure("km", "wall")
    floor = window.figure("floor", "wall")
    _ratio_verdict(f"{size}, one window: whole-process load / the same events split by "
                   "steps", km, km_split, SPLIT_TARGET)
    _ratio_verdict(f"{size}, one window: whole-process load / the parse floor (gunzip and "
                   "msgspec's decode, whole process)", km, floor, FLOOR_TARGET)
    if hta:
        for point in (window, split):
            _ratio_verdict(f"{size}, {point.shape}: whole-process load / HTA's "
                           "TraceAnalysis(trace_dir)", point.figure("km", "wall"),
                           point.figure("hta", "wall"), HTA_TARGET)
        for shape, points in by_shape.items():
            _every_large_verdict(shape, points)


def _every_large_verdict(shape: str, points: list[Point]) -> None:
    """#43's standing target beside the largest size: at most 0.2x HTA's whole process on
    every trace of ``LARGE_FILE_BYTES`` or more as stored (gzipped), this shape's."""
    ratios = [(p.size, km / other) for p in points
              if Path(p.facts.path).stat().st_size >= LARGE_FILE_BYTES
              and (km := p.figure("km", "wall")) is not None
              and (other := p.figure("hta", "wall"))]
    worst = max((r for _, r in ratios), default=float("nan"))
    c.verdict("model_scale", f"{shape}: whole-process load / HTA's on every trace of 1 MB "
              "or more (gzipped)", km=worst, unit="x", ratio=worst,
              target=f"<= {HTA_TARGET:g}x", passed=bool(ratios) and worst <= HTA_TARGET,
              note=", ".join(f"{n // 1000}k {r:.2f}x" for n, r in ratios))


def _ratio_verdict(metric: str, km: float | None, other: float | None, target: float) -> None:
    if km is None or other is None:
        c.verdict("model_scale", metric, km=float("nan"), manual=other, target=f"<= {target:g}x",
                  passed=False, note="over the timeout" if km is None else "no reference")
        return
    c.verdict("model_scale", metric, km=km, manual=other, ratio=km / other,
              target=f"<= {target:g}x", passed=km / other <= target)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-events", type=int, default=1_000_000)
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds per fresh process (default 600)")
    parser.add_argument("--step-events", type=int, default=2_000,
                        help="events per ProfilerStep in the split shape (default 2000)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-hta", action="store_true")
    parser.add_argument("--numpy-hugepages", choices=("default", "off"), default="default",
                        help="off: NUMPY_MADVISE_HUGEPAGE=0 in every process, HTA's and the "
                             "floor's too (benchmarks/README.md: fresh memory)")
    parser.add_argument("--hta-python", default=sys.executable,
                        help="the interpreter HTA runs in: one with pandas < 3 (under pandas 3 "
                             "HTA 0.5 fails to load the split traces from 40k events: "
                             "\"Invalid value ... for dtype 'int16'\")")
    args = parser.parse_args()
    hta = not args.no_hta
    if hta:
        try:
            import hta as _hta  # noqa: F401
        except ImportError:
            print("HolisticTraceAnalysis is not installed: its column is left out "
                  "(pip install -e \".[bench]\")")
            hta = False
    c.header("model scale: kernelmagic.load of one-window and step-split traces, 10k events "
             f"to {args.max_events:,}",
             f"    a fresh process per load, timeout {args.timeout:g} s, "
             f"{args.rounds} round(s), split: one ProfilerStep per {args.step_events:,} "
             f"events; numpy's huge pages: {args.numpy_hugepages}; traces cached in "
             f"{st.cache_folder()}")
    cache = Path(tempfile.mkdtemp(prefix="km_pycache_"))
    env = installed_env(cache)
    if args.numpy_hugepages == "off":
        env["NUMPY_MADVISE_HUGEPAGE"] = "0"
    warm = st.cached_trace(FIRST, None, args.seed)  # untimed: fills the bytecode caches
    measure(Point(FIRST, "one window", warm), env, args, hta)
    by_shape: dict[str, list[Point]] = {shape: [] for shape in SHAPES}
    for n in sizes(args.max_events):
        for shape in SHAPES:
            steps = None if shape == "one window" else max(1, n // args.step_events)
            t0 = time.perf_counter()
            facts = st.cached_trace(n, steps, args.seed)
            made = time.perf_counter() - t0
            point = Point(n, shape, facts)
            before = by_shape[shape][-1] if by_shape[shape] else None
            if before is not None and before.over:
                point.km = [Run(None, None)]  # the smaller size was over: this one too
                by_shape[shape].append(point)
                continue
            for _ in range(args.rounds):
                measure(point, env, args, hta)
            by_shape[shape].append(point)
            km = point.figure("km", "wall")
            print(f"    {n:>9,} {shape:<10}: trace {made:5.1f} s (cached after the first), "
                  f"kernelmagic {fmt(km)} s", flush=True)
    for shape, points in by_shape.items():
        print_table(shape, points, hta)
    print("\n  load: kernelmagic.load's call, imports excluded; process: interpreter start "
          "to exit; x/dbl: load's growth per doubling of the events; floor: python-isal's "
          "gunzip + msgspec.json.decode, whole process")
    verdicts(by_shape, hta, args.max_events)


if __name__ == "__main__":
    main()
