"""The same random numbers for every run of ``--try``: the state of torch's CPU and CUDA
generators, Python's ``random`` and ``numpy.random``, taken once and put back before each
call of the cell, then the user's own state restored at the end.

A cell that draws its inputs (``z = torch.randn(256, 1024)``) then draws the same ones in
the baseline and in every variant, so the numerical error measures the variant, not the
random numbers. CUDA's generators are read only where CUDA is already initialised (reading
them would initialise it); numpy's only when numpy is imported.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RandomState:
    """Every generator's state at one moment (``capture``), to ``restore`` later."""

    torch_cpu: Any
    torch_cuda: list[Any] | None
    python: Any
    numpy: Any | None


def capture() -> RandomState:
    """The generators' state now."""
    import torch

    cuda = (torch.cuda.get_rng_state_all()
            if torch.cuda.is_available() and torch.cuda.is_initialized() else None)
    numpy = sys.modules.get("numpy")
    return RandomState(torch_cpu=torch.get_rng_state(), torch_cuda=cuda,
                       python=random.getstate(),
                       numpy=numpy.random.get_state() if numpy is not None else None)


def restore(state: RandomState) -> None:
    """Put every generator back to ``state`` (a few tens of µs; never inside a timed
    span of the interleaved rounds)."""
    import torch

    torch.set_rng_state(state.torch_cpu)
    if state.torch_cuda is not None:
        torch.cuda.set_rng_state_all(state.torch_cuda)
    random.setstate(state.python)
    if state.numpy is not None:
        sys.modules["numpy"].random.set_state(state.numpy)
