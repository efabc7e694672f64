"""Plain-language findings: what the profile shows, the numbers behind it, what to try.

Each rule is a pure function of a ``ProfileResult`` that returns a ``Finding`` or None.
A finding carries ``share``, the fraction of the iteration it explains; ``find`` lists
the findings by it, largest first (ties: the order of ``RULES``), so a report leads with
the biggest problem it can see. A finding that suggests a change is priced by the
dependency model and ranked by what it saves instead; one that saves under
``NEGLIGIBLE_SAVING`` of the iteration says what bounds the iteration rather than
suggest it (``base.bound_by``), or is left out (``SILENT_WHEN_NEGLIGIBLE``). Thresholds
are constants of each rule's module (import them from there); the op and call names the
rules recognise are in ``kernelmagic/core/op_names.py``.

One module per subject, each importing only ``base`` and the subjects it defers to:

- ``base``: ``Finding``, and the iteration's length and shares every rule reads
- ``startup``: CUDA start-up or first-call set-up inside the profiled window
  (``startup_in_window``); the other rules do not blame that time on anything else
- ``device``: which lower precision the device runs faster (``precision``, the advice
  the other rules word from it); float32 convolutions holding a GPU's time (``fp32_conv``)
- ``gpu``: the GPU idle most of the iteration, by the ``gpu_idle`` view's causes
  (``gpu_idle``, ``idle_causes``), launch-bound, host-device syncs, float32 matmuls
- ``python``: on the CPU, most of the iteration outside any op (``python_between_ops``),
  named by line with the ``python`` view
- ``ops``: one op dominating (silent on what the rules above explain), small elementwise ops,
  dropout (or CUDA batch norm) in training mode with no backward pass
- ``measurement``: a busy machine (other processes competing for the CPU), a trace timed
  while the GPU's counters were counted, a slow first run, a noisy measurement; memory
  every iteration keeps (``--memory``)
- ``compiled``: torch.compile's graph breaks, recompiles in the loop, mostly-eager cells
- ``steps``: ``--steps``' steps: overhead-bound, slowing down, a slow first step, time
  between the steps
- ``roofline``: the roofline's regimes (``--roofline``), listed by ``find`` with the rest
- ``counters``: measured DRAM traffic (``--counters``): near the peak, or far above the
  roofline's modelled bytes (poor reuse)
- ``ranks``: communication not hidden by compute (``communication_bound``); across the
  ranks of a distributed run (straggler, collective skew, communication-bound), rules of
  ``RankSummary`` objects with their own ``find``

After ``--try``, ``find`` has the findings whose advice a variant tried quote what was
measured (``with_measurements``, below): a finding names the variants its suggestion tries
(``Finding.variants``: ``bf16``, ``compile``, ``threads=1``) and those it advises against
(``Finding.against``); one that names a variant measured gets its speed-up and numerical
error after the suggestion, and advice measured slower, beyond the noise, is withdrawn with
its figure, so the report never recommends what this very run showed to be slower.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kernelmagic.core.experiment_rows import ExperimentRow
from kernelmagic.core.units import format_error, speedup_text
from kernelmagic.findings.base import NEGLIGIBLE_SAVING, Finding, bound_by
from kernelmagic.findings.compiled import RULES as COMPILED_RULES
from kernelmagic.findings.counters import RULES as COUNTER_RULES
from kernelmagic.findings.device import fp32_conv
from kernelmagic.findings.gpu import fp32_matmul, gpu_idle, launch_bound, sync_points
from kernelmagic.findings.measurement import (
    busy_machine,
    memory_growth,
    noisy,
    slow_warmup,
    timed_while_counting,
)
from kernelmagic.findings.ops import dominant_op, fusable_elementwise, train_mode_under_no_grad
from kernelmagic.findings.python import python_between_ops
from kernelmagic.findings.ranks import communication_bound
from kernelmagic.findings.roofline import RULES as ROOFLINE_RULES
from kernelmagic.findings.startup import startup_in_window
from kernelmagic.findings.steps import RULES as STEPS_RULES
from kernelmagic.results.result import ProfileResult

__all__ = ["RULES", "SILENT_WHEN_NEGLIGIBLE", "find", "priced", "weighed"]

RULES: list[Callable[[ProfileResult], Finding | None]] = [
    # share 1, whatever their size: a leak runs out of memory however fast it is; on a
    # busy machine, or while the counters were counted, every other figure is off
    memory_growth, busy_machine, timed_while_counting,
    communication_bound, startup_in_window, gpu_idle, python_between_ops,
    train_mode_under_no_grad, dominant_op,
    launch_bound, sync_points, fp32_matmul, fp32_conv, fusable_elementwise, slow_warmup, noisy,
    *COMPILED_RULES,  # torch.compile's
    *STEPS_RULES,  # --steps'
]


#: Rules whose finding is only its claim that the change would pay: left out when the model
#: says it saves under ``NEGLIGIBLE_SAVING`` (launch-bound: the launches do not bound the
#: iteration then, and ``gpu_idle`` says what the CPU does while the GPU waits).
SILENT_WHEN_NEGLIGIBLE = frozenset({"launch_bound"})


def find(result: ProfileResult) -> list[Finding]:
    """Every rule's finding for ``result`` (``RULES``, then the roofline's), with what the
    dependency model predicts its change saves at most; the largest saving first (as a
    share of the iteration; ``share`` for a finding the model cannot price); equal
    shares keep the rules' order. A change that saves under ``NEGLIGIBLE_SAVING`` is not
    suggested (``weighed``), so it never ranks above one that saves more."""
    rules = RULES + ROOFLINE_RULES if result.roofline else RULES
    if result.counters:  # --counters, or a trace recorded with profiler metrics
        rules = rules + COUNTER_RULES
    said = [f for f in (rule(result) for rule in rules) if f is not None]
    found = [weighed(result, f) for f in priced(result, said)]
    found = sorted((f for f in found if f is not None),
                   key=lambda f: -(f.saves_share if f.saves_share is not None else f.share))
    return with_measurements(found, result) if result.experiments else found


def priced(result: ProfileResult, found: list[Finding]) -> list[Finding]:
    """Each finding with ``saves_us``: the iteration without its rows' time (``what_if``
    with ``inf``), where it names rows the median iteration holds; all of them priced in
    one replay of the model (``ProfileResult.saves_at_most``)."""
    answers = iter(result.saves_at_most([(f.rows, f.side) for f in found if f.rows]))
    out = []
    for f in found:
        answer = next(answers) if f.rows else None
        out.append(f if answer is None else
                   dataclasses.replace(f, saves_us=answer[0], iteration_us=answer[1]))
    return out


def weighed(result: ProfileResult, finding: Finding) -> Finding | None:
    """A priced ``finding`` whose change saves under ``NEGLIGIBLE_SAVING`` of the iteration
    says what bounds it instead (``bound``), or is None for ``SILENT_WHEN_NEGLIGIBLE``'s
    rules; any other finding as it is."""
    share = finding.saves_share
    if share is None or share >= NEGLIGIBLE_SAVING:
        return finding
    if finding.rule in SILENT_WHEN_NEGLIGIBLE:
        return None
    return dataclasses.replace(finding, bound=bound_by(result, finding))


def _measured_text(row: ExperimentRow) -> str:
    """``bf16 autocast: measured 1.90x faster, max rel error 3.1e-03`` (with "within
    the noise" when its interval is not beyond 1 ± 3%, and the tolerance when it is
    exceeded)."""
    text = f"{row.title}: measured {speedup_text(row.speedup)}"
    if row.not_judged:  # (the machine was busy: neither within nor beyond the noise)
        text += f" ({row.not_judged})"
    elif not row.beyond_noise:
        text += " (within the noise)"
    if row.numerics and row.max_rel_error is None and "baseline" in row.numerics:
        text += "; numerical error not measured (the baseline's own value moves)"
    if row.max_rel_error is not None:
        text += f", max rel error {format_error(row.max_rel_error)}"
        if row.within_tolerance is False:
            text += f", above {row.tolerance} tolerance"
    return text


def with_measurements(found: list[Finding], result: ProfileResult) -> list[Finding]:
    """``found`` with each tried suggestion (a variant measured that ``Finding.variants`` or
    ``against`` names) followed by what was measured; one measured slower says it is
    withdrawn."""
    out = []
    for finding in found:
        named = (*finding.variants, *finding.against)
        rows = [r for r in result.experiments if r.ran and r.speedup > 0 and r.variant in named]
        if not rows:
            out.append(finding)
            continue
        kept = [_measured_text(r) for r in rows if not r.slower]
        withdrawn = [f"{_measured_text(r)}: withdrawn" for r in rows if r.slower]
        suggestion = f"{finding.suggestion} [{'; '.join(withdrawn + kept)}]"
        out.append(dataclasses.replace(finding, suggestion=suggestion))
    return out
