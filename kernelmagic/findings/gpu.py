"""The GPU waiting: idle with its CPU cause (``gpu_idle``), launch-bound, host-device
syncs, and float32 matmuls that skip Tensor Cores.

``gpu_idle`` and ``launch_bound`` count only the idle time set-up does not explain
(``findings/startup.py``); ``gpu_idle`` names what the CPU's events point to
(``cpu_causes``): Python between ops, work inside ops, launches, syncs, data loading.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelmagic.core.machine import AMPERE, GPU, PRE_VOLTA
from kernelmagic.core.op_names import (
    DATA_LOADER,
    LAUNCH_CALLS,
    MATMUL_OPS,
    SYNC_OPS,
    WAIT_CALLS,
    is_fp32_gemm,
    is_runtime_call,
)
from kernelmagic.core.rows import DATA_LOADING
from kernelmagic.core.units import counted, format_us, percent
from kernelmagic.findings.base import (
    NAMED,
    Finding,
    of_wall,
    profiler_note,
    runs_on_cpu,
    wall_us,
)
from kernelmagic.findings.device import TF32, precision
from kernelmagic.findings.startup import setup, unexplained_idle
from kernelmagic.results.advice import record
from kernelmagic.results.result import ProfileResult

GPU_IDLE_SHARE = 0.5          # GPU idle (beyond set-up) above this fraction of the iteration
CAUSE_SHARE = 0.01            # CPU causes of GPU idle below this fraction are not named
LAUNCH_BOUND_BUSY = 0.5       # GPU busy below this fraction of wall time
LAUNCH_BOUND_CPU_RATIO = 2.0  # self CPU time at least this many times self device time
SHORT_KERNEL_US = 10.0        # median kernel time below this is "short"
MATMUL_SHARE = 0.3            # matmul ops' share of device time worth a precision hint


@dataclass(frozen=True)
class Cause:
    """One thing the CPU spends an iteration on while the GPU idles (µs per iteration)."""

    kind: str  # "between", "inside", "launch", "sync", "data"
    us: float
    detail: str


_CAUSE_TITLE = {
    "between": "Python between ops", "inside": "CPU work inside ops",
    "launch": "kernel launch overhead", "sync": "host-device synchronisation",
    "data": "data loading",
}
CAUSE_FIX = {
    "between": "find the Python between ops ({python}) and take "
               "it out of the step (logging, .tolist()/printing, data preparation), or "
               "compile the step (torch.compile)",
    "inside": "cut the CPU cost per op: fewer, larger ops (torch.compile fuses them), CUDA "
              "graphs (torch.compile(mode=\"reduce-overhead\")) to replay the step without the "
              "CPU, larger batches",
    "launch": "launch fewer kernels: CUDA graphs (torch.compile(mode=\"reduce-overhead\")), "
              "fused kernels (torch.compile), larger batches",
    "sync": "keep values on the GPU: no .item(), .cpu(), .tolist(), printing or data-dependent "
            "shapes (nonzero, boolean masks) in the step; read once at the end",
    "data": "feed the GPU faster: DataLoader(num_workers=..., pin_memory=True, "
            "persistent_workers=True) and .to(device, non_blocking=True)",
}


def _median_kernel_us(result: ProfileResult) -> float | None:
    """Median duration over kernel launches (each name counted by its launches, at its mean)."""
    launches = sorted((k.device_time, k.count) for k in result.kernels if k.count)
    total = sum(n for _, n in launches)
    if not total:
        return None
    seen = 0
    for mean, n in launches:  # noqa: B007 (the loop stops at the median launch)
        seen += n
        if seen * 2 >= total:
            break
    return mean


def between_detail(result: ProfileResult) -> str:
    """What the time outside any op was: the lines of the ``python`` view that took most
    of it (``--python``, or a trace's ``python_function`` frames; not those waiting for a
    DataLoader, the ``data`` cause's), else the generic words."""
    lines = [r for r in result.python_lines if r.self_us > 0 and not r.cause][:NAMED]
    if not lines:
        return "(Python between ops, waits)"
    return "(most at " + ", ".join(f"{r.location} `{r.code or r.function}` "
                                   f"{format_us(r.self_us)}" for r in lines) + ")"


def _idle_cause(result: ProfileResult) -> str:
    """The ``gpu idle`` view's biggest cause inside the iteration (edges left out), with
    the Python line behind it when one is known, as a clause of the evidence; "" when the
    result has no such view."""
    inside = [r for r in result.gpu_idle if r.cause != "iteration edge"]
    if not inside:
        return ""
    top = inside[0]
    line = f" at {top.location}" + (f" `{top.code}`" if top.code else "") if top.location else ""
    return (f"; the GPU's biggest idle cause: {top.cause} ({top.detail}{line}) "
            f"{format_us(top.idle_us)}")


def cpu_causes(result: ProfileResult) -> list[Cause]:
    """What the CPU's events point to, most time first, µs per iteration.

    ``between``: the iteration minus the self CPU time of every row (no op ran: Python
    between ops, waits); ``launch``: self CPU time of ``LAUNCH_CALLS``; ``sync``: of
    ``SYNC_OPS`` and ``WAIT_CALLS``; ``data``: ranges and ops named ``DATA_LOADER``...,
    else the ``python`` view's ``data loading`` rows (taken out of ``between``, then
    ``inside``); ``inside``: the rest of the ops' self
    CPU time. Set-up calls (``setup``) are none of these.
    """
    n, wall = result.iters, wall_us(result)
    rows = [r for r in result.op_totals if r.count and runs_on_cpu(r)]
    skip = {id(r) for r in setup(result).calls}
    cpu = sum(r.self_cpu_time_total for r in rows if id(r) not in skip) / n
    launches = [r for r in rows if r.key in LAUNCH_CALLS and id(r) not in skip]
    syncs = [r for r in rows if r.key in SYNC_OPS or r.key in WAIT_CALLS]
    launch = sum(r.self_cpu_time_total for r in launches) / n
    sync = sum(r.self_cpu_time_total for r in syncs) / n
    loaders = {g.key: g.cpu_time_total for g in result.ranges if g.key.startswith(DATA_LOADER)}
    loaders.update({r.key: r.cpu_time_total for r in rows if r.key.startswith(DATA_LOADER)})
    data = sum(loaders.values()) / n
    if not loaders:  # no DataLoader range: the Python lines that waited for one, if any
        data = sum(r.self_us for r in result.python_lines if r.cause == DATA_LOADING)
    between = max(0.0, wall - cpu)
    inside = max(0.0, cpu - launch - sync)
    inside -= max(0.0, data - between)
    between = max(0.0, between - data)
    busy = sorted((r for r in rows if r.key not in LAUNCH_CALLS and r.key not in SYNC_OPS
                   and r.key not in WAIT_CALLS and id(r) not in skip
                   and not r.key.startswith(DATA_LOADER)),
                  key=lambda r: -r.self_cpu_time_total)[:NAMED]
    tops = ", ".join(f"{r.key} {format_us(r.self_cpu_time_total / n)}" for r in busy)
    calls = sum(r.count for r in rows if not is_runtime_call(r.key)) / n
    kernels = sum(k.count for k in result.kernels) / n
    median = _median_kernel_us(result)
    waits = ", ".join(f"{r.key} ×{r.count / n:g}" for r in
                      sorted(syncs, key=lambda r: -r.count)[:NAMED])
    causes = [
        Cause("between", between, "outside any op " + between_detail(result)),
        Cause("inside", max(0.0, inside),
              f"inside ops ({counted(calls, 'op call')}; most: {tops})"),
        Cause("launch", launch, f"launching {counted(kernels, 'kernel')}"
              + (f" (median {format_us(median)})" if median is not None else "")),
        Cause("sync", sync, f"in host-device syncs ({waits})"),
        Cause("data", data, "in the DataLoader"),
    ]
    return sorted((c for c in causes if wall > 0 and c.us / wall >= CAUSE_SHARE),
                  key=lambda c: -c.us)


def gpu_idle(result: ProfileResult) -> Finding | None:
    """The GPU idle more than ``GPU_IDLE_SHARE`` of the iteration, beyond set-up."""
    parts = result.breakdown
    wall = wall_us(result)
    if parts is None or parts.device == "cpu" or wall <= 0:
        return None
    idle = unexplained_idle(result)
    share = idle / wall
    if share <= GPU_IDLE_SHARE:
        return None
    causes = cpu_causes(result)
    lead = causes[0].kind if causes else "between"
    listed = "; ".join(f"{format_us(c.us)} {c.detail}" for c in causes)
    setup_note = (f" ({format_us(parts.idle - idle)} of it set-up)"
                  if parts.idle - idle >= CAUSE_SHARE * wall else "")
    return Finding(
        "gpu_idle", f"The GPU is idle {percent(parts.share('idle'))} of the iteration "
                    f"(CPU-bound: {_CAUSE_TITLE[lead]})",
        f"no GPU work runs for {format_us(parts.idle)} of each {format_us(wall)} iteration"
        f"{setup_note}; per iteration the CPU spends " + (listed or "no time in ops")
        + _idle_cause(result),
        CAUSE_FIX[lead].format(python=where_lines_are(result)), share,
        rows=cause_rows(result, lead), side="cpu")


def where_lines_are(result: ProfileResult) -> str:
    """Where the user finds their Python lines: the python view when the run or trace
    named some, else how to record them."""
    if result.python_lines:
        return "the python view lists your lines"
    return f"{record(result, '--python')} names your lines; or py-spy"


def cause_rows(result: ProfileResult, kind: str) -> tuple[str, ...]:
    """The rows whose CPU time a ``Cause`` of ``kind`` counts (none for "between": no row
    owns the time between ops)."""
    skip = {id(r) for r in setup(result).calls}
    rows = [r for r in result.op_totals if r.count and id(r) not in skip]
    if kind == "launch":
        return tuple(r.key for r in rows if r.key in LAUNCH_CALLS)
    if kind == "sync":
        return tuple(r.key for r in rows if r.key in SYNC_OPS or r.key in WAIT_CALLS)
    if kind == "data":
        return tuple(r.key for r in rows if r.key.startswith(DATA_LOADER))
    if kind == "inside":
        return tuple(r.key for r in rows if r.key not in LAUNCH_CALLS and r.key not in SYNC_OPS
                     and r.key not in WAIT_CALLS and not r.key.startswith(DATA_LOADER)
                     and not is_runtime_call(r.key))
    return ()


def launch_bound(result: ProfileResult) -> Finding | None:
    """GPU busy under ``LAUNCH_BOUND_BUSY`` beyond set-up, CPU-heavy, short kernels."""
    if not result.profiles_device or not result.timings:
        return None
    device = result.self_device_time_total / result.iters
    cpu = result.self_cpu_time_total / result.iters
    parts = result.breakdown
    if parts is not None and parts.wall > 0:  # the union of GPU work: never above 100%
        busy = 1.0 - parts.share("idle")
        idle = unexplained_idle(result)  # set-up is startup_in_window's
        waiting = idle / parts.wall
    else:  # (a profile saved before the breakdown existed)
        wall = result.stats.mean * 1e6
        busy = min(1.0, device / wall) if wall > 0 else 0.0
        idle, waiting = (1.0 - busy) * wall, 1.0 - busy
    median_kernel = _median_kernel_us(result)
    if waiting <= 1.0 - LAUNCH_BOUND_BUSY or cpu < LAUNCH_BOUND_CPU_RATIO * device:
        return None
    if median_kernel is None or median_kernel >= SHORT_KERNEL_US:
        return None
    launches = sum(k.count for k in result.kernels) / result.iters
    return Finding(
        "launch_bound", "The GPU is waiting for the CPU (launch-bound)",
        f"the GPU is busy {percent(busy)} of each iteration; {format_us(cpu)} of CPU work "
        f"launches {counted(launches, 'kernel')} with a median of {format_us(median_kernel)} each"
        + profiler_note(result),
        "launch fewer, bigger kernels: torch.compile(mode=\"reduce-overhead\") (CUDA graphs), "
        "or larger batches", of_wall(result, min(idle, cpu)),
        rows=cause_rows(result, "launch"), side="cpu", change="launching fewer kernels",
        variants=("cudagraphs", "compile"))


def sync_points(result: ProfileResult) -> Finding | None:
    if not result.profiles_device:
        return None  # on the CPU there is no device to wait for
    hits = [r for r in result.op_totals if r.key in SYNC_OPS and r.count]
    dtoh = [k for k in result.kernels if "dtoh" in k.key.lower().replace(" ", "")]
    if not hits and not dtoh:
        return None
    parts = [f"{r.key} ×{r.count / result.iters:g} ({SYNC_OPS[r.key]})" for r in hits]
    parts += [f"{k.key} ×{k.count / result.iters:g}" for k in dtoh]
    waited = sum(r.self_cpu_time_total for r in hits) / result.iters
    return Finding(
        "sync_points", "Host-device synchronisation inside the loop",
        "per iteration: " + ", ".join(parts),
        f"keep values on the {result.device_word} (no .item(), .cpu(), .tolist() or printing "
        "tensors in the loop); accumulate on the device and read once at the end",
        of_wall(result, waited),
        rows=tuple(r.key for r in hits), side="cpu", change="removing these syncs")


def fp32_matmul(result: ProfileResult) -> Finding | None:
    """Matmuls hold ``MATMUL_SHARE`` of device time in float32 GEMM kernels while the
    float32 matmul precision is "highest": TF32 or bfloat16 on Ampere and later, float16 on
    Volta and Turing (no TF32 there); silent on a GPU without Tensor Cores."""
    if not result.profiles_device or result.matmul_precision != "highest":
        return None
    total = result.self_device_time_total
    matmul = sum(r.self_device_time_total for r in result.op_totals if r.key in MATMUL_OPS)
    share = matmul / total if total > 0 else 0.0
    fp32 = [k for k in result.kernels
            if is_fp32_gemm(k.key)]
    if share < MATMUL_SHARE or not fp32:
        return None
    info = result.device_info
    family = info.family if info is not None else GPU
    if family == PRE_VOLTA:  # no Tensor Cores to use
        return None
    p = precision(result)
    if family == AMPERE:
        hint = f"{TF32}, or {p.call}"
    elif family == GPU:
        hint = f"{TF32} on Ampere or later, or {p.call}"
    else:
        hint = f"{p.call} ({p.note})" if p.note else p.call
    return Finding(
        "fp32_matmul", "Float32 matmuls are not using Tensor Cores",
        f"matmuls take {percent(share)} of device time in float32 kernels such as "
        f"{fp32[0].key} "
        "while torch.get_float32_matmul_precision() is 'highest'",
        hint, of_wall(result, matmul / result.iters),
        rows=tuple(r.key for r in result.op_totals if r.key in MATMUL_OPS), side="device",
        change="making the matmuls faster",
        variants=(("tf32",) if family in (AMPERE, GPU) else ()) + p.variants,
        against=p.against)
