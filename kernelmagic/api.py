"""The front door: ``profile``, ``load`` and ``variant``, what a script, a notebook and the
magic call (``kernelmagic.profile`` is ``kernelmagic.api.profile``)::

    import kernelmagic
    result = kernelmagic.profile(lambda: block(x), iters=10, name="block")
    print(result.table())
    again = kernelmagic.load("trace.json.gz")

``run`` is the one place that decides between a plain run and ``--try``'s variants: the
runner (``live/runner.py``) runs one plan, and the experiments (``live/experiments.py``)
run one for the baseline and each variant. ``profile`` and the magic both call it.

Importing this module imports nothing heavy: ``profile`` imports torch when it runs,
``load`` never does, and ``variant`` registers a name without it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from types import CodeType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from kernelmagic.live.experiments import Cell
    from kernelmagic.live.progress import Progress, ProgressUpdate
    from kernelmagic.live.runner import Plan
    from kernelmagic.results.ranks import ManyRanksResult
    from kernelmagic.results.result import ProfileResult

__all__ = ["load", "profile", "run", "variant"]


def profile(target: Callable[[], Any] | CodeType, *, iters: int = 10, warmup: int = 3,
            topk: int = 10, sort: str | None = None, name: str = "profile",
            cpu_only: bool = False, namespace: dict[str, Any] | None = None,
            on_trace_ready: Callable[[Any], None] | None = None,
            progress: bool | Callable[[ProgressUpdate], Any] = False,
            **view_options: Any) -> ProfileResult | ManyRanksResult:
    """Profile ``target`` and return where its time went.

    ``target`` is a zero-argument callable, or a code object run in ``namespace``.
    It runs ``warmup`` times unprofiled, then ``iters`` times under the profiler.
    ``on_trace_ready`` receives the finished torch profiler session (for example to
    call ``export_chrome_trace`` or compare with ``key_averages()``). The deeper views
    are keyword flags as in the magic: ``memory``, ``shapes``, ``flops``, ``stack``,
    ``modules``, ``timeline``, ``roofline``, ``counters`` (CUDA: hardware counters per
    kernel, one more run), ``nsight`` (CUDA: cudaProfilerStart/Stop around the
    iterations for Nsight, no torch profiler), ``trace="run.json"`` (with ``force``), and
    ``steps=model`` (an ``nn.Module``, or a function bound by name in its module: each
    call during a profiled iteration is a step, ``result.steps``), and the options views
    declare themselves (``ViewSpec.flag``: ``threads=True`` for ``--threads``).
    ``gather=True`` inside an initialised ``torch.distributed`` group: every rank
    profiles, rank 0 returns a ``ManyRanksResult`` of all ranks (the others their own
    result); ValueError without a process group.

    ``progress=True`` shows one updating line on stderr once the run has taken more
    than about a second; a callable receives each ``ProgressUpdate`` instead.
    Ctrl-C (``KeyboardInterrupt``) after at least one profiled iteration stops the
    profiler and re-raises, with the completed iterations' result as ``exc.result``;
    with ``memory=True``, so does a ``torch.OutOfMemoryError`` in a profiled iteration
    (its result runs up to the failure). ``memory_all=True`` keeps the memory timeline
    of every iteration, not only the median one. ``variants=["bf16", "compile"]`` (or
    ``"auto"``) measures each variant after the baseline: ``result.experiments``
    (``kernelmagic/live/experiments.py``).
    """
    __tracebackhide__ = True
    from kernelmagic.core.options import ProfileOptions, check_keywords
    from kernelmagic.live import runner
    from kernelmagic.live.experiments import cell_of_callable
    from kernelmagic.live.progress import for_api
    from kernelmagic.views.registry import view_options as declared_by_views

    more = [o.name for o in declared_by_views()]  # the options views declare themselves
    check_keywords(view_options, more)
    fields = {k: v for k, v in view_options.items() if k not in more}
    options = ProfileOptions(iters=iters, warmup=warmup, topk=topk, sort=sort, name=name,
                             cpu_only=cpu_only, **fields,
                             more_views=tuple(k for k in more if view_options.get(k)))
    fn = runner.as_callable(target, namespace)
    code = target if isinstance(target, CodeType) else getattr(target, "__code__", None)
    reporter = for_api(progress)
    try:
        why_not = "a code object" if isinstance(target, CodeType) else ""
        return run(fn, runner.plan(options), cell=lambda: cell_of_callable(fn, why_not),
                   on_trace_ready=on_trace_ready, progress=reporter,
                   source_file=code.co_filename if code is not None else None)
    finally:
        if reporter is not None:
            reporter.close()


def run(fn: Callable[[], Any], plan: Plan, *, cell: Callable[[], Cell] | None = None,
        on_trace_ready: Callable[[Any], None] | None = None, source_file: str | None = None,
        progress: Progress | None = None, free_memory: bool = True,
        cell_label: str = "") -> ProfileResult | ManyRanksResult:
    """``fn`` run as ``plan`` says: profiled once (``runner.execute``), or, where the plan's
    options name variants (``--try``), the baseline and each variant
    (``experiments.run_with_variants``), on the ``Cell`` that ``cell()`` makes (its value
    and, for ``torch.compile``, its function; ``fn`` as a plain callable without it).
    ``on_trace_ready`` is given the session of a plain run only."""
    __tracebackhide__ = True
    from kernelmagic.live import runner

    with runner.in_progress():  # (a run inside the profiled code is refused at once)
        if plan.options.variants is None:
            return runner.execute(fn, plan, on_trace_ready=on_trace_ready,
                                  source_file=source_file, progress=progress,
                                  free_memory=free_memory, cell_label=cell_label)
        from kernelmagic.live import experiments, variants

        names = variants.parse(plan.options.variants)
        made = cell() if cell is not None else experiments.cell_of_callable(fn)
        return experiments.run_with_variants(made, plan, names, source_file=source_file,
                                             progress=progress, free_memory=free_memory,
                                             cell_label=cell_label)


def load(path: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
         executor: Executor | None = None) -> ProfileResult | ManyRanksResult:
    """Read a profile written by ``result.save(path)``, or a Kineto / Chrome trace written
    by torch.

    ``path`` may be a kernelmagic profile (JSON), a trace (``.json``, ``.json.gz``,
    ``.pt.trace.json[.gz]``): a ``ProfileResult``; or a folder of traces or a list of
    trace files, one per rank, or a saved many-ranks result: a ``ManyRanksResult``
    (``kernelmagic/io/ranks.py``), the files parsed on ``executor`` (default: a local process
    pool). ProfileFileError (a ValueError; ``TraceFileError`` for traces) with a one-line
    message naming the file otherwise.
    """
    from kernelmagic.io.storage import read

    return read(path, executor)


def variant(name: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
    """Register a context-manager function as ``--try name`` for this session::

        @kernelmagic.variant("channels_last")
        def channels_last():
            model.to(memory_format=torch.channels_last)
            yield
            model.to(memory_format=torch.contiguous_format)

    The function takes no arguments; a generator function is made a context manager
    (as ``contextlib.contextmanager`` does). Registering a name again replaces it;
    a built-in name is a ValueError.
    """
    from kernelmagic.live.variants import register

    return register(name)
