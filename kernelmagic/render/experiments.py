"""``--try``'s report: the Experiments table (one row per variant, sortable) and a bar
chart of the speed-ups on a log axis marked in speed-ups (1x drawn solid), with their 95%
intervals kept within it and the band of 1 ± ``MIN_EFFECT`` (SVG), pure functions of the
result."""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape

from kernelmagic.core.experiment_rows import ExperimentRow
from kernelmagic.core.timing import MIN_EFFECT
from kernelmagic.core.units import (
    counted,
    format_error,
    format_ratio,
    format_us,
    percent,
    speedup_text,
)
from kernelmagic.render.chart import INK
from kernelmagic.render.table import Column, Table, text_column
from kernelmagic.render.views import Picture
from kernelmagic.results.result import ProfileResult

#: Bar colours: measured faster, measured slower (both beyond the noise), within it.
FASTER, SLOWER, NOISE = "#2e7d32", "#c62828", "#9e9e9e"
#: A mark on a speed-up whose numerical error is above the dtype's usual tolerance.
OVER_TOLERANCE = "⚠"


def speedup_cell(row: ExperimentRow) -> str:
    """``1.90x faster``, marked when its error is above the tolerance; ``—`` not run or
    not timed."""
    if not row.ran or row.speedup <= 0:
        return "—"
    mark = f" {OVER_TOLERANCE}" if row.within_tolerance is False else ""
    return speedup_text(row.speedup) + mark


def numerics_cell(row: ExperimentRow) -> str:
    """How the value compares: ``within bfloat16 tolerance``, ``⚠ above float32
    tolerance``, ``not comparable: ...``; "" for a row that did not run."""
    if not row.ran:
        return ""
    if row.numerics:
        return row.numerics
    if row.within_tolerance is False:
        return f"{OVER_TOLERANCE} above {row.tolerance} tolerance"
    return f"within {row.tolerance} tolerance"


def note_cell(row: ExperimentRow) -> str:
    """The speed-up's interval and noise verdict (``95% interval 1.25-1.40x: beyond the
    noise``), or why the variant did not run."""
    if row.skipped:
        return f"not run: {row.error}"
    if row.error:
        return f"failed: {row.error}"
    return row.verdict.partition(", ")[2] or row.verdict


def predicted_cell(row: ExperimentRow) -> str:
    """What the dependency model predicted for the variant (``at most 1.45x faster``),
    "" when it has no prediction."""
    if not row.ran or row.predicted_speedup is None:
        return ""
    return f"at most {speedup_text(row.predicted_speedup)}"


def _error(read: str) -> Column:
    def value(row: ExperimentRow) -> float:
        x = getattr(row, read)
        return -1.0 if x is None else float(x)

    def show(row: ExperimentRow) -> str:
        x = getattr(row, read)
        return "—" if x is None else format_error(x)

    return Column(read, read.replace("_", " "), value, show)


def experiments_table(result: ProfileResult) -> Table:
    """The Experiments table, fastest variant first; per-iteration times (medians)."""
    cols = [
        text_column("op", "variant", lambda r: r.variant, width=140),
        Column("median", "per call (unprofiled)", lambda r: r.median_us,
               lambda r: format_us(r.median_us) if r.ran else "—"),
        Column("predicted", "predicted", lambda r: r.predicted_speedup or 0.0, predicted_cell,
               width=130),
        Column("speedup", "speed-up", lambda r: r.speedup if r.ran else -1.0, speedup_cell,
               width=130),
        text_column("noise", "interval / why not", note_cell, width=320),
        _error("max_abs_error"),
        _error("max_rel_error"),
        text_column("numerics", "numerics", numerics_cell, width=220),
        Column("compile", "compile (1st call)", lambda r: r.compile_us or 0.0,
               lambda r: format_us(r.compile_us) if r.compile_us is not None else ""),
    ]
    return Table(cols, list(result.experiments), "speedup", noun="variants")


