"""The fuzzer (``tests/file_fuzz.py``) on 250 derandomized examples: real traces and saved
profiles, mutated byte by byte and structurally, each a result or one line naming the file,
with both trace readers agreeing on every file msgspec's takes. ``tools/file_fuzz_soak.py``
runs the same check on many random examples."""

from __future__ import annotations

import itertools
from collections import Counter

from ci_gate import need_modules
from file_fuzz import check_file, mutated_files
from hypothesis import HealthCheck, given, settings

need_modules("msgspec", install="pip install -e .")

_names = itertools.count()
_outcomes: Counter[str] = Counter()


@settings(max_examples=250, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.large_base_example])
@given(file=mutated_files())
def check_mutated(tmp_path, file):
    name, content = file
    path = tmp_path / f"{next(_names)}-{name}"
    path.write_bytes(content)
    try:
        _outcomes[check_file(path)] += 1
    finally:
        path.unlink()


def test_mutated_files_give_a_result_or_one_line(tmp_path):
    _outcomes.clear()
    check_mutated(tmp_path)
    # the examples reach both outcomes (a fuzzer that only ever breaks files tests little)
    assert _outcomes["result"] > 0 and _outcomes["TraceFileError"] > 0, _outcomes
    assert _outcomes["ProfileFileError"] > 0, _outcomes
