"""The options of a run, declared once, and validated in one place.

Each ``ProfileOptions`` field is declared with its option (``option(...)``: flags, help,
and what the option implies), and every other list of options is derived from those
declarations: the magic's flags and ``%%profile?`` help, the API's keyword check, the
deeper views, what a trace holds, what ``--nsight`` excludes, and how a trace records the
same thing. A view declared in a module of its own may bring its own option instead
(``ViewSpec.flag``, ``views/registry.py``): ``more_views`` holds those asked for.

A bad value raises ``ValueError`` with a one-line message that names the option and what
it accepts; the magic turns that into IPython's ``UsageError``, the
plain-Python API lets it propagate.
"""

from __future__ import annotations

import inspect
import keyword
import os
import re
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from kernelmagic.core.range_names import MODULE_RANGE, STEP_RANGE
from kernelmagic.core.sorting import SORT_KEYS, resolve_sort, sort_help

if TYPE_CHECKING:
    from kernelmagic.core.events import EventTable


@dataclass(frozen=True)
class Option:
    """One option of a run, declared on its ``ProfileOptions`` field with ``option()``."""

    flags: tuple[str, ...]
    help: str
    metavar: str | None = None
    #: a deeper view that ``build_result`` computes (the view's name is the field's)
    view: bool = False
    #: the ``torch.profiler.profile`` argument that records the same in a trace
    recording: str = ""
    #: needs torch's profiler (or a run of its own), so cannot go with ``--nsight``
    needs_profiler: bool = False
    #: for a view: whether a trace's table holds its data (None: a trace never does)
    in_trace: Callable[[EventTable], bool] | None = None
    #: from the field: its name, default and the type of its value (None for a flag)
    name: str = ""
    default: Any = None
    value_type: type | None = None


def option(*flags: str, help: str, default: Any = False, **settings: Any) -> Any:
    """A ``ProfileOptions`` field declared with its option (flags, help, what it implies)."""
    return field(default=default, metadata={"option": Option(flags, help, **settings)})


def _holds_kind(kind: str) -> Callable[[EventTable], bool]:
    def holds(table: EventTable) -> bool:
        from kernelmagic.core.events import Kind  # numpy: not at the magic's import

        return bool((table.kind == Kind[kind]).any())
    return holds


def _holds_range(pattern: re.Pattern[str]) -> Callable[[EventTable], bool]:
    def holds(table: EventTable) -> bool:
        return any(pattern.match(x) for x in table.names)
    return holds


def _is_module(obj: object) -> bool:
    """Whether ``obj`` is a ``torch.nn.Module``, without importing torch."""
    return any(c.__name__ == "Module" and c.__module__ == "torch.nn.modules.module"
               for c in type(obj).__mro__)


@dataclass(frozen=True, eq=False)
class StepTarget:
    """What ``--steps`` profiles each call of: an ``nn.Module`` (``kind`` "module": forward
    hooks) or a Python function (``kind`` "function": a wrapper bound in its place in each of
    ``namespaces`` that binds it, so calls by name reach the wrapper). ``label`` names it
    in the report (the name given to ``--steps``)."""

    obj: Any
    label: str
    kind: str
    namespaces: tuple[dict[str, Any], ...] = field(default=())

    @classmethod
    def of(cls, obj: Any, label: str = "",
           namespaces: tuple[dict[str, Any], ...] = ()) -> StepTarget:
        """``obj`` checked; ValueError when it is neither a module nor a function that a
        namespace binds."""
        shown = f"--steps {label}" if label else "steps"  # the magic's flag, or the keyword
        if _is_module(obj):
            return cls(obj, label or type(obj).__name__, "module")
        if not isinstance(obj, types.FunctionType):
            raise ValueError(f"{shown}: must name an nn.Module or a function; got "
                             f"{type(obj).__name__}")
        if inspect.iscoroutinefunction(obj) or inspect.isgeneratorfunction(obj):
            raise ValueError(f"{shown}: an async or generator function cannot be a step (its "
                             "call returns before its work runs)")
        spaces = [*namespaces, obj.__globals__]
        unique = tuple({id(ns): ns for ns in spaces}.values())
        if not any(value is obj for ns in unique for value in ns.values()):
            raise ValueError(f"{shown}: {obj.__name__} is not bound to a name in its module "
                             "or namespace (a nested function?), so its calls cannot be "
                             "wrapped")
        return cls(obj, label or obj.__name__, "function", unique)

    @classmethod
    def named(cls, name: str, namespace: dict[str, Any]) -> StepTarget:
        """The target ``--steps NAME`` names in ``namespace``; ValueError when there is none."""
        if name not in namespace:
            raise ValueError(f"--steps {name}: no such name in your namespace")
        return cls.of(namespace[name], label=name, namespaces=(namespace,))


