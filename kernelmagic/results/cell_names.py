"""Lines of other notebook cells named as cells: ``cell[3]:5``, not the kernel's file for it.

A helper defined in an earlier cell runs from the file IPython compiled that cell as
(``/tmp/ipykernel_16049/916454563.py`` in a kernel, ``<ipython-input-3-...>`` in a terminal
IPython 7), which says nothing to the reader. The magic knows which file is which cell
(``shell.compile._filename_map``, IPython 8 and later; IPython 7 puts the number in the
name); ``name_cells`` renames the ``python`` and ``gpu idle`` rows' locations and
``--memory``'s lines (blocks alive at the peak, growth) in those
files, the ``--stack`` rows of functions defined there, and the compiled view's frames,
graph breaks and kernels' lines (``torch.compile`` of a function defined in a cell). The
profiled cell's own lines are named while the result is built
(``views/python_lines.label``); its compiled rows, here too (its file is in the map).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from kernelmagic.core.rows import SourceRow
from kernelmagic.results.result import ProfileResult

T = TypeVar("T")

#: IPython 7's name for a cell's code: ``<ipython-input-12-4f4ef54203bc>`` is cell 12.
_IPYTHON_INPUT = re.compile(r"<ipython-input-(\d+)-[0-9a-f]+>")


def cell_of(file: str, cells: Mapping[str, str]) -> str | None:
    """``cell[n]`` for a file that holds a cell's code, else None."""
    if file in cells:
        return cells[file]
    found = _IPYTHON_INPUT.fullmatch(file)
    return f"cell[{found.group(1)}]" if found else None


def _renamed(location: str, cells: Mapping[str, str]) -> str:
    file, sep, line = location.rpartition(":")
    cell = cell_of(file, cells) if sep and line.isdigit() else None
    return f"{cell}:{line}" if cell else location


def name_cells(result: T, cells: Mapping[str, str]) -> T:
    """``result`` (and each ``--try`` variant's) with the Python rows' lines in other
    cells named ``cell[n]:line``; ``cells`` maps a cell's file to ``cell[n]``. Anything
    but a ``ProfileResult`` (``--gather``'s ``ManyRanksResult``) is returned as it is."""
    if not isinstance(result, ProfileResult):
        return result
    lines = [dataclasses.replace(r, location=_renamed(r.location, cells))
             for r in result.python_lines]
    idle = [dataclasses.replace(r, location=_renamed(r.location, cells))
            for r in result.gpu_idle]
    sources = [_renamed_source(r, cells) for r in result.sources]
    tried = [dataclasses.replace(e, result=name_cells(e.result, cells))
             if isinstance(e.result, ProfileResult) else e for e in result.experiments]
    return dataclasses.replace(result, python_lines=lines, gpu_idle=idle, sources=sources,
                               experiments=tried, **_compiled_named(result, cells),
                               **_memory_named(result, cells))


def _memory_named(result: ProfileResult, cells: Mapping[str, str]) -> dict[str, list]:
    """``--memory``'s blocks alive at the peak and its growth rows with their lines in a
    cell named ``cell[n]:line`` (the profiled cell's too: they are not labelled while
    the result is built); nothing without them."""
    if not (result.memory_alive or result.memory_growth):
        return {}
    return {name: [dataclasses.replace(r, source=_renamed(r.source, cells)) if r.source else r
                   for r in getattr(result, name)]
            for name in ("memory_alive", "memory_growth")}


def _compiled_named(result: ProfileResult, cells: Mapping[str, str]) -> dict[str, list]:
    """The compiled view's rows with a cell's file named ``cell[n]`` (their ``file`` and
    ``line`` read ``cell[n]:line``) and the kernels' source lines renamed; nothing when
    no compiled code ran."""
    if not (result.compiled_regions or result.compiles or result.fused_kernels):
        return {}

    def named(row: Any) -> Any:
        cell = cell_of(row.file, cells)
        return dataclasses.replace(row, file=cell) if cell else row

    kernels = [dataclasses.replace(k, source="; ".join(
        _renamed(place, cells) for place in k.source.split("; "))) if k.source else k
        for k in result.fused_kernels]
    return {"compiled_regions": [named(r) for r in result.compiled_regions],
            "graph_breaks": [named(b) for b in result.graph_breaks],
            "compiles": [named(c) for c in result.compiles], "fused_kernels": kernels}


def _renamed_source(row: SourceRow, cells: Mapping[str, str]) -> SourceRow:
    """A ``--stack`` row in another cell's function, keyed ``cell[n]:line function``."""
    cell = cell_of(row.file, cells)
    return dataclasses.replace(row, key=f"{cell}:{row.line} {row.function}") if cell else row
