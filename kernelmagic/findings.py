"""Plain-language findings: what the profile shows, the numbers behind it, what to try.

Each rule is a pure function of a ``ProfileResult`` that returns a ``Finding`` or None.
A finding carries ``share``, the fraction of the iteration it explains; ``find`` lists
the findings by it, largest first (ties: the order of ``RULES``), so a report leads with
the biggest problem it can see. Thresholds are module constants so the README and the
tests can name them.

The headline rules, and how each keeps the others honest:

- ``startup_in_window``: CUDA start-up or first-call set-up inside the profiled window
  (``setup``: set-up runtime calls, kernel launches far slower than a launch, a first
  iteration far above the others). The other rules do not blame that time on anything
  else: ``gpu_idle`` and ``launch_bound`` count only the idle time set-up does not
  explain, and ``dominant_op`` is silent (the window is not steady state).
- ``gpu_idle``: the GPU idle most of the iteration, with what the CPU events point to
  (``cpu_causes``): Python between ops, work inside ops, launches, syncs, data loading.
- ``communication_bound``: communication not hidden by compute.
- ``train_mode_under_no_grad``: dropout (or CUDA batch norm) in training mode in a
  profile with no backward pass; ``dominant_op`` does not point at its ops.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from kernelmagic.advice import more_iterations, record, warm_up
from kernelmagic.result import OpRow, ProfileResult
from kernelmagic.timing import format_seconds, format_us
from kernelmagic.views.breakdown import is_comm_op

DOMINANT_SHARE = 0.5          # one op's share of self time
LAUNCH_BOUND_BUSY = 0.5       # GPU busy below this fraction of wall time
LAUNCH_BOUND_CPU_RATIO = 2.0  # self CPU time at least this many times self device time
SHORT_KERNEL_US = 10.0        # median kernel time below this is "short"
SLOW_WARMUP_RATIO = 5.0       # first warm-up run vs steady median
NOISY_SPREAD = 0.15           # IQR / median above this is noisy
MATMUL_SHARE = 0.3            # matmul ops' share of device time worth a precision hint
ELEMENTWISE_CALLS = 30        # elementwise calls per iteration
ELEMENTWISE_SHARE = 0.25      # their share of self time
ELEMENTWISE_AVG_US = 50.0     # mean self time per call below this is "small"
COMM_BOUND_SHARE = 0.2        # exposed communication above this fraction of the iteration
GPU_IDLE_SHARE = 0.5          # GPU idle (beyond set-up) above this fraction of the iteration
STARTUP_SHARE = 0.2           # set-up inside the window above this fraction of the iteration
SETUP_LAUNCH_US = 100.0       # a kernel launch averaging this long is a first launch
SETUP_CALL_US = 1000.0        # any other runtime call (not a sync or copy) averaging this long
SLOW_FIRST_ITER_RATIO = 2.0   # first iteration vs the median of the others
TRAIN_MODE_SHARE = 0.1        # training-mode dropout/batch norm above this fraction
CAUSE_SHARE = 0.01            # CPU causes of GPU idle below this fraction are not named
NAMED = 3                     # ops or calls named in a finding's evidence

SYNC_OPS = {
    "aten::item": "reads a value to Python",
    "aten::_local_scalar_dense": "copies a scalar to the host",
    "aten::nonzero": "needs the result size on the host",
    "cudaStreamSynchronize": "waits for a stream",
    "cudaDeviceSynchronize": "waits for the device",
    "cudaMemcpy": "synchronous copy",
}
#: Waits the CPU makes for the GPU, beyond ``SYNC_OPS`` (time only, for ``gpu_idle``).
WAIT_CALLS = frozenset({"cudaEventSynchronize", "hipDeviceSynchronize", "hipStreamSynchronize",
                        "hipEventSynchronize", "hipMemcpy"})
LAUNCH_CALLS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cuLaunchKernel",
    "cuLaunchKernelEx", "cudaGraphLaunch", "hipLaunchKernel", "hipExtLaunchKernel",
    "hipModuleLaunchKernel", "hipExtModuleLaunchKernel", "hipGraphLaunch",
})
#: Runtime calls that belong to start-up or to the caching allocator's growth.
SETUP_CALLS = frozenset({
    "cuInit", "cuDevicePrimaryCtxRetain", "cuCtxCreate", "cudaGetDeviceCount", "cudaSetDevice",
    "cudaGetDeviceProperties", "cudaGetDeviceProperties_v2", "cudaDeviceGetStreamPriorityRange",
    "cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority",
    "cudaFree", "cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost",
    "cuModuleLoadData", "cuModuleLoadDataEx", "cuLibraryLoadData",
    "hipInit", "hipGetDeviceCount", "hipSetDevice", "hipGetDeviceProperties",
    "hipDeviceGetStreamPriorityRange", "hipStreamCreate", "hipStreamCreateWithFlags",
    "hipStreamCreateWithPriority", "hipFree", "hipMalloc", "hipHostMalloc", "hipHostFree",
    "hipModuleLoadData", "hipModuleLoadDataEx",
})
_ALLOCATOR = frozenset({"cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "hipMalloc",
                        "hipHostMalloc"})
_RUNTIME = re.compile(r"^(cuda|cu|hip)[A-Z]")
_NOT_SETUP = re.compile(r"Synchronize|Memcpy|Memset|Launch|Event|Wait|Query|Capturing")
DATA_LOADER = "enumerate(DataLoader)"
DROPOUT_OPS = ("aten::dropout", "aten::feature_dropout", "aten::alpha_dropout",
               "aten::feature_alpha_dropout")
#: Ops that run only when dropout trains: the random mask (CPU) or the fused kernel (GPU).
DROPOUT_TRAINING = ("aten::bernoulli_", "aten::native_dropout", "aten::_fused_dropout")
BATCH_NORM_TRAINING = re.compile(r"bn_fw_tr|BatchNormFwdTrain|batch_norm_collect_statistics")
MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
              "aten::linear", "aten::_scaled_mm", "aten::addbmm"}
ELEMENTWISE_OPS = {
    "aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::mul", "aten::mul_",
    "aten::div", "aten::div_", "aten::relu", "aten::relu_", "aten::gelu", "aten::silu",
    "aten::sigmoid", "aten::tanh", "aten::exp", "aten::log", "aten::pow", "aten::sqrt",
    "aten::rsqrt", "aten::neg", "aten::abs", "aten::where", "aten::clamp", "aten::clamp_min",
    "aten::maximum", "aten::minimum", "aten::addcmul", "aten::addcdiv", "aten::sin",
    "aten::cos", "aten::reciprocal", "aten::fill_", "aten::masked_fill",
}
_FP32_GEMM = re.compile(r"sgemm|f32f32_f32|gemm.*fp32", re.IGNORECASE)
_LOW_PRECISION = re.compile(r"tf32|bf16|f16|half|fp8|e4m3|e5m2", re.IGNORECASE)


@dataclass(frozen=True)
class Finding:
    """One observation: a title, the numbers that triggered it, and one suggestion.

    ``share`` is the fraction of the iteration the finding explains (0 when it explains
    none of it, e.g. a noisy measurement); ``find`` orders the findings by it.
    """

    rule: str
    title: str
    evidence: str
    suggestion: str
    share: float = field(default=0.0, compare=False)

    def __str__(self) -> str:
        return f"{self.title}: {self.evidence}. Try: {self.suggestion}"


def wall_us(result: ProfileResult) -> float:
    """The iteration's length, µs: the breakdown's, else the timings' mean (0 without)."""
    parts = result.breakdown
    if parts is not None and parts.wall > 0:
        return parts.wall
    return result.stats.mean * 1e6 if result.timings else 0.0


