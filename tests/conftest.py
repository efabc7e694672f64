from __future__ import annotations

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


def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` need a CUDA device; skip them cleanly without one."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
