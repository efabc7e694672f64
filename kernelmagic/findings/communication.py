"""Communication not hidden by compute (``communication_bound``); the many-ranks rule of
the same name (``findings/ranks.py``) uses the same threshold."""

from __future__ import annotations

from kernelmagic.core.units import format_us, percent
from kernelmagic.findings.base import Finding, per_iter_self
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.breakdown import is_comm_op

COMM_BOUND_SHARE = 0.2        # exposed communication above this fraction of the iteration
#: What to do about it (this rule's and the many-ranks rule's advice).
COMM_BOUND_ADVICE = ("overlap collectives with compute (DDP gradient buckets, FSDP prefetch, "
                     "async collectives), or communicate less per step (larger local "
                     "batches, gradient accumulation, compression)")


def communication_bound(result: ProfileResult) -> Finding | None:
    """Communication not hidden by compute above ``COMM_BOUND_SHARE`` of the iteration."""
    parts = result.breakdown
    if parts is None or parts.wall <= 0 or parts.communication <= 0:
        return None
    exposed = parts.exposed_communication
    share = parts.share("exposed_communication")
    if share <= COMM_BOUND_SHARE:
        return None
    where = "GPU" if parts.device != "cpu" else "CPU"
    hidden = ("none of it overlapped by compute" if not parts.overlap
              else f"{percent(parts.overlap)} of its {format_us(parts.communication)} "
                   "overlapped by compute")
    comm_rows = sorted((r for r in result.op_totals if is_comm_op(r.key)),
                       key=lambda r: -per_iter_self(result, r))[:2]
    biggest = ", ".join(f"{r.key} {format_us(per_iter_self(result, r))}" for r in comm_rows)
    return Finding(
        "communication_bound", "Communication-bound",
        f"communication takes {format_us(exposed)} of a {format_us(parts.wall)} iteration "
        f"({percent(share)}) on the {where}, {hidden}"
        + (f"; largest: {biggest} per iteration" if biggest else ""),
        COMM_BOUND_ADVICE, share,
        rows=tuple(r.key for r in result.op_totals if is_comm_op(r.key)),
        change="hiding or shrinking the communication")
