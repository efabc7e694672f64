"""What dynamo and inductor did around a run (the torch side of the compiled view).

Everything read here is process-wide torch state, read without changing it:

- dynamo's compilation metrics (``torch._dynamo.utils.get_compilation_metrics()``, the
  last 64 compiles): each compile's id, frame, duration, the guard that failed (a
  recompile) and the graph break it hit. What happened *during* a run is the difference
  between marks taken before the warm-up, before the profiled iterations and after them;
  compiles from before the run are still shown for the regions the profile holds.
- dynamo's graph-break records (``torch._dynamo.utils.graph_break_reasons``): each
  break's reason and the user's stack, the innermost frame being the line that broke.
- the code inductor generated (``torch._inductor.codecache.PyCodeCache``): each kernel's
  ``Original ATen`` comment, else its descriptive name, says which aten ops it fused.

- inductor's provenance records (``inductor_provenance`` in the same metrics): each
  kernel's source stack traces, the user's lines it came from.
- the compiled ``nn.Module``s the user's namespace reaches: a compile of one is named by
  its path (``model.encoder``, ``live/compiled_modules.py``).

Inductor's C++ kernels record themselves in a profile only when compiled with
``cpp.enable_kernel_profile``, and the provenance records exist only when compiled with
``trace.provenance_tracking_level``: ``Watch`` switches both on for the warm-up and the
profiled iterations (so a function first compiled in the warm-up gets them; both are in
inductor's cache key, so no cached graph without them is reused) and restores them after.
Before any torch.compile (inductor's config not imported: the cell may be the first to
compile), it sets the environment variables the config reads at its import instead, and
after the run removes them and puts the settings back off.
Nothing here calls ``torch._dynamo.reset()`` or clears a counter.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import linecache
import os
import re
import sys
from collections.abc import Iterable
from typing import Any, TypeVar

from kernelmagic.core.compiled_rows import (
    BEFORE,
    PROFILED,
    WARMUP,
    CompiledRegionRow,
    CompileRow,
    FusedKernelRow,
    GraphBreakRow,
)
from kernelmagic.live.compiled_modules import as_module, compiled_modules, module_names
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.compiled import BACKWARD, GRAPH_CALL, id_order

__all__ = ["Watch", "aten_ops_from_name", "graph_sources", "kernel_origins", "scan_code",
           "split_reason", "untimed_kernels"]

_DYNAMO = "torch._dynamo"
_INDUCTOR_CONFIG = "torch._inductor.config"
_KERNEL_DEF = re.compile(r"^(\w+) = async_compile\.\w+\(", re.M)
_ATEN_COMMENT = re.compile(r"Original ATen: \[([^\]]*)\]")
#: ``# ... Original ATen: [aten.sin, aten.mul]`` then, within a few lines, ``kernel.run(``
#: or ``kernel(``: the comment Triton's wrapper code writes above a launch.
_LAUNCH_COMMENT = re.compile(
    r"^\s*#[^\n]*Original ATen: \[([^\]]*)\][^\n]*\n(?:[^\n]*\n){0,3}?\s*(\w+)(?:\.run)?\(",
    re.M)
_AOT_ID = re.compile(r"^# AOT ID: \['(\d+)_", re.M)
_FUSED_NAME = re.compile(r"^(?:graph_\d+_)?(?:cpp|triton)_\w*?fused_(\w+?)(?:_\d+)?$")
_RESUME = re.compile(r"^torch_dynamo_resume_in_(\w+)_at_(\d+)$")
#: Inductor settings switched on for the warm-up and the profiled iterations (compiles
#: there only), then restored: C++ kernels record themselves in the profile; provenance
#: tracking records each kernel's source lines in dynamo's compilation metrics.
_SWITCHED = {"cpp.enable_kernel_profile": True, "trace.provenance_tracking_level": 1}
#: The environment variables inductor's config reads those settings from when it is
#: imported (the first one is set to "1" when none is set), and the value each setting
#: has without them: a run that starts before any torch.compile switches them on this way.
_SWITCH_ENV = {"cpp.enable_kernel_profile": (("TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE",),
                                             False),
               "trace.provenance_tracking_level": (("INDUCTOR_PROVENANCE",
                                                    "TORCH_COMPILE_DEBUG"), 0)}
_FRAME_LINE = re.compile(r'File "([^"]+)", line (\d+)[^\n]*\n?([^\n]*)')
_scanned: dict[str, dict[str, str]] = {}  # generated file -> kernel key -> aten ops
_Row = TypeVar("_Row", CompiledRegionRow, CompileRow)


def _dynamo_utils() -> Any:
    """``torch._dynamo.utils``, or None when dynamo was never imported."""
    if _DYNAMO not in sys.modules:
        return None
    from torch._dynamo import utils

    return utils


def _metrics() -> list[Any]:
    """Dynamo's compilation metrics, oldest first (none when dynamo was never imported)."""
    get = getattr(_dynamo_utils(), "get_compilation_metrics", None)
    return list(get()) if get is not None else []


