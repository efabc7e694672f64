"""The compiled view's tables and notes (``torch.compile``): regions, graph breaks, the
kernels inductor generated, and the compiles of the run."""

from __future__ import annotations

import dataclasses

from kernelmagic.core.compiled_rows import (
    BEFORE,
    PROFILED,
    UNTIMED_KERNELS,
    WARMUP,
    FusedKernelRow,
)
from kernelmagic.core.units import counted, format_fixed, format_us, percent_of
from kernelmagic.findings.base import wall_us  # the findings' iteration: the same shares
from kernelmagic.render.table import Column, Table, summed, text_column, time_column
from kernelmagic.results.result import ProfileResult

__all__ = ["compiled_notes", "compiled_tables"]


def _where(file: str, line: int) -> str:
    return f"{file.rsplit('/', 1)[-1]}:{line}" if file and line else ""


def _lines(row: FusedKernelRow) -> str:
    """``path:line; path:line`` as ``file.py:3, 4``: file names once, lines after them."""
    by_file: dict[str, list[str]] = {}
    for place in filter(None, row.source.split("; ")):
        path, _, line = place.rpartition(":")
        by_file.setdefault(path.rsplit("/", 1)[-1], []).append(line)
    return "; ".join(f"{name}:{', '.join(lines)}" for name, lines in by_file.items())


def region_table(result: ProfileResult) -> Table:
    """Each compiled region: calls, time per iteration inclusive and in its own graphs."""
    n = max(result.iters, 1)
    wall = wall_us(result)
    cols = [
        Column("op", "compile id", lambda r: r.compile_id,
               lambda r: r.compile_id + ("" if r.outermost else " (nested)"),
               numeric=False, width=120),
        Column("frame", "frame", lambda r: r.function,
               lambda r: f"{r.function} {_where(r.file, r.line)}".strip(), numeric=False,
               width=300),
        Column("calls", "calls", lambda r: r.count, lambda r: f"{r.count:,}"),
        time_column("cpu_iter", "per iteration", lambda r: r.cpu_time_total / n),
        time_column("graph_iter", "in its graphs / it.", lambda r: r.graph_time_total / n),
        Column("pct", "% iteration", lambda r: r.cpu_time_total,
               lambda r: percent_of(r.cpu_time_total / n, wall)),
    ]
    if result.profiles_device:
        cols.insert(5, time_column("device", summed("device", result.iters),
                                   lambda r: r.device_time_total))
    return Table(cols, list(result.compiled_regions), "cpu_iter", noun="compiled regions")


def break_table(result: ProfileResult) -> Table:
    """Each graph break: the gap it leaves per iteration, where, why, dynamo's hint."""
    n = max(result.iters, 1)
    wall = wall_us(result)
    cols = [
        text_column("op", "region", lambda b: b.compile_id, width=100),
        Column("where", "line", lambda b: _where(b.file, b.line),
               lambda b: f"{_where(b.file, b.line)} {b.code}".strip(), numeric=False,
               width=300),
        Column("gap_iter", "gap per iteration", lambda b: b.gap_time_total / n,
               lambda b: format_us(b.gap_time_total / n) if b.count else "no gap",
               width=144),
        Column("pct", "% iteration", lambda b: b.gap_time_total,
               lambda b: percent_of(b.gap_time_total / n, wall) if b.count else ""),
        text_column("reason", "reason", lambda b: b.reason, width=360),
        text_column("hint", "hint", lambda b: b.hint, width=360),
        text_column("top_ops", "in the gap (self CPU / it.)", lambda b: b.top_ops, width=360),
    ]
    if result.profiles_device:
        cols.insert(3, time_column("gpu_idle", "GPU idle in it / it.",
                                   lambda b: b.gpu_idle_total / n))
    return Table(cols, list(result.graph_breaks), "gap_iter", noun="graph breaks")


#: What a kernel without a profiling record shows for its calls and times.
UNRECORDED = "not recorded"


def _untimed(column: Column) -> Column:
    """``column`` showing ``UNRECORDED`` for a kernel that recorded no time."""
    shown = column.show
    return dataclasses.replace(column, show=lambda k: shown(k) if k.timed else UNRECORDED)


