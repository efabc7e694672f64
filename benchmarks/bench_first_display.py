"""Benchmark: the report's first display, this checkout against another (#47, item 4).

``bench_panel.py`` compares the widget with and without its row pickers inside one
checkout; this one compares whole checkouts, so a change anywhere in the display (the
pickers, a tab selector no longer made, ...) is in the figure. Each round runs one child
process per checkout, in alternating order, with ``PYTHONPATH`` pointing at it; each child
builds ``mime_bundle`` (text, HTML, chart, widget, in an ``InteractiveShell``) of two results
25 times after 3 warm-ups and reports the medians: a live CPU cell (a two-layer MLP, 5
iterations) and the V100 trace of ``tests/data``. Target: this checkout at most 1.03x the
other (the median of the rounds' ratios).

    git worktree add /tmp/before <rev>
    python benchmarks/bench_first_display.py --before /tmp/before [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import _common as c

HERE = Path(__file__).resolve().parents[1]
TARGET = 1.03

CHILD = """\
import os, sys, time, statistics, json
os.environ["KINETO_LOG_LEVEL"] = "6"
import torch, kernelmagic
from IPython.core.interactiveshell import InteractiveShell
from kernelmagic.render.bundle import mime_bundle
InteractiveShell.instance()
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 256))
x = torch.randn(64, 256)
cpu = kernelmagic.profile(lambda: m(x), iters=5, warmup=1)
v100 = kernelmagic.load(sys.argv[1] + "/tests/data/v100_gpu_annotations.json.gz")
out = {}
for name, r in (("cpu cell", cpu), ("v100 trace", v100)):
    for _ in range(3):
        mime_bundle(r)
    times = []
    for _ in range(25):
        t = time.perf_counter(); mime_bundle(r); times.append(time.perf_counter() - t)
    out[name] = statistics.median(times)
print(json.dumps(out))
"""


def child(root: Path) -> dict[str, float]:
    env = {**c.child_env(), "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(root)], env=env, cwd="/",
                          capture_output=True, text=True, timeout=600, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the other checkout")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    c.header("bench_first_display: the report's first display, this checkout vs --before",
             f"    before: {args.before}  after: {HERE}  (load average "
             f"{os.getloadavg()[0]:.1f})")
    ratios: dict[str, list[float]] = {}
    for r in range(args.rounds):
        order = [("before", args.before), ("after", HERE)]
        got = {side: child(root) for side, root in (order if r % 2 == 0 else order[::-1])}
        for name in got["after"]:
            ratios.setdefault(name, []).append(got["after"][name] / got["before"][name])
            print(f"  round {r + 1} {name}: before {got['before'][name] * 1000:.2f} ms, "
                  f"after {got['after'][name] * 1000:.2f} ms", flush=True)
    for name, values in ratios.items():
        ratio = statistics.median(values)
        c.verdict("bench_first_display", f"first display after / before ({name})", km=ratio,
                  unit="x", target=f"<= {TARGET}", passed=ratio <= TARGET,
                  note=f"rounds' ratios {', '.join(f'{v:.3f}' for v in values)}")


if __name__ == "__main__":
    main()
