"""What each row of the op table is made of: the record behind ``result.explain(name)`` and
the widget's row panel (#47).

Built once with the result, from the event table already in memory, so a panel opens
without a new profile or a trace re-read. Per row of the op table (its label, as
``core/rows.py: marked_key`` writes it: ``aten::addmm``, ``[range] nccl:all_reduce``,
``[no launch] Memcpy HtoD``, ``[no op] ProfilerStep``):

- **GPU work** (``kernels``): the kernels, memcpys and memsets by name. ``own`` work is
  what the row launched itself, its self device time (each piece in exactly one row, as in
  the op table); the rest ran under it (launched by an op inside it, or, for a runtime
  call, launched by that call), so a row's ``calls``/``time`` over every name add up to
  its inclusive device time and its own ones to its self device time.
- **Input shapes and dtypes** (``shapes``): calls and times per input shapes and dtypes,
  where the run recorded them (``--shapes``; a trace's ``Input Dims`` and ``Input type``).
- **Call sites** (``sites``): the innermost frame of the user's own code around each call
  (``with_stack``: ``--stack``), labelled ``cell[n]:line`` for the profiled cell.
- **Per iteration** (``series``): the row's self CPU and self device time in each
  iteration (device work counted in the iteration that launched it), for the rows with
  the most self time when the run has more than ``SERIES_CELLS`` (row, iteration) pairs.

Every step is a pass over numpy columns: linear in the events (the inclusive walk goes up
the tree once per level, as ``views/tree.py`` does).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kernelmagic.core.arrays import unique
from kernelmagic.core.events import NO_PARENT, EventTable, Kind, device_work
from kernelmagic.core.records import Record, unit
from kernelmagic.core.rows import KIND_MARKS
from kernelmagic.views.breakdown import span_index
from kernelmagic.views.ops import (
    NO_OP,
    RANGE,
    UNLAUNCHED,
    in_window,
    marker_work,
    outer_window,
    range_owners,
    row_events,
    runtime_calls,
)
from kernelmagic.views.python_lines import label
from kernelmagic.views.registry import Frame, ViewInputs, ViewSpec, register
from kernelmagic.views.source_lines import frame_owner, user_frames
from kernelmagic.views.tree import Figures

__all__ = ["RowDetailView", "RowGroup", "RowKernel", "RowSeries", "row_detail"]

#: At most this many (row, iteration) pairs keep their figures: beyond it, the series of the rows
#: with the most self time (a 1M-event trace of 500 iterations would otherwise hold
#: millions).
SERIES_CELLS = 50_000


@dataclass(frozen=True)
class RowKernel(Record):
    """GPU work of one name under one row (``own``: the row launched it itself)."""

    row: str
    kernel: str
    calls: int = unit("pieces of work, summed over {over}")
    device_time_total: float = unit("µs, summed over {over}")
    own_calls: int = unit("pieces the row launched itself, summed over {over}", 0)
    own_device_time_total: float = unit("µs the row launched itself, summed over {over}", 0.0)


@dataclass(frozen=True)
class RowGroup(Record):
    """One row's calls that share one thing: their input shapes and dtypes (``shapes``:
    ``[64, 256], [256, 512] (float, float)``) or their call site in the user's code
    (``sites``: ``cell[2]:5 forward``)."""

    row: str
    group: str
    calls: int = unit("calls, summed over {over}")
    self_cpu_time_total: float = unit("µs, summed over {over}")
    cpu_time_total: float = unit("µs, summed over {over}")
    self_device_time_total: float = unit("µs, summed over {over}", 0.0)


@dataclass(frozen=True)
class RowSeries(Record):
    """One row's self time in each profiled iteration, in order (µs)."""

    row: str
    self_cpu_us: list[float] = field(default_factory=list)
    self_device_us: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class RowDetailView:
    """Every row's detail (module docstring); ``shapes_recorded``/``stack_recorded`` say
    whether the run could fill ``shapes``/``sites``."""

    kernels: list[RowKernel] = field(default_factory=list)
    shapes: list[RowGroup] = field(default_factory=list)
    sites: list[RowGroup] = field(default_factory=list)
    series: list[RowSeries] = field(default_factory=list)
    shapes_recorded: bool = False
    stack_recorded: bool = False


