"""``result.explain(name)``: one row of the report, taken apart (#47).

What a row is made of, from the result already in memory (no new profile, no trace
re-read): its figures per iteration, its GPU work by kernel (for a kernel: the rows that
launched it), its input shapes, its call sites in the user's code, its time in each
iteration, its memory and roofline point where those views ran, and what making it
faster would buy (the dependency model's ``what_if``). Where a part needs an option the
run did not have, ``notes`` names the option. The widget's row panel
(``render/widget.py``) and the text and HTML of ``explain`` (``render/explain.py``) show
this record; ``to_pandas`` gives each of its tables.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kernelmagic.core.rows import OpRow, RooflineRow
from kernelmagic.views.row_detail import RowDetailView, RowGroup, RowKernel, RowSeries

if TYPE_CHECKING:
    import pandas

    from kernelmagic.results.result import ProfileResult
    from kernelmagic.views.critical_path import WhatIf

__all__ = ["FACTORS", "Explanation", "UnknownRow", "explain", "holds"]

#: The what-ifs ``explain`` answers up front: twice as fast, and gone.
FACTORS = (2.0, float("inf"))
#: The memory fields of an op row (bytes, summed over the iterations), as the panel says them.
MEMORY_FIELDS = (("self CPU memory", "self_cpu_memory_usage"),
                 ("CPU memory", "cpu_memory_usage"),
                 ("self device memory", "self_device_memory_usage"),
                 ("device memory", "device_memory_usage"))


class UnknownRow(LookupError):
    """``explain`` of a name no row has; the message gives the nearest names, on one line."""


@dataclass(frozen=True)
class Explanation:
    """One row of the report, taken apart. Times are µs per iteration (the op table's
    basis: summed over ``iters`` and divided by it) unless a name says ``total``."""

    name: str  # the row's label, as the op table writes it ("[range] nccl:all_reduce")
    key: str  # the row's key (``what_if``'s)
    kind: str  # "op", "range", "unlaunched", "no op" or "kernel"
    iters: int
    on_device: bool
    calls: float = 0.0  # per iteration
    self_cpu_us: float = 0.0
    cpu_us: float = 0.0
    self_device_us: float = 0.0
    device_us: float = 0.0
    share: float = 0.0  # of the run's self time (device time on a device run)
    #: What the median iteration saves without the row, on the op table's basis (at most its
    #: time per iteration); None for a row split by shapes explained without its what-ifs
    #: (each shape's gain is in the op table; the sum of them is no bound).
    max_gain_us: float | None = 0.0
    kernels: list[RowKernel] = field(default_factory=list)  # its GPU work, largest first
    launched_by: list[RowKernel] = field(default_factory=list)  # a kernel's launching rows
    shapes: list[RowGroup] = field(default_factory=list)  # ``group``: the shapes' text
    sites: list[RowGroup] = field(default_factory=list)  # ``group``: the call site
    series: RowSeries | None = None
    memory: list[tuple[str, float]] = field(default_factory=list)  # (what, bytes per iter)
    roofline: RooflineRow | None = None
    what_ifs: list[tuple[float, WhatIf]] = field(default_factory=list)  # (factor, answer)
    notes: list[str] = field(default_factory=list)  # what an option would add

    @property
    def slowest_iteration(self) -> int | None:
        """The iteration (0-based) where the row took the most self time, None without a
        series."""
        if self.series is None:
            return None
        both = [c + d for c, d in zip(self.series.self_cpu_us, self.series.self_device_us,
                                      strict=True)]
        return max(range(len(both)), key=both.__getitem__) if both else None

    def tables(self) -> dict[str, tuple[list[dict[str, Any]], list[str]]]:
        """Each table's rows and columns (the rows' keys, in order): ``kernels``,
        ``launched_by``, ``shapes``, ``sites``, ``iterations`` (the ones with rows)."""
        per = max(1, self.iters)
        series = self.series
        rows = {
            "kernels": [{"kernel": k.kernel, "calls_per_iter": k.calls / per,
                         "device_us_per_iter": k.device_time_total / per,
                         "own": k.own_calls > 0,
                         "share": _of(k.device_time_total, self.device_us * per)}
                        for k in self.kernels],
            "launched_by": [{"row": k.row, "calls_per_iter": k.own_calls / per,
                             "device_us_per_iter": k.own_device_time_total / per}
                            for k in self.launched_by],
            "shapes": [{"shapes": s.group, "calls_per_iter": s.calls / per,
                        "self_cpu_us_per_iter": s.self_cpu_time_total / per,
                        "cpu_us_per_iter": s.cpu_time_total / per,
                        "self_device_us_per_iter": s.self_device_time_total / per}
                       for s in self.shapes],
            "sites": [{"site": s.group, "calls_per_iter": s.calls / per,
                       "self_cpu_us_per_iter": s.self_cpu_time_total / per,
                       "self_device_us_per_iter": s.self_device_time_total / per}
                      for s in self.sites],
            "iterations": [{"iteration": i, "self_cpu_us": c, "self_device_us": d}
                           for i, (c, d) in enumerate(zip(series.self_cpu_us,
                                                          series.self_device_us, strict=True))]
                          if series is not None else [],
        }
        return {name: (found, list(found[0])) for name, found in rows.items() if found}

    def to_pandas(self, table: str = "kernels") -> pandas.DataFrame:
        """One of ``tables()`` as a ``pandas.DataFrame`` (an empty one for a table the row
        has no rows in). Needs pandas."""
        from kernelmagic.io.frames import dataframe

        names = ("kernels", "launched_by", "shapes", "sites", "iterations")
        if table not in names:
            raise ValueError(f"no table {table!r}: one of {', '.join(names)}")
        rows, columns = self.tables().get(table, ([], []))
        return dataframe(rows, columns, iterations=self.iters)

    def text(self) -> str:
        """The panel as plain text (terminal IPython)."""
        from kernelmagic.render.explain import explanation_text

        return explanation_text(self)

    def html(self) -> str:
        """The panel as static HTML (nbconvert, GitHub)."""
        from kernelmagic.render.explain import explanation_html

        return explanation_html(self)

    def __str__(self) -> str:
        return self.text()

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text())

    def _repr_html_(self) -> str:
        return self.html()


def _of(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def _names(result: ProfileResult, detail: RowDetailView) -> list[str]:
    """Every name ``explain`` knows: the rows' labels and keys, and the kernels' names."""
    return list(dict.fromkeys([*(r.label for r in result.rows), *(r.key for r in result.rows),
                               *(k.kernel for k in detail.kernels),
                               *(k.key for k in result.view("kernels").rows)]))


def unknown(name: str, known: list[str]) -> UnknownRow:
    """The error for a name no row has, with the nearest names."""
    near = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    if not near:  # a fragment ("addmm"): the names that hold it
        near = [k for k in known if name.lower() in k.lower()][:3]
    hint = f"; nearest: {', '.join(near)}" if near else ""
    return UnknownRow(f"no row or kernel named {name!r} in this result{hint}")


def explain(result: ProfileResult, name: str, what_if: bool = True) -> Explanation:
    """``name`` (a row's key or label, or a kernel's name) taken apart (module docstring);
    ``UnknownRow`` with the nearest names when nothing has it. ``what_if=False`` leaves out
    the what-ifs (a replay of the dependency model each: on a long single-window trace,
    tens of ms), as the widget's panel does until its slider asks."""
    detail: RowDetailView = result.view("detail")
    rows = [r for r in result.rows if name in (r.key, r.label)]
    if rows:
        return _row(result, detail, rows, what_if)
    launchers = [k for k in detail.kernels if k.kernel == name and k.own_calls > 0]
    if launchers or any(k.key == name for k in result.view("kernels").rows):
        return _kernel(result, name, launchers)
    raise unknown(name, _names(result, detail))


