"""Benchmark (#47): what the widget's row panel costs.

Two results of about 200,000 events: a synthetic GPU training trace
(``synthetic_traces.cached_trace(200_000, steps=10)``: ops, runtime calls, kernels) and a
live CPU profile of ``a = a.add(1).mul(0.5)`` x 2,000 on 16 elements, ``-n 10``
(``bench_event_model.py``'s cell), plus ``v100_gpu_annotations.json.gz`` (a real trace).

* first display: the report's widget (``report_widget``, its pictures drawn once
  beforehand) as it is now, a radio button before each shown row of the op table and the
  kernels tab (one ``RadioButtons`` each), against the same build with ``RowPanel``
  replaced by ``None`` (the tables as before #47: one HTML body, no radio buttons),
  alternating in one process; and the whole mime bundle (text, HTML, pictures, widget) the
  same way. Target: no slower than before (the ratio of the paired rounds' medians within
  the rounds' noise, at most 1.05x on the whole bundle), the widget alone reported.
* opening a panel: a row's radio button clicked to the panel built (``result.explain`` of
  the row, its tables, picture and lines, and the what-if at 2x), the first one (which
  makes the panel's widgets) and then another row; a step of the factor
  (``result.what_if``); a kernel row of the kernels tab. Target: under 100 ms each.

Widgets are made with the dummy comms of a process without a front end (as in the tests):
what the browser then does with the models is not in these figures.

    python benchmarks/bench_panel.py [--rounds N]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import _common as c

DISPLAY_TARGET = 1.05
OPEN_TARGET_S = 0.100
TRACE = c.REPO_ROOT / "tests" / "data" / "v100_gpu_annotations.json.gz"


def results() -> dict[str, Any]:
    """The results under test, by name."""
    from synthetic_traces import cached_trace

    import kernelmagic

    out = {}
    facts = cached_trace(200_000, steps=10)
    out["synthetic 200k-event GPU trace"] = kernelmagic.load(facts.path)
    from bench_event_model import session

    _, out["live 200k-event CPU cell"] = session(2000)
    out["v100_gpu_annotations"] = kernelmagic.load(TRACE)
    return out


def close(made: Any) -> None:
    """Close the report's widgets (a widget, or a mime bundle's), so that rounds do not
    pile up models."""
    from ipywidgets.widgets.widget import _instances

    from kernelmagic.render.bundle import close_tree

    if isinstance(made, dict):
        model = made.get("application/vnd.jupyter.widget-view+json")
        made = _instances.get(model["model_id"]) if model else None
    if made is not None:
        close_tree(made)


def built(fn: Callable[[], Any]) -> Callable[[], float]:
    """A side that times ``fn`` and then closes the widgets it made."""

    def side() -> float:
        t0 = c.clock()
        made = fn()
        elapsed = c.clock() - t0
        close(made)
        return elapsed

    return side


def without_panels(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` with ``RowPanel`` replaced by ``None``: the report as before #47."""
    from kernelmagic.render import widget

    def run() -> Any:
        saved = widget.RowPanel
        widget.RowPanel = lambda *a, **k: None  # type: ignore[assignment,misc]
        try:
            return fn()
        finally:
            widget.RowPanel = saved  # type: ignore[misc]

    return run


def first_display(name: str, result: Any, rounds: int) -> None:
    from kernelmagic.render.bundle import mime_bundle, report_pictures
    from kernelmagic.render.widget import report_widget

    pictures = report_pictures(result)

    def widget() -> Any:
        return report_widget(result, pictures.chart, timeline_svg=pictures.timeline,
                             pictures=pictures.views)

    def bundle() -> Any:
        made = mime_bundle(result)
        assert "application/vnd.jupyter.widget-view+json" in made  # (``c.shell()``)
        return made

    for what, fn, judged in (("widget", widget, False), ("mime bundle", bundle, True)):
        times = c.alternate({"after": built(fn), "before": built(without_panels(fn))},
                            rounds, progress=False)
        print(c.describe(f"{what}, after", times["after"]))
        print(c.describe(f"{what}, before", times["before"]))
        ratio = c.paired_ratio(times["after"], times["before"])
        metric = f"first display ({what}), {name}: after / before"
        if judged:
            c.verdict("panel", metric, km=c.median(times["after"]),
                      manual=c.median(times["before"]), ratio=ratio,
                      target=f"<= {DISPLAY_TARGET}x", passed=ratio <= DISPLAY_TARGET)
        else:
            print(f"  {metric}: {ratio:.3f}x (reported)")


def timed(fn: Callable[[], Any]) -> float:
    t0 = c.clock()
    fn()
    return c.clock() - t0


def opening(name: str, result: Any, rounds: int) -> None:
    """A fresh report per round: its first row opened, a second row, a factor step (to
    5x: not one of the what-ifs ``explain`` answered already), and a kernel row; medians
    over the rounds."""
    from kernelmagic.render.widget import report_widget

    figures: dict[str, list[float]] = {}
    for _ in range(rounds):
        box = report_widget(result, None)
        table = box.km_table
        steps = {"first row opened": lambda t=table: setattr(t.picker, "value", 0),
                 "another row opened": lambda t=table: setattr(t.picker, "value", 1),
                 "factor moved (what_if)": lambda t=table: setattr(t.panel.slider, "value",
                                                                   5.0)}
        kernels = box.km_views.get("kernels")
        if kernels is not None:
            steps["kernel row opened"] = lambda k=kernels: setattr(k.picker, "value", 0)
        for what, step in steps.items():
            figures.setdefault(what, []).append(timed(step))
        close(box)
    for what, times in figures.items():
        c.verdict("panel", f"{what}, {name}", km=c.median(times),
                  target=f"< {OPEN_TARGET_S * 1e3:.0f} ms",
                  passed=c.median(times) < OPEN_TARGET_S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    c.header("row panel (#47): first display before/after, opening a panel")
    c.shell()  # an InteractiveShell: the mime bundle builds the widget (as in a notebook)
    for name, result in results().items():
        print(f"\n{name}: {len(result.rows):,} rows, {len(result.kernels):,} kernels")
        first_display(name, result, args.rounds)
        opening(name, result, max(3, args.rounds // 3))


if __name__ == "__main__":
    main()
