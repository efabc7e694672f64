"""``--try``'s report: the Experiments table (one row per variant, sortable) and a bar
chart of the speed-ups with their noise band (SVG), pure functions of the result."""

from __future__ import annotations

from html import escape

from kernelmagic.core.experiment_rows import ExperimentRow
from kernelmagic.core.units import counted, format_error, format_us, speedup_text
from kernelmagic.render.table import Column, Table
from kernelmagic.results.result import ProfileResult

#: Bar colours: measured faster, measured slower (both beyond the noise), within it.
FASTER, SLOWER, NOISE = "#2e7d32", "#c62828", "#9e9e9e"
#: A mark on a speed-up whose numerical error is above the dtype's usual tolerance.
OVER_TOLERANCE = "⚠"


def speedup_cell(row: ExperimentRow) -> str:
    """``1.90x faster``, marked when its error is above the tolerance; ``—`` not run."""
    if not row.ran:
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
    """The noise verdict, or why the variant did not run."""
    if row.skipped:
        return f"not run: {row.error}"
    if row.error:
        return f"failed: {row.error}"
    return row.verdict.partition(", ")[2]


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
        Column("median", "per iteration", lambda r: r.median_us,
               lambda r: format_us(r.median_us) if r.ran else "—"),
        Column("speedup", "speed-up", lambda r: r.speedup if r.ran else -1.0, speedup_cell,
               width=130),
        Column("noise", "noise / why not", note_cell, note_cell, numeric=False, width=320),
        _error("max_abs_error"),
        _error("max_rel_error"),
        Column("numerics", "numerics", numerics_cell, numerics_cell, numeric=False,
               width=220),
        Column("compile", "compile (1st call)", lambda r: r.compile_us or 0.0,
               lambda r: format_us(r.compile_us) if r.compile_us is not None else ""),
    ]
    return Table(cols, list(result.experiments), "speedup", noun="variants")


def baseline_line(result: ProfileResult) -> str:
    """What the speed-ups are measured against: the baseline's median per iteration."""
    return (f"Experiments: speed-ups against this run's median of "
            f"{format_us(result.stats.median * 1e6)} per iteration, each variant with the "
            f"same warm-up and {counted(result.iters, 'iteration')}; {OVER_TOLERANCE} marks an "
            "error above the dtype's usual tolerance")


def experiments_svg(result: ProfileResult, width: int = 720) -> bytes | None:
    """One bar per variant that ran, its length the speed-up; a whisker from the two
    runs' quartiles (``speedup_low`` to ``speedup_high``) and a grey band around 1x,
    the baseline's own spread: bars whose whisker crosses it are within the noise."""
    rows = [r for r in result.experiments if r.ran]
    if not rows:
        return None
    left, right, top, bar, gap = 150, 160, 26, 18, 8
    stats = result.stats
    band = ((stats.median / stats.q3 if stats.q3 > 0 else 1.0),
            (stats.median / stats.q1 if stats.q1 > 0 else 1.0))
    span = max(max(r.speedup_high for r in rows), max(r.speedup for r in rows), band[1], 1.0)
    span *= 1.05
    plot = width - left - right
    height = top + len(rows) * (bar + gap) + 20

    def x(v: float) -> float:
        return left + plot * min(v, span) / span

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="sans-serif" font-size="11">',
           f'<text x="{left}" y="14">speed-up against the baseline (1x); grey band: the '
           "baseline's own spread (IQR)</text>",
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