def _row(result: ProfileResult, detail: RowDetailView, rows: list[OpRow],
         what_if: bool) -> Explanation:
    first, per = rows[0], max(1, result.iters)
    label = first.label

    def total(field_name: str) -> float:
        return sum(float(getattr(r, field_name)) for r in rows)

    series = next((s for s in detail.series if s.row == label), None)
    what_ifs = _what_ifs(result, first.key) if what_if else []
    inclusive = max(total("cpu_time_total"), total("device_time_total")) / per
    gain: float | None = None
    if len(rows) == 1:  # (None for a row the model holds but cannot see)
        gain = result.gain_shown(rows[0])
    elif what_ifs and first.key not in result.unseen_keys:
        gain = min(what_ifs[-1][1].saved_us, inclusive)
    return Explanation(
        name=label, key=first.key, kind=first.kind, iters=result.iters,
        on_device=result.profiles_device, calls=total("count") / per,
        self_cpu_us=total("self_cpu_time_total") / per, cpu_us=total("cpu_time_total") / per,
        self_device_us=total("self_device_time_total") / per,
        device_us=total("device_time_total") / per,
        share=result.share_of(rows), max_gain_us=gain,
        kernels=sorted((k for k in detail.kernels if k.row == label),
                       key=lambda k: (-k.device_time_total, k.kernel)),
        shapes=[s for s in detail.shapes if s.row == label],
        sites=[s for s in detail.sites if s.row == label],
        series=series,
        memory=([(what, total(f) / per) for what, f in MEMORY_FIELDS]
                if "memory" in result.views else []),
        roofline=next((r for r in result.view("roofline").rows if r.key == first.key), None),
        what_ifs=what_ifs,
        notes=_notes(result, detail))