def baseline_line(result: ProfileResult) -> str:
    """How the speed-ups were measured: the rounds, and the baseline they are against."""
    timed = [r for r in result.experiments if r.ran and r.rounds]
    if not timed:
        how = "each variant profiled with the same warm-up and iterations; no interleaved rounds"
    else:
        batch = timed[0].batch
        calls = f", {counted(batch, 'call')} per sample" if batch > 1 else ""
        base = result.unprofiled_s
        how = (f"{counted(timed[0].rounds, 'interleaved round')} timed unprofiled, the order "
               f"shuffled each round{calls}; each speed-up is the median of the paired "
               "ratios with its 95% interval, beyond the noise only when the whole interval "
               f"is past 1 ± {percent(MIN_EFFECT)}"
               + (f"; the baseline took {format_us(base * 1e6)} per call unprofiled "
                  f"({format_us(result.stats.median * 1e6)} profiled)" if base else ""))
    return (f"Experiments: {how}; {OVER_TOLERANCE} marks an error above the dtype's usual "
            "tolerance")


#: The axis reaches at most this factor past the bars' own range (log scale): a whisker
#: running further (a wide interval from few rounds) is cut at the axis's end, an arrow
#: there saying it goes on.
WHISKER_ROOM = 4.0
#: The chart's margins (px): variant names on the left, the speed-up's words on the right.
_LEFT, _RIGHT, _TOP, _BAR, _GAP, _AXIS = 150, 160, 26, 18, 8, 30


def axis_ticks(low: float, high: float) -> list[float]:
    """The speed-ups the log axis marks from ``low`` to ``high`` (both > 0): the 1-2-5
    sequence (``0.5x 1x 2x 5x``) around them, only the powers of ten when that would be
    more than nine ticks; 1x always. The first tick is at or below ``low``, the last at or
    above ``high``: they are the axis's ends."""
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    steps = (1.0, 2.0, 5.0)
    ticks = [m * 10.0 ** e for e in range(first, last + 1) for m in steps]
    below = max((t for t in ticks if t <= low * (1 + 1e-9)), default=ticks[0])
    above = min((t for t in ticks if t >= high * (1 - 1e-9)), default=ticks[-1])
    ticks = [t for t in ticks if below <= t <= above]
    if len(ticks) > 9:
        ticks = [10.0 ** e for e in range(first, last + 1)]
    return sorted(set(ticks) | {1.0})


def tick_label(t: float) -> str:
    """``0.5x``, ``1x``, ``20x``: a tick's speed-up in the fewest digits."""
    return format_ratio(t, 0) if t >= 1 else format_ratio(t, 1, significant=True)


def _axis_range(rows: list[ExperimentRow]) -> tuple[float, float]:
    """The axis's ends: the bars, 1x and the noise band, and the whiskers as far as
    ``WHISKER_ROOM`` beyond the bars, widened to the ticks around them."""
    band = (1 / (1 + MIN_EFFECT), 1 + MIN_EFFECT)
    lo = min(min(r.speedup for r in rows), band[0])
    hi = max(max(r.speedup for r in rows), band[1])
    lows = [r.speedup_low for r in rows if r.speedup_low > 0]
    lo = min(lo, max(min(lows, default=lo), lo / WHISKER_ROOM))
    hi = max(hi, min(max(r.speedup_high for r in rows), hi * WHISKER_ROOM))
    ticks = axis_ticks(lo, hi)
    return ticks[0], ticks[-1]


def experiments_svg(result: ProfileResult, width: int = 720) -> bytes | None:
    """One bar per variant timed, from 1x to its speed-up on a log axis (faster to the
    right, slower to the left; ticks ``axis_ticks``, 1x drawn solid), a whisker over its
    95% interval (``speedup_low`` to ``speedup_high``, cut at the axis's ends with an
    arrow) and a grey band over 1 ± ``MIN_EFFECT``: a bar is beyond the noise only when
    its whisker clears the band."""
    rows = [r for r in result.experiments if r.ran and r.speedup > 0]
    if not rows:
        return None
    lo, hi = _axis_range(rows)
    plot = width - _LEFT - _RIGHT
    bottom = _TOP + len(rows) * (_BAR + _GAP)
    height = bottom + _AXIS
    band = (1 / (1 + MIN_EFFECT), 1 + MIN_EFFECT)
    scale = plot / math.log(hi / lo)

    def x(v: float) -> float:
        """``v``'s place on the axis, kept within it."""
        return _LEFT + scale * math.log(min(max(v, lo), hi) / lo)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11" fill="{INK}">',
           f'<text x="{_LEFT}" y="14">speed-up against the baseline (log scale, 1x: as fast),'
           f" whiskers: 95% intervals; grey band: changes under {percent(MIN_EFFECT)}</text>",
           f'<rect x="{x(band[0]):.1f}" y="{_TOP - 4}" width="{x(band[1]) - x(band[0]):.1f}" '
           f'height="{bottom - _TOP + 4}" fill="{NOISE}" fill-opacity="0.25"/>']
    out += _axis(x, axis_ticks(lo, hi), bottom)
    for i, row in enumerate(rows):
        out += _bar(row, x, _TOP + i * (_BAR + _GAP), (lo, hi))
    out.append("</svg>")
    return "".join(out).encode()


