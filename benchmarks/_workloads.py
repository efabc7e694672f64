"""Benchmark workloads: the seed notebook's transformer ``Block`` and small helpers.

The Block itself lives in ``tests/workloads.py``, one copy for tests and benchmarks.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from workloads import Block, block_and_input, training_step

__all__ = ["BLOCK_STMT", "MANY_EVENTS_STMT", "Block", "block_and_input", "manual_profile",
           "training_step"]

#: The statement every "Block" benchmark profiles (the seed runs it in inference mode).
BLOCK_STMT = "with torch.inference_mode():\n    block(x)"


def manual_profile(warmup: int = 3, iters: int = 10, after_each: str = "") -> str:
    """The seed notebook's manual workflow on the Block, up to its profile: ``warmup``
    forwards, then ``iters`` under ``torch.profiler.profile`` (CPU), the session left in
    ``prof``. ``after_each``: a statement run after each profiled forward."""
    stamp = f"\n        {after_each}" if after_each else ""
    return f"""\
from torch.profiler import ProfilerActivity, profile
with torch.inference_mode():
    for _ in range({warmup}):
        block(x)
with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU],
                                     record_shapes=False) as prof:
    for _ in range({iters}):
        block(x){stamp}
"""


#: 10,000 tiny ops per run: the "many events" cell.
MANY_EVENTS_STMT = "a = t\nfor _ in range(LOOPS):\n    a = a.add(1).mul(0.5)"
