"""Many trace files -> one ``ManyRanksResult``, parsed in parallel on any executor.

``parse_rank`` (module level, so it pickles by reference) reads one trace and returns
``Parsed(result, summary, error)``: the rank's ``RankSummary`` (a few kB), and its
``ProfileResult`` only when asked (``full=True``), never its events, so a worker elsewhere
(a process pool, a Dask cluster) sends back only what the report needs, whatever the size
of the traces. The client keeps the summaries and each rank's file; ``run.ranks[n]``
parses rank n's file again (``report_of``), a handful kept (``RankReports``). A file that
cannot be read comes back as ``error`` (a one-line message naming it): the client warns
and loads the rest; so does a file of another job (``one_job``).

Which rank a file is: ``distributedInfo.rank``, else the number after ``rank`` in the
file name (``rank3.json``, ``worker_rank-3...``), else its position among the files
(sorted by name) that have neither.
"""

from __future__ import annotations

import dataclasses
import os
import re
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

from kernelmagic.results.rank_summary import RankSummary, summarize_with_events
from kernelmagic.results.ranks import ManyRanksResult, RankReports
from kernelmagic.results.result import ProfileResult

_RANK_IN_NAME = re.compile(r"rank[-_ .]?(\d+)", re.IGNORECASE)


class RanksError(ValueError):
    """Trace files that do not make one run; the one-line message names the files."""


class DuplicateRank(RanksError):
    """Two files are the same rank."""


class RankSkipped(UserWarning):
    """A file that could not be read, or of another job, was left out; the rest loaded."""


class Parsed(NamedTuple):
    """What a worker sends back for one file: a result and summary, or an error."""

    result: ProfileResult | None
    summary: RankSummary | None
    error: str | None


def _rank_of(meta: dict[str, Any], path: Path) -> int | None:
    value = meta.get("rank")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    found = _RANK_IN_NAME.search(path.name)
    return int(found.group(1)) if found else None


def parse_rank(path: str, full: bool = False) -> Parsed:
    """Read one trace into its ``RankSummary`` (and ``ProfileResult`` with ``full``);
    errors as data.

    Never raises for a bad file: the error comes back as a one-line message naming it.
    ``summary.rank`` is -1 when neither ``distributedInfo`` nor the file name gives it.
    """
    source = Path(path)
    try:
        from kernelmagic.core.records import NotATrace
        from kernelmagic.io.traces import read_trace, trace_result

        try:
            parts = read_trace(source)
        except NotATrace:
            return Parsed(None, None, f"{source}: a kernelmagic profile, not a trace")
        # Without the timeline: it holds one span per event of a step, so it would
        # grow with the trace on the client (load the rank's file alone to see it).
        result = trace_result(parts, timeline=False)
        meta = result.distributed  # the trace's rank, world_size and backend
        rank = _rank_of(meta, source)
        world = meta.get("world_size")
        summary = summarize_with_events(
            result, parts.table, parts.iterations.windows, rank=-1 if rank is None else rank,
            world_size=int(world) if isinstance(world, int) or str(world).isdigit() else None,
            backend=str(meta.get("backend", "")), file=source.name)
        return Parsed(result if full else None, summary, None)
    except ValueError as exc:  # TraceFileError and friends: already one line naming the file
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if str(source) not in message:
            message = f"{source}: {message}"
        return Parsed(None, None, message)
    except Exception as exc:  # anything else: still data, never a traceback from here
        return Parsed(None, None, f"{source}: {type(exc).__name__}: {exc}".splitlines()[0])


def report_of(path: str) -> ProfileResult:
    """Rank ``path``'s full report (without the timeline), parsed again; ``RanksError``
    naming the file when it can no longer be read."""
    parsed = parse_rank(path, full=True)
    if parsed.result is None:
        raise RanksError(parsed.error or f"{path}: cannot be read")
    return parsed.result