def kernel_table(result: ProfileResult) -> Table:
    """Each kernel inductor generated, its time and the aten ops it fused."""
    n = max(result.iters, 1)
    cols = [
        text_column("op", "kernel", lambda k: k.key, width=360),
        text_column("region", "region", lambda k: k.compile_id, width=100),
        Column("calls", "calls", lambda k: k.count,
               lambda k: f"{k.count:,}" if k.timed else UNRECORDED),
        _untimed(time_column("time", summed("time", result.iters), lambda k: k.time_total)),
        _untimed(time_column("time_iter", "per iteration", lambda k: k.time_total / n)),
        text_column("aten", "aten ops fused", lambda k: k.aten_ops, width=360),
        Column("source", "from your lines", lambda k: k.source, _lines, numeric=False,
               width=260),
    ]
    return Table(cols, list(result.fused_kernels), "time", noun="inductor kernels")


def compile_table(result: ProfileResult) -> Table:
    """The compiles of this run (and, marked ``before``, those of the profiled regions)."""
    order = {id(c): i for i, c in enumerate(result.compiles)}  # a compile id can repeat
    cols = [
        Column("op", "compile id", lambda c: c.compile_id,
               lambda c: c.compile_id + (" backward" if c.backward else ""),
               numeric=False, width=100),
        text_column("phase", "when", lambda c: c.phase),
        Column("frame", "frame", lambda c: c.function,
               lambda c: f"{c.function} {_where(c.file, c.line)}".strip(), numeric=False,
               width=300),
        Column("seconds", "compile time", lambda c: c.duration_s,
               lambda c: format_fixed(c.duration_s, "s", 2)),
        Column("guard", "recompiled because", lambda c: c.recompile_reason,
               lambda c: c.recompile_reason.splitlines()[0] if c.recompile_reason else "",
               numeric=False, width=420),
        Column("order", "#", lambda c: -order[id(c)], lambda c: str(order[id(c)] + 1),
               width=40),
    ]
    return Table(cols, list(result.compiles), "order", noun="compiles")


def compiled_tables(result: ProfileResult) -> list[tuple[str, object]]:
    """(title, Table) for the compiled view; empty when no compiled code ran."""
    shown = [("compiled", bool(result.compiled_regions), region_table),
             ("graph breaks", bool(result.graph_breaks), break_table),
             ("inductor kernels", bool(result.fused_kernels), kernel_table),
             ("compiles", any(c.phase != BEFORE for c in result.compiles), compile_table)]
    return [(title, table(result)) for title, wanted, table in shown if wanted]


def compiled_notes(result: ProfileResult) -> list[str]:
    """One line: how much of the iteration ran compiled, and the compile time kept out of
    the measurement (warm-up) or inside it (profiled iterations); none without compiles."""
    if not result.compiled_regions and not result.compiles:
        return []
    n = max(result.iters, 1)
    inside = sum(r.cpu_time_total for r in result.compiled_regions if r.outermost) / n
    gaps = sum(b.gap_time_total for b in result.graph_breaks) / n
    parts = [f"torch.compile: compiled regions {format_us(inside)} of "
             f"the mean {format_us(wall_us(result))} iteration"]
    if gaps:
        parts.append(f"graph-break gaps {format_us(gaps)}")
    warm = [c for c in result.compiles if c.phase == WARMUP]
    if warm:
        parts.append(f"the warm-up's {counted(len(warm), 'compile')} took "
                     f"{format_fixed(sum(c.duration_s for c in warm), 's', 2)} (kept out of the "
                     "measurement)")
    late = [c for c in result.compiles if c.phase == PROFILED]
    if late:
        took = format_fixed(sum(c.duration_s for c in late), "s", 2)
        parts.append(f"WARNING: {counted(len(late), 'compile')} ({took}) ran inside the "
                     "profiled iterations")
    graphs = any(r.graph_time_total > 0 for r in result.compiled_regions)
    if not result.profiles_device and graphs and not any(k.timed for k in result.fused_kernels):
        parts.append(f"kernels with no times: {UNTIMED_KERNELS}")
    return ["; ".join(parts)]
