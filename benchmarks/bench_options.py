"""Profiler overhead of each view option (issue 4), measured side by side in one process.

    python benchmarks/bench_options.py [--rounds N] [--roofline-only] [--memory-only]
                                       [--python-only]

For the seed's Block and for a cell of many small ops, each option's median per-iteration
time (``result.stats.median``, the profiled iterations' wall time) is divided by that of
a plain ``%%profile`` taken in the same rounds (options alternate in rotating order).
Prints a markdown table for the README's options table. It is a report: exit code 0.

``--roofline`` also runs the cell once more, outside the measured region: its cost is
measured end to end (the whole ``kernelmagic.profile`` call with and without it, and one
plain run of the cell, alternating), against the target "one extra run of the cell and
at most 10% on top".

``--memory`` is also measured end to end on the Block and on a training step (Linear
512->2048->512, AdamW, batch 64), and with ``--memory-only`` on the 400-small-ops cell too:
the whole ``kernelmagic.profile`` call, the category analysis included, against the same
call without ``--memory`` (target: 1.3x).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import alternate, fmt_time, header, median
from _workloads import block_and_input, training_step

OPTIONS: dict[str, dict[str, object]] = {
    "(none)": {},
    "--memory": {"memory": True},
    "--shapes": {"shapes": True},
    "--flops": {"flops": True},
    "--stack": {"stack": True},
    "--python": {"python": True},
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
    parser.add_argument("--memory-only", action="store_true",
                        help="only --memory's cost, per iteration and end to end")
    parser.add_argument("--python-only", action="store_true",
                        help="only --python's cost per iteration (target: at most 1.05x "
                             "to be on by default)")
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
    if args.memory_only:
        memory_cost({"Block": lambda: block(x), "training step": training_step(),
                     "400 small ops": many_small}, args.rounds)
        return
    if args.roofline_only:
        with torch.inference_mode():
            roofline_cost(workloads, args.rounds)
        return
    options = ({o: OPTIONS[o] for o in ("(none)", "--python")} if args.python_only
               else OPTIONS)
    trace = str(Path(tempfile.mkdtemp()) / "trace.json")
    table: dict[str, dict[str, float]] = {}
    with torch.inference_mode():
        for wname, fn in workloads.items():
            print(f"  {wname}:", flush=True)

            def side(opts: dict[str, object], fn=fn) -> float:
                kwargs = {k: (trace if v == "TRACE" else v) for k, v in opts.items()}
                return kernelmagic.profile(fn, iters=5, warmup=2, **kwargs).stats.median

            runs = alternate({o: (lambda o=o: side(options[o])) for o in options},
                             rounds=args.rounds, progress=False)
            base = median(runs["(none)"])
            table[wname] = {o: median(v) / base for o, v in runs.items()}
            for o, v in runs.items():
                print(f"    {o:<11} {fmt_time(median(v)):>9}   {median(v) / base:.2f}x")
            if args.python_only:  # a loaded machine: each round's ratio, then their median
                paired = [p / b for p, b in zip(runs["--python"], runs["(none)"], strict=True)]
                print(f"    --python / (none), median of the {len(paired)} rounds' ratios: "
                      f"{median(paired):.2f}x")
    if args.python_only:
        return
    with torch.inference_mode():
        roofline_cost(workloads, args.rounds)
    memory_cost({"Block": lambda: block(x), "training step": training_step()}, args.rounds)
    print("\n| option | " + " | ".join(workloads) + " |")
    print("|---|" + "---|" * len(workloads))
    for o in OPTIONS:
        print(f"| `{o}` | " + " | ".join(f"{table[w][o]:.2f}x" for w in workloads) + " |")


def memory_cost(workloads: dict[str, object], rounds: int) -> None:
    """--memory against a plain run: per-iteration median and the whole call (its
    category analysis included), alternating. The training step runs with autograd, the
    others in inference mode."""
    import time

    import torch

    import kernelmagic

    print("\n  --memory (iters=5, warmup=2): per iteration and end to end (target <= 1.3x)")
    for wname, fn in workloads.items():
        mode = torch.enable_grad if wname == "training step" else torch.inference_mode

        def call(fn=fn, mode=mode, **kw: object) -> tuple[float, float]:
            with mode():
                start = time.perf_counter()
                result = kernelmagic.profile(fn, iters=5, warmup=2, **kw)
                return result.stats.median, time.perf_counter() - start

        pairs = alternate({"plain": call, "memory": lambda call=call: call(memory=True)},
                          rounds=max(rounds, 7), progress=False)
        per_iter = median([m[0] / p[0] for p, m in
                           zip(pairs["plain"], pairs["memory"], strict=True)])
        whole = median([m[1] / p[1] for p, m in
                         zip(pairs["plain"], pairs["memory"], strict=True)])
        plain = median([p[1] for p in pairs["plain"]])
        mem = median([m[1] for m in pairs["memory"]])
        print(f"    {wname:<14} per iteration {per_iter:.2f}x   whole call {whole:.2f}x "
              f"({fmt_time(plain)} -> {fmt_time(mem)}; median of per-round ratios)")


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