def _axis(x: Callable[[float], float], ticks: list[float], bottom: int) -> list[str]:
    """The axis line under the bars, a tick and a faint grid line at each speed-up marked,
    1x's line solid across the bars."""
    out = [f'<line x1="{x(ticks[0]):.1f}" y1="{bottom}" x2="{x(ticks[-1]):.1f}" '
           f'y2="{bottom}" stroke="{INK}"/>']
    for t in ticks:
        at = x(t)
        one = t == 1.0
        out += [f'<line class="grid" x1="{at:.1f}" y1="{_TOP - 6}" x2="{at:.1f}" '
                f'y2="{bottom + 4}" stroke="{INK}" stroke-width="{1.2 if one else 0.5}"'
                + ("" if one else ' stroke-opacity="0.4"') + "/>",
                f'<text class="tick" x="{at:.1f}" y="{bottom + 16}" text-anchor="middle">'
                f"{tick_label(t)}</text>"]
    return out


def _bar(row: ExperimentRow, x: Callable[[float], float], y: int,
         ends: tuple[float, float]) -> list[str]:
    """One variant's bar from 1x to its speed-up, its whisker and its words."""
    colour = FASTER if row.faster else SLOWER if row.slower else NOISE
    mid = y + _BAR / 2
    one, at = x(1.0), x(row.speedup)
    low, high = x(row.speedup_low), x(row.speedup_high)
    out = [f'<text x="{_LEFT - 6}" y="{mid + 4:.1f}" text-anchor="end">'
           f"{escape(row.variant)}</text>",
           f'<rect class="bar" x="{min(one, at):.1f}" y="{y}" width="{abs(at - one):.1f}" '
           f'height="{_BAR}" fill="{colour}"/>',
           f'<line class="whisker" x1="{low:.1f}" y1="{mid:.1f}" x2="{high:.1f}" '
           f'y2="{mid:.1f}" stroke="{INK}" stroke-width="1.5"/>']
    if row.speedup_high > ends[1]:
        out.append(_arrow(high, mid, 1))
    if row.speedup_low < ends[0]:
        out.append(_arrow(low, mid, -1))
    out.append(f'<text x="{max(one, at, high) + 6:.1f}" y="{mid + 4:.1f}">'
               f"{escape(speedup_cell(row))}</text>")
    return out


def _arrow(tip: float, mid: float, way: int) -> str:
    """An arrowhead at a whisker cut at the axis's end (``way`` 1: right, -1: left)."""
    back = tip - 5 * way
    return (f'<polygon class="cut" points="{tip:.1f},{mid:.1f} {back:.1f},{mid - 3.5:.1f} '
            f'{back:.1f},{mid + 3.5:.1f}" fill="{INK}"/>')


def experiments_tables(result: ProfileResult) -> list[tuple[str, object]]:
    """``--try``'s table, or the note that says why nothing was tried."""
    if result.experiments:
        return [("experiments", experiments_table(result))]
    return [("experiments", result.experiments_note)] if result.experiments_note else []


def experiments_notes(result: ProfileResult) -> list[str]:
    return [baseline_line(result)] if result.experiments else []


def experiments_picture(result: ProfileResult) -> Picture | None:
    """The speed-ups' bars (SVG), above the table."""
    svg = experiments_svg(result) if result.experiments else None
    return Picture(svg, "image/svg+xml", "speed-ups") if svg is not None else None
