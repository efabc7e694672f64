"""Benchmark: what the dependency model costs (#29), and how fast ``what_if`` answers.

Three targets:

* ``kernelmagic.load`` with the model (the median iteration's dependencies, its critical
  path, every row's ``max_gain_us`` and the trust checks) against the same load with the
  model switched off (``results/builder.py``'s ``iteration_view`` and ``trust_checks``
  replaced by stubs, as before #29), alternating in one process. On
  ``v100_gpu_annotations.json.gz`` the model adds at most 15% (#29: at most 1.15x). On
  every trace of ``tests/data`` and ``../shared/traces`` it is at most 15% of the load
  (#43: ``1 - without / with`` at most 0.15, as ``bench_model_scale.py`` measures the
  model's share on the generated one-window traces);
* ``result.what_if({...})`` on the loaded result of ``v100_gpu_annotations.json.gz``, and
  on the result read back from its saved JSON: under 100 ms.
* the packed model's size in the saved file (reported).

    python benchmarks/bench_what_if.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import _common as c

import kernelmagic
from kernelmagic.results import builder
from kernelmagic.results.result import ProfileResult

TARGET = 1.15  # #29: the model adds at most 15% to the load of the v100 trace
SHARE_TARGET = 0.15  # #43: the model is at most 15% of the load of every trace
WHAT_IF_TARGET_S = 0.1
TRACE = c.REPO_ROOT / "tests" / "data" / "v100_gpu_annotations.json.gz"


def _without_model() -> tuple[Any, Any]:
    """Swap the model out of ``build_result``; returns what to put back."""
    saved = builder.iteration_view, builder.trust_checks
    builder.iteration_view = lambda *a, **k: None  # type: ignore[assignment]
    builder.trust_checks = lambda *a, **k: {}  # type: ignore[assignment]
    return saved


def _load(with_model: bool, trace: Any = TRACE) -> float:
    saved = None if with_model else _without_model()
    try:
        t0 = time.perf_counter()
        kernelmagic.load(trace)
        return time.perf_counter() - t0
    finally:
        if saved is not None:
            builder.iteration_view, builder.trust_checks = saved


def _what_if(result: ProfileResult, key: str) -> float:
    t0 = time.perf_counter()
    result.what_if({key: 2.0, "aten::add_": float("inf")})
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    _load(True), _load(False)  # imports and caches warm on both sides
    loads = c.alternate({"with the model": lambda: _load(True),
                         "without it": lambda: _load(False)}, args.rounds)
    result = kernelmagic.load(TRACE)
    text = json.dumps(result.to_dict())
    model_bytes = len(json.dumps(result.dependency_model.to_dict()))
    again = ProfileResult.from_dict(json.loads(text))
    key = max(result.rows, key=lambda r: r.max_gain_us).key
    asks = c.alternate({"loaded": lambda: _what_if(result, key),
                        "read back": lambda: _what_if(again, key)}, args.rounds)
    first = _what_if(ProfileResult.from_dict(json.loads(text)), key)  # makes its plan, baseline
    print(f"\nkernelmagic.load({TRACE.name}), {args.rounds} alternating rounds:")
    for name, values in loads.items():
        print(c.describe(name, values))
    print(f"what_if on the loaded result and on the saved one read back ({key} 2x, "
          "aten::add_ removed):")
    for name, values in asks.items():
        print(c.describe(name, values))
    print("  first what_if on a result read back (its plan and baseline made): "
          f"{c.fmt_time(first)}")
    print(f"saved profile: {len(text):,} bytes of JSON, of which the packed model "
          f"{model_bytes:,} ({model_bytes / len(text):.0%}); "
          f"{len(result.dependency_model.pos_anchor):,} CPU positions, "
          f"{len(result.dependency_model.item_dur):,} GPU items")
    ratio = c.paired_ratio(loads["with the model"], loads["without it"])
    c.verdict("what_if", "load v100 trace with the dependency model / without it",
              km=c.median(loads["with the model"]), manual=c.median(loads["without it"]),
              ratio=ratio, target=f"<= {TARGET:g}x", passed=ratio <= TARGET,
              note=f"saved model {model_bytes:,} bytes of {len(text):,}")
    _every_trace(args.rounds)
    slowest = max(c.median(asks["loaded"]), c.median(asks["read back"]), first)
    c.verdict("what_if", "what_if on a loaded result (median; first call on a file read back)",
              km=slowest, manual=WHAT_IF_TARGET_S, ratio=slowest / WHAT_IF_TARGET_S,
              target=f"< {WHAT_IF_TARGET_S * 1000:g} ms", passed=slowest < WHAT_IF_TARGET_S)


def _every_trace(rounds: int) -> None:
    """The model's cost on every real trace: load with it / without it, alternating."""
    shared = c.REPO_ROOT.parent / "shared" / "traces"
    traces = sorted({p.name: p for p in [*sorted(shared.glob("*.json.gz")),
                                          *sorted(TRACE.parent.glob("*.json.gz"))]}.values())
    worst, over = ("", 0.0), 0
    print(f"\nevery trace, {rounds} alternating rounds (load with the model / without it; "
          "the model's share of the load with it, 1 - without / with):")
    for trace in traces:
        _load(True, trace), _load(False, trace)
        loads = c.alternate({"with": lambda t=trace: _load(True, t),
                             "without": lambda t=trace: _load(False, t)}, rounds)
        ratio = c.paired_ratio(loads["with"], loads["without"])
        share = 1.0 - 1.0 / ratio
        print(f"  {trace.name:36s} {c.fmt_time(c.median(loads['with'])):>9s} / "
              f"{c.fmt_time(c.median(loads['without'])):>9s} = {ratio:.3f}x: "
              f"the model {share:.1%} of the load "
              f"({c.fmt_time(c.median(loads['with']) * share)})")
        over += share > SHARE_TARGET
        if share > worst[1]:
            worst = (trace.name, share)
    c.verdict("what_if", "every real trace: the model's share of the load (the worst)",
              km=round(worst[1], 3), manual=SHARE_TARGET, ratio=worst[1],
              target=f"<= {SHARE_TARGET:g}", passed=worst[1] <= SHARE_TARGET,
              note=f"{worst[0]}; {over} of {len(traces)} traces over",
              unit="")


if __name__ == "__main__":
    main()
