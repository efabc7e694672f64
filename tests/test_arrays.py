"""``core/arrays.py``'s ``unique``, ``isin`` and ``median`` answer as numpy's do."""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from trace_json import DATA

from kernelmagic.core.arrays import concat_ranges, isin, median, unique

CASES = [np.array([], dtype=np.int64), np.array([7]), np.array([3, 1, 3, 2, 1, 3]),
         np.random.default_rng(0).integers(-5, 6, 500), np.array([[2, 1], [2, 0]]),
         np.arange(10, dtype=np.int8)[::-1],
         np.array([70_000, 3, 2**16 - 1, 70_000, 1])]  # (16 bits sort by radix; these not)


@pytest.mark.parametrize("values", CASES, ids=range(len(CASES)))
@pytest.mark.parametrize("flags", list(itertools.product([False, True], repeat=3)),
                         ids=lambda f: "".join("ics"[i] if on else "-" for i, on in enumerate(f)))
def test_unique_is_numpys(values, flags):
    index, inverse, counts = flags
    ours = unique(values, return_index=index, return_inverse=inverse, return_counts=counts)
    theirs = np.unique(values, return_index=index, return_inverse=inverse,
                       return_counts=counts)
    if not any(flags):
        ours, theirs = (ours,), (theirs,)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, np.ravel(b))
        assert a.dtype == b.dtype


def test_loading_a_trace_imports_neither_numpy_ma_nor_pandas():
    # np.unique imports numpy.ma: tens of ms of a fresh process's first load (numpy 1.x
    # imports numpy.ma itself, with numpy: then only the others are checked)
    code = ("import sys, numpy\n"
            "own = {'numpy.ma'} & set(sys.modules)\n"
            "import kernelmagic\n"
            f"kernelmagic.load({str(DATA / 'v100_gpu_annotations.json.gz')!r}).findings()\n"
            "print(sorted(m for m in ('numpy.ma', 'pandas', 'matplotlib', 'torch')"
            " if m in sys.modules and m not in own))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("of", [[], [3], [3, 1, 3], (0, 9, -2), np.arange(-3, 40, 7)],
                         ids=range(5))
def test_isin_is_numpys(of):
    values = np.random.default_rng(1).integers(-5, 12, (4, 30))
    np.testing.assert_array_equal(isin(values, of), np.isin(values, of))
    kinds = np.arange(11, dtype=np.int8)
    np.testing.assert_array_equal(isin(kinds, of), np.isin(kinds, of))


@given(st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=60))
def test_median_is_numpys(values):
    assert median(np.asarray(values, np.int64)) == np.median(np.asarray(values, np.int64))


@given(st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 6)), max_size=12))
def test_concat_ranges_is_each_range_in_turn(groups):
    lo = np.array([g[0] for g in groups], np.int64)
    n = np.array([g[1] for g in groups], np.int64)
    expected = [i for a, k in groups for i in range(a, a + k)]
    assert concat_ranges(lo, n).tolist() == expected
