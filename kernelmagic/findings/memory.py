"""``--memory``: memory that every iteration keeps and never gives back."""

from __future__ import annotations

from kernelmagic.core.memory_rows import MemoryGrowthRow
from kernelmagic.core.units import counted, format_bytes
from kernelmagic.findings.base import NAMED, Finding
from kernelmagic.results.result import ProfileResult

#: Bytes kept per iteration below which growth is not reported (a few scalars kept by
#: a logging list are not worth a finding).
GROWTH_MIN_BYTES = 1024


def _kept(row: MemoryGrowthRow) -> str:
    """``"3.91 KiB per iteration"``, or with the range when iterations kept different
    amounts: ``"256.75 KiB per iteration on average (1.00 KiB to 1.00 MiB)"``."""
    text = f"{format_bytes(row.per_iter)} per iteration"
    if row.least != row.most:
        text += (f" on average ({format_bytes(row.least)} to {format_bytes(row.most)})")
    return text


def memory_growth(result: ProfileResult) -> Finding | None:
    """Memory allocated in every profiled iteration and still held when profiling ended:
    a list that keeps a tensor each step, a cache that never evicts, a graph kept alive."""
    rows = [r for r in result.memory_growth if r.per_iter >= GROWTH_MIN_BYTES]
    if not rows:
        return None
    rows.sort(key=lambda r: -r.per_iter)
    per_iter = sum(r.per_iter for r in rows)
    named = "; ".join(f"{_kept(r)} from {r.op or 'an unknown op'}"
                      + (f" at {r.source}" if r.source else "") + f" ({r.device})"
                      for r in rows[:NAMED])
    n = rows[0].iterations
    if all(r.least == r.most for r in rows):  # the same bytes every iteration
        kept = (f"{format_bytes(per_iter)} allocated in each of the "
                f"{counted(n, 'profiled iteration')}")
    else:
        kept = (f"{format_bytes(sum(r.total for r in rows))} allocated over the "
                f"{counted(n, 'profiled iteration')} ({format_bytes(per_iter)} per iteration "
                "on average)")
    return Finding(
        "memory_growth", "Memory grows every iteration",
        f"{kept} is still held at the end: {named}",
        "find what keeps a reference to these tensors (a list appended to each step, a "
        "loss kept without .item() or .detach(), a cache); free it or store a Python "
        "number instead",
        share=1.0,  # a leak: the run will run out of memory, however fast it is
    )
