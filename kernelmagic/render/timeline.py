"""``--timeline``'s picture: one profiled iteration as an SVG that explains itself.

Lanes are the CPU's top-level ops and, on a GPU, the kernels of each stream; at the bottom
the dependency model's critical path, coloured by what lies on it (``result.critical_spans``).
The ops that take most of the iteration get a colour each, named in a legend below the
lanes (the rest share one grey, "other ops"); a bar is labelled only where its name fits
inside it, and every bar and legend entry carries its full name and time in a
``<title>``, which a browser shows on hover when the SVG is inline (the HTML report and the
widget put it inline).
Colours of text follow the page (``currentColor``), so the picture reads on light and dark
themes alike.
"""

from __future__ import annotations

from html import escape

from kernelmagic.core.rows import Span
from kernelmagic.core.units import format_us
from kernelmagic.render.memory import highest_peaks
from kernelmagic.results.builder import median_index
from kernelmagic.results.result import ProfileResult

#: Colours for the ops that take most of the iteration, most first (matplotlib's tab10).
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#bcbd22")
OTHER = "#9e9e9e"
#: Colours of the critical path's categories (its lane at the bottom), apart from the ops'.
PATH_PALETTE = ("#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#5254a3", "#6b6ecf")
PATH_LANE = "critical path"
FONT = 11  # px
CHAR = 0.62 * FONT  # a generous width of one character of the sans-serif font, px
LEFT, RIGHT, TOP = 78, 12, 22
LANE, GAP = 22, 6  # px: a lane's bar height, the space between lanes
LEGEND_ROW = 16


def text_width(text: str) -> float:
    """About how wide ``text`` is drawn at ``FONT`` px (never less than it is)."""
    return len(text) * CHAR


def short_name(key: str) -> str:
    """A bar's label: the op without its ``aten::`` namespace."""
    return key.removeprefix("aten::")


def lane_order(spans: list[Span]) -> list[str]:
    """The CPU first, then the streams in their order, the critical path last."""
    return sorted({s.lane for s in spans},
                  key=lambda lane: (lane == PATH_LANE, lane != "CPU", lane))


def colours(spans: list[Span]) -> dict[str, str]:
    """An own colour for each of the ops with the most time in the iteration, in order;
    every other op is ``OTHER``."""
    time: dict[str, float] = {}
    for s in spans:
        time[s.key] = time.get(s.key, 0.0) + (s.end - s.start)
    top = sorted(time, key=lambda k: (-time[k], k))[: len(PALETTE)]
    return {k: PALETTE[i] for i, k in enumerate(top)}


def _bar(s: Span, x0: float, scale: float, y: float, colour: str) -> str:
    """One span: its rect with a hover title, and its label where the label fits."""
    x, w = x0 + s.start * scale, max((s.end - s.start) * scale, 0.5)
    title = (f"{s.key} · {format_us(s.end - s.start)} · {s.lane}, from "
             f"{format_us(s.start)} into the iteration")
    out = (f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{LANE}" fill="{colour}" '
           f'stroke="white" stroke-width="0.4"><title>{escape(title)}</title></rect>')
    label = short_name(s.key)
    if text_width(label) <= w - 6:  # fits: drawn whole; else left out (the title has it)
        out += (f'<text x="{x + w / 2:.1f}" y="{y + LANE / 2 + 4:.1f}" text-anchor="middle" '
                f'fill="white" pointer-events="none">{escape(label)}</text>')
    return out


def _axis(x0: float, plot_w: float, end: float, y: float) -> list[str]:
    """Five ticks along the iteration, labelled in its time unit."""
    out = [f'<line x1="{x0}" x2="{x0 + plot_w}" y1="{y}" y2="{y}" stroke="currentColor" '
           'stroke-opacity="0.5"/>']
    for i in range(5):
        x = x0 + plot_w * i / 4
        anchor = "start" if i == 0 else "end" if i == 4 else "middle"
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y}" y2="{y + 4}" '
                   'stroke="currentColor" stroke-opacity="0.5"/>'
                   f'<text x="{x:.1f}" y="{y + 16}" text-anchor="{anchor}" '
                   f'fill="currentColor">{escape(format_us(end * i / 4))}</text>')
    return out


