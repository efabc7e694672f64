"""The hardware-counter views' renderings (``--counters``): the counters per kernel, the
kernels placed by measured numbers beside the roofline's modelled ones, and the one-line
notes (why counters are missing; which capture an ``--nsight`` run was)."""

from __future__ import annotations

from typing import Any

from kernelmagic.core.counter_metrics import PRECISIONS, CounterRow
from kernelmagic.core.units import counted, format_count, format_ratio, format_us, percent, si
from kernelmagic.findings.counters import modelled_bytes
from kernelmagic.render.names import short_names
from kernelmagic.render.table import Column, Table
from kernelmagic.results.result import ProfileResult

NONE = "—"


def _counted(show: bool, text: str) -> str:
    return text if show else NONE


def counter_table(result: ProfileResult) -> Table:
    """Per kernel: calls, FLOPs by precision, tensor-core instructions, DRAM bytes,
    occupancy, time, FLOP/s, DRAM bytes/s and the share of the DRAM peak ("—": not read)."""
    short = short_names(r.key for r in result.counters)
    timed = any(r.time > 0 for r in result.counters)
    cols = [
        Column("op", "kernel", lambda r: r.key, lambda r: short[r.key], numeric=False,
               width=360),
        Column("launched_by", "launched by", lambda r: r.launched_by,
               lambda r: r.launched_by or NONE, numeric=False, width=200),
        Column("calls", "calls", lambda r: r.count, lambda r: f"{r.count:,}", width=64),
    ]
    for precision in PRECISIONS:
        attr = f"{precision}_flops"
        cols.append(Column(attr, f"{precision.upper()} FLOP",
                           lambda r, a=attr: getattr(r, a),
                           lambda r, a=attr: _counted(r.has_flops, format_count(getattr(r, a)))))
    cols += [
        Column("tensor_inst", "tensor inst.", lambda r: r.tensor_inst,
               lambda r: _counted(r.has_tensor, format_count(r.tensor_inst))),
        Column("dram_read", "DRAM read", lambda r: r.dram_read_bytes,
               lambda r: _counted(r.has_dram, si(r.dram_read_bytes, "B"))),
        Column("dram_write", "DRAM write", lambda r: r.dram_write_bytes,
               lambda r: _counted(r.has_dram, si(r.dram_write_bytes, "B"))),
        Column("occupancy", "occupancy", lambda r: r.occupancy,
               lambda r: percent(r.occupancy / 100) if r.occupancy >= 0 else NONE, width=84),
    ]
    if timed:
        cols += [
            Column("time", "device time", lambda r: r.time, lambda r: format_us(r.time)),
            Column("flops_per_s", "FLOP/s", lambda r: r.flops_per_s,
                   lambda r: _counted(r.has_flops and r.time > 0, format_count(r.flops_per_s))),
            Column("dram_per_s", "DRAM bytes/s", lambda r: r.dram_bytes_per_s,
                   lambda r: _counted(r.has_dram and r.time > 0,
                                      si(r.dram_bytes_per_s, "B/s"))),
            Column("dram_peak", "% DRAM peak", lambda r: r.dram_peak_share,
                   lambda r: _counted(r.dram_peak_share > 0, percent(r.dram_peak_share)),
                   width=96),
        ]
    sort = "dram_read" if any(r.has_dram for r in result.counters) else "fp32_flops"
    return Table(cols, list(result.counters), sort, noun="kernels")