@dataclass
class _Rows:
    """Each event's row (index into ``labels``; -1: none) and the rows' labels."""

    of_event: np.ndarray
    labels: list[str]

    def add(self, labels: list[str]) -> int:
        """Append ``labels``; the index of the first."""
        first = len(self.labels)
        self.labels.extend(labels)
        return first


def row_detail(table: EventTable, figures: Figures, windows: list[tuple[int, int]],
               name: str | None = None, cell_file: str | None = None, cell_label: str = "",
               ranges: np.ndarray | None = None) -> RowDetailView:
    """The detail of every op-table row (module docstring). ``figures``: the load's
    ``Figures``; ``ranges``: ``range_owners``."""
    window = outer_window(table, name) if name else None
    rows, calls = _op_events(table, figures, window, name, ranges)
    work, own = _device_owners(table, figures, rows, window, name)
    kernels = _kernels(table, rows, work, own, calls)
    columns = (figures.self_cpu, figures.cpu_total, figures.self_device)
    shapes = _shapes(table, rows, calls, columns)
    sites = _sites(table, rows, calls, columns, cell_file, cell_label)
    series = _series(table, rows, calls, work, own, windows, figures.self_cpu)
    return RowDetailView(kernels=kernels, shapes=shapes, sites=sites, series=series,
                         shapes_recorded=bool(shapes),
                         stack_recorded=bool((table.kind == Kind.PYTHON).any()))