def _of_wall(result: ProfileResult, us_per_iter: float) -> float:
    wall = wall_us(result)
    return min(1.0, max(0.0, us_per_iter / wall)) if wall > 0 else 0.0


def _per_iter_self(result: ProfileResult, row: OpRow) -> float:
    attr = "self_device_time_total" if result.profiles_device else "self_cpu_time_total"
    return getattr(row, attr) / result.iters


# --- set-up inside the window -----------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """Set-up inside the profiled window, µs per iteration (see ``setup``)."""

    calls: list[OpRow]        # set-up runtime calls and first launches, most time first
    calls_us: float           # their self CPU time per iteration
    first_us: float = 0.0     # the first iteration's excess over the others' median, spread
    first: float = 0.0        # the first iteration, s
    others: float = 0.0       # the median of the others, s

    @property
    def us(self) -> float:
        """Per iteration: the larger of the two estimates (the calls run in that iteration)."""
        return max(self.calls_us, self.first_us)


def _is_runtime(key: str) -> bool:
    return bool(_RUNTIME.match(key))


def setup(result: ProfileResult) -> Setup:
    """The set-up a profile's window holds.

    Runtime calls named in ``SETUP_CALLS`` (context creation, streams, the caching
    allocator), kernel launches averaging ``SETUP_LAUNCH_US`` or more (a launch takes
    µs; the first launch of a kernel loads its module) unless the GPU was busy longer
    than they took (then they wait on a full launch queue), and any other runtime call that
    is not a sync, copy, launch or event averaging ``SETUP_CALL_US`` or more; and, with at
    least three iterations and no warm-up run before them (a trace's steps), a first
    iteration above ``SLOW_FIRST_ITER_RATIO`` × the median of the others.
    """
    parts = result.breakdown
    idle = parts.idle * result.iters if parts is not None and parts.device != "cpu" else None
    calls = []
    for r in result.op_totals:
        if r.kind != "op" or not r.count or not _is_runtime(r.key):
            continue
        mean = r.self_cpu_time_total / r.count
        if r.key in LAUNCH_CALLS:
            if mean >= SETUP_LAUNCH_US and (idle is None or r.self_cpu_time_total <= idle):
                calls.append(r)
        elif r.key in SETUP_CALLS or (mean >= SETUP_CALL_US and not _NOT_SETUP.search(r.key)):
            calls.append(r)
    calls.sort(key=lambda r: -r.self_cpu_time_total)
    found = Setup(calls, sum(r.self_cpu_time_total for r in calls) / result.iters)
    times = result.timings
    if len(times) >= 3 and not result.warmup:
        others = statistics.median(times[1:])
        if others > 0 and times[0] > SLOW_FIRST_ITER_RATIO * others:
            excess = (times[0] - others) * 1e6 / len(times)
            found = Setup(calls, found.calls_us, excess, times[0], others)
    return found


