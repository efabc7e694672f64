"""Everything that drives torch: the runner, the profiler session and what reads it.

The only package that imports torch's private modules and attributes (``torch._C``,
``torch._dynamo``, ``torch.profiler._memory_profiler``, ...); ``tests/test_layers.py`` fails
when one appears anywhere else. This file itself imports nothing heavy: it keeps Kineto's
start/stop banners out of notebooks (``quiet_kineto_logs``, which ``%load_ext`` calls), and
holds ``torch_threads``, which the ``threads=N`` variant (``variants``) and the peak
measurement (``device_peaks``) share: here, neither imports the other's modules for it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

#: Kineto prints ``STAGE:``/``USDT:`` lines to the C-level stderr at every profile start
#: and stop unless ``KINETO_LOG_LEVEL`` is set before the process's first profile;
#: 6 is the lowest level that silences them (5 and below still print).
KINETO_QUIET_LEVEL = "6"


def quiet_kineto_logs() -> None:
    """Silence Kineto's banners, unless the user already chose a log level. Imports
    nothing heavy: ``%load_ext kernelmagic`` calls it before anything imports torch."""
    os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET_LEVEL)


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` (``torch.set_num_threads``), put back after."""
    import torch

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(n)
        yield
    finally:
        torch.set_num_threads(before)
