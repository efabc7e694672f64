"""Runs one plan: a block of code warmed up, then profiled iterations under torch's profiler.

``plan`` resolves the options against the machine, ``execute`` runs the plan once and
returns its ``ProfileResult``. What calls it decides the rest: the front door
(``kernelmagic/api.py``: ``kernelmagic.profile`` and the magic) runs a plan once, or
hands it to ``live/experiments.py`` for ``--try``'s baseline and variants.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import gc
import inspect
import os
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from types import CodeType
from typing import Any

import torch

from kernelmagic.core.events import EventTable, PythonSamples
from kernelmagic.core.machine import CpuLoad
from kernelmagic.core.memory_rows import MemoryLedger
from kernelmagic.core.options import ProfileOptions
from kernelmagic.core.range_names import iteration_range, warmup_range
from kernelmagic.core.step_rows import RepeatedCall
from kernelmagic.live import cpu_load, memory_categories, memory_owners, torch_compat
from kernelmagic.live.compile_watch import Watch
from kernelmagic.live.device_peaks import device_info
from kernelmagic.live.progress import Progress, Reporter, Silent
from kernelmagic.live.python_sampler import Sampler
from kernelmagic.live.session import table_from_session
from kernelmagic.live.steps import RepeatedCalls, StepRanges
from kernelmagic.results.builder import RunFacts, build_result
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.iterations import iteration_windows, without_range


class ProfilerBusyError(RuntimeError):
    """Another torch profiler is already running in this process, or kernelmagic is already
    profiling (a ``%profile`` inside a ``%%profile`` cell), or the profiled code ran a torch
    profiler of its own, which stopped kernelmagic's."""


#: Said when a run starts inside another (``in_progress``).
NESTED = ("kernelmagic is already profiling in this process: a %profile, %%profile or "
          "kernelmagic.profile() cannot run inside the code it profiles")
#: Said when the profiled code stopped kernelmagic's session (``_profile`` checks it).
STOPPED = ("the profiled code ran a torch profiler of its own, which stopped kernelmagic's "
           "(torch keeps one session at a time): profile it with one or the other")

_in_progress = False  # a plan is running (``in_progress``)


@contextlib.contextmanager
def in_progress() -> Iterator[None]:
    """Held while a plan runs (``api.run``): a plan made or run inside it raises
    ProfilerBusyError (``NESTED``) before anything of its own runs."""
    global _in_progress
    if _in_progress:
        raise ProfilerBusyError(NESTED)
    _in_progress = True
    try:
        yield
    finally:
        _in_progress = False


@dataclass(frozen=True)
class Plan:
    """Options resolved against this machine, before anything runs."""

    options: ProfileOptions
    profiles_device: bool
    sort: str
    #: Called before each run of the code (warm-up and timed), outside the timed span:
    #: ``--try`` puts the random generators back there
    #: (``live/interleaved.py: restore_random_state``).
    before_each: Callable[[], None] | None = None


def plan(options: ProfileOptions) -> Plan:
    """Resolve options against the machine; ValueError or ProfilerBusyError if impossible."""
    profiles_device = not options.cpu_only and torch_compat.cuda_available()
    if options.gather:
        check_process_group()
    sort = options.resolve_sort(profiles_device)
    for flag, on in (("--counters", options.counters), ("--nsight", options.nsight)):
        if on and not profiles_device:
            reason = "--cpu-only was given" if options.cpu_only else "CUDA is not available"
            raise ValueError(f"{flag} needs a CUDA GPU (it works through CUPTI), but {reason}")
    if _in_progress:
        raise ProfilerBusyError(NESTED)
    if torch_compat.profiler_running():
        raise ProfilerBusyError(
            "a torch profiler is already running in this process (your own "
            "`with profile():`?); stop it before using %%profile"
        )
    return Plan(options=options, profiles_device=profiles_device, sort=sort)


_own_loop: asyncio.AbstractEventLoop | None = None


