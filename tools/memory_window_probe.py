"""Why ``--memory`` runs torch's category analysis over the whole session, not one iteration.

    python tools/memory_window_probe.py

torch's ``MemoryProfile`` costs time in proportion to the ops it walks (about 27 ms per
iteration of the training step of ``benchmarks/bench_options.py --memory-only`` on a 2-core
CPU), so analysing only the iteration the report shows would be cheaper. This probe runs
the analysis on the whole session, then on an op tree pruned to one and to two iterations,
and prints the make-up of the same iteration's peak each way: the pruned analyses name
other categories (optimizer state reads as "unknown" or "parameter"). That cost, and those
guesses, are why ``--memory`` now names categories by its own rules
(``kernelmagic/views/memory_rules.py``, issue 33); the probe stays to measure torch's.
"""

from __future__ import annotations

import collections
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))


class Pruned:
    """A finished session whose event tree holds only what lies inside ``spans`` (ns)."""

    def __init__(self, results: Any, spans: list[tuple[int, int]]) -> None:
        self.results, self.spans = results, spans

    def experimental_event_tree(self) -> list[Any]:
        def pick(nodes: list[Any]) -> list[Any]:
            out = []
            for n in nodes:
                s, e = n.start_time_ns, n.end_time_ns
                if any(lo <= s and e <= hi for lo, hi in self.spans):
                    out.append(n)
                elif any(s < hi and e > lo for lo, hi in self.spans):
                    out.extend(pick(n.children))
            return out

        return pick(self.results.experimental_event_tree())


def peak_makeup(profile: Any, lo: int, hi: int) -> tuple[int, dict[str, float]]:
    """The highest total inside [lo, hi] and its MiB per category."""
    from torch.profiler._memory_profiler import Action, TensorKey

    def name(key: Any, version: int) -> str:
        cat = profile._categories.get(key, version) if isinstance(key, TensorKey) else None
        return cat.name if cat else "unknown"

    level: collections.Counter[str] = collections.Counter()
    best, top = {}, -1
    for t, action, (key, version), size in profile.timeline:
        if action in (Action.PREEXISTING, Action.CREATE):
            level[name(key, version)] += size
        elif action == Action.DESTROY:
            level[name(key, version)] -= size
        elif action == Action.INCREMENT_VERSION:
            level[name(key, version)] -= size
            level[name(key, version + 1)] += size
        if lo <= t <= hi and sum(level.values()) > top:
            top, best = sum(level.values()), dict(level)
    return top, {k: round(v / 2**20, 2) for k, v in best.items() if v}


def main() -> None:
    import torch
    from _workloads import training_step
    from torch.autograd import profiler
    from torch.profiler._memory_profiler import MemoryProfile

    step = training_step()
    for _ in range(3):
        step()
    with profiler.profile(use_kineto=True, record_shapes=True, profile_memory=True,
                          with_stack=True) as prof:
        for i in range(10):
            with torch.profiler.record_function(f"probe/iter {i}"):
                step()
    results = prof.kineto_results
    spans = sorted((e.start_ns(), e.end_ns()) for e in results.events()
                   if e.name().startswith("probe/iter"))
    shown = spans[6]
    for label, source in [("whole session (10 iterations)", results),
                          ("iteration 6 only", Pruned(results, [shown])),
                          ("iterations 5 and 6", Pruned(results, [(spans[5][0], shown[1])]))]:
        start = time.perf_counter()
        analysis = MemoryProfile(source)
        took = time.perf_counter() - start
        total, makeup = peak_makeup(analysis, *shown)
        print(f"{label:32s} {took * 1e3:6.0f} ms   peak of iteration 6: "
              f"{total / 2**20:.2f} MiB {makeup}")


if __name__ == "__main__":
    main()
