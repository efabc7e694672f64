"""Real traces loaded once per test process, for the tests that only read the result.

``kernelmagic.load`` of one file gives equal results every time, so the tests that read a
real trace's result, and change nothing in it, share one: ``loaded(path)``. Before, some
twenty tests loaded ``v100_gpu_annotations.json.gz`` (about 0.25 s each), a dozen
``a100_nccl_rank.json.gz`` and ten ``rank0_steps.json.gz``. Tests of loading itself (its
imports, readers, file forms, executors and errors) still call ``kernelmagic.load``, as do
those of the ``ranks`` folder, whose result keeps a cache of the ranks it has parsed.

Each shared result's JSON is kept when it is loaded; ``changed()`` names the files whose
result a test has changed since, and ``tests/conftest.py`` fails the session on any.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import kernelmagic

_AS_LOADED: dict[Path, str] = {}


def loaded(path: str | Path) -> Any:
    """``kernelmagic.load(path)``, loaded once per process: read it, never change it."""
    return _load(Path(path).resolve())


@cache
def _load(path: Path) -> Any:
    result = kernelmagic.load(path)
    _AS_LOADED[path] = _as_json(result)
    return result


def changed() -> list[str]:
    """The shared results that no longer serialise as they did when loaded."""
    return [str(path) for path, text in _AS_LOADED.items() if _as_json(_load(path)) != text]


def _as_json(result: Any) -> str:
    return json.dumps(result.to_dict(), sort_keys=True)