def _compiles() -> list[Any]:
    """Dynamo's records of compiles, oldest first: its metrics less the runtime records
    (``is_runtime``: autotuning at a compiled graph's call, not a compile)."""
    return [m for m in _metrics() if not getattr(m, "is_runtime", None)]


def _break_records() -> list[Any]:
    return list(getattr(_dynamo_utils(), "graph_break_reasons", []))


def _mark() -> dict[int, Any]:
    """The records dynamo holds now, by ``id()``, kept alive: dynamo drops records beyond
    its last 64, and a freed record's ``id()`` can be a new record's."""
    return {id(m): m for m in _metrics()}


class Watch:
    """Marks around a run: ``profiling()`` between warm-up and profiled iterations,
    ``stop()`` after them (idempotent; also restores inductor's config)."""

    def __init__(self) -> None:
        self._before = _mark()
        self._warmup: dict[int, Any] | None = None
        self._restore: dict[str, Any] = {}
        self._env: list[str] = []  # the settings switched through the environment
        if _INDUCTOR_CONFIG not in sys.modules:  # torch.compile's first use may be the cell's
            for name, (names, _) in _SWITCH_ENV.items():
                if not any(n in os.environ for n in names):
                    os.environ[names[0]] = "1"
                    self._env.append(name)
        else:  # a torch.compile exists: what it compiles now
            config = sys.modules[_INDUCTOR_CONFIG]
            for name, on in _SWITCHED.items():
                part, _, field = name.rpartition(".")
                holder = getattr(config, part, None)
                if holder is not None and hasattr(holder, field):
                    self._restore[name] = getattr(holder, field)
                    if not getattr(holder, field):
                        setattr(holder, field, on)

    def profiling(self) -> None:
        """Mark the end of the warm-up."""
        self._warmup = _mark()

    def stop(self) -> None:
        """Put back what was switched for the run."""
        config = sys.modules.get(_INDUCTOR_CONFIG)
        for name in self._env:  # the config imported during the run read them: off again
            names, off = _SWITCH_ENV[name]
            os.environ.pop(names[0], None)
            part, _, field = name.rpartition(".")
            holder = getattr(config, part, None)
            if holder is not None and getattr(holder, field, off) == _SWITCHED[name]:
                setattr(holder, field, off)
        self._env = []
        if config is not None:
            for name, value in self._restore.items():
                part, _, field = name.rpartition(".")
                setattr(getattr(config, part), field, value)
        self._restore = {}

    def annotate(self, result: ProfileResult) -> ProfileResult:
        """``result`` with the compiles of this run and of its regions, graph breaks'
        reasons and lines, regions' frames and the kernels' aten ops."""
        self.stop()
        warmup = self._warmup if self._warmup is not None else _mark()
        with_gap = {b.compile_id for b in result.graph_breaks}
        in_profile = {r.compile_id for r in result.compiled_regions} | with_gap
        records = _break_records()
        compiles = []
        for m in _compiles():
            phase = (BEFORE if id(m) in self._before else WARMUP if id(m) in warmup
                     else PROFILED)
            if phase == BEFORE and str(m.compile_id) not in in_profile:
                continue
            compiles.append(_compile_row(m, phase))
        if not compiles and not result.compiled_regions and not result.fused_kernels:
            return result
        # A frame's forward compile names it; its backward's record (same id) does not.
        by_id = {c.compile_id: c for c in compiles if not c.backward}
        compiles = [_with_frame(c, by_id.get(c.compile_id)) if c.backward else c
                    for c in compiles]
        regions = [_with_frame(r, by_id.get(r.compile_id)) for r in result.compiled_regions]
        # A break after a frame's last graph leaves no gap between two graphs: no gap row
        # from the events, a row of its own (count 0) for its reason and line.
        gapless = [GraphBreakRow(compile_id=cid, count=0, gap_time_total=0.0)
                   for cid in dict.fromkeys(r.compile_id for r in result.compiled_regions)
                   if cid in by_id and by_id[cid].graph_break
                   and cid not in with_gap]
        breaks = sorted((_with_reason(b, by_id.get(b.compile_id), records)
                         for b in [*result.graph_breaks, *gapless]), key=id_order)
        origins = kernel_origins()
        kernel_ids = {k.compile_id for k in result.fused_kernels}
        lines = _kernel_lines(m for m in _metrics() if str(m.compile_id) in kernel_ids)
        kernels = [dataclasses.replace(k, aten_ops=origins.get(k.key) or aten_ops_from_name(k.key),
                                       source=_source_of(k.key, k.compile_id, lines))
                   for k in result.fused_kernels]
        kernels += untimed_kernels(result, kernels)
        paths = module_names(_compiles(), compiled_modules())
        return dataclasses.replace(result, compiled_regions=[as_module(r, paths) for r in regions],
                                   graph_breaks=breaks,
                                   compiles=[as_module(c, paths) for c in compiles],
                                   fused_kernels=kernels)


