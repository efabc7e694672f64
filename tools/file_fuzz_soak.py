"""Soak: the file fuzzer (``tests/file_fuzz.py``) on many random examples.

CI runs ``tests/test_file_fuzz.py`` on 250 derandomized examples (the same every run); this
script runs the same check, the outcome rule of issue #35 (a result or one line naming the
file; both trace readers agree on every file msgspec's takes), on ``--examples`` fresh
random mutations of real traces and saved profiles, shrinks any failure and prints it, then
a tally of the outcomes.

    python tools/file_fuzz_soak.py                    # 5000 examples
    python tools/file_fuzz_soak.py --seed 1234        # repeat a run

Exit status 1 on a failure. Not part of CI (``.ci/run``).
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))

from file_fuzz import check_file, mutated_files  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=5000, help="examples (default 5000)")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: new)")
    args = parser.parse_args(argv)
    run_seed = random.randrange(2**32) if args.seed is None else args.seed
    outcomes: Counter[str] = Counter()
    names = itertools.count()
    print(f"file fuzz soak: {args.examples} examples, seed {run_seed}", flush=True)
    with tempfile.TemporaryDirectory(prefix="km-fuzz-") as tmp:

        @seed(run_seed)
        @settings(max_examples=args.examples, deadline=None, database=None,
                  derandomize=False, report_multiple_bugs=False,
                  suppress_health_check=list(HealthCheck))
        @given(file=mutated_files())
        def soak(file: tuple[str, bytes]) -> None:
            name, content = file
            path = Path(tmp) / f"{next(names)}-{name}"
            path.write_bytes(content)
            try:
                outcomes[check_file(path)] += 1
            finally:
                path.unlink()

        start = time.perf_counter()
        try:
            soak()
        except Exception as exc:
            print("FAILED:", "".join(traceback.format_exception_only(type(exc), exc)).strip())
            return 1
        finally:
            tally = ", ".join(f"{k} {v}" for k, v in outcomes.most_common())
            print(f"{sum(outcomes.values())} files in {time.perf_counter() - start:.1f} s: "
                  f"{tally}; seed {run_seed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
