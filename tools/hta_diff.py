"""kernelmagic beside HolisticTraceAnalysis on the same traces: kernel time per name, GPU
busy, and the median iteration's critical path (issue #43, item 8).

    python tools/hta_diff.py [TRACE ...] [--markdown] [--json OUT]

Default traces: ``tests/data/*.json.gz`` and ``../shared/traces/*.json.gz`` (one of each
content). Needs HolisticTraceAnalysis 0.5 with pandas < 3 (``pip install -e ".[hta]"``;
under pandas 3 HTA's ``critical_path_analysis`` raises "Cannot specify both 'axis' and
'index'/'columns'", and the tool says so in the path's column). A differential check, not
a test: HTA is no test dependency. For each trace:

* **kernel time per name**: kernelmagic's ``result.kernels`` (summed by name) against the
  events of HTA's parsed trace that have a stream, summed by name (what its
  ``get_gpu_kernel_breakdown`` sums), with the difference split into what HTA's own
  filters do, computed here from the raw JSON: the GPU work launched in the last
  ``ProfilerStep`` (``TraceAnalysis`` drops it: ``include_last_profiler_step=False``), GPU
  work whose launch is not in the trace (its filter keeps what a CPU event launched), the
  rounding of ns timestamps to whole µs (``round_down_time_stamps``: start up, end down),
  and, the other way, events with a ``stream`` that are not GPU work (a Triton launcher's
  ``cpu_op`` carries ``args.stream``); what is left is "unexplained".
* **GPU busy and idle**: kernelmagic's (``result.gpu_busy`` summed; the breakdown's idle
  times the iterations) beside HTA's ``get_temporal_breakdown``.
* **the critical path** of the iteration kernelmagic models (its median one:
  ``find_iterations`` and ``build_result``'s median rule, recomputed here, as the result
  does not name it), by HTA's ``critical_path_analysis(rank, annotation, instance_id)``
  on that iteration's annotation (``""``, the whole trace, when kernelmagic's window is the
  whole trace), its length and its composition by HTA's ``bound_by`` (CPU time split by
  the event it is attributed to: op or runtime call) beside ``result.critical_path``'s
  categories.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import logging
import math
import sys
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_GLOBS = (REPO_ROOT / "tests" / "data", REPO_ROOT.parent / "shared" / "traces")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")

#: The path's rows, kernelmagic's categories and HTA's (``bound_by``, and for CPU time the
#: category of the event the edge is attributed to) side by side.
ROWS = (
    ("CPU: ops' own time", ("CPU ops", None), ("cpu_bound", "cpu_op")),
    ("CPU: runtime calls", ("launches", "call"), ("cpu_bound", "cuda_runtime")),
    ("CPU: ranges, Python, outside ops", ("CPU outside ops", None), ("cpu_bound", "other")),
    ("launch latency", ("launches", "latency"), ("gpu_kernel_launch_overhead", None)),
    ("GPU work", ("GPU work", None), ("gpu_compute_bound", None)),
    ("GPU communication", (None, None), ("gpu_communication_bound", None)),
    ("gaps between GPU work, idle", ("idle", None), ("gpu_kernel_kernel_overhead", None)),
    ("waiting on syncs", ("waiting on syncs", None), (None, None)),
)


@dataclass
class Side:
    """One tool's figures on one trace (µs)."""

    kernels: dict[str, float] = field(default_factory=dict)  # time per kernel name
    gpu_busy: float | None = None
    gpu_idle: float | None = None
    counted_not_gpu: float = 0.0  # HTA: events with a stream that are not GPU work
    not_gpu_names: list[str] = field(default_factory=list)
    window: float | None = None  # the iteration the path describes
    path: float | None = None  # the critical path's length
    parts: dict[str, float] = field(default_factory=dict)  # ROWS label -> µs
    note: str = ""


@dataclass
class Diff:
    trace: str
    events: int
    iteration: str  # the annotation of kernelmagic's median iteration ("": whole trace)
    iterations: int
    km: Side
    hta: Side
    explained: dict[str, float] = field(default_factory=dict)  # HTA's filters, µs
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def kernel_total(self) -> tuple[float, float]:
        return sum(self.km.kernels.values()), sum(self.hta.kernels.values())


# --- kernelmagic --------------------------------------------------------------------------


