"""``--try``: findings whose advice a variant tried quote what was measured.

A finding names the variants its suggestion tries (``Finding.variants``: ``bf16``,
``compile``, ``threads=1``) and those it advises against (``Finding.against``). A finding
that names a variant measured gets its speed-up and numerical error after the suggestion;
advice
measured slower, beyond the noise, is withdrawn with its figure, so the report never
recommends what this very run showed to be slower.
"""

from __future__ import annotations

import dataclasses

from kernelmagic.core.experiment_rows import ExperimentRow
from kernelmagic.core.units import format_error, speedup_text
from kernelmagic.findings.base import Finding
from kernelmagic.results.result import ProfileResult


def measured_text(row: ExperimentRow) -> str:
    """``bf16 autocast: measured 1.90x faster, max rel error 3.1e-03`` (with "within
    the noise" when its interval is not beyond 1 ± 3%, and the tolerance when it is
    exceeded)."""
    text = f"{row.title}: measured {speedup_text(row.speedup)}"
    if not row.beyond_noise:
        text += " (within the noise)"
    if row.numerics and row.max_rel_error is None and "baseline" in row.numerics:
        text += "; numerical error not measured (the baseline's own value moves)"
    if row.max_rel_error is not None:
        text += f", max rel error {format_error(row.max_rel_error)}"
        if row.within_tolerance is False:
            text += f", above {row.tolerance} tolerance"
    return text


def tried_rows(finding: Finding, result: ProfileResult) -> list[ExperimentRow]:
    """The measured variants ``finding`` names (``Finding.variants`` and ``against``)."""
    named = (*finding.variants, *finding.against)
    return [r for r in result.experiments if r.ran and r.speedup > 0 and r.variant in named]


def with_measurements(found: list[Finding], result: ProfileResult) -> list[Finding]:
    """``found`` with each tried suggestion followed by what was measured; a suggestion
    measured slower says it is withdrawn."""
    out = []
    for finding in found:
        rows = tried_rows(finding, result)
        if not rows:
            out.append(finding)
            continue
        kept = [measured_text(r) for r in rows if not r.slower]
        withdrawn = [f"{measured_text(r)}: withdrawn" for r in rows if r.slower]
        suggestion = f"{finding.suggestion} [{'; '.join(withdrawn + kept)}]"
        out.append(dataclasses.replace(finding, suggestion=suggestion))
    return out