def _setup_call(result: ProfileResult, r: OpRow, first_context: bool) -> str:
    """A set-up call with its time per iteration, calls, and what it does in a window."""
    said = f"×{r.count / result.iters:g}"
    if r.key in LAUNCH_CALLS:
        said += (f", {format_us(r.self_cpu_time_total / r.count)} each where a launch takes "
                 "µs: a first launch loads its kernel's module")
    elif r.key in _ALLOCATOR:
        said += ": the caching allocator growing"
    elif first_context:
        said += ": the first runtime call creates the context"
    return f"{r.key} {format_us(r.self_cpu_time_total / result.iters)} ({said})"


def startup_in_window(result: ProfileResult) -> Finding | None:
    """CUDA start-up or first-call set-up holding ``STARTUP_SHARE`` of the iteration."""
    wall = wall_us(result)
    found = setup(result)
    share = found.us / wall if wall > 0 else 0.0
    if share < STARTUP_SHARE:
        return None
    said = []
    if found.calls_us / wall >= STARTUP_SHARE / 2:
        context = next((r for r in found.calls
                        if r.key not in LAUNCH_CALLS and r.key not in _ALLOCATOR), None)
        named = ", ".join(_setup_call(result, r, r is context) for r in found.calls[:NAMED])
        said.append(f"set-up calls take {format_us(found.calls_us)} of a {format_us(wall)} "
                    f"iteration ({found.calls_us / wall:.0%}): {named}")
    if found.first_us:
        said.append(f"the first iteration took {format_seconds(found.first)} against "
                    f"{format_seconds(found.others)} for the others (median)")
    warm = [g for g in result.ranges if "warmup" in g.key.lower().replace("-", "")]
    if warm:
        said.append("the window holds warm-up ranges: " + ", ".join(
            f"{g.key} {format_us(g.cpu_time_total / result.iters)}" for g in warm[:2]))
    runtime = "ROCm" if any(r.key.startswith("hip") for r in found.calls) else "CUDA"
    return Finding(
        "startup_in_window", f"{runtime} start-up or first-call set-up inside the profiled "
                             "window",
        "; ".join(said),
        f"profile steady state: {warm_up(result)}; if cudaMalloc/cudaFree recur every step, "
        "keep torch.cuda.empty_cache() out of the loop and shapes steady", share)