def graph_sources(keys: set[str]) -> dict[str, str]:
    """FX graph cache key (``## Call CompiledFxGraph <key> ##``) -> the code inductor
    generated for that graph, for the compiled graphs alive in this process.

    The graphs are found among the garbage collector's objects (``CompiledFxGraph``,
    read, never changed): a function compiled before the run holds its graphs, and
    nothing else maps a key to its code. Only called when a graph ran without kernel
    records (a few tens of ms on a large heap).
    """
    module = sys.modules.get("torch._inductor.output_code")
    kind = getattr(module, "CompiledFxGraph", None)
    if kind is None or not keys:
        return {}
    out: dict[str, str] = {}
    for obj in gc.get_objects():
        # type(), not isinstance(): a dead weak proxy raises on __class__
        if issubclass(type(obj), kind):
            key = getattr(obj, "_fx_graph_cache_key", None)
            if key in keys and key not in out:
                out[key] = str(getattr(obj, "source_code", "") or "")
    return out


def untimed_kernels(result: ProfileResult, timed: list[FusedKernelRow]) -> list[FusedKernelRow]:
    """The kernels of the compiled graphs that ran without recording any (C++ kernels
    compiled before the run, without inductor's kernel profiling): from each graph's
    generated code, their aten ops, no count or time (``timed=False``)."""
    keys = {m[1] for m in map(GRAPH_CALL.match, (r.key for r in result.rows)) if m}
    if not keys:
        return []
    seen_graphs = {k.graph for k in timed if k.graph}
    seen_names = {k.key for k in timed}
    regions = [r.compile_id for r in result.compiled_regions if r.compile_id != BACKWARD]
    region = regions[0] if len(set(regions)) == 1 else ""
    rows: list[FusedKernelRow] = []
    for _, text in sorted(graph_sources(keys).items()):
        found = scan_code(text)
        number = _AOT_ID.search(text)
        graph = f"graph_{number[1]}" if number else ""
        names = list(dict.fromkeys(_KERNEL_DEF.findall(text)))  # every kernel it defines
        if (graph and graph in seen_graphs) or any(n in seen_names for n in names):
            continue  # its kernels recorded themselves
        rows += [FusedKernelRow(key=n, count=0, time_total=0.0,
                                aten_ops=found.get(n) or aten_ops_from_name(n),
                                graph=graph, compile_id=region, timed=False)
                 for n in names]
    return rows


def _compile_row(m: Any, phase: str) -> CompileRow:
    duration = getattr(m, "duration_us", None)
    seconds = (duration / 1e6 if duration is not None
               else getattr(m, "entire_frame_compile_time_s", None) or 0.0)
    restart = sorted(getattr(m, "restart_reasons", None) or [])
    return CompileRow(compile_id=str(m.compile_id), phase=phase, duration_s=float(seconds),
                      function=str(getattr(m, "co_name", "") or ""),
                      file=str(getattr(m, "co_filename", "") or ""),
                      line=int(getattr(m, "co_firstlineno", 0) or 0),
                      recompile_reason=str(getattr(m, "recompile_reason", "") or ""),
                      graph_break=restart[0] if restart else "",
                      backward=getattr(m, "is_forward", None) is False)


