"""Table models shared by the text, HTML and widget renderers.

A ``Table`` is columns plus rows; each column knows how to read a row's sortable value
and how to show it. ``op_table`` builds the report's operator table; the comparison
view builds its own with ``comparison_table`` (``render/compare.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelmagic.core.rows import KIND_MARKS, OpRow
from kernelmagic.core.sorting import self_time, sort_column
from kernelmagic.core.units import counted, format_bytes, format_count, format_us, percent
from kernelmagic.results.result import ProfileResult

#: Rows every renderer lists before saying how many more there are: the text report, the
#: HTML fallback and the widget's first page show the same rows (``result.table()`` and
#: ``Comparison.table()`` default to the same figure).
ROWS_SHOWN = 25


@dataclass(frozen=True)
class Column:
    """One column: ``value(row)`` sorts, ``show(row)`` displays."""

    id: str
    title: str
    value: Callable[[Any], float | str]
    show: Callable[[Any], str]
    numeric: bool = True
    width: int = 104  # px, shared by the HTML table and the widget's header buttons


@dataclass(frozen=True)
class Table:
    """Rows under columns, with the column it is sorted by at first."""

    columns: list[Column]
    rows: list[Any]
    sort_column: str
    noun: str = "ops"

    def more(self, n: int) -> str:
        """``n`` rows not shown, counted in the table's noun: ``1 more op``, ``1,234 more ops``."""
        return counted(n, f"more {self.noun[:-1]}", f"more {self.noun}")

    def column(self, column_id: str) -> Column:
        for col in self.columns:
            if col.id == column_id:
                return col
        raise KeyError(column_id)

    def sorted_rows(self, column_id: str | None = None, descending: bool = True) -> list[Any]:
        """All rows ordered by one column; ties broken by ``row.key`` so order is stable."""
        col = self.column(column_id or self.sort_column)
        if not col.numeric:
            return sorted(self.rows, key=lambda r: str(col.value(r)), reverse=descending)
        sign = -1 if descending else 1
        return sorted(self.rows, key=lambda r: (sign * float(col.value(r)), r.key))



def row_label(row: Any) -> str:
    """The row's name as shown: ``[range] nccl:all_reduce`` for a range row."""
    return KIND_MARKS.get(getattr(row, "kind", "op"), "") + row.key


def name_column(title: str = "op", width: int = 360) -> Column:
    return Column("op", title, row_label, row_label, numeric=False, width=width)


def summed(title: str, iters: int) -> str:
    """A column title that says its figures are summed over the profiled iterations:
    ``self CPU (10 it.)``. Per-iteration figures say so in their own titles."""
    return f"{title} ({iters} it.)"


def time_column(id_: str, title: str, read: Callable[[Any], float]) -> Column:
    # Wide enough for a title such as "self device (10 it.)" on one line, with the sort
    # arrow and the button's padding (7 px a character at JupyterLab's 13 px font).
    return Column(id_, title, read, lambda r: format_us(read(r)),
                  width=max(96, 7 * len(title) + 26))


def op_table(result: ProfileResult) -> Table:
    """The operator table: CPU figures always, device figures first when CUDA was profiled."""
    cols = [
        name_column(),
        Column("calls", "calls", lambda r: r.count, lambda r: f"{r.count:,}", width=72),
    ]
    sides = [("cpu", "CPU", False)]
    if result.profiles_device:  # the primary device's figures come first
        sides.insert(0, ("device", "device", True))
    if "shapes" in result.views:
        cols.insert(1, Column("shapes", "input shapes", lambda r: r.input_shapes,
                              lambda r: r.input_shapes, numeric=False, width=220))
    n = result.iters
    for side, label, on_device in sides:
        cols += [
            time_column(f"self_{side}", summed(f"self {label}", n),
                        _field(f"self_{side}_time_total")),
            time_column(side, summed(f"total {label}", n), _field(f"{side}_time_total")),
            time_column(f"{side}_avg", f"{label} per call", _field(f"{side}_time")),
            _share_column(result, f"{side}_pct", f"% self {label}", on_device),
        ]
    if result.dependency_model:  # what the model says each row is worth (per iteration)
        cols.append(time_column("max_gain", "max gain/iter", _field("max_gain_us")))
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


def bytes_column(id_: str, title: str, read: Callable[[Any], float]) -> Column:
    return Column(id_, title, read, lambda r: format_bytes(read(r)))


def _flops_columns(result: ProfileResult) -> list[Column]:
    """FLOPs per iteration and the achieved rate from self time; "—" where torch can't count."""
    iters = result.iters

    def per_iter(r: OpRow) -> float:
        return r.flops / iters if r.flops else -1.0

    def rate(r: OpRow) -> float:
        seconds = self_time(r, result.profiles_device) / 1e6
        return r.flops / seconds if r.flops and seconds > 0 else -1.0

    return [
        Column("flops", "FLOP/iter", per_iter,
               lambda r: "—" if per_iter(r) < 0 else format_count(per_iter(r))),
        Column("flops_rate", "FLOP/s", rate,
               lambda r: "—" if rate(r) < 0 else format_count(rate(r))),
    ]


def _field(name: str) -> Callable[[OpRow], float]:
    return lambda r: getattr(r, name)


def _share_column(result: ProfileResult, id_: str, title: str, on_device: bool) -> Column:
    def share(r: OpRow) -> float:
        return result.share(r, device=on_device)

    return Column(id_, title, share, lambda r: percent(share(r)), width=96)


def column_for_sort(result: ProfileResult, sort: str) -> str:
    """The column id that matches a ``--sort`` key."""
    return sort_column(sort, result.profiles_device)