def trace_files(sources: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files a folder, a file or a list of them names (folders: ``*.json[.gz]`` inside)."""
    from kernelmagic.core.records import TraceFileError
    from kernelmagic.sources.trace_file import find_traces

    items = [sources] if isinstance(sources, (str, os.PathLike)) else list(sources)
    if not items:
        raise RanksError("no trace files given (an empty list)")
    files: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            try:
                found = find_traces(path)
            except OSError as exc:
                raise TraceFileError(f"{path}: cannot list it ({exc.strerror or exc})") from None
            if not found:
                raise TraceFileError(f"{path}: a folder with no traces (*.json, *.json.gz)")
            files += found
        else:
            files.append(path)
    return files


def _collect(executor: Executor, paths: Sequence[str]) -> list[Parsed]:
    """Submit every file, then wait for each; a worker that dies is that file's error."""
    futures = [executor.submit(parse_rank, p) for p in paths]
    out = []
    for path, future in zip(paths, futures, strict=True):
        try:
            out.append(future.result())
        except Exception as exc:  # BrokenProcessPool, a lost Dask worker, ...
            out.append(Parsed(None, None, f"{path}: the worker failed "
                                          f"({type(exc).__name__}: {exc})".splitlines()[0]))
    return out


def _run(paths: Sequence[str], executor: Executor | None) -> list[Parsed]:
    if executor is not None:
        return _collect(executor, paths)
    if len(paths) <= 1:
        return [parse_rank(p) for p in paths]
    workers = max(1, min(len(paths), os.cpu_count() or 1))
    # Import the parser here first: workers forked from this process start with it.
    import kernelmagic.io.traces
    import kernelmagic.views  # noqa: F401

    with ProcessPoolExecutor(max_workers=workers) as pool:
        return _collect(pool, paths)


def load_ranks(sources: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
               executor: Executor | None = None) -> ManyRanksResult:
    """Parse every trace of a folder (or a list of files) into one ``ManyRanksResult``.

    ``executor``: any ``concurrent.futures.Executor`` (Dask: ``client.get_executor()``);
    default a local process pool of ``min(files, CPUs)`` workers, none for one file.
    A file that cannot be read, or of another job (``one_job``), is left out with a
    ``RankSkipped`` warning naming it and why; ``RanksError`` when none can be read, or
    when two files are the same rank.
    """
    files = trace_files(sources)
    paths = [str(p.resolve()) if p.exists() else str(p) for p in files]
    parsed = _run(paths, executor)
    read = [item.error is None and item.summary is not None for item in parsed]
    good = [(path, item.summary) for path, item, ok in zip(paths, parsed, read, strict=True)
            if ok]
    errors = [item.error or "unknown error" for item, ok in zip(parsed, read, strict=True)
              if not ok]
    if not good:
        raise RanksError(f"none of the {len(files)} trace files could be read; "
                         f"first: {errors[0]}")
    good, other_job = one_job(good)
    for message in errors + other_job:
        warnings.warn(f"skipped {message}", RankSkipped, stacklevel=2)
    return assemble(good)


def one_job(parts: Sequence[tuple[str, RankSummary]]) -> tuple[
        list[tuple[str, RankSummary]], list[str]]:
    """The files of the job most files belong to, and a one-line reason for each other.

    Traces carry no job id (``distributedInfo`` holds the backend, rank, ``world_size``,
    process groups and NCCL version), so a job is its ``world_size``: the one most files
    say (ties: that of the first file, by name); files that say none belong to it.
    """
    ordered = sorted(parts, key=lambda p: p[1].file)
    sizes = Counter(s.world_size for _, s in ordered if s.world_size is not None)
    if len(sizes) <= 1:
        return list(ordered), []
    most = max(sizes.values())
    job = next(s.world_size for _, s in ordered if sizes.get(s.world_size) == most)
    kept = [(p, s) for p, s in ordered if s.world_size in (None, job)]
    other = [f"{p}: world_size {s.world_size}, the others {job} (another job)"
             for p, s in ordered if s.world_size not in (None, job)]
    return kept, other


def assemble(parts: Sequence[tuple[str, RankSummary]]) -> ManyRanksResult:
    """The ranks of one job (``one_job``), numbered as the module docstring says, in rank
    order, checked for a rank twice; each rank's full report read again from its file
    (``parts``: file, summary) on demand."""
    numbered = {s.rank for _, s in parts if s.rank >= 0}
    free = (r for r in range(len(parts) + len(numbered)) if r not in numbered)
    fixed = [(path, s if s.rank >= 0 else dataclasses.replace(s, rank=next(free)))
             for path, s in sorted(parts, key=lambda p: p[1].file)]
    seen: dict[int, RankSummary] = {}
    for _, summary in fixed:
        if summary.rank in seen:
            raise DuplicateRank(f"{seen[summary.rank].file} and {summary.file} are both "
                                f"rank {summary.rank}")
        seen[summary.rank] = summary
    ordered = sorted(fixed, key=lambda p: p[1].rank)
    return ManyRanksResult(ranks=RankReports({s.rank: f for f, s in ordered}, report_of),
                           summaries={s.rank: s for _, s in ordered})