# --- the GPU waits for the CPU ----------------------------------------------------------


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
_CAUSE_FIX = {
    "between": "find the Python between ops (py-spy, or {stack}) and take it out of the step "
               "(logging, .tolist()/printing, data preparation), or compile the step "
               "(torch.compile)",
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


def cpu_causes(result: ProfileResult) -> list[Cause]:
    """What the CPU's events point to, most time first, µs per iteration.

    ``between``: the iteration minus the self CPU time of every row (no op ran: Python
    between ops, waits); ``launch``: self CPU time of ``LAUNCH_CALLS``; ``sync``: of
    ``SYNC_OPS`` and ``WAIT_CALLS``; ``data``: ranges and ops named ``DATA_LOADER``...
    (taken out of ``between``, then ``inside``); ``inside``: the rest of the ops' self
    CPU time. Set-up calls (``setup``) are none of these.
    """
    n, wall = result.iters, wall_us(result)
    rows = [r for r in result.op_totals if r.count]
    skip = {id(r) for r in setup(result).calls}
    cpu = sum(r.self_cpu_time_total for r in rows if id(r) not in skip) / n
    launches = [r for r in rows if r.key in LAUNCH_CALLS and id(r) not in skip]
    syncs = [r for r in rows if r.key in SYNC_OPS or r.key in WAIT_CALLS]
    launch = sum(r.self_cpu_time_total for r in launches) / n
    sync = sum(r.self_cpu_time_total for r in syncs) / n
    loaders = {g.key: g.cpu_time_total for g in result.ranges if g.key.startswith(DATA_LOADER)}
    loaders.update({r.key: r.cpu_time_total for r in rows if r.key.startswith(DATA_LOADER)})
    data = sum(loaders.values()) / n
    between = max(0.0, wall - cpu)
    inside = max(0.0, cpu - launch - sync)
    inside -= max(0.0, data - between)
    between = max(0.0, between - data)
    busy = sorted((r for r in rows if r.key not in LAUNCH_CALLS and r.key not in SYNC_OPS
                   and r.key not in WAIT_CALLS and id(r) not in skip
                   and not r.key.startswith(DATA_LOADER)),
                  key=lambda r: -r.self_cpu_time_total)[:NAMED]
    tops = ", ".join(f"{r.key} {format_us(r.self_cpu_time_total / n)}" for r in busy)
    calls = sum(r.count for r in rows if not _is_runtime(r.key)) / n
    kernels = sum(k.count for k in result.kernels) / n
    median = _median_kernel_us(result)
    waits = ", ".join(f"{r.key} ×{r.count / n:g}" for r in
                      sorted(syncs, key=lambda r: -r.count)[:NAMED])
    causes = [
        Cause("between", between, "outside any op (Python between ops, waits)"),
        Cause("inside", max(0.0, inside), f"inside ops ({calls:g} op calls; most: {tops})"),
        Cause("launch", launch, f"launching {kernels:g} kernels"
              + (f" (median {format_us(median)})" if median is not None else "")),
        Cause("sync", sync, f"in host-device syncs ({waits})"),
        Cause("data", data, "in the DataLoader"),
    ]
    return sorted((c for c in causes if wall > 0 and c.us / wall >= CAUSE_SHARE),
                  key=lambda c: -c.us)


def _unexplained_idle(result: ProfileResult) -> float:
    """GPU idle µs per iteration that set-up does not explain."""
    parts = result.breakdown
    if parts is None or parts.device == "cpu":
        return 0.0
    return max(0.0, parts.idle - setup(result).us)


def gpu_idle(result: ProfileResult) -> Finding | None:
    """The GPU idle more than ``GPU_IDLE_SHARE`` of the iteration, beyond set-up."""
    parts = result.breakdown
    wall = wall_us(result)
    if parts is None or parts.device == "cpu" or wall <= 0:
        return None
    idle = _unexplained_idle(result)
    share = idle / wall
    if share <= GPU_IDLE_SHARE:
        return None
    causes = cpu_causes(result)
    lead = causes[0].kind if causes else "between"
    listed = "; ".join(f"{format_us(c.us)} {c.detail}" for c in causes)
    setup_note = (f" ({format_us(parts.idle - idle)} of it set-up)"
                  if parts.idle - idle >= CAUSE_SHARE * wall else "")
    return Finding(
        "gpu_idle", f"The GPU is idle {parts.share('idle'):.0%} of the iteration "
                    f"(CPU-bound: {_CAUSE_TITLE[lead]})",
        f"no GPU work runs for {format_us(parts.idle)} of each {format_us(wall)} iteration"
        f"{setup_note}; per iteration the CPU spends " + (listed or "no time in ops"),
        _CAUSE_FIX[lead].format(stack=record(result, "--stack")), share)


# --- training-mode layers with no backward ----------------------------------------------


def _has_backward(result: ProfileResult) -> bool:
    return (any("backward" in r.key.lower() for r in result.op_totals if r.count)
            or any("backward" in g.key.lower() for g in result.ranges))


def train_mode_under_no_grad(result: ProfileResult) -> Finding | None:
    """Dropout (or CUDA batch norm) in training mode, in a profile with no backward pass."""
    rows = {r.key: r for r in result.op_totals if r.count}
    if _has_backward(result) or wall_us(result) <= 0:
        return None
    n = result.iters
    dropout = 0.0
    if any(k in rows for k in DROPOUT_TRAINING):
        outer = [rows[k] for k in DROPOUT_OPS if k in rows] or \
            [rows[k] for k in DROPOUT_TRAINING if k in rows]
        # Inclusive time; on a GPU the larger of its kernels' and its CPU's (launches).
        dropout = max(sum(r.cpu_time_total for r in outer),
                      sum(r.device_time_total for r in outer)) / n
    norms = [k for k in result.kernels if BATCH_NORM_TRAINING.search(k.key)]
    norm = sum(k.device_time_total for k in norms) / n
    share = _of_wall(result, dropout + norm)
    if share < TRAIN_MODE_SHARE:
        return None
    said = []
    if dropout:
        mask = [f"{rows[k].key} ×{rows[k].count / n:g}" for k in DROPOUT_TRAINING if k in rows]
        said.append(f"dropout takes {format_us(dropout)} per iteration "
                    f"({_of_wall(result, dropout):.0%} of the iteration; random masks: "
                    f"{', '.join(mask)})")
        bn = rows.get("aten::native_batch_norm") or rows.get("aten::cudnn_batch_norm")
        if bn is not None and not norms:
            said.append(f"batch norm ({bn.key}, {format_us(bn.cpu_time_total / n)}) "
                        "computes batch statistics in training mode too")
    if norms:
        said.append(f"batch norm computes batch statistics ({norms[0].key[:60]}): "
                    f"{format_us(norm)} per iteration")
    return Finding(
        "train_mode_under_no_grad", "Training-mode layers in a run with no backward pass",
        "; ".join(said) + "; the profile has no backward ops, so this looks like inference "
        "with the model in training mode",
        "call model.eval() for inference (dropout becomes the identity, batch norm uses its "
        "running statistics), with torch.no_grad() or torch.inference_mode()", share)


# --- the rules that were there first ----------------------------------------------------


def dominant_op(result: ProfileResult) -> Finding | None:
    """One row with ``DOMINANT_SHARE`` of self time. Silent on a collective (that is
    ``communication_bound``), on a window that is mostly set-up (``startup_in_window``)
    and on dropout that ``train_mode_under_no_grad`` explains; when the GPU idles most of
    the iteration, the suggestion says that comes first."""
    if not result.rows or result.self_time_total <= 0:
        return None
    attr = "self_device_time_total" if result.profiles_device else "self_cpu_time_total"
    top = max(result.op_totals, key=lambda r: getattr(r, attr))
    share = result.share(top)
    if share < DOMINANT_SHARE or is_comm_op(top.key):  # communication: its own rule
        return None
    if startup_in_window(result) is not None or any(top is r for r in setup(result).calls):
        return None
    if top.key in (*DROPOUT_OPS, *DROPOUT_TRAINING) and train_mode_under_no_grad(result):
        return None
    if top.key in MATMUL_OPS:
        hint = ("make the matmuls cheaper: lower precision (torch.autocast with bfloat16), "
                "or fewer/larger ones")
    elif top.key in ("aten::copy_", "aten::to", "aten::_to_copy", "aten::contiguous"):
        hint = "find and remove the copies: .contiguous(), .to(), dtype or device changes"
    else:
        hint = f"optimise {top.key} first; the rest together is {1 - share:.0%}"
    idle = _unexplained_idle(result)
    if result.profiles_device and idle > GPU_IDLE_SHARE * wall_us(result):
        hint = (f"first keep the GPU busy (it idles {result.breakdown.share('idle'):.0%} of "
                f"the iteration); then {hint}")
    per_iter = _per_iter_self(result, top)
    return Finding(
        "dominant_op", "One op dominates",
        f"{top.key} takes {share:.0%} of self time "
        f"({format_us(per_iter)} per iteration, "
        f"{top.count / result.iters:g} calls per iteration)", hint, _of_wall(result, per_iter))


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


def launch_bound(result: ProfileResult) -> Finding | None:
    """GPU busy under ``LAUNCH_BOUND_BUSY`` beyond set-up, CPU-heavy, short kernels."""
    if not result.profiles_device or not result.timings:
        return None
    device = result.self_device_time_total / result.iters
    cpu = result.self_cpu_time_total / result.iters
    parts = result.breakdown
    if parts is not None and parts.wall > 0:  # the union of GPU work: never above 100%
        busy = 1.0 - parts.share("idle")
        idle = _unexplained_idle(result)  # set-up is startup_in_window's
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
        f"the GPU is busy {busy:.0%} of each iteration; {format_us(cpu)} of CPU work "
        f"launches {launches:g} kernels with a median of {format_us(median_kernel)} each",
        "launch fewer, bigger kernels: torch.compile(mode=\"reduce-overhead\") (CUDA graphs), "
        "or larger batches", _of_wall(result, min(idle, cpu)))


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
        "keep values on the GPU (no .item(), .cpu(), .tolist() or printing tensors in the "
        "loop); accumulate on the device and read once at the end", _of_wall(result, waited))


