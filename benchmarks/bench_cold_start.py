"""Benchmark 2: cold start, the first profile in a fresh process with torch imported.

Each measurement is a fresh interpreter that imports torch and builds the seed's Block
(not timed), then times, up to results ready:

* plain API -- kernelmagic: ``import kernelmagic``; ``kernelmagic.profile(fwd, iters=10,
  warmup=3)``; ``result.table()``.  manual: 3 warm-up forwards, the process's first
  ``torch.profiler.profile(activities=[CPU])`` over 10 forwards, ``key_averages()``,
  ``.table()``.
* magic -- both in a fresh InteractiveShell (created before the clock starts) with output
  captured: ``%load_ext kernelmagic`` + ``%%profile -n 10 -w 3`` (text, HTML+PNG and the
  widget built) vs the manual cell of ``bench_warm_cell.py``.

kernelmagic and manual children alternate; figures are medians, the ratio judged is the
median of the per-round ratios.
Target: kernelmagic / manual <= 0.9 (for both variants).

    python benchmarks/bench_cold_start.py [--rounds N]
"""

from __future__ import annotations

import argparse

import _common as c
from _workloads import manual_profile
from bench_warm_cell import KM_CELL, MANUAL_CELL

TARGET = 0.9

PRELUDE = """\
import json, os, sys, time
os.environ["KINETO_LOG_LEVEL"] = "6"
sys.path.insert(0, {bench_dir!r})
import torch
from _workloads import block_and_input
block, x = block_and_input()
def fwd():
    with torch.inference_mode():
        block(x)
"""

API_KM = """\
t0 = time.perf_counter()
import kernelmagic
result = kernelmagic.profile(fwd, iters=10, warmup=3)
table = result.table()
t1 = time.perf_counter()
assert result.rows and "aten::" in table
"""

API_MANUAL = "t0 = time.perf_counter()\n" + manual_profile() + """\
table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
t1 = time.perf_counter()
assert "aten::" in table
"""

SHELL_SETUP = """\
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
sh = InteractiveShell.instance()
sh.user_ns.update(block=block, x=x, torch=torch)
with capture_output():
    sh.run_cell("pass")
"""

MAGIC_KM = """\
t0 = time.perf_counter()
with capture_output(display=True) as cap:
    r1 = sh.run_cell("%load_ext kernelmagic")
    r2 = sh.run_cell({cell!r})
t1 = time.perf_counter()
assert r1.success and r2.success, cap.stderr
assert any("text/html" in o.data for o in cap.outputs)
"""

MAGIC_MANUAL = """\
t0 = time.perf_counter()
with capture_output(display=True) as cap:
    r2 = sh.run_cell({cell!r})
t1 = time.perf_counter()
assert r2.success, cap.stderr
"""

EPILOGUE = """\
print(json.dumps({"seconds": t1 - t0,
                  "inductor": "torch._inductor" in sys.modules}))
"""


def program(*parts: str) -> str:
    return PRELUDE.format(bench_dir=str(c.BENCH_DIR)) + "".join(parts) + EPILOGUE


PROGRAMS = {
    "api": {"kernelmagic": program(API_KM), "manual": program(API_MANUAL)},
    "magic": {
        "kernelmagic": program(SHELL_SETUP, MAGIC_KM.format(cell=KM_CELL)),
        "manual": program(SHELL_SETUP, MAGIC_MANUAL.format(cell=MANUAL_CELL)),
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    c.header("bench_cold_start: first profile in a fresh process (torch already imported)",
             "    workload: seed Block, 3 warm-up + 10 profiled forwards; fresh subprocesses")
    inductor: dict[str, set[bool]] = {}

    def side(variant: str, who: str):
        def run() -> float:
            out = c.run_child(PROGRAMS[variant][who])
            inductor.setdefault(f"{variant}/{who}", set()).add(out["inductor"])
            return out["seconds"]
        return run

    results = []
    for variant, label in (("api", "plain API: kernelmagic.profile + table()"),
                           ("magic", "magic: %load_ext + %%profile rendered")):
        print(f"  [{variant}] {label}")
        times = c.alternate({"kernelmagic": side(variant, "kernelmagic"),
                             "manual": side(variant, "manual")}, args.rounds)
        print(c.describe("kernelmagic", times["kernelmagic"]))
        print(c.describe("manual", times["manual"]))
        km, man = c.median(times["kernelmagic"]), c.median(times["manual"])
        ratio = c.paired_ratio(times["kernelmagic"], times["manual"])
        note = (f"median of per-round ratios (ratio of medians {km / man:.3f}); "
                f"{args.rounds} fresh processes per side, alternating; torch._inductor "
                f"imported: kernelmagic={sorted(inductor[variant + '/kernelmagic'])}, "
                f"manual={sorted(inductor[variant + '/manual'])}")
        results.append(c.verdict("cold_start", f"cold start, {label}", km=km, manual=man,
                                 ratio=ratio, target=f"<= {TARGET}",
                                 passed=ratio <= TARGET, note=note))


if __name__ == "__main__":
    main()
