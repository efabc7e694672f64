"""The live report in a real browser: JupyterLab + headless Chromium, driven by Playwright.

Opens a temporary copy of ``demo_notebooks/quickstart.ipynb`` in JupyterLab, cut after its
first report (the cells after it run in ``test_notebooks.py``), checks that its saved
outputs show the static report (with its chart), clears them and runs all cells, then
checks that the live report shows its chart and table, that the header buttons line up
with the table's columns, and sorts the table by clicking a column header twice (descending,
then ascending), comparing the rows with the order the table's own figures imply. This is the
only test that proves sorting works in a front end. A notebook saved from JupyterLab without
widget state and reopened in a new kernel shows the static report, not the widget's
missing-model message (``test_a_notebook_saved_without_widget_state_shows_the_static_report``).

Needs jupyterlab, playwright (Python) and Debian's chromium at /usr/bin/chromium (never run
``playwright install``). Without them the test is skipped, except in CI (``CI`` set), where
it fails. On failure, screenshots and the server log go to ``artifacts/browser/``; on
success the report is saved as ``artifacts/browser/report.png`` (and each tab of a report
with every view as ``report-<tab>.png``), and copied to ``docs/`` when
``KM_UPDATE_SCREENSHOT=1``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ci_gate
import pytest

from kernelmagic.render.widget import tab_slug

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "demo_notebooks" / "quickstart.ipynb"
ARTIFACTS = ROOT / "artifacts" / "browser"
DOCS = ROOT / "docs"
README_SCREENSHOT = DOCS / "report.png"
README_DARK_SCREENSHOT = ROOT / "docs" / "report-dark.png"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]
VIEWPORT = {"width": 1280, "height": 1600}
SCREENSHOT_ROWS = 12  # table rows in the saved report screenshot
TAB_SCREENSHOT_BYTES = 150_000  # each tab's screenshot for docs/ (docs/report-*.png)
ALIGN_TOLERANCE = 3  # px between a header button's edges and its column's
SERVER_START_TIMEOUT = 90  # seconds
RUN_ALL_TIMEOUT = 180_000  # ms: the quickstart runs in ~15 s; CI machines are slower
CLICK_TIMEOUT = 30_000  # ms: a header click round-trips through the kernel


def _require() -> None:
    """Skip when the browser stack is missing; in CI (``CI`` set) fail instead."""
    missing = [name for name in ("playwright", "jupyterlab", "ipykernel", "ipywidgets")
               if importlib.util.find_spec(name) is None]
    if not os.access(CHROMIUM, os.X_OK):
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    if not missing:
        return
    ci_gate.missing("browser test needs " + ", ".join(missing))


def _cut_after_first_report(path: Path) -> None:
    """Keep the notebook's cells up to its first ``%%profile`` cell, the report under test:
    the kernel and the browser do no work whose outputs no check reads."""
    nb = json.loads(path.read_text())
    first = next(i for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code"
                 and "".join(cell["source"]).startswith("%%profile"))
    nb["cells"] = nb["cells"][:first + 1]
    path.write_text(json.dumps(nb))


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Headless Chromium, launched once for the module; each test opens its own page."""
    _require()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