def _with_frame(row: _Row, c: CompileRow | None) -> _Row:
    """``row`` (a region, or a backward's compile) with the frame ``c`` compiled."""
    if c is None:
        return row
    return dataclasses.replace(row, function=c.function, file=c.file, line=c.line)


def split_reason(text: str) -> tuple[str, str]:
    """Dynamo's graph-break message as (reason, hint): its first line, its ``Hint:`` lines."""
    lines = [x.strip() for x in text.strip().splitlines()]
    hints = [x.removeprefix("Hint:").strip() for x in lines if x.startswith("Hint:")]
    return (lines[0] if lines else ""), " ".join(hints)


def _with_reason(row: GraphBreakRow, c: CompileRow | None,
                 records: list[Any]) -> GraphBreakRow:
    """The break's reason and hint (its compile's metrics) and the user's line (dynamo's
    graph-break records, matched by reason and frame)."""
    if c is None or not c.graph_break:
        return row
    reason, hint = split_reason(c.graph_break)
    file, line = "", 0
    # A record's first frame is the compiled frame, at the line where it broke (named as
    # the user's function, also in a resume function); its last, the code that broke. The
    # compile's own break is the first line after where its code starts.
    resume = _RESUME.match(c.function)
    names = {c.function, resume[1]} if resume else {c.function}
    best: tuple[int, int] | None = None
    for order, record in enumerate(records):
        text = str(getattr(record, "reason", ""))
        stack = list(getattr(record, "user_stack", []) or [])
        if not stack or not (text.startswith(reason) or c.graph_break.startswith(text)):
            continue
        top = stack[0]
        at = int(top.lineno or 0)
        if top.filename != c.file or top.name not in names or at < c.line:
            continue
        rank = (at - c.line if at > c.line else 1 << 30, -order)  # nearest; then latest
        if best is None or rank < best:
            best = rank
            file, line = stack[-1].filename, int(stack[-1].lineno or 0)
    code = linecache.getline(file, line).strip() if file and line else ""
    return dataclasses.replace(row, reason=reason, hint=hint, file=file, line=line, code=code)


def _generated_files() -> Iterable[str]:
    if "torch._inductor.codecache" not in sys.modules:
        return []
    from torch._inductor.codecache import PyCodeCache

    modules = getattr(PyCodeCache, "modules", None)
    if modules is None:  # older layouts: a dict of key -> module
        modules = list(getattr(PyCodeCache, "cache", {}).values())
    return [f for f in (getattr(m, "__file__", None) for m in modules) if f]


def kernel_origins() -> dict[str, str]:
    """Kernel name (as the profile records it) -> the aten ops it fused (``aten.sin,
    aten.mul``), from the ``Original ATen`` comments of the code inductor generated."""
    out: dict[str, str] = {}
    for path in _generated_files():
        if path not in _scanned:
            _scanned[path] = _scan(path)
        out.update(_scanned[path])
    return out