def slow_warmup(result: ProfileResult) -> Finding | None:
    if not result.warmup_timings or not result.timings:
        return None
    first, steady = result.warmup_timings[0], result.stats.median
    if steady <= 0 or first < SLOW_WARMUP_RATIO * steady:
        return None
    return Finding(
        "slow_warmup", "The first run was far slower than steady state",
        f"first warm-up run {format_seconds(first)} vs {format_seconds(steady)} per profiled "
        f"iteration ({first / steady:.0f}x): compilation, autotuning or allocator growth",
        "that cost is outside the measurement; if it matters in production, warm up at "
        "start-up or cache compiled code (torch.compile's cache, fixed shapes)")


def noisy(result: ProfileResult) -> Finding | None:
    if len(result.timings) < 2:
        return None
    spread = result.stats.relative_spread
    if spread <= NOISY_SPREAD:
        return None
    more = max(50, 5 * result.iters)
    return Finding(
        "noisy", "The measurement is noisy",
        f"the middle half of the {result.stats.n} iterations spans {spread:.0%} of the median "
        f"(IQR {format_seconds(result.stats.iqr)})",
        f"{more_iterations(result, more)} and keep other work off the machine")


def fp32_matmul(result: ProfileResult) -> Finding | None:
    if not result.profiles_device or result.matmul_precision != "highest":
        return None
    total = result.self_device_time_total
    matmul = sum(r.self_device_time_total for r in result.op_totals if r.key in MATMUL_OPS)
    share = matmul / total if total > 0 else 0.0
    fp32 = [k for k in result.kernels
            if _FP32_GEMM.search(k.key) and not _LOW_PRECISION.search(k.key)]
    if share < MATMUL_SHARE or not fp32:
        return None
    return Finding(
        "fp32_matmul", "Float32 matmuls are not using Tensor Cores",
        f"matmuls take {share:.0%} of device time in float32 kernels such as {fp32[0].key} "
        "while torch.get_float32_matmul_precision() is 'highest'",
        "torch.set_float32_matmul_precision(\"high\") (TF32), or torch.autocast(\"cuda\", "
        "dtype=torch.bfloat16)", _of_wall(result, matmul / result.iters))