def _event_loop() -> asyncio.AbstractEventLoop:
    """kernelmagic's own event loop, kept across runs as IPython keeps its own."""
    global _own_loop
    if _own_loop is None or _own_loop.is_closed():
        _own_loop = asyncio.new_event_loop()
    return _own_loop


def run_to_completion(coro: Coroutine[Any, Any, Any],
                      loop_runner: Callable[[Coroutine[Any, Any, Any]], Any] | None = None
                      ) -> Any:
    """Run ``coro`` to its end on this thread, as IPython's autoawait runs a cell.

    With no event loop running here, ``loop_runner`` runs it (the magic passes the shell's
    ``loop_runner``: asyncio's, or trio's after ``%autoawait trio``), else kernelmagic's own
    loop. Inside a running loop (a Jupyter kernel's, which waits for this cell to end), it
    runs on kernelmagic's own loop, the kernel's set aside meanwhile: the profiler records
    only this thread, so the coroutine cannot go to another one.
    """
    __tracebackhide__ = True
    running = asyncio._get_running_loop()  # None outside a loop (get_running_loop raises)
    if running is None:
        if loop_runner is not None:
            return loop_runner(coro)
        return _event_loop().run_until_complete(coro)
    asyncio.events._set_running_loop(None)
    try:
        return _event_loop().run_until_complete(coro)
    finally:
        asyncio.events._set_running_loop(running)


def as_callable(target: Callable[[], Any] | CodeType, namespace: dict[str, Any] | None = None,
                local_namespace: dict[str, Any] | None = None,
                loop_runner: Callable[[Coroutine[Any, Any, Any]], Any] | None = None
                ) -> Callable[[], Any]:
    """A zero-argument callable running ``target`` (a callable, or code run in a namespace).

    Code compiled with top-level ``await`` (``ast.PyCF_ALLOW_TOP_LEVEL_AWAIT``) and
    ``async def`` functions make a coroutine at each call: it is run to completion
    (``run_to_completion``, with ``loop_runner``), so each iteration times all of it.
    """
    if isinstance(target, CodeType):
        globals_ = {} if namespace is None else namespace
        locals_ = globals_ if local_namespace is None else local_namespace
        if not target.co_flags & inspect.CO_COROUTINE:
            return functools.partial(exec, target, globals_, locals_)

        def run_async_code() -> None:
            __tracebackhide__ = True
            run_to_completion(eval(target, globals_, locals_), loop_runner)

        return run_async_code
    if not callable(target):
        raise TypeError(f"expected a callable or a code object, got {type(target).__name__}")
    if inspect.iscoroutinefunction(target):

        def run_coroutine_function() -> Any:
            __tracebackhide__ = True
            return run_to_completion(target(), loop_runner)

        return run_coroutine_function
    return target


