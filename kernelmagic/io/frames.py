"""Every view of a result as records, and as a pandas DataFrame (pandas is optional).

``records(result, view)`` is plain Python (a list of dicts, one per row) and needs nothing
but the result; ``to_pandas(result, view)`` wraps it in a ``DataFrame``, importing pandas
only then. A view is named as users know it (``"ops"``, ``"kernels"``, ``"timeline"``,
``"timings"``, ...; ``view_names(result)`` lists them).

Units are those of the rows (``kernelmagic/core/rows.py``): op and kernel times in µs summed
over the profiled iterations, as in torch's ``key_averages()`` (the op frames add the op
table's per-iteration means after them: ``PER_ITERATION``); ``timings`` in seconds. Every
frame says them: ``df.attrs["units"]`` maps each column that has a unit to it, as the row's
field declares it (``core/records.py: unit``), ``df.attrs["iterations"]`` holds the
profiled iterations the sums are over. The frames other than the timings are the views'
(``views/registry.py``: each view's ``frames``), so a new view exports with no code here.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from kernelmagic.core.collective_rows import Collective
from kernelmagic.core.experiment_rows import ExperimentRow
from kernelmagic.core.rows import Breakdown, OpRow
from kernelmagic.core.units import counted
from kernelmagic.results.rank_summary import RankSummary
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.registry import Frame, view_specs

__all__ = ["MISSING_PANDAS", "comparison_frame", "dataframe", "ranks_frame", "records",
           "to_pandas", "units", "view_names"]

MISSING_PANDAS = (
    "to_pandas() needs pandas, which kernelmagic does not install by itself: "
    "pip install pandas (or pip install 'kernelmagic[pandas]')"
)

#: The units of the frames that are no row dataclass's (every other frame's units are its
#: row fields' ``metadata["unit"]``: ``core/records.py: unit``).
TIMING_UNITS = {"seconds": "seconds", "gpu_busy_us": "µs"}
#: The op frames' per-iteration columns, the op table's basis (``render/table.py:
#: op_table``): each summed field over the iterations, and the gain put on that basis
#: (``OpRow.gain_per_iteration``). The summed columns stay, saying so in their units.
PER_ITERATION = {
    "calls_per_iter": ("count", "calls per iteration (mean over {over})"),
    **{f"{time}_us_per_iter": (f"{time}_time_total", "µs per iteration (mean over {over})")
       for time in ("self_cpu", "cpu", "self_device", "device")},
}
GAIN_PER_ITER = ("max_gain_per_iter_us", "µs per iteration: max_gain_us, at most the row's "
                 "total time per iteration (mean over {over}, CPU or device); empty where "
                 "the model cannot see the row's removal")
CHANGE = "µs per iteration"
COMPARISON_UNITS = {"before": CHANGE, "after": CHANGE, "delta": CHANGE,
                    "speedup": "before / after"}


def units(row_type: type | None, columns: list[str], iters: int | None) -> dict[str, str]:
    """Each column that has a unit, with it, from ``row_type``'s field metadata:
    ``{"self_cpu_time_total": "µs, summed over the 10 profiled iterations", ...}`` (``iters``
    None: not one count); the timings' units without a row type."""
    declared = (TIMING_UNITS if row_type is None else
                {f.name: f.metadata["unit"] for f in dataclasses.fields(row_type)
                 if "unit" in f.metadata})
    if row_type is OpRow:
        declared = {**declared, **{c: u for c, (_, u) in PER_ITERATION.items()},
                    GAIN_PER_ITER[0]: GAIN_PER_ITER[1]}
    over = (f"the {counted(iters, 'profiled iteration')}" if iters is not None
            else "each rank's profiled iterations")
    return {c: declared[c].format(over=over) for c in columns if c in declared}


def row_type(view: str) -> type | None:
    """The row dataclass of ``view`` (None for the timings)."""
    if view in ("ops", "op_totals"):
        return OpRow
    if view == "breakdown":
        return Breakdown
    found = _frames().get(view)
    return found[1].row if found is not None else None


def _frames() -> dict[str, tuple[str, Frame]]:
    """Every registered view's frames by name: (the view, the ``Frame``)."""
    return {frame.name: (spec.name, frame) for spec in view_specs() for frame in spec.frames}