def km_side(path: Path) -> tuple[Side, str, int]:
    """kernelmagic's figures, the annotation of its median iteration, its iterations."""
    import kernelmagic
    from kernelmagic.core.events import Kind
    from kernelmagic.io.traces import read_trace
    from kernelmagic.results.builder import median_index

    result = kernelmagic.load(path)
    side = Side()
    for row in result.kernels:
        side.kernels[row.key] = side.kernels.get(row.key, 0.0) + row.device_time_total
    side.gpu_busy = sum(result.gpu_busy) if result.gpu_busy else 0.0
    side.gpu_idle = result.breakdown.idle * result.iters if result.breakdown else None
    parts = read_trace(path)  # the same iterations load found (result does not name them)
    windows = parts.iterations.windows
    median = median_index(parts.iterations.timings)
    annotation = ""
    if parts.iterations.source != "whole trace" and windows:
        start, end = windows[median]
        table = parts.table
        marks = (table.kind == Kind.STEP) | (table.kind == Kind.RANGE)
        for i in marks.nonzero()[0].tolist():
            if int(table.start[i]) == start and int(table.end[i]) == end:
                annotation = table.names[int(table.name[i])]
                break
    side.window = result.stats.median * 1e6 if result.iters else None
    if result.critical_path:
        side.path = sum(r.time for r in result.critical_path)
        for label, (category, which), _ in ROWS:
            side.parts[label] = sum(
                r.time for r in result.critical_path if r.category == category and (
                    which is None or (which == "latency") == (r.key == "")))
    else:
        side.note = "no critical path (no GPU work, or no iteration)"
    return side, annotation, len(windows)


# --- HTA ----------------------------------------------------------------------------------


def hta_side(path: Path, annotation: str, whole: bool) -> Side:
    """HTA's figures: its parsed kernels, and its critical path on ``annotation``'s
    instance (the whole trace when ``whole``)."""
    import shutil
    import tempfile

    from hta.trace_analysis import TraceAnalysis

    folder = Path(tempfile.mkdtemp(prefix="hta_diff_"))
    try:
        shutil.copy(path, folder / path.name)
        analysis = TraceAnalysis(trace_dir=str(folder))
        rank = next(iter(analysis.t.traces))
        df = analysis.t.get_trace(rank)
        names = analysis.t.symbol_table.get_sym_table()
        side = Side()
        gpu = df[df["stream"].ne(-1)]  # what get_gpu_kernel_breakdown sums as kernels
        for name, dur in gpu.groupby("name")["dur"].sum().items():
            side.kernels[names[name]] = float(dur)
        if len(gpu):
            not_gpu = gpu[~gpu["cat"].map(lambda c: names[c] in GPU_CATS).astype(bool)]
            side.counted_not_gpu = float(not_gpu["dur"].sum())
            side.not_gpu_names = sorted({names[n] for n in not_gpu["name"].tolist()})
        try:  # its kernel_time is first kernel to last: idle + compute + non-compute
            temporal = analysis.get_temporal_breakdown(visualize=False)
            side.gpu_busy = float(temporal["compute_time(us)"].sum()
                                  + temporal["non_compute_time(us)"].sum())
            side.gpu_idle = float(temporal["idle_time(us)"].sum())
        except Exception as error:  # no kernels at all
            side.note = f"get_temporal_breakdown failed: {type(error).__name__}"
        if not whole and not annotation:
            side.note = (side.note + "; " if side.note else "") + (
                "kernelmagic's iteration has no annotation HTA could select")
            return side
        try:
            _hta_path(analysis, rank, df, names, annotation, side)
        except Exception as error:  # HTA's own failure: said in the table, not fatal
            side.note = f"critical_path_analysis failed: {type(error).__name__}: {error}"[:300]
        return side
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _hta_path(analysis: Any, rank: int, df: Any, names: list[str], annotation: str,
              side: Side) -> None:
    """HTA's critical path on ``annotation`` (exact name) into ``side``."""
    if annotation:
        ids = {i for i, n in enumerate(names) if annotation in n}
        rows = df[df["name"].isin(ids)]  # as HTA selects instances: trace order
        exact = [k for k, name in enumerate(rows["name"].tolist()) if names[name] == annotation]
        if not exact:
            side.note = f"HTA dropped {annotation} (its last ProfilerStep filter)"
            return
        instance = exact[0]
        side.window = float(rows["dur"].iloc[instance])
    else:
        instance = 0
        side.window = float((df["ts"] + df["dur"]).max() - df["ts"].min())
    found = analysis.critical_path_analysis(rank, annotation, instance)
    if found is None or not found[1]:
        side.note = "critical_path_analysis found no path"
        return
    edges = found[0].get_critical_path_breakdown()
    side.path = float(edges["duration"].sum())
    for label, _, (bound, cat) in ROWS:
        if bound is None:
            continue
        chosen = edges[edges["bound_by"] == bound]
        cats = chosen["cat"].map(lambda c: names[int(c)] if c == c else "")  # symbol ids
        if cat == "other":
            chosen = chosen[~cats.isin(["cpu_op", "cuda_runtime", "cuda_driver"])]
        elif cat == "cuda_runtime":
            chosen = chosen[cats.isin(["cuda_runtime", "cuda_driver"])]
        elif cat is not None:
            chosen = chosen[cats == cat]
        side.parts[label] = float(chosen["duration"].sum())