class Lab:
    """A JupyterLab server we started, serving ``notebooks``; ``url(path)`` adds the token."""

    def __init__(self, base: str, token: str, log: Path, notebooks: Path) -> None:
        self.base, self.token, self.log, self.notebooks = base, token, log, notebooks

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}{path}{sep}token={self.token}"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """JupyterLab on 127.0.0.1 serving a temporary copy of the demo notebooks, one server
    for the module (each test opens its own notebook with a reset workspace)."""
    _require()
    tmp_path = tmp_path_factory.mktemp("lab")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    for path in NOTEBOOK.parent.glob("*.ipynb"):
        shutil.copy2(path, notebooks / path.name)
    _cut_after_first_report(notebooks / NOTEBOOK.name)
    config = tmp_path / "jupyter-config"
    settings = config / "lab" / "user-settings" / "@jupyterlab"
    # No autosave (the notebook under test is never rewritten), no news toast.
    _write_json(settings / "docmanager-extension" / "plugin.jupyterlab-settings",
                {"autosave": False})
    _write_json(settings / "apputils-extension" / "notification.jupyterlab-settings",
                {"fetchNews": "false", "checkForUpdates": False})
    env = dict(os.environ)
    env.update({
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "jupyter-workspaces"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "MPLCONFIGDIR": str(tmp_path / "matplotlib"),
    })
    token = uuid.uuid4().hex
    log = tmp_path / "jupyterlab.log"
    proc, server = _start_lab(token, log, notebooks, env)
    try:
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


#: JupyterLab starts on a port that was free when chosen; in a parallel run another process
#: can bind it first (JupyterLab then exits, ``port_retries=0``): a new port, this many
#: starts at most.
LAB_STARTS = 3


def _start_lab(token: str, log: Path, notebooks: Path,
               env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Lab]:
    """JupyterLab answering on 127.0.0.1, and the process serving it."""
    for start in range(1, LAB_STARTS + 1):
        port = _free_port()
        cmd = [
            sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}",
            f"--ServerApp.token={token}", "--ServerApp.ip=127.0.0.1",
            "--ServerApp.port_retries=0", f"--notebook-dir={notebooks}",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            # (the kernels are stopped at once when the module's tests are done)
            "--KernelManager.shutdown_wait_time=0",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        with open(log, "wb") as log_file:
            proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env,
                                    cwd=notebooks)
        server = Lab(f"http://127.0.0.1:{port}", token, log, notebooks)
        if _answers(proc, server):
            return proc, server
        text = log.read_text()
        if start == LAB_STARTS or "already in use" not in text:
            pytest.fail(f"JupyterLab exited with {proc.returncode}:\n{text}")
    raise AssertionError("unreachable")


def _answers(proc: subprocess.Popen[bytes], server: Lab) -> bool:
    """Wait for the server's status page: True when it answers, False when the process
    exited first; fails the test when it does neither in ``SERVER_START_TIMEOUT``."""
    no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while True:
        if proc.poll() is not None:
            return False
        try:
            with no_proxy.open(server.url("/api/status"), timeout=2):
                return True
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"JupyterLab did not answer in {SERVER_START_TIMEOUT} s:\n"
                            f"{server.log.read_text()}")
            time.sleep(0.25)


_SI = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9}


def _calls(text: str) -> float:
    """A calls/iter cell as a number: ``2``, ``0.5``, ``1.2 k``."""
    number, _, prefix = text.replace(",", "").partition(" ")
    return float(number) * _SI[prefix]


def _box(locator: Any) -> dict[str, float]:
    box = locator.bounding_box()
    assert box is not None, f"{locator} is not rendered"
    return box


def _report_clip(report: Any) -> dict[str, float]:
    """The page area of the report: summary, chart and the first table rows."""
    report.evaluate("e => e.scrollIntoView({block: 'start'})")
    box = _box(report)
    rows = report.locator("tr.km-row")
    last = _box(rows.nth(min(SCREENSHOT_ROWS, rows.count()) - 1))
    parts = [box, _box(report.locator(".km-table")), _box(report.locator("img"))]
    right = max(b["x"] + b["width"] for b in parts)
    return {"x": box["x"], "y": box["y"], "width": right - box["x"] + 8,
            "height": last["y"] + last["height"] - box["y"] + 8}


def _check_header_alignment(report: Any) -> None:
    """Each header button spans its column: same left and right edges, within a few px."""
    headers = report.locator("button.km-header:visible")  # ("more columns" shows the rest)
    cells = report.locator("tr.km-row").first.locator("td")
    assert headers.count() == cells.count()
    for i in range(headers.count()):
        head, cell = _box(headers.nth(i)), _box(cells.nth(i))
        for edge, h, c in (("left", head["x"], cell["x"]),
                           ("right", head["x"] + head["width"], cell["x"] + cell["width"])):
            assert abs(h - c) <= ALIGN_TOLERANCE, (
                f"header {headers.nth(i).inner_text()!r}: {edge} edge at {h:.0f}px, "
                f"its column's at {c:.0f}px"
            )


def _check_fits(report: Any) -> None:
    """Every column header and cell ends inside the output area: none is cut or hidden."""
    area = _box(report)
    right = area["x"] + area["width"]
    headers = report.locator("button.km-header:visible")
    titles = headers.all_inner_texts()
    assert any(t.startswith("% self CPU") for t in titles), titles
    _check_one_line(report)
    for i in range(headers.count()):
        head = _box(headers.nth(i))
        assert head["width"] > 20, f"header {titles[i]!r} is {head['width']:.0f}px wide"
        assert head["x"] + head["width"] <= right + 1, (
            f"header {titles[i]!r} ends at {head['x'] + head['width']:.0f}px, "
            f"the output area at {right:.0f}px")
    share = headers.filter(has_text=re.compile(r"^% self CPU"))
    # Its text is not clipped inside the button either.
    assert share.evaluate("b => b.scrollWidth <= b.clientWidth + 1")
    cells = report.locator("tr.km-row").first.locator("td")
    last = _box(cells.nth(cells.count() - 1))
    assert last["x"] + last["width"] <= right + 1
    chart = _box(report.locator("img").first)
    assert chart["x"] + chart["width"] <= right + 1, "the chart is cut at the right"


#: Header labels and names that do not fit their box on one line (JS): a header's text
#: cut or wrapped, a name cell taller than one line or cut without a hover title.
_CUT_JS = r"""
e => {
  const cut = x => x.scrollWidth > x.clientWidth + 1;
  const seen = x => x.offsetParent !== null;
  const heads = [...e.querySelectorAll('button.km-header, th.km-head, .km-views button')]
    .filter(seen).filter(b => cut(b) || b.scrollHeight > b.clientHeight + 1)
    .map(b => b.textContent);
  const lineCount = td => {
    const range = document.createRange(); range.selectNodeContents(td);
    return new Set([...range.getClientRects()].filter(r => r.width > 0)
                   .map(r => Math.round(r.top))).size;
  };
  const lines = [...e.querySelectorAll('td.km-col-op')].filter(seen)
    .filter(td => lineCount(td) > 1 || (cut(td) && !td.title)).map(td => td.textContent);
  return {heads: heads, names: lines};
}
"""


def _check_one_line(area: Any) -> None:
    """Every shown header label and tab label is whole on one line; every name cell is one
    line (a long name cut in its middle, whole in its title)."""
    seen = area.evaluate(_CUT_JS)
    assert not seen["heads"], f"header or tab labels cut or wrapped: {seen['heads']}"
    assert not seen["names"], f"name cells on more than one line: {seen['names']}"


_CONTRAST_JS = r"""
e => {
  const rgba = c => (c.match(/[\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => {
    const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  let bg = null;
  for (let n = e; n; n = n.parentElement) {
    const c = rgba(getComputedStyle(n).backgroundColor);
    if (c.length >= 3 && (c.length < 4 || c[3] > 0.5)) { bg = c; break; }
  }
  bg = bg || [255, 255, 255];
  const fg = rgba(getComputedStyle(e).color);
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return {ratio: (a + 0.05) / (b + 0.05), fg: fg, bg: bg};
}
"""


def _contrast(locator: Any) -> dict[str, Any]:
    """Text colour against the first opaque background behind it (WCAG ratio)."""
    return locator.evaluate(_CONTRAST_JS)


def _switch_to_dark(page: Any) -> None:
    """Settings > Theme > JupyterLab Dark (the same setting as the themes plugin's file)."""
    _switch_theme(page, "JupyterLab Dark", light=False)


def _switch_theme(page: Any, theme: str, light: bool) -> None:
    """Settings > Theme > ``theme``; a no-op when the page is in it already (the setting
    outlives a test: the next page of the same server opens in it)."""
    from playwright.sync_api import expect

    flag = "true" if light else "false"
    if page.locator(f"body[data-jp-theme-light='{flag}']").count():
        return
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Settings$")).click()
    page.locator(".lm-Menu-item", has_text=re.compile(r"^Theme")).first.hover()
    page.get_by_role("menuitem", name=theme, exact=True).click()
    expect(page.locator(f"body[data-jp-theme-light='{flag}']")).to_have_count(1, timeout=30_000)
    page.wait_for_timeout(500)  # the theme's stylesheet applies


def _check_dark(report: Any) -> None:
    """In the dark theme the table and summary text are light on a dark background."""
    for what, locator in (("table cell", report.locator("td.km-col-op").first),
                          ("summary", report.locator(".km-summary").first),
                          ("header", report.locator("button.km-header").first)):
        seen = _contrast(locator)
        assert sum(seen["bg"][:3]) < 3 * 96, f"{what}: background {seen['bg']} is not dark"
        assert seen["ratio"] >= 4.5, f"{what}: contrast {seen['ratio']:.1f} ({seen})"


def _menu(page: Any, menu: str, command: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{menu}$")).click()
    page.locator(f".lm-Menu-item[data-command='{command}']").click()


def _open_and_run_all(page: Any, lab: Lab) -> Any:
    """Open the notebook, run all cells, wait for them; returns the first live report."""
    from playwright.sync_api import expect

    page.goto(lab.url(f"/lab/tree/{NOTEBOOK.name}?reset"))
    expect(page.locator(".jp-Notebook .jp-Cell").first).to_be_visible(timeout=60_000)
    expect(page.locator(".jp-StatusBar-TextItem:has-text('| Idle')")).to_be_visible(
        timeout=60_000)
    # Keep the file browser open: the report must fit the narrower notebook.
    browser_tab = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id='filebrowser']")
    if not page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").count():
        browser_tab.click()
    expect(page.locator("#filebrowser")).to_be_visible()

    # The saved outputs show the static report (the widget needs a kernel): clear them, so
    # that everything checked below comes from this run.
    saved = page.locator(".jp-OutputArea-output").filter(has=page.locator(".km-table")).first
    expect(saved.locator("img.km-chart")).to_be_visible()
    _menu(page, "Edit", "editmenu:clear-all")
    expect(page.locator(".km-table")).to_have_count(0)

    _menu(page, "Run", "runmenu:run-all")
    report = page.locator(".jp-OutputArea-output").filter(
        has=page.locator("button.km-header")).first
    expect(report).to_be_visible(timeout=RUN_ALL_TIMEOUT)
    # Live, the widget shows and its static report beside it does not (#46).
    expect(page.locator(".km-static").first).to_be_hidden()
    # Clicks queue behind running cells in the kernel: wait until none is queued or running.
    expect(page.locator(".jp-InputPrompt", has_text="[*]")).to_have_count(
        0, timeout=RUN_ALL_TIMEOUT)
    # A cell that ran over a second showed a progress bar: the report took its place.
    expect(page.locator(".km-progress")).to_have_count(0)
    return report


def _check_more_columns(report: Any) -> None:
    """"more columns" shows the table's other columns (CPU/call, ...) over their cells;
    "fewer columns" hides them again."""
    from playwright.sync_api import expect

    shown = report.locator("button.km-header:visible")
    before = shown.count()
    toggle = report.locator("button.km-more-columns")
    expect(toggle).to_have_text(re.compile(r"^more columns \(.*CPU/call"))
    expect(report.locator("td.km-col-cpu_avg")).to_have_count(0)
    toggle.click()
    expect(toggle).to_have_text("fewer columns", timeout=CLICK_TIMEOUT)
    expect(report.locator("td.km-col-cpu_avg").first).to_be_visible(timeout=CLICK_TIMEOUT)
    assert shown.count() > before
    _check_header_alignment(report)
    toggle.click()
    expect(toggle).to_have_text(re.compile("^more columns"), timeout=CLICK_TIMEOUT)
    expect(shown).to_have_count(before, timeout=CLICK_TIMEOUT)
    expect(report.locator("td.km-col-cpu_avg")).to_have_count(0)


def _check_sorting(report: Any) -> None:
    """Click "calls" twice: rows go calls-descending, then ascending (ties by op name)."""
    from playwright.sync_api import expect

    header = report.locator("button.km-header")
    calls = header.filter(has_text=re.compile(r"^calls/iter( [▼▲])?$"))
    # (their titles say the figures are per iteration)
    expect(header.filter(has_text=re.compile(r"^self CPU/iter ▼$"))).to_have_count(1)
    expect(calls).to_have_text("calls/iter")

    # Show every row, so the expected orders can be computed from the table itself.
    show_all = report.locator("button.widget-button", has_text="show all")
    if show_all.is_visible():
        show_all.click()
    expect(report.locator(".km-status")).to_have_text(re.compile(r"^(\d+) of \1 ops$"),
                                                      timeout=CLICK_TIMEOUT)
    ops = report.locator("td.km-col-op")
    names = ops.all_inner_texts()
    counts = [_calls(t) for t in report.locator("td.km-col-calls").all_inner_texts()]
    assert len(names) == len(counts) > 1
    pairs = list(zip(counts, names, strict=True))
    descending = [name for _, name in sorted(pairs, key=lambda c: (-c[0], c[1]))]
    ascending = [name for _, name in sorted(pairs)]
    # The test only means something if each click puts another row first.
    assert len({names[0], descending[0], ascending[0]}) == 3, (
        names[0], descending[0], ascending[0])

    calls.click()
    expect(calls).to_have_text("calls/iter ▼", timeout=CLICK_TIMEOUT)
    expect(ops.first).to_have_text(descending[0], timeout=CLICK_TIMEOUT)
    expect(ops).to_have_text(descending)
    expect(header.filter(has_text=re.compile(r"^self CPU/iter$"))).to_have_count(1)

    calls.click()
    expect(calls).to_have_text("calls/iter ▲", timeout=CLICK_TIMEOUT)
    expect(ops.first).to_have_text(ascending[0], timeout=CLICK_TIMEOUT)
    expect(ops).to_have_text(ascending)


def test_report_sorts_in_jupyterlab(lab: Lab, chromium: Any) -> None:
    from playwright.sync_api import expect

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    report_png: bytes | None = None
    dark_png: bytes | None = None
    before_png: bytes | None = None
    console: list[str] = []
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        page.on("console", lambda msg: console.append(f"{msg.type}: {msg.text}"))
        try:
            report = _open_and_run_all(page, lab)
            # The first report (cell[3]): summary, chart and table.
            expect(report.locator(".km-summary")).to_contain_text("cell[3]")
            expect(report.locator("img")).to_be_visible()
            expect(report.locator(".km-table")).to_be_visible()
            before_png = page.screenshot()
            report_png = page.screenshot(clip=_report_clip(report))
            _check_header_alignment(report)
            _check_fits(report)
            _check_more_columns(report)
            _check_sorting(report)
            light = _contrast(report.locator("td.km-col-op").first)
            assert light["ratio"] >= 4.5, light
            _switch_to_dark(page)
            _check_dark(report)
            dark_png = page.screenshot(clip=_report_clip(report))
        except BaseException:
            if before_png is not None:
                (ARTIFACTS / "before.png").write_bytes(before_png)
            with contextlib.suppress(Exception):
                page.screenshot(path=str(ARTIFACTS / "after.png"))
            (ARTIFACTS / "console.log").write_text("\n".join(console))
            shutil.copy2(lab.log, ARTIFACTS / "jupyterlab.log")
            raise
    finally:
        page.close()

    assert report_png is not None and dark_png is not None
    (ARTIFACTS / "report.png").write_bytes(report_png)
    (ARTIFACTS / "report-dark.png").write_bytes(dark_png)
    if os.environ.get("KM_UPDATE_SCREENSHOT") == "1":
        README_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        README_SCREENSHOT.write_bytes(report_png)
        README_DARK_SCREENSHOT.write_bytes(dark_png)


# --- every view at 1,280 px with the file browser open (#28) -----------------------------

#: A notebook that shows ``showcase.json`` (``fakes.showcase_result``) as the live widget
#: and as the static HTML report, with no profiling: the views are what is under test.
_SHOWCASE_CELLS = [
    "import kernelmagic\nresult = kernelmagic.load('showcase.json')\nresult",
    "from IPython.display import HTML\n"
    "from kernelmagic.render.bundle import report_pictures\n"
    "from kernelmagic.render.html import html_report\n"
    "pictures = report_pictures(result)\n"
    "HTML(html_report(result, pictures.chart, timeline_svg=pictures.timeline,\n"
    "                 pictures=pictures.views))",
]

#: Where each rendered line of a cell starts, as offsets into its text (JS).
_LINE_STARTS_JS = r"""
e => {
  const range = document.createRange();
  const walker = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
  const starts = []; let offset = 0, lastTop = null;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      range.setStart(node, i); range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      if (rect && rect.width > 0) {
        if (lastTop !== null && rect.top > lastTop + 2) starts.push(offset + i);
        lastTop = rect.top;
      }
    }
    offset += node.length;
  }
  return {text: e.textContent, starts: starts};
}
"""


#: The table box the widget shows now (the innermost visible box with header buttons):
#: its right edge, its sizes and whether it scrolls (JS).
_SHOWN_TABLE_JS = r"""
e => {
  const boxes = [...e.querySelectorAll('.widget-vbox')].filter(b =>
    b.offsetParent !== null && b.querySelector('button.km-header') &&
    ![...b.querySelectorAll('.widget-vbox')].some(c =>
      c.offsetParent !== null && c.querySelector('button.km-header')));
  if (!boxes.length) return null;
  const b = boxes[0], r = b.getBoundingClientRect(), s = getComputedStyle(b);
  const size = x => { const q = x.getBoundingClientRect(); return [q.width, q.height]; };
  const tab = b.parentElement.closest('.widget-vbox') || b;
  return {right: r.right, bottom: r.bottom, scrollWidth: b.scrollWidth,
          clientWidth: b.clientWidth,
          scrolls: ['auto', 'scroll'].includes(s.overflowX),
          headers: [...b.querySelectorAll('button.km-header')]
                   .filter(h => getComputedStyle(h).display !== 'none').map(size),
          pictures: [...tab.querySelectorAll('img')].filter(i => i.offsetParent !== null)
                    .map(size)};
}
"""

#: The tabs of the showcase's widget (``fakes.showcase_result``: every CPU view), and
#: those with a picture above their table (#45; the op table's: the top-ops chart).
_TABS = ["ops", "ranges", "source", "python", "modules", "roofline",
         "memory alive at the peak", "memory growth", "steps", "steps in order",
         "graph breaks", "experiments"]
_PICTURED = {"ops", "roofline", "memory alive at the peak", "experiments"}


def _write_showcase(folder: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from fakes import showcase_result

    showcase_result().save(folder / "showcase.json")
    cells = [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {},
              "outputs": [], "source": source} for i, source in enumerate(_SHOWCASE_CELLS)]
    _write_json(folder / "showcase.ipynb", {
        "cells": cells, "metadata": {"kernelspec": {"name": "python3",
                                                    "display_name": "Python 3"}},
        "nbformat": 4, "nbformat_minor": 5})


def _check_inside(area: dict[str, float], locator: Any, what: str) -> None:
    """``locator``'s right edge is inside the output area."""
    box = _box(locator)
    right = area["x"] + area["width"]
    assert box["x"] + box["width"] <= right + 1, (
        f"{what} ends at {box['x'] + box['width']:.0f}px, the output area at {right:.0f}px")


def _check_static_views(output: Any) -> None:
    """The HTML report: every table fits or scrolls inside its own box; text cells are
    never cut; names break only after a separator; the module tree keeps its indent; the
    timeline is inline with a legend and hover titles; the roofline chart fits."""
    area = _box(output)
    _check_first_screen(output, "img.km-chart", ".km-table")
    _check_one_line(output)
    scrolls = output.locator(".km-scroll")
    assert scrolls.count() >= 4  # ops, modules, roofline, graph breaks
    for i in range(scrolls.count()):
        _check_inside(area, scrolls.nth(i), f"table box {i}")
        assert scrolls.nth(i).evaluate("e => getComputedStyle(e).overflowX") == "auto"
    hint = output.locator(".km-view-graph-breaks td.km-col-hint")
    assert hint.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "the hint is cut"
    assert hint.evaluate("e => e.scrollHeight > 30"), "the hint did not wrap"
    name = output.locator("td.km-col-op", has_text="AdamW").first
    assert not name.evaluate(_LINE_STARTS_JS)["starts"], "the name wrapped"
    assert "AdamW" in (name.get_attribute("title") or "")
    indents = [float(x.evaluate("e => parseFloat(getComputedStyle(e).paddingLeft)"))
               for x in output.locator(".km-view-modules td.km-col-op").all()]
    assert indents[0] < indents[1] < indents[2], indents  # block, block.attn, ....out_proj
    timeline = output.locator("svg.km-timeline")
    _check_inside(area, timeline, "the timeline")
    assert timeline.locator("rect > title").count() == 5
    assert "Lanes: CPU" in (timeline.text_content() or "")
    _check_inside(area, output.locator("img[alt='roofline chart']"), "the roofline chart")


#: The findings start this close to the report's top at 1,280 px (#46: what to do first).
FIRST_SCREEN = 900  # px


def _check_first_screen(report: Any, chart: str, tables: str) -> None:
    """Summary, then findings, then the chart, then the tables; the findings' top within
    ``FIRST_SCREEN`` px of the report's."""
    top = _box(report)["y"]
    order = [(what, _box(report.locator(sel).first)["y"]) for what, sel in (
        ("summary", ".km-summary"), ("findings", ".km-findings"), ("chart", chart),
        ("tables", tables))]
    assert [y for _, y in order] == sorted(y for _, y in order), order
    findings = order[1][1] - top
    assert findings < FIRST_SCREEN, f"the findings start {findings:.0f}px below the top"
    first = report.locator(".km-finding").first
    assert (first.text_content() or "").startswith("Memory grows"), first.text_content()


def _wait_for_tab(report: Any, view: str) -> None:
    """Wait until the tab ``view`` is the one box shown, with a visible header cell: a click
    reaches the kernel, whose reply sets the boxes' display (slow on a loaded machine)."""
    from playwright.sync_api import expect

    header = report.locator(f".km-tab-{tab_slug(view)} button.km-header:visible").first
    expect(header).to_be_visible(timeout=CLICK_TIMEOUT)
    expect(report.locator(".km-tab:visible")).to_have_count(1, timeout=CLICK_TIMEOUT)


def _slug(view: str) -> str:  # (the same rule as tab_slug)
    return re.sub(r"[^a-z0-9]+", "-", view.lower()).strip("-")


def _tab_screenshot(report: Any, view: str) -> Path:
    """The chosen tab (the selector, its picture and the first table rows) as a PNG in
    ``artifacts/browser/``, at most ``FIRST_SCREEN`` px tall."""
    selector = report.locator(".km-views").first
    selector.evaluate("e => e.scrollIntoView({block: 'start'})")
    top = _box(selector)
    shown = report.evaluate(_SHOWN_TABLE_JS)
    bottom = min(shown["bottom"], top["y"] + FIRST_SCREEN,
                 report.page.viewport_size["height"])
    area = _box(report)
    path = ARTIFACTS / f"report-{_slug(view)}.png"
    report.page.screenshot(path=str(path), clip={
        "x": area["x"], "y": top["y"], "width": area["width"], "height": bottom - top["y"]})
    return path


def _check_widget_views(report: Any) -> None:
    """The widget: each tab, once chosen, shows its table's header cells and its picture,
    and fits the output area or scrolls inside it."""
    from playwright.sync_api import expect

    area = _box(report)
    _check_first_screen(report, ".widget-image", ".km-views")
    selector = report.locator(".km-views button")
    names = selector.all_inner_texts()
    assert names == _TABS, names
    right = area["x"] + area["width"]
    shots = []
    for view in names:
        button = selector.filter(has_text=re.compile(f"^{re.escape(view)}$"))
        button.click()
        expect(button).to_have_class(re.compile("mod-active"), timeout=CLICK_TIMEOUT)
        _wait_for_tab(report, view)  # the boxes' display round-trips the kernel
        edges = report.evaluate(_SHOWN_TABLE_JS)
        assert edges is not None, f"the {view} view shows no table"
        # Every tab shows its table's header cells (#45: they measured 0x0 under the
        # memory and experiments tabs) and its picture above the table.
        assert edges["headers"] and all(w > 0 and h > 0 for w, h in edges["headers"]), (
            view, edges["headers"])
        pictures = [p for p in edges["pictures"] if p[0] > 0 and p[1] > 0]
        assert bool(pictures) == (view in _PICTURED), (view, edges["pictures"])
        assert edges["right"] <= right + 1, (view, edges, right)
        # Wider than the output area, it scrolls inside its own box.
        assert edges["scrolls"] or edges["scrollWidth"] <= edges["clientWidth"] + 1, (view,
                                                                                      edges)
        _check_one_line(report)
        shots.append(_tab_screenshot(report, view))
    for shot in shots:  # small enough for docs/
        assert shot.stat().st_size < TAB_SCREENSHOT_BYTES, (shot, shot.stat().st_size)
    if os.environ.get("KM_UPDATE_SCREENSHOT") == "1":
        for shot in shots:
            shutil.copy2(shot, DOCS / shot.name)


@contextlib.contextmanager
def _kept_on_failure(page: Any, lab: Lab, name: str) -> Iterator[None]:
    """On a failure inside: a screenshot (``<name>-failed.png``) and JupyterLab's log
    (``jupyterlab-<name>.log``) in ``artifacts/browser/``."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(Exception):
            page.screenshot(path=str(ARTIFACTS / f"{name}-failed.png"))
        shutil.copy2(lab.log, ARTIFACTS / f"jupyterlab-{name}.log")
        raise


def test_every_view_fits_1280_px_with_the_file_browser_open(lab: Lab, chromium: Any) -> None:
    from playwright.sync_api import expect

    _write_showcase(lab.notebooks)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        with _kept_on_failure(page, lab, "views"):
            page.goto(lab.url("/lab/tree/showcase.ipynb?reset"))
            expect(page.locator(".jp-StatusBar-TextItem:has-text('| Idle')")).to_be_visible(
                timeout=60_000)
            tab = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab[data-id='filebrowser']")
            if not page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current"
                                ).count():
                tab.click()
            expect(page.locator("#filebrowser")).to_be_visible()
            # (light, whichever test ran first: its screenshots are docs/'s)
            _switch_theme(page, "JupyterLab Light", light=True)
            _menu(page, "Run", "runmenu:run-all")
            expect(page.locator(".jp-InputPrompt", has_text="[*]")).to_have_count(
                0, timeout=RUN_ALL_TIMEOUT)
            widget = page.locator(".jp-OutputArea-output").filter(
                has=page.locator("button.km-header")).first
            # (the static report of the cell[0]'s display is hidden: the widget is live)
            expect(page.locator(".km-static")).to_be_hidden()
            static = page.locator(".jp-OutputArea-output").filter(
                has=page.locator(".kernelmagic-report")).filter(
                has_not=page.locator("button.km-header")).filter(
                has_not=page.locator(".km-static")).first
            expect(static.locator("svg.km-timeline")).to_be_visible(timeout=60_000)
            static.evaluate("e => e.scrollIntoView({block: 'start'})")
            page.screenshot(path=str(ARTIFACTS / "views-static.png"))
            _check_static_views(static)
            widget.evaluate("e => e.scrollIntoView({block: 'start'})")
            _check_widget_views(widget)
            page.screenshot(path=str(ARTIFACTS / "views-widget.png"))
    finally:
        page.close()


# --- a notebook saved without widget state, reopened (#46, Must 10) -----------------------

#: A widget output that shows the missing-model message in JupyterLab (ipywidgets 8).
WIDGET_OUTPUT = ".jp-OutputArea-output.jupyter-widgets"
SAVE_TIMEOUT = 30.0  # seconds for JupyterLab to write the saved notebook


def _write_saved_notebook(folder: Path) -> None:
    """``saved.ipynb``: one cell showing a saved result (``fakes.cpu_result``)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from fakes import cpu_result

    cpu_result().save(folder / "saved.json")
    cell = {"cell_type": "code", "execution_count": None, "id": "c0", "metadata": {},
            "outputs": [], "source": "import kernelmagic\nkernelmagic.load('saved.json')"}
    _write_json(folder / "saved.ipynb", {
        "cells": [cell], "metadata": {"kernelspec": {"name": "python3",
                                                     "display_name": "Python 3"}},
        "nbformat": 4, "nbformat_minor": 5})


def _saved_outputs(path: Path, before: float) -> list[dict[str, Any]]:
    """The outputs of the notebook's cell once JupyterLab has written them (after
    ``before``, the file's time before the save)."""
    deadline = time.monotonic() + SAVE_TIMEOUT
    while time.monotonic() < deadline:
        if path.stat().st_mtime > before:
            with contextlib.suppress(json.JSONDecodeError):
                nb = json.loads(path.read_text())
                outputs = nb["cells"][0]["outputs"]
                if outputs:
                    assert "widgets" not in nb["metadata"], "saved with widget state"
                    return outputs
        time.sleep(0.1)
    raise AssertionError(f"JupyterLab did not save {path.name} in {SAVE_TIMEOUT} s")


def _open_and_wait_for_kernel(page: Any, lab: Lab, name: str) -> None:
    from playwright.sync_api import expect

    page.goto(lab.url(f"/lab/tree/{name}?reset"))
    expect(page.locator(".jp-Notebook .jp-Cell").first).to_be_visible(timeout=60_000)
    expect(page.locator(".jp-StatusBar-TextItem:has-text('| Idle')")).to_be_visible(
        timeout=60_000)


def test_a_notebook_saved_without_widget_state_shows_the_static_report(lab: Lab,
                                                                       chromium: Any) -> None:
    """Live, the widget shows and its static report beside it is hidden; saved by
    JupyterLab (no widget state, its default) and reopened in a new kernel, the static
    report shows and the widget's missing-model message does not."""
    from playwright.sync_api import expect

    from kernelmagic.render.bundle import WIDGET_TEXT

    _write_saved_notebook(lab.notebooks)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        with _kept_on_failure(page, lab, "saved"):
            _open_and_wait_for_kernel(page, lab, "saved.ipynb")
            _menu(page, "Run", "runmenu:run-all")
            widget = page.locator(".jp-OutputArea-output").filter(
                has=page.locator("button.km-header"))
            expect(widget).to_be_visible(timeout=RUN_ALL_TIMEOUT)
            # Live: one report shows, the widget; its static report is hidden.
            expect(page.locator(".km-static")).to_have_count(1)
            expect(page.locator(".km-static")).to_be_hidden()
            expect(page.locator(".km-summary >> visible=true")).to_have_count(1)
            expect(widget.locator(".km-summary")).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "saved-live.png"))

            path = lab.notebooks / "saved.ipynb"
            before = path.stat().st_mtime
            _menu(page, "File", "docmanager:save")
            outputs = _saved_outputs(path, before)
            assert [sorted(out["data"]) for out in outputs] == [
                ["text/html", "text/plain"],
                ["application/vnd.jupyter.widget-view+json", "text/plain"]]
            assert "".join(outputs[1]["data"]["text/plain"]) == WIDGET_TEXT
            # The same file opened afresh: a new kernel, which holds no widget models.
            shutil.copy2(path, lab.notebooks / "reopened.ipynb")
            _open_and_wait_for_kernel(page, lab, "reopened.ipynb")
            missing = page.locator(WIDGET_OUTPUT, has_text="model not found")
            expect(missing).to_have_count(1, timeout=60_000)
            expect(missing).to_be_hidden()
            static = page.locator(".km-static")
            expect(static.locator(".km-summary")).to_be_visible()
            expect(static.locator(".km-summary")).to_contain_text("cell[7] · CPU · 10 iterations")
            expect(static.locator("img.km-chart")).to_be_visible()
            expect(page.get_by_text("Error displaying widget")).to_be_hidden()
            expect(page.get_by_text("could not be displayed")).to_have_count(0)
            page.screenshot(path=str(ARTIFACTS / "saved-reopened.png"))
    finally:
        page.close()


# --- a row's panel (#47) --------------------------------------------------------------------

#: A ROCm trace whose rows have kernels and input shapes, shown as the live widget.
EXPLAIN_TRACE = ROOT / "tests" / "data" / "mi250_rocm.json.gz"
PANEL_SCREENSHOT = DOCS / "panel.png"
PANEL_SCREENSHOT_BYTES = 150_000


def _write_explain_notebook(folder: Path) -> None:
    source = f"import kernelmagic\nresult = kernelmagic.load({str(EXPLAIN_TRACE)!r})\nresult"
    cell = {"cell_type": "code", "execution_count": None, "id": "c0", "metadata": {},
            "outputs": [], "source": source}
    _write_json(folder / "explain.ipynb", {
        "cells": [cell], "metadata": {"kernelspec": {"name": "python3",
                                                     "display_name": "Python 3"}},
        "nbformat": 4, "nbformat_minor": 5})


def _check_pickers_line_up(report: Any) -> None:
    """Each shown row's radio item spans its row: same top and bottom, within a few px."""
    rows = report.locator(".km-tab-ops tr.km-row")
    buttons = report.locator(".km-tab-ops .km-picker .widget-radio-box label")
    assert rows.count() == buttons.count() > 1
    for i in (0, 1, rows.count() - 1):
        row, button = _box(rows.nth(i)), _box(buttons.nth(i))
        for edge, r, b in (("top", row["y"], button["y"]),
                           ("bottom", row["y"] + row["height"],
                            button["y"] + button["height"])):
            assert abs(r - b) <= ALIGN_TOLERANCE, f"row {i}: {edge} {r:.0f}px, button {b:.0f}px"


def _open_row(report: Any, name: str) -> Any:
    """Click the radio button of the op table's row ``name`` (its cell's title: the whole
    name); returns the radio button."""
    titles = [report.locator(".km-tab-ops td.km-col-op").nth(i).get_attribute("title")
              for i in range(report.locator(".km-tab-ops td.km-col-op").count())]
    radio = report.locator(".km-tab-ops .km-picker input[type=radio]").nth(titles.index(name))
    radio.click()
    return radio


def _top(result: Any, column: str) -> list[str]:
    """The op table's first page sorted by ``column``, largest first (its labels)."""
    from kernelmagic.render.table import op_table, row_label
    from kernelmagic.render.widget import PAGE

    return [row_label(r) for r in op_table(result).sorted_rows(column)[:PAGE]]


def test_a_row_opens_its_panel_and_its_what_if_follows_the_slider(lab: Lab,
                                                                   chromium: Any) -> None:
    """Click a row: the panel under the table shows its kernels and input shapes; move the
    factor: the saving the live kernel computes changes; click another row: the panel
    follows."""
    from loaded import loaded
    from playwright.sync_api import expect

    from kernelmagic.render.explain import what_if_text
    from kernelmagic.render.widget import SLIDER_FACTORS

    _write_explain_notebook(lab.notebooks)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    result = loaded(EXPLAIN_TRACE)
    addmm = result.explain("aten::addmm")
    assert addmm.kernels and addmm.shapes
    page = chromium.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        try:
            page.goto(lab.url("/lab/tree/explain.ipynb?reset"))
            expect(page.locator(".jp-StatusBar-TextItem:has-text('| Idle')")).to_be_visible(
                timeout=60_000)
            _switch_theme(page, "JupyterLab Light", light=True)
            _menu(page, "Run", "runmenu:run-all")
            report = page.locator(".jp-OutputArea-output").filter(
                has=page.locator(".km-picker")).first
            expect(report).to_be_visible(timeout=RUN_ALL_TIMEOUT)
            expect(page.locator(".jp-InputPrompt", has_text="[*]")).to_have_count(
                0, timeout=RUN_ALL_TIMEOUT)
            _wait_for_tab(report, "ops")
            panel = report.locator(".km-tab-ops .km-panel")
            expect(panel).to_be_hidden()
            _check_header_alignment(report.locator(".km-tab-ops"))
            _check_pickers_line_up(report)

            first = _open_row(report, "aten::addmm")
            head = panel.locator(".km-explain-head")
            expect(head).to_have_text(re.compile(r"^aten::addmm: "), timeout=CLICK_TIMEOUT)
            for k in addmm.kernels[:2]:  # its GPU work, whole in the cells' titles
                expect(panel.locator(f"td[title={json.dumps(k.kernel)}]")).to_have_count(1)
            expect(panel.locator("td.km-col-shapes").first).to_have_attribute(
                "title", addmm.shapes[0].group)  # (the cell cuts it in the middle)
            expect(first).to_be_checked()

            # The factor: one step right of 2x is 3x, as the live kernel answers it.
            answer = panel.locator(".km-what-if-text")
            expect(answer).to_have_text(what_if_text(2.0, result.what_if({addmm.key: 2.0})),
                                        timeout=CLICK_TIMEOUT)
            handle = panel.locator(".km-factor .noUi-handle, .km-factor .ui-slider-handle").first
            handle.focus()
            handle.press("ArrowRight")
            expect(answer).to_have_text(what_if_text(3.0, result.what_if({addmm.key: 3.0})),
                                        timeout=CLICK_TIMEOUT)
            handle.press("End")
            gone = math.inf  # the slider's last step
            assert SLIDER_FACTORS[-1][1] == gone
            expect(answer).to_have_text(what_if_text(gone, result.what_if({addmm.key: gone})),
                                        timeout=CLICK_TIMEOUT)
            panel.evaluate("e => e.scrollIntoView({block: 'center'})")
            shot = _box(panel)
            area = _box(report)
            page.screenshot(path=str(ARTIFACTS / "panel.png"), clip={
                "x": area["x"], "y": shot["y"] - 4, "width": area["width"],
                "height": shot["height"] + 8})
            # The side: the device only.
            panel.locator(".km-side button", has_text=re.compile("^device$")).click()
            expect(answer).to_have_text(what_if_text(
                gone, result.what_if({addmm.key: gone}, "device")), timeout=CLICK_TIMEOUT)

            # Another row: the panel follows, only its radio button is checked.
            second = _open_row(report, "aten::copy_")
            expect(head).to_have_text(re.compile(r"^aten::copy_: "), timeout=CLICK_TIMEOUT)
            expect(second).to_be_checked()
            expect(first).not_to_be_checked()
            # Sorting keeps it; closing hides it and unchecks the row.
            report.locator(".km-tab-ops button.km-header",
                           has_text=re.compile(r"^calls/iter")).click()
            expect(head).to_have_text(re.compile(r"^aten::copy_: "))
            expect(report.locator(".km-tab-ops .km-picker input:checked")).to_have_count(
                1 if "aten::copy_" in _top(result, "calls") else 0, timeout=CLICK_TIMEOUT)
            panel.locator("button.km-panel-close").click()
            expect(panel).to_be_hidden(timeout=CLICK_TIMEOUT)
            expect(report.locator(".km-tab-ops .km-picker input:checked")).to_have_count(0)
        except BaseException:
            with contextlib.suppress(Exception):
                page.screenshot(path=str(ARTIFACTS / "panel-failed.png"))
            shutil.copy2(lab.log, ARTIFACTS / "jupyterlab-panel.log")
            raise
    finally:
        page.close()
    png = ARTIFACTS / "panel.png"
    assert png.stat().st_size < PANEL_SCREENSHOT_BYTES, png.stat().st_size
    if os.environ.get("KM_UPDATE_SCREENSHOT") == "1":
        shutil.copy2(png, PANEL_SCREENSHOT)
