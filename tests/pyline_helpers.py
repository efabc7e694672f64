"""A pure-Python helper at a known line, for the ``python`` view's tests
(``tests/test_python_lines.py``): its one line runs no op and holds the GIL throughout."""

from __future__ import annotations

import time

import torch
from torch.utils.data import TensorDataset

HELPER_LINE = 16  # the line below that does the work


def busy_python(n: int) -> int:
    """Squares and sums ``n`` integers in C builtins called from this one line."""
    return sum(map(int.__mul__, range(n), range(n)))



class SlowDataset(TensorDataset):
    """A ``TensorDataset`` whose ``__getitem__`` sleeps ``seconds`` per row first (the slow
    disk or decoding of a real pipeline), for the data-loading tests."""

    def __init__(self, *tensors: torch.Tensor, seconds: float) -> None:
        super().__init__(*tensors)
        self.seconds = seconds

    def __getitem__(self, i: int) -> tuple[torch.Tensor, ...]:
        time.sleep(self.seconds)
        return super().__getitem__(i)
