"""Re-execute the demo notebooks in place, so their saved outputs match their code.

Usage (from the repository root)::

    python demo_notebooks/execute.py                  # every notebook in demo_notebooks/
    python demo_notebooks/execute.py quickstart.ipynb # only some (names or paths)

Each notebook runs top to bottom in a fresh ``python3`` kernel (nbclient), with the
widget state stored in the notebook, so JupyterLab and other viewers can show the live
report without re-running it. A hash of the code cells is written into the notebook's
metadata; ``tests/test_notebooks.py`` recomputes it and fails when a code cell was
edited without re-running this script.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
#: Where in ``nb.metadata`` the hash of the code cells lives.
METADATA_KEY = "kernelmagic"
HASH_FIELD = "code_sha256"
KERNEL_NAME = "python3"
#: Seconds one cell may run (the slowest, torch.compile's first call, takes ~20 s).
CELL_TIMEOUT = 300


def notebooks() -> list[Path]:
    """The demo notebooks, sorted by name."""
    return sorted(HERE.glob("*.ipynb"))


def code_hash(nb: Any) -> str:
    """SHA-256 of the code cells' sources, in order (markdown and outputs don't count)."""
    sources = [cell.source for cell in nb.cells if cell.cell_type == "code"]
    return hashlib.sha256(json.dumps(sources).encode("utf-8")).hexdigest()


def recorded_hash(nb: Any) -> str | None:
    """The code hash stored by the run that produced the saved outputs, if any."""
    return nb.metadata.get(METADATA_KEY, {}).get(HASH_FIELD)


def execute(nb: Any, cwd: Path | str, timeout: int = CELL_TIMEOUT) -> Any:
    """Run ``nb`` (in memory) in a fresh kernel started in ``cwd``; returns ``nb``.

    Raises ``nbclient.exceptions.CellExecutionError`` when a cell raises.
    """
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=KERNEL_NAME,
        resources={"metadata": {"path": str(cwd)}},
        store_widget_state=True,
        record_timing=False,
        shutdown_kernel="immediate",  # the run is over: no second's wait for a clean exit
    )
    client.execute()
    nb.metadata.setdefault(METADATA_KEY, {})[HASH_FIELD] = code_hash(nb)
    return nb


def refresh(path: Path) -> float:
    """Execute the notebook at ``path`` and write it back with its new outputs."""
    start = time.perf_counter()
    nb = nbformat.read(path, as_version=4)
    execute(nb, cwd=path.parent)
    nbformat.write(nb, path)
    return time.perf_counter() - start


def _resolve(name: str) -> Path:
    path = Path(name)
    if not path.exists():
        path = HERE / name
    if not path.exists():
        raise SystemExit(f"no such notebook: {name}")
    return path.resolve()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*",
                        help="notebooks to run (default: every demo_notebooks/*.ipynb)")
    args = parser.parse_args(argv)
    paths = [_resolve(n) for n in args.notebooks] or notebooks()
    for path in paths:
        print(f"executing {path.name} ...", flush=True)
        seconds = refresh(path)
        print(f"  done in {seconds:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
