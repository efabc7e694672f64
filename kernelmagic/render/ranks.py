"""The many-ranks report: summary line, per-rank table, stacked bar chart (a heatmap past
``BARS_UP_TO`` ranks), the collectives with the largest skew, findings, widget.

Pure functions of a ``ManyRanksResult``. A rank's own full report is the ordinary
single-rank report (``render/bundle.py``), built when the rank is clicked.
"""

from __future__ import annotations

import statistics
from html import escape
from typing import TYPE_CHECKING, Any

from kernelmagic.core.units import counted, format_us, percent, signed_us
from kernelmagic.findings.ranks import straggler_spread
from kernelmagic.render.bundle import display_bundle
from kernelmagic.render.chart import figure_png, new_figure
from kernelmagic.render.html import findings_html, image_tag, static_table_html
from kernelmagic.render.table import Column, Table, text_column, time_column
from kernelmagic.render.text import findings_text, render_table

if TYPE_CHECKING:
    from kernelmagic.core.collective_rows import Collective
    from kernelmagic.results.ranks import ManyRanksResult

#: Bars of the chart: (field, label, colour). Communication hidden behind compute is not
#: stacked again, so a bar is about the step (memcpy under kernels still overlaps).
PARTS = (("compute_us", "compute", "#4C72B0"),
         ("exposed_communication_us", "communication not overlapped", "#DD8452"),
         ("memcpy_us", "memcpy/memset", "#55A868"), ("idle_us", "idle", "#BBBBBB"))


#: Where a rank's full report is, from Python and from the shell (``kernelmagic/cli.py``).
RANK_REPORT = "result.ranks[N], or python -m kernelmagic show FOLDER --rank N"


def ranks_table_model(result: ManyRanksResult) -> Table:
    """One row per rank (``RankSummary``), in rank order at first."""
    gpu = result.profiles_device
    columns = [
        Column("rank", "rank", lambda s: -s.rank, lambda s: str(s.rank), width=60),
        Column("steps", "steps", lambda s: s.steps, lambda s: str(s.steps), width=60),
        time_column("step", "step (median)", lambda s: s.step_median_us),
        time_column("iqr", "step IQR", lambda s: s.step_iqr_us),
        time_column("compute", "compute", lambda s: s.compute_us),
        time_column("communication", "communication", lambda s: s.communication_us),
    ]
    if gpu:
        columns += [time_column("memcpy", "memcpy", lambda s: s.memcpy_us)]
    columns += [time_column("idle", "idle", lambda s: s.idle_us)]
    if gpu:
        columns.append(Column("overlap", "overlapped", lambda s: s.overlap or 0.0,
                              lambda s: "-" if s.overlap is None else percent(s.overlap),
                              width=90))
    columns.append(text_column("file", "file", lambda s: s.file, width=240))
    return Table(columns=columns, rows=list(result.summaries.values()), sort_column="rank",
                 noun="ranks")


def ranks_table(result: ManyRanksResult, limit: int | None = None) -> str:
    """The per-rank table as aligned text (times per step). Past ``BARS_UP_TO`` ranks, the
    ranks farthest from the median step first, and those alike (``alike_ranks``) folded
    into one line after the table."""
    model = ranks_table_model(result)
    if len(result.summaries) <= BARS_UP_TO:
        return render_table(model, limit)
    alike, center, spread = alike_ranks(result)
    outliers = [s for s in result.summaries.values() if s.rank not in set(alike)]
    far = Column("from_median", "vs median", lambda s: abs(s.step_median_us - center),
                 lambda s: signed_us(s.step_median_us - center))
    folded = Table(columns=[model.columns[0], far, *model.columns[1:]], rows=outliers,
                   sort_column="from_median", noun="ranks")
    line = (f"{counted(len(alike), 'rank')} within ±{format_us(spread)} of the median step "
            f"{format_us(center)} (folded): {rank_ranges(alike)}")
    return (render_table(folded, limit) + "\n" if outliers else "") + line


def alike_ranks(result: ManyRanksResult) -> tuple[list[int], float, float]:
    """The ranks whose median step is within the straggler finding's spread of the median
    over ranks (``kernelmagic/findings/ranks.py: straggler_spread``), that median and that
    spread (µs):
    ranks that behave alike, by the same rule that says which one straggles."""
    summaries = list(result.summaries.values())
    center, spread = straggler_spread(summaries)
    alike = [s.rank for s in summaries if abs(s.step_median_us - center) <= spread]
    return alike, center, spread