@dataclass(frozen=True)
class ProfileOptions:
    """What to run and how to report it. Construction validates every field.

    Adding an option is one field here (plus its view: ``docs/architecture.md``).
    """

    iters: int = option("-n", "--iters", default=10,
                        help="profiled iterations (at least 1; default 10)")
    warmup: int = option("-w", "--warmup", default=3,
                         help="unprofiled warm-up runs before profiling (at least 0; default 3)")
    topk: int = option("-k", "--topk", default=10,
                       help="bars in the chart (at least 1; default 10)")
    sort: str | None = option("-s", "--sort", default=None,
                              help=sort_help())
    name: str = option("--name", default="profile",
                       help="name of the result and of its record_function/NVTX ranges "
                            "(default: cell[<execution count>])")
    cpu_only: bool = option("--cpu-only",
                            help="profile CPU activity only, even when CUDA is available")
    memory: bool = option(
        "--memory", view=True, recording="profile_memory=True", needs_profiler=True,
        in_trace=_holds_kind("MEMORY"),
        help="memory allocated per op (self and total), the memory timeline by category "
             "(parameters, gradients, activations, ...), its peak, what was alive at it, "
             "and memory each iteration keeps")
    memory_all: bool = option(
        "--memory-all",
        help="with --memory: the memory timeline of every iteration, not only the peak's")
    shapes: bool = option("--shapes", view=True, recording="record_shapes=True",
                          needs_profiler=True, help="split op rows by input shapes")
    flops: bool = option("--flops", view=True, recording="with_flops=True",
                         needs_profiler=True, in_trace=lambda table: bool(table.flops.any()),
                         help="FLOPs per op where torch can count them, and the achieved "
                              "FLOP/s")
    stack: bool = option("--stack", view=True, recording="with_stack=True",
                         needs_profiler=True, in_trace=_holds_kind("PYTHON"),
                         help="op time attributed to your own Python functions, the cell's "
                              "first")
    python: bool = option("--python", view=True, recording="with_stack=True",
                          needs_profiler=True, in_trace=_holds_kind("PYTHON"),
                          help="the time no op covers, per Python line of yours (cell "
                               "lines as cell[n]:line), sampled every millisecond; off by "
                               "default: up to 1.6x per iteration on a cell of small ops "
                               "on a loaded machine (docs/views.md)")
    modules: bool = option("--modules", view=True, recording="with_modules=True",
                           needs_profiler=True, in_trace=_holds_range(MODULE_RANGE),
                           help="time per nn.Module call path (e.g. ff.0), nested")
    timeline: bool = option("--timeline", view=True, needs_profiler=True,
                            in_trace=lambda table: True,  # any trace has a timeline
                            help="a picture of one profiled iteration: CPU ops and GPU "
                                 "kernels per stream")
    roofline: bool = option(
        "--roofline", needs_profiler=True,
        help="FLOPs and bytes per op (one extra unprofiled run) against the device's "
             "peaks: compute-, memory- or overhead-bound, with a roofline chart")
    counters: bool = option(
        "--counters", needs_profiler=True,
        help="CUDA: one more run reading hardware counters per kernel (FLOP "
             "instructions by precision, DRAM bytes, occupancy) through CUPTI")
    nsight: bool = option(
        "--nsight",
        help="CUDA: bracket the iterations with cudaProfilerStart/Stop for Nsight "
             "(nsys --capture-range=cudaProfilerApi, ncu --profile-from-start off); "
             "torch's profiler does not run, the report has the timings only")
    trace: str | None = option(
        "--trace", default=None, metavar="PATH", needs_profiler=True,
        help="write a Chrome trace (.json or .json.gz) for Perfetto / chrome://tracing")
    force: bool = option("--force", help="let --trace overwrite an existing file")
    gather: bool = option(
        "--gather", needs_profiler=True,
        help="in a torch.distributed process group: every rank profiles, rank 0 "
             "shows (and -o binds) the report of all ranks, the others one line")
    # Checked against the variants there are by kernelmagic/live/variants.py: parse.
    variants: str | None = option(
        "--try", default=None, metavar="VARIANTS", needs_profiler=True,
        help="after the run, measure each variant the same way (comma-separated): bf16, "
             "fp16, tf32, compile, cudagraphs, inference, threads=N, "
             "sdpa=math|efficient|flash|cudnn, your @kernelmagic.variant names, or auto "
             "(what the findings suggest and the device runs); each row gives its speed-up "
             "and the numerical error of the cell's value")
    steps: StepTarget | None = option(  # noqa: RUF009 (option() is a dataclasses.field)
        "--steps", default=None, metavar="TARGET", view=True, needs_profiler=True,
        in_trace=_holds_range(STEP_RANGE),
        help="each call of TARGET (an nn.Module or a function in your namespace) during a "
             "profiled iteration is a step: time per step, steps grouped by their inputs' "
             "shapes (prefill, decode), time between steps (API: steps=model)")
    #: the options of views that declare their own (``ViewSpec.flag``) asked for, by name:
    #: the magic's ``--threads`` or ``profile(threads=True)`` gives ("threads",)
    more_views: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_int("-n/--iters", self.iters, minimum=1)
        _check_int("-w/--warmup", self.warmup, minimum=0)
        _check_int("-k/--topk", self.topk, minimum=1)
        if self.sort is not None and self.sort not in SORT_KEYS:
            raise ValueError(f"-s/--sort must be one of {', '.join(SORT_KEYS)}; got {self.sort!r}")
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("--name must be a non-empty string")
        if any(ch in self.name for ch in "\r\n"):
            raise ValueError("--name must be a single line")
        if self.steps is not None and not isinstance(self.steps, StepTarget):
            object.__setattr__(self, "steps", StepTarget.of(self.steps))
        if isinstance(self.more_views, str) or not all(
                isinstance(v, str) for v in self.more_views):
            raise ValueError(f"more_views must be view names; got {self.more_views!r}")
        object.__setattr__(self, "more_views", tuple(self.more_views))
        if self.trace is not None:
            check_trace_path(self.trace, self.force)
        elif self.force:
            raise ValueError("--force needs --trace (it lets the trace overwrite a file)")
        if self.nsight:
            clash = [flag for flag, on in NSIGHT_EXCLUDES.items() if getattr(self, on)]
            clash += [f"the {view} view" for view in self.more_views]  # built from its events
            if clash:
                raise ValueError(f"--nsight cannot be combined with {clash[0]}: Nsight owns the "
                                 "GPU's profiling, torch's profiler does not run")
        if self.variants is not None:
            _check_variants(self)
        if self.memory_all and not self.memory:
            raise ValueError("--memory-all needs --memory (it shows every iteration's "
                             "memory timeline)")

    def resolve_sort(self, profiles_device: bool) -> str:
        """The sort key to use, given whether device (CUDA) activity is profiled
        (``kernelmagic/core/sorting.py: resolve_sort``)."""
        return resolve_sort(self.sort, profiles_device, self.cpu_only)

    def asked_views(self) -> list[str]:
        """The deeper views asked for: ``VIEWS`` order, then ``more_views``."""
        return [v for v in VIEWS if getattr(self, v)] + list(self.more_views)


