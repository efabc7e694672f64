"""The demo notebooks: they run in a real kernel, and their saved outputs are current.

Saved (committed) notebooks are checked as they are: the report is there with its static
fallbacks and a PNG chart, the widget state is stored, nothing stray (errors, stderr, Kineto's
``STAGE:``/``USDT:`` banners) was saved, and the code cells are the ones that produced the
outputs. Then each notebook is executed afresh, on an in-memory copy in a temporary
directory, with nbclient and the ``python3`` kernel, exactly as ``demo_notebooks/execute.py``
does; the committed file is never rewritten.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ci_gate import need_modules
from port_race import retried

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "demo_notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
EXPECTED = {"experiments.ipynb", "generation.ipynb", "quickstart.ipynb", "sdpa_backends.ipynb",
            "torch_compile.ipynb"}

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE_MIME = "application/vnd.jupyter.widget-state+json"
#: Kineto's start/stop banners; kernelmagic keeps them out of notebooks.
BANNERS = ("STAGE:", "USDT:")
REFRESH = "run python demo_notebooks/execute.py"


need_modules("nbformat", "nbclient", "ipykernel",
             install="pip install nbclient nbformat ipykernel")

import nbformat  # noqa: E402

from kernelmagic.render.bundle import WIDGET_TEXT  # noqa: E402


def _load_execute() -> ModuleType:
    """``demo_notebooks/execute.py`` as a module (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location("km_demo_execute", NOTEBOOK_DIR / "execute.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


execute_py = _load_execute()


def _read(path: Path) -> Any:
    return nbformat.read(path, as_version=4)


def _code_cells(nb: Any) -> list[Any]:
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def _outputs(nb: Any) -> list[Any]:
    return [out for cell in _code_cells(nb) for out in cell.get("outputs", [])]


def _reports(nb: Any) -> list[Any]:
    """Outputs that carry the report widget."""
    return [out for out in _outputs(nb) if WIDGET_MIME in out.get("data", {})]


def _report_pairs(cell: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """A cell's reports: each its static output's data and, right after it, its widget's
    (``render/bundle.py: display_outputs``)."""
    outputs = cell.get("outputs", [])
    return [(outputs[i - 1].get("data", {}) if i else {}, out["data"])
            for i, out in enumerate(outputs) if WIDGET_MIME in out.get("data", {})]


def _check_reports(nb: Any, name: str) -> None:
    """At least one report, and every report's widget output follows its static output,
    which carries the fallbacks and the chart (the widget's own says only WIDGET_TEXT)."""
    pairs = [pair for cell in _code_cells(nb) for pair in _report_pairs(cell)]
    assert pairs, f"{name}: no output carries the report widget ({WIDGET_MIME})"
    for data, widget in pairs:
        assert set(widget) == {WIDGET_MIME, "text/plain"}, sorted(widget)
        assert widget["text/plain"] == WIDGET_TEXT, widget["text/plain"]
        assert "text/html" in data and "text/plain" in data, (
            f"{name}: a widget view without a static output (text/html and text/plain) "
            f"before it: {sorted(data)}"
        )
        html = data["text/html"]
        assert html.startswith('<div class="km-static"><style>'), html[:80]
        assert "data:image/svg+xml;base64," in html and 'class="km-chart"' in html, (
            f"{name}: the static HTML report has no inline SVG chart"
        )
        assert 'class="km-table"' in html, f"{name}: the static HTML report has no table"
        assert data["text/plain"].strip(), f"{name}: empty text/plain report"


def _check_report_names(nb: Any, name: str) -> None:
    """A report without ``--name`` is named after the number shown beside its cell."""
    checked = 0
    for cell in _code_cells(nb):
        magic = cell.source.lstrip().splitlines()[0] if cell.source.strip() else ""
        if not magic.startswith("%%profile") or "--name" in magic:
            continue
        for data, _widget in _report_pairs(cell):
            if "text/plain" in data:
                summary = data["text/plain"].splitlines()[0]
                expected = f"cell[{cell.execution_count}] ·"
                assert summary.startswith(expected), (
                    f"{name}: In [{cell.execution_count}] reports {summary[:40]!r}")
                checked += 1
    assert checked, f"{name}: no report under its default name to check"


def _check_widget_state(nb: Any, name: str) -> None:
    """The stored widget state holds every model a saved view refers to."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE_MIME, {}).get("state", {})
    assert state, f"{name}: no widget state stored in the notebook metadata ({REFRESH})"
    for out in _reports(nb):
        model_id = out["data"][WIDGET_MIME]["model_id"]
        assert model_id in state, f"{name}: widget model {model_id} is not in the saved state"


def _check_no_banners(nb: Any, name: str) -> None:
    text = json.dumps([cell.get("outputs", []) for cell in _code_cells(nb)])
    for banner in BANNERS:
        assert banner not in text, f"{name}: Kineto's {banner!r} banner is in the outputs"


# --- the committed notebooks, as saved -------------------------------------------------------


def test_the_demo_notebooks_are_there() -> None:
    assert {path.name for path in NOTEBOOKS} >= EXPECTED


@pytest.fixture(params=NOTEBOOKS, ids=[path.name for path in NOTEBOOKS])
def saved(request: pytest.FixtureRequest) -> tuple[str, Any]:
    path: Path = request.param
    return path.name, _read(path)


def test_saved_outputs_match_the_code(saved: tuple[str, Any]) -> None:
    """The code cells are the ones whose run produced the saved outputs."""
    name, nb = saved
    recorded = execute_py.recorded_hash(nb)
    assert recorded is not None, f"{name} was not executed by execute.py: {REFRESH}"
    assert recorded == execute_py.code_hash(nb), (
        f"{name}: code cells changed since the outputs were saved: {REFRESH}"
    )


def test_saved_notebook_ran_top_to_bottom(saved: tuple[str, Any]) -> None:
    name, nb = saved
    cells = _code_cells(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    assert cells[0].source.strip() == "%load_ext kernelmagic", (
        f"{name}: the first code cell must be %load_ext kernelmagic"
    )
    counts = [cell.execution_count for cell in cells]
    assert counts == list(range(1, len(cells) + 1)), (
        f"{name}: cells were not run once each, in order ({counts}): {REFRESH}"
    )


def test_saved_outputs_show_the_report(saved: tuple[str, Any]) -> None:
    name, nb = saved
    _check_reports(nb, name)
    _check_report_names(nb, name)
    _check_widget_state(nb, name)


def test_saved_outputs_are_clean(saved: tuple[str, Any]) -> None:
    """No errors, nothing on stderr, no Kineto banners in what readers will see."""
    name, nb = saved
    for out in _outputs(nb):
        assert out["output_type"] != "error", f"{name}: saved error output {out.get('ename')}"
        if out["output_type"] == "stream":
            assert out["name"] == "stdout", f"{name}: saved stderr output: {out['text'][:300]}"
    _check_no_banners(nb, name)


# --- executed afresh ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Private IPython, matplotlib and Jupyter runtime dirs for the kernels started here."""
    home = tmp_path_factory.mktemp("kernel-env")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("IPYTHONDIR", "MPLCONFIGDIR", "JUPYTER_RUNTIME_DIR"):
            mp.setenv(var, str(home / var.lower()))
        # The kernel must not inherit a quiet Kineto: the extension itself silences it.
        mp.delenv("KINETO_LOG_LEVEL", raising=False)
        yield home


#: Each notebook's executed copy, by path: run once per process. Under pytest-xdist a worker
#: that does not yet know its next test tears module fixtures down, and a parametrised one
#: would then run its notebook again for the next test of the same notebook.
_EXECUTED: dict[Path, Any] = {}


@pytest.fixture(scope="module", params=NOTEBOOKS, ids=[path.name for path in NOTEBOOKS])
def executed(request: pytest.FixtureRequest, kernel_env: Path,
             tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Any]:
    """The notebook executed in a fresh kernel, in a temporary copy of demo_notebooks/."""
    path: Path = request.param
    if path not in _EXECUTED:
        _EXECUTED[path] = _execute_afresh(path, tmp_path_factory.mktemp("run-" + path.stem))
    return path.name, _EXECUTED[path]


#: A kernel that lost the race for one of the ports its manager picked ("Address already in
#: use", seen once in CI) dies before it answers: it is started again (``port_race``). A
#: cell that raises is never retried.
KERNEL_DIED = "Kernel died before replying to kernel_info"


def _execute_afresh(path: Path, workdir: Path) -> Any:
    """``path`` run top to bottom in a fresh kernel, from a copy in ``workdir`` whose saved
    outputs were cleared first."""
    shutil.copy2(path, workdir / path.name)

    def run() -> Any:
        nb = _read(workdir / path.name)
        for cell in _code_cells(nb):  # nothing from the saved run may leak into the checks
            cell.outputs = []
            cell.execution_count = None
        nb.metadata.pop("widgets", None)
        return execute_py.execute(nb, cwd=workdir)  # CellExecutionError if a cell raises

    return retried(run, lambda exc: isinstance(exc, RuntimeError) and KERNEL_DIED in str(exc))


def test_notebook_executes(executed: tuple[str, Any]) -> None:
    name, nb = executed
    for out in _outputs(nb):
        assert out["output_type"] != "error", f"{name}: {out.get('ename')}: {out.get('evalue')}"
    _check_no_banners(nb, name)


def test_executed_notebook_shows_the_report(executed: tuple[str, Any]) -> None:
    name, nb = executed
    _check_reports(nb, name)
    _check_report_names(nb, name)
    _check_widget_state(nb, name)


def test_execute_py_records_the_code_hash(executed: tuple[str, Any]) -> None:
    name, nb = executed
    assert execute_py.recorded_hash(nb) == execute_py.code_hash(nb)
    edited = copy.deepcopy(nb)
    _code_cells(edited)[-1].source += "\n# edited"
    assert execute_py.code_hash(edited) != execute_py.recorded_hash(nb), (
        f"{name}: editing a code cell must change the hash"
    )
