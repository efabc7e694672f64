"""One row per variant tried by ``%%profile --try`` (``kernelmagic/live/experiments.py``).

A row holds the variant's measured speed-up against the baseline, the noise verdict of
``results/compare.py``, the numerical cost (the cell's value against the baseline's) and
the variant's own ``ProfileResult`` (``result``; ``None`` when it did not run). Times are
µs per iteration, errors in the units of the cell's value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelmagic.core.records import Record, unit

#: The usual tolerance of each dtype, as ``torch.testing.assert_close`` has them
#: (rtol, atol): a variant whose value differs from the baseline's by more (relative to
#: the baseline's largest magnitude) is marked.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1.3e-6, 1e-5),
    "tf32": (1e-3, 1e-5),  # float32 matmuls with 10-bit mantissas (TensorFloat-32)
    "bfloat16": (1.6e-2, 1e-5),
    "float16": (1e-3, 1e-5),
}


#: The fields of an ``ExperimentRow`` that only a variant that ran has.
MEASURED = ("median_us", "speedup", "speedup_low", "speedup_high", "profiled_us")


@dataclass(frozen=True)
class ExperimentRow(Record):
    """One variant of the cell, timed in interleaved rounds with the baseline.

    ``median_us`` is the variant's median time per call in those rounds (unprofiled);
    ``speedup`` the inverse of the median of the rounds' paired ratios (variant /
    baseline; above 1 is faster; 0 when the variant did not run), ``speedup_low`` and
    ``speedup_high`` its 95% interval, ``verdict`` and ``beyond_noise`` the one noise
    rule's (``core/timing.py: SpeedUp``), from ``rounds`` rounds of ``batch`` calls per
    sample. ``profiled_us`` is the median of the variant's profiled iterations (its
    ``result``, the breakdown). ``max_abs_error`` and ``max_rel_error`` (max |a - b| over
    max |b|, in float64) compare the cell's value with the baseline's, ``None`` when they
    are not comparable (``numerics`` says why); ``tolerance`` names the dtype whose usual
    tolerance applied and ``within_tolerance`` whether the value met it.
    ``predicted_speedup`` is the most the baseline's dependency model (``what_if``)
    predicted the suggestion that names this variant saves, as a speed-up (the
    iteration over the iteration less the saving); None where it has no prediction.
    ``compile_us`` is the first warm-up run, where ``torch.compile`` compiles, apart from
    the iterations. ``error`` is the one-line reason the variant did not run or failed
    (``skipped`` when the device cannot run it).
    """

    variant: str
    label: str = ""  # as the report words it: "bf16 autocast" (the name when "")
    advice: list[str] = field(default_factory=list)  # words of the advice it tries
    median_us: float = unit("µs per call, unprofiled (median over the interleaved rounds)", 0.0)
    speedup: float = unit(
        "1 / the median of the rounds' paired ratios variant / baseline (above 1: faster)", 0.0)
    speedup_low: float = unit("the speed-up's 95% interval", 0.0)
    speedup_high: float = unit("the speed-up's 95% interval", 0.0)
    verdict: str = ""
    beyond_noise: bool = False
    # why the noise verdict was withheld ("" where it was not): other processes kept the
    # cores busy while the rounds ran, so a persistent difference between callables
    # (which the paired ratios assume away) may be the load's (``live/experiments.py``)
    not_judged: str = ""
    max_abs_error: float | None = unit("the units of the cell's value", None)
    max_rel_error: float | None = unit("fraction of the baseline value's largest magnitude", None)
    numerics: str = ""  # "not comparable: ..." or "" when compared
    tolerance: str = ""  # the dtype whose usual tolerance applied
    within_tolerance: bool | None = None
    compile_us: float | None = unit("µs (the first warm-up run)", None)
    error: str = ""
    skipped: bool = False  # the device or build cannot run it: ``error`` says why
    iters: int = unit("profiled iterations", 0)
    rounds: int = unit("interleaved rounds", 0)  # interleaved rounds its speed-up comes from
    batch: int = unit("calls of the cell per sample", 0)  # in those rounds
    profiled_us: float = unit("µs per iteration, profiled (median)", 0.0)
    predicted_speedup: float | None = unit(
        "the dependency model's largest predicted speed-up", None)
    # seconds per call in each round, beside the baseline's (result.unprofiled_timings)
    round_timings: list[float] = field(default_factory=list, compare=False, repr=False,
                                       metadata={"column": False})
    # Not a column: the variant's own report (a ProfileResult, written by its to_dict;
    # results/result.py reads it back).
    result: Any = field(default=None, compare=False, repr=False,
                        metadata={"column": False})

    @property
    def key(self) -> str:
        """The variant's name (tables break ties by ``key``)."""
        return self.variant

    @property
    def title(self) -> str:
        """The variant as findings quote it: its label, else its name."""
        return self.label or self.variant

    @property
    def ran(self) -> bool:
        """Whether the variant was measured (neither skipped nor failed)."""
        return not self.error and self.median_us > 0

    def measured(self) -> dict[str, float | None]:
        """The timed fields (``MEASURED``) as a table of rows shows them: None where the
        variant was not measured (a failed variant's 0 is no speed-up of 0)."""
        return {name: getattr(self, name) if self.ran else None for name in MEASURED}

    @property
    def faster(self) -> bool:
        """Measured faster than the baseline, beyond the noise."""
        return self.ran and self.beyond_noise and self.speedup > 1

    @property
    def slower(self) -> bool:
        """Measured slower than the baseline, beyond the noise."""
        return self.ran and self.beyond_noise and self.speedup < 1
