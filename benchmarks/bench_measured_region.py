"""Benchmark 7: the measured region -- does ``%%profile``'s per-iteration time add more
than the profiler itself costs?

Four sides, each on the seed's Block (``with torch.inference_mode(): block(x)``), run in
rotating order per round in one process:

* A ``%%profile -n 10 -w 3 -q -o r``: the per-iteration median it reports
  (``r.stats.median``);
* B unprofiled ``torch.utils.benchmark.Timer(...).timeit(10)`` (same thread count as
  the process; per-iteration time of 10 runs);
* C manual: 3 warm-up runs, then ``torch.profiler.profile(activities=[CPU])`` around 10
  runs each timed with ``perf_counter`` (median);
* D the same loop as C without a profiler (median).

kernelmagic's excess = A - B; the profiler's own overhead = C - D, each the median of
the per-round (paired) differences. Verdict: excess <= overhead + noise margin (3% of the
unprofiled time). Medians of each side are printed too.

    python benchmarks/bench_measured_region.py [--rounds N]
"""

from __future__ import annotations

import argparse

import _common as c
import torch
from _workloads import BLOCK_STMT, block_and_input
from torch.utils.benchmark import Timer

MARGIN = 0.03


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    c.header("bench_measured_region: %%profile per-iteration time vs unprofiled, "
             "and the profiler's own overhead")
    block, x = block_and_input()
    ns = {"block": block, "x": x, "torch": torch}
    sh = c.shell()
    sh.user_ns.update(ns)
    c.run_cell("%load_ext kernelmagic")
    km_cell = "%%profile -n 10 -w 3 -q -o _km_r\n" + BLOCK_STMT
    code = compile(BLOCK_STMT, "<block>", "exec")
    timer = Timer(stmt=BLOCK_STMT, globals=ns, num_threads=torch.get_num_threads())

    def km() -> float:
        c.run_cell(km_cell)
        return sh.user_ns["_km_r"].stats.median

    def unprofiled_timer() -> float:
        return timer.timeit(10).median

    def loop(profiled: bool) -> float:
        for _ in range(3):
            exec(code, ns)
        times = []
        if profiled:
            activities = [torch.profiler.ProfilerActivity.CPU]
            with torch.profiler.profile(activities=activities) as prof:
                for _ in range(10):
                    t0 = c.clock()
                    exec(code, ns)
                    times.append(c.clock() - t0)
            prof.key_averages()
        else:
            for _ in range(10):
                t0 = c.clock()
                exec(code, ns)
                times.append(c.clock() - t0)
        return c.median(times)

    # Warm every side once (first profiler sessions, inductor import for torch.profiler).
    km()
    unprofiled_timer()
    loop(True)
    loop(False)
    res = c.alternate({"A_km": km, "B_timer": unprofiled_timer,
                       "C_manual_prof": lambda: loop(True),
                       "D_no_prof": lambda: loop(False)}, args.rounds)
    print(c.describe("A %%profile median/iter", res["A_km"]))
    print(c.describe("B Timer.timeit(10)/iter", res["B_timer"]))
    print(c.describe("C manual profiled/iter", res["C_manual_prof"]))
    print(c.describe("D manual unprofiled/iter", res["D_no_prof"]))
    a, b, cc, d = (c.median(res[k]) for k in ("A_km", "B_timer", "C_manual_prof",
                                               "D_no_prof"))
    excess, overhead = a - b, cc - d
    margin = MARGIN * min(b, d)
    paired_excess = c.median([p - q for p, q in zip(res["A_km"], res["B_timer"],
                                                    strict=True)])
    paired_overhead = c.median([p - q for p, q in zip(res["C_manual_prof"],
                                                      res["D_no_prof"], strict=True)])
    print(f"  kernelmagic excess over unprofiled (A-B): {c.fmt_time(excess)} "
          f"({100 * excess / b:+.1f}%); paired median {c.fmt_time(paired_excess)}")
    print(f"  profiler overhead (C-D):                  {c.fmt_time(overhead)} "
          f"({100 * overhead / d:+.1f}%); paired median {c.fmt_time(paired_overhead)}")
    print(f"  noise margin ({100 * MARGIN:g}% of unprofiled):     {c.fmt_time(margin)}")
    c.verdict("measured_region", "per-iteration time: kernelmagic excess vs profiler overhead",
              km=a, manual=cc, ratio=a / cc,
              target="A-B <= (C-D) + 3%",
              passed=paired_excess <= paired_overhead + margin,
              note=f"paired medians: excess A-B {c.fmt_time(paired_excess)} "
                   f"({100 * paired_excess / b:+.1f}%), profiler overhead C-D "
                   f"{c.fmt_time(paired_overhead)} ({100 * paired_overhead / d:+.1f}%), "
                   f"margin {c.fmt_time(margin)}; manual column = C (manual profiled "
                   "per-iteration median)")


if __name__ == "__main__":
    main()
