"""Every view of a result as records, and as a pandas DataFrame (pandas is optional).

``records(result, view)`` is plain Python (a list of dicts, one per row) and needs nothing
but the result; ``to_pandas(result, view)`` wraps it in a ``DataFrame``, importing pandas
only then. A view is named as users know it (``"ops"``, ``"kernels"``, ``"timeline"``,
``"timings"``, ...; ``view_names(result)`` lists them): any field of the result that is a
list of row records is a view under its own name, so a new view exports with no code here.

Units are those of the rows (``kernelmagic/core/rows.py``): op and kernel times in µs summed
over the profiled iterations, as in torch's ``key_averages()``; ``timings`` in seconds. Every
frame says them: ``df.attrs["units"]`` maps each column that has a unit to it (``units``
below), ``df.attrs["iterations"]`` holds the profiled iterations the sums are over.
"""

from __future__ import annotations

import dataclasses
import typing
from functools import cache
from typing import Any

from kernelmagic.core.collective_rows import Collective
from kernelmagic.core.memory_rows import CATEGORIES
from kernelmagic.core.units import counted
from kernelmagic.results.result import ProfileResult

__all__ = ["MISSING_PANDAS", "comparison_frame", "comparison_records", "dataframe",
           "rank_records", "ranks_frame", "records", "to_pandas", "units", "view_names"]

MISSING_PANDAS = (
    "to_pandas() needs pandas, which kernelmagic does not install by itself: "
    "pip install pandas (or pip install 'kernelmagic[pandas]')"
)

#: Units of the columns, by name. ``{over}`` says which iterations a sum is over.
SUMMED = "µs, summed over {over}"
UNITS: dict[str, str] = {
    **dict.fromkeys(("self_cpu_time_total", "cpu_time_total", "self_device_time_total",
                     "device_time_total", "graph_time_total", "gap_time_total",
                     "gpu_idle_total", "time_total"), SUMMED),
    **dict.fromkeys(("cpu_time", "device_time"), "µs per call"),
    **dict.fromkeys(("self_cpu_memory_usage", "cpu_memory_usage", "self_device_memory_usage",
                     "device_memory_usage"), "bytes, summed over {over}"),
    **dict.fromkeys(("nbytes", "total", "rise", "least", "most", *CATEGORIES,
                     "dram_read_bytes", "dram_write_bytes"), "bytes"),
    "per_iter": "bytes per iteration (mean)",
    **dict.fromkeys(("start", "end", "t_us", "created_us"), "µs from the iteration's start"),
    **dict.fromkeys(("iteration_us", "gpu_busy_us"), "µs"),
    "max_gain_us": "µs the median iteration would shrink without this row",
    **dict.fromkeys(("seconds", "duration_s"), "seconds"),
    "count": "calls, summed over {over}",
    "flops_per_s": "FLOP/s", "bytes_per_s": "bytes/s", "dram_bytes_per_s": "bytes/s",
    "intensity": "FLOP per byte",
    **dict.fromkeys(("roof_share", "fraction", "overlap", "dram_peak_share"),
                    "fraction (0 to 1)"),
    "occupancy": "% (-1: not read)",
    **dict.fromkeys(("fp64_flops", "fp32_flops", "fp16_flops"), "FLOP"),
    "tensor_inst": "tensor-core instructions",
    "blocks": "allocations, summed over {over}",
    "iterations": "profiled iterations",
    "steps": "steps",
    "op_us": "µs per step, per op",
    **dict.fromkeys(("step_median_us", "step_iqr_us", "compute_us", "communication_us",
                     "memcpy_us", "idle_us"), "µs per step"),
    **dict.fromkeys(("before", "after", "delta"), "µs per iteration"),
}
#: Units of columns no table above names, by how their names end (``median_us``).
SUFFIX_UNITS = (("_us", "µs"), ("_s", "seconds"), ("_bytes", "bytes"), ("memory_held", "bytes"),
                ("memory_per_step", "bytes per step"), ("top_ops", "op -> µs"))