def view_names(result: ProfileResult) -> list[str]:
    """The views ``to_pandas`` takes for ``result``: ``ops`` and ``op_totals``, every frame a
    view declares (``views/registry.py``), then ``timings``, ``warmup_timings`` and
    ``breakdown``."""
    breakdown = ["breakdown"] if result.breakdown is not None else []
    return ["ops", "op_totals", *_frames(), "timings", "warmup_timings", *breakdown]


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
    found = _frames().get(view)
    if view in ("ops", "op_totals"):
        items: list[Any] = result.rows if view == "ops" else result.op_totals
        row_type: type = OpRow
    elif found is not None:
        name, frame = found
        items, row_type = getattr(result.view(name), frame.rows), frame.row
    else:
        raise ValueError(f"no view {view!r} in this result; views: "
                         f"{', '.join(view_names(result))}")
    columns = _columns(row_type)
    rows = _as_rows(items, columns)
    if row_type is ExperimentRow:  # (a variant that failed has no times: None, not 0)
        for row, item in zip(rows, items, strict=True):
            row.update(item.measured())
    if row_type is not OpRow:
        return rows, columns
    for row, item in zip(rows, items, strict=True):  # the per-iteration columns after
        row.update({c: item.per_iteration(field, result.iters)
                    for c, (field, _) in PER_ITERATION.items()})
        gain = result.gain_shown(item)  # (NaN: the model cannot see the row's removal)
        row[GAIN_PER_ITER[0]] = math.nan if gain is None else gain
    return rows, [*columns, *PER_ITERATION, GAIN_PER_ITER[0]]


def _columns(row_type: type, skip: tuple[str, ...] = ()) -> list[str]:
    """A row type's fields as columns, less those marked ``metadata={"column": False}`` (an
    experiment's own result) and ``skip``."""
    return [f.name for f in dataclasses.fields(row_type)
            if f.metadata.get("column", True) and f.name not in skip]


def _as_rows(items: Any, columns: list[str]) -> list[dict[str, Any]]:
    """Each item as a dict of its ``columns``."""
    return [{c: getattr(item, c) for c in columns} for item in items]


def dataframe(rows: list[dict[str, Any]], columns: list[str],
              column_units: dict[str, str] | None = None, iterations: int | None = None) -> Any:
    """``rows`` as a ``pandas.DataFrame`` whose ``attrs`` say the columns' units (and the
    iterations summed over); ImportError naming the extra when pandas is missing."""
    try:
        import pandas
    except ImportError:
        raise ImportError(MISSING_PANDAS) from None
    frame = pandas.DataFrame.from_records(rows, columns=columns)
    frame.attrs["units"] = dict(column_units or {})
    if iterations is not None:
        frame.attrs["iterations"] = iterations
    return frame


def to_pandas(result: ProfileResult, view: str = "ops") -> Any:
    """``view`` of ``result`` as a ``pandas.DataFrame`` (see ``records``), its units in
    ``df.attrs["units"]``."""
    rows, columns = records(result, view)  # a bad view name fails before pandas is needed
    return dataframe(rows, columns, units(row_type(view), columns, result.iters), result.iters)


def comparison_frame(comparison: Any) -> Any:
    """A ``Comparison``'s ops as a ``DataFrame``, largest change first: self µs per
    iteration before and after, the change, the speed-up (before / after, None where either
    is 0) and the status; units in attrs."""
    columns = ["key", "before", "after", "delta", "speedup", "status"]
    return dataframe(_as_rows(comparison.rows, columns), columns, COMPARISON_UNITS)


def ranks_frame(ranks: Any, view: str = "ranks") -> Any:
    """A ``ManyRanksResult`` as a ``DataFrame``, units in attrs: ``"ranks"`` is one row per
    rank (its step time and breakdown, ``RankSummary``); ``"collectives"`` one row per
    collective matched across ranks; any other view is that view of every rank's result,
    with a ``rank`` column first, its sums over that rank's own steps (``steps`` in the
    ``ranks`` view)."""
    if view in ("ranks", "collectives"):
        whose, items = ((RankSummary, list(ranks.summaries.values())) if view == "ranks"
                        else (Collective, ranks.collectives()))
        columns = _columns(whose, skip=("collectives",))  # (a rank's: the next view's)
        return dataframe(_as_rows(items, columns), columns, units(whose, columns, None))
    rows: list[dict[str, Any]] = []
    columns = ["rank"]
    for rank, result in ranks.ranks.items():
        part, columns = records(result, view)
        rows += [{"rank": rank, **row} for row in part]
        columns = ["rank", *columns]
    iters = {r.iters for r in ranks.ranks.values()}
    n = iters.pop() if len(iters) == 1 else None  # None: ranks of different step counts
    return dataframe(rows, columns, units(row_type(view), columns, n), n)