def fusable_elementwise(result: ProfileResult) -> Finding | None:
    ops = [r for r in result.op_totals if r.key in ELEMENTWISE_OPS]
    calls = sum(r.count for r in ops) / result.iters
    if not ops or calls < ELEMENTWISE_CALLS or result.self_time_total <= 0:
        return None
    per_iter = sum(_per_iter_self(result, r) for r in ops)
    share = per_iter * result.iters / result.self_time_total
    avg = per_iter / calls
    if share < ELEMENTWISE_SHARE or avg >= ELEMENTWISE_AVG_US:
        return None
    return Finding(
        "fusable_elementwise", "Many small elementwise ops",
        f"{calls:g} elementwise calls per iteration averaging {format_us(avg)} take "
        f"{share:.0%} of self time",
        "fuse them with torch.compile (one kernel instead of many)", _of_wall(result, per_iter))


def communication_bound(result: ProfileResult) -> Finding | None:
    """Communication not hidden by compute above ``COMM_BOUND_SHARE`` of the iteration."""
    parts = result.breakdown
    if parts is None or parts.wall <= 0 or parts.communication <= 0:
        return None
    exposed = parts.exposed_communication
    share = exposed / parts.wall
    if share <= COMM_BOUND_SHARE:
        return None
    where = "GPU" if parts.device != "cpu" else "CPU"
    hidden = ("none of it overlapped by compute" if not parts.overlap
              else f"{parts.overlap:.0%} of its {format_us(parts.communication)} overlapped "
                   "by compute")
    comm_rows = sorted((r for r in result.op_totals if is_comm_op(r.key)),
                       key=lambda r: -_per_iter_self(result, r))[:2]
    biggest = ", ".join(f"{r.key} {format_us(_per_iter_self(result, r))}" for r in comm_rows)
    return Finding(
        "communication_bound", "Communication-bound",
        f"communication takes {format_us(exposed)} of a {format_us(parts.wall)} iteration "
        f"({share:.0%}) on the {where}, {hidden}"
        + (f"; largest: {biggest} per iteration" if biggest else ""),
        "overlap collectives with compute (DDP gradient buckets, FSDP prefetch, async "
        "collectives), or communicate less per step (larger local batches, gradient "
        "accumulation, compression)", share)


RULES: list[Callable[[ProfileResult], Finding | None]] = [
    communication_bound, startup_in_window, gpu_idle, train_mode_under_no_grad, dominant_op,
    launch_bound, sync_points, fp32_matmul, fusable_elementwise, slow_warmup, noisy,
]


def find(result: ProfileResult) -> list[Finding]:
    """Every rule's finding for ``result`` (``RULES``, then the roofline's), the largest
    ``share`` of the iteration first; equal shares keep the rules' order."""
    rules = list(RULES)
    if result.roofline:
        from kernelmagic.roofline_findings import RULES as ROOFLINE_RULES

        rules += ROOFLINE_RULES
    found = [f for f in (rule(result) for rule in rules) if f is not None]
    return sorted(found, key=lambda f: -f.share)
