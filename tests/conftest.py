from __future__ import annotations

import gc
import os
import sys

import pytest


def _keep_bytecode() -> None:
    """Compile each module once, not once per process: the suite starts some 30 Python
    processes (xdist's workers, the notebooks' kernels, the CLI's and the benchmarks'
    children), and with ``PYTHONDONTWRITEBYTECODE`` set (this project's machines set it)
    each of them compiled kernelmagic and the tests from source, about 20 s of CPU a run.
    The ``.pyc`` files go where Python keeps them by default (``__pycache__``, ignored by
    git; installed packages already have theirs); Python checks each against its
    source's time and size, so an edited module is compiled again."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # for the processes the tests start
    sys.dont_write_bytecode = False  # this process's later imports, test modules included


def _leave_out_an_unused_grammar() -> None:
    """nbformat (the notebook tests) imports jsonschema, which imports ``rfc3987_syntax``
    where it is installed (Jupyter's own packages pull it in) to check two string
    formats, "iri" and "iri-reference", that no notebook schema uses. That import builds
    a parser for its grammar: 1 to 2 s of CPU in each worker that collects the tests.
    Made unimportable here, jsonschema checks every other format as before."""
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


_keep_bytecode()
_leave_out_an_unused_grammar()


@pytest.fixture(scope="session", autouse=True)
def _shared_results_stay_as_loaded():
    """The real traces' results that tests share (``tests/loaded.py``) are read only: the
    session fails if a test changed one (it would change what later tests see)."""
    yield
    shared = sys.modules.get("loaded")
    changed = shared.changed() if shared is not None else []
    assert not changed, f"a test changed these shared results: {changed}"


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
    # The reset's full garbage collection walks every object the suite holds (0.3-0.5 s
    # late in a run); what has survived it is set apart (``gc.freeze``), so the next
    # test's reset walks only what was made since. Objects made in a test are collected
    # as before.
    gc.freeze()
    return shell


def _skip_cuda_tests_without_a_device(items: list[pytest.Item]) -> None:
    """Tests marked ``cuda`` need a CUDA device; skip them cleanly without one."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


#: Module -> the worker its tests run on under ``pytest -n`` (``--dist loadgroup``,
#: pyproject.toml), for modules whose tests share costly module-scoped work (compiled
#: functions, a profiled session, a Jupyter server), done once that way, or write the same
#: file (README's examples under ``KM_UPDATE_README=1``, the browser's screenshots). The
#: modules that call torch.compile share one: dynamo's and inductor's imports, and
#: inductor's probes of the CPU's vector instructions (a few C++ compiles), are paid once.
WORKER_OF_MODULE = {
    **{module: module for module in ("test_browser", "test_no_torch", "test_ranks_live",
                                     "test_memory", "test_memory_categories",
                                     "test_runner", "test_roofline", "test_readme_examples")},
    "test_compiled": "torch_compile",
    "test_experiments": "torch_compile",
}
#: Modules whose module-scoped fixture is parametrized: one worker per parameter (each demo
#: notebook runs in its own kernel, on whichever worker takes it).
WORKER_PER_PARAM = {"test_notebooks": "executed"}


def _xdist_group(item: pytest.Item) -> str | None:
    """The worker group of ``item``: its module's, its fixture parameter's, or none."""
    module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
    if module in WORKER_OF_MODULE:
        return WORKER_OF_MODULE[module]
    fixture = WORKER_PER_PARAM.get(module)
    callspec = getattr(item, "callspec", None)
    if fixture and callspec is not None and fixture in item.fixturenames:
        return f"{module}[{callspec.id}]"
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks (its hook runs untagged)
def pytest_collection_modifyitems(config, items):
    """Tests marked ``cuda`` need a CUDA device; skip them cleanly without one. Tests that
    share costly module-scoped work are grouped on one worker (``_xdist_group``)."""
    for item in items:
        group = _xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    _skip_cuda_tests_without_a_device(items)


def pytest_collection_finish(session):
    """What collection imported (torch, the test modules, their data) lives to the end:
    set it apart from the garbage collector (``gc.freeze``), whose full collections then
    walk only what the tests make."""
    gc.collect()
    gc.freeze()
