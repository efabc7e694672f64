"""Turns a finished torch profiler session into kernelmagic's operator rows."""

from __future__ import annotations

from typing import Any

from kernelmagic import torch_compat
from kernelmagic.result import OpRow


def collect_rows(prof: Any) -> list[OpRow]:
    """One row per operator of ``prof.key_averages()``, figures copied unchanged.

    Left out: ``record_function``/NVTX ranges (they wrap ops, so their time is
    already in the ops' rows), pseudo-rows such as ``[memory]``, and GPU kernel
    events (their time is the launching op's self device time).
    """
    rows = []
    for avg in torch_compat.key_averages(prof):
        if (
            torch_compat.is_user_range(avg)
            or torch_compat.is_pseudo_row(avg)
            or not torch_compat.is_host_event(avg)
        ):
            continue
        rows.append(OpRow(key=str(avg.key), count=int(avg.count), **torch_compat.op_times(avg)))
    return rows