def _kernel(result: ProfileResult, name: str, launchers: list[RowKernel]) -> Explanation:
    per = max(1, result.iters)
    row = next((k for k in result.view("kernels").rows if k.key == name), None)
    time = row.device_time_total if row else sum(k.own_device_time_total for k in launchers)
    calls = row.count if row else sum(k.own_calls for k in launchers)
    busy = result.self_device_time_total
    return Explanation(
        name=name, key=name, kind="kernel", iters=result.iters, on_device=True,
        calls=calls / per, self_device_us=time / per, device_us=time / per,
        share=_of(time, busy),
        launched_by=sorted(launchers, key=lambda k: (-k.own_device_time_total, k.row)))


def _what_ifs(result: ProfileResult, key: str) -> list[tuple[float, WhatIf]]:
    """The row twice as fast and gone (``FACTORS``), where the median iteration holds it."""
    return [(k, result.what_if({key: k})) for k in FACTORS] if holds(result, key) else []


def holds(result: ProfileResult, key: str) -> bool:
    """Whether the dependency model's median iteration holds row ``key`` where it can see
    its removal (``ProfileResult.priceable_keys``: its what-if can save something)."""
    return key in result.priceable_keys


def _notes(result: ProfileResult, detail: RowDetailView) -> list[str]:
    """What the run left out of the panel, with the option that adds it."""
    notes = []
    trace = result.from_trace  # a trace: what the recording would need, not our options
    if not detail.shapes_recorded:
        notes.append("input shapes: " + ("record the trace with record_shapes=True" if trace
                                         else "run with --shapes"))
    if not detail.stack_recorded:
        notes.append("call sites: " + ("record the trace with with_stack=True" if trace
                                       else "run with --stack"))
    if "memory" not in result.views and not trace:
        notes.append("memory: run with --memory")
    if not result.view("roofline").rows and not trace:
        notes.append("roofline point: run with --roofline")
    if not result.dependency_model:
        notes.append("what-if: no dependency model (a result saved by an older kernelmagic)")
    return notes
