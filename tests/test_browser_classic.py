"""The live report on Colab's stack: classic Notebook 6.5, ipywidgets 7.7.1, IPython 7.34,
in headless Chromium driven by Playwright (#46).

Runs a notebook of two reports in a classic Notebook server: a default report, which must
fit without the notebook folding it into a scroll box (well under ``FOLD_PX`` tall at 1280
px: the detail sits behind the view selector and "show more"), and a report with several
views, whose header sorts on a click and whose every view, once chosen, shows its table's
header cells; live, the static reports beside the widgets are hidden, and the notebook saved
without widget state and reopened shows them instead of "A Jupyter widget could not be
displayed". The notebook is saved as a screenshot, ``artifacts/browser/classic.png``.

Needs the classic Notebook 6.x (``notebook<7``), ipywidgets 7, playwright and Debian's
chromium: CI's lowest-releases venv installs them (``.ci/run``) and sets
``KM_CLASSIC_NOTEBOOK=1``, where a missing piece fails the test; elsewhere it is skipped
(JupyterLab's stack is ``test_browser.py``'s). On failure, a screenshot and the server log
go to ``artifacts/browser/``.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_browser import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    CLICK_TIMEOUT,
    _answers,
    _box,
    _check_pickers_line_up,
    _free_port,
    _wait_for_tab,
)
from test_browser import Lab as Server  # a server we started: its address, token and log

from kernelmagic.render.widget import tab_slug

pytestmark = pytest.mark.browser

#: The classic Notebook folds an output taller than 100 lines (``auto_scroll_threshold``,
#: about 1,900 px) into a scroll box of 24em: a report must stay well under it.
FOLD_PX = 1900
VIEWPORT = {"width": 1280, "height": 1400}
RUN_TIMEOUT = 240_000  # ms: both reports, on a loaded machine
REQUIRED = "KM_CLASSIC_NOTEBOOK"  # set where the classic stack must be installed (CI)

_CELLS = [
    "%load_ext kernelmagic\n"
    "import torch\n"
    "torch.manual_seed(0)\n"
    "model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),\n"
    "                            torch.nn.Linear(512, 256))\n"
    "x = torch.randn(64, 256)",
    "%%profile -n 3 -w 1\ny = model(x).softmax(-1)",
    "%%profile -n 3 -w 1 --memory --modules --stack\ny = model(x).softmax(-1)",
]


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _require() -> None:
    """Skip without the classic stack; fail instead where ``KM_CLASSIC_NOTEBOOK`` is set."""
    missing = []
    if not _version("notebook").startswith("6."):
        missing.append("notebook 6.x")
    if not _version("ipywidgets").startswith("7."):
        missing.append("ipywidgets 7.x")
    missing += [m for m in ("playwright", "ipykernel") if importlib.util.find_spec(m) is None]
    if not os.access(CHROMIUM, os.X_OK):
        missing.append(CHROMIUM)
    if not missing:
        return
    what = "the classic Notebook test needs " + ", ".join(missing)
    if os.environ.get(REQUIRED) == "1":
        pytest.fail(f"{what}; {REQUIRED}=1 says it must be installed")
    pytest.skip(what, allow_module_level=True)


def _write_notebook(path: Path) -> None:
    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
              "source": source} for source in _CELLS]
    path.write_text(json.dumps({
        "cells": cells, "metadata": {"kernelspec": {"name": "python3",
                                                    "display_name": "Python 3"}},
        "nbformat": 4, "nbformat_minor": 4}))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    _require()
    tmp = tmp_path_factory.mktemp("classic")
    notebooks = tmp / "notebooks"
    notebooks.mkdir()
    _write_notebook(notebooks / "reports.ipynb")
    env = dict(os.environ)
    env.update({"JUPYTER_CONFIG_DIR": str(tmp / "jupyter-config"),
                "JUPYTER_RUNTIME_DIR": str(tmp / "jupyter-runtime"),
                "IPYTHONDIR": str(tmp / "ipython"), "MPLCONFIGDIR": str(tmp / "matplotlib")})
    token = uuid.uuid4().hex
    log = tmp / "notebook.log"
    port = _free_port()
    cmd = [sys.executable, "-m", "notebook", "--no-browser", f"--port={port}",
           f"--NotebookApp.token={token}", "--NotebookApp.ip=127.0.0.1",
           "--NotebookApp.port_retries=0", f"--notebook-dir={notebooks}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # the classic Notebook refuses to start as root without
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                cwd=notebooks)
    found = Server(f"http://127.0.0.1:{port}", token, log, notebooks)
    try:
        if not _answers(proc, found):
            pytest.fail(f"the Notebook server exited with {proc.returncode}:\n"
                        f"{log.read_text()}")
        yield found
    finally:
        proc.terminate()  # (it shuts its kernels down first)
        proc.wait(timeout=30)


def _wait_for_widget_manager(page: Any) -> None:
    """Until the page's kernel is connected and has its widget manager."""
    page.wait_for_function(
        "() => window.Jupyter && Jupyter.notebook && Jupyter.notebook.kernel"
        " && Jupyter.notebook.kernel.is_connected()"
        " && Jupyter.notebook.kernel.widget_manager", timeout=90_000)


