"""A pure-Python helper at a known line, for the ``python`` view's tests
(``tests/test_python_lines.py``): its one line runs no op and holds the GIL throughout."""

from __future__ import annotations

HELPER_LINE = 11  # the line below that does the work


def busy_python(n: int) -> int:
    """Squares and sums ``n`` integers in C builtins called from this one line."""
    return sum(map(int.__mul__, range(n), range(n)))