def execute(fn: Callable[[], Any], run: Plan,
            on_trace_ready: Callable[[Any], None] | None = None,
            clock: Callable[[], float] = time.perf_counter,
            source_file: str | None = None,
            progress: Progress | None = None,
            free_memory: bool = True, cell_label: str = "") -> ProfileResult:
    """Warm up, profile ``run.options.iters`` iterations, and collect the result.

    Exceptions from ``fn`` propagate unchanged; the profiler is stopped and every
    range closed on the way out. A ``KeyboardInterrupt`` after at least one profiled
    iteration is re-raised too, carrying the result of the completed iterations as
    its ``.result`` (``result.interrupted_after`` says how many). ``clock`` (seconds)
    is replaceable for tests; ``source_file`` names the profiled code's file, whose
    functions ``--stack`` lists first (``cell_label``, ``cell[n]``, names its lines when
    it is a cell's); ``progress`` is told where the run stands
    between runs of ``fn``, never inside the timed span. ``free_memory=False`` leaves
    handing the freed heap back to the OS (``torch_compat.return_freed_memory``, a few
    ms) to the caller: the magic does it once the report is on screen. Dynamo and
    inductor are watched meanwhile (``compile_watch.Watch``): the result gets the compiled
    view's reasons and compiles; inductor's config is restored.
    """
    __tracebackhide__ = True
    opts = run.options
    report: Reporter = progress if progress is not None else Silent()
    report.start(opts.warmup, opts.iters)
    watch = Watch()  # (stopped in the finally below, whatever happens)
    try:
        warm = _warm_up(fn, opts, clock, report, source_file, run.before_each)
        if opts.nsight:  # Nsight owns CUPTI: no torch profiler session
            return _nsight_capture(fn, run, clock, report, warm.timings)
        torch_compat.warm_profiler(run.profiles_device)
        watch.profiling()
        prof = torch_compat.new_profiler(run.profiles_device, shapes=opts.shapes or opts.flops,
                                         memory=opts.memory, flops=opts.flops,
                                         stack=opts.stack)
        timed, result, table = _profile(prof, fn, run, clock, report, warm, source_file,
                                        watch, cell_label)
        result, interrupt = _one_more_run(result, fn, table, run, timed)
    finally:
        report.close()
        watch.stop()
    if opts.trace is not None:
        torch_compat.export_trace(prof, opts.trace)
    if on_trace_ready is not None:
        on_trace_ready(prof)
    else:  # nobody else holds the session: free it now
        torch_compat.release(prof)
        del prof
        if free_memory:
            torch_compat.return_freed_memory()
    _raise_if_cut_short(result, interrupt, timed.out_of_memory)
    if opts.gather:  # rank 0 gets a ManyRanksResult
        return gather(result, table)  # type: ignore[no-any-return]
    return result


# --- ``gather=True`` / ``--gather``: every rank profiles, rank 0 gets the many-ranks report.
# After the profiled run, each rank summarises its own result (``results/rank_summary.py``:
# no second parse) and sends ``(ProfileResult, RankSummary)`` to rank 0 with
# ``torch.distributed.gather_object``. Rank 0 returns a ``ManyRanksResult``, every other rank
# its own ``ProfileResult``. Every rank of the group must run the same profiled code (the
# gather is a collective). With NCCL, ``gather_object`` sends through the current CUDA
# device: call ``torch.cuda.set_device(local_rank)`` first.

def check_process_group() -> None:
    """ValueError (one line) unless torch.distributed is initialised in this process."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise ValueError("--gather needs an initialised torch.distributed process group "
                         "(call torch.distributed.init_process_group first)")


def gather(result: ProfileResult, table: EventTable) -> Any:
    """This rank's result and summary (with each step's communication time and the rank's
    collectives, from the ``table`` the result was built from) sent to rank 0."""
    import torch.distributed as dist

    from kernelmagic.results.rank_summary import summarize_with_events
    from kernelmagic.results.ranks import ManyRanksResult

    check_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    summary = summarize_with_events(result, table, iteration_windows(table, result.name),
                                    rank=rank, world_size=world,
                                    backend=str(dist.get_backend()), file="live")
    received: list[Any] | None = [None] * world if rank == 0 else None
    dist.gather_object((result, summary), received, dst=0)
    if received is None:
        return result
    return ManyRanksResult.from_parts([tuple(item) for item in received])  # type: ignore[misc]


@dataclass
class Timed:
    """What the timed loop measured: each completed iteration's wall time (seconds), the
    device's memory peak in each (``None``: not measured), what cut the loop short, and
    (in a profiler session) the machine's CPU load over the loop."""

    timings: list[float] = field(default_factory=list)
    device_peaks: list[float] | None = None
    interrupt: KeyboardInterrupt | None = None
    out_of_memory: BaseException | None = None  # --memory: reported, then re-raised
    cpu_load: CpuLoad | None = None  # how busy the machine's cores were meanwhile


@dataclass(frozen=True)
class WarmUp:
    """What the warm-up runs gave: each run's wall time (seconds, each run ends
    synchronised) and, without ``--steps``, the module the last run called most often
    at the top level (the steps hint, ``live/steps.py: RepeatedCalls``)."""

    timings: list[float]
    repeated_call: RepeatedCall | None = None


