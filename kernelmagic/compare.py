"""Two runs side by side: per-op change, speed-up, and whether it is beyond the noise."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from kernelmagic.result import ProfileResult


@dataclass(frozen=True)
class OpDelta:
    """One op's self time per iteration (µs) before and after; 0 where it did not run."""

    key: str
    before: float
    after: float

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def status(self) -> str:
        """"new" (only after), "gone" (only before) or "both"."""
        if self.before == 0 and self.after > 0:
            return "new"
        if self.after == 0 and self.before > 0:
            return "gone"
        return "both"

    @property
    def speedup(self) -> float | None:
        """before / after: above 1 is faster. None when the op ran in only one run."""
        if self.before > 0 and self.after > 0:
            return self.before / self.after
        return None


@dataclass(eq=False)
class Comparison:
    """``after`` against ``before``: self times per iteration, so iteration counts may differ.

    Ops are compared on device self time when both runs profiled the device, on CPU
    self time otherwise.
    """

    before: ProfileResult
    after: ProfileResult

    @property
    def on_device(self) -> bool:
        return self.before.profiles_device and self.after.profiles_device

    @property
    def time_label(self) -> str:
        return "self device" if self.on_device else "self CPU"

    def _per_iter(self, result: ProfileResult) -> dict[str, float]:
        field = "self_device_time_total" if self.on_device else "self_cpu_time_total"
        return {r.key: getattr(r, field) / result.iters for r in result.rows}

    @cached_property
    def rows(self) -> list[OpDelta]:
        """Every op of either run, largest absolute change first."""
        before, after = self._per_iter(self.before), self._per_iter(self.after)
        keys = set(before) | set(after)
        deltas = [OpDelta(k, before.get(k, 0.0), after.get(k, 0.0)) for k in keys]
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
    def beyond_noise(self) -> bool:
        """True when the middle halves (IQR) of the two runs' iteration times do not overlap."""
        b, a = self.before.stats, self.after.stats
        return a.q3 < b.q1 or a.q1 > b.q3

    def verdict(self) -> str:
        """e.g. ``1.84x faster, beyond the noise of both runs``."""
        s = self.speedup
        if s >= 1:
            change = f"{s:.2f}x faster"
        else:
            change = f"{1 / s:.2f}x slower" if s > 0 else "slower"
        noise = ("beyond the noise of both runs" if self.beyond_noise
                 else "within the noise: the runs' IQRs overlap")
        return f"{change}, {noise}"

    def table(self, limit: int | None = 25) -> str:
        from kernelmagic.render.compare import comparison_text

        return comparison_text(self, limit=limit)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.table())

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from kernelmagic.render.compare import comparison_bundle

        return comparison_bundle(self, include=include)

    def __repr__(self) -> str:
        return f"<Comparison {self.before.name!r} -> {self.after.name!r}: {self.verdict()}>"


def compare(before: ProfileResult, after: ProfileResult) -> Comparison:
    """``after`` against ``before``."""
    return Comparison(before=before, after=after)