@pytest.fixture(scope="module")
def page(server: Server) -> Iterator[Any]:
    """The notebook, every cell run, in headless Chromium at 1280 px."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=CHROMIUM_ARGS)
        shown = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
        try:
            shown.goto(server.url("/notebooks/reports.ipynb"))
            # The widget manager, made when the kernel connects, first asks the kernel for
            # its open comms and makes a model for each it lacks: cells run during that
            # round trip can get two models per widget, and a click's updates then reach
            # the one no view shows. A comm_info of ours queues behind the manager's.
            _wait_for_widget_manager(shown)
            shown.evaluate("() => new Promise(done => Jupyter.notebook.kernel.comm_info("
                           "'jupyter.widget', done))")
            shown.evaluate("() => Jupyter.notebook.execute_all_cells()")
            reports = shown.locator(".output_area").filter(
                has=shown.locator("button.km-header"))
            expect(reports).to_have_count(2, timeout=RUN_TIMEOUT)
            # Clicks queue behind running cells: wait until no cell is running ("In [*]").
            shown.wait_for_function("() => ![...document.querySelectorAll('.input_prompt')]"
                                    ".some(e => e.textContent.includes('*'))",
                                    timeout=RUN_TIMEOUT)
            yield shown
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shown.screenshot(path=str(ARTIFACTS / "classic.png"), full_page=True)
        except BaseException:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(Exception):
                shown.screenshot(path=str(ARTIFACTS / "classic.png"), full_page=True)
            shutil.copy2(server.log, ARTIFACTS / "classic-notebook.log")
            raise
        finally:
            browser.close()


def _report(page: Any, n: int) -> Any:
    return page.locator(".output_area").filter(has=page.locator("button.km-header")).nth(n)


def test_a_default_report_fits_unfolded(page: Any) -> None:
    report = _report(page, 0)
    height = _box(report)["height"]
    assert height < FOLD_PX * 0.75, f"the default report is {height:.0f} px tall"
    folded = report.evaluate("e => !!e.closest('.output_scroll')")
    assert not folded, "the notebook folded the report into a scroll box"


def test_a_header_sorts_and_every_view_shows_its_table(page: Any) -> None:
    from playwright.sync_api import expect

    report = _report(page, 1)
    calls = report.locator("button.km-header").filter(
        has_text=re.compile(r"^calls/iter( [▼▲])?$")).first  # the op table's (per iteration)
    calls.click()
    expect(calls).to_have_text("calls/iter ▼", timeout=CLICK_TIMEOUT)
    selector = report.locator(".km-views button")
    names = selector.all_inner_texts()
    assert {"ops", "source", "modules"} <= set(names), names
    for view in names:
        button = selector.filter(has_text=re.compile(f"^{re.escape(view)}$"))
        button.click()
        expect(button).to_have_class(re.compile("mod-active"), timeout=CLICK_TIMEOUT)
        _wait_for_tab(report, view)  # the boxes' display round-trips through the kernel
        headers = report.locator(f".km-tab-{tab_slug(view)} button.km-header:visible").all()
        assert headers, f"the {view} view shows no table header"
        sizes = [_box(h) for h in headers]
        assert all(b["width"] > 0 and b["height"] > 0 for b in sizes), (view, sizes)


def _saved_notebook(page: Any, server: Server) -> dict[str, Any]:
    """The notebook as the classic Notebook saves it now."""
    page.evaluate("() => Jupyter.notebook.save_notebook()")
    page.wait_for_function("() => !Jupyter.notebook.dirty", timeout=CLICK_TIMEOUT)
    return json.loads((server.notebooks / "reports.ipynb").read_text())


def test_a_notebook_saved_without_widget_state_shows_the_static_report(
        page: Any, server: Server) -> None:
    """Live, each widget shows and its static report beside it does not; the notebook
    saved without widget state (as Colab's does) and reopened in a new kernel shows each
    static report, not "A Jupyter widget could not be displayed" (#46)."""
    from playwright.sync_api import expect

    statics = page.locator(".km-static")
    expect(statics).to_have_count(2)
    expect(page.locator(".km-static >> visible=true")).to_have_count(0)
    nb = _saved_notebook(page, server)
    nb["metadata"].pop("widgets", None)  # (none is kept unless asked: Widgets › Save)
    reopened = server.notebooks / "reopened.ipynb"
    reopened.write_text(json.dumps(nb))
    # Signed (in the data folder the server shares), as the Notebook signs what it saves:
    # its HTML keeps its CSS.
    subprocess.run([sys.executable, "-m", "nbformat.sign", str(reopened)], check=True,
                   capture_output=True)
    fresh = page.context.browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        fresh.goto(server.url("/notebooks/reopened.ipynb"))
        _wait_for_widget_manager(fresh)
        missing = fresh.locator(".jupyter-widgets-view",
                                has_text="widget state could not be found")
        expect(missing).to_have_count(2, timeout=CLICK_TIMEOUT)
        expect(fresh.locator(".jupyter-widgets-view >> visible=true")).to_have_count(0)
        for n in range(2):
            static = fresh.locator(".km-static").nth(n)
            expect(static.locator(".km-summary")).to_be_visible()
            expect(static.locator(".km-summary")).to_contain_text("3 iterations (+1 warm-up)")
        fresh.screenshot(path=str(ARTIFACTS / "classic-reopened.png"), full_page=True)
    finally:
        fresh.close()


def test_a_row_opens_its_panel(page: Any) -> None:
    """On Colab's widgets too (#47): the radio items line up with the op table's rows,
    picking one opens the row's panel, and its what-if follows the factor."""
    from playwright.sync_api import expect

    report = _report(page, 0)
    _check_pickers_line_up(report)
    name = report.locator(".km-tab-ops td.km-col-op").nth(1).get_attribute("title") or ""
    radio = report.locator(".km-tab-ops .km-picker input[type=radio]").nth(1)
    radio.click()
    panel = report.locator(".km-tab-ops .km-panel")
    expect(panel.locator(".km-explain-head")).to_have_text(
        re.compile("^" + re.escape(name) + ": "), timeout=CLICK_TIMEOUT)
    expect(radio).to_be_checked()
    answer = panel.locator(".km-what-if-text")
    expect(answer).to_have_text(re.compile(r"^2x faster: saves "), timeout=CLICK_TIMEOUT)
    handle = panel.locator(".km-factor .ui-slider-handle, .km-factor .noUi-handle").first
    handle.focus()
    handle.press("End")
    expect(answer).to_have_text(re.compile(r"^gone: saves "), timeout=CLICK_TIMEOUT)
