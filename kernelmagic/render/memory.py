"""``--memory``'s report: the peak in a sentence, the allocations alive at it (a sortable
table), what each iteration keeps, and the timeline stacked by category (SVG)."""

from __future__ import annotations

from html import escape
from math import inf

from kernelmagic.core.memory_rows import (
    CATEGORIES,
    CATEGORY_WORDS,
    MEMORY_CATEGORIES,
    LiveBlockRow,
    MemoryPeakRow,
    MemoryPoint,
)
from kernelmagic.core.units import format_bytes, format_us, percent
from kernelmagic.render.chart import INK
from kernelmagic.render.table import Column, Table, text_column
from kernelmagic.render.views import Picture
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.memory import named_peaks


def highest_peaks(result: ProfileResult) -> list[MemoryPeakRow]:
    """Per device, the peak the note names (``views.memory.highest_peak``: the largest
    rise, on the CPU not the first of several iterations'): the iteration the memory
    chart shows and the alive table is taken at."""
    return named_peaks(result.memory_peaks)


#: The make-up's unit: the largest the largest category fills at least once.
_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10), ("B", 1))


def peak_sentence(row: MemoryPeakRow, iterations: int = 1) -> str:
    """``CPU memory peak 41.2 MiB (+16.0 MiB in the iteration) during aten::mm in
    AddmmBackward0, 63% into iteration 2: parameters 8.0, ... MiB``; for an iteration that
    never rose above its start, ``CPU memory 41.2 MiB at the start of iteration 2, never
    higher in it: ...``."""
    where = f" during {row.op}" if row.op else ""
    if row.scope:
        where += f" in {row.scope}"
    it = f"iteration {row.iteration}" if iterations > 1 else "the iteration"
    largest = max(getattr(row, c) for c in CATEGORIES)
    unit, size = next(((u, n) for u, n in _UNITS if largest >= n), _UNITS[-1])
    parts = [f"{CATEGORY_WORDS[c]} {getattr(row, c) / size:.1f}" for c in CATEGORIES
             if getattr(row, c) >= 0.05 * size]
    makeup = (": " + ", ".join(parts) + f" {unit}") if parts else ""
    if row.rise <= 0:  # nothing rose above the level the iteration started at
        return (f"{row.device} memory {format_bytes(row.total)} at the start of {it}, "
                f"never higher in it{makeup}")
    return (f"{row.device} memory peak {format_bytes(row.total)} "
            f"(+{format_bytes(row.rise)} in the iteration){where}, "
            f"{percent(row.fraction)} into {it}{makeup}")


def memory_notes(result: ProfileResult) -> list[str]:
    """The one-line memory facts: each device's peak, and why categories are missing."""
    notes = [peak_sentence(r, result.iters) for r in highest_peaks(result)]
    if result.memory_note:
        notes.append(f"Memory: {result.memory_note}")
    return notes


#: The alive-at-the-peak table's title, the same in the text, HTML and widget reports.
ALIVE_TITLE = "memory alive at the peak"


def _created(row: LiveBlockRow) -> float:
    """When the allocation was made, µs from the peak iteration's start (what it sorts by:
    before profiling first, then earlier iterations' in order, then this one's)."""
    return -inf if row.before_profiling else row.created_us


def _created_text(row: LiveBlockRow) -> str:
    """``1.20 ms`` into the iteration, or ``before`` (an earlier iteration, the warm-up,
    or before profiling began): a time before the iteration's start is no time in it."""
    return "before" if row.before_profiling or row.created_us < 0 else format_us(row.created_us)


def alive_table(result: ProfileResult) -> Table:
    """The allocations alive at the peak (``ALIVE_TITLE``), the largest first."""
    cols = [
        Column("op", "allocated by", lambda r: r.op,
               lambda r: r.op or ("(before profiling)" if r.before_profiling else ""),
               numeric=False, width=220),
        Column("bytes", "size", lambda r: r.nbytes, lambda r: format_bytes(r.nbytes), width=90),
        Column("category", "category", lambda r: r.category,
               lambda r: CATEGORY_WORDS.get(r.category, r.category), numeric=False, width=130),
        text_column("shape", "shape", lambda r: r.shape, width=150),
        text_column("dtype", "dtype", lambda r: r.dtype, width=80),
        Column("created", "allocated (into the iteration)", _created, _created_text,
               width=220),
        text_column("device", "device", lambda r: r.device, width=70),
    ]
    if any(r.source for r in result.memory_alive):
        cols.insert(5, text_column("source", "line", lambda r: r.source, width=160))
    return Table(cols, list(result.memory_alive), "bytes", noun="allocations")


def growth_table(result: ProfileResult) -> Table:
    """What every iteration kept to the end, by the op (and line) that allocated it."""
    cols = [
        Column("op", "allocated by", lambda r: r.op, lambda r: r.op or "?", numeric=False,
               width=220),
        text_column("source", "line", lambda r: r.source, width=160),
        Column("per_iter", "kept per iteration (mean)", lambda r: r.per_iter,
               lambda r: format_bytes(r.per_iter), width=150),
        Column("least", "least", lambda r: r.least, lambda r: format_bytes(r.least), width=90),
        Column("most", "most", lambda r: r.most, lambda r: format_bytes(r.most), width=90),
        Column("blocks", "allocations (all iterations)", lambda r: r.blocks,
               lambda r: f"{r.blocks:,}", width=170),
        text_column("device", "device", lambda r: r.device, width=70),
    ]
    return Table(cols, list(result.memory_growth), "per_iter", noun="sources")


