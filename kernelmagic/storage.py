"""Profiles on disk: the JSON of ``ProfileResult.to_dict``, with a format version."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kernelmagic.result import ProfileResult


class ProfileFileError(ValueError):
    """A profile file that is missing, not JSON, or of another format or version."""


def save(result: ProfileResult, path: str | os.PathLike[str]) -> Path:
    """Write ``result`` as JSON to ``path`` and return the path."""
    target = Path(path)
    target.write_text(json.dumps(result.to_dict(), indent=1) + "\n", encoding="utf-8")
    return target


def load(path: str | os.PathLike[str]) -> ProfileResult:
    """Read a profile written by ``save``; ProfileFileError naming the file otherwise."""
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProfileFileError(f"{source}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileFileError(f"{source}: cannot read it ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileFileError(
            f"{source}: not a kernelmagic profile (invalid JSON at line {exc.lineno})"
        ) from None
    try:
        return ProfileResult.from_dict(data)
    except ValueError as exc:
        raise ProfileFileError(f"{source}: {exc}") from None
