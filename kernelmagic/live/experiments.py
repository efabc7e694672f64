"""``%%profile --try``: the cell's baseline, then each variant measured the same way.

The front door (``kernelmagic/api.py: run``) calls ``run_with_variants`` when the options
name variants; the runner knows nothing of them.

The baseline is profiled as any run is (``runner.execute``); each variant then gets its
own warm-up and the same number of timed iterations through the same entry point, with
the variant's context manager (``live/variants.py``) entered around each run. Its row
(``core/experiment_rows.py``) holds the speed-up and noise verdict of ``Comparison``
(``results/compare.py``), the numerical cost (the cell's value from the variant's last
run against the baseline's, in float64) and the variant's own ``ProfileResult``.

A variant that fails is a row with its one-line error, and the others still run; Ctrl-C
keeps the rows measured so far (``exc.result``), as the runner keeps its iterations.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import statistics
import symtable
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelmagic.core.experiment_rows import TOLERANCES, ExperimentRow
from kernelmagic.core.machine import CpuLoad
from kernelmagic.core.timing import paired_speedup
from kernelmagic.core.units import counted
from kernelmagic.live import cpu_load, interleaved, runner, torch_compat, variants
from kernelmagic.live.progress import Progress
from kernelmagic.results.result import ProfileResult

#: What a row says instead of an error when the baseline's own value moves between runs.
BASELINE_MOVES = ("the cell's value differs between runs of the baseline: numerical error "
                  "not measured")
#: The name the cell takes as a function for ``torch.compile`` (never bound anywhere).
CELL_FUNCTION = "__kernelmagic_cell__"


class LastValue:
    """``fn`` that remembers what its last call returned (the cell's value)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.value: Any = None

    def __call__(self) -> Any:
        __tracebackhide__ = True
        self.value = self.fn()
        return self.value


@dataclass(frozen=True)
class Cell:
    """What the experiments run: ``run`` returns the cell's value (its last expression,
    as ``Out[n]``; None without one); ``make_function()`` returns the cell as one
    function for ``torch.compile`` (None when it cannot be one: ``why_not_function``
    says why)."""

    run: Callable[[], Any]
    make_function: Callable[[], Callable[[], Any]] | None
    has_value: bool = True
    why_not_function: str = ""


def cell_of_callable(fn: Callable[[], Any], cannot_compile: str = "") -> Cell:
    """The plain API's target: its return value is the value, it compiles as it is. With
    ``cannot_compile`` (why not: "a code object"), code run as it is: no value, no function."""
    if cannot_compile:
        return Cell(run=fn, make_function=None, has_value=False,
                    why_not_function=cannot_compile)
    return Cell(run=fn, make_function=lambda: fn)


def cell_of_source(source: str, filename: str, flags: int, globals_: dict[str, Any],
                   locals_: dict[str, Any]) -> Cell:
    """A cell's (transformed) source as a ``Cell``, compiled under ``filename`` (the one
    IPython's cache knows, so tracebacks show the cell's lines) with ``flags``.

    ``run`` execs all but a last expression, then evaluates it. ``make_function()``
    makes the body a ``def __kernelmagic_cell__():`` with every name the cell assigns
    declared ``global``, whose globals are a copy of the user namespace taken then:
    ``torch.compile`` installs its compiled code as globals of the function (names
    such as ``__compiled_fn_1``), and they must not land in the user's namespace.
    """
    tree = ast.parse(source, filename)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    body = tree.body[:-1] if last is not None else tree.body
    head = compile(ast.Module(body=body, type_ignores=[]), filename, "exec", flags, True)
    tail = (compile(ast.Expression(body=last.value), filename, "eval", flags, True)
            if last is not None else None)

    def run_cell() -> Any:
        __tracebackhide__ = True
        exec(head, globals_, locals_)
        return eval(tail, globals_, locals_) if tail is not None else None

    code = _function_code(body, last, source, filename, flags)

    def make_function() -> Callable[[], Any]:
        return types.FunctionType(code, dict(globals_), CELL_FUNCTION)

    return Cell(run=run_cell, make_function=make_function, has_value=last is not None)


def _function_code(body: list[ast.stmt], last: ast.Expr | None, source: str, filename: str,
                   flags: int) -> types.CodeType:
    table = symtable.symtable(source, filename, "exec")
    assigned = sorted(s.get_name() for s in table.get_symbols()
                      if s.is_assigned() or s.is_imported())
    stub = ast.parse(f"def {CELL_FUNCTION}():\n    pass")
    func = stub.body[0]
    assert isinstance(func, ast.FunctionDef)
    func.body = [*([ast.Global(names=assigned)] if assigned else []), *body,
                 ast.Return(value=last.value if last is not None else None)]
    ast.fix_missing_locations(stub)
    module = compile(stub, filename, "exec", flags, True)
    return next(c for c in module.co_consts if isinstance(c, types.CodeType))


# --- the numerical cost ------------------------------------------------------------------


def tensors_in(value: Any) -> list[Any] | str:
    """The tensors of a cell's value (a tensor; tuples, lists and dicts of them; an
    object with tensor attributes, as a model output), in a fixed order; a reason
    when there are none to compare."""
    import torch

    if value is None:
        return "the cell has no value"
    found: list[Any] = []

    def walk(v: Any, depth: int) -> None:
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif depth > 8:
            return
        elif isinstance(v, (tuple, list)):
            for item in v:
                walk(item, depth + 1)
        elif isinstance(v, dict):
            for key in v:
                walk(v[key], depth + 1)
        elif hasattr(v, "__dict__") and not isinstance(v, type):
            for item in vars(v).values():
                walk(item, depth + 1)

    walk(value, 0)
    return found or f"the cell's value ({type(value).__name__}) holds no tensor"


def snapshot(value: Any) -> tuple[list[Any], list[str]] | str:
    """The value's tensors as float64 copies on the CPU, with their dtypes: later runs
    may overwrite the originals in place. A reason string when there are none."""
    import torch

    found = tensors_in(value)
    if isinstance(found, str):
        return found
    dtypes = [torch_compat.dtype_name(t.dtype) for t in found]
    return [t.detach().to("cpu", torch.float64, copy=True) for t in found], dtypes


def numerical_cost(base: tuple[list[Any], list[str]] | str,
                   other: tuple[list[Any], list[str]] | str,
                   tolerance: str | None) -> dict[str, Any]:
    """The ``ExperimentRow`` fields that compare a variant's value with the baseline's:
    max |a - b|, max |a - b| / max |b|, the tolerance applied and whether it held:
    the relative error within the dtype's ``rtol``, or the absolute one within its
    ``atol``. (Relative to the largest magnitude, not element by element: a value
    near 0 in the baseline would make any rounding look like a 100% error.)"""
    if isinstance(base, str) or isinstance(other, str):
        reason = base if isinstance(base, str) else other
        return {"numerics": f"not comparable: {reason}"}
    (a_list, _), (b_list, dtypes) = other, base
    shapes_a, shapes_b = [tuple(t.shape) for t in a_list], [tuple(t.shape) for t in b_list]
    if shapes_a != shapes_b:
        return {"numerics": f"not comparable: shapes differ ({_shapes(shapes_b)} in the "
                            f"baseline, {_shapes(shapes_a)} here)"}
    name = _tolerance_name(tolerance, dtypes + list(other[1]))
    rtol, atol = TOLERANCES.get(name, (0.0, 0.0))
    abs_err, scale = 0.0, 0.0
    for a, b in zip(a_list, b_list, strict=True):
        if a.numel():
            abs_err = max(abs_err, float((a - b).abs().max()))
            scale = max(scale, float(b.abs().max()))
    rel = abs_err / scale if scale > 0 else (0.0 if abs_err == 0 else float("inf"))
    return {"max_abs_error": abs_err, "max_rel_error": rel, "tolerance": name,
            "within_tolerance": rel <= rtol or abs_err <= atol}


def _shapes(shapes: list[tuple[int, ...]]) -> str:
    return ", ".join("[" + ", ".join(map(str, s)) + "]" for s in shapes)


def _tolerance_name(tolerance: str | None, dtypes: list[str]) -> str:
    """The coarsest of the variant's precision and the values' dtypes (integers and
    booleans compare exactly: "exact")."""
    return max((d for d in [*dtypes, tolerance] if d in TOLERANCES),
               key=lambda d: TOLERANCES[d][0], default="exact")


# --- running -----------------------------------------------------------------------------


class VariantProgress(Progress):
    """The baseline's progress sink, each update headed ``variant i/n NAME``; silent
    until ``delay`` after the experiments began (not after each variant's start)."""

    def __init__(self, base: Progress, label: str, began: float, compiles: bool) -> None:
        super().__init__(base.sink, base.clock, base.delay, base.redraw)
        self.began = began
        self.label = label
        self.note = "compiling" if compiles else ""

    def start(self, warmup: int, iters: int) -> None:
        self.warmup_total, self.iters_total = warmup, iters
        self._update("warmup", 0, warmup, final=True)

    def warmup(self, done: int) -> None:
        self.note = ""
        super().warmup(done)


def one_line(exc: BaseException) -> str:
    """``TypeError: first line of the message``."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def run_with_variants(cell: Cell, run: runner.Plan, names: Sequence[str], *,
                      source_file: str | None = None, progress: Progress | None = None,
                      free_memory: bool = True, cell_label: str = "") -> ProfileResult:
    """The baseline's result with ``experiments``: one row per variant in ``names``
    (``variants.parse``'s; ``auto`` becomes the variants the baseline's findings
    suggest and this device runs). Errors of the baseline propagate as the runner's.
    ``cell_label`` (``cell[n]``) names the lines of ``source_file`` in the baseline's and
    every variant's Python rows alike.

    Every call of the cell, baseline and variants alike, starts from the random state
    taken here (``interleaved.capture_random_state``), and that state is the user's again
    at the end.
    The baseline and each variant are profiled (the breakdown), then timed together in
    interleaved rounds, unprofiled (``live/interleaved.py``): the speed-ups come from
    those."""
    __tracebackhide__ = True
    state = interleaved.capture_random_state()
    run = dataclasses.replace(run, before_each=lambda: interleaved.restore_random_state(state))
    try:
        recorder = LastValue(cell.run)
        baseline = runner.execute(recorder, run, source_file=source_file, progress=progress,
                                  free_memory=free_memory, cell_label=cell_label)
        base_value = snapshot(recorder.value)
        recorder.value = None
        chosen, note = resolve(names, baseline, run.profiles_device)
        tried: list[Tried] = []
        began = time.perf_counter() if progress is None else progress.clock()
        try:
            for i, name in enumerate(chosen):
                label = f"variant {i + 1}/{len(chosen)} {name}"
                tried.append(measure(variants.lookup(name), cell, run, base_value, source_file,
                                     progress, label, began, free_memory, cell_label))
        except KeyboardInterrupt as exc:
            rows = [t.row for t in tried]
            rows.append(ExperimentRow(chosen[len(rows)], error="interrupted (Ctrl-C): the "
                                      "variants before it are kept, without their speed-ups"))
            exc.result = _with_rows(baseline, rows, note)  # type: ignore[attr-defined]
            raise
        return _interleaved(baseline, tried, recorder, base_value, run, progress, note)
    finally:
        interleaved.restore_random_state(state)


def _interleaved(baseline: ProfileResult, tried: list[Tried], recorder: LastValue,
                 base_value: Any, run: runner.Plan, progress: Progress | None,
                 note: str) -> ProfileResult:
    """The variants that ran, timed with the baseline in interleaved rounds; each row
    gets its speed-up from them. A Ctrl-C keeps the completed rounds."""
    __tracebackhide__ = True
    ran = [t for t in tried if t.run is not None]
    if not ran:
        return _with_rows(baseline, [t.row for t in tried], note)
    fns = [recorder, *(t.run for t in ran if t.run is not None)]
    for fn in fns:  # once each before the rounds: caches as they will be in them
        if run.before_each is not None:
            run.before_each()
        fn()
    # A second value of the baseline, from the same random numbers: where it differs from
    # the first, the cell's value moves by itself, and no error can be put on a variant.
    differs = not same_value(base_value, snapshot(recorder.value))
    batch = interleaved.calls_per_sample(baseline.unprofiled_s or baseline.stats.median)
    cpus = cpu_load.cores()
    before = cpu_load.snapshot(cpus)
    rounds = interleaved.time_rounds(
        fns, batch, interleaved.max_rounds(run.options.iters), before_each=run.before_each,
        decided=_decided,
        on_round=functools.partial(_show_round, progress) if progress is not None else None)
    load = cpu_load.between(before, cpu_load.snapshot(cpus), len(cpus),
                            torch.get_num_threads())
    rows = {t.row.variant: t.row for t in tried}
    predicted = predictions(baseline)
    for i, t in enumerate(ran, start=1):
        rows[t.row.variant] = dataclasses.replace(
            _timed_row(t.row, rounds, i, differs, load),
            predicted_speedup=predicted.get(t.row.variant))
    result = dataclasses.replace(_with_rows(baseline, list(rows.values()), note),
                                 unprofiled_timings=list(rounds.samples[0]))
    if rounds.interrupt is not None:
        rounds.interrupt.result = result  # type: ignore[attr-defined]
        raise rounds.interrupt
    return result


def predictions(baseline: ProfileResult) -> dict[str, float]:
    """Per variant a finding names, the largest speed-up the dependency model predicts for
    that finding's change (``Finding.saves_us`` of ``iteration_us``, from ``what_if``):
    what the experiments table shows beside the measured one."""
    out: dict[str, float] = {}
    for f in baseline.findings():
        if f.saves_us is None or f.iteration_us <= 0 or f.saves_us >= f.iteration_us:
            continue
        speed = f.iteration_us / (f.iteration_us - f.saves_us)
        for name in f.variants:
            out[name] = max(out.get(name, 0.0), speed)
    return out


def _show_round(progress: Progress, done: int, most: int) -> None:
    """The rounds on the progress line: ``interleaved timing: round 3/24``."""
    progress.label, progress.note = "interleaved timing", ""
    progress.rounds(done, most)


def _decided(samples: list[list[float]]) -> bool:
    """Whether every variant's interval is decided: beyond the noise, or within 1 ±
    ``MIN_EFFECT`` (no more rounds would change what the row says)."""
    speeds = (paired_speedup(samples[0], other) for other in samples[1:])
    return all(s.beyond_noise or s.no_change for s in speeds)


def _timed_row(row: ExperimentRow, rounds: interleaved.Rounds, i: int,
               differs: bool, load: CpuLoad) -> ExperimentRow:
    """The row of variant ``i`` from the rounds; where other processes kept the cores
    busy while they ran (``load.busy``, the busy-machine finding's rule), no verdict:
    on a 2-core machine with two other processes spinning, variants that change nothing
    were called 3x to 15x faster or slower beyond the noise in 8 of 459 rows (one callable
    slow in every round of a run, which shuffling the order does not cancel)."""
    speed = paired_speedup(rounds.samples[0], rounds.samples[i])
    fields: dict[str, Any] = dict(
        median_us=statistics.median(rounds.samples[i]) * 1e6, speedup=speed.speedup,
        speedup_low=speed.low, speedup_high=speed.high, verdict=speed.verdict(),
        beyond_noise=speed.beyond_noise, rounds=rounds.count, batch=rounds.batch,
        round_timings=list(rounds.samples[i]))
    if load.busy:
        why = (f"not judged: other processes kept {load.other_cores:.1f} of "
               f"{counted(load.cores, 'core')} busy while the rounds ran")
        head = speed.verdict().rpartition(": ")[0]
        fields.update(beyond_noise=False, not_judged=why, verdict=f"{head}: {why}")
    if differs:
        fields.update(max_abs_error=None, max_rel_error=None, tolerance="",
                      within_tolerance=None, numerics=BASELINE_MOVES)
    return dataclasses.replace(row, **fields)


def _with_rows(baseline: ProfileResult, rows: list[ExperimentRow], note: str) -> ProfileResult:
    return dataclasses.replace(baseline, experiments=rows, experiments_note=note)


def resolve(names: Sequence[str], baseline: ProfileResult,
            on_device: bool) -> tuple[list[str], str]:
    """``names`` with ``auto`` replaced by what the findings suggest (in place), and
    a note when ``auto`` found nothing to try."""
    if variants.AUTO not in names:
        return list(names), ""
    found = baseline.findings()
    suggested = variants.suggested([v for f in found for v in f.variants],
                                   [v for f in found for v in f.against], on_device)
    out = list(dict.fromkeys(item for name in names
                             for item in (suggested if name == variants.AUTO else [name])))
    note = ("" if suggested else "--try auto: no finding suggests a variant this device "
            "can run")
    return out, note


@dataclass(frozen=True)
class Tried:
    """A variant's row after its profiled run, and the callable the rounds time (its
    context around the cell; None when it did not run)."""

    row: ExperimentRow
    run: Callable[[], Any] | None = None


def measure(variant: variants.Variant, cell: Cell, run: runner.Plan, base_value: Any,
            source_file: str | None, progress: Progress | None, label: str, began: float,
            free_memory: bool, cell_label: str = "") -> Tried:
    """One variant profiled as the baseline was, its context around each run: its row
    (without a speed-up yet) and what the interleaved rounds call."""
    __tracebackhide__ = True
    why = variant.why_not(run.profiles_device)
    if not why and variant.compiles and cell.make_function is None:
        why = f"the cell cannot be compiled as a function ({cell.why_not_function})"
    if why:
        return Tried(ExperimentRow(variant.name, variant.label, list(variant.advice),
                                   error=why, skipped=True))
    recorder = LastValue(_under(variant, run.profiles_device, _target(variant, cell)))
    opts = run.options
    variant_opts = dataclasses.replace(
        opts, name=f"{opts.name} [{variant.name}]", trace=None, force=False,
        roofline=False, counters=False, variants=None,
        steps=None,  # --steps' hooks (timed runs only) would make compiled code recompile
        warmup=max(opts.warmup, 1) if variant.compiles else opts.warmup)
    shown = (VariantProgress(progress, label, began, variant.compiles)
             if progress is not None else None)
    try:
        result = runner.execute(recorder, dataclasses.replace(run, options=variant_opts),
                                source_file=source_file, progress=shown,
                                free_memory=free_memory, cell_label=cell_label)
    except Exception as exc:  # the variant failed; the baseline and the others stand
        return Tried(ExperimentRow(variant.name, variant.label, list(variant.advice),
                                   error=one_line(exc)))
    value = snapshot(recorder.value)
    recorder.value = None
    return Tried(_row(variant, result, numerical_cost(base_value, value, variant.tolerance)),
                 recorder)


def _target(variant: variants.Variant, cell: Cell) -> Callable[[], Any]:
    if not variant.compiles or cell.make_function is None:
        return cell.run
    import torch

    return torch.compile(cell.make_function(), mode=variant.compile_mode or None)


def _under(variant: variants.Variant, on_device: bool,
           fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` run inside the variant's context, entered and left around each call."""

    def run_variant() -> Any:
        __tracebackhide__ = True
        with variant.context(on_device):
            return fn()

    return run_variant


def _row(variant: variants.Variant, result: ProfileResult,
         numerics: dict[str, Any]) -> ExperimentRow:
    """The row of a variant profiled: its own report, compile time and numerical cost;
    ``verdict`` says the speed-up is still to come (the interleaved rounds give it)."""
    compile_us = (result.warmup_timings[0] * 1e6
                  if variant.compiles and result.warmup_timings else None)
    return ExperimentRow(
        variant.name, label=variant.label, advice=list(variant.advice),
        median_us=result.stats.median * 1e6, profiled_us=result.stats.median * 1e6,
        verdict="no speed-up: the interleaved rounds did not run",
        compile_us=compile_us, iters=result.iters, result=result, **numerics)


def same_value(a: tuple[list[Any], list[str]] | str,
               b: tuple[list[Any], list[str]] | str) -> bool:
    """Whether two snapshots hold the same values, bit for bit (two "no value" reasons
    count as the same)."""
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str)
    import torch

    return len(a[0]) == len(b[0]) and all(
        x.shape == y.shape and bool(torch.equal(x.nan_to_num(), y.nan_to_num()))
        for x, y in zip(a[0], b[0], strict=True))
