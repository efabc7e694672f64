"""The deeper views, checked on workloads whose answers are known."""

from __future__ import annotations

import gzip
import json
import linecache
import re

import pytest
import torch
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
from torch_releases import needs_session_frames
from workloads import block_and_input

import kernelmagic
from kernelmagic.render.table import op_table
from kernelmagic.render.views import view_notes
from kernelmagic.results.result import ProfileResult


def cell(source: str, filename: str = "<cell-views>"):
    """Compile code as IPython would a cell, registered so its lines can be read."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return compile(source, filename, "exec")


def test_memory_per_op_and_peak():
    mib = 2**20
    result = kernelmagic.profile(lambda: torch.empty(1024, 1024).fill_(1.0), iters=3, warmup=1,
                                 memory=True)
    rows = {r.key: r for r in result.rows}
    assert rows["aten::empty"].self_cpu_memory_usage == 3 * 4 * mib  # 4 MiB per call, 3 calls
    assert rows["aten::fill_"].self_cpu_memory_usage == 0
    assert result.peak_memory["cpu"] >= 4 * mib
    titles = [c.title for c in op_table(result).columns]
    assert "self CPU mem (3 it.)" in titles and "total CPU mem (3 it.)" in titles
    note = view_notes(result)[0]
    assert note.startswith("Peak memory rise within an iteration: CPU ")


def test_shapes_split_rows():
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    c = torch.randn(32, 32)
    result = kernelmagic.profile(lambda: (a @ b, c @ c), iters=2, warmup=0, shapes=True)
    mm = sorted(r.input_shapes for r in result.rows if r.key == "aten::mm")
    assert mm == ["[32, 32], [32, 32]", "[8, 16], [16, 4]"]
    assert op_table(result).columns[1].title == "input shapes"


def test_flops_match_hand_count_and_unknown_ops_are_marked():
    a, b = torch.randn(64, 128), torch.randn(128, 32)
    result = kernelmagic.profile(lambda: torch.relu(a @ b), iters=3, warmup=1, flops=True)
    rows = {r.key: r for r in result.rows}
    assert rows["aten::mm"].flops == 3 * 2 * 64 * 128 * 32
    assert rows["aten::relu"].flops == 0
    table = op_table(result)
    flops, rate = table.column("flops"), table.column("flops_rate")
    assert flops.show(rows["aten::mm"]) == "524 k"  # 524,288 per iteration
    expected_rate = rows["aten::mm"].flops / (rows["aten::mm"].self_cpu_time_total / 1e6)
    assert rate.value(rows["aten::mm"]) == pytest.approx(expected_rate)
    assert flops.show(rows["aten::relu"]) == "—" and rate.show(rows["aten::relu"]) == "—"
    # With every column shown, one line under the table says what the two "—" mean.
    from kernelmagic.render.text import text_table

    notes = [line for line in text_table(result, all_columns=True).splitlines()
             if line.startswith("— in ")]
    assert notes == ["— in FLOP/iter, FLOP/s: torch counts no FLOPs for the op"]


STACK_CELL = """\
def matmuls(a):
    return a @ a @ a

def activations(a):
    return torch.relu(a).sigmoid()

