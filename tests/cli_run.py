"""``python -m kernelmagic ARGS`` run in this process: its exit status, stdout and stderr.

``kernelmagic/__main__.py`` is ``raise SystemExit(main())``, so calling ``cli.main`` here
gives what the command gives, without a new interpreter for each call (~0.3 s of CPU
each). The real command, ``python -m kernelmagic``, is run in a process of its own by
``tests/test_traces.py::test_save_compare_and_cli_on_traces`` and
``tests/test_no_torch.py``.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from kernelmagic.cli import main


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """What ``python -m kernelmagic *args`` (run in ``cwd``) exits with and prints."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _within(cwd):
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse's own errors (an unknown command, ...)
            code = exit_.code if isinstance(exit_.code, int) else 1
    return subprocess.CompletedProcess(["kernelmagic", *args], code, out.getvalue(),
                                       err.getvalue())


@contextlib.contextmanager
def _within(folder: Path | None) -> Iterator[None]:
    """Run in ``folder`` (``contextlib.chdir`` is Python 3.11's)."""
    if folder is None:
        yield
        return
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)
