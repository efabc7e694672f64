"""Shared helpers for the benchmark scripts: environment, timing, shells and reporting.

Every benchmark prints its figures in plain words and one machine-readable line per
target (``##BENCH## {json}``) that ``run_all.py`` turns into a summary table.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# Kineto prints STAGE banners at every profile start/stop unless this is set before the
# process's first profile; set it for both sides so neither pays for printing them.
os.environ["KINETO_LOG_LEVEL"] = "6"

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent  # kernelmagic itself is the installed package (pip install -e .)

MARKER = "##BENCH## "

clock = time.perf_counter


# --- statistics -------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def iqr(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q3 - q1


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """Median of the per-round ratios a[i] / b[i] (rounds measured back to back)."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def fmt_time(seconds: float) -> str:
    """Three significant digits in the largest fitting unit."""
    us = seconds * 1e6
    for scale, unit in ((1e6, "s"), (1e3, "ms"), (1.0, "µs")):
        if abs(us) >= scale or unit == "µs":
            value = us / scale
            digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
            return f"{value:.{digits}f} {unit}"
    raise AssertionError("unreachable")


def describe(label: str, values: Sequence[float]) -> str:
    return (f"  {label:<28} median {fmt_time(median(values)):>9}   "
            f"IQR {fmt_time(iqr(values)):>9}   min {fmt_time(min(values)):>9}   n={len(values)}")


def alternate(sides: dict[str, Callable[[], float]], rounds: int,
              progress: bool = True) -> dict[str, list[float]]:
    """Run each side once per round, in rotating order (ABAB, then BABA...), and collect.

    Each callable returns the figure it measured (seconds). Rotating the order keeps a
    slow spell of the machine from landing on one side only.
    """
    names = list(sides)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for n in order:
            out[n].append(sides[n]())
        if progress:
            figures = "  ".join(f"{n}={fmt_time(out[n][-1])}" for n in names)
            print(f"    round {r + 1}/{rounds}: {figures}", flush=True)
    return out


# --- IPython ----------------------------------------------------------------------------


def shell() -> Any:
    """The process's InteractiveShell (not a terminal one: HTML and widgets are built)."""
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance()


def notebook_progress() -> None:
    """Give the magic the notebook's progress reporter (the widget bar), as in a kernel.

    The benchmark shell is a plain ``InteractiveShell``, which gets none; with this the
    runner's progress calls between iterations are measured too. The bar itself only
    appears after a second, so a sub-second cell still shows nothing.
    """
    from kernelmagic.live import progress

    progress.sink_for_shell = lambda shell: progress.WidgetSink()


def run_cell(code: str, keep: bool = False, store_history: bool = False) -> Any:
    """Run ``code`` in the shell with output captured; the captured outputs if ``keep``."""
    from IPython.utils.capture import capture_output

    with capture_output(display=True) as cap:
        res = shell().run_cell(code, store_history=store_history)
    if not res.success:
        print(cap.stdout, cap.stderr, file=sys.stderr)
        res.raise_error()
    shown = cap.stdout + cap.stderr
    if "Traceback" in shown and shown not in _reported:  # e.g. a display formatter failed
        _reported.add(shown)
        print(f"WARNING: the cell printed a traceback:\n{shown[-3000:]}", file=sys.stderr)
    return cap if keep else None


_reported: set[str] = set()


def timed_cell(code: str) -> float:
    t0 = clock()
    run_cell(code)
    return clock() - t0


def cell_side(code: str) -> Callable[[], float]:
    """One side for ``alternate``: times ``code`` as a cell, after a full collection (so
    neither side pays for the other's garbage)."""
    def run() -> float:
        gc.collect()
        return timed_cell(code)
    return run


# --- subprocesses -----------------------------------------------------------------------


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["KINETO_LOG_LEVEL"] = "6"
    return env


def run_child(code: str, timeout: float = 120) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; it must print one JSON object on its last line."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=child_env(), timeout=timeout, cwd=str(REPO_ROOT))
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- memory -----------------------------------------------------------------------------


def rss_bytes() -> int:
    """Resident set size of this process (psutil if installed, else /proc/self/status)."""
    try:
        import psutil  # type: ignore[import-not-found]

        return int(psutil.Process().memory_info().rss)
    except ImportError:
        pass
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("cannot read RSS")


# --- reporting --------------------------------------------------------------------------


def header(title: str, detail: str = "") -> None:
    import torch

    print(f"=== {title}")
    if detail:
        print(detail)
    print(f"    torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}", flush=True)


def verdict(bench: str, metric: str, *, km: float, target: str, passed: bool,
            manual: float | None = None, ratio: float | None = None,
            unit: str = "s", note: str = "") -> dict[str, Any]:
    """Print one target's figures and verdict, plus the machine-readable line."""

    def show(v: float | None) -> str:
        if v is None:
            return "-"
        if unit == "s":
            return fmt_time(v)
        if unit == "MB":
            return f"{v:.1f} MB"
        if unit == "x":
            return f"{v:.3f}x"
        return f"{v:g} {unit}".strip()

    word = "PASS" if passed else "FAIL"
    row = {
        "bench": bench, "metric": metric, "kernelmagic": show(km), "manual": show(manual),
        "ratio": None if ratio is None else f"{ratio:.3f}", "target": target,
        "verdict": word, "note": note,
    }
    print(f"--> {metric}")
    print(f"      kernelmagic: {row['kernelmagic']}   manual: {row['manual']}   "
          f"ratio: {row['ratio'] or '-'}   target: {target}   ==> {word}")
    if note:
        print(f"      note: {note}")
    print(MARKER + json.dumps(row, ensure_ascii=False), flush=True)
    return row


# --- kernelmagic post-processing breakdown ------------------------------------------------


def post_breakdown(body: Callable[[], Any], iters: int = 10, warmup: int = 3,
                   render: bool = True) -> dict[str, Any]:
    """Time kernelmagic's steps after the last profiled iteration, via ``kernelmagic.profile``.

    Returns seconds for ``stop`` (end of the last iteration -> reading events starts:
    profiler stop, trace hooks), ``events`` (the raw Kineto events -> ``EventTable``),
    ``views`` (``build_result`` and anything else until the result exists), ``render``
    (``mime_bundle``, chart included) and ``total``, plus ``result`` and the number of
    ``events`` in the table (``n_events``). Needs an active InteractiveShell for the
    widget to be built.
    """
    from kernelmagic.api import profile
    from kernelmagic.live import runner
    from kernelmagic.render.bundle import mime_bundle

    ends: list[float] = []
    held: list[Any] = []
    marks: dict[str, float] = {}
    sizes: list[int] = []

    def fn() -> None:
        body()
        ends.append(clock())

    orig_read = runner.table_from_session

    def read(prof: Any, *args: Any, **kwargs: Any) -> Any:
        marks["c0"] = clock()
        table = orig_read(prof, *args, **kwargs)
        marks["c1"] = clock()
        sizes.append(table.n)
        return table

    runner.table_from_session = read
    try:
        result = profile(fn, iters=iters, warmup=warmup, on_trace_ready=held.append)
    finally:
        runner.table_from_session = orig_read
    t_result = clock()
    if render:
        mime_bundle(result)
    t_ready = clock()
    return {
        "stop": marks["c0"] - ends[-1],
        "events": marks["c1"] - marks["c0"],
        "views": t_result - marks["c1"],
        "render": t_ready - t_result,
        "total": t_ready - ends[-1],
        "result": result,
        "n_events": sizes[0],
    }
