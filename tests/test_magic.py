"""The magic through IPython's InteractiveShell, as a notebook user drives it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import kernelmagic
from kernelmagic.live import torch_compat
from kernelmagic.live.runner import ProfilerBusyError
from kernelmagic.magic import split_line
from kernelmagic.render.bundle import WIDGET_MIME

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SETUP = "a = torch.randn(64, 64)\nb = torch.randn(64, 64)"


def run(ip, cell: str, store_history: bool = True):
    with capture_output() as cap:
        result = ip.run_cell(cell, store_history=store_history)
    return result, cap


def report_data(outputs: list) -> dict:
    """A report's two outputs, the static report then its widget (``render/bundle.py:
    display_outputs``), as the one bundle they were made from."""
    from kernelmagic.render.bundle import WIDGET_TEXT

    static, widget = outputs[-2].data, outputs[-1].data
    assert set(widget) == {"text/plain", WIDGET_MIME}
    assert widget["text/plain"] == WIDGET_TEXT
    assert static["text/html"].startswith('<div class="km-static"><style>')
    view = widget[WIDGET_MIME]
    assert "km-live" in widget_of(widget)._dom_classes
    return {**static, WIDGET_MIME: view}


def widget_of(bundle: dict):
    import ipywidgets

    model_id = bundle[WIDGET_MIME]["model_id"]
    registry = getattr(ipywidgets.widgets.widget, "_instances", None)
    if registry is None:  # ipywidgets 7
        registry = ipywidgets.Widget.widgets
    return registry[model_id]


# --- loading --------------------------------------------------------------------------


def test_import_is_light():
    code = ("import sys, kernelmagic; "
            "print([m for m in ('torch', 'matplotlib', 'ipywidgets') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_load_and_unload(shell):
    mm = shell.magics_manager
    assert mm.magics["cell"]["profile"].__self__.__class__.__name__ == "ProfileMagics"
    assert mm.magics["line"]["profile"].__self__.__class__.__name__ == "ProfileMagics"
    shell.run_line_magic("unload_ext", "kernelmagic")
    try:
        assert "profile" not in mm.magics["cell"] and "profile" not in mm.magics["line"]
        # A line magic that had our name before loading comes back after unloading.
        shell.register_magic_function(lambda line: f"theirs {line}", "line", "profile")
        shell.run_line_magic("load_ext", "kernelmagic")
        assert mm.magics["line"]["profile"].__self__.__class__.__name__ == "ProfileMagics"
        shell.run_line_magic("unload_ext", "kernelmagic")
        assert shell.run_line_magic("profile", "x") == "theirs x"
        mm.magics["line"].pop("profile")
    finally:
        shell.run_line_magic("load_ext", "kernelmagic")
    assert mm.magics["cell"]["profile"].__self__.__class__.__name__ == "ProfileMagics"


def test_generated_help_lists_every_option(ip):
    with capture_output() as cap:
        ip.run_cell("%%profile?")
    text = cap.stdout
    for option in ("--iters", "--warmup", "--topk", "--sort", "--name", "--out",
                   "--cpu-only", "--quiet", "self_device", "warmup + iters"):
        assert option in text, option
    # argparse %-formats help text: the cell magic keeps both of its % signs (#28).
    assert "(%%profile\n" in text or "(%%profile uses" in text
    assert "(%profile" not in text


# --- running --------------------------------------------------------------------------


def test_report_bundle_has_widget_and_fallbacks(ip):
    ip.run_cell(SETUP)
    res, cap = run(ip, "%%profile -n 3 -w 1\nc = a @ b\nd = torch.relu(c)")
    assert res.success
    assert len(cap.outputs) == 2, "one report per run: its static HTML and its widget"
    data = report_data(cap.outputs)
    assert {"text/plain", "text/html", WIDGET_MIME} <= set(data)
    assert "aten::mm" in data["text/plain"] and "aten::relu" in data["text/plain"]
    assert 'src="data:image/svg+xml;base64,' in data["text/html"]  # the top-k chart
    assert "<table" in data["text/html"]
    import ipywidgets

    images = [c for c in widget_of(data).children if isinstance(c, ipywidgets.Image)]
    assert [i.format for i in images] == ["svg+xml"] and b"<svg" in bytes(images[0].value)
    assert data["text/plain"].splitlines()[0].startswith(
        f"cell[{res.execution_count}] · CPU · 3 iterations (+1 warm-up)")


def _record_trims_and_displays(ip, monkeypatch) -> list[str]:
    """The order of heap trims (``return_freed_memory``) and of displayed outputs."""
    events: list[str] = []
    monkeypatch.setattr(torch_compat, "return_freed_memory", lambda: events.append("trim"))
    from IPython.core.displaypub import CapturingDisplayPublisher

    publish = CapturingDisplayPublisher.publish

    def record(self, *args, **kwargs):
        events.append("display")
        return publish(self, *args, **kwargs)

    monkeypatch.setattr(CapturingDisplayPublisher, "publish", record)  # what run() uses
    return events


def _trims_done() -> None:
    """Wait for the trims the magic started on their daemon threads."""
    import threading

    for thread in threading.enumerate():
        if thread.name == "kernelmagic-trim":
            thread.join()


def test_freed_heap_goes_back_after_the_report_is_shown(ip, monkeypatch):
    events = _record_trims_and_displays(ip, monkeypatch)
    ip.run_cell(SETUP)
    res, cap = run(ip, "%%profile -n 2 -w 0\nc = a @ b")
    _trims_done()
    assert res.success and len(cap.outputs) == 2  # the static report and its widget
    assert events == ["display", "display", "trim"]  # once per run, never before the report
    events.clear()
    res, _ = run(ip, "%%profile -n 2 -w 0 -q\nc = a @ b")
    _trims_done()
    assert res.success and events == ["trim"]  # shown or not, the heap is trimmed


def test_freed_heap_goes_back_after_a_partial_report_not_after_a_failed_run(ip, monkeypatch):
    events = _record_trims_and_displays(ip, monkeypatch)
    ip.run_cell("n = 0")
    res, cap = run(ip, "%%profile -n 5 -w 0\nn += 1\nif n == 3:\n    raise KeyboardInterrupt")
    _trims_done()
    assert isinstance(res.error_in_exec, KeyboardInterrupt) and len(cap.outputs) == 2
    assert events == ["display", "display", "trim"]
    events.clear()
    res, _ = run(ip, "%%profile -n 2 -w 0\nraise ValueError('boom')")
    _trims_done()
    assert isinstance(res.error_in_exec, ValueError) and events == []


def test_cell_runs_warmup_plus_iters_times_in_user_namespace(ip):
    ip.run_cell("counter = 0")
    res, _ = run(ip, "%%profile -n 4 -w 2 -q\ncounter += 1\nlast = torch.ones(2) * counter")
    assert res.success
    assert ip.user_ns["counter"] == 6
    assert ip.user_ns["last"].tolist() == [6.0, 6.0]


def test_out_binds_result_and_quiet_shows_nothing(ip):
    ip.run_cell(SETUP)
    res, cap = run(ip, "%%profile -n 2 -w 0 -q -o r --name mm\nc = a @ b")
    assert res.success and cap.outputs == []
    r = ip.user_ns["r"]
    assert (r.name, r.iters, r.warmup, len(r.timings)) == ("mm", 2, 0, 2)
    assert {row.key: row.count for row in r.rows}["aten::mm"] == 2


@pytest.mark.parametrize("cell", ["%%profile -n 1 -w 0 -q -o r\nc = a + b",
                                  "%profile -n 1 -w 0 -q -o r c = a + b"])
def test_default_name_is_the_number_shown_beside_the_cell(ip, cell):
    ip.run_cell(SETUP)
    first, _ = run(ip, cell)
    assert first.success and first.execution_count is not None
    assert ip.user_ns["r"].name == f"cell[{first.execution_count}]"
    again, _ = run(ip, cell)  # re-running the cell gives it a new number
    assert again.execution_count == first.execution_count + 1
    assert ip.user_ns["r"].name == f"cell[{again.execution_count}]"


def test_traceback_names_the_cell_by_its_own_number(ip):
    res, cap = run(ip, "%%profile -n 1 -w 0\nx = 1\nraise ValueError('boom')")
    assert isinstance(res.error_in_exec, ValueError)
    shown = ANSI.sub("", cap.stdout + cap.stderr)
    n = res.execution_count
    # The frame of the cell's own second line carries the cell's number, as the outer one.
    assert re.search(rf"(In ?\[{n}\], line 2|ipython-input-{n}-\w+>? in <module>)", shown)
    assert "raise ValueError('boom')" in shown


def test_line_magic_keeps_statement_verbatim(ip):
    ip.run_cell(SETUP)
    res, cap = run(ip, '%profile -n 2 -w 0 -o r s = "x  -n 5"; t = a.sum()')
    assert res.success
    assert ip.user_ns["s"] == "x  -n 5"
    assert ip.user_ns["r"].iters == 2
    assert "aten::sum" in {row.key for row in ip.user_ns["r"].rows}
    assert len(cap.outputs) == 2  # the static report and its widget


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("-n 3 f(x)", ("-n 3 ", "f(x)")),
        ("--iters=3 -q f(x, '-n')", ("--iters=3 -q ", "f(x, '-n')")),
        ("-n3 -o r -- -x", ("-n3 -o r ", "-x")),
        ("f(x)", ("", "f(x)")),
        ("-n 2", ("-n 2", "")),
        ("--name 'my run' f(x)", ("--name 'my run' ", "f(x)")),
        ('--trace "/tmp/a b.json" -q f(x)', ('--trace "/tmp/a b.json" -q ', "f(x)")),
    ],
)
def test_split_line(line, expected):
    assert split_line(line) == expected


def test_backslashes_in_option_values_stay():
    # A Windows path keeps its backslashes (a shell's escapes would drop them).
    from kernelmagic.magic import ProfileMagics, parse_options

    args = parse_options(ProfileMagics.profile, r'--trace C:\runs\a.json --name "a\b c" -n5')
    assert (args.trace, args.name, args.iters) == (r"C:\runs\a.json", r"a\b c", 5)


def test_quoted_option_values_lose_their_quotes(ip, tmp_path):
    # As a shell reads them (IPython's parse_argstring kept the quotes in the value: the
    # name 'my run' with its quotes, and no way to give a path with a space).
    ip.run_cell(SETUP)
    res, _ = run(ip, "%%profile -n 2 -w 0 -q --name 'my run' -o r\nd = a @ b")
    assert res.success and ip.user_ns["r"].name == "my run"
    trace = tmp_path / "with space.json"
    res, _ = run(ip, f'%profile -n 2 -w 0 -q --name "line run" --trace "{trace}" -o r d = a @ b')
    assert res.success and ip.user_ns["r"].name == "line run" and trace.exists()
    res, cap = run(ip, "%%profile -n 2 -w 0 --name 'unclosed\nd = a @ b")
    assert isinstance(res.error_before_exec or res.error_in_exec, UsageError)
    assert "No closing quotation" in cap.stderr + cap.stdout


def test_sort_option_orders_table(ip):
    ip.run_cell(SETUP)
    run(ip, "%%profile -n 2 -w 0 -q -s calls -o r\nfor _ in range(5): c = a.add(b)\nd = a @ b")
    r = ip.user_ns["r"]
    assert r.sort == "calls"
    assert r.top(1)[0].key == "aten::add"


# --- the widget -----------------------------------------------------------------------


def test_header_click_sorts_and_second_click_flips(ip):
    ip.run_cell(SETUP)
    _, cap = run(ip, "%%profile -n 2 -w 0\nfor _ in range(20): c = a.add(b)\nd = a @ b")
    box = widget_of(report_data(cap.outputs))
    table = box.km_table
    headers = table.headers
    selfs = {r.key: r.self_cpu_time_total for r in table.table.rows}
    assert [selfs[k] for k in table.order] == sorted(selfs.values(), reverse=True)
    # The title says the figures are per iteration (the name column: "mean of 2 it.").
    assert headers["op"].description == "op (mean of 2 it.)"
    assert headers["self_cpu"].description == "self CPU/iter ▼"
    headers["calls"].click()
    assert headers["calls"].description == "calls/iter ▼"
    assert headers["self_cpu"].description == "self CPU/iter"
    assert table.order[0] == "aten::add"
    counts = {r.key: r.count for r in table.table.rows}
    assert [counts[k] for k in table.order] == sorted(counts.values(), reverse=True)
    assert table.body.value.index("aten::add") < table.body.value.index("aten::mm")
    headers["calls"].click()
    assert headers["calls"].description == "calls/iter ▲"
    assert [counts[k] for k in table.order] == sorted(counts.values())
    assert table.order[-1] == "aten::add"  # 40 calls: the most
    headers["op"].click()
    assert table.order == sorted(table.order)


def test_more_columns_shows_the_rest_and_fewer_hides_them_again():
    from fakes import cpu_result

    from kernelmagic.render.table import op_table
    from kernelmagic.render.widget import SortableTable

    table = SortableTable(op_table(cpu_result()))
    per_call = table.headers["cpu_avg"]
    assert per_call.layout.display == "none" and "CPU/call" not in table.body.value
    assert table.columns_button is not None
    assert table.columns_button.description == "more columns (CPU/call)"
    table.columns_button.click()
    assert per_call.layout.display is None
    assert table.body.value.count("km-col-cpu_avg") == 6  # one cell per row
    per_call.click()  # sort by a column only the wide table has ...
    assert table.order[0] == "aten::linear"  # 310 µs per call: the most
    table.columns_button.click()  # ... then hide it: back to the default sort
    assert table.columns_button.description.startswith("more columns")
    assert per_call.layout.display == "none" and "km-col-cpu_avg" not in table.body.value
    assert table.column_id == "self_cpu" and table.order[0] == "aten::addmm"


def test_long_table_shows_top_rows_and_more_on_request():
    from fakes import cpu_result

    from kernelmagic.core.rows import OpRow
    from kernelmagic.render.table import op_table
    from kernelmagic.render.widget import SortableTable

    rows = [OpRow(f"op{i:04d}", 1, float(i), float(i)) for i in range(1000)]
    table = SortableTable(op_table(cpu_result(rows=rows)), page=25)
    assert len(table.order) == 25 and table.order[0] == "op0999"
    assert table.body.value.count('class="km-row"') == 25
    assert "25 of 1,000 ops" in table.status.value  # counted: thousands separated (#28)
    table.more_button.click()
    assert len(table.order) == 50
    table.all_button.click()
    assert len(table.order) == 1000
    assert table.more_button.layout.display == "none"


def test_widget_is_built_in_its_final_state_and_shares_layouts(monkeypatch):
    """Each model reaches the front end once, as it is shown (no update right after it is
    opened); layouts and styles that never change are shared; clicks still update."""
    import ipywidgets
    from fakes import cpu_result

    from kernelmagic.core.rows import OpRow
    from kernelmagic.render.widget import report_widget

    sent: list[tuple[str, object]] = []
    monkeypatch.setattr(ipywidgets.Widget, "send_state",
                        lambda self, key=None: sent.append((type(self).__name__, key)))
    rows = [OpRow(f"op{i:02d}", 1, float(i), float(i)) for i in range(30)]
    box = report_widget(cpu_result(rows=rows), b"<svg/>")
    assert sent == []
    table = box.km_table
    assert table.headers["self_cpu"].description == "self CPU/iter ▼"
    assert table.order[0] == "op29" and table.body.value.count('class="km-row"') == 25
    assert table.status.value.endswith(">25 of 30 ops</span>")
    assert table.more_button.layout is table.all_button.layout  # shown and hidden together
    assert table.more_button.layout.display is None
    assert box.km_selector is None  # a lone "ops" tab: no selector at all
    assert "km-header" in table.headers["op"]._dom_classes
    summary = box.children[0]
    assert summary.style is table.body.style is table.status.style
    assert summary.layout is box.layout  # neither ever changes
    assert len({id(b.style) for b in [*table.headers.values(), table.more_button]}) == 1
    table.all_button.click()
    assert table.body.value.count('class="km-row"') == 30
    assert table.more_button.layout.display == "none"
    table.headers["calls"].click()
    assert table.headers["calls"].description == "calls/iter ▼"
    if int(ipywidgets.__version__.split(".")[0]) >= 8:  # 7 sends nothing without a kernel
        assert {key for _, key in sent} >= {"description", "value", "display"}  # clicks update


def test_op_names_are_escaped_everywhere():
    from fakes import cpu_result

    from kernelmagic.render.bundle import mime_bundle
    from kernelmagic.render.widget import report_widget

    r = cpu_result()
    html = mime_bundle(r, include={"text/html"})["text/html"]
    assert "<script>" not in html and "&lt;script&gt;" in html
    box = report_widget(r, None)
    assert "<script>" not in box.km_table.body.value


# --- failures -------------------------------------------------------------------------


def test_bad_options_are_one_line_usage_errors(ip):
    cases = {
        "%%profile -n 0\nx = 1": "-n/--iters must be an integer >= 1; got 0",
        "%%profile -n x\nx = 1": "argument -n/--iters: invalid int value: 'x'",
        "%%profile -w -1\nx = 1": "-w/--warmup must be an integer >= 0; got -1",
        "%%profile -k 0\nx = 1": "-k/--topk must be an integer >= 1; got 0",
        "%%profile -s time\nx = 1": "-s/--sort must be one of",
        "%%profile -o 2x\nx = 1": "-o/--out must be a Python identifier",
        "%%profile --bogus\nx = 1": "unrecognized arguments: --bogus",
        "%%profile\n   \n": "nothing to profile: the cell is empty",
        "%profile -n 2": "nothing to profile",
        "%%profile --force\nx = 1": "--force needs --trace",
        "%%profile --try threads=0\nx = 1": "N in threads=N is a whole number of at least 1",
    }
    if not torch.cuda.is_available():
        cases["%%profile -s self_device\nx = 1"] = "needs device profiling"
    for cell, message in cases.items():
        ip.user_ns.pop("x", None)
        res, cap = run(ip, cell)
        assert isinstance(res.error_in_exec, UsageError), cell
        assert message in str(res.error_in_exec), (cell, str(res.error_in_exec))
        assert "\n" not in str(res.error_in_exec)
        assert "x" not in ip.user_ns, "nothing runs before options are valid"
        assert cap.outputs == []


def test_exception_in_cell_shows_cell_traceback_and_next_run_works(ip):
    ip.run_cell(SETUP)
    cell = "%%profile -n 3 -w 1\nc = a @ b\ndef explode():\n    raise ValueError('boom')\nexplode()"
    res, cap = run(ip, cell)
    assert isinstance(res.error_in_exec, ValueError)
    assert str(res.error_in_exec) == "boom"
    assert cap.outputs == [], "no half-made report"
    tb = ANSI.sub("", cap.stdout + cap.stderr)
    assert "raise ValueError('boom')" in tb and "explode()" in tb
    assert "kernelmagic/live/runner.py" not in tb, "our frames are hidden"
    assert not torch_compat.profiler_running()
    res, cap = run(ip, "%%profile -n 2 -w 0\nc = a @ b")
    assert res.success and len(cap.outputs) == 2


def test_keyboard_interrupt_cleans_up(ip):
    ip.run_cell("n = 0")
    res, _ = run(ip, "%%profile -n 5 -w 0\nn += 1\nif n == 2:\n    raise KeyboardInterrupt")
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert not torch_compat.profiler_running()
    assert run(ip, "%%profile -n 1 -w 0 -q\ntorch.ones(1).add(1)")[0].success


def test_nvtx_ranges_closed_after_exception(ip, monkeypatch):
    depth = []
    monkeypatch.setattr(torch_compat, "_nvtx_works", True)
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: depth.append(name))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: depth.pop())
    seen = []
    ip.user_ns["seen"] = seen
    ip.user_ns["depth"] = depth
    res, _ = run(ip, "%%profile -n 3 -w 1 --name nv\nseen.append(list(depth))\n"
                     "if len(seen) == 3:\n    raise RuntimeError('x')")
    assert isinstance(res.error_in_exec, RuntimeError)
    assert seen[0] == ["nv/warmup"]
    assert seen[1] == ["nv", "nv/iter 0"]
    assert depth == []


def test_running_profiler_gives_usage_error(ip):
    ip.run_cell("x = 0")
    with torch.autograd.profiler.profile(use_kineto=True):
        res, _ = run(ip, "%%profile\nx = 1")
    assert isinstance(res.error_in_exec, UsageError)
    assert "already running" in str(res.error_in_exec)
    assert ip.user_ns["x"] == 0


def test_a_cell_running_its_own_profiler_gives_usage_error(ip):
    # torch keeps one profiler session: the cell's own ends %%profile's, whose report
    # would be empty ("no ops were recorded") with nothing to say why.
    ip.run_cell("import torch\nx = torch.ones(8, 8)")
    res, cap = run(ip, "%%profile -n 3 -w 1\nwith torch.profiler.profile():\n    y = x @ x")
    assert isinstance(res.error_in_exec, UsageError)
    assert "ran a torch profiler of its own, which stopped kernelmagic's" \
        in str(res.error_in_exec)
    assert not any("image/png" in o.data for o in cap.outputs)  # (no report)
    assert not torch.autograd.profiler._is_profiler_enabled
    assert not run(ip, "%%profile -n 2 -w 0\ny = x @ x")[0].error_in_exec  # (and after it)


def test_profile_inside_a_profiled_cell_is_refused_at_once(ip):
    # Without the refusal the inner %profile ran (and showed a report) in each of the
    # outer cell's warm-up runs, then said "your own `with profile():`?" when the outer
    # profiler was on.
    ip.run_cell("import torch\nx = torch.ones(8, 8)\nruns = []")
    res, cap = run(ip, "%%profile -n 2 -w 3\nruns.append(1)\n%profile -n 2 -w 0 x @ x")
    assert isinstance(res.error_in_exec, UsageError)
    assert "already profiling in this process" in str(res.error_in_exec)
    assert ip.user_ns["runs"] == [1] and cap.outputs == []
    with pytest.raises(ProfilerBusyError, match="cannot run inside the code it profiles"):
        kernelmagic.profile(lambda: kernelmagic.profile(lambda: None, iters=1), iters=1)
    assert kernelmagic.profile(lambda: None, iters=1, warmup=0).iters == 1  # (and after)


def test_syntax_error_is_reported_not_run(ip):
    res, cap = run(ip, "%%profile\nx = (\n")
    assert isinstance(res.error_in_exec, UsageError)
    assert "SyntaxError" in cap.stdout + cap.stderr


def test_no_kineto_log_lines(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    code = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "sh = InteractiveShell.instance()\n"
        "sh.run_cell('%load_ext kernelmagic')\n"
        "sh.run_cell('import torch')\n"
        "assert sh.run_cell('%profile -n 2 -w 1 -q torch.ones(4).add(1)').success\n"
        "assert sh.run_cell('%profile -n 2 -w 1 -q torch.ones(4).add(1)').success\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    for marker in ("STAGE:", "USDT:"):
        assert marker not in out.stdout + out.stderr


def _registry():
    import ipywidgets

    registry = getattr(ipywidgets.widgets.widget, "_instances", None)
    return ipywidgets.Widget.widgets if registry is None else registry


def test_rerun_cell_closes_its_previous_report(ip, monkeypatch):
    ip.run_cell(SETUP)
    def run_as(msg_id):
        header = {"metadata": {"cellId": "cell-1"}, "header": {"msg_id": msg_id}}
        monkeypatch.setattr(ip, "parent_header", header, raising=False)

    run_as("run-1")
    _, first = run(ip, "%%profile -n 1 -w 0\nc = a + b")
    old = widget_of(report_data(first.outputs))
    old_ids = (old.model_id, old.km_table.headers["calls"].model_id)
    run_as("run-2")
    _, second = run(ip, "%%profile -n 1 -w 0\nc = a + b")
    new = widget_of(report_data(second.outputs))
    registry = _registry()
    assert not any(i in registry for i in old_ids), "the replaced report is closed, children too"
    assert new.model_id in registry


def test_live_reports_are_bounded(ip, monkeypatch):
    from kernelmagic.render import bundle

    monkeypatch.setattr(bundle, "LIVE_LIMIT", 3)
    ip.run_cell(SETUP)
    views = []
    for _ in range(5):
        _, cap = run(ip, "%%profile -n 1 -w 0\nc = a + b")
        views.append(report_data(cap.outputs)[WIDGET_MIME]["model_id"])
    registry = _registry()
    assert [v in registry for v in views] == [False, False, True, True, True]


# --- keep and compare -----------------------------------------------------------------


def test_save_then_compare_shows_report_and_comparison(ip, monkeypatch):
    # Injected timings: the runner's clock (replaceable for tests) is one that only the cells
    # move, 62.5 ms a run for "slow" and 2**-10 s for "fast", so the verdict is exactly 64x
    # whatever else the machine does. The ops are real: 8 matmuls against one.
    from kernelmagic.live import runner

    clock = SimpleNamespace(now=0.0)
    execute = runner.execute
    monkeypatch.setattr(runner, "execute",
                        lambda fn, plan, **kw: execute(fn, plan, clock=lambda: clock.now, **kw))
    ip.run_cell("a = torch.randn(128, 128)")
    ip.user_ns["clock"] = clock
    res, cap = run(ip, "%%profile -n 3 -w 1 -q --save slow -o s\n"
                       "for _ in range(8): c = a @ a\nclock.now += 0.0625")
    assert res.success and cap.outputs == []
    res, cap = run(ip, "%%profile -n 3 -w 1 --compare slow --name fast -o f\n"
                       "c = a @ a\nclock.now += 2**-10")
    assert res.success
    assert len(cap.outputs) == 4, "the report, then the comparison (each static, then widget)"
    comparison = report_data(cap.outputs)
    assert {"text/plain", "text/html", WIDGET_MIME} <= set(comparison)
    before, after = ip.user_ns["s"], ip.user_ns["f"]
    assert (before.timings, after.timings) == ([0.0625] * 3, [2**-10] * 3)
    first = comparison["text/plain"].splitlines()[0]
    assert first.startswith("fast vs ")
    assert ": 64.00x faster, too few iterations to judge the noise (" in first
    assert " · per iteration (median) 62.5 ms (IQR 0 µs) → 977 µs (IQR 0 µs) · " in first
    counts = {r.key: r.count for r in before.rows}, {r.key: r.count for r in after.rows}
    assert (counts[0]["aten::mm"], counts[1]["aten::mm"]) == (8 * 3, 3)
    assert "aten::mm" in comparison["text/plain"]


def test_compare_with_file(ip, tmp_path):
    from fakes import cpu_result

    path = tmp_path / "base.json"
    cpu_result().save(path)
    ip.run_cell("a = torch.randn(16, 16)")
    res, cap = run(ip, f"%%profile -n 2 -w 0 --compare {path}\nc = a + a")
    assert res.success and len(cap.outputs) == 4
    assert "vs cell[7]" in report_data(cap.outputs)["text/plain"]


def test_compare_unknown_or_broken_is_usage_error(ip, tmp_path):
    ip.run_cell("x = 0")
    res, _ = run(ip, "%%profile --compare nosuch\nx = 1")
    assert isinstance(res.error_in_exec, UsageError)
    assert "--compare nosuch: no result saved under that name" in str(res.error_in_exec)
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    res, _ = run(ip, f"%%profile --compare {bad}\nx = 1")
    assert isinstance(res.error_in_exec, UsageError)
    assert str(res.error_in_exec).startswith(f"--compare: {bad}: not a kernelmagic profile")
    assert ip.user_ns["x"] == 0


def test_no_findings_hides_them(ip):
    ip.run_cell("a = torch.randn(256, 256)")
    _, cap = run(ip, "%%profile -n 2 -w 0\nc = a @ a")
    assert "Findings:" in cap.outputs[0].data["text/plain"]
    assert "km-findings" in cap.outputs[0].data["text/html"]
    _, cap = run(ip, "%%profile -n 2 -w 0 --no-findings\nc = a @ a")
    assert "Findings:" not in cap.outputs[0].data["text/plain"]
    assert "km-findings" not in cap.outputs[0].data["text/html"]


# --- a notebook saved without widget state (#46, Must 10) --------------------------------


def test_a_shown_result_is_its_static_report_then_its_widget(ip):
    """A result shown as a cell's last line is two outputs, as the magic's report is: the
    static report (text and HTML, with the CSS that hides what should not show) and the
    widget with a short text of its own; the one-bundle ``_repr_mimebundle_`` is unchanged."""
    from fakes import cpu_result

    from kernelmagic.render.bundle import STATIC_CSS, WIDGET_TEXT, display_outputs

    ip.user_ns["shown"] = result = cpu_result()
    _, cap = run(ip, "shown")
    assert len(cap.outputs) == 2
    data = report_data(cap.outputs)
    bundle = result._repr_mimebundle_()
    assert data["text/plain"] == bundle["text/plain"]
    assert data["text/html"] == (f'<div class="km-static"><style>{STATIC_CSS}</style>'
                                 f'{bundle["text/html"]}</div>')
    assert cap.outputs[1].data["text/plain"] == WIDGET_TEXT
    # Without a widget (terminal IPython, no ipywidgets) the bundle is the one output.
    text_only = {"text/plain": "t", "text/html": "<b>t</b>"}
    assert display_outputs(text_only) == [text_only]
