"""Two runs side by side: per-op change, speed-up, and whether it is beyond the noise."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from kernelmagic.core.records import Record
from kernelmagic.core.sorting import self_time, self_time_label
from kernelmagic.core.timing import LOAD_DIFFERS, MIN_UNPAIRED, SpeedUp, unpaired_speedup
from kernelmagic.core.units import speedup_text
from kernelmagic.results.result import ProfileResult, Shown, at_least_iterations

if TYPE_CHECKING:
    import pandas


@dataclass(frozen=True)
class OpDelta(Record):
    """One op's self time per iteration (µs) before and after; 0 where it did not run."""

    key: str
    before: float
    after: float
    status: str = "both"  # "new" (only in the second run), "gone" (only in the first)

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def speedup(self) -> float | None:
        """before / after: above 1 is faster. None when either time is 0."""
        return self.before / self.after if self.before > 0 and self.after > 0 else None


@dataclass(eq=False)
class Comparison(Shown, Record):
    """``after`` against ``before``: self times per iteration, so iteration counts may differ.

    Ops are compared on device self time when both runs profiled the device, on CPU
    self time otherwise.
    """

    before: ProfileResult
    after: ProfileResult
    before_label: str = ""  # the name the before run was saved under (--save NAME)
    after_label: str = ""

    @property
    def before_name(self) -> str:
        """What headings call the first run: its saved name, else its own name."""
        return self.before_label or self.before.name

    @property
    def after_name(self) -> str:
        return self.after_label or self.after.name

    @property
    def on_device(self) -> bool:
        return self.before.profiles_device and self.after.profiles_device

    @property
    def time_label(self) -> str:
        return self_time_label(self.on_device)

    def _per_iter(self, result: ProfileResult) -> dict[str, float]:
        return {r.key: self_time(r, self.on_device) / result.iters for r in result.op_totals}

    @cached_property
    def rows(self) -> list[OpDelta]:
        """Every op of either run, largest absolute change first."""
        before, after = self._per_iter(self.before), self._per_iter(self.after)
        deltas = [
            OpDelta(k, before.get(k, 0.0), after.get(k, 0.0),
                    "both" if k in before and k in after else "new" if k in after else "gone")
            for k in set(before) | set(after)
        ]
        return sorted(deltas, key=lambda d: (-abs(d.delta), d.key))

    @property
    def appeared(self) -> list[str]:
        return sorted(d.key for d in self.rows if d.status == "new")

    @property
    def vanished(self) -> list[str]:
        return sorted(d.key for d in self.rows if d.status == "gone")

    @property
    def self_time_before(self) -> float:
        """Total self time per iteration (µs) of the first run."""
        return sum(self._per_iter(self.before).values())

    @property
    def self_time_after(self) -> float:
        return sum(self._per_iter(self.after).values())

    @property
    def speedup(self) -> float:
        """Median wall time per iteration, before / after: above 1 means faster."""
        after = self.after.stats.median
        return self.before.stats.median / after if after > 0 else float("inf")

    @property
    def enough_iterations(self) -> bool:
        """Whether both runs have enough iterations (``core/timing.py: MIN_UNPAIRED``) to
        judge their spread."""
        return min(self.before.stats.n, self.after.stats.n) >= MIN_UNPAIRED

    @cached_property
    def interval(self) -> SpeedUp:
        """The speed-up with its 95% interval (``core/timing.py: unpaired_speedup``: the
        two runs' iterations are not paired, so the Hodges-Lehmann interval of the shift
        in log time)."""
        return unpaired_speedup(self.before.timings, self.after.timings)

    @property
    def load_differs(self) -> str:
        """Why the runs cannot be judged apart from the machine's load, "" when they can:
        other processes' cores differing by ``LOAD_DIFFERS`` or more between the runs,
        or a run on a busy machine (``CpuLoad.busy``: its times waited for cores, and
        under such load a run's times jump between regimes no interval of two runs
        captures). "" too when a run has no load measured (a trace)."""
        a, b = self.before.cpu_load, self.after.cpu_load
        if a is None or b is None:
            return ""
        if abs(a.other_cores - b.other_cores) >= LOAD_DIFFERS:
            return (f"the machine's load differed between the runs (other processes kept "
                    f"{a.other_cores:.1f} and {b.other_cores:.1f} cores busy)")
        busy = [(name, load) for name, load in ((self.before_name, a), (self.after_name, b))
                if load.busy]
        if busy:
            name, load = busy[0]
            return (f"the machine was busy during {name} (other processes kept "
                    f"{load.other_cores:.1f} of {load.cores} cores busy)")
        return ""

    @property
    def beyond_noise(self) -> bool:
        """The speed-up's whole 95% interval beyond 1 ± ``MIN_EFFECT`` (the one noise
        rule, ``core/timing.py``), the runs having been timed under the same load."""
        return (self.enough_iterations and not self.load_differs
                and self.interval.beyond_noise)

    def verdict(self) -> str:
        """e.g. ``1.84x faster, 95% interval 1.80-1.88x: beyond the noise``."""
        change = speedup_text(self.speedup)
        if not self.enough_iterations:  # how to get MIN_UNPAIRED into each run short of it
            short = [r for r in (self.after, self.before) if r.stats.n < MIN_UNPAIRED]
            advice = "; ".join(dict.fromkeys(at_least_iterations(r, MIN_UNPAIRED) for r in short))
            return f"{change}, too few iterations to judge the noise ({advice})"
        interval = self.interval
        head = f"{change}, {interval.interval_text()}"
        if self.load_differs:
            return (f"{head}: not judged, {self.load_differs}; --try times them "
                    "interleaved")
        return f"{head}: {interval.noise_text()}"

    def to_pandas(self) -> pandas.DataFrame:
        """The ops as a ``pandas.DataFrame``: self µs per iteration ``before`` and ``after``,
        ``delta``, ``speedup`` and ``status``, largest change first. Needs pandas."""
        from kernelmagic.io.frames import comparison_frame

        return comparison_frame(self)

    def table(self, limit: int | None = 25) -> str:
        from kernelmagic.render.compare import comparison_text

        return comparison_text(self, limit=limit)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.table())

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from kernelmagic.render.compare import comparison_bundle

        return comparison_bundle(self, include=include)

    def __repr__(self) -> str:
        return f"<Comparison {self.before_name!r} -> {self.after_name!r}: {self.verdict()}>"


def compare(before: ProfileResult, after: ProfileResult, before_label: str = "",
            after_label: str = "") -> Comparison:
    """``after`` against ``before``; the labels (``--save`` names) head the comparison in
    place of the runs' own names."""
    return Comparison(before=before, after=after, before_label=before_label,
                      after_label=after_label)
