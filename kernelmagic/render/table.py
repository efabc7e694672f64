"""Table models shared by the text, HTML and widget renderers.

A ``Table`` is columns plus rows; each column knows how to read a row's sortable value
and how to show it. ``op_table`` builds the report's operator table; the comparison
view builds its own with ``comparison_table`` (``render/compare.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelmagic.result import OpRow, ProfileResult
from kernelmagic.timing import format_us


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


def name_column(title: str = "op", width: int = 360) -> Column:
    return Column("op", title, lambda r: r.key, lambda r: r.key, numeric=False, width=width)


def time_column(id_: str, title: str, read: Callable[[Any], float]) -> Column:
    return Column(id_, title, read, lambda r: format_us(read(r)))


def op_table(result: ProfileResult) -> Table:
    """The operator table: CPU figures always, device figures first when CUDA was profiled."""
    cols = [
        name_column(),
        Column("calls", "calls", lambda r: r.count, lambda r: f"{r.count:,}"),
    ]
    sides = [("cpu", "CPU", False)]
    if result.profiles_device:  # the primary device's figures come first
        sides.insert(0, ("device", "device", True))
    for side, label, on_device in sides:
        cols += [
            time_column(f"self_{side}", f"self {label}", _field(f"self_{side}_time_total")),
            time_column(side, f"total {label}", _field(f"{side}_time_total")),
            time_column(f"{side}_avg", f"{label} per call", _field(f"{side}_time")),
            _share_column(result, f"{side}_pct", f"% self {label}", on_device),
        ]
    return Table(cols, list(result.rows), column_for_sort(result, result.sort))


def _field(name: str) -> Callable[[OpRow], float]:
    return lambda r: getattr(r, name)


def _share_column(result: ProfileResult, id_: str, title: str, on_device: bool) -> Column:
    def share(r: OpRow) -> float:
        return result.share(r, device=on_device)

    return Column(id_, title, share, lambda r: f"{100 * share(r):.1f}%")


def column_for_sort(result: ProfileResult, sort: str) -> str:
    """The column id that matches a ``--sort`` key."""
    if sort == "avg":
        return "device_avg" if result.profiles_device else "cpu_avg"
    return sort
