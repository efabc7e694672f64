"""A pure-Python helper at a known line, for the ``python`` view's tests
(``tests/test_python_lines.py``): its loop, on one line, runs no op."""

from __future__ import annotations

import time

import torch
from torch.utils.data import TensorDataset

HELPER_LINE = 19  # the line below that does the work


def busy_python(n: int) -> int:
    """Squares and sums ``n`` integers in a loop of bytecode, as user code runs: it offers the
    GIL every switch interval, so the sampler sees it throughout (one C call that held the GIL
    for all of it would be seen once, at its end, or not at all if the sampler came late)."""
    total = 0
    for i in range(n): total += i * i  # noqa: E701 (one line: the row the test looks for)
    return total



class SlowDataset(TensorDataset):
    """A ``TensorDataset`` whose ``__getitem__`` sleeps ``seconds`` per row first (the slow
    disk or decoding of a real pipeline), for the data-loading tests."""

    def __init__(self, *tensors: torch.Tensor, seconds: float) -> None:
        super().__init__(*tensors)
        self.seconds = seconds

    def __getitem__(self, i: int) -> tuple[torch.Tensor, ...]:
        time.sleep(self.seconds)
        return super().__getitem__(i)
