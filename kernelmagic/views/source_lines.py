"""``--stack``: op self time attributed to the innermost user Python function around it."""

from __future__ import annotations

import linecache
import os
import re
import sys
import sysconfig
from functools import lru_cache

import numpy as np

from kernelmagic.core.events import EventTable, Kind
from kernelmagic.core.rows import SourceRow
from kernelmagic.views.ops import group, is_op
from kernelmagic.views.tree import Figures, nearest_ancestor

#: A Python frame as torch names it: ``file(line): function``.
FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<func>.+)$")
#: Path parts that mark an installed package or the standard library on another machine.
_INSTALLED = ("site-packages", "dist-packages", "/lib/python", "\\Lib\\")
#: Where torch's DataLoader lives, as a path part.
DATA_LOADING_DIR = "torch/utils/data/"
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # kernelmagic itself


def _resolve(path: str) -> str:
    """The file behind a frame's name: torch shortens paths relative to ``sys.path``."""
    if os.path.isabs(path) or path.startswith("<"):
        return path
    for root in sys.path:
        candidate = os.path.join(root, path)
        if os.path.exists(candidate):
            return candidate
    return path


@lru_cache(maxsize=4096)
def is_library_file(path: str) -> bool:
    """True for torch, the standard library, installed packages and kernelmagic itself."""
    if path.startswith("<") and not path.startswith("<ipython-input"):
        return path.startswith(("<built-in", "<frozen", "<string>"))
    found = _resolve(path)
    if not os.path.exists(found):  # a trace from another machine: judge by the path
        return (path.startswith(("torch/", "torch\\"))
                or any(part in path for part in _INSTALLED))
    roots = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.add(_PACKAGE)
    real = os.path.realpath(found)
    return any(real.startswith(os.path.realpath(r) + os.sep) for r in roots)


def is_data_loading_file(path: str) -> bool:
    """True for torch's DataLoader and datasets (``torch/utils/data/``): their frames, and
    the code they call, are data loading (``views/python_lines.py``, ``views/gpu_idle.py``)."""
    return DATA_LOADING_DIR in path.replace("\\", "/")


def user_frames(table: EventTable) -> tuple[dict[int, tuple[str, int, str]], np.ndarray,
                                            np.ndarray]:
    """The Python frames ``with_stack`` recorded in the user's own code: (file, line,
    function) per name index; per name index, the frame's id, the first name index of the
    frame as parsed (-1: not the user's; ``u.py(3): f`` and ``u.py(03): f`` are one frame,
    which every view groups by); and the rows of the table that are such frames."""
    frames: dict[int, tuple[str, int, str]] = {}
    first_of: dict[tuple[str, int, str], int] = {}
    frame_id = np.full(len(table.names), -1, dtype=np.int64)
    for i, text in enumerate(table.names):
        m = FRAME.match(text)
        if m is not None and not is_library_file(m["file"]):
            where = frames[i] = (m["file"], int(m["line"]), m["func"])
            frame_id[i] = first_of.setdefault(where, i)
    return frames, frame_id, np.flatnonzero((table.kind == Kind.PYTHON)
                                            & (frame_id >= 0)[table.name])


def frame_owner(table: EventTable, frame_rows: np.ndarray) -> np.ndarray:
    """Per event: the nearest enclosing event among ``frame_rows`` (-1 when none)."""
    mask = np.zeros(table.n, dtype=bool)
    mask[frame_rows] = True
    return nearest_ancestor(table.parent, mask)


def source_rows(table: EventTable, figures: Figures,
                cell_file: str | None = None) -> list[SourceRow]:
    """Op self time attributed to the innermost user Python function around each op.

    Torch's ``with_stack`` records each Python call as an event named
    ``file(line): function``; the innermost such frame around an op that is not torch,
    the standard library or an installed package takes the op's self time. Code at the
    top level of a cell has line 0 (the whole cell). The cell's own frames come first.
    """
    frames, frame_id, rows = user_frames(table)
    if not rows.size:
        return []
    owner = frame_owner(table, rows)
    ops = figures.order[(is_op(table) & (owner >= 0))[figures.order]]  # in torch's order
    gid, first = group(frame_id[table.name[owner[ops]]])
    count = np.bincount(gid, minlength=first.size).tolist()
    self_cpu, self_dev = (np.bincount(gid, weights=values[ops], minlength=first.size).tolist()
                          for values in (figures.self_cpu, figures.self_device))
    cell_names = {cell_file, os.path.basename(cell_file)} if cell_file else set()
    rows = []
    for g, frame in enumerate(table.name[owner[ops[first]]].tolist()):
        file, line, func = frames[frame]
        code = linecache.getline(_resolve(file), line).strip() if line else "(top level)"
        rows.append(SourceRow(key=f"{file}:{line} {func}", file=file, line=line,
                              function=func, code=code, in_cell=file in cell_names,
                              self_cpu_time_total=self_cpu[g], self_device_time_total=self_dev[g],
                              ops=count[g]))
    return sorted(rows, key=lambda r: (not r.in_cell, -r.self_cpu_time_total, r.key))
