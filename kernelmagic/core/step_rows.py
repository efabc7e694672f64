"""The rows of the steps view (``--steps TARGET``): each call of the target, the calls
grouped by their inputs, the loop around them, and the hint to use ``--steps`` (times in µs,
memory in bytes; plain, frozen, JSON-friendly records).

``kernelmagic/views/steps.py`` computes them from the ``NAME/step j`` ranges
(``core/range_names.py``) that ``kernelmagic/live/steps.py`` opens around each call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelmagic.core.records import Record, unit


@dataclass(frozen=True)
class StepRow(Record):
    """One call of the target in one profiled iteration (``index`` counts from 0 in each).

    ``wall_us`` is the call's length on the CPU (the range's); ``cpu_us`` the time inside
    ops during it (their self CPU time: nested ops are not counted twice); ``device_us`` the
    GPU work it launched; ``memory_held`` (``--memory``) the bytes allocated since the
    iteration began, at the call's end (on the GPU when one is profiled).
    """

    iteration: int
    index: int
    group: str
    wall_us: float = unit("µs in this step")
    cpu_us: float = unit("µs in this step")
    device_us: float = unit("µs in this step", 0.0)
    memory_held: float = unit("bytes held at the step's end", 0.0)
    inputs: str = ""

    @property
    def key(self) -> str:
        """``iteration/index``: what tables break ties on."""
        return f"{self.iteration}/{self.index:06d}"


@dataclass(frozen=True)
class StepGroupRow(Record):
    """The steps whose inputs have the same shapes and dtypes (``prefill``, ``decode``).

    ``count`` is its steps per iteration (the median iteration's); the times are medians
    over all its steps, ``first_us`` the median over iterations of its first step; the
    slowest step is ``slowest_index`` of iteration ``slowest_iteration``. ``top_ops``: op
    -> its median self time per step over the group's steps (device time when a GPU is
    profiled, else CPU; a step without the op counts 0), largest first, medians like
    ``median_us``; ``memory_per_step``: the median growth of the memory held from one
    step's end to the next's (``--memory``; a KV cache grows by the same bytes each decode
    step). ``first_compiles``: in how many iterations torch.compile compiled inside the
    group's first step (dynamo's timed ranges in it; the only evidence a slow first step
    is compilation).
    """

    group: str
    inputs: str
    count: int = unit("steps per iteration")
    median_us: float = unit("µs per step")
    first_us: float = unit("µs per step")
    slowest_us: float = unit("µs per step")
    slowest_index: int
    slowest_iteration: int
    cpu_us: float = unit("µs per step")
    device_us: float = unit("µs per step", 0.0)
    memory_per_step: float = unit("bytes per step", 0.0)
    top_ops: dict[str, float] = unit("op -> µs per step (median)", factory=dict)
    first_compiles: int = unit("iterations", 0)

    @property
    def key(self) -> str:
        """The group's name: what tables break ties on."""
        return self.group

    @property
    def steps_per_s(self) -> float:
        """Steps per second at the median step time (tokens/s for a decode step), as
        profiled: ``render/steps.py`` gives it beside the rate without the profiler."""
        return 1e6 / self.median_us if self.median_us > 0 else 0.0


@dataclass(frozen=True)
class StepsSummary(Record):
    """The steps of a run as a whole. ``note`` says why there are none (the target was not
    called) and is "" otherwise. Per iteration (medians over the iterations): ``steps``,
    ``between_us``, the loop's time outside the steps (kernelmagic's own synchronise left
    out), with ``between_top_ops`` (op -> self µs) the ops that ran there on the steps'
    thread in the iteration at that median (the lower middle one of an even count): they
    add up to at most ``between_us``. ``median_iteration`` is the iteration whose steps the
    report lists.
    """

    target: str
    note: str = ""
    steps: int = 0
    median_us: float = 0.0
    first_us: float = 0.0
    slowest_us: float = 0.0
    slowest_index: int = 0
    slowest_iteration: int = 0
    between_us: float = 0.0
    between_top_ops: dict[str, float] = field(default_factory=dict)
    median_iteration: int = 0


@dataclass(frozen=True)
class RepeatedCall(Record):
    """A module whose forward ran ``calls`` times at the top level in one run of the
    profiled code (not inside another module's forward): each call may be a step.
    ``target`` is the name bound to it where the code runs ("" when none was found)."""

    target: str
    module_type: str
    calls: int