def _warm_up(fn: Callable[[], Any], opts: ProfileOptions, clock: Callable[[], float],
             report: Reporter, source_file: str | None,
             before_each: Callable[[], None] | None = None) -> WarmUp:
    """Run ``fn`` ``opts.warmup`` times unprofiled, inside the ``NAME/warmup`` range
    (``before_each`` before each run, untimed). Module calls are counted (``RepeatedCalls``:
    hooks) in the first run, which the unprofiled figure leaves out as cold, so the
    runs it times carry nothing of ours."""
    __tracebackhide__ = True
    repeats = RepeatedCalls(source_file) if opts.steps is None else None
    timings: list[float] = []
    if opts.warmup:
        sync = torch_compat.synchronize
        with torch_compat.labelled_range(warmup_range(opts.name)):
            for w in range(opts.warmup):
                if before_each is not None:
                    before_each()
                start = clock()
                with (repeats.counting(w == 0) if repeats is not None
                      else contextlib.nullcontext()):
                    fn()
                sync()
                timings.append(clock() - start)
                report.warmup(w + 1)
    return WarmUp(timings, repeats.found() if repeats is not None else None)


def _timed_loop(fn: Callable[[], Any], name: str, iters: int, clock: Callable[[], float],
                report: Reporter, timed: Timed, keep_out_of_memory: bool = False,
                before_each: Callable[[], None] | None = None) -> None:
    """The measured region, the same for a profiler session and for ``--nsight``: each
    iteration inside its ``NAME/iter i`` range, timed from the call of ``fn`` (the cell,
    or with ``--steps`` the cell under its step ranges) to the end of the synchronize
    after it, into ``timed``.

    Nothing else runs inside the timed span; the device's peak (when ``timed`` measures
    peaks), ``before_each`` and ``report`` run between iterations. A ``KeyboardInterrupt`` after at
    least one completed iteration ends the loop (``timed.interrupt``); so does running
    out of memory with ``keep_out_of_memory`` (``--memory``), the failed iteration
    counting as far as it ran. Anything else propagates.
    """
    __tracebackhide__ = True
    sync = torch_compat.synchronize
    timings, peaks = timed.timings, timed.device_peaks
    start = baseline = 0.0
    try:
        for i in range(iters):
            if peaks is not None:
                baseline = torch_compat.reset_device_peak()
            if before_each is not None:
                before_each()
            with torch_compat.labelled_range(iteration_range(name, i)):
                start = clock()
                fn()
                sync()
                timings.append(clock() - start)
            if peaks is not None:
                peaks.append(torch_compat.device_peak(baseline))
            report.iteration(i + 1)
    except KeyboardInterrupt as exc:
        if not timings:
            raise  # nothing completed: nothing to report
        timed.interrupt = exc  # report the completed iterations, then re-raise
    except Exception as exc:
        if not (keep_out_of_memory and memory_categories.is_out_of_memory(exc)):
            raise
        timed.out_of_memory = exc  # the memory report up to the failure
        timings.append(clock() - start)
        if peaks is not None:  # the failed iteration's rise counts too
            peaks.append(torch_compat.device_peak(baseline))


