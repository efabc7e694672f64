"""Table models shared by the text, HTML and widget renderers.

A ``Table`` is columns plus rows; each column knows how to read a row's sortable value
and how to show it. ``op_table`` builds the report's operator table; the comparison
view builds its own with ``comparison_table`` (``render/compare.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelmagic.core.rows import OpRow, marked_key
from kernelmagic.core.sorting import self_time, sort_column
from kernelmagic.core.units import counted, format_bytes, format_count, format_us, percent
from kernelmagic.results.result import ProfileResult

#: Rows every renderer lists before saying how many more there are: the text report, the
#: HTML fallback and the widget's first page show the same rows (``result.table()`` and
#: ``Comparison.table()`` default to the same figure).
ROWS_SHOWN = 25
#: The op table's name column (px): a name wider than its column is cut in the middle
#: (``name_chars``; ``render/names.py: cut_middle``), whole in the cell's hover title.
NAME_COLUMN_WIDTH = 300
#: px a character of the tables' 12 px monospace font takes, and a cell's padding.
CHAR_PX = 7.25
CELL_PADDING_PX = 12


@dataclass(frozen=True)
class Column:
    """One column: ``value(row)`` sorts, ``show(row)`` displays."""

    id: str
    title: str
    value: Callable[[Any], float | str]
    show: Callable[[Any], str]
    numeric: bool = True
    width: int = 104  # px, shared by the HTML table and the widget's header buttons
    #: Shown one click away ("more columns"), not in the default set that fits 1,280 px.
    extra: bool = False
    #: What a cell's "—" means, said under a table that shows one (``dash_notes``). A
    #: column with one gives the value -1 for a row it has no figure for (``blank``).
    dash: str = ""

    def blank(self, row: Any) -> bool:
        """Whether the column has no figure for ``row`` (it shows "—": ``dash``)."""
        return bool(self.dash) and float(self.value(row)) < 0

    def __post_init__(self) -> None:
        # Never narrower than its title on one line (with the sort arrow and the button's
        # padding: 7 px a character at JupyterLab's 13 px font): header labels are whole.
        object.__setattr__(self, "width", max(self.width, title_width(self.title)))


def name_chars(width: int) -> int:
    """Characters of a name that fit a first column ``width`` px wide: 39 in the op
    table's 300 px."""
    return int((width - CELL_PADDING_PX) / CHAR_PX)


def more_columns(table: Table) -> str:
    """The label of the click that shows a table's other columns: ``more columns (CPU/call,
    FLOP/s)``."""
    extra = [c.title for c in table.columns if c.extra and c.id != table.sort_column]
    return f"more columns ({', '.join(extra)})"


def dash_notes(table: Table, rows: list[Any]) -> list[str]:
    """What the "—" of each column means (``Column.dash``), for the columns that show one
    in ``rows``, a line per meaning: ``— in max gain/iter: the model cannot see the row's
    removal (...)``, ``— in FLOP/iter, FLOP/s: torch counts no FLOPs for the op``."""
    titles: dict[str, list[str]] = {}
    for c in table.columns:
        if c.dash and any(c.blank(r) for r in rows):
            titles.setdefault(c.dash, []).append(c.title)
    return [f"— in {', '.join(names)}: {dash}" for dash, names in titles.items()]


def title_width(title: str) -> int:
    """px a header needs for ``title`` on one line, its sort arrow and padding included."""
    return 7 * len(title) + 26


@dataclass(frozen=True)
class Table:
    """Rows under columns, with the column it is sorted by at first."""

    columns: list[Column]
    rows: list[Any]
    sort_column: str
    noun: str = "ops"

    @property
    def narrow(self) -> Table:
        """The table with its default columns only (``Column.extra`` left out, but for the
        column it is sorted by)."""
        cols = [c for c in self.columns if not c.extra or c.id == self.sort_column]
        if len(cols) == len(self.columns):
            return self
        return Table(cols, self.rows, self.sort_column, self.noun)

    def more(self, n: int) -> str:
        """``n`` rows not shown, counted in the table's noun: ``1 more op``, ``1,234 more ops``."""
        return counted(n, f"more {self.noun[:-1]}", f"more {self.noun}")

    def column(self, column_id: str) -> Column:
        for col in self.columns:
            if col.id == column_id:
                return col
        raise KeyError(column_id)

    def sorted_rows(self, column_id: str | None = None, descending: bool = True) -> list[Any]:
        """All rows ordered by one column; ties broken by ``row.key`` so order is stable.
        A row the column shows as "—" (no figure: ``Column.dash``) comes last either way."""
        col = self.column(column_id or self.sort_column)
        if not col.numeric:
            return sorted(self.rows, key=lambda r: str(col.value(r)), reverse=descending)
        sign = -1 if descending else 1
        return sorted(self.rows,
                      key=lambda r: (col.blank(r), sign * float(col.value(r)), r.key))


def row_label(row: Any) -> str:
    """The row's name as shown: ``[range] nccl:all_reduce`` for a range row."""
    return marked_key(getattr(row, "kind", "op"), row.key)


def name_column(title: str = "op", width: int = 360) -> Column:
    return Column("op", title, row_label, row_label, numeric=False, width=width)


def summed(title: str, iters: int) -> str:
    """A column title that says its figures are summed over the profiled iterations:
    ``self CPU (10 it.)``. Per-iteration figures say so in their own titles."""
    return f"{title} ({iters} it.)"


