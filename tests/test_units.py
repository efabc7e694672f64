"""Numbers are written only through ``kernelmagic/core/units.py``: its styles, checked by
hand, and a scan of the package that fails when a percent or a time is formatted anywhere
else (``f"{x:.0%}"``, ``f"{100 * x:.1f}%"``, ``f"{t:.1f} µs"``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelmagic.core.units import (
    format_fixed,
    percent,
    percent_of,
    short_percent,
    whole_percent,
)

PACKAGE = Path(__file__).resolve().parent.parent / "kernelmagic"


@pytest.mark.parametrize(("share", "whole", "one", "two"), [
    (0.1234, "12%", "12.3%", "12.34%"),
    (0.005, "0%", "0.5%", "0.50%"),  # 0.5% is rounded half to even in whole percents
    (0.996, "100%", "99.6%", "99.60%"),
    (0.0, "0%", "0.0%", "0.00%"),
    (1.5, "150%", "150.0%", "150.00%"),
])
def test_percent_styles(share, whole, one, two):
    assert whole_percent(share) == whole
    assert percent(share) == one
    assert percent(share, 2) == two


def test_the_styles_agree_where_they_overlap():
    # short_percent: one decimal below 10%, whole percents from 10% on.
    assert short_percent(0.0834) == "8.3%"
    assert short_percent(0.5) == whole_percent(0.5) == "50%"
    assert percent_of(1, 8) == percent(1 / 8) == "12.5%"


def test_fixed_figures_keep_their_unit():
    assert format_fixed(1234.56, "µs") == "1234.6 µs"  # never "1.23 ms": figures add up
    assert format_fixed(0.5, "s", 2) == "0.50 s"
    assert format_fixed(12.0, "µs") == "12.0 µs"


#: Hand-made number formatting: a percent format spec, a number followed by "%", or a
#: fixed-point number followed by a time unit.
_BY_HAND = re.compile(r":[0-9]*\.[0-9]+%\}|\{[^{}]*:[^{}]*\}%|:[0-9]*\.[0-9]+f\} ?(µs|ms|s\b)")


def test_no_module_formats_a_percent_or_a_time_by_hand():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "units.py" and path.parent.name == "core":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if _BY_HAND.search(line):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert not found, "format through kernelmagic/core/units.py:\n" + "\n".join(found)