def rank_ranges(ranks: list[int]) -> str:
    """``[0, 1, 2, 3, 6, 8, 9]`` -> ``"0-3, 6, 8-9"``."""
    spans: list[list[int]] = []
    for rank in sorted(ranks):
        if spans and rank == spans[-1][1] + 1:
            spans[-1][1] = rank
        else:
            spans.append([rank, rank])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def summary_line(result: ManyRanksResult) -> str:
    """Ranks and job, median step over ranks, slowest rank, median breakdown, and the
    ranks of the job without a file (``ManyRanksResult.missing_ranks``)."""
    summaries = list(result.summaries.values())
    n = len(summaries)
    job = ", ".join(filter(None, [result.world_size and f"world size {result.world_size}",
                                  result.backend]))
    head = counted(n, "rank") + (f" ({job})" if job else "")
    if not summaries:
        return head
    slow = max(summaries, key=lambda s: (s.step_median_us, -s.rank))
    fast = min(summaries, key=lambda s: (s.step_median_us, s.rank))

    def median_of(field: str) -> float:
        return statistics.median(getattr(s, field) for s in summaries)

    where = "GPU" if result.profiles_device else "CPU"
    spread = (f"fastest {fast.label} {format_us(fast.step_median_us)}, slowest {slow.label} "
              f"{format_us(slow.step_median_us)}")
    if format_us(fast.step_median_us) == format_us(slow.step_median_us):
        spread = "the same on every rank"  # a synchronised job: collectives even steps out
    parts = [head, f"step {format_us(result.median_step_us)} (median over ranks; {spread})",
             f"{where} per step (median): compute {format_us(median_of('compute_us'))}, "
             f"communication {format_us(median_of('communication_us'))}, "
             f"idle {format_us(median_of('idle_us'))}"]
    overlaps = [s.overlap for s in summaries if s.overlap is not None]
    if overlaps:
        parts[-1] += f", {percent(statistics.median(overlaps))} of communication overlapped"
    missing = result.missing_ranks
    if missing:
        parts.append(f"{counted(len(missing), 'rank')} of the job without a file: "
                     f"{rank_ranges(missing)}")
    return " · ".join(parts)


#: How many collectives (the largest skews) the report lists.
COLLECTIVES_SHOWN = 5


def skewed_collectives(result: ManyRanksResult) -> list[Collective]:
    """The collectives matched across two ranks or more, largest skew first (ties: step
    order), at most ``COLLECTIVES_SHOWN``."""
    matched = [c for c in result.collectives() if c.ranks >= 2 and c.skew_us > 0]
    return sorted(matched, key=lambda c: -c.skew_us)[:COLLECTIVES_SHOWN]


def collectives_table_model(result: ManyRanksResult) -> Table:
    """The collectives with the largest skew: step, name and index, ranks, the first and
    last to arrive, skew and transfer time (``kernelmagic/results/ranks.py: match_collectives``)."""
    columns = [
        Column("step", "step", lambda c: -c.step, lambda c: str(c.step), width=60),
        Column("collective", "collective", lambda c: c.key,
               lambda c: f"{c.name} #{c.index}{'' if c.aligned else ' *'}",
               numeric=False, width=200),
        Column("first", "first", lambda c: -c.first_rank, lambda c: f"rank {c.first_rank}",
               width=80),
        Column("last", "last", lambda c: -c.last_rank, lambda c: f"rank {c.last_rank}",
               width=80),
        time_column("skew", "skew", lambda c: c.skew_us),
        time_column("transfer", "transfer", lambda c: c.transfer_us),
    ]
    return Table(columns=columns, rows=skewed_collectives(result), sort_column="skew",
                 noun="collectives")


def collectives_heading(result: ManyRanksResult) -> str:
    shown = skewed_collectives(result)
    matched = [c for c in result.collectives() if c.ranks >= 2]
    off = sum(not c.aligned for c in matched)
    note = (f"; {off} not aligned (*: ended before the last arrival, so the ranks' step "
            "starts differ)" if off else "")
    return (f"Collectives with the largest skew ({counted(len(shown), 'collective')} of "
            f"{len(matched)} matched across ranks; times from each rank's step start{note}):")