@contextlib.contextmanager
def _cyclic_gc_restored() -> Iterator[None]:
    """Leave the cyclic garbage collector on at the end if it was on at the start,
    whatever was paused in between."""
    __tracebackhide__ = True
    was_enabled = gc.isenabled()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _profile(prof: Any, fn: Callable[[], Any], run: Plan, clock: Callable[[], float],
             report: Reporter, warm: WarmUp, source_file: str | None, watch: Watch,
             cell_label: str = "") -> tuple[Timed, ProfileResult, EventTable]:
    """The timed loop inside the profiler session ``prof`` and the block's ``NAME``
    range (with ``--steps``, ``NAME/step j`` around each call of the target; with
    ``--python`` or ``--stack``, the Python stack sampled beside it); then what the
    finished session holds, as a result and its table."""
    __tracebackhide__ = True
    opts = run.options
    modules = torch_compat.module_ranges() if opts.modules else contextlib.nullcontext()
    quiet = (memory_categories.quiet_unknown_blocks() if opts.memory
             else contextlib.nullcontext())
    owners = memory_owners.watch_owners() if opts.memory else contextlib.nullcontext()
    steps = StepRanges(opts.steps, opts.name)
    run_once = fn if opts.steps is None else functools.partial(steps.run, fn)
    timed = Timed(device_peaks=[] if opts.memory and run.profiles_device else None)
    # the sampler walks each stack up to the loop that calls the cell, no further
    sampler = Sampler(_timed_loop.__code__) if opts.python or opts.stack else None
    sampling = sampler if sampler is not None else contextlib.nullcontext()
    cpus = cpu_load.cores()
    with _cyclic_gc_restored():
        with quiet, prof:
            with torch_compat.labelled_range(opts.name), modules, steps, sampling, \
                    owners as seen:
                report.profiling()
                load_before = cpu_load.snapshot(cpus)  # the counters, once before the loop
                _timed_loop(run_once, opts.name, opts.iters, clock, report, timed,
                            keep_out_of_memory=opts.memory, before_each=run.before_each)
                if timed.interrupt is not None:
                    torch_compat.synchronize()
                elif not torch_compat.profiler_running():  # (the code's own profiler
                    raise ProfilerBusyError(STOPPED)  # took the session and ended it)
                load_after = cpu_load.snapshot(cpus)  # and once after it
            report.reading()
            # Parsing the events (at profiler exit) and collecting rows allocate many
            # small objects; pausing the cyclic GC there, never in the user's code,
            # saves up to a third of that time on large profiles.
            gc.disable()
        timed.cpu_load = cpu_load.between(load_before, load_after, len(cpus),
                                          torch.get_num_threads())
        result, table = _result(prof, run, timed, warm, source_file, report,
                                sampler.samples() if sampler is not None else None,
                                cell_label, seen)
        result = watch.annotate(result)
    return timed, result, table


def _one_more_run(result: ProfileResult, fn: Callable[[], Any], table: EventTable,
                  run: Plan, timed: Timed) -> tuple[ProfileResult, KeyboardInterrupt | None]:
    """``--roofline`` and ``--counters``: each runs ``fn`` once more, after the timed
    iterations, unless those were cut short. Also returns what cut the run short, if
    anything did (a Ctrl-C in the counters' slow replayed run keeps the timed result)."""
    __tracebackhide__ = True
    opts = run.options
    if timed.interrupt is not None or timed.out_of_memory is not None:
        return result, timed.interrupt
    if opts.roofline:
        result = roofline_view(result, fn, table, run.profiles_device)
        # the roofs just measured or looked up are the device's figures the advice uses
        result = dataclasses.replace(result, device_info=device_info(run.profiles_device))
    if opts.counters:
        try:
            result = counters_view(result, fn)
        except KeyboardInterrupt as exc:
            return dataclasses.replace(
                result, views=[*result.views, "counters"],
                counters_note="no hardware counters: the counter run was interrupted"), exc
    return result, None


def _raise_if_cut_short(result: ProfileResult, interrupt: KeyboardInterrupt | None,
                        out_of_memory: BaseException | None) -> None:
    """Re-raise what cut the run short, carrying the result of what ran as ``.result``."""
    __tracebackhide__ = True
    if interrupt is not None:
        interrupt.result = result  # type: ignore[attr-defined]
        raise interrupt
    if out_of_memory is not None:
        out_of_memory.result = result  # type: ignore[attr-defined]
        out_of_memory.kernelmagic_partial = True  # type: ignore[attr-defined]
        raise out_of_memory


