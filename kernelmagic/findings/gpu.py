"""The GPU waiting: idle with its cause (``gpu_idle``), launch-bound, host-device syncs,
and float32 matmuls that skip Tensor Cores.

``gpu_idle`` and ``launch_bound`` count only the idle time set-up does not explain
(``findings/startup.py``); ``gpu_idle`` names why the GPU waits by the ``gpu_idle``
view's causes (``views/gpu_idle.py``: the one taxonomy, read from ``result.gpu_idle``),
a launch gap told apart by its detail: no op running (Python between ops) or CPU work
inside an op.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable
from itertools import accumulate

from kernelmagic.core.machine import AMPERE, GPU, PRE_VOLTA
from kernelmagic.core.op_names import (
    DATA_LOADER,
    LAUNCH_CALLS,
    MATMUL_OPS,
    SYNC_OPS,
    is_copy,
    is_fp32_gemm,
    is_runtime_call,
)
from kernelmagic.core.rows import DATA_LOADING, GpuIdleRow
from kernelmagic.core.units import counted, format_us, percent
from kernelmagic.findings.base import (
    NAMED,
    Finding,
    of_wall,
    profiler_note,
    wall_us,
)
from kernelmagic.findings.device import TF32, precision
from kernelmagic.findings.startup import setup, unexplained_idle
from kernelmagic.results.result import ProfileResult, record
from kernelmagic.views.gpu_idle import BETWEEN_OPS, EDGE, HTOD_COPY, LAUNCH_GAP, SYNC

GPU_IDLE_SHARE = 0.5          # GPU idle (beyond set-up) above this fraction of the iteration
CAUSE_SHARE = 0.01            # idle causes below this fraction of the iteration are not named
LAUNCH_BOUND_BUSY = 0.5       # GPU busy below this fraction of wall time
LAUNCH_BOUND_CPU_RATIO = 2.0  # self CPU time at least this many times self device time
SHORT_KERNEL_US = 10.0        # median kernel time below this is "short"
MATMUL_SHARE = 0.3            # matmul ops' share of device time worth a precision hint

#: How each cause of the ``gpu_idle`` view reads in the finding, a launch gap by whether
#: an op ran (``LAUNCH_GAP``: CPU work inside ops) or none did (``BETWEEN_OPS``).
CAUSE_TITLE = {
    BETWEEN_OPS: "Python between ops", LAUNCH_GAP: "CPU work inside ops",
    SYNC: "host-device synchronisation", DATA_LOADING: "data loading",
    HTOD_COPY: "host-to-device copies", EDGE: "the iteration's start or end",
}
#: What to try, per cause (``{python}``: where the user finds their Python lines).
CAUSE_FIX = {
    BETWEEN_OPS: "find the Python between ops ({python}) and take "
                 "it out of the step (logging, .tolist()/printing, data preparation), or "
                 "compile the step (torch.compile)",
    LAUNCH_GAP: "cut the CPU cost per op: fewer, larger ops (torch.compile fuses them), CUDA "
                "graphs (torch.compile(mode=\"reduce-overhead\")) to replay the step without "
                "the CPU, larger batches",
    SYNC: "keep values on the GPU: no .item(), .cpu(), .tolist(), printing or data-dependent "
          "shapes (nonzero, boolean masks) in the step; read once at the end",
    DATA_LOADING: "feed the GPU faster: DataLoader(num_workers=..., pin_memory=True, "
                  "persistent_workers=True) and .to(device, non_blocking=True)",
    HTOD_COPY: "copy ahead of use: pinned host memory (pin_memory=True) and .to(device, "
               "non_blocking=True), or keep the tensors on the GPU",
    EDGE: "find what the CPU runs before the step's first GPU work and after its last "
          "({python}; the timeline) and take it out of the step or overlap it with GPU work",
}


def _median_kernel_us(result: ProfileResult) -> float | None:
    """Median duration over kernel launches (each name counted by its launches, at its
    mean); copies and fills are no kernels."""
    launches = sorted((k.device_time, k.count) for k in result.kernels
                      if k.count and not is_copy(k.key))
    if not launches:
        return None
    seen = list(accumulate(n for _, n in launches))  # the launches up to each
    return launches[bisect_left(seen, seen[-1] / 2)][0]  # the first at or past half


def idle_reason(row: GpuIdleRow) -> str:
    """The key of ``CAUSE_TITLE`` a ``gpu_idle`` row counts under: its cause, a launch gap
    with no op running as ``BETWEEN_OPS``."""
    return BETWEEN_OPS if row.cause == LAUNCH_GAP and row.detail == BETWEEN_OPS else row.cause


def idle_causes(result: ProfileResult) -> list[tuple[str, float, list[GpuIdleRow]]]:
    """The ``gpu_idle`` view's rows by ``idle_reason``: (reason, µs per iteration, rows),
    most time first, the iteration's start or end last (the first launch on its way, the
    last work draining: the causes inside the iteration say more); those under
    ``CAUSE_SHARE`` of the iteration left out."""
    wall = wall_us(result)
    groups: dict[str, list[GpuIdleRow]] = defaultdict(list)
    for row in result.gpu_idle:
        groups[idle_reason(row)].append(row)
    found = [(reason, sum(r.idle_us for r in rows), rows) for reason, rows in groups.items()]
    return sorted((c for c in found if wall > 0 and c[1] / wall >= CAUSE_SHARE),
                  key=lambda c: (c[0] == EDGE, -c[1]))


def _named(rows: list[GpuIdleRow]) -> str:
    """A cause's biggest parts: the op (or call) and the user's line behind it, e.g.
    `` (aten::item at train.py:20 `loss.item()` 200 µs, ...)``; "" when none is named."""
    parts: dict[str, float] = defaultdict(float)
    for r in rows:
        op = "" if r.detail in (BETWEEN_OPS, DATA_LOADER) else r.detail
        where = (f"at {r.location}" + (f" `{r.code}`" if r.code else "")) if r.location else ""
        label = " ".join(p for p in (op, where) if p)
        if label:
            parts[label] += r.idle_us
    top = sorted(parts.items(), key=lambda kv: -kv[1])[:NAMED]
    return (" (" + ", ".join(f"{k} {format_us(us)}" for k, us in top) + ")") if top else ""


def _cause_rows(result: ProfileResult, reason: str,
                rows: list[GpuIdleRow]) -> tuple[str, ...]:
    """The op rows whose CPU time the fix of a cause takes out, for the model to price
    it: for CPU work inside ops, every op's (the fix makes each op cheaper on the CPU;
    not the syncs, the DataLoader's or set-up calls, other causes' and findings'); for a
    sync, the sync ops it names; the DataLoader's; none for the time between ops, the
    iteration's start or end and copies (no op row owns them)."""
    if reason == DATA_LOADING:
        return tuple(r.key for r in result.op_totals if r.key.startswith(DATA_LOADER))
    if reason == SYNC:
        named = {r.detail for r in rows}
        return tuple(r.key for r in result.op_totals if r.key in named)
    if reason != LAUNCH_GAP:
        return ()
    return _rows_beyond_setup(result, lambda key: not is_runtime_call(key)
                              and key not in SYNC_OPS and not key.startswith(DATA_LOADER))


