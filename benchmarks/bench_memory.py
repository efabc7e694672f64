"""Benchmark 6: memory over 200 consecutive ``%%profile`` runs of the Block.

One InteractiveShell runs ``%%profile -n 2 -w 1`` (small counts to keep it fast; the
report -- text, HTML + PNG, widget -- is built every time) 200 times on the seed's Block,
as history-storing cells with output captured and discarded. RSS (psutil if installed,
else /proc/self/status VmRSS) is read after a ``gc.collect()`` after run 20 and after
run 200. Target: growth < 30 MB. For diagnosis, RSS is read again after glibc's
``malloc_trim(0)`` at those two points: growth that survives it is live memory, the
rest is freed heap the allocator had kept. Also reported: live ipywidgets
(``ipywidgets.widgets.widget._instances``) and, for reference, the manual workflow's
RSS growth over the same number of runs of its cell in the same process.

    python benchmarks/bench_memory.py [--runs N] [--iters N] [--warmup N] [--no-manual]
"""

from __future__ import annotations

import argparse
import gc

import _common as c
from _workloads import BLOCK_STMT, block_and_input, manual_profile

TARGET_MB = 30.0

MANUAL_TABLE = 'print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))\n'


def live_widgets() -> int:
    from ipywidgets.widgets import widget

    return len(widget._instances)


def mb(n: int) -> float:
    return n / 2**20


def malloc_trim() -> bool:
    """Return freed heap memory to the OS (glibc only); False where unavailable."""
    try:
        import ctypes

        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0) or True)
    except (OSError, AttributeError):
        return False


def series(cell: str, runs: int, first: int, label: str) -> dict[str, int]:
    """RSS (bytes, before and after malloc_trim) and live widgets at run ``first``/``runs``."""
    out: dict[str, int] = {}
    t0 = c.clock()
    for i in range(1, runs + 1):
        c.run_cell(cell, store_history=True)
        if i == first or i == runs or i % 50 == 0:
            gc.collect()
            rss, wid = c.rss_bytes(), live_widgets()
            trimmed = c.rss_bytes() if i in (first, runs) and malloc_trim() else rss
            if i in (first, runs):
                tag = "first" if i == first else "last"
                out.update({f"rss_{tag}": rss, f"trim_{tag}": trimmed, f"wid_{tag}": wid})
            print(f"    {label} run {i:>3}: RSS {mb(rss):7.1f} MB"
                  + (f" ({mb(trimmed):.1f} after malloc_trim)" if trimmed != rss else "")
                  + f", live widgets {wid:>6}, {c.fmt_time(c.clock() - t0)} elapsed",
                  flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--first", type=int, default=20)
    parser.add_argument("--iters", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--no-manual", action="store_true",
                        help="skip the manual workflow's reference series")
    args = parser.parse_args()
    c.header(f"bench_memory: {args.runs} consecutive %%profile -n {args.iters} "
             f"-w {args.warmup} runs of the Block")
    block, x = block_and_input()
    sh = c.shell()
    sh.user_ns.update(block=block, x=x, torch=__import__("torch"))
    c.run_cell("%load_ext kernelmagic")
    km_cell = f"%%profile -n {args.iters} -w {args.warmup}\n" + BLOCK_STMT
    rss0 = c.rss_bytes()
    km = series(km_cell, args.runs, args.first, "kernelmagic")
    growth = mb(km["rss_last"] - km["rss_first"])
    trimmed = mb(km["trim_last"] - km["trim_first"])
    w_first, w_last = km["wid_first"], km["wid_last"]
    per_run = (w_last - w_first) / (args.runs - args.first)
    man_growth = None
    if not args.no_manual:
        man = series(manual_profile(args.warmup, args.iters) + MANUAL_TABLE,
                     args.runs, args.first, "manual     ")
        man_growth = mb(man["rss_last"] - man["rss_first"])
    print(f"  RSS before the first run {mb(rss0):.1f} MB; kernelmagic growth runs "
          f"{args.first}->{args.runs}: {growth:.1f} MB "
          f"({1024 * growth / (args.runs - args.first):.0f} KB/run); measured after "
          f"malloc_trim(0) (freed heap handed back): {trimmed:.1f} MB")
    print(f"  live ipywidgets: {w_first} after run {args.first}, {w_last} after run "
          f"{args.runs} ({per_run:+.1f} per run)")
    c.verdict("memory", f"RSS growth, %%profile runs {args.first} -> {args.runs}",
              km=growth, manual=man_growth, unit="MB", target=f"< {TARGET_MB:g} MB",
              passed=growth < TARGET_MB,
              note=f"-n {args.iters} -w {args.warmup}; {trimmed:.1f} MB after malloc_trim; "
                   f"live widgets {w_first} -> {w_last}; manual = the seed cell repeated "
                   "in the same process, after kernelmagic")


if __name__ == "__main__":
    main()
