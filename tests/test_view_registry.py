"""A view is declared once (``kernelmagic/views/registry.py``) and every report reads the
declaration: a toy view in a module of its own (a temporary file, outside kernelmagic)
registers itself and shows in the text, HTML and widget reports and in ``to_pandas``, with
no line of kernelmagic changed. And the built-in declarations agree with the options and
the findings they name."""

from __future__ import annotations

import dataclasses
import importlib
import sys
import textwrap

import pytest
from fakes import table_of

from kernelmagic.core.events import Kind
from kernelmagic.core.options import OPTIONS
from kernelmagic.results.builder import build_result
from kernelmagic.results.result import ProfileResult
from kernelmagic.views import registry
from kernelmagic.views.registry import view_specs

TOY = '''
"""A toy view: CPU time of the ops per thread (the recipe of docs/architecture.md)."""

from dataclasses import dataclass, field

import numpy as np

from kernelmagic.core.events import Kind
from kernelmagic.core.records import unit
from kernelmagic.views.registry import Frame, ViewSpec, register


@dataclass(frozen=True)
class ThreadRow:
    key: str
    ops: int = unit("ops, summed over {over}", 0)
    cpu_time_total: float = unit("µs, summed over {over}", 0.0)


@dataclass(frozen=True)
class ThreadsView:
    rows: list[ThreadRow] = field(default_factory=list)


def build(inputs):
    table = inputs.table
    ops = np.flatnonzero(table.kind == Kind.OP)
    rows = [ThreadRow(f"thread {tid}", int((table.tid[ops] == tid).sum()),
                      float(table.duration[ops][table.tid[ops] == tid].sum()) / 1000)
            for tid in sorted(set(table.tid[ops].tolist()))]
    return ThreadsView(rows)


def threads_tables(result):
    from kernelmagic.render.table import Column, Table, time_column

    cols = [Column("op", "thread", lambda r: r.key, lambda r: r.key, numeric=False),
            Column("ops", "ops", lambda r: r.ops, lambda r: str(r.ops)),
            time_column("cpu", "total CPU", lambda r: r.cpu_time_total)]
    return [("threads", Table(cols, result.view("threads").rows, "cpu", noun="threads"))]


def threads_picture(result):
    from kernelmagic.render.views import Picture

    return Picture(b'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>',
                   "image/svg+xml", "threads chart")


THREADS = register(ViewSpec(
    "threads", ThreadsView, build, option="threads", flag="--threads",
    help="CPU time of the ops per thread", frames=(Frame("threads", "rows", ThreadRow),),
    tables="km_toy_view:threads_tables", picture="km_toy_view:threads_picture"))
'''