def _op_events(table: EventTable, figures: Figures, window: tuple[int, int] | None,
               name: str | None, ranges: np.ndarray | None) -> tuple[_Rows, np.ndarray]:
    """The events that are op-table rows (as ``op_rows`` picks them) and their labels."""
    ranges = range_owners(table, name) if ranges is None else ranges
    calls = np.flatnonzero(row_events(table, ranges, window, figures))
    keys = table.name[calls].astype(np.int64) * 2 + ranges[calls]
    found, inverse = unique(keys, return_inverse=True)
    labels = [KIND_MARKS[RANGE] * int(k % 2) + table.names[int(k // 2)]
              for k in found.tolist()]
    of_event = np.full(table.n, -1, dtype=np.int64)
    of_event[calls] = inverse
    return _Rows(of_event, labels), calls


def _device_owners(table: EventTable, figures: Figures, rows: _Rows,
                   window: tuple[int, int] | None,
                   name: str | None) -> tuple[np.ndarray, np.ndarray]:
    """Every piece of GPU work and the row that owns it (its self device time): its
    launcher's row, else the iteration marker's "no op" row, else (no launch recorded)
    the "no launch" row of its name; -1 where none (work under kernelmagic's own sync)."""
    work = np.flatnonzero(device_work(table))
    launcher = table.launcher[work]
    own = np.where(launcher != NO_PARENT, rows.of_event[np.maximum(launcher, 0)], -1)
    marked, marker_keys = figures.shared(marker_work, name)
    by_marker = marked[work]
    if marker_keys:
        first = rows.add([KIND_MARKS[NO_OP] + k for k in marker_keys])
        inside = in_window(table.start[np.maximum(launcher, 0)], window)  # as op_rows keeps it
        by_marker = np.where(inside, by_marker, -1)
        own = np.where(by_marker >= 0, first + by_marker, own)
    unlaunched = (launcher == NO_PARENT) & in_window(table.start[work], window)
    if unlaunched.any():
        found, inverse = unique(table.name[work[unlaunched]], return_inverse=True)
        first = rows.add([KIND_MARKS[UNLAUNCHED] + table.names[i] for i in found.tolist()])
        own[unlaunched] = first + inverse
    return work, own


def _holders(table: EventTable, rows: _Rows, work: np.ndarray,
             own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(piece, row) pairs: each piece of work with every row it ran under (its own row,
    its runtime call, and every row event above that call), each pair once."""
    start = runtime_calls(table, work)
    start = np.where(start >= 0, start, table.launcher[work])
    piece = [np.flatnonzero(own >= 0)]
    holder = [own[own >= 0]]
    at = np.flatnonzero(start >= 0)
    node = start[at]
    while at.size:
        row = rows.of_event[node]
        piece.append(at[row >= 0])
        holder.append(row[row >= 0])
        up = table.parent[node]
        keep = up >= 0
        at, node = at[keep], up[keep].astype(np.int64)
    pieces, holders = np.concatenate(piece), np.concatenate(holder)
    pair = unique(pieces * len(rows.labels) + holders)
    return pair // max(1, len(rows.labels)), pair % max(1, len(rows.labels))


def _kernels(table: EventTable, rows: _Rows, work: np.ndarray, own: np.ndarray,
             calls: np.ndarray) -> list[RowKernel]:
    if not work.size:
        return []
    piece, holder = _holders(table, rows, work, own)
    duration = (table.end[work] - table.start[work]) / 1000.0
    name = table.name[work].astype(np.int64)
    n_names = len(table.names)
    key = holder * n_names + name[piece]
    is_own = own[piece] == holder
    found, inverse = unique(key, return_inverse=True)
    k = found.size
    count = np.bincount(inverse, minlength=k)
    time = np.bincount(inverse, weights=duration[piece], minlength=k)
    own_count = np.bincount(inverse, weights=is_own, minlength=k)
    own_time = np.bincount(inverse, weights=duration[piece] * is_own, minlength=k)
    labels, names = rows.labels, table.names
    out = [RowKernel(row=labels[int(f // n_names)], kernel=names[int(f % n_names)],
                     calls=int(c), device_time_total=float(t), own_calls=int(oc),
                     own_device_time_total=float(ot))
           for f, c, t, oc, ot in zip(found.tolist(), count.tolist(), time.tolist(),
                                      own_count.tolist(), own_time.tolist(), strict=True)]
    return sorted(out, key=lambda r: (r.row, -r.device_time_total, r.kernel))


def _groups(rows: _Rows, calls: np.ndarray, group: np.ndarray, texts: list[str],
            figures: tuple[np.ndarray, np.ndarray, np.ndarray]) -> list[RowGroup]:
    """The ``calls`` summed per (row, group): ``group`` is each call's index into
    ``texts``; ``figures``: self CPU, total CPU and self device time per event."""
    found, inverse = unique(rows.of_event[calls] * len(texts) + group, return_inverse=True)
    k = found.size

    def total(values: np.ndarray) -> list[float]:
        return np.bincount(inverse, weights=values[calls], minlength=k).tolist()

    count = np.bincount(inverse, minlength=k).tolist()
    out = [RowGroup(row=rows.labels[f // len(texts)], group=texts[f % len(texts)], calls=c,
                    self_cpu_time_total=s, cpu_time_total=t, self_device_time_total=d)
           for f, c, s, t, d in zip(found.tolist(), count, *map(total, figures), strict=True)]
    return sorted(out, key=lambda r: (r.row, -r.cpu_time_total, r.group))


def _shapes(table: EventTable, rows: _Rows, calls: np.ndarray,
            figures: tuple[np.ndarray, np.ndarray, np.ndarray]) -> list[RowGroup]:
    """Each row's calls per input shapes and dtypes (``[64, 256], [256, 512] (float,
    float)``; none where neither was recorded)."""
    if not calls.size:
        return []
    shape_ids = table.shapes[calls].astype(np.int64)
    dtypes = table.extra.get("dtypes")
    type_ids = (dtypes[calls].astype(np.int64) if dtypes is not None
                else np.zeros(calls.size, dtype=np.int64))
    if not shape_ids.any() and not type_ids.any():
        return []
    n_names = len(table.names)
    found, group = unique(shape_ids * n_names + type_ids, return_inverse=True)
    texts = [_shapes_and_types(table.names[f // n_names], table.names[f % n_names])
             for f in found.tolist()]
    return _groups(rows, calls, group, texts, figures)


def _shapes_and_types(shapes: str, types: str) -> str:
    if not types:
        return shapes
    return f"{shapes} ({types})" if shapes else f"({types})"


def _sites(table: EventTable, rows: _Rows, calls: np.ndarray,
           figures: tuple[np.ndarray, np.ndarray, np.ndarray], cell_file: str | None,
           cell_label: str) -> list[RowGroup]:
    """Each row's calls per innermost frame of the user's code around them."""
    frames, frame_id, frame_events = user_frames(table)
    if not frame_events.size or not calls.size:
        return []
    owner = frame_owner(table, frame_events)[calls]
    has = owner >= 0
    texts = [""] * len(table.names)
    for i, (file, line, func) in frames.items():
        texts[i] = f"{label(file, line, cell_file, cell_label)} {func}"
    return _groups(rows, calls[has], frame_id[table.name[owner[has]]], texts, figures)


def _series(table: EventTable, rows: _Rows, calls: np.ndarray, work: np.ndarray,
            own: np.ndarray, windows: list[tuple[int, int]],
            self_cpu: np.ndarray) -> list[RowSeries]:
    """Each row's self CPU and self device time per iteration: summed per (row, iteration)
    pair that has any (at most one pair per event), then laid out densely for the rows
    kept alone (every row, or the ``SERIES_CELLS // iterations`` with the most time), so
    the work follows the events, not rows x iterations."""
    n_rows, n_iters = len(rows.labels), len(windows)
    if not n_iters or not n_rows:
        return []
    starts, ends = np.asarray(sorted(windows), dtype=np.int64).T
    it = span_index(table.start[calls], starts, ends)
    ok = it >= 0
    cpu_cells, cpu_us = rows.of_event[calls][ok] * n_iters + it[ok], self_cpu[calls][ok]
    dev_cells, dev_us = np.zeros(0, dtype=np.int64), np.zeros(0)
    if work.size:
        launched = table.launcher[work]
        when = np.where(launched != NO_PARENT, table.start[np.maximum(launched, 0)],
                        table.start[work])
        it = span_index(when, starts, ends)
        ok = (it >= 0) & (own >= 0)
        dev_cells = own[ok] * n_iters + it[ok]
        dev_us = ((table.end[work] - table.start[work]) / 1000.0)[ok]
    cells, inverse = unique(np.concatenate([cpu_cells, dev_cells]), return_inverse=True)
    cpu = np.bincount(inverse[:cpu_cells.size], weights=cpu_us, minlength=cells.size)
    dev = np.bincount(inverse[cpu_cells.size:], weights=dev_us, minlength=cells.size)
    row, at = cells // n_iters, cells % n_iters
    kept = np.arange(n_rows)
    if n_rows * n_iters > SERIES_CELLS:
        weight = np.bincount(row, weights=cpu + dev, minlength=n_rows)
        kept = np.sort(np.argsort(-weight, kind="stable")[: max(1, SERIES_CELLS // n_iters)])
    place = np.full(n_rows, -1)
    place[kept] = np.arange(kept.size)
    sel = place[row] >= 0
    dense_cpu, dense_dev = np.zeros((kept.size, n_iters)), np.zeros((kept.size, n_iters))
    dense_cpu[place[row[sel]], at[sel]] = cpu[sel]
    dense_dev[place[row[sel]], at[sel]] = dev[sel]
    return [RowSeries(row=rows.labels[r], self_cpu_us=dense_cpu[i].tolist(),
                      self_device_us=dense_dev[i].tolist())
            for i, r in enumerate(kept.tolist())]


def build_row_detail(inputs: ViewInputs) -> RowDetailView:
    return row_detail(inputs.table, inputs.figures, list(inputs.windows), inputs.name,
                      inputs.source_file, inputs.cell_label, inputs.extra.get("range_owners"))


DETAIL = register(ViewSpec(
    "detail", RowDetailView, build_row_detail, order=900,
    frames=(Frame("row_kernels", "kernels", RowKernel), Frame("row_shapes", "shapes", RowGroup),
            Frame("row_sites", "sites", RowGroup))))