# --- what HTA's filters leave out, from the raw JSON ---------------------------------------


def explained(path: Path) -> dict[str, float]:
    """GPU time (µs) each of HTA's filters leaves out, computed from the raw events."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    xs = [e for e in events if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    gpu = [e for e in xs if e.get("cat") in GPU_CATS]
    launches = {(e.get("args") or {}).get("correlation"): e for e in xs
                if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    steps = sorted((e for e in xs if str(e.get("name", "")).startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    last_start = steps[-1]["ts"] if len(steps) > 1 else math.inf
    out = {"launch not in the trace": 0.0, "launched in the last ProfilerStep": 0.0,
           "ns rounded to µs": 0.0}
    for e in gpu:
        launch = launches.get((e.get("args") or {}).get("correlation"))
        if len(steps) > 1 and launch is None:
            out["launch not in the trace"] += e["dur"]
        elif launch is not None and launch["ts"] >= last_start:
            out["launched in the last ProfilerStep"] += e["dur"]
        else:
            end = e["ts"] + e["dur"]
            if isinstance(e["ts"], float) or isinstance(e["dur"], float):
                out["ns rounded to µs"] += e["dur"] - max(0, math.floor(end) - math.ceil(e["ts"]))
    return out


# --- the comparison -----------------------------------------------------------------------


def compare(path: Path) -> Diff:
    t0 = time.perf_counter()
    km, annotation, iterations = km_side(path)
    t1 = time.perf_counter()
    hta = hta_side(path, annotation, whole=iterations <= 1 and not annotation)
    t2 = time.perf_counter()
    with gzip.open(path, "rt") as f:
        n = len(json.load(f)["traceEvents"])
    reasons = explained(path)
    reasons["events with a stream, not kernel/memcpy/memset"] = -hta.counted_not_gpu
    return Diff(path.name, n, annotation, iterations, km, hta, reasons,
                {"kernelmagic": t1 - t0, "HTA": t2 - t1})


def _pct(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{a / b:.1%}"


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v / 1000:,.2f} ms" if abs(v) >= 1000 else f"{v:,.1f} µs"


def kernel_lines(d: Diff) -> list[str]:
    """Kernel time agreement and the differences' reasons."""
    km_total, hta_total = d.kernel_total
    diff = km_total - hta_total
    names = set(d.km.kernels) | set(d.hta.kernels)
    same = sum(1 for k in names if abs(d.km.kernels.get(k, 0) - d.hta.kernels.get(k, 0)) < 0.5)
    out = [f"kernel time: kernelmagic {_us(km_total)}, HTA {_us(hta_total)}, difference "
           f"{_us(diff)} ({_pct(diff, km_total)} of kernelmagic's); {same} of {len(names)} "
           "names within 0.5 µs"]
    reasons = {k: v for k, v in d.explained.items() if abs(v) > 0.05}
    if reasons:
        out.append("  HTA's filters: " + "; ".join(
            f"{k} {_us(v)}" for k, v in reasons.items())
            + f"; unexplained {_us(diff - sum(reasons.values()))}")
    if d.hta.not_gpu_names:
        out.append("  HTA counts as kernels these events with a stream: "
                   f"{', '.join(d.hta.not_gpu_names)[:200]}")
    out.append(f"GPU busy: kernelmagic {_us(d.km.gpu_busy)} (idle {_us(d.km.gpu_idle)}), "
               f"HTA's temporal breakdown {_us(d.hta.gpu_busy)} (idle {_us(d.hta.gpu_idle)})")
    return out


