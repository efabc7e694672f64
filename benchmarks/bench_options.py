"""Profiler overhead of each view option (issue 4), measured side by side in one process.

    python benchmarks/bench_options.py [--rounds N] [--roofline-only]

For the seed's Block and for a cell of many small ops, each option's median per-iteration
time (``result.stats.median``, the profiled iterations' wall time) is divided by that of
a plain ``%%profile`` taken in the same rounds (options alternate in rotating order).
Prints a markdown table for the README's options table. It is a report: exit code 0.

``--roofline`` also runs the cell once more, outside the measured region: its cost is
measured end to end (the whole ``kernelmagic.profile`` call with and without it, and one
plain run of the cell, alternating), against the target "one extra run of the cell and
at most 10% on top".
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import alternate, fmt_time, header, median
from _workloads import block_and_input

OPTIONS: dict[str, dict[str, object]] = {
    "(none)": {},
    "--memory": {"memory": True},
    "--shapes": {"shapes": True},
    "--flops": {"flops": True},
    "--stack": {"stack": True},
    "--modules": {"modules": True},
    "--timeline": {"timeline": True},
    "--roofline": {"roofline": True},
    "--trace": {"trace": "TRACE", "force": True},
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--roofline-only", action="store_true",
                        help="only the end-to-end cost of --roofline")
    args = parser.parse_args()
    import torch

    import kernelmagic

    header("option overhead", "per-iteration median with each option / without (same rounds)")
    block, x = block_and_input()
    small = torch.randn(16)

    def many_small() -> None:
        a = small
        for _ in range(200):
            a = a.add(1).mul(0.5)

    workloads = {"Block": lambda: block(x), "400 small ops": many_small}
    if args.roofline_only:
        with torch.inference_mode():
            roofline_cost(workloads, args.rounds)
        return
    trace = str(Path(tempfile.mkdtemp()) / "trace.json")
    table: dict[str, dict[str, float]] = {}
    with torch.inference_mode():
        for wname, fn in workloads.items():
            print(f"  {wname}:", flush=True)

            def side(opts: dict[str, object], fn=fn) -> float:
                kwargs = {k: (trace if v == "TRACE" else v) for k, v in opts.items()}
                return kernelmagic.profile(fn, iters=5, warmup=2, **kwargs).stats.median

            runs = alternate({o: (lambda o=o: side(OPTIONS[o])) for o in OPTIONS},
                             rounds=args.rounds, progress=False)
            base = median(runs["(none)"])
            table[wname] = {o: median(v) / base for o, v in runs.items()}
            for o, v in runs.items():
                print(f"    {o:<11} {fmt_time(median(v)):>9}   {median(v) / base:.2f}x")
    with torch.inference_mode():
        roofline_cost(workloads, args.rounds)
    print("\n| option | " + " | ".join(workloads) + " |")
    print("|---|" + "---|" * len(workloads))
    for o in OPTIONS:
        print(f"| `{o}` | " + " | ".join(f"{table[w][o]:.2f}x" for w in workloads) + " |")


def roofline_cost(workloads: dict[str, object], rounds: int) -> None:
    """Whole-call wall time with --roofline vs without, less one run of the cell."""
    import time

    import kernelmagic

    kernelmagic.peaks()  # measured once per process: not part of any run's cost
    print("\n  --roofline end to end (whole profile() call, iters=5, warmup=2):")
    for wname, fn in workloads.items():
        def call(fn=fn, **kw: object) -> float:
            start = time.perf_counter()
            kernelmagic.profile(fn, iters=5, warmup=2, **kw)
            return time.perf_counter() - start

        def one_run(fn=fn) -> float:
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start

        runs = alternate({"plain": call, "roofline": lambda call=call: call(roofline=True),
                          "one run": one_run}, rounds=max(rounds, 9), progress=False)
        plain, roof, run = (median(runs[k]) for k in ("plain", "roofline", "one run"))
        # Per round (the three measured back to back), then the median: load swings
        # on a shared machine move all three together.
        on_top = median([(r - p - o) / p for p, r, o in
                         zip(runs["plain"], runs["roofline"], runs["one run"], strict=True)])
        print(f"    {wname:<14} plain {fmt_time(plain):>9}   --roofline {fmt_time(roof):>9}   "
              f"one run {fmt_time(run):>9}   on top of one run: {on_top:+.1%} "
              f"(median of per-round figures; target <= +10%)")


if __name__ == "__main__":
    main()
