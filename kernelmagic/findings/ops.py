"""Where the op time goes: one op dominating (``dominant_op``), many small elementwise ops
(``fusable_elementwise``)."""

from __future__ import annotations

from kernelmagic.core.op_names import DROPOUT_OPS, DROPOUT_TRAINING, ELEMENTWISE_OPS, MATMUL_OPS
from kernelmagic.core.units import counted, format_us
from kernelmagic.findings.base import Finding, of_wall, per_iter_self, wall_us
from kernelmagic.findings.gpu import GPU_IDLE_SHARE
from kernelmagic.findings.startup import setup, startup_in_window, unexplained_idle
from kernelmagic.findings.training import train_mode_under_no_grad
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.breakdown import is_comm_op

DOMINANT_SHARE = 0.5          # one op's share of self time
ELEMENTWISE_CALLS = 30        # elementwise calls per iteration
ELEMENTWISE_SHARE = 0.25      # their share of self time
ELEMENTWISE_AVG_US = 50.0     # mean self time per call below this is "small"


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
    idle = unexplained_idle(result)
    if result.profiles_device and idle > GPU_IDLE_SHARE * wall_us(result):
        hint = (f"first keep the GPU busy (it idles {result.breakdown.share('idle'):.0%} of "
                f"the iteration); then {hint}")
    per_iter = per_iter_self(result, top)
    return Finding(
        "dominant_op", "One op dominates",
        f"{top.key} takes {share:.0%} of self time "
        f"({format_us(per_iter)} per iteration, "
        f"{counted(top.count / result.iters, 'call')} per iteration)", hint,
        of_wall(result, per_iter))


def fusable_elementwise(result: ProfileResult) -> Finding | None:
    ops = [r for r in result.op_totals if r.key in ELEMENTWISE_OPS]
    calls = sum(r.count for r in ops) / result.iters
    if not ops or calls < ELEMENTWISE_CALLS or result.self_time_total <= 0:
        return None
    per_iter = sum(per_iter_self(result, r) for r in ops)
    share = per_iter * result.iters / result.self_time_total
    avg = per_iter / calls
    if share < ELEMENTWISE_SHARE or avg >= ELEMENTWISE_AVG_US:
        return None
    return Finding(
        "fusable_elementwise", "Many small elementwise ops",
        f"{calls:g} elementwise calls per iteration averaging {format_us(avg)} take "
        f"{share:.0%} of self time",
        "fuse them with torch.compile (one kernel instead of many)", of_wall(result, per_iter))