def path_rows(d: Diff) -> list[tuple[str, str, str]]:
    """(row, kernelmagic, HTA) of the path's table: µs and share of the path."""
    def cell(side: Side, label: str, present: bool) -> str:
        if side.path is None or not present:
            return "-"
        v = side.parts.get(label, 0.0)
        return f"{_us(v)} ({_pct(v, side.path)})"

    rows = [("iteration (the window the path describes)", _us(d.km.window), _us(d.hta.window)),
            ("critical path length", _us(d.km.path), _us(d.hta.path))]
    rows += [(label, cell(d.km, label, km[0] is not None), cell(d.hta, label, hta[0] is not None))
             for label, km, hta in ROWS]
    return rows


def print_text(d: Diff) -> None:
    it = d.iteration or "the whole trace"
    print(f"\n=== {d.trace}: {d.events:,} events, {d.iterations} iteration(s); the path of "
          f"{it} (kernelmagic {d.seconds['kernelmagic']:.1f} s, HTA {d.seconds['HTA']:.1f} s)")
    for line in kernel_lines(d):
        print(line)
    width = max(len(r[0]) for r in path_rows(d))
    print(f"{'critical path':<{width}}  {'kernelmagic':>22}  {'HTA':>22}")
    for label, a, b in path_rows(d):
        print(f"{label:<{width}}  {a:>22}  {b:>22}")
    for who, side in (("kernelmagic", d.km), ("HTA", d.hta)):
        if side.note:
            print(f"  {who}: {side.note}")


def print_markdown(diffs: list[Diff]) -> None:
    print("| trace | kernel time: kernelmagic | HTA | difference | HTA's filters explain |")
    print("|---|---|---|---|---|")
    for d in diffs:
        km_total, hta_total = d.kernel_total
        reasons = "; ".join(f"{k} {_us(v)}" for k, v in d.explained.items() if abs(v) > 0.05)
        print(f"| `{d.trace}` | {_us(km_total)} | {_us(hta_total)} | "
              f"{_us(km_total - hta_total)} | {reasons or '-'} |")
    for d in diffs:
        if d.km.path is None and d.hta.path is None:
            continue
        print(f"\n`{d.trace}`, the path of {d.iteration or 'the whole trace'}:\n")
        print("| | kernelmagic | HTA |\n|---|---|---|")
        for label, a, b in path_rows(d):
            print(f"| {label} | {a} | {b} |")
        for who, side in (("kernelmagic", d.km), ("HTA", d.hta)):
            if side.note:
                print(f"\n{who}: {side.note}")


def default_traces() -> list[Path]:
    """``tests/data`` and ``../shared/traces``, one path per distinct content."""
    seen: dict[str, Path] = {}
    for folder in DEFAULT_GLOBS:
        for path in sorted(folder.glob("*.json.gz")):
            seen.setdefault(hashlib.sha256(path.read_bytes()).hexdigest(), path)
    return list(seen.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--markdown", action="store_true",
                        help="also print the tables of docs/what-if.md's comparison")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # HTA logs warnings for every trace
    warnings.filterwarnings("ignore")  # and pandas its FutureWarnings
    try:
        import hta  # noqa: F401
        import pandas
    except ImportError:
        sys.exit("HolisticTraceAnalysis is not installed: pip install -e \".[hta]\"")
    from importlib.metadata import version

    print(f"HolisticTraceAnalysis {version('HolisticTraceAnalysis')}, pandas "
          f"{pandas.__version__}")
    diffs = []
    for path in args.traces or default_traces():
        try:
            diffs.append(compare(path))
        except Exception:
            print(f"\n=== {path.name}: failed\n{traceback.format_exc(limit=3)}")
            continue
        print_text(diffs[-1])
    print("\n=== summary")
    for d in diffs:
        km_total, hta_total = d.kernel_total
        unexplained = km_total - hta_total - sum(d.explained.values())
        print(f"  {d.trace:<34} kernels {_pct(hta_total, km_total):>7} of kernelmagic's "
              f"(unexplained {_us(unexplained)}); path kernelmagic {_us(d.km.path)} of "
              f"{_us(d.km.window)}, HTA {_us(d.hta.path)} of {_us(d.hta.window)}")
    if args.markdown:
        print()
        print_markdown(diffs)
    if args.json:
        args.json.write_text(json.dumps([asdict(d) for d in diffs], indent=1))


if __name__ == "__main__":
    main()
