"""Numbers are written only through ``kernelmagic/core/units.py``: its styles, checked by
hand and (the one rule for shares) by hypothesis, and a scan of the package that fails when
a percent, a time or a ratio is formatted anywhere else (``f"{x:.0%}"``,
``f"{100 * x:.1f}%"``, ``f"{t:.1f} µs"``, ``f"{s:.2f}x"``) or when units.py grows a second
share formatter."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernelmagic.core.units import (
    format_fixed,
    format_ratio,
    percent,
    percent_of,
    ratio_range,
    speedup_text,
)

PACKAGE = Path(__file__).resolve().parent.parent / "kernelmagic"


@pytest.mark.parametrize(("share", "shown"), [
    (0.1234, "12%"),        # whole percents from 10% on
    (0.0834, "8.3%"),       # one decimal below 10%: two significant digits
    (0.005, "0.5%"),
    (0.0996, "10%"),        # 9.96 rounds to 10.0: whole percents, never "10.0%"
    (0.985, "98%"),         # half to even
    (0.994, "99%"),
    (0.996, "99.6%"),       # would round to 100: not all of it, so one decimal
    (0.9996, "> 99.9%"),    # rounds to 100.0 even with one decimal
    (1.0, "100%"),          # exactly all
    (0.0, "0%"),            # exactly none
    (0.0004, "< 0.1%"),     # some, under 0.05%
    (0.0005, "0.1%"),
    (1.5, "150%"),
    (1.0004, "> 100%"),
    (-0.25, "-25%"),
])
def test_the_one_rule_for_shares(share, shown):
    assert percent(share) == shown


def test_a_part_of_a_total_follows_the_same_rule():
    assert percent_of(1, 8) == percent(1 / 8) == "12%"
    assert percent_of(999, 1000) == "99.9%"
    assert percent_of(5, 0) == "0%"  # nothing to be a share of


#: What ``percent`` can print: "0%", "< 0.1%", 0.1%-9.9% with one decimal, 10%-99%
#: whole, 99.5%-99.9% with one decimal, "> 99.9%", "100%" (and above: "> 100%", "150%").
RULE = re.compile(r"^(0|< 0\.1|0\.[1-9]|[1-9]\.[0-9]|[1-9][0-9]|99\.[5-9]|> 99\.9|100|> 100|"
                  r"100\.[0-9]|[1-9][0-9]{2,})%$")


def shown_value(text: str) -> float:
    """A printed share back as a number of percents, the edges midway: ``< 0.1%`` 0.05,
    ``> 99.9%`` 99.95."""
    if text.startswith("< "):
        return float(text[2:-1]) / 2
    if text.startswith("> "):
        return float(text[2:-1]) + 0.05
    return float(text[:-1])


shares = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(shares)
def test_all_and_none_are_printed_only_when_exact(x):
    shown = percent(x)
    assert RULE.match(shown), shown
    assert (shown == "100%") == (x == 1.0)
    assert (shown == "0%") == (x == 0.0)


@given(shares, shares)
def test_a_larger_share_never_prints_smaller(x, y):
    low, high = sorted((x, y))
    assert shown_value(percent(low)) <= shown_value(percent(high))


@given(shares)
def test_the_printed_share_is_within_its_last_digit(x):
    # One decimal: within 0.05 points; whole percents: within 0.5; the edges say which
    # side of 0.1 or 99.9 the share is on.
    shown = percent(x)
    pct = 100 * x
    if shown == "< 0.1%":
        assert 0 < pct < 0.05 + 1e-9
    elif shown == "> 99.9%":
        assert 99.95 - 1e-9 <= pct < 100
    else:
        digits = shown[:-1].partition(".")[2]
        assert abs(shown_value(shown) - pct) <= (0.05 if digits else 0.5) + 1e-9


def test_ratios():
    assert format_ratio(1.8449) == "1.84x"
    assert format_ratio(64.2, 0) == "64x"
    assert format_ratio(0.532, significant=True) == "0.53x"
    assert ratio_range(1.25, 1.4) == "1.25-1.40x"
    assert speedup_text(1.9) == "1.90x faster"
    assert speedup_text(0.25) == "4.00x slower"
    assert speedup_text(0.0) == "slower"


def test_fixed_figures_keep_their_unit():
    assert format_fixed(1234.56, "µs") == "1234.6 µs"  # never "1.23 ms": figures add up
    assert format_fixed(0.5, "s", 2) == "0.50 s"
    assert format_fixed(12.0, "µs") == "12.0 µs"


#: Hand-made number formatting: a percent format spec, any f-string field or a %-style
#: number followed by "%", a fixed-point number followed by a time unit, or a number
#: written as a ratio ("1.84x": ``format_ratio``, ``speedup_text``).
_BY_HAND = re.compile(r":[0-9]*\.[0-9]+%\}|\{[^{}]*\}%|%[0-9]*\.?[0-9]*[dfg]%%"
                      r"|:[0-9]*\.[0-9]+f\} ?(µs|ms|s\b)|:[0-9]*\.[0-9]+[fg]\}x")


@pytest.mark.parametrize("line", [
    'f"{share:.0%}"', 'f"{100 * share:.1f}%"', 'f"{round(100 * share)}%"',
    '"%.1f%%" % pct', 'f"{t:.1f} µs"', 'f"{s:.2f}x faster"', 'f"{r:.2g}x"',
    'f"{low:.2f}-{high:.2f}x"',
])
def test_the_scan_sees_a_number_formatted_by_hand(line):
    assert _BY_HAND.search(line)


def test_no_module_formats_a_percent_or_a_time_by_hand():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "units.py" and path.parent.name == "core":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if _BY_HAND.search(line):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert not found, "format through kernelmagic/core/units.py:\n" + "\n".join(found)


def test_units_has_one_rule_for_shares():
    # A second share formatter (a "whole_percent" beside "percent") is how one share came
    # to read "100%" in the summary and "99.9%" two lines below: only ``percent`` writes
    # a "%"; ``percent_of`` hands it a share.
    tree = ast.parse((PACKAGE / "core" / "units.py").read_text())
    writers = sorted(f.name for f in tree.body if isinstance(f, ast.FunctionDef)
                     and any("%" in text for text in _strings_outside_docstring(f)))
    assert writers == ["percent"]


def _strings_outside_docstring(function: ast.FunctionDef) -> list[str]:
    first = function.body[0]
    doc = first.value if isinstance(first, ast.Expr) else None
    return [n.value for n in ast.walk(function)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n is not doc]