def memory_svg(result: ProfileResult, width: int = 720, height: int = 220) -> bytes | None:
    """The memory timeline (one band per device and iteration shown) stacked by
    category, the peak marked; None when there is no timeline."""
    groups: dict[tuple[str, int], list[MemoryPoint]] = {}
    for p in result.memory_timeline:
        groups.setdefault((p.device, p.iteration), []).append(p)
    if not groups:
        return None
    peaks = {(r.device, r.iteration): r for r in result.memory_peaks}
    named_peak = {r.device: r.iteration for r in highest_peaks(result)}
    left, right, top, legend = 64, 12, 18, 18
    band = height - top - 24
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{(band + top + 24) * len(groups) + legend}" '
           f'font-family="sans-serif" font-size="11" fill="{INK}">']
    y0 = 0
    for (device, iteration), pts in groups.items():
        span = max(pts[-1].t_us, 1e-9)
        peak_total = max(p.total for p in pts) or 1.0
        plot_w = width - left - right

        def x(t: float, plot_w: float = plot_w, span: float = span) -> float:
            return left + plot_w * t / span

        def y(v: float, base: int = y0, peak_total: float = peak_total) -> float:
            return base + top + band * (1 - v / peak_total)

        named = " (the peak's)" if named_peak.get(device) == iteration else ""
        out.append(f'<text x="{left}" y="{y0 + 12}">{escape(device)} · iteration '
                   f'{iteration}{named} · allocated memory by category</text>')
        below = [0.0] * len(pts)
        for c, colour in ((c.name, c.colour) for c in MEMORY_CATEGORIES):
            above = [b + getattr(p, c) for b, p in zip(below, pts, strict=True)]
            if above == below:
                continue
            upper, lower = [], []
            for i, p in enumerate(pts):  # steps: the level holds until the next change
                nxt = pts[i + 1].t_us if i + 1 < len(pts) else p.t_us
                upper += [(x(p.t_us), y(above[i])), (x(nxt), y(above[i]))]
                lower += [(x(p.t_us), y(below[i])), (x(nxt), y(below[i]))]
            poly = upper + lower[::-1]
            coords = " ".join(f"{a:.1f},{b:.1f}" for a, b in poly)
            out.append(f'<polygon points="{coords}" fill="{colour}" fill-opacity="0.8">'
                       f"<title>{escape(CATEGORY_WORDS[c])}</title></polygon>")
            below = above
        out.append(f'<text x="{left - 4}" y="{y(peak_total) + 4:.1f}" text-anchor="end">'
                   f"{escape(format_bytes(peak_total))}</text>")
        out.append(f'<text x="{left - 4}" y="{y(0) + 4:.1f}" text-anchor="end">0</text>')
        out.append(f'<text x="{left + plot_w}" y="{y(0) + 16:.1f}" text-anchor="end">'
                   f"{escape(format_us(span))}</text>")
        peak = peaks.get((device, iteration))
        if peak is not None:
            px = x(peak.t_us)
            out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{y(0):.1f}" '
                       f'y2="{y(peak_total):.1f}" stroke="{INK}" stroke-dasharray="3,2"/>')
            label = f"peak {format_bytes(peak.total)}" + (f" · {peak.op}" if peak.op else "")
            anchor = "end" if px > left + plot_w / 2 else "start"
            out.append(f'<text x="{px + (-4 if anchor == "end" else 4):.1f}" '
                       f'y="{y(peak_total) + 12:.1f}" text-anchor="{anchor}">'
                       f"{escape(label)}</text>")
        y0 += band + top + 24
    x0 = 8
    for c, colour in ((c.name, c.colour) for c in MEMORY_CATEGORIES):
        out.append(f'<rect x="{x0}" y="{y0 + 4}" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{x0 + 13}" y="{y0 + 13}">{escape(CATEGORY_WORDS[c])}</text>')
        x0 += 24 + 6 * len(CATEGORY_WORDS[c])
    out.append("</svg>")
    return "".join(out).encode()


def memory_tables(result: ProfileResult) -> list[tuple[str, object]]:
    """``--memory``'s tables: what was alive at the peak (or why nothing could be followed
    there), and the memory each iteration kept."""
    if "memory" not in result.views or not (result.memory_alive or result.memory_timeline):
        return []
    views: list[tuple[str, object]] = [(
        ALIVE_TITLE, alive_table(result) if result.memory_alive else
        "No allocation could be followed to the peak (a trace, or a run whose category "
        "analysis failed, holds only the raw records).")]
    if result.memory_growth:
        views.append(("memory growth", growth_table(result)))
    return views


def memory_picture(result: ProfileResult) -> Picture | None:
    """The memory timeline by category (SVG), above the alive-at-the-peak table."""
    svg = memory_svg(result) if "memory" in result.views else None
    return Picture(svg, "image/svg+xml", "memory timeline") if svg is not None else None