def time_column(id_: str, title: str, read: Callable[[Any], float],
                extra: bool = False) -> Column:
    return Column(id_, title, read, lambda r: format_us(read(r)), width=96, extra=extra)


def text_column(id_: str, title: str, read: Callable[[Any], str], width: int = 104,
                extra: bool = False) -> Column:
    """A column of text, sorted and shown as it reads."""
    return Column(id_, title, read, read, numeric=False, width=width, extra=extra)


def op_table(result: ProfileResult) -> Table:
    """The operator table, every figure a mean per iteration (the sums over the profiled
    iterations divided by their count), the basis ``max gain/iter`` is put on
    (``OpRow.gain_per_iteration``). By default: calls, self and total time, share and the
    gain, device first when CUDA was profiled (and its self CPU time); the rest
    (per call, the other side's total and share, FLOPs, memory) is ``extra``; ``--shapes``'
    input shapes are among the default columns."""
    n = result.iters
    # The name column's title says what the means are over; the others' end in "/iter".
    cols = [
        name_column(f"op (mean of {n} it.)", width=NAME_COLUMN_WIDTH),
        Column("calls", "calls/iter", lambda r: r.count / n,
               lambda r: format_count(r.count / n), width=84),
    ]
    sides = [("cpu", "CPU", False)]
    if result.profiles_device:  # the primary device's figures come first
        sides.insert(0, ("device", "device", True))
    if "shapes" in result.views:
        # (by default: the rows are split by shapes, the column tells them apart)
        cols.insert(1, text_column("shapes", "input shapes", lambda r: r.input_shapes, 220))
    for i, (side, label, on_device) in enumerate(sides):
        secondary = i > 0
        cols += [
            time_column(f"self_{side}", f"self {label}/iter", _mean(f"self_{side}_time_total", n)),
            time_column(side, f"total {label}/iter",
                        _mean(f"{side}_time_total", n), extra=secondary),
            time_column(f"{side}_avg", f"{label}/call", _field(f"{side}_time"), extra=True),
            _share_column(result, f"{side}_pct", f"% self {label}", on_device, secondary),
        ]
    if result.dependency_model:  # what the model says each row is worth, on this basis
        cols.append(_gain_column(result))
    if "flops" in result.views:
        cols += _flops_columns(result)
    if "memory" in result.views:
        for side, label in [s[:2] for s in sides]:
            cols += [
                bytes_column(f"self_{side}_mem", summed(f"self {label} mem", n),
                             _field(f"self_{side}_memory_usage")),
                bytes_column(f"{side}_mem", summed(f"total {label} mem", n),
                             _field(f"{side}_memory_usage")),
            ]
    return Table(cols, list(result.rows), column_for_sort(result, result.sort))


def gain_value(result: ProfileResult, row: OpRow) -> float:
    """``max gain/iter``'s figure for ``row`` (``ProfileResult.gain_shown``), -1 where the
    model cannot see the row's removal (``Column.blank``: shown "—", sorted last)."""
    shown = result.gain_shown(row)
    return -1.0 if shown is None else shown


def _or_dash(read: Callable[[Any], float], fmt: Callable[[float], str]) -> Callable[[Any], str]:
    """A column's text for a value ``read`` gives -1 where it has none: "—" there
    (``Column.dash`` says what it means), else the value as ``fmt`` writes it."""

    def show(r: Any) -> str:
        value = read(r)
        return "—" if value < 0 else fmt(value)

    return show


def _gain_column(result: ProfileResult) -> Column:
    """``max gain/iter`` (``gain_value``): "—" (sorted last, either way:
    ``Table.sorted_rows``) for a row whose removal the model cannot see."""

    def gain(r: OpRow) -> float:
        return gain_value(result, r)

    return Column("max_gain", "max gain/iter", gain, _or_dash(gain, format_us), width=96,
                  dash="the model cannot see the row's removal (no recorded wait ties its "
                       "threads to the iteration's)")


def bytes_column(id_: str, title: str, read: Callable[[Any], float]) -> Column:
    return Column(id_, title, read, lambda r: format_bytes(read(r)), extra=True)


def _flops_columns(result: ProfileResult) -> list[Column]:
    """FLOPs per iteration and the achieved rate from self time; "—" where torch can't count."""
    iters = result.iters

    def per_iter(r: OpRow) -> float:
        return r.flops / iters if r.flops else -1.0

    def rate(r: OpRow) -> float:
        seconds = self_time(r, result.profiles_device) / 1e6
        return r.flops / seconds if r.flops and seconds > 0 else -1.0

    uncounted = "torch counts no FLOPs for the op"
    return [
        Column("flops", "FLOP/iter", per_iter, _or_dash(per_iter, format_count), extra=True,
               dash=uncounted),
        Column("flops_rate", "FLOP/s", rate, _or_dash(rate, format_count), extra=True,
               dash=uncounted),
    ]


def _field(name: str) -> Callable[[OpRow], float]:
    return lambda r: getattr(r, name)


def _mean(name: str, iters: int) -> Callable[[OpRow], float]:
    return lambda r: r.per_iteration(name, iters)


def _share_column(result: ProfileResult, id_: str, title: str, on_device: bool,
                  extra: bool = False) -> Column:
    def share(r: OpRow) -> float:
        return result.share(r, device=on_device)

    return Column(id_, title, share, lambda r: percent(share(r)), width=96, extra=extra)


def column_for_sort(result: ProfileResult, sort: str) -> str:
    """The column id that matches a ``--sort`` key."""
    return sort_column(sort, result.profiles_device)
