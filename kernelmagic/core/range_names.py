"""The names of the ranges kernelmagic opens, in one place (imports nothing heavy).

A run called NAME opens ``NAME`` around everything it profiles, ``NAME/warmup`` around the
warm-up runs, ``NAME/iter i`` around each profiled iteration, ``SYNC_RANGE`` around its own
``torch.cuda.synchronize()``, with ``--modules``, ``module: <path> (<Type>)`` around each
module call and, with ``--steps``, ``NAME/step j`` around each call of the target (``: <inputs>``
after it when the call had tensor inputs). None of them is the user's: they wrap the user's ops
and are never rows.
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

#: ``NAME/step j`` or ``NAME/step j: <inputs>``: one call of ``--steps``' target (group 1:
#: NAME, group 2: j, the step's index in its iteration, group 3: its inputs' shapes and
#: dtypes, ``None`` when it had no tensor inputs).
STEP_RANGE = re.compile(r"(.+?)/step (\d+)(?:: (.*))?\Z", re.DOTALL)

#: What separates the inputs in a step range's label: ``x (1, 64) int64; mask (64, 64) bool``.
INPUT_SEPARATOR = "; "


def iteration_range(name: str, i: int) -> str:
    """The range around profiled iteration ``i`` of the run ``name``."""
    return f"{name}/iter {i}"


def warmup_range(name: str) -> str:
    """The range around the warm-up runs of the run ``name``."""
    return f"{name}/warmup"


def step_range(name: str, j: int, inputs: str = "") -> str:
    """The range around step ``j`` (counted from 0 in each iteration) of the run ``name``,
    with its inputs' shapes and dtypes when it had tensor inputs."""
    return f"{name}/step {j}: {inputs}" if inputs else f"{name}/step {j}"


def is_ours(text: str, name: str | None) -> bool:
    """Whether the range ``text`` is one kernelmagic opened (for the run ``name``, if given)."""
    if text == SYNC_RANGE or MODULE_RANGE.match(text) is not None:
        return True
    if name is None:
        return ITERATION_RANGE.match(text) is not None or STEP_RANGE.match(text) is not None
    return text in (name, warmup_range(name)) or text.startswith((f"{name}/iter ",
                                                                  f"{name}/step "))


def is_iteration(text: str, name: str | None) -> bool:
    """Whether ``text`` is kernelmagic's ``NAME/iter i`` range of the run ``name`` (any
    run's when None)."""
    found = ITERATION_RANGE.match(text)
    return found is not None and (name is None or found.group(1) == name)


def marker_key(text: str) -> str:
    """The row key of the GPU work an iteration marker launched directly (no op between):
    ``ProfilerStep`` for ``ProfilerStep#N``, ``NAME/iter`` for ``NAME/iter i``, so every
    iteration's markers make one row."""
    found = ITERATION_RANGE.match(text)
    return f"{found.group(1)}/iter" if found is not None else text.split("#", 1)[0]


def parse_step(text: str, name: str | None) -> tuple[int, str] | None:
    """``(j, inputs)`` of a step range of the run ``name`` (any run's when None), else None;
    ``inputs`` is "" for a call with no tensor inputs."""
    if name is not None:
        if not text.startswith(f"{name}/step "):
            return None
        found = STEP_RANGE.match("x" + text[len(name):])
    else:
        found = STEP_RANGE.match(text)
    if found is None:
        return None
    return int(found.group(2)), found.group(3) or ""
