"""Benchmark 3: many events -- 10,000 tiny ops per run, profiled 10 times.

The cell is ``a = a.add(1).mul(0.5)`` in a 5,000-iteration loop on a 4-element tensor
(10,000 ops, about 50,000 profiler events per run). Both sides run through the same
InteractiveShell with output captured:

* kernelmagic: ``%%profile -n 10 -w 3`` (rendered: text, HTML+PNG, widget);
* manual: 3 warm-up runs, ``with profile(activities=[CPU])`` over 10 runs,
  ``key_averages().table()``.

Almost all of each side's time is torch turning ~500,000 events into
``key_averages()`` (tens of seconds on a 2-core machine), so by default one round of
each side is run (``--rounds`` for more). Target: kernelmagic / manual <= 1.10.

Scaling: kernelmagic's post-processing (profiler stop, collection, full render) for N,
2N and 4N events (one profiled run of 1,250 / 2,500 / 5,000 loop iterations), rounds
rotated, medians. Target: time(2N) / time(N) <= 2.2 (and 4N / 2N likewise).

    python benchmarks/bench_many_events.py [--rounds N] [--iters N] [--scale-rounds N]
"""

from __future__ import annotations

import argparse
import gc

import _common as c
import torch
from _workloads import MANY_EVENTS_STMT

MANUAL_CELL = """\
from torch.profiler import ProfilerActivity, profile
for _ in range(3):
    a = t
    for _ in range(LOOPS):
        a = a.add(1).mul(0.5)
with profile(activities=[ProfilerActivity.CPU], record_shapes=False) as prof:
    for _ in range(ITERS):
        a = t
        for _ in range(LOOPS):
            a = a.add(1).mul(0.5)
print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
del prof
"""

TARGET = 1.10
SCALE_TARGET = 2.2
SCALE_LOOPS = (1250, 2500, 5000)


def post_processing(loops: int) -> tuple[float, dict[str, float], int]:
    """kernelmagic post-processing time (end of last iteration -> bundle built)."""
    t = torch.zeros(4)

    def body() -> None:
        a = t
        for _ in range(loops):
            a = a.add(1).mul(0.5)

    out = c.post_breakdown(body, iters=1, warmup=0)
    parts = {k: out[k] for k in ("stop", "events", "views", "render")}
    total, events = out["total"], out["n_events"]
    del out
    gc.collect()
    return total, parts, events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--scale-rounds", type=int, default=3)
    args = parser.parse_args()
    c.header("bench_many_events: 10,000 tiny ops per run, profiled "
             f"{args.iters} times, vs manual",
             "    cell: a = a.add(1).mul(0.5) x 5,000 loop iterations on torch.zeros(4)")
    sh = c.shell()
    sh.user_ns.update(torch=torch, t=torch.zeros(4), LOOPS=5000, ITERS=args.iters)
    c.run_cell("%load_ext kernelmagic")
    km_cell = f"%%profile -n {args.iters} -w 3\n" + MANY_EVENTS_STMT
    # Warm both sides on a small version of the cell (first profiler sessions, imports).
    sh.user_ns["LOOPS"] = 50
    c.run_cell(km_cell.replace(f"-n {args.iters}", "-n 1"))
    c.run_cell(MANUAL_CELL)
    sh.user_ns["LOOPS"] = 5000

    times = c.alternate({"kernelmagic": c.cell_side(km_cell), "manual": c.cell_side(MANUAL_CELL)},
                        args.rounds)
    print(c.describe("kernelmagic %%profile", times["kernelmagic"]))
    print(c.describe("manual workflow", times["manual"]))
    km, man = c.median(times["kernelmagic"]), c.median(times["manual"])
    c.verdict("many_events", f"many events (10,000 ops x {args.iters} runs) vs manual",
              km=km, manual=man, ratio=km / man, target=f"<= {TARGET}",
              passed=km / man <= TARGET,
              note=f"{args.rounds} round(s) per side, alternating; whole cells, rendered")

    print(f"  scaling: kernelmagic post-processing for loops {SCALE_LOOPS} "
          f"(1 profiled run each, {args.scale_rounds} rotated rounds)")
    post_processing(100)  # warm
    totals: dict[int, list[float]] = {n: [] for n in SCALE_LOOPS}
    parts_by: dict[int, list[dict[str, float]]] = {n: [] for n in SCALE_LOOPS}
    events: dict[int, int] = {}
    for r in range(args.scale_rounds):
        order = SCALE_LOOPS[r % 3:] + SCALE_LOOPS[: r % 3]
        for loops in order:
            total, parts, n_events = post_processing(loops)
            totals[loops].append(total)
            parts_by[loops].append(parts)
            events[loops] = n_events
    med = {n: c.median(v) for n, v in totals.items()}
    for n in SCALE_LOOPS:
        split = "  ".join(f"{k} {c.fmt_time(c.median([p[k] for p in parts_by[n]]))}"
                          for k in ("stop", "events", "views", "render"))
        print(f"    {events[n]:>7,} events: {c.fmt_time(med[n]):>9}   ({split})")
    n1, n2, n4 = SCALE_LOOPS
    g2, g4 = med[n2] / med[n1], med[n4] / med[n2]
    c.verdict("many_events", "post-processing growth, 2N vs N events", km=med[n2],
              manual=None, ratio=g2, target=f"<= {SCALE_TARGET}", passed=g2 <= SCALE_TARGET,
              note=f"N = {events[n1]:,} events took {c.fmt_time(med[n1])}; 2N/N ratio")
    c.verdict("many_events", "post-processing growth, 4N vs 2N events", km=med[n4],
              manual=None, ratio=g4, target=f"<= {SCALE_TARGET}", passed=g4 <= SCALE_TARGET,
              note=f"4N = {events[n4]:,} events; 4N/2N ratio")


if __name__ == "__main__":
    main()
