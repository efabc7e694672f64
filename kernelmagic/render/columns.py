"""The report's table columns, shared by the text, HTML and widget tables."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kernelmagic.result import OpRow, ProfileResult
from kernelmagic.timing import format_us


@dataclass(frozen=True)
class Column:
    """One table column: how to read a row's value and how to show it."""

    id: str
    title: str
    value: Callable[[ProfileResult, OpRow], float | str]
    show: Callable[[ProfileResult, OpRow], str]

    @property
    def numeric(self) -> bool:
        return self.id != "op"


def _time(id_: str, title: str, field: str) -> Column:
    return Column(id_, title, lambda res, r: getattr(r, field),
                  lambda res, r: format_us(getattr(r, field)))


def _pct(on_device: bool) -> Callable[[ProfileResult, OpRow], float]:
    return lambda res, r: res.share(r, device=on_device)


def columns(result: ProfileResult) -> list[Column]:
    """Columns for ``result``: CPU figures always, device figures first when CUDA was profiled."""
    cols = [
        Column("op", "op", lambda res, r: r.key, lambda res, r: r.key),
        Column("calls", "calls", lambda res, r: r.count, lambda res, r: f"{r.count:,}"),
    ]
    sides = [("cpu", "CPU", False)]
    if result.profiles_device:  # the primary device's figures come first
        sides.insert(0, ("device", "device", True))
    for side, label, on_device in sides:
        pct = _pct(on_device)
        cols += [
            _time(f"self_{side}", f"self {label}", f"self_{side}_time_total"),
            _time(side, f"total {label}", f"{side}_time_total"),
            _time(f"{side}_avg", f"{label} per call", f"{side}_time"),
            Column(f"{side}_pct", f"% self {label}", pct,
                   lambda res, r, pct=pct: f"{100 * pct(res, r):.1f}%"),
        ]
    return cols


def column_for_sort(result: ProfileResult, sort: str) -> str:
    """The column id that matches a ``--sort`` key."""
    if sort == "avg":
        return "device_avg" if result.profiles_device else "cpu_avg"
    return sort


def sorted_rows(result: ProfileResult, column_id: str, descending: bool) -> list[OpRow]:
    """All rows ordered by one column; ties broken by op name so the order is stable."""
    col = next(c for c in columns(result) if c.id == column_id)
    if col.numeric:
        return sorted(result.rows, key=lambda r: (-col.value(result, r) if descending
                                                  else col.value(result, r), r.key))
    return sorted(result.rows, key=lambda r: r.key, reverse=descending)