y = activations(matmuls(x))
"""


@needs_session_frames
def test_stack_attributes_op_time_to_cell_functions():
    ns = {"torch": torch, "x": torch.randn(128, 128)}
    result = kernelmagic.profile(cell(STACK_CELL), namespace=ns, iters=2, warmup=1, stack=True)
    by_func = {s.function: s for s in result.sources}
    assert {"matmuls", "activations"} <= set(by_func)
    mm, act = by_func["matmuls"], by_func["activations"]
    assert (mm.file, mm.line, mm.code, mm.in_cell) == ("<cell-views>", 1, "def matmuls(a):", True)
    assert (act.line, act.code) == (4, "def activations(a):")
    ops = {r.key: r for r in result.rows}
    # Everything matmuls runs is matmul/mm work: its self time is theirs.
    mm_ops = ["aten::matmul", "aten::mm", "aten::resolve_conj"]
    assert mm.self_cpu_time_total == pytest.approx(
        sum(ops[k].self_cpu_time_total for k in mm_ops if k in ops), rel=1e-6)
    assert mm.ops == sum(ops[k].count for k in mm_ops if k in ops)
    assert result.sources[0].in_cell and result.sources[1].in_cell
    # Every op ran inside one of the cell's two functions: their self times add up to all.
    assert sum(s.self_cpu_time_total for s in result.sources) == pytest.approx(
        result.self_cpu_time_total, rel=1e-6)
    assert not any(re.match(r".*\(\d+\): ", r.key) for r in result.rows), "no Python frames"


def test_modules_of_the_block():
    block, x = block_and_input(batch=1, seq=32)
    with torch.inference_mode():
        result = kernelmagic.profile(lambda: block(x), iters=2, warmup=1, modules=True)
    mods = {m.key: m for m in result.modules}
    assert set(mods) == {"Block", "ln1", "attn", "ln2", "ff", "ff.0", "ff.1", "ff.2"}
    assert (mods["Block"].depth, mods["ff"].depth, mods["ff.0"].depth) == (0, 1, 2)
    assert mods["ff.1"].module_type == "GELU" and mods["ff.0"].count == 2
    children = sum(mods[k].cpu_time_total for k in ("ff.0", "ff.1", "ff.2"))
    assert mods["ff"].self_cpu_time_total == pytest.approx(mods["ff"].cpu_time_total - children)
    assert mods["Block"].cpu_time_total >= sum(mods[k].cpu_time_total
                                               for k in ("ln1", "attn", "ln2", "ff"))
    assert [m.key for m in result.modules] == ["Block", "ln1", "attn", "ln2", "ff", "ff.0", "ff.1",
                                              "ff.2"], "call order: parents before children"
    assert not result.ranges, "module ranges are not user ranges"


def test_user_ranges_breakdown():
    a = torch.randn(128, 128)

    def phases():
        with torch.profiler.record_function("phase/matmul"):
            a @ a
        with torch.profiler.record_function("phase/act"):
            torch.tanh(a)

    result = kernelmagic.profile(phases, iters=3, warmup=1, name="ph")
    ranges = {g.key: g for g in result.ranges}
    assert set(ranges) == {"phase/matmul", "phase/act"}
    assert ranges["phase/matmul"].count == 3
    # Every call of these ops ran inside its range: each top op carries the op's whole self
    # time, largest first (mm's order against its wrapper aten::matmul is the clock's).
    own = {r.key: r.self_cpu_time_total for r in result.rows}
    top = ranges["phase/matmul"].top_ops
    assert {k for k, _ in top} == {"aten::matmul", "aten::mm", "aten::resolve_conj"}
    assert top == sorted(top, key=lambda kv: -kv[1])
    assert all(t == pytest.approx(own[k]) for k, t in top)
    assert ranges["phase/act"].top_ops == [("aten::tanh", pytest.approx(own["aten::tanh"]))]


def test_timeline_of_one_iteration():
    from kernelmagic.live.session import table_from_session
    from kernelmagic.views.iterations import iteration_windows

    a = torch.randn(128, 128)
    held = []
    result = kernelmagic.profile(lambda: torch.tanh(a @ a), iters=3, warmup=1, timeline=True,
                                 on_trace_ready=held.append)
    keys = [s.key for s in result.timeline]
    assert keys == ["aten::matmul", "aten::tanh"], "top-level ops only, in time order"
    assert {s.lane for s in result.timeline} == {"CPU"}
    # The timeline's window is the median iteration's own range, on the profiler's clock:
    # its spans are checked against that range, from the same session, never against
    # `result.timings` (time.perf_counter, read just inside the range: another clock).
    table = table_from_session(held[0])
    windows = iteration_windows(table, "profile")
    assert len(windows) == 3
    start, end = windows[sorted(range(3), key=result.timings.__getitem__)[1]]
    assert all(0 <= s.start < s.end <= (end - start) / 1000 for s in result.timeline)
    names = [table.names[k] for k in table.name.tolist()]
    within = [(names[i], (s - start) / 1000, (e - start) / 1000)
              for i, (s, e) in enumerate(zip(table.start.tolist(), table.end.tolist(),
                                             strict=True))
              if names[i] in ("aten::matmul", "aten::tanh") and start <= s and e <= end]
    assert [(s.key, s.start, s.end) for s in result.timeline] == sorted(within, key=lambda x: x[1])
    from kernelmagic.render.timeline import timeline_svg  # an SVG since #28

    assert timeline_svg(result).startswith(b"<svg")


def test_trace_export_json_and_gz(tmp_path):
    plain, packed = tmp_path / "run.json", tmp_path / "run.json.gz"
    r1 = kernelmagic.profile(lambda: torch.ones(8).add(1), iters=2, warmup=0, trace=str(plain))
    r2 = kernelmagic.profile(lambda: torch.ones(8).add(1), iters=2, warmup=0, trace=str(packed))
    for path, result in ((plain, r1), (packed, r2)):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as f:
            events = json.load(f)["traceEvents"]
        assert any(e.get("name") == "aten::add" for e in events)
        assert result.trace_path == str(path)


def test_trace_path_checks(tmp_path):
    existing = tmp_path / "old.json"
    existing.write_text("{}")
    with pytest.raises(ValueError, match="file exists; add --force"):
        kernelmagic.profile(lambda: None, trace=str(existing))
    kernelmagic.profile(lambda: torch.ones(1).add(1), iters=1, warmup=0, trace=str(existing),
                        force=True)
    assert "traceEvents" in existing.read_text()
    with pytest.raises(ValueError, match="does not exist"):
        kernelmagic.profile(lambda: None, trace=str(tmp_path / "nope" / "t.json"))
    with pytest.raises(ValueError, match=r"must end in \.json or \.json\.gz"):
        kernelmagic.profile(lambda: None, trace=str(tmp_path / "t.txt"))


def test_unwritable_trace_folder_is_refused(tmp_path, monkeypatch):
    import os

    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(ValueError, match="is not writable"):
        kernelmagic.profile(lambda: None, trace=str(tmp_path / "t.json"))


@needs_session_frames
def test_views_survive_json_round_trip(tmp_path):
    block, x = block_and_input(batch=1, seq=16)

    def work():
        with torch.profiler.record_function("fwd"):
            block(x)

    with torch.inference_mode():
        result = kernelmagic.profile(work, iters=2, warmup=1, memory=True, shapes=True,
                                     flops=True, stack=True, modules=True, timeline=True)
    back = ProfileResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert back == result
    assert back.modules and back.ranges and back.timeline and back.sources
    assert back.views == ["memory", "shapes", "flops", "stack", "modules", "timeline"]


# --- through the magic ----------------------------------------------------------------


@needs_session_frames
def test_magic_views_in_report_and_selector(ip, tmp_path):
    ip.run_cell("from workloads import block_and_input\nblock, x = block_and_input(1, 16)")
    trace = tmp_path / "cell.json"
    with capture_output() as cap:
        res = ip.run_cell(
            f"%%profile -n 2 -w 1 --modules --stack --timeline --trace {trace}\n"
            "with torch.profiler.record_function('fwd'):\n    y = block(x)")
    assert res.success, res.error_in_exec
    from test_magic import report_data
    data = report_data(cap.outputs)
    text = data["text/plain"]
    for heading in ("[ranges]", "[source]", "[modules]"):
        assert heading in text
    assert f"Chrome trace written to {trace}" in text
    assert data["text/html"].count("data:image/svg+xml;base64,") == 1, "the chart"
    # The timeline is an inline SVG since #28 (hover titles), not a PNG.
    assert data["text/html"].count('<svg xmlns="http://www.w3.org/2000/svg" class="km-timeline"'
                                   ) == 1, "the timeline"
    from test_magic import widget_of

    box = widget_of(data)
    expected = ["ops", "ranges", "source", "modules"]
    if torch.cuda.is_available():
        expected.insert(1, "kernels")
    assert list(box.km_views) == expected  # only views with rows: no empty kernels on CPU
    assert list(box.km_selector.options) == expected
    assert box.km_boxes["modules"].layout.display == "none"
    assert box.km_views["modules"].widget in box.km_boxes["modules"].children
    box.km_selector.value = "modules"
    assert box.km_boxes["modules"].layout.display is None
    assert box.km_boxes["ops"].layout.display == "none"
    # Inside a tab's box nothing is hidden: the table shows with its box (#45).
    assert all(b.layout.display is None for b in box.km_boxes["modules"].children)


def test_widget_selector_only_for_views_with_rows():
    from fakes import cpu_result

    from kernelmagic.render.widget import report_widget

    box = report_widget(cpu_result(), None)
    assert list(box.km_views) == ["ops"]
    assert box.km_selector is None  # a lone "ops" is no choice: no selector
    box = report_widget(cpu_result(views=["modules"]), None)
    assert list(box.km_views) == ["ops"]  # --modules found none: a note, not a tab
    notes = [c.value for c in box.children if "km-note" in getattr(c, "value", "")]
    assert any("modules: No nn.Module was called." in n for n in notes)


def test_magic_trace_errors_are_usage_errors(ip, tmp_path):
    existing = tmp_path / "t.json"
    existing.write_text("{}")
    ip.run_cell("x = 0")
    for line, message in ((f"--trace {existing}", "file exists; add --force"),
                          (f"--trace {tmp_path}/no/t.json", "does not exist")):
        with capture_output():
            res = ip.run_cell(f"%%profile {line}\nx = 1")
        assert isinstance(res.error_in_exec, UsageError)
        assert message in str(res.error_in_exec)
    assert ip.user_ns["x"] == 0


def test_modules_in_a_module_list_keep_their_paths():
    class Stack(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    model, x = Stack(), torch.randn(2, 8)
    result = kernelmagic.profile(lambda: model(x), iters=2, warmup=0, modules=True)
    assert [(m.key, m.depth, m.count) for m in result.modules] == [
        ("Stack", 0, 2), ("layers.0", 1, 2), ("layers.1", 1, 2), ("layers.2", 1, 2)]