#: Columns whose unit depends on the view.
VIEW_UNITS: dict[str, dict[str, str]] = {
    "ops": {"flops": "FLOP, summed over {over}"},
    "op_totals": {"flops": "FLOP, summed over {over}"},
    "roofline": {"flops": "FLOP per call", "bytes": "bytes per call", "time": SUMMED},
    "counters": {"time": "µs, device time of the calls counted"},
    "breakdown": dict.fromkeys(("wall", "compute", "communication", "memcpy", "idle"),
                               "µs per iteration (mean)"),
    "stack": {"ops": "op calls, summed over {over}"},
    "critical_path": {"time": "µs per iteration (the median iteration's critical path)",
                      "share": "fraction of the critical path's length (0 to 1)"},
    "collectives": {"late_busy": "(op, µs) the last rank ran before it arrived",
                    "ranks": "ranks that kept it"},
    "steps": {**dict.fromkeys(("wall_us", "cpu_us", "device_us"), "µs in this step"),
              "memory_held": "bytes held at the step's end"},
    "step_groups": {"count": "steps per iteration",
                    **dict.fromkeys(("median_us", "first_us", "slowest_us", "cpu_us",
                                     "device_us"), "µs per step"),
                    "top_ops": "op -> µs per step"},
    "python": {"self_us": "µs per iteration", "share": "fraction of the iteration (0 to 1)",
               "samples": "stack samples the figure rests on, over {over}"},
    "gpu_idle": {"idle_us": "µs per iteration", "share": "fraction of the iteration (0 to 1)",
                 "stretches": "idle stretches, over {over}"},
    "unplaced": {"events": "complete events of the category, in the whole trace",
                 "time_us": "µs, summed over the whole trace"},
    "experiments": {
        "median_us": "µs per call, unprofiled (median over the interleaved rounds)",
        "profiled_us": "µs per iteration, profiled (median)",
        "speedup": "1 / the median of the rounds' paired ratios variant / baseline "
                   "(above 1: faster)",
        **dict.fromkeys(("speedup_low", "speedup_high"), "the speed-up's 95% interval"),
        "predicted_speedup": "the dependency model's largest predicted speed-up",
        "max_abs_error": "the units of the cell's value",
        "max_rel_error": "fraction of the baseline value's largest magnitude",
        "compile_us": "µs (the first warm-up run)",
        "iters": "profiled iterations",
        "rounds": "interleaved rounds",
        "batch": "calls of the cell per sample",
    },
}


def units(view: str, columns: list[str], iters: int | None) -> dict[str, str]:
    """Each column of ``view`` that has a unit, with it: ``{"self_cpu_time_total": "µs,
    summed over the 10 profiled iterations", ...}`` (``iters`` None: not one count)."""
    table = {**UNITS, **VIEW_UNITS.get(view, {})}
    over = (f"the {counted(iters, 'profiled iteration')}" if iters is not None
            else "each rank's profiled iterations")
    found = {c: table[c].format(over=over) for c in columns if c in table}
    for c in columns:  # the rest by their names' endings, as the row records write them
        suffix = next((u for end, u in SUFFIX_UNITS if c.endswith(end)), None)
        if c not in found and suffix is not None:
            found[c] = suffix
    return found


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
    a ``rank`` column first; ``"collectives"`` one row per collective matched across ranks."""
    if view == "ranks":  # its collectives are the next view's
        summaries = list(ranks.summaries.values())
        columns = [f.name for f in dataclasses.fields(summaries[0])
                   if f.name != "collectives"] if summaries else ["rank"]
        return [{c: getattr(s, c) for c in columns} for s in summaries], columns
    if view == "collectives":
        columns = [f.name for f in dataclasses.fields(Collective)]
        return [{c: getattr(r, c) for c in columns} for r in ranks.collectives()], columns
    rows: list[dict[str, Any]] = []
    columns = ["rank"]
    for rank, result in ranks.ranks.items():
        part, columns = records(result, view)
        rows += [{"rank": rank, **row} for row in part]
        columns = ["rank", *columns]
    return rows, columns


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
    return dataframe(rows, columns, units(view, columns, result.iters), result.iters)


def comparison_frame(comparison: Any) -> Any:
    """A ``Comparison``'s ops as a ``DataFrame`` (``comparison_records``), units in attrs."""
    rows, columns = comparison_records(comparison)
    return dataframe(rows, columns, {**units("comparison", columns, None),
                                     "speedup": "before / after"})


def ranks_frame(ranks: Any, view: str = "ranks") -> Any:
    """A ``ManyRanksResult`` as a ``DataFrame`` (``rank_records``), units in attrs: the sums
    of a rank's view are over that rank's own steps (``steps`` in the ``ranks`` view)."""
    rows, columns = rank_records(ranks, view)
    if view in ("ranks", "collectives"):
        return dataframe(rows, columns, units(view, columns, None))
    iters = {r.iters for r in ranks.ranks.values()}
    n = iters.pop() if len(iters) == 1 else None  # None: ranks of different step counts
    return dataframe(rows, columns, units(view, columns, n), n)
