"""Plain-language findings: what the profile shows, the numbers behind it, what to try.

Each rule is a pure function of a ``ProfileResult`` that returns a ``Finding`` or None.
Thresholds are module constants so the README and the tests can name them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

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

SYNC_OPS = {
    "aten::item": "reads a value to Python",
    "aten::_local_scalar_dense": "copies a scalar to the host",
    "aten::nonzero": "needs the result size on the host",
    "cudaStreamSynchronize": "waits for a stream",
    "cudaDeviceSynchronize": "waits for the device",
    "cudaMemcpy": "synchronous copy",
}
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
    """One observation: a title, the numbers that triggered it, and one suggestion."""

    rule: str
    title: str
    evidence: str
    suggestion: str

    def __str__(self) -> str:
        return f"{self.title}: {self.evidence}. Try: {self.suggestion}"


def _per_iter_self(result: ProfileResult, row: OpRow) -> float:
    field = "self_device_time_total" if result.profiles_device else "self_cpu_time_total"
    return getattr(row, field) / result.iters


def dominant_op(result: ProfileResult) -> Finding | None:
    if not result.rows or result.self_time_total <= 0:
        return None
    field = "self_device_time_total" if result.profiles_device else "self_cpu_time_total"
    top = max(result.op_totals, key=lambda r: getattr(r, field))
    share = result.share(top)
    if share < DOMINANT_SHARE or is_comm_op(top.key):  # communication: its own rule
        return None
    if top.key in MATMUL_OPS:
        hint = ("make the matmuls cheaper: lower precision (torch.autocast with bfloat16), "
                "or fewer/larger ones")
    elif top.key in ("aten::copy_", "aten::to", "aten::_to_copy", "aten::contiguous"):
        hint = "find and remove the copies: .contiguous(), .to(), dtype or device changes"
    else:
        hint = f"optimise {top.key} first; the rest together is {1 - share:.0%}"
    return Finding(
        "dominant_op", "One op dominates",
        f"{top.key} takes {share:.0%} of self time "
        f"({format_us(_per_iter_self(result, top))} per iteration, "
        f"{top.count / result.iters:g} calls per iteration)", hint)


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
    if not result.profiles_device or not result.timings:
        return None
    device = result.self_device_time_total / result.iters
    cpu = result.self_cpu_time_total / result.iters
    parts = result.breakdown
    if parts is not None and parts.wall > 0:  # the union of GPU work: never above 100%
        busy = 1.0 - parts.share("idle")
    else:  # (a profile saved before the breakdown existed)
        wall = result.stats.mean * 1e6
        busy = min(1.0, device / wall) if wall > 0 else 0.0
    median_kernel = _median_kernel_us(result)
    if busy >= LAUNCH_BOUND_BUSY or cpu < LAUNCH_BOUND_CPU_RATIO * device:
        return None
    if median_kernel is None or median_kernel >= SHORT_KERNEL_US:
        return None
    launches = sum(k.count for k in result.kernels) / result.iters
    return Finding(
        "launch_bound", "The GPU is waiting for the CPU (launch-bound)",
        f"the GPU is busy {busy:.0%} of each iteration; {format_us(cpu)} of CPU work "
        f"launches {launches:g} kernels with a median of {format_us(median_kernel)} each",
        "launch fewer, bigger kernels: torch.compile(mode=\"reduce-overhead\") (CUDA graphs), "
        "or larger batches")


def sync_points(result: ProfileResult) -> Finding | None:
    if not result.profiles_device:
        return None  # on the CPU there is no device to wait for
    hits = [r for r in result.op_totals if r.key in SYNC_OPS and r.count]
    dtoh = [k for k in result.kernels if "dtoh" in k.key.lower().replace(" ", "")]
    if not hits and not dtoh:
        return None
    parts = [f"{r.key} ×{r.count / result.iters:g} ({SYNC_OPS[r.key]})" for r in hits]
    parts += [f"{k.key} ×{k.count / result.iters:g}" for k in dtoh]
    return Finding(
        "sync_points", "Host-device synchronisation inside the loop",
        "per iteration: " + ", ".join(parts),
        "keep values on the GPU (no .item(), .cpu(), .tolist() or printing tensors in the "
        "loop); accumulate on the device and read once at the end")


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
        f"run more iterations (--iters {more}) and keep other work off the machine")


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
        "dtype=torch.bfloat16)")


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
        "fuse them with torch.compile (one kernel instead of many)")


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
        "accumulation, compression)")


RULES: list[Callable[[ProfileResult], Finding | None]] = [
    communication_bound, dominant_op, launch_bound, sync_points, fp32_matmul, fusable_elementwise,
    slow_warmup, noisy,
]


def find(result: ProfileResult) -> list[Finding]:
    """Every rule's finding for ``result``, in the order of ``RULES``, then the roofline's."""
    rules = list(RULES)
    if result.roofline:
        from kernelmagic.roofline_findings import RULES as ROOFLINE_RULES

        rules += ROOFLINE_RULES
    return [f for f in (rule(result) for rule in rules) if f is not None]
