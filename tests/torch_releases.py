"""What differs between the torch releases the tests run on (CI: 2.13 and the newest; a
recorded run on Colab's 2.10: docs/testing.md)."""

from __future__ import annotations

import pytest
import torch


def torch_release() -> tuple[int, int]:
    """(major, minor) of the torch the tests run on."""
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int(minor)


#: torch 2.10 (checked; older ones too, presumably) keeps with_stack's Python frames out of
#: the session's events (they reach only the exported trace), and its key_averages() puts a
#: few allocations under other ops than 2.13's parse does (a few KiB per op on a training
#: step). kernelmagic follows 2.13's rule.
OLD_TORCH = torch_release() < (2, 11)

needs_session_frames = pytest.mark.skipif(
    OLD_TORCH, reason="this torch keeps with_stack's frames out of the session's events")
