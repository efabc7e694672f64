"""The names of the ranges kernelmagic opens, in one place (imports nothing heavy).

A run called NAME opens ``NAME`` around everything it profiles, ``NAME/warmup`` around the
warm-up runs, ``NAME/iter i`` around each profiled iteration, ``SYNC_RANGE`` around its own
``torch.cuda.synchronize()`` and, with ``--modules``, ``module: <path> (<Type>)`` around each
module call. None of them is the user's: they wrap the user's ops and are never rows.
"""

from __future__ import annotations

import re

#: The range around kernelmagic's own ``torch.cuda.synchronize()`` in each iteration; the
#: ``cudaDeviceSynchronize`` under it is ours, not the user's, and is left out of the rows.
SYNC_RANGE = "kernelmagic: synchronize"

#: The label of the range ``--modules`` opens around each module call.
MODULE_RANGE = re.compile(r"^module: (.*) \((\w+)\)$")

#: ``NAME/iter i``: one profiled iteration (group 1: NAME, group 2: i).
ITERATION_RANGE = re.compile(r"(.+)/iter (\d+)\Z")


def iteration_range(name: str, i: int) -> str:
    """The range around profiled iteration ``i`` of the run ``name``."""
    return f"{name}/iter {i}"


def warmup_range(name: str) -> str:
    """The range around the warm-up runs of the run ``name``."""
    return f"{name}/warmup"


def is_ours(text: str, name: str | None) -> bool:
    """Whether the range ``text`` is one kernelmagic opened (for the run ``name``, if given)."""
    if text == SYNC_RANGE or MODULE_RANGE.match(text) is not None:
        return True
    if name is None:
        return ITERATION_RANGE.match(text) is not None
    return text in (name, warmup_range(name)) or text.startswith(f"{name}/iter ")
