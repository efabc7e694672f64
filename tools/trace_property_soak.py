"""Soak: the trace property tests (``tests/test_trace_properties.py``) on many random examples.

CI runs each property on a few hundred derandomized examples (the same ones every run);
this script runs the same ``check_*`` functions on ``--examples`` fresh random examples
each (hypothesis, a new seed per run unless ``--seed``), shrinks any failure to its
minimal example and prints it, then a summary: per property, the examples run, the time
and the outcome.

    python tools/trace_property_soak.py                   # 5000 examples per property
    python tools/trace_property_soak.py --examples 500 --only conservation
    python tools/trace_property_soak.py --seed 1234       # repeat a run

Exit status 1 if any property failed. Not part of CI (``.ci/run``). On this project's
2-core machine the default run (6 properties, 30,000 examples) takes 4 to 6 minutes, 35
to 80 s per property, on one core.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The properties are the test suite's own (tests/test_trace_properties.py), run here with
# more examples; kernelmagic itself is the installed package (pip install -e .).
TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from test_trace_properties import (  # noqa: E402
    check_all_rows,
    check_broken,
    check_conservation,
    check_op_rows,
    check_styles_agree,
)
from trace_strategies import broken_traces, canonical_styles, styles, traces  # noqa: E402

#: name -> (check, strategies for its arguments before ``folder``).
PROPERTIES: dict[str, tuple[Callable[..., None], tuple[st.SearchStrategy[Any], ...]]] = {
    "op_rows": (check_op_rows, (traces(), canonical_styles())),
    "conservation": (check_conservation, (traces(), canonical_styles())),
    "all_rows": (check_all_rows, (traces(), canonical_styles())),
    "string_ids": (check_all_rows, (traces(), styles())),
    "styles": (check_styles_agree, (traces(), styles())),
    "broken": (check_broken, (broken_traces(),)),
}


def soak(name: str, examples: int, run_seed: int, folder: Path) -> tuple[int, float, str]:
    """Run one property; (calls, shrinking included; seconds; "" or the failure's report)."""
    check, strategies = PROPERTIES[name]
    ran = 0

    @seed(run_seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              report_multiple_bugs=False, suppress_health_check=list(HealthCheck))
    @given(example=st.tuples(*strategies))
    def prop(example: tuple[Any, ...]) -> None:
        nonlocal ran
        ran += 1
        check(*example, folder)

    start = time.perf_counter()
    try:
        prop()
    except Exception as exc:  # the shrunk failure: report it, go on with the others
        notes = getattr(exc, "__notes__", [])  # (Python 3.10 leaves them out below)
        failure = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        if sys.version_info < (3, 11) and notes:
            failure = "\n".join([failure, *notes])
        return ran, time.perf_counter() - start, failure
    return ran, time.perf_counter() - start, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=5000,
                        help="random examples per property (default 5000)")
    parser.add_argument("--seed", type=int, default=None,
                        help="hypothesis seed (default: a new one, printed)")
    parser.add_argument("--only", choices=sorted(PROPERTIES), action="append",
                        help="run only this property (repeatable)")
    args = parser.parse_args(argv)
    if args.examples < 1:
        parser.error("--examples must be at least 1")
    run_seed = random.randrange(2**32) if args.seed is None else args.seed
    names = args.only or list(PROPERTIES)
    print(f"trace property soak: {args.examples} examples per property, seed {run_seed} "
          f"(repeat with --seed {run_seed})", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="km-soak-") as tmp:
        for name in names:
            ran, seconds, failure = soak(name, args.examples, run_seed, Path(tmp))
            results.append((name, ran, seconds, failure))
            verdict = "ok" if not failure else "FAILED"
            print(f"{name:13} {ran:6} examples  {seconds:7.1f} s  {verdict}", flush=True)
            if failure:
                print(f"--- {name}: minimal failing example ---\n{failure}\n---", flush=True)
    failed = [name for name, _, _, failure in results if failure]
    total = sum(ran for _, ran, _, _ in results)
    seconds = sum(s for _, _, s, _ in results)
    print(f"summary: {len(results)} properties, {total} examples in {seconds:.1f} s, "
          f"{len(failed)} failed{': ' + ', '.join(failed) if failed else ''}; seed {run_seed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
