"""``--try``'s report: the Experiments table (one row per variant, sortable) and a bar
chart of the speed-ups with their 95% intervals and the band of 1 ± ``MIN_EFFECT`` (SVG),
pure functions of the result."""

from __future__ import annotations

from html import escape

from kernelmagic.core.experiment_rows import ExperimentRow
from kernelmagic.core.timing import MIN_EFFECT
from kernelmagic.core.units import counted, format_error, format_us, percent, speedup_text
from kernelmagic.render.table import Column, Table
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
        Column("op", "variant", lambda r: r.variant, lambda r: r.variant, numeric=False,
               width=140),
        Column("median", "per call (unprofiled)", lambda r: r.median_us,
               lambda r: format_us(r.median_us) if r.ran else "—"),
        Column("predicted", "predicted", lambda r: r.predicted_speedup or 0.0, predicted_cell,
               width=130),
        Column("speedup", "speed-up", lambda r: r.speedup if r.ran else -1.0, speedup_cell,
               width=130),
        Column("noise", "interval / why not", note_cell, note_cell, numeric=False, width=320),
        _error("max_abs_error"),
        _error("max_rel_error"),
        Column("numerics", "numerics", numerics_cell, numerics_cell, numeric=False,
               width=220),
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


def experiments_svg(result: ProfileResult, width: int = 720) -> bytes | None:
    """One bar per variant timed, its length the speed-up; a whisker over its 95%
    interval (``speedup_low`` to ``speedup_high``) and a grey band over 1 ±
    ``MIN_EFFECT``: a bar is beyond the noise only when its whisker clears the band."""
    rows = [r for r in result.experiments if r.ran and r.speedup > 0]
    if not rows:
        return None
    left, right, top, bar, gap = 150, 160, 26, 18, 8
    band = (1 / (1 + MIN_EFFECT), 1 + MIN_EFFECT)
    span = max(max(r.speedup_high for r in rows), max(r.speedup for r in rows), band[1], 1.0)
    span *= 1.05
    plot = width - left - right
    height = top + len(rows) * (bar + gap) + 20

    def x(v: float) -> float:
        return left + plot * min(v, span) / span

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="14">speed-up against the baseline (1x), whiskers: 95% '
           f"intervals; grey band: changes under {percent(MIN_EFFECT)}</text>",
           f'<rect x="{x(band[0]):.1f}" y="{top - 4}" width="{x(band[1]) - x(band[0]):.1f}" '
           f'height="{height - top - 12}" fill="{NOISE}" fill-opacity="0.25"/>',
           f'<line x1="{x(1.0):.1f}" y1="{top - 6}" x2="{x(1.0):.1f}" y2="{height - 8}" '
           'stroke="#555" stroke-dasharray="3,2"/>']
    for i, row in enumerate(rows):
        y = top + i * (bar + gap)
        colour = FASTER if row.faster else SLOWER if row.slower else NOISE
        mid = y + bar / 2
        out += [
            f'<text x="{left - 6}" y="{mid + 4:.1f}" text-anchor="end">'
            f"{escape(row.variant)}</text>",
            f'<rect x="{left}" y="{y}" width="{x(row.speedup) - left:.1f}" height="{bar}" '
            f'fill="{colour}"/>',
            f'<line x1="{x(row.speedup_low):.1f}" y1="{mid:.1f}" x2="{x(row.speedup_high):.1f}" '
            f'y2="{mid:.1f}" stroke="#555" stroke-width="1.5"/>',
            f'<text x="{x(max(row.speedup, row.speedup_high)) + 6:.1f}" y="{mid + 4:.1f}">'
            f"{escape(speedup_cell(row))}</text>",
        ]
    out.append("</svg>")
    return "".join(out).encode()


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
