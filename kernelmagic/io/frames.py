"""Every view of a result as records, and as a pandas DataFrame (pandas is optional).

``records(result, view)`` is plain Python (a list of dicts, one per row) and needs nothing
but the result; ``to_pandas(result, view)`` wraps it in a ``DataFrame``, importing pandas
only then. A view is named as users know it (``"ops"``, ``"kernels"``, ``"timeline"``,
``"timings"``, ...; ``view_names(result)`` lists them): any field of the result that is a
list of row records is a view under its own name, so a new view exports with no code here.

Units are those of the rows (``kernelmagic/core/rows.py``): op and kernel times in µs summed
over the profiled iterations, as in torch's ``key_averages()``; ``timings`` in seconds.
"""

from __future__ import annotations

import dataclasses
import typing
from functools import cache
from typing import Any

from kernelmagic.results.result import ProfileResult

__all__ = ["MISSING_PANDAS", "comparison_records", "dataframe", "rank_records", "records",
           "to_pandas", "view_names"]

MISSING_PANDAS = (
    "to_pandas() needs pandas, which kernelmagic does not install by itself: "
    "pip install pandas (or pip install 'kernelmagic[pandas]')"
)

#: Views whose name differs from the result field that holds them.
ALIASES = {"ops": "rows", "stack": "sources", "python": "python_lines"}


@cache
def _row_fields() -> dict[str, type]:
    """The result's fields that hold a list of row dataclasses, with the row class."""
    hints = typing.get_type_hints(ProfileResult)
    found: dict[str, type] = {}
    for f in dataclasses.fields(ProfileResult):
        hint = hints[f.name]
        if typing.get_origin(hint) is list:
            (item,) = typing.get_args(hint)
            if dataclasses.is_dataclass(item):
                found[f.name] = item
    return found


def view_names(result: ProfileResult) -> list[str]:
    """The views ``to_pandas`` takes for ``result``: ``ops`` and ``op_totals``, every list of
    rows the result holds, then ``timings``, ``warmup_timings`` and ``breakdown``."""
    by_field = {field: view for view, field in ALIASES.items()}
    names = ["ops", "op_totals"]
    names += [by_field.get(name, name) for name in _row_fields() if name != "rows"]
    names += ["timings", "warmup_timings"]
    if result.breakdown is not None:
        names.append("breakdown")
    return names


def records(result: ProfileResult, view: str = "ops") -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of ``view`` as dicts, and the column names (also when there are no rows).

    ValueError names the views there are when ``view`` is not one of them.
    """
    if view == "timings":
        busy = list(result.gpu_busy)
        rows = [{"iteration": i, "seconds": t,
                 **({"gpu_busy_us": busy[i]} if i < len(busy) else {})}
                for i, t in enumerate(result.timings)]
        columns = ["iteration", "seconds"] + (["gpu_busy_us"] if busy else [])
        return rows, columns
    if view == "warmup_timings":
        return ([{"run": i, "seconds": t} for i, t in enumerate(result.warmup_timings)],
                ["run", "seconds"])
    if view == "breakdown" and result.breakdown is not None:
        row = dataclasses.asdict(result.breakdown)
        return [row], list(row)
    name = ALIASES.get(view, view)
    if view == "op_totals":
        items: list[Any] = result.op_totals
        row_type: type = _row_fields()["rows"]
    elif name in _row_fields():
        items, row_type = getattr(result, name), _row_fields()[name]
    else:
        raise ValueError(f"no view {view!r} in this result; views: "
                         f"{', '.join(view_names(result))}")
    # A field marked ``metadata={"column": False}`` (an experiment's own result) is no column.
    columns = [f.name for f in dataclasses.fields(row_type) if f.metadata.get("column", True)]
    return [{c: getattr(item, c) for c in columns} for item in items], columns


def comparison_records(comparison: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """A ``Comparison``'s ops, largest change first: self µs per iteration before and after,
    the change, the speed-up (before / after, None where either is 0) and the status."""
    columns = ["key", "before", "after", "delta", "speedup", "status"]
    return [{c: getattr(d, c) for c in columns} for d in comparison.rows], columns


def rank_records(ranks: Any, view: str = "ranks") -> tuple[list[dict[str, Any]], list[str]]:
    """A ``ManyRanksResult`` as records: ``"ranks"`` is one row per rank (its step time and
    breakdown, ``RankSummary``); any other view is that view of every rank's result, with
    a ``rank`` column first."""
    if view == "ranks":
        summaries = list(ranks.summaries.values())
        columns = [f.name for f in dataclasses.fields(summaries[0])] if summaries else ["rank"]
        return [{c: getattr(s, c) for c in columns} for s in summaries], columns
    rows: list[dict[str, Any]] = []
    columns = ["rank"]
    for rank, result in ranks.ranks.items():
        part, columns = records(result, view)
        rows += [{"rank": rank, **row} for row in part]
        columns = ["rank", *columns]
    return rows, columns


def dataframe(rows: list[dict[str, Any]], columns: list[str]) -> Any:
    """``rows`` as a ``pandas.DataFrame``; ImportError naming the extra when pandas is missing."""
    try:
        import pandas
    except ImportError:
        raise ImportError(MISSING_PANDAS) from None
    return pandas.DataFrame.from_records(rows, columns=columns)


def to_pandas(result: ProfileResult, view: str = "ops") -> Any:
    """``view`` of ``result`` as a ``pandas.DataFrame`` (see ``records``)."""
    return dataframe(*records(result, view))  # a bad view name fails before pandas is needed
