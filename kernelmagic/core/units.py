"""Numbers as the reports write them, in one place (imports nothing).

Durations (``format_us``, ``format_seconds``: ``%timeit``'s three significant digits),
counts with SI prefixes (``format_count``, ``si`` with a unit), bytes in binary units
(``format_bytes``), shares as percentages by one rule (``percent``, and
``percent_of`` for a part of a total), ratios (``format_ratio``: "1.84x", ``ratio_range``,
``speedup_text``: "1.84x faster"), fixed-unit figures (``format_fixed``) and counted
nouns (``counted``: "1 call", "2 calls"); and a label cut to fit (``cut_end``: "…" at its
end). Every renderer and finding formats through these, so a figure reads the same
wherever it appears.
"""

from __future__ import annotations


def format_us(us: float) -> str:
    """A duration given in microseconds, e.g. ``812 µs``, ``12.3 ms``, ``1.50 s``."""
    if us == 0:
        return "0 µs"
    value, unit = us * 1e3, "ns"
    for next_unit in ("µs", "ms", "s"):
        if abs(value) < 999.5:
            break
        value, unit = value / 1e3, next_unit
    if abs(value) >= 99.95:
        return f"{value:.0f} {unit}"
    if abs(value) >= 9.995:
        return f"{value:.1f} {unit}"
    return f"{value:.2f} {unit}"


def signed_us(us: float) -> str:
    """A change of duration with its sign: ``+812 µs``, ``−12.3 ms``, ``±0 µs``."""
    return ("+" if us > 0 else "−" if us < 0 else "±") + format_us(abs(us))


def format_seconds(seconds: float) -> str:
    """``%timeit``-style: three significant digits and the largest fitting unit."""
    return format_us(seconds * 1e6)


def format_count(n: float) -> str:
    """1234567 -> ``1.23 M``; SI prefixes up to P. Rounded to 3 significant digits before
    the prefix is chosen, so 999.7 G reads ``1 T``, never ``1e+03 G``."""
    n = float(f"{n:.3g}")
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {prefix}"
    return f"{n:.3g}"


def si(x: float, unit: str) -> str:
    """Decimal units, as datasheets give bandwidth: ``1.5 GB/s``, ``96 B``."""
    text = format_count(x)
    return f"{text}{unit}" if text[-1].isalpha() else f"{text} {unit}"


def format_bytes(n: float) -> str:
    """Bytes in binary units, signed (frees are negative): ``-1.50 MiB``."""
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{sign}{n / scale:.2f} {unit}"
    return f"{sign}{n:.0f} B"


def percent(share: float) -> str:
    """A share (0.123) as a percentage, by the one rule every report, table and finding uses:
    one decimal below 10% (``2.6%``), whole percents from 10% on (``97%``), so a figure
    keeps two significant digits; and never rounded onto the edges, which are exact:

    - ``0%`` only for exactly 0; a positive share under 0.05% reads ``< 0.1%``;
    - ``100%`` only for exactly 1; a share that would round to 100 keeps one decimal
      (0.996: ``99.6%``), and one under 1 that still rounds to 100.0 reads ``> 99.9%``
      (above 1, ``> 100%``).

    Shares above 1 (``1.5``: ``150%``) and below 0 (``-0.25``: ``-25%``) follow the
    same digits. The printed value never decreases as the share grows.
    """
    if share < 0:
        return "-" + percent(-share)
    if share == 0 or share == 1:
        return f"{100 * share:.0f}%"
    pct = 100 * share
    one = f"{pct:.1f}"
    if one == "0.0":
        return "< 0.1%"
    if float(one) < 10:
        return f"{one}%"
    whole = f"{pct:.0f}"
    if whole != "100":
        return f"{whole}%"
    if one != "100.0":
        return f"{one}%"
    return "> 99.9%" if share < 1 else "> 100%"


def percent_of(part: float, total: float) -> str:
    """``part`` as a percentage of ``total`` (``percent``'s rule); ``0%`` when total is 0."""
    return percent(part / total if total > 0 else 0.0)


def format_fixed(value: float, unit: str, digits: int = 1) -> str:
    """A figure with a fixed unit and ``digits`` decimals, ``12.3 µs``, ``1.25 s``: where
    figures listed together must add up or line up, so the unit must not change."""
    return f"{value:.{digits}f} {unit}"


def counted(n: float, noun: str, plural: str | None = None) -> str:
    """A count and its noun, singular for exactly one: ``1 call``, ``0 calls``, ``2.5 calls``.

    ``plural`` defaults to ``noun + "s"``; pass it for irregular nouns (``"graph
    breaks"`` is regular; ``"copy"`` → ``"copies"``). Integers are written with thousands
    separators, other numbers with three significant digits.
    """
    word = noun if n == 1 else (plural if plural is not None else noun + "s")
    number = f"{int(n):,}" if float(n).is_integer() else f"{n:.3g}"
    return f"{number} {word}"


def format_ratio(ratio: float, digits: int = 2, significant: bool = False) -> str:
    """A ratio as a multiple: ``1.84x`` (``digits`` decimals), ``64x`` (none); with
    ``significant``, ``digits`` significant digits (``0.53x``, ``12x``)."""
    return f"{ratio:.{digits}{'g' if significant else 'f'}}x"


def ratio_range(low: float, high: float) -> str:
    """An interval of ratios, two decimals each: ``1.25-1.40x``."""
    return f"{low:.2f}-{format_ratio(high)}"


def speedup_text(speedup: float) -> str:
    """A ratio of times (before / after) as a change: ``1.90x faster``, ``3.98x slower``."""
    if speedup >= 1:
        return f"{format_ratio(speedup)} faster"
    return f"{format_ratio(1 / speedup)} slower" if speedup > 0 else "slower"


def format_error(x: float) -> str:
    """A numerical error in two significant digits: ``0``, ``3.1e-03``, ``0.12``."""
    if x == 0:
        return "0"
    return f"{x:.2g}" if 1e-2 <= abs(x) < 1e3 else f"{x:.1e}"


def cut_end(text: str, width: int) -> str:
    """``text`` at most ``width`` characters, cut at its end with "…" (labels, lists)."""
    return text if len(text) <= width else text[: width - 1] + "…"