@pytest.fixture
def toy_view(tmp_path, monkeypatch):
    """The toy view's module imported from a temporary folder; the registry as it was after."""
    monkeypatch.setattr(registry, "_SPECS", dict(registry._SPECS))
    (tmp_path / "km_toy_view.py").write_text(textwrap.dedent(TOY), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("km_toy_view")
    yield module
    sys.modules.pop("km_toy_view", None)


def toy_result() -> ProfileResult:
    # Thread 1: two ops of 300 and 200 µs; thread 2: one of 100 µs (one iteration).
    table = table_of(
        (Kind.RANGE, "run/iter 0", 0, 1000, 1),
        (Kind.OP, "aten::mm", 100, 400, 1),
        (Kind.OP, "aten::add", 500, 700, 1),
        (Kind.OP, "aten::mul", 100, 200, 2),
    )
    return build_result(table, name="run", views=["threads"])


def test_a_toy_view_shows_in_every_report_and_in_to_pandas(toy_view):
    from kernelmagic.render.html import html_report
    from kernelmagic.render.text import text_report
    from kernelmagic.render.widget import report_widget

    result = toy_result()
    assert result.view("threads") == toy_view.ThreadsView([
        toy_view.ThreadRow("thread 1", 2, 500.0), toy_view.ThreadRow("thread 2", 1, 100.0)])
    text = text_report(result)
    section = text[text.index("[threads]"):]
    assert "thread 1" in section and "500 µs" in section and "100 µs" in section
    html = html_report(result)
    view = html[html.index("km-view-threads"):]
    assert view.index('alt="threads chart"') < view.index("thread 1")  # the picture above
    box = report_widget(result, None)
    assert "threads" in box.km_selector.options
    assert box.km_boxes["threads"].children == ()  # made when the tab is first shown
    box.km_selector.value = "threads"
    picture, table = box.km_boxes["threads"].children
    assert picture.format == "svg+xml" and table is box.km_views["threads"].widget
    assert box.km_views["threads"].order == ["thread 1", "thread 2"]
    frame = result.to_pandas("threads")
    assert frame.to_dict("records") == [
        {"key": "thread 1", "ops": 2, "cpu_time_total": 500.0},
        {"key": "thread 2", "ops": 1, "cpu_time_total": 100.0}]
    assert frame.attrs["units"] == {"ops": "ops, summed over the 1 profiled iteration",
                                    "cpu_time_total": "µs, summed over the 1 profiled iteration"}
    back = ProfileResult.from_dict(result.to_dict())  # saved and loaded, with its record
    assert back.view("threads") == result.view("threads")


def test_a_toy_views_option_is_a_flag_with_its_help_a_keyword_and_not_nsight(toy_view):
    from kernelmagic.api import profile
    from kernelmagic.magic import options_from, with_options

    def magic(line: str, cell: str | None = None) -> None:
        """The magic's help."""

    decorated = with_options(magic)  # as the magic is decorated when its module loads
    help_lines = decorated.__doc__.splitlines()
    at = next(i for i, line in enumerate(help_lines) if line.strip().startswith("--threads"))
    assert "CPU time of the ops per thread" in " ".join(help_lines[at:at + 2])
    options = options_from(decorated.parser.parse_args(["--threads", "-n", "2"]), "c")
    assert options.more_views == ("threads",) and options.asked_views() == ["threads"]
    assert options_from(decorated.parser.parse_args(["--memory"]), "c").more_views == ()
    with pytest.raises(ValueError, match="--nsight cannot be combined with the threads view"):
        options_from(decorated.parser.parse_args(["--threads", "--nsight"]), "c")
    with pytest.raises(ValueError, match="--nsight cannot be combined with the threads view"):
        profile(lambda: None, threads=True, nsight=True)  # refused before anything runs
    with pytest.raises(ValueError, match="unknown option 'thread'"):
        profile(lambda: None, thread=True)
    unasked = build_result(table_of((Kind.RANGE, "run/iter 0", 0, 1000, 1)), name="run")
    assert "threads" not in unasked.view_records


def test_a_view_no_longer_registered_is_left_out_of_a_loaded_file(toy_view, monkeypatch):
    data = toy_result().to_dict()
    monkeypatch.delitem(registry._SPECS, "threads")
    assert "threads" not in ProfileResult.from_dict(data).view_records


def test_each_built_in_view_names_a_real_option_renderer_and_findings():
    from kernelmagic.findings import RULES
    from kernelmagic.findings.counters import RULES as COUNTER_RULES
    from kernelmagic.findings.roofline import RULES as ROOFLINE_RULES
    from kernelmagic.render.views import resolve

    rules = {rule.__name__ for rule in RULES + COUNTER_RULES + ROOFLINE_RULES}
    options = {o.name for o in OPTIONS} | {"counters"}
    for spec in view_specs():
        assert not spec.option or spec.option in options, spec.name
        for path in (spec.tables, spec.notes, spec.picture):
            assert not path or callable(resolve(path)), (spec.name, path)
        assert set(spec.findings) <= rules, spec.name
        assert dataclasses.is_dataclass(spec.record), spec.name
        assert not spec.flag, spec.name  # a built-in view's option is a ProfileOptions field
        for frame in spec.frames:
            assert frame.rows in {f.name for f in dataclasses.fields(spec.record)}
    # every deeper view of an option has its declaration
    declared = {spec.option for spec in view_specs()}
    assert {o.name for o in OPTIONS if o.view} - {"shapes", "flops"} <= declared
