"""``unique`` and ``isin``: ``np.unique`` and ``np.isin`` for integer columns, without
their import cost; ``median``: ``np.median`` of one column, without its overhead;
``concat_ranges``: many index ranges as one array, without a loop.

numpy 2's ``np.unique`` (which ``np.isin`` calls) reaches for ``np.ma`` on every call,
which imports ``numpy.ma``: tens of milliseconds in a fresh process, on the way to a
trace's first result. These are the same sort-based computations; the sources and views
call them instead (``tests/test_arrays.py`` checks them against numpy's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["concat_ranges", "isin", "median", "stable_order", "unique"]

_RADIX_FROM = 512  # values: ``stable_order`` checks for 16-bit integers from this many


def unique(values: Any, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False) -> Any:
    """The sorted distinct values of ``values`` (flattened), as ``np.unique``, with the
    index of each one's first occurrence, the inverse (each value's position among the
    distinct ones) and the counts when asked, in that order."""
    ar = np.asarray(values).ravel()
    if return_index or return_inverse:
        order = stable_order(ar)
        ordered = ar[order]
    else:
        ordered = np.sort(ar)
    first = np.empty(ordered.shape, dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    out = [ordered[first]]
    if return_index:
        out.append(order[first])
    if return_inverse:
        inverse = np.empty(ar.shape, dtype=np.intp)
        position = np.cumsum(first)
        position -= 1
        inverse[order] = position
        out.append(inverse)
    if return_counts:
        out.append(np.diff(np.append(np.flatnonzero(first), ordered.size)))
    return out[0] if len(out) == 1 else tuple(out)


def stable_order(ar: np.ndarray) -> np.ndarray:
    """``ar.argsort(kind="stable")``. Integers that fit in 16 bits are sorted as such:
    numpy sorts those by radix, in linear time (7x faster than int64's at 1M values; under
    ``_RADIX_FROM`` values, the check costs more than it saves)."""
    if (ar.size >= _RADIX_FROM and ar.dtype.kind in "iu" and ar.min() >= 0
            and ar.max() < 2**16):
        ar = ar.astype(np.uint16)
    return ar.argsort(kind="stable")


def isin(values: Any, of: Any) -> np.ndarray:
    """Per element of ``values``: whether it is one of ``of``, as ``np.isin`` (which calls
    ``np.unique``), by a binary search in ``of`` sorted."""
    values = np.asarray(values)
    wanted = np.sort(np.asarray(of).ravel())
    if not wanted.size:
        return np.zeros(values.shape, dtype=bool)
    at = np.minimum(np.searchsorted(wanted, values), wanted.size - 1)
    return wanted[at] == values  # type: ignore[no-any-return]


def median(values: np.ndarray) -> float:
    """``np.median`` of a non-empty 1-D array (the mean of the two middle values of an even
    count), by one partition: a few µs where ``np.median`` takes 5 to 20 µs a call."""
    n = values.size
    middle = np.partition(values, ((n - 1) // 2, n // 2))
    return (float(middle[(n - 1) // 2]) + float(middle[n // 2])) / 2


def concat_ranges(lo: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The ranges ``lo[j], lo[j] + 1, ..., lo[j] + n[j] - 1`` (``n[j]`` at least 0)
    concatenated: the indices of many groups of a sorted array at once."""
    firsts = np.cumsum(n) - n
    return np.repeat(lo - firsts, n) + np.arange(int(n.sum()))  # type: ignore[no-any-return]
