"""Benchmark workloads: the seed notebook's transformer ``Block`` and small helpers.

The Block itself lives in ``tests/workloads.py``, one copy for tests and benchmarks.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from workloads import Block, block_and_input

__all__ = ["BLOCK_STMT", "MANY_EVENTS_STMT", "Block", "block_and_input"]

#: The statement every "Block" benchmark profiles (the seed runs it in inference mode).
BLOCK_STMT = "with torch.inference_mode():\n    block(x)"


#: 10,000 tiny ops per run: the "many events" cell.
MANY_EVENTS_STMT = "a = t\nfor _ in range(LOOPS):\n    a = a.add(1).mul(0.5)"