def _legend(colour_of: dict[str, str], others: bool, width: int, y: float,
            path_colours: dict[str, str] | None = None) -> tuple[list[str], float]:
    """Swatches for the coloured ops (and "other ops"), then the critical path's categories,
    wrapped to ``width``; the lanes' meaning on the line below. Returns the elements and the
    y below them."""
    items = [(short_name(k), k, c) for k, c in colour_of.items()]
    if others:
        items.append(("other ops", "every op without a colour of its own", OTHER))
    items += [(f"path: {k}", f"on the critical path: {k}", c)
              for k, c in (path_colours or {}).items()]
    out, x = [], 8.0
    for label, full, colour in items:
        step = 18 + text_width(label) + 12
        if x + step > width and x > 8:
            x, y = 8.0, y + LEGEND_ROW
        out.append(f'<g><title>{escape(full)}</title>'
                   f'<rect x="{x:.1f}" y="{y - 10:.1f}" width="12" height="12" '
                   f'fill="{colour}"/><text x="{x + 16:.1f}" y="{y:.1f}" '
                   f'fill="currentColor">{escape(label)}</text></g>')
        x += step
    y += LEGEND_ROW + 2
    path = "; critical path = what the iteration waits on" if path_colours else ""
    out.append(f'<text x="8" y="{y:.1f}" fill="currentColor" fill-opacity="0.8">Lanes: CPU '
               f"= top-level ops; stream N = GPU work on stream N{path}. Hover a bar for its "
               "name and time.</text>")
    return out, y + 8


def drawn_iteration(result: ProfileResult) -> int:
    """The iteration the timeline draws: the memory peak's (``views/specs.py:
    timeline_at_peak``) or the median one."""
    at = getattr(result.view("timeline"), "iteration", -1)
    return at if at >= 0 else median_index(result.timings)


def timeline_title(result: ProfileResult) -> str:
    """The iteration the timeline draws and why: ``cell[3]: iteration 2 (the median one,
    and the CPU memory peak's)``; with ``--memory`` and a peak elsewhere it draws the
    peak's, the one the memory chart and the peak note name: ``cell[3]: iteration 1 (the
    CPU memory peak's; the critical path is the median one's, iteration 2)``."""
    median, drawn = median_index(result.timings), drawn_iteration(result)
    peaks = highest_peaks(result)
    here = [p.device for p in peaks if p.iteration == drawn]
    elsewhere = [f"the {p.device} memory peak is in iteration {p.iteration}"
                 for p in peaks if p.iteration != drawn]
    said = "the median one" if drawn == median else ""
    if here:
        said += (", and the " if said else "the ") + f"{' and '.join(here)} memory peak's"
    if drawn != median:
        said += f"; the critical path is the median one's, iteration {median}"
    if elsewhere:
        said += "; " + ", ".join(elsewhere)
    return f"{result.name}: iteration {drawn} ({said})"


def timeline_svg(result: ProfileResult, width: int = 900) -> bytes:
    """One profiled iteration (``drawn_iteration``; its title: ``timeline_title``): a lane
    per CPU and stream, bars coloured by op, a time axis, a legend of the colours and the
    lanes, and the critical path's lane over the median iteration."""
    ops = list(result.timeline)
    # The critical path is the median iteration's: drawn only over that iteration.
    median = drawn_iteration(result) == median_index(result.timings)
    path = list(getattr(result, "critical_spans", [])) if median else []
    spans = ops + path
    lanes = lane_order(spans)
    colour_of = colours(ops)
    path_colours = {k: PATH_PALETTE[i % len(PATH_PALETTE)]
                    for i, k in enumerate(dict.fromkeys(s.key for s in path))}
    end = max((s.end for s in spans), default=0.0) or 1.0
    plot_w = width - LEFT - RIGHT
    scale = plot_w / end
    parts = [f'<text x="8" y="14" fill="currentColor" font-weight="bold">'
             f"{escape(timeline_title(result))}</text>"]
    y = float(TOP)
    for lane in lanes:
        parts.append(f'<text x="{LEFT - 6}" y="{y + LANE / 2 + 4:.1f}" text-anchor="end" '
                     f'fill="currentColor">{escape(lane)}</text>')
        parts += [_bar(s, LEFT, scale, y, path_colours.get(s.key, OTHER) if lane == PATH_LANE
                       else colour_of.get(s.key, OTHER))
                  for s in spans if s.lane == lane]
        y += LANE + GAP
    if not spans:
        parts.append(f'<text x="{width / 2}" y="{y + 12}" text-anchor="middle" '
                     'fill="currentColor">no events in this iteration</text>')
        y += LANE
    parts += _axis(LEFT, plot_w, end, y)
    others = any(s.key not in colour_of for s in ops)
    legend, bottom = _legend(colour_of, others, width, y + 40, path_colours)
    parts += legend
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="km-timeline" width="{width}" '
            f'height="{bottom:.0f}" viewBox="0 0 {width} {bottom:.0f}" '
            f'style="max-width:100%;height:auto" font-family="sans-serif" font-size="{FONT}">')
    return (head + "".join(parts) + "</svg>").encode()
