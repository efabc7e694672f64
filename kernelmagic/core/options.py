"""Validated options for one profiling run.

Every option is checked here, in one place, and a bad value raises ``ValueError``
with a one-line message that names the option and what it accepts. The magic turns
that into IPython's ``UsageError``; the plain-Python API lets it propagate.
"""

from __future__ import annotations

import inspect
import keyword
import os
import types
from dataclasses import dataclass, field
from typing import Any

#: Sort keys accepted by ``--sort``, with what each one orders by.
SORT_KEYS: dict[str, str] = {
    "self_device": "self device time (time in the op's own kernels)",
    "self_cpu": "self CPU time (time in the op itself, children excluded)",
    "device": "total device time (the op and everything it calls)",
    "cpu": "total CPU time (the op and everything it calls)",
    "calls": "number of calls",
    "avg": "total time per call",
}


#: Options that need torch's profiler (or a run of their own), so not ``--nsight``.
NSIGHT_EXCLUDES: dict[str, str] = {
    "--memory": "memory", "--shapes": "shapes", "--flops": "flops", "--stack": "stack",
    "--modules": "modules", "--timeline": "timeline", "--roofline": "roofline",
    "--counters": "counters", "--trace": "trace", "--gather": "gather", "--steps": "steps",
}


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
        shown = label or "steps"
        if _is_module(obj):
            return cls(obj, label or type(obj).__name__, "module")
        if not isinstance(obj, types.FunctionType):
            raise ValueError(f"--steps {shown}: must name an nn.Module or a function; got "
                             f"{type(obj).__name__}")
        if inspect.iscoroutinefunction(obj) or inspect.isgeneratorfunction(obj):
            raise ValueError(f"--steps {shown}: an async or generator function cannot be a "
                             "step (its call returns before its work runs)")
        spaces = [*namespaces, obj.__globals__]
        unique = tuple({id(ns): ns for ns in spaces}.values())
        if not any(value is obj for ns in unique for value in ns.values()):
            raise ValueError(f"--steps {label or obj.__name__}: the function is not bound to a "
                             "name in its module or namespace (a nested function?), so its "
                             "calls cannot be wrapped")
        return cls(obj, label or obj.__name__, "function", unique)


@dataclass(frozen=True)
class ProfileOptions:
    """What to run and how to report it. Construction validates every field."""

    iters: int = 10
    warmup: int = 3
    topk: int = 10
    sort: str | None = None
    name: str = "profile"
    cpu_only: bool = False
    memory: bool = False
    shapes: bool = False
    flops: bool = False
    stack: bool = False
    modules: bool = False
    timeline: bool = False
    roofline: bool = False
    trace: str | None = None
    force: bool = False
    gather: bool = False  # torch.distributed: all ranks' results to rank 0 (ranks/live.py)
    counters: bool = False  # one more run reading CUPTI hardware counters per kernel
    nsight: bool = False  # cudaProfilerStart/Stop around the iterations, no torch profiler
    memory_all: bool = False  # --memory's timeline of every iteration, not the median one
    steps: Any = None  # --steps: a StepTarget (an nn.Module or function is checked into one)

    def __post_init__(self) -> None:
        _check_int("-n/--iters", self.iters, minimum=1)
        _check_int("-w/--warmup", self.warmup, minimum=0)
        _check_int("-k/--topk", self.topk, minimum=1)
        if self.sort is not None and self.sort not in SORT_KEYS:
            raise ValueError(
                f"-s/--sort must be one of {', '.join(SORT_KEYS)}; got {self.sort!r}"
            )
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError("--name must be a non-empty string")
        if any(ch in self.name for ch in "\r\n"):
            raise ValueError("--name must be a single line")
        if self.steps is not None and not isinstance(self.steps, StepTarget):
            object.__setattr__(self, "steps", StepTarget.of(self.steps))
        if self.trace is not None:
            check_trace_path(self.trace, self.force)
        if self.nsight:
            clash = [flag for flag, on in NSIGHT_EXCLUDES.items() if getattr(self, on)]
            if clash:
                raise ValueError(
                    f"--nsight cannot be combined with {clash[0]}: Nsight owns the GPU's "
                    "profiling, torch's profiler does not run"
                )
        if self.memory_all and not self.memory:
            raise ValueError("--memory-all needs --memory (it shows every iteration's "
                             "memory timeline)")

    def resolve_sort(self, profiles_device: bool) -> str:
        """The sort key to use, given whether device (CUDA) activity is profiled."""
        if self.sort is None:
            return "self_device" if profiles_device else "self_cpu"
        if self.sort in ("self_device", "device") and not profiles_device:
            reason = "--cpu-only was given" if self.cpu_only else "CUDA is not available"
            raise ValueError(
                f"-s/--sort {self.sort} needs device profiling, but {reason}; "
                "use self_cpu, cpu, calls or avg"
            )
        return self.sort


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
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{option} must be an integer >= {minimum}; got {value!r}")
    if value < minimum:
        raise ValueError(f"{option} must be an integer >= {minimum}; got {value}")
