"""Interleaved rounds: the baseline and every variant timed together, unprofiled.

Each round times each of the callables once, in a shuffled order (a seeded
``random.Random``, so a run's orders are reproducible): each even round shuffles anew,
and the round after it runs the reverse order, so each callable runs first as often as
last and whatever running first or last costs (a cache warmed by the one before) falls on
all alike. Each sample runs from the end of a synchronize to the end of the synchronize
after the calls. Whatever the machine's load does during the rounds reaches the baseline
and the variants alike, and a round's ratio (variant / baseline) cancels it; with the
order random, each ratio is as likely above its median as below it whatever the load
did, which the interval on the median of the ratios (``core/timing.py:
median_interval``) needs.

A sample is one call of the cell, or a fixed batch of calls for a cell faster than
``SAMPLE_MIN_S`` (so the clock and the synchronize do not weigh on it): the same batch for
every callable and every round. There are at least ``MIN_ROUNDS`` rounds, then more, up to
``max_rounds``, while ``decided`` says the intervals are not yet decided and the rounds
have taken under ``BUDGET_S``.

Every run of ``--try`` draws the same random numbers: the state of torch's CPU and CUDA
generators, Python's ``random`` and ``numpy.random`` is taken once
(``capture_random_state``) and put back before each call of the cell
(``restore_random_state``), then the user's own state restored at the end. A cell that
draws its inputs (``z = torch.randn(256, 1024)``) then draws the same ones in the baseline
and in every variant, so the numerical error measures the variant, not the random numbers.
CUDA's generators are read only where CUDA is already initialised (reading them would
initialise it); numpy's only when numpy is imported.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelmagic.live import torch_compat

#: The fewest rounds: eight pairs give an exact interval on the median at 99.2%
#: (the smallest and largest ratio), above the 95% asked for.
MIN_ROUNDS = 8
#: ``--iters N`` bounds the rounds at ``max(MIN_ROUNDS, ROUNDS_PER_ITER * N)``.
ROUNDS_PER_ITER = 3
#: Seconds of rounds after which no more are added (the first ``MIN_ROUNDS`` always run).
BUDGET_S = 2.0
#: A sample spans at least this (seconds): faster cells are timed in batches of calls.
SAMPLE_MIN_S = 0.001
#: The largest batch.
MAX_BATCH = 1000
#: The seed of the rounds' shuffled orders.
SEED = 0


def max_rounds(iters: int) -> int:
    """The most rounds ``--iters`` allows."""
    return max(MIN_ROUNDS, ROUNDS_PER_ITER * iters)


def calls_per_sample(seconds_per_call: float) -> int:
    """The batch for a cell taking ``seconds_per_call``: enough calls to span
    ``SAMPLE_MIN_S``, at most ``MAX_BATCH``."""
    if seconds_per_call <= 0:
        return MAX_BATCH
    return max(1, min(MAX_BATCH, math.ceil(SAMPLE_MIN_S / seconds_per_call)))


@dataclass
class Rounds:
    """Per callable, its seconds per call in each completed round (``samples[i][r]``); the
    batch; each round's order; and the Ctrl-C that cut the rounds short, if one did."""

    samples: list[list[float]]
    batch: int
    orders: list[list[int]] = field(default_factory=list)
    interrupt: KeyboardInterrupt | None = None

    @property
    def count(self) -> int:
        return len(self.orders)


def time_rounds(fns: Sequence[Callable[[], Any]], batch: int, most: int, *,
                before_each: Callable[[], None] | None = None,
                decided: Callable[[list[list[float]]], bool] = lambda samples: False,
                on_round: Callable[[int, int], None] | None = None,
                clock: Callable[[], float] = time.perf_counter,
                budget_s: float = BUDGET_S, seed: int = SEED) -> Rounds:
    """Time ``fns`` in interleaved rounds (at least ``MIN_ROUNDS``, at most ``most``).

    ``before_each`` runs before each sample, outside the timed span (the random
    generators put back); ``on_round(done, most)`` is told before each round and after
    the last (the progress line; a test starts a CPU hog there). A ``KeyboardInterrupt``
    keeps the completed rounds (``interrupt``); an exception from a callable propagates.
    """
    __tracebackhide__ = True
    rng = random.Random(seed)
    sync = torch_compat.synchronize
    out = Rounds(samples=[[] for _ in fns], batch=batch)
    began = clock()
    try:
        for r in range(most):
            if on_round is not None:
                on_round(r, most)
            order = list(range(len(fns)))
            if r % 2 == 0:
                rng.shuffle(order)
            else:
                order = out.orders[-1][::-1]
            times = [0.0] * len(fns)
            for i in order:
                if before_each is not None:
                    before_each()
                fn = fns[i]
                sync()
                start = clock()
                for _ in range(batch):
                    fn()
                sync()
                times[i] = (clock() - start) / batch
            for i, t in enumerate(times):
                out.samples[i].append(t)
            out.orders.append(order)
            done = r + 1
            if done >= MIN_ROUNDS and (decided(out.samples) or clock() - began > budget_s):
                break
    except KeyboardInterrupt as exc:  # the round cut short is left out
        if not out.orders:
            raise
        out.interrupt = exc
    if on_round is not None:
        on_round(out.count, most)
    return out


@dataclass(frozen=True)
class RandomState:
    """Every generator's state at one moment (``capture_random_state``), to restore later."""

    torch_cpu: Any
    torch_cuda: list[Any] | None
    python: Any
    numpy: Any | None


def capture_random_state() -> RandomState:
    """The generators' state now."""
    import torch

    cuda = (torch.cuda.get_rng_state_all()
            if torch.cuda.is_available() and torch.cuda.is_initialized() else None)
    numpy = sys.modules.get("numpy")
    return RandomState(torch_cpu=torch.get_rng_state(), torch_cuda=cuda,
                       python=random.getstate(),
                       numpy=numpy.random.get_state() if numpy is not None else None)


def restore_random_state(state: RandomState) -> None:
    """Put every generator back to ``state`` (a few tens of µs; never inside a timed
    span of the interleaved rounds)."""
    import torch

    torch.set_rng_state(state.torch_cpu)
    if state.torch_cuda is not None:
        torch.cuda.set_rng_state_all(state.torch_cuda)
    random.setstate(state.python)
    if state.numpy is not None:
        sys.modules["numpy"].random.set_state(state.numpy)
