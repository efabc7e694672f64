"""Where a fresh process's ``kernelmagic.load`` of a trace spends its time, phase by phase.

    python tools/trace_load_phases.py [--runs N] [--trace PATH]

``benchmarks/bench_trace_load.py`` judges the whole (``import kernelmagic``, then
``kernelmagic.load(path)`` and its findings, against HolisticTraceAnalysis); this tool
splits the same work into its phases, so that the figures in that benchmark's row of
``benchmarks/README.md`` ("what is left") come from a command. Each run is a fresh
interpreter with bytecode cached (as after ``pip install``; the benchmark's
``installed_env``), taking the steps ``load`` takes, in its order, through the same
functions: the gunzip begun on a thread, the imports meanwhile, then msgspec's reader's
steps one by one (``sources/trace_fast.py: read_table``), the iterations and links, the
views and the findings. The same rounds alternate with the benchmark's own child (a plain
``kernelmagic.load`` and its findings), whose time the phases should add up to; the first
run checks that the step-by-step table equals ``trace_fast.read_table``'s. Dataclass
creation, a part of the imports, is shown apart. The last two lines split each run in two:
the parse (the gunzip's wait, the checks, the decode, the fill), all a faster reader could
save, and the rest (the imports, numpy's among them, and the analysis), which any reader
leaves: a floor for the whole load, to set beside HolisticTraceAnalysis's time.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TRACE = REPO_ROOT / "tests" / "data" / "v100_gpu_annotations.json.gz"

#: The step-by-step load; prints each phase's seconds as JSON. ``check`` compares the
#: table it reads with ``trace_fast.read_table``'s (done once, untimed).
PHASES_CHILD = """\
import dataclasses, json, time
made = [0.0]
_process_class = dataclasses._process_class
def timed_process_class(*args, **kwargs):
    t = time.perf_counter()
    try:
        return _process_class(*args, **kwargs)
    finally:
        made[0] += time.perf_counter() - t
dataclasses._process_class = timed_process_class
marks = [("start", time.perf_counter())]
def mark(name):
    marks.append((name, time.perf_counter()))
from pathlib import Path
import kernelmagic
from kernelmagic.sources import trace_file, trace_text
source = Path({path!r})
trace_file.is_profile_json(source)
text = trace_text.text_ahead(source)
mark("import kernelmagic, gunzip begun")
import numpy
mark("import numpy")
from kernelmagic.sources import trace_fast
from kernelmagic.sources.trace_columns import Columns, trace_meta
mark("import the readers and msgspec")
import kernelmagic.results.builder
from kernelmagic.io import traces
mark("import the views, results and findings' rules")
data = text()
mark("wait for the gunzip")
assert (trace_fast._nesting_within(data, trace_fast.MAX_NESTING) and trace_fast._utf8(data)
        and data.count(b'"traceEvents"') == 1 and trace_fast._COUNTER_TEXT not in data), (
    "this trace takes another path (counter ranges, or the streaming reader): not timed here")
mark("whole-file checks")
records = trace_fast._records(trace_fast.TRACE_FIELDS)
doc = records.decoder.decode(data)
del data
mark("msgspec decode")
cols = Columns()
trace_fast._fill(cols, records, doc.traceEvents)
mark("per-event fill (times to ns included)")
found = {{"deviceProperties": doc.deviceProperties, "distributedInfo": doc.distributedInfo,
         "traceName": doc.traceName}}
table = cols.freeze_relative(trace_meta(source, found))
mark("table frozen")
parts = traces.read_trace(source, reading=lambda: table)  # load's own steps, table given
mark("iterations and links")
result = traces.trace_result(parts)
mark("views (build_result)")
result.findings()
mark("findings")
phases = {{name: t - before for (name, t), (_, before) in zip(marks[1:], marks[:-1])}}
phases["total"] = marks[-1][1] - marks[0][1]
phases["of which dataclass creation"] = made[0]
if {check!r}:
    import numpy as np
    reference = trace_fast.read_table(source)
    same = all(np.array_equal(getattr(table, f), getattr(reference, f))
               for f in ("kind", "name", "start", "end", "tid", "device", "correlation"))
    assert same and table.names == reference.names, "the steps read another table"
print(json.dumps(phases))
"""

#: The phases a reader's work makes up (the rest are imports and analysis).
PARSE_PHASES = ("wait for the gunzip", "whole-file checks", "msgspec decode",
                "per-event fill (times to ns included)", "table frozen")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--trace", type=Path, default=TRACE)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO_ROOT / "benchmarks"))
    from bench_trace_load import KM_CHILD, installed_env, run  # the benchmark's own child

    folder = Path(tempfile.mkdtemp(prefix="km_phases_"))
    cache = Path(tempfile.mkdtemp(prefix="km_pycache_"))
    try:
        path = str(shutil.copy(args.trace, folder / args.trace.name))
        env = installed_env(cache)
        load = KM_CHILD.format(path=path, stub="")
        run(PHASES_CHILD.format(path=path, check=True), env)  # fills the bytecode cache
        run(load, env)
        runs: dict[str, list[float]] = {}
        for _ in range(args.runs):  # alternating, so that both see the same machine
            for name, seconds in run(PHASES_CHILD.format(path=path, check=False), env)[0].items():
                runs.setdefault(name, []).append(seconds)
            runs.setdefault("kernelmagic.load + findings", []).append(run(load, env)[0]["both"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
    print(f"{args.trace.name}: a fresh process each, medians of {args.runs} (ms)")
    for name, values in runs.items():
        print(f"  {statistics.median(values) * 1e3:7.1f}  {name}"
              f"  (min {min(values) * 1e3:.1f}, max {max(values) * 1e3:.1f})")
    print_parse_and_rest(runs)


def print_parse_and_rest(runs: dict[str, list[float]]) -> None:
    """Each run's total split in two, medians: the parse (what a faster reader could save)
    and the rest (what it would still take, whatever the reader)."""
    parse = [sum(runs[phase][i] for phase in PARSE_PHASES) for i in range(len(runs["total"]))]
    rest = [total - p for total, p in zip(runs["total"], parse, strict=True)]
    print(f"  {statistics.median(parse) * 1e3:7.1f}  the parse: {', '.join(PARSE_PHASES)}")
    print(f"  {statistics.median(rest) * 1e3:7.1f}  the rest: what any reader leaves"
          " (imports, iterations and links, views, findings)")


if __name__ == "__main__":
    main()
