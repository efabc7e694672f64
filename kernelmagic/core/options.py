"""Validated options for one profiling run.

Every option is checked here, in one place, and a bad value raises ``ValueError``
with a one-line message that names the option and what it accepts. The magic turns
that into IPython's ``UsageError``; the plain-Python API lets it propagate.
"""

from __future__ import annotations

import keyword
import os
from dataclasses import dataclass

from kernelmagic.core.sorting import SORT_KEYS

#: Options that need torch's profiler (or a run of their own), so not ``--nsight``.
NSIGHT_EXCLUDES: dict[str, str] = {
    "--memory": "memory", "--shapes": "shapes", "--flops": "flops", "--stack": "stack",
    "--modules": "modules", "--timeline": "timeline", "--roofline": "roofline",
    "--counters": "counters", "--trace": "trace", "--gather": "gather",
}


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
