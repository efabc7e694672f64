"""Opening and showing a saved profile or a trace file never imports torch, whatever the view.

The profile is taken here, with every view on, and saved; the checks then run in one
fresh interpreter where torch cannot be imported (``sys.modules["torch"] = None`` before
kernelmagic is imported) and where every attempt to import it is recorded: for each view in
turn the file is loaded, its view rendered (the display bundle's text and HTML, the
findings, the view's own rendering) and shown by ``python -m kernelmagic show``; the
attempts made during each view, and any torch module loaded after it, are that view's
failure. One interpreter for all the views, so the imports are paid once (each view's test
reads its own outcome).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
VIEWS = ("memory", "shapes", "flops", "stack", "modules", "timeline", "roofline")

#: What ``show`` prints for each view (the timeline is a chart: drawn on its own below).
SHOWN = {"memory": "Peak memory", "shapes": "input shapes", "flops": "FLOP/iter",
         "stack": "[source]", "modules": "[modules]", "roofline": "[roofline]",
         "timeline": "", "trace": "[kernels]"}

CHECK = r'''
import builtins
import json
import sys
import traceback

sys.modules["torch"] = None  # `import torch` now fails
tried = []
_import = builtins.__import__


def _recording_import(name, *args, **kwargs):
    if name == "torch" or name.startswith("torch."):
        tried.append(name)
    return _import(name, *args, **kwargs)


builtins.__import__ = _recording_import

import contextlib
import io
import runpy

import kernelmagic


def check(path, view, shown):
    result = kernelmagic.load(path)
    if view == "roofline":
        assert result.roofline and sum(result.roofline_verdict.values()) > 0.99
        from kernelmagic.render.roofline import roofline_png, roofline_table, verdict_line

        assert roofline_table(result).rows and verdict_line(result)
        assert roofline_png(result).startswith(b"\x89PNG")
    elif view == "timeline":
        assert result.timeline
        from kernelmagic.render.timeline import timeline_svg  # an SVG since #28

        assert timeline_svg(result).startswith(b"<svg")
    elif view != "trace":
        assert view in result.views, result.views
    bundle = result._repr_mimebundle_()
    assert bundle["text/plain"] and bundle["text/html"]
    findings = result.findings()
    assert isinstance(findings, list)
    out = io.StringIO()
    sys.argv = ["kernelmagic", "show", path]
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_module("kernelmagic", run_name="__main__", alter_sys=True)
        except SystemExit as exit:
            assert exit.code in (0, None), exit.code
    assert shown in out.getvalue(), out.getvalue()


jobs = sys.argv[1:]
for path, view, shown in zip(jobs[0::3], jobs[1::3], jobs[2::3]):
    del tried[:]
    try:
        check(path, view, shown)
        loaded = sorted(m for m in sys.modules
                        if m.split(".")[0] == "torch" and sys.modules[m] is not None)
        assert not tried and not loaded, (tried, loaded)
        outcome = "no torch"
    except BaseException:
        outcome = traceback.format_exc()
    print(json.dumps([view, outcome]), flush=True)
'''


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A profile with every view, roofline included, saved to a file."""
    import torch

    import kernelmagic

    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU())
    x = torch.randn(16, 32)
    result = kernelmagic.profile(lambda: model(x), iters=2, warmup=1,
                                 **{view: True for view in VIEWS})
    assert result.roofline and set(result.views) >= set(VIEWS) - {"roofline"}
    path = tmp_path_factory.mktemp("no_torch") / "every_view.json"
    result.save(path)
    return path


def run_without_torch(jobs: list[tuple[Path, str]]) -> dict[str, str]:
    """Each view's outcome in one interpreter without torch: "no torch" or the traceback."""
    args = [str(arg) for path, view in jobs for arg in (path, view, SHOWN[view])]
    done = subprocess.run([sys.executable, "-c", CHECK, *args],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = dict(json.loads(line) for line in done.stdout.splitlines()
                    if line.startswith("["))
    assert set(outcomes) == {view for _, view in jobs}, done.stdout[-3000:]
    return outcomes


@pytest.fixture(scope="module")
def outcomes(saved: Path) -> dict[str, str]:
    """Every view of the saved profile, then the trace file's, checked in one interpreter."""
    return run_without_torch([*((saved, view) for view in VIEWS),
                              (DATA / "h200_train_step.json.gz", "trace")])


def _passed(outcome: str) -> None:
    assert outcome == "no torch", outcome[-3000:]


@pytest.mark.parametrize("view", VIEWS)
def test_a_saved_profile_shows_each_view_without_torch(outcomes: dict[str, str],
                                                        view: str) -> None:
    _passed(outcomes[view])


def test_a_trace_file_shows_without_torch(outcomes: dict[str, str]) -> None:
    _passed(outcomes["trace"])