def measured_roofline_table(result: ProfileResult) -> Table:
    """The kernels by measured numbers (FLOP per DRAM byte, FLOP/s, DRAM bytes/s) beside
    the bytes their op's tensors need per run by the roofline's model."""
    model = modelled_bytes(result)
    short = short_names(r.key for r in result.counters)

    def ratio(r: CounterRow) -> float:
        need = model.get(r.launched_by, 0.0)
        return r.dram_bytes / need if need > 0 and r.has_dram else 0.0

    cols = [
        Column("op", "kernel", lambda r: r.key, lambda r: short[r.key], numeric=False,
               width=300),
        Column("launched_by", "launched by", lambda r: r.launched_by,
               lambda r: r.launched_by or NONE, numeric=False, width=200),
        Column("intensity", "FLOP/byte (measured)", lambda r: r.intensity,
               lambda r: f"{r.intensity:.3g}" if r.dram_bytes else NONE, width=150),
        Column("flops_per_s", "FLOP/s (measured)", lambda r: r.flops_per_s,
               lambda r: _counted(r.time > 0, format_count(r.flops_per_s)), width=140),
        Column("dram_per_s", "DRAM bytes/s", lambda r: r.dram_bytes_per_s,
               lambda r: _counted(r.time > 0 and r.has_dram, si(r.dram_bytes_per_s, "B/s"))),
        Column("dram_bytes", "DRAM bytes", lambda r: r.dram_bytes,
               lambda r: _counted(r.has_dram, si(r.dram_bytes, "B"))),
        Column("modelled", "op's bytes (model)", lambda r: model.get(r.launched_by, 0.0),
               lambda r: _counted(r.launched_by in model, si(model.get(r.launched_by, 0.0),
                                                             "B")), width=140),
        Column("ratio", "measured / model", ratio,
               lambda r: format_ratio(ratio(r), significant=True) if ratio(r) else NONE, width=130),
    ]
    return Table(cols, list(result.counters), "dram_bytes", noun="kernels")


MEASURED_COLOR = "#55A868"


def measured_points(result: ProfileResult, k: int) -> list[CounterRow]:
    """The kernels the roofline chart places by measured numbers: those with FLOPs, DRAM
    bytes and a time, most time first, at most ``k``. Kernels that ran tensor-core
    instructions are left out: their FLOPs are not counted (only the instructions), so
    their measured FLOP/s and FLOP per byte would be far too low."""
    rows = [r for r in result.counters if r.flops > 0 and r.dram_bytes > 0 and r.time > 0
            and not r.tensor_inst]
    return sorted(rows, key=lambda r: -r.time)[:k]


def draw_measured(ax: Any, result: ProfileResult, k: int) -> tuple[list[float], list[float]]:
    """Measured kernels on the roofline chart's axes as hollow diamonds; their (x, y).
    Their names are the chart's to place (``measured_names``), as the modelled ops' are."""
    points = measured_points(result, k)
    xs = [r.intensity for r in points]
    ys = [r.flops_per_s for r in points]
    if points:
        ax.scatter(xs, ys, marker="D", s=36, facecolors="none", edgecolors=MEASURED_COLOR,
                   linewidths=1.2, label="kernel (measured)")
    return xs, ys


def measured_names(result: ProfileResult, k: int) -> list[str]:
    """The short names of the kernels ``draw_measured`` draws, in its order."""
    short = short_names(r.key for r in result.counters)
    return [short[r.key] for r in measured_points(result, k)]


def counter_views(result: ProfileResult) -> list[tuple[str, object]]:
    """(title, Table or note) for ``--counters``: the counters (or why there are none)
    and, with ``--roofline``, the kernels by measured numbers beside the model."""
    if "counters" not in result.views:
        return []
    if not result.counters:
        return [("counters", result.counters_note or "No kernel ran: no counters.")]
    views: list[tuple[str, object]] = [("counters", counter_table(result))]
    if "roofline" in result.views:
        views.append(("roofline (measured)", measured_roofline_table(result)))
    return views


def capture_notes(result: ProfileResult) -> list[str]:
    """One-line notes: which capture an ``--nsight`` run was; how counters were read."""
    notes = []
    if result.capture == "nsight":
        notes.append(
            "Nsight capture: cudaProfilerStart/Stop bracketed the "
            f"{counted(result.iters, 'timed iteration')} inside the NVTX range "
            f"{result.name!r}; torch's profiler did not run "
            "(Nsight held CUPTI), so the times are the wall clock's and there are no op rows")
    if result.counters and result.counters_note:
        untimed = ("; no kernel times to go with them, so counts without rates"
                   if not any(r.time > 0 for r in result.counters) else "")
        notes.append(f"Hardware counters: {result.counters_note}{untimed}")
    return notes