def roofline_view(result: ProfileResult, fn: Callable[[], Any], table: EventTable,
                  on_device: bool) -> ProfileResult:
    """``result`` with its roofline: ``fn`` runs once more, counted, not profiled; the
    counts are joined to the profiled run's ``table``."""
    from kernelmagic.live.device_peaks import peaks
    from kernelmagic.live.op_counter import count_ops
    from kernelmagic.views.roofline import collect_roofline, ops_to_open

    roofs = peaks("cuda" if on_device else "cpu")
    views = [*result.views, "roofline"]
    try:
        counts = count_ops(fn, ops_to_open(table, torch_compat.flop_formula_names()))
    except Exception as exc:  # the cell ran fine unprofiled: the counting mode is at fault
        note = f"the counting run failed ({type(exc).__name__}: {exc}); no roofline"
        return dataclasses.replace(result, views=views,
                                   roofline_peaks={**roofs.to_dict(), "note": note})
    torch_compat.synchronize()
    rows, roofs = collect_roofline(table, counts, roofs, on_device, name=result.name)
    return dataclasses.replace(result, views=views, roofline=rows,
                               roofline_peaks=roofs.to_dict())


def counters_view(result: ProfileResult, fn: Callable[[], Any],
                  table_of: Callable[[Callable[[], Any], Any], EventTable] | None = None,
                  forbidden: Callable[[], str] | None = None) -> ProfileResult:
    """``result`` with its hardware counters per kernel: ``fn`` runs once more under a
    counter session (kernels serialised and replayed, so after the timed iterations and
    never timed). Whatever fails, the timed result stays and ``counters_note`` says why
    in one line. ``table_of(fn, metrics)`` and ``forbidden()`` are replaceable for tests.
    """
    from kernelmagic.core.counter_metrics import CORE_METRICS, LIVE_METRICS, MAX_RANGES
    from kernelmagic.live import counter_run
    from kernelmagic.live.device_peaks import peaks
    from kernelmagic.views.counters import counter_ranges, counter_rows, join_note

    views = [*result.views, "counters"]
    why_not = (forbidden or counter_run.counters_forbidden)()
    if why_not:
        return dataclasses.replace(result, views=views, counters_note=why_not)
    dropped = ""
    # A metric the GPU lacks fails the whole session (no ranges, no error): ask once more
    # without the least common ones before giving up.
    for metrics in (LIVE_METRICS, CORE_METRICS):
        try:
            table = (table_of or counter_run.counter_events)(fn, metrics)
        except Exception as exc:  # the cell ran fine: the counter session is at fault
            note = (f"no hardware counters: the counter run failed ({type(exc).__name__}: "
                    f"{exc}); {counter_run.ENABLE_HINT} if it is a permission error")
            return dataclasses.replace(result, views=views, counters_note=note)
        if counter_ranges(table):
            break
        dropped = ", ".join(m for m in LIVE_METRICS if m not in CORE_METRICS)
    else:
        note = ("no hardware counters: CUPTI gave none (this torch build lacks Kineto's "
                "CUPTI range profiler, as builds without it or with CUDA 13 do, or the GPU "
                "lacks the metrics, or the driver forbids counters: "
                f"{counter_run.ENABLE_HINT}); --nsight under ncu reads them instead")
        return dataclasses.replace(result, views=views, counters_note=note)
    bandwidth = peaks("cuda").bytes_per_s
    # Counting replays each kernel: rates use each kernel's mean time per call as timed,
    # times the calls counted (fewer than a run's where CUPTI stopped at its range limit).
    call_time = {k.key: k.device_time for k in result.kernels}
    rows = counter_rows(table, call_time=call_time, peak_bytes_per_s=bandwidth)
    note = join_note(table)
    if len(counter_ranges(table)) >= MAX_RANGES:
        note += (f"; CUPTI counts at most {MAX_RANGES} kernels per session, so the kernels "
                 "after them in the run are not counted")
    if dropped:
        note += f"; read without {dropped} (CUPTI gave no counters with them)"
    return dataclasses.replace(result, views=views, counters=rows, counters_note=note)


def _nsight_capture(fn: Callable[[], Any], run: Plan, clock: Callable[[], float],
                    report: Reporter, warmup_timings: list[float]) -> ProfileResult:
    """``--nsight``: the timed loop between ``cudaProfilerStart`` and ``Stop`` inside the
    block's NVTX range; a result with timings and no rows."""
    __tracebackhide__ = True
    from kernelmagic.core.events import TableBuilder, derive_links
    from kernelmagic.live import counter_run

    timed = Timed()
    with torch_compat.labelled_range(run.options.name):
        report.profiling()
        counter_run.capture_start()
        try:
            _timed_loop(fn, run.options.name, run.options.iters, clock, report, timed,
                        before_each=run.before_each)
        finally:
            counter_run.capture_stop()
    result = _build(derive_links(TableBuilder().freeze()), run, timed, warmup_timings)
    _raise_if_cut_short(result, timed.interrupt, None)
    return result


