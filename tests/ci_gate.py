"""Optional test stacks: skipped on a developer's machine without them, a failure in CI."""

from __future__ import annotations

import importlib.util
import os

import pytest


def in_ci() -> bool:
    """True where CI runs the tests (``CI`` set), where every stack must be installed."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def missing(what: str) -> None:
    """Skip (module level too) because ``what`` is missing; fail instead in CI."""
    if in_ci():
        pytest.fail(f"{what}; CI must install it")
    pytest.skip(what, allow_module_level=True)


def need_modules(*modules: str, install: str) -> None:
    """``missing`` unless every module can be imported; ``install`` says how to get them."""
    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    if absent:
        missing(f"{', '.join(absent)} not installed ({install})")