#: A field's annotation -> the type of its option's value (None: a flag, no value).
_VALUE_TYPES: dict[str, type | None] = {"bool": None, "int": int, "str": str, "str | None": str,
                                        "StepTarget | None": str}  # --steps NAME


#: Every option of a run, in the order ``%%profile?`` lists them: each field's ``Option``,
#: completed with the field's name, default and value type.
OPTIONS: tuple[Option, ...] = tuple(
    replace(f.metadata["option"], name=f.name, default=f.default,
            value_type=_VALUE_TYPES[str(f.type)])
    for f in fields(ProfileOptions) if "option" in f.metadata)

#: The deeper views ``build_result`` knows, in the order results list them.
VIEWS: tuple[str, ...] = tuple(o.name for o in OPTIONS if o.view)

#: Options that need torch's profiler (or a run of their own), so not ``--nsight``.
NSIGHT_EXCLUDES: dict[str, str] = {o.flags[-1]: o.name for o in OPTIONS if o.needs_profiler}

#: The options that record something more, and the ``torch.profiler.profile`` argument
#: that records the same in a trace.
RECORDING: dict[str, str] = {o.flags[-1]: o.recording for o in OPTIONS if o.recording}


def trace_views(table: EventTable) -> list[str]:
    """The deeper views a trace's table holds data for, in ``VIEWS`` order."""
    return [o.name for o in OPTIONS if o.in_trace is not None and o.in_trace(table)]


def check_keywords(keywords: Mapping[str, Any], more: Sequence[str] = ()) -> None:
    """ValueError naming the first keyword that is not an option of a run (nor one of
    ``more``: the options views declare themselves)."""
    known = [o.name for o in OPTIONS] + list(more)
    for key in keywords:
        if key not in known:
            raise ValueError(f"unknown option {key!r}; expected one of {', '.join(known)}")


def _check_variants(options: ProfileOptions) -> None:
    """``--try``'s value as one comma-separated string (the API may give a list)."""
    value = options.variants
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        object.__setattr__(options, "variants", ",".join(value))
    elif not isinstance(value, str):
        raise ValueError(f"--try takes variant names, as a string or a list; got {value!r}")
    if options.gather:
        raise ValueError("--try cannot be combined with --gather")


def check_variable_name(option: str, value: str) -> str:
    """A valid Python identifier to bind a result to, or ValueError."""
    if not value.isidentifier() or keyword.iskeyword(value):
        raise ValueError(f"{option} must be a Python identifier; got {value!r}")
    return value


def check_trace_path(path: str, force: bool) -> None:
    """A Chrome-trace path we may write: ``.json`` or ``.json.gz``, in a writable folder."""
    if not path.endswith((".json", ".json.gz")):
        raise ValueError(f"--trace must end in .json or .json.gz; got {path!r}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"--trace {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"--trace {path}: folder {folder} is not writable")
    if os.path.exists(path) and not force:
        raise ValueError(f"--trace {path}: file exists; add --force to overwrite it")


def _check_int(option: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{option} must be an integer >= {minimum}; got {value!r}")
