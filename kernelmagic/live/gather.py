"""``gather=True`` / ``--gather``: every rank profiles, rank 0 gets the many-ranks report.

After the profiled run, each rank summarises its own result (``summary.py``: no second
parse) and sends ``(ProfileResult, RankSummary)`` to
rank 0 with ``torch.distributed.gather_object``. Rank 0 returns a ``ManyRanksResult``,
every other rank its own ``ProfileResult``. Every rank of the group must run the same
profiled code (the gather is a collective). With NCCL, ``gather_object`` sends through
the current CUDA device: call ``torch.cuda.set_device(local_rank)`` first.
"""

from __future__ import annotations

from typing import Any

from kernelmagic.core.events import EventTable
from kernelmagic.results.rank_summary import summarize, summarize_with_events
from kernelmagic.results.ranks import ManyRanksResult
from kernelmagic.results.result import ProfileResult

NO_GROUP = ("--gather needs an initialised torch.distributed process group "
            "(call torch.distributed.init_process_group first)")


def check_process_group() -> None:
    """ValueError (one line) unless torch.distributed is initialised in this process."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise ValueError(NO_GROUP)


def gather(result: ProfileResult, table: EventTable | None = None) -> Any:
    """Send this rank's result and summary to rank 0; rank 0 returns them all together.
    With the ``table`` the result was built from, the summary holds each step's
    communication time and the rank's collectives too."""
    import torch.distributed as dist

    from kernelmagic.views.iterations import iteration_windows

    check_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    backend = str(dist.get_backend())
    if table is None:
        summary = summarize(result, rank=rank, world_size=world, backend=backend, file="live")
    else:
        summary = summarize_with_events(result, table, iteration_windows(table, result.name),
                                        rank=rank, world_size=world, backend=backend,
                                        file="live")
    received: list[Any] | None = [None] * world if rank == 0 else None
    dist.gather_object((result, summary), received, dst=0)
    if received is None:
        return result
    return ManyRanksResult.from_parts([tuple(item) for item in received])  # type: ignore[misc]