def _scan(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            return scan_code(f.read())
    except OSError:
        return {}


def scan_code(text: str) -> dict[str, str]:
    """Kernel name -> the aten ops it fused, in one module of inductor's generated code
    (C++ kernels also as their profiling records name them: ``graph_<n>_<name>``)."""
    graph = _AOT_ID.search(text)
    aten_of: dict[str, str] = {}
    last = 0
    defined = []
    for m in _KERNEL_DEF.finditer(text):  # the comment above a kernel's definition
        defined.append(m[1])
        comments = [x for x in text[last:m.start()].splitlines() if x.startswith("#")]
        last = m.end()
        aten = next((a[1] for a in map(_ATEN_COMMENT.search, reversed(comments)) if a), "")
        if aten:
            aten_of[m[1]] = aten.strip()
    for m in _LAUNCH_COMMENT.finditer(text):  # the comment above its launch in call()
        if m[2] in defined and m[2] not in aten_of:
            aten_of[m[2]] = m[1].strip()
    # C++ kernels' profiling records: graph_<n>_<name>
    named = {f"graph_{graph[1]}_{k}": v for k, v in aten_of.items()} if graph else {}
    return {**aten_of, **named}


def aten_ops_from_name(name: str) -> str:
    """The aten ops a descriptive kernel name lists (``cpp_fused_mul_sin_0`` ->
    ``aten.mul, aten.sin``): underscores split names, the longest aten op name wins."""
    m = _FUSED_NAME.match(name)
    if m is None:
        return ""
    import torch

    parts = m[1].split("_")
    ops: list[str] = []
    i = 0
    while i < len(parts):
        for j in range(len(parts), i, -1):
            candidate = "_".join(parts[i:j])
            if candidate and hasattr(torch.ops.aten, candidate):
                ops.append(f"aten.{candidate}")
                i = j
                break
        else:
            i += 1
    return ", ".join(dict.fromkeys(ops))


def _kernel_lines(metrics: Iterable[Any]) -> dict[tuple[str, str], list[str]]:
    """(compile id, kernel name) -> the user's ``path:line`` it came from, from inductor's
    provenance records in dynamo's metrics (``inductor_provenance``: JSON of
    ``"name:handle"`` -> stack traces; present when provenance tracking was on). Forward
    compiles only: a backward's record has its forward's compile id and kernel names of
    its own graph, which can be the forward's (``cpp_fused_mul_0``)."""
    import torch

    torch_dir = os.path.dirname(torch.__file__) + os.sep  # torch's own files: not the user's
    out: dict[tuple[str, str], list[str]] = {}
    for m in metrics:
        if getattr(m, "is_forward", None) is False:  # a backward's kernels: not a region's
            continue
        for blob in getattr(m, "inductor_provenance", None) or ():
            try:
                traces = json.loads(blob)
            except (TypeError, ValueError):
                continue
            for name, stacks in (traces.items() if isinstance(traces, dict) else ()):
                where = out.setdefault((str(m.compile_id), name.rsplit(":", 1)[0]), [])
                for stack in stacks:
                    found = _FRAME_LINE.findall(str(stack))
                    theirs = [f for f in found if not f[0].startswith(torch_dir)]
                    if found:  # the innermost frame outside torch: the user's line
                        path, line, code = (theirs or found)[-1]
                        # the outermost: the compiled frame, in its file at compile time
                        place = _current_place(path, int(line), code.strip(),
                                               getattr(m, "co_filename", None) or "",
                                               (theirs or found)[0][0])
                        if place and place not in where:
                            where.append(place)
    return out


def _source_of(key: str, compile_id: str, lines: dict[tuple[str, str], list[str]]) -> str:
    """The user's lines of the kernel recorded as ``key`` (``graph_<n>_`` prefix or not)."""
    name = re.sub(r"^graph_\d+_", "", key)
    return "; ".join(lines.get((compile_id, name), []))


def _current_place(path: str, line: int, code: str, frame_file: str,
                   compiled_from: str | None = None) -> str:
    """``path:line`` as it reads now, or "" when it cannot be found again.

    A graph loaded from inductor's cache keeps the stack of the code it was first compiled
    from: another file (a notebook cell's file is named by its content) or other line
    numbers. A line in the file the graph was compiled from (``compiled_from``, the
    recorded stack's outermost file; ``path`` when not given) is looked for first in the
    compiled frame's own file (``frame_file``, current), then at ``path``; a line in another
    file (a helper's) only there. In each file: at ``line`` if it reads ``code``, else
    the only line that does. A line that cannot be found again is left out rather than
    shown wrong.
    """
    in_frame = compiled_from is None or path == compiled_from
    for where in dict.fromkeys(p for p in (frame_file if in_frame else "", path) if p):
        found = _line_of(where, code, line)
        if found:
            return f"{where}:{found}"
    return ""


def _line_of(path: str, code: str, hint: int) -> int:
    """The line of ``path`` that reads ``code``: ``hint`` if it does, else the only such
    line; 0 when there is none or several (or no ``code`` to check ``hint`` against)."""
    linecache.checkcache(path)
    if not code:
        return hint if hint and linecache.getline(path, hint) else 0
    if hint and linecache.getline(path, hint).strip() == code:
        return hint
    lines = [x.strip() for x in linecache.getlines(path)]
    moved = [i + 1 for i, x in enumerate(lines) if x == code]
    return moved[0] if len(moved) == 1 else 0
