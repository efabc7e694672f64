"""The rows of the compiled view (``torch.compile``): regions, graph breaks, compiles and
the kernels inductor generated. Plain, frozen, JSON-friendly records; times in µs summed
over the profiled iterations (like ``OpRow``), compile durations in seconds."""

from __future__ import annotations

from dataclasses import dataclass

from kernelmagic.core.records import Record, unit

#: ``CompileRow.phase``: when a compile happened, as seen from this run.
BEFORE, WARMUP, PROFILED = "before", "warmup", "profiled"


class _NamedByCompileId:
    """A row whose name in tables (``key``) is its compile id."""

    __slots__ = ()
    compile_id: str

    @property
    def key(self) -> str:
        return self.compile_id


@dataclass(frozen=True)
class CompiledRegionRow(_NamedByCompileId, Record):
    """One compiled region (``Torch-Compiled Region: <compile id>``) over the iterations;
    compile id ``backward``: the compiled graphs autograd ran outside any region (a
    compiled function's backward), its time that of their autograd nodes
    (``CompiledFunctionBackward``: the graph and its wrappers).

    ``cpu_time_total`` is the region's inclusive time; ``graph_time_total`` the time in
    its own compiled graphs (``## Call CompiledFxGraph ##``, not a nested region's);
    ``device_time_total`` the GPU work its graphs launched. ``function``, ``file`` and
    ``line`` name the frame dynamo compiled (from its compilation metrics, when known).
    """

    compile_id: str
    count: int = unit("calls, summed over {over}")
    cpu_time_total: float = unit("µs, summed over {over}")
    graph_time_total: float = unit("µs, summed over {over}")
    device_time_total: float = unit("µs, summed over {over}", 0.0)
    outermost: bool = True  # not inside another compiled region
    function: str = ""
    file: str = ""
    line: int = 0


@dataclass(frozen=True)
class GraphBreakRow(_NamedByCompileId, Record):
    """A graph break and the gap it leaves: the time between one compiled graph's end and
    the next graph's start inside the same call (eager ops and Python). ``count`` 0: a
    break after the frame's last graph, no gap between two graphs to measure.

    ``compile_id`` is the innermost region around the graphs on both sides of the gap
    (the frame whose compile broke; its resume function runs nested in it); ``reason``
    and ``hint`` are dynamo's; ``file``/``line`` the user's code where dynamo broke the
    graph; ``top_ops`` what the gap held, adding up to it: the eager ops
    in it, then dynamo's own work around the graphs, then the time no op recorded
    (``aten::item 1.2 µs; dynamo 9.8 µs; Python 20.1 µs``, self CPU per iteration).
    """

    compile_id: str
    count: int = unit("calls, summed over {over}")
    gap_time_total: float = unit("µs, summed over {over}")
    reason: str = ""
    hint: str = ""
    file: str = ""
    line: int = 0
    code: str = ""
    top_ops: str = unit("op -> µs", "")
    # the GPU idle during the gaps (profiled GPU only)
    gpu_idle_total: float = unit("µs, summed over {over}", 0.0)


@dataclass(frozen=True)
class CompileRow(_NamedByCompileId, Record):
    """One compile dynamo did (its compilation metrics): before this run (shown for the
    regions the profile holds), in the warm-up, or inside the profiled iterations.

    ``recompile_reason`` is the guard that failed (a recompile); ``graph_break`` dynamo's
    reason when this compile broke the graph. ``backward`` marks the compile of the
    backward graph of ``compile_id``'s forward (done at its first backward call; its frame
    is the forward's).
    """

    compile_id: str
    phase: str
    duration_s: float = unit("seconds")
    function: str = ""
    file: str = ""
    line: int = 0
    recompile_reason: str = ""
    graph_break: str = ""
    backward: bool = False


@dataclass(frozen=True)
class FusedKernelRow(Record):
    """One kernel inductor generated (``triton_poi_fused_mul_sin_0``, a C++
    ``cpp_fused_mul_sin_0``): its time and the aten ops it fused.

    ``time_total`` is device time for GPU kernels, CPU time for C++ kernels (recorded only
    where inductor's C++ kernel profiling was on when the kernel was compiled). ``timed``
    False: a kernel of a compiled graph that ran without recording it (compiled before
    the run, without that profiling), read from inductor's generated code: no count or
    time, its aten ops only (``UNTIMED_KERNELS`` says why and how to time it).
    ``aten_ops`` come from the generated code's ``Original ATen`` comment, else from the
    kernel's descriptive name; ``source`` is the user's code where inductor records it
    (its provenance tracking, on for compiles in kernelmagic's warm-up).
    """

    key: str
    count: int = unit("calls, summed over {over}")
    time_total: float = unit("µs, summed over {over}")
    on_device: bool = False
    aten_ops: str = ""
    graph: str = ""  # the compiled graph (``graph_0``) the kernel belongs to
    source: str = ""  # the user's lines it came from: ``path:line; path:line``
    compile_id: str = ""  # the compiled region it ran in
    timed: bool = True  # False: read from the generated code of a graph that ran, no record


#: How to get a CPU graph's kernel times without changing the user's compiled code.
UNTIMED_HOW = (
    "compile the function for the first time inside the profiled cell (kernelmagic switches "
    "kernel profiling on for its warm-up), or set "
    "torch._inductor.config.cpp.enable_kernel_profile = True before its first torch.compile")
#: Why a CPU graph's kernels have no times, and how to get them: one line for the report.
UNTIMED_KERNELS = (
    "inductor's C++ kernels record their times only when compiled with "
    "torch._inductor.config.cpp.enable_kernel_profile = True, and these graphs were "
    f"compiled without it (before this run); to time them, {UNTIMED_HOW} (kernelmagic "
    "leaves your compiled code as it is)")
