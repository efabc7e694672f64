"""Benchmark 5: loading cost, in fresh interpreters (medians of alternating children).

* ``%load_ext kernelmagic`` once torch is imported: the child imports torch and IPython,
  creates an InteractiveShell and runs one cell (not timed), then times
  ``run_cell("%load_ext kernelmagic")``. Manual reference: the seed's setup line
  ``from torch.profiler import ProfilerActivity, profile`` run as a cell the same way.
  Target < 20 ms.
* ``import kernelmagic`` alone (nothing else imported first). Target < 10 ms. Manual
  reference: ``import torch`` (what the manual workflow needs before anything else).
  The child also reports whether torch got imported.

    python benchmarks/bench_loading.py [--rounds N]
"""

from __future__ import annotations

import argparse

import _common as c

LOAD_TARGET = 0.020
IMPORT_TARGET = 0.010

SHELL_CHILD = """\
import json, os, sys, time
os.environ["KINETO_LOG_LEVEL"] = "6"
import torch
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
sh = InteractiveShell.instance()
with capture_output():
    sh.run_cell("pass")
    before = set(sys.modules)
    t0 = time.perf_counter()
    res = sh.run_cell({cell!r})
    t1 = time.perf_counter()
assert res.success
new = sorted(m for m in set(sys.modules) - before if "." not in m)
print(json.dumps({{"seconds": t1 - t0, "new_top_modules": new}}))
"""

IMPORT_CHILD = """\
import json, sys, time
t0 = time.perf_counter()
import {module}
t1 = time.perf_counter()
print(json.dumps({{"seconds": t1 - t0, "torch": "torch" in sys.modules,
                   "modules": len(sys.modules)}}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    c.header("bench_loading: %load_ext kernelmagic and import kernelmagic (fresh processes)")
    info: dict[str, dict] = {}

    def child(key: str, code: str):
        def run() -> float:
            out = c.run_child(code)
            info[key] = out
            return out["seconds"]
        return run

    print("  [load_ext] after import torch + IPython shell")
    load = c.alternate({
        "kernelmagic": child("load_km", SHELL_CHILD.format(cell="%load_ext kernelmagic")),
        "manual": child("load_man", SHELL_CHILD.format(
            cell="from torch.profiler import ProfilerActivity, profile")),
    }, args.rounds)
    print(c.describe("%load_ext kernelmagic", load["kernelmagic"]))
    print(c.describe("manual: import line cell", load["manual"]))
    km, man = c.median(load["kernelmagic"]), c.median(load["manual"])
    c.verdict("loading", "%load_ext kernelmagic (torch already imported)", km=km, manual=man,
              ratio=km / man, target="< 20 ms", passed=km < LOAD_TARGET,
              note="modules newly imported by %load_ext: "
                   + ", ".join(info["load_km"]["new_top_modules"]))

    print("  [import] bare interpreter")
    imp = c.alternate({
        "kernelmagic": child("imp_km", IMPORT_CHILD.format(module="kernelmagic")),
        "manual": child("imp_man", IMPORT_CHILD.format(module="torch")),
    }, args.rounds)
    print(c.describe("import kernelmagic", imp["kernelmagic"]))
    print(c.describe("manual: import torch", imp["manual"]))
    km, man = c.median(imp["kernelmagic"]), c.median(imp["manual"])
    c.verdict("loading", "import kernelmagic (fresh interpreter)", km=km, manual=man,
              ratio=km / man, target="< 10 ms", passed=km < IMPORT_TARGET,
              note=f"torch imported by it: {info['imp_km']['torch']}; manual = import torch")


if __name__ == "__main__":
    main()
