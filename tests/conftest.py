from __future__ import annotations

from types import SimpleNamespace

import pytest


@pytest.fixture(scope="session")
def shell():
    """IPython's InteractiveShell with kernelmagic loaded (widgets use a dummy comm)."""
    from IPython.core.interactiveshell import InteractiveShell

    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "kernelmagic")
    yield sh


@pytest.fixture
def ip(shell):
    """The shell, with a clean user namespace for each test."""
    shell.reset(new_session=False)
    shell.run_cell("import torch", store_history=False)
    return shell


def fake_avg(key, count, self_cpu, cpu, self_dev=0.0, dev=0.0, *, user=False, device="CPU"):
    """A stand-in for torch's FunctionEventAvg with exact numbers."""
    import torch

    return SimpleNamespace(
        key=key, count=count, self_cpu_time_total=self_cpu, cpu_time_total=cpu,
        self_device_time_total=self_dev, device_time_total=dev, is_user_annotation=user,
        device_type=getattr(torch.autograd.DeviceType, device),
    )


class FakeProfiler:
    def __init__(self, averages, events=()):
        self._averages = averages
        self.function_events = list(events)

    def key_averages(self, group_by_input_shape=False):
        return self._averages


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` need a CUDA device; skip them cleanly without one."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