def collectives_text(result: ManyRanksResult) -> str:
    """The heading and the table, or "" when no collective was matched with a skew."""
    if not skewed_collectives(result):
        return ""
    return collectives_heading(result) + "\n" + render_table(collectives_table_model(result))


def text_report(result: ManyRanksResult, findings: bool = True) -> str:
    """Summary, per-rank table and findings: ``text/plain``."""
    parts = [summary_line(result), "", ranks_table(result)]
    collectives = collectives_text(result)
    if collectives:
        parts += ["", collectives]
    notes = findings_text(result) if findings else ""
    if notes:
        parts += ["", notes]
    parts += ["", f"A rank's full report: {RANK_REPORT}."]
    return "\n".join(parts)


#: Past this many ranks the chart is a heatmap of ranks × steps, not one bar per rank.
BARS_UP_TO = 32


def chart_png(result: ManyRanksResult, dpi: int = 100) -> bytes:
    """Up to ``BARS_UP_TO`` ranks, stacked bars per rank: compute, communication not
    overlapped by compute, memcpy, idle (ms per step, means over the steps), with each
    rank's median step marked; past it, ``heatmap_png`` (bars no longer read)."""
    if len(result.summaries) > BARS_UP_TO:
        return heatmap_png(result, dpi)
    summaries = list(result.summaries.values())
    n = max(len(summaries), 1)
    fig = new_figure((min(16.0, max(6.0, 0.35 * n + 2)), 3.6), dpi)
    ax = fig.add_subplot()
    xs = list(range(len(summaries)))
    bottom = [0.0] * len(summaries)
    parts = PARTS if result.profiles_device else [p for p in PARTS if p[0] != "memcpy_us"]
    for field, label, colour in parts:
        values = [getattr(s, field) / 1000.0 for s in summaries]
        ax.bar(xs, values, bottom=bottom, color=colour, label=label, width=0.7)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.scatter(xs, [s.step_median_us / 1000.0 for s in summaries], marker="_", s=400,
               color="black", label="median step", zorder=3)
    step = max(1, n // 32)
    ax.set_xticks(xs[::step], [str(s.rank) for s in summaries][::step], fontsize=8)
    ax.set(xlabel="rank", ylabel="ms per step")
    ax.set_title("time per step by rank", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.set_ylim(0, max([*bottom, *(s.step_median_us / 1000.0 for s in summaries), 1e-3]) * 1.1)
    ax.grid(True, axis="y", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    width = fig.get_figwidth()
    fig.subplots_adjust(left=0.7 / width, right=1 - 2.2 / width, top=0.9, bottom=0.15)
    return figure_png(fig)


def _grid(rows: list[list[float]]) -> list[list[float | None]]:
    """µs per cell -> ms, rows padded with None to the longest."""
    width = max((len(r) for r in rows), default=0)
    return [[*(t / 1000.0 for t in r), *([None] * (width - len(r)))] for r in rows]


def step_grid(result: ManyRanksResult) -> list[list[float | None]]:
    """Step time (ms) of each rank (rows, rank order) at each step (columns); None where a
    rank has fewer steps than the longest."""
    return _grid([s.step_us for s in result.summaries.values()])


def comm_grid(result: ManyRanksResult) -> list[list[float | None]]:
    """Communication time (ms) of each rank (rows) in each step (columns), as the
    breakdown counts it; None where a rank has fewer steps (or a summary saved before
    ``step_comm_us`` existed)."""
    return _grid([s.step_comm_us for s in result.summaries.values()])


def _heat_panel(fig: Any, ax: Any, grid: list[list[float | None]], ranks: list[int],
                title: str, label: str) -> None:
    import numpy as np

    cells = np.array([[np.nan if v is None else v for v in row] for row in grid],
                     dtype=float).reshape(len(ranks), -1)
    image = ax.imshow(cells, aspect="auto", interpolation="nearest", cmap="viridis")
    fig.colorbar(image, ax=ax, label=label)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    step = max(1, len(ranks) // 16)
    ax.set_yticks(range(0, len(ranks), step), [str(r) for r in ranks][::step], fontsize=8)
    ax.set(xlabel="step", ylabel="rank")
    ax.set_title(title, fontsize=10)


def heatmap_png(result: ManyRanksResult, dpi: int = 100) -> bytes:
    """Ranks × steps, each cell the step's time (ms): a slow rank is a bright row, a
    slow step a bright column, at any number of ranks; beside it the same grid of
    communication time, where the ranks that wait are the bright rows (and the slow rank
    a dark one)."""
    ranks = [s.rank for s in result.summaries.values()]
    comm = comm_grid(result)
    panels = 2 if any(v is not None for row in comm for v in row) else 1
    fig = new_figure((7.0 * panels, min(12.0, max(3.6, 0.012 * len(ranks) + 3))), dpi,
                     layout="constrained")
    axes = fig.subplots(1, panels, squeeze=False)[0]
    _heat_panel(fig, axes[0], step_grid(result), ranks, "step time by rank and step",
                "step time (ms)")
    if panels == 2:
        _heat_panel(fig, axes[1], comm, ranks, "communication time by rank and step",
                    "communication (ms)")
    return figure_png(fig)


def collectives_html(result: ManyRanksResult) -> str:
    """The collectives with the largest skew as an HTML table with its heading, or ""."""
    if not skewed_collectives(result):
        return ""
    return (f'<div class="km-collectives"><b>{escape(collectives_heading(result))}</b>'
            f"{static_table_html(collectives_table_model(result), None)}</div>")


def html_report(result: ManyRanksResult, png: bytes | None = None,
                findings: bool = True) -> str:
    """Summary, chart, per-rank table and findings in one fragment (no widgets)."""
    notes = findings_html(result) if findings else ""
    return (f'<div class="kernelmagic-ranks"><div class="km-summary">'
            f"<b>{escape(summary_line(result))}</b></div>{image_tag(png, 'time per rank')}"
            f"{static_table_html(ranks_table_model(result), None)}"
            f"{collectives_html(result)}{notes}"
            '<p class="km-note" style="font-size:12px;color:#666">A rank\'s full report: '
            "<code>result.ranks[N]</code>, or <code>python -m kernelmagic show FOLDER "
            "--rank N</code>.</p></div>")


def ranks_widget(result: ManyRanksResult, png: bytes | None, findings: bool = True) -> Any:
    """Summary, chart, per-rank table, findings and one button per rank; clicking a rank
    shows its full report below (built on first click). ``.km_rank_buttons`` maps each
    rank to its button, ``.km_detail`` holds the report shown."""
    import ipywidgets as w

    from kernelmagic.render.bundle import LIVE_CLASS, report_box
    from kernelmagic.render.widget import SortableTable

    table = SortableTable(ranks_table_model(result))
    parts: list[Any] = [w.HTML(f'<div class="km-summary"><b>{escape(summary_line(result))}'
                               "</b></div>")]
    if png is not None:
        parts.append(w.Image(value=png, format="png", layout=w.Layout(width="auto")))
    parts.append(table.widget)
    parts += [w.HTML(html) for html in (collectives_html(result),  # each where there is one
                                        findings_html(result) if findings else "") if html]
    detail = w.VBox([])
    built: dict[int, Any] = {}
    buttons: dict[int, Any] = {}

    def show(rank: int) -> None:
        if rank not in built:
            built[rank] = report_box(result.ranks[rank])
        for r, button in buttons.items():
            button.button_style = "info" if r == rank else ""
        detail.children = [w.HTML(f"<b>rank {rank}</b>"), built[rank]]

    for rank in result.ranks:
        button = w.Button(description=f"rank {rank}", tooltip=f"show rank {rank}'s report",
                          layout=w.Layout(width="auto"))
        button.on_click(lambda _b, r=rank: show(r))
        buttons[rank] = button
    parts += [w.HTML("<b>Ranks</b> (click one for its full report)"),
              w.HBox(list(buttons.values()), layout=w.Layout(flex_flow="row wrap")), detail]
    box = w.VBox(parts, _dom_classes=(LIVE_CLASS,))
    box.km_rank_buttons = buttons
    box.km_detail = detail
    box.km_table = table
    return box


def mime_bundle(result: ManyRanksResult, include: Any = None,
                findings: bool = True) -> dict[str, Any]:
    """``text/plain`` always; HTML with the chart, and the widget, where they can be shown."""
    return display_bundle(text_report(result, findings=findings), include,
                          lambda: chart_png(result),
                          lambda png: html_report(result, png, findings=findings),
                          lambda png: ranks_widget(result, png, findings=findings))