def gpu_idle(result: ProfileResult) -> Finding | None:
    """The GPU idle more than ``GPU_IDLE_SHARE`` of the iteration, beyond set-up, with
    the ``gpu_idle`` view's causes."""
    parts = result.breakdown
    wall = wall_us(result)
    if parts is None or parts.device == "cpu" or wall <= 0:
        return None
    idle = unexplained_idle(result)
    share = idle / wall
    if share <= GPU_IDLE_SHARE:
        return None
    causes = idle_causes(result)
    listed = "; ".join(f"{CAUSE_TITLE.get(reason, reason)} {format_us(us)}{_named(rows)}"
                       for reason, us, rows in causes)
    setup_note = (f"; {format_us(parts.idle - idle)} of it set-up"
                  if parts.idle - idle >= CAUSE_SHARE * wall else "")
    head = (f"The GPU is idle {percent(parts.share('idle'))} of the iteration (CPU-bound"
            + (f": {CAUSE_TITLE.get(causes[0][0], causes[0][0])})" if causes else ")"))
    evidence = (f"no GPU work runs for {format_us(parts.idle)} per iteration (mean"
                f"{setup_note})" + (f"; by cause: {listed}" if listed else ""))
    if not causes:  # a profile saved before the gpu idle view
        return Finding("gpu_idle", head, evidence, "profile it again: the gpu idle view "
                       "says why the GPU waits", share, side="cpu")
    lead, _, rows = causes[0]
    return Finding("gpu_idle", head, evidence,
                   CAUSE_FIX.get(lead, CAUSE_FIX[BETWEEN_OPS]).format(
                       python=where_lines_are(result)), share,
                   rows=_cause_rows(result, lead, rows), side="cpu")


def where_lines_are(result: ProfileResult) -> str:
    """Where the user finds their Python lines: the python view when the run or trace
    named some, else how to record them."""
    if result.python_lines:
        return "the python view lists your lines"
    return f"{record(result, '--python')} names your lines; or py-spy"


def _rows_beyond_setup(result: ProfileResult, wanted: Callable[[str], bool]) -> tuple[str, ...]:
    """The keys of the op rows that ran and ``wanted`` takes, set-up calls left out
    (``startup_in_window``'s)."""
    skip = {id(r) for r in setup(result).calls}
    return tuple(r.key for r in result.op_totals
                 if r.count and id(r) not in skip and wanted(r.key))


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
    launches = sum(k.count for k in result.kernels if not is_copy(k.key)) / result.iters
    copies = sum(k.count for k in result.kernels if is_copy(k.key)) / result.iters
    also = f" (and {counted(copies, 'copy', 'copies')})" if copies else ""
    return Finding(
        "launch_bound", "The GPU is waiting for the CPU (launch-bound)",
        f"the GPU is busy {percent(busy)} of each iteration; {format_us(cpu)} of CPU work "
        f"launches {counted(launches, 'kernel')}{also} with a median of "
        f"{format_us(median_kernel)} each"
        + profiler_note(result),
        "launch fewer, bigger kernels: torch.compile(mode=\"reduce-overhead\") (CUDA graphs), "
        "or larger batches", of_wall(result, min(idle, cpu)),
        rows=_rows_beyond_setup(result, LAUNCH_CALLS.__contains__), side="cpu",
        change="launching fewer kernels", variants=("cudagraphs", "compile"))


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
    fp32 = [k for k in result.kernels if is_fp32_gemm(k.key)]
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
