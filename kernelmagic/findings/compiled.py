"""``torch.compile``: a graph break whose gap costs part of the iteration, recompiles
inside the measured loop, a cell that mostly still runs eager.

The figures come from the compiled view (``kernelmagic/views/compiled.py``, reasons and
compiles from ``kernelmagic/live/compile_watch.py``)."""

from __future__ import annotations

from kernelmagic.core.compiled_rows import PROFILED
from kernelmagic.core.units import counted, format_fixed, format_us, percent
from kernelmagic.findings.base import Finding, of_wall, wall_us
from kernelmagic.results.result import ProfileResult

GRAPH_BREAK_SHARE = 0.05  # a graph break's gap: share of the iteration worth naming
EAGER_SHARE = 0.5  # compiled regions below this share of the iteration: mostly eager


def graph_break_gap(result: ProfileResult) -> Finding | None:
    """The costliest graph break whose gap is at least ``GRAPH_BREAK_SHARE`` of the
    iteration: its line, dynamo's reason and suggested fix, the time it costs."""
    if not result.graph_breaks:
        return None
    # On a GPU the gap costs what the GPU idles in it; on the CPU, all of it.
    device = result.profiles_device
    cost = (lambda b: b.gpu_idle_total) if device else (lambda b: b.gap_time_total)
    worst = max(result.graph_breaks, key=cost)
    n = max(result.iters, 1)
    per_iter = cost(worst) / n
    share = of_wall(result, per_iter)
    if share < GRAPH_BREAK_SHARE:
        return None
    where = f"{worst.file}:{worst.line}" if worst.file and worst.line else "an unknown line"
    code = f" (`{worst.code}`)" if worst.code else ""
    others = len(result.graph_breaks) - 1
    more = f"; {others} more graph break(s) in the compiled view" if others > 0 else ""
    took = (f"takes {format_us(worst.gap_time_total / n)} per iteration, the GPU idle for "
            f"{format_us(per_iter)} of it ({percent(share)} of the iteration)" if device else
            f"takes {format_us(per_iter)} per iteration, {percent(share)} of it")
    return Finding(
        "graph_break", "A graph break splits the compiled code",
        f"dynamo broke the graph at {where}{code}: {worst.reason or 'reason unknown'}; the "
        f"gap between the compiled graphs (eager ops and Python) {took}{more}",
        worst.hint or "rewrite that line so dynamo can trace it, or move it out of the "
        "compiled function", share)


def recompile_in_loop(result: ProfileResult) -> Finding | None:
    """Compiles inside the profiled iterations: a recompile (name the failed guard) or a
    first compile the warm-up did not reach."""
    late = [c for c in result.compiles if c.phase == PROFILED]
    if not late:
        return None
    seconds = sum(c.duration_s for c in late)
    recompiles = [c for c in late if c.recompile_reason]
    share = of_wall(result, seconds * 1e6 / max(result.iters, 1))
    if not recompiles:
        return Finding(
            "recompile", "torch.compile compiled inside the measured loop",
            f"{counted(len(late), 'compile')} ({format_fixed(seconds, 's', 2)}) ran during the "
            "profiled iterations: the warm-up did not reach that code",
            "raise --warmup so every compile happens before the profiled iterations", share)
    first = recompiles[0]
    return Finding(
        "recompile", "torch.compile recompiled inside the measured loop",
        f"{counted(len(recompiles), 'recompile')} during the profiled iterations "
        f"({format_fixed(seconds, 's', 2)} of compiling in the measurement); the guard that "
        f"failed: {first.recompile_reason.splitlines()[0]} (compile {first.compile_id} of "
        f"{first.function})",
        "keep shapes and Python values the guard checks stable between calls, or mark the "
        "changing dimension dynamic (torch._dynamo.mark_dynamic, or "
        "torch.compile(dynamic=True))", share)


def mostly_eager(result: ProfileResult) -> Finding | None:
    """Compiled code ran, but its regions are under ``EAGER_SHARE`` of the iteration."""
    outer = [r for r in result.compiled_regions if r.outermost]
    if not outer or wall_us(result) <= 0:
        return None
    n = max(result.iters, 1)
    if result.profiles_device and result.self_device_time_total > 0:
        # GPU work runs after its launch: compare the GPU work compiled regions launched.
        mine = sum(r.device_time_total for r in outer) / n
        total = result.self_device_time_total / n
        share = min(1.0, mine / total)
        what = "GPU work launched from compiled regions"
    else:
        mine, total = sum(r.cpu_time_total for r in outer) / n, wall_us(result)
        share = of_wall(result, mine)
        what = "compiled regions"
    if share >= EAGER_SHARE:
        return None
    return Finding(
        "mostly_eager", "Most of the cell still runs eager",
        f"{what} take {format_us(mine)} of the mean {format_us(total)} iteration "
        f"({percent(share)}); the rest runs outside torch.compile",
        "compile the function that does the work (the model's forward or the whole step), "
        "not a small part of it", 1.0 - share)


RULES = [graph_break_gap, recompile_in_loop, mostly_eager]
