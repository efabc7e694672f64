"""Diagnostic (not a benchmark): how fast can operator rows be collected?

Compares, on three workloads (the seed Block, the wide cell of ``bench_wide.py``, the
many-events cell of ``bench_many_events.py``), each profiled like ``%%profile`` does
(``torch.autograd.profiler.profile(use_kineto=True)`` with per-iteration
``record_function`` ranges):

* ``key_averages()`` as kernelmagic used it before its own event model (torch builds one Python
  ``FunctionEvent`` per event first);
* the same with the cyclic garbage collector paused during collection;
* a prototype that reads ``prof.kineto_results.events()`` directly (CPU events only),
  rebuilds torch's parent/child nesting and duplicate-node merge, and sums count, total
  and self CPU time per name -- checked to match ``key_averages()`` row for row.

    python tools/diag_collect.py
"""

from __future__ import annotations

import gc
import sys
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

# It times collection with the benchmarks' harness, workloads and wide cell
# (benchmarks/_common.py, _workloads.py, bench_wide.py); kernelmagic is the installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import _common as c
import torch
from _workloads import block_and_input
from torch.autograd import DeviceType
from torch.autograd import profiler as autograd_profiler
from torch.autograd.profiler_util import _filter_name


def fast_key_averages(prof: Any) -> dict[str, tuple[int, float, float, bool]]:
    """{name: (count, cpu_time_total, self_cpu_time_total, is_user_annotation)} in µs."""
    res = prof.kineto_results
    base = res.trace_start_ns()
    cpu = DeviceType.CPU
    names: list[str] = []
    starts: list[float] = []
    ends: list[float] = []
    threads: list[int] = []
    sync: list[bool] = []
    user: dict[str, bool] = {}
    for e in res.events():
        name = e.name()
        if _filter_name(name) or e.is_hidden_event() or e.device_type() != cpu:
            continue
        thread = e.start_thread_id()
        names.append(name)
        starts.append((e.start_ns() - base) / 1000)
        ends.append((e.end_ns() - base) / 1000)
        threads.append(thread)
        sync.append(not (e.is_async() or thread != e.end_thread_id()))
        if name not in user:
            user[name] = e.is_user_annotation()
    n = len(names)
    parent = [-1] * n
    children: list[list[int]] = [[] for _ in range(n)]
    order = sorted((i for i in range(n) if sync[i]),
                   key=lambda i: (threads[i], starts[i], -ends[i]))
    stack: list[int] = []
    current = None
    for i in order:  # torch's _populate_cpu_children
        if threads[i] != current:
            stack, current = [], threads[i]
        while stack:
            p = stack[-1]
            if starts[i] >= ends[p] or ends[i] > ends[p]:
                stack.pop()
            else:
                parent[i] = p
                children[p].append(i)
                break
        stack.append(i)
    alive = [True] * n
    changed = True
    while changed:  # torch's _remove_dup_nodes
        changed = False
        for i in range(n):
            p = parent[i]
            if alive[i] and p >= 0 and names[p] == names[i] and len(children[p]) == 1:
                children[p] = children[i]
                for ch in children[p]:
                    parent[ch] = p
                alive[i] = False
                changed = True
    out: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for i in range(n):
        if alive[i]:
            total = ends[i] - starts[i]
            row = out[names[i]]
            row[0] += 1
            row[1] += total
            if sync[i]:
                row[2] += total - sum(ends[ch] - starts[ch] for ch in children[i])
    return {k: (int(v[0]), v[1], v[2], user[k]) for k, v in out.items()}


def profiled(fn: Any, iters: int) -> Any:
    fn()
    with autograd_profiler.profile(use_kineto=True) as prof:
        with autograd_profiler.record_function("cell"):
            for i in range(iters):
                with autograd_profiler.record_function(f"cell/iter {i}"):
                    fn()
    return prof


def main() -> None:
    import bench_wide

    c.header("diag_collect: key_averages() vs gc-paused vs raw kineto events")
    block, x = block_and_input()

    def block_fn() -> None:
        with torch.inference_mode():
            block(x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wide = bench_wide.wide_cell(bench_wide.wide_calls(), torch.rand(4, 4) * 0.8 + 0.1)
    t = torch.zeros(4)

    def many() -> None:
        a = t
        for _ in range(5000):
            a = a.add(1).mul(0.5)

    for label, fn, iters in (("Block x10", block_fn, 10), ("wide x10", wide, 10),
                             ("many events x2", many, 2)):
        figures: dict[str, list[float]] = defaultdict(list)
        for _ in range(2):
            for how in ("key_averages", "key_averages, gc paused", "raw events"):
                prof = profiled(fn, iters)
                gc.collect()
                t0 = c.clock()
                if how == "raw events":
                    fast_key_averages(prof)
                elif how == "key_averages":
                    prof.key_averages()
                else:
                    gc.disable()
                    try:
                        prof.key_averages()
                    finally:
                        gc.enable()
                figures[how].append(c.clock() - t0)
                n_events = len(prof.kineto_results.events())
                del prof
        prof = profiled(fn, iters)  # one session read both ways, to compare the rows
        fast = fast_key_averages(prof)
        ref = {str(a.key): (a.count, a.cpu_time_total, a.self_cpu_time_total)
               for a in prof.key_averages()}
        del prof
        bad = [k for k, (cnt, tot, slf) in ref.items()
               if k not in fast or fast[k][0] != cnt
               or abs(fast[k][1] - tot) > 1e-3 * max(1.0, tot)
               or abs(fast[k][2] - slf) > 1e-3 * max(1.0, abs(slf)) + 0.01]
        print(f"  {label}: {n_events:,} kineto events, {len(ref)} names; raw-events rows "
              f"{'match' if not bad and set(fast) == set(ref) else f'DIFFER: {bad[:5]}'}")
        for how, values in figures.items():
            print(f"    {how:<26} {c.fmt_time(c.median(values)):>9}")


if __name__ == "__main__":
    main()