def _result(prof: Any, run: Plan, timed: Timed, warm: WarmUp, source_file: str | None,
            report: Reporter, samples: PythonSamples | None = None,
            cell_label: str = "", owners: memory_owners.Owners | None = None,
            ) -> tuple[ProfileResult, EventTable]:
    """Everything the finished session holds, as a plain ``ProfileResult``, and the
    ``EventTable`` it was built from (``--roofline`` and ``--gather`` read it again).

    The raw events become one ``EventTable`` (``live/session.py``); every view is
    computed from it (``views/``), never from torch's ``function_events``. Interrupted
    (fewer timings than iterations asked for): the iteration cut short is left out,
    unless it ran out of memory: then it is the last one, up to the failure.
    """
    opts = run.options
    ran = len(timed.timings)
    table = table_from_session(prof, shapes=opts.shapes, flops=opts.flops,
                               on_events=report.reading, python=opts.stack)
    if ran < opts.iters and timed.out_of_memory is None:
        table = without_range(table, iteration_range(opts.name, ran))
    ledger = None
    if opts.memory:
        assert owners is not None  # (_profile watches the owners whenever opts.memory)
        ledger = memory_categories.ledger_or_note(prof, table, owners, lines=opts.stack)
        if timed.out_of_memory is not None:  # the analysis' own note stays after it
            failed = _out_of_memory_note(timed.out_of_memory, ran - 1)
            ledger = dataclasses.replace(
                ledger, note="; ".join(n for n in (failed, ledger.note) if n))
    return _build(table, run, timed, warm.timings, source_file, ledger,
                  warm.repeated_call, samples, cell_label), table


def _out_of_memory_note(exc: BaseException, iteration: int) -> str:
    """Where the run stopped, for the memory report: the error's type, the iteration,
    and the first line of its message."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return (f"{type(exc).__name__} in iteration {iteration}: the report runs up to the "
            "failure" + (f" ({first})" if first else ""))


def _build(table: EventTable, run: Plan, timed: Timed, warmup_timings: list[float],
           source_file: str | None = None, memory_ledger: MemoryLedger | None = None,
           repeated_call: RepeatedCall | None = None,
           samples: PythonSamples | None = None, cell_label: str = "") -> ProfileResult:
    """``build_result`` with what this run knows beyond its events."""
    opts = run.options
    facts = RunFacts(
        warmup=opts.warmup, warmup_timings=warmup_timings,
        device_name=torch_compat.device_name() if run.profiles_device else None,
        sort=run.sort, topk=opts.topk,
        matmul_precision=str(torch.get_float32_matmul_precision()),
        torch_version=str(torch.__version__),
        gpu_runtime=torch_compat.gpu_runtime(),
        trace_path=os.path.abspath(opts.trace) if opts.trace else "",
        capture="nsight" if opts.nsight else "",
        planned_iters=opts.iters if len(timed.timings) < opts.iters else 0,
        repeated_call=repeated_call,
        # the device's figures for the advice; Nsight's capture has no findings to advise
        device_info=None if opts.nsight else device_info(run.profiles_device),
        cpu_load=timed.cpu_load,
    )
    return build_result(
        table, name=opts.name, views=opts.asked_views(),
        timings=timed.timings, device="cuda" if run.profiles_device else "cpu",
        source_file=source_file,
        device_peaks=timed.device_peaks if timed.device_peaks is not None else [],
        memory_ledger=memory_ledger, memory_all=opts.memory_all,
        steps_target=opts.steps.label if opts.steps is not None else "",
        python_samples=samples, cell_label=cell_label, facts=facts)
