"""The compiled view (torch.compile): regions, graph breaks, recompiles, inductor kernels,
findings, and the user's dynamo state left alone.

Compiling is slow: each compiled workload is one module-scoped fixture, profiled once.
"""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest
import torch
from fakes import cpu_result, cuda_result, table_of

import kernelmagic
from kernelmagic.core.compiled_rows import PROFILED, WARMUP, CompileRow, GraphBreakRow
from kernelmagic.core.events import Kind
from kernelmagic.core.rows import OpRow
from kernelmagic.findings import find
from kernelmagic.findings.compiled import EAGER_SHARE, GRAPH_BREAK_SHARE
from kernelmagic.live.runner import ProfilerBusyError
from kernelmagic.render.text import text_report
from kernelmagic.results.builder import build_result
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.compiled import compiled_view
from kernelmagic.views.tree import Figures


def with_break(x: torch.Tensor) -> torch.Tensor:
    y = torch.sin(x) * 2
    s = y.sum().item()  # the graph break
    return torch.cos(y) + s


BREAK_LINE = inspect.getsourcelines(with_break)[1] + 2
SIN_LINE, COS_LINE = BREAK_LINE - 1, BREAK_LINE + 1


def _rules(result: ProfileResult) -> set[str]:
    return {f.rule for f in find(result)}


@pytest.fixture(scope="module", autouse=True)
def checkout_inductor_cache():
    """Compile into a cache of this checkout's own, kept between runs: a graph cached by a
    copy of these tests at another path would name that path in its kernels' source lines.
    Kept, it spares each run inductor's probes of the CPU's vector instructions (a few C++
    compiles, ~6 s) and the graphs' C++ builds; a cold cache (a fresh clone, as in CI) and
    a warm one both pass."""
    import hashlib
    import os
    import tempfile
    from pathlib import Path

    checkout = hashlib.sha256(str(Path(__file__).resolve().parent).encode()).hexdigest()[:16]
    saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(
        tempfile.gettempdir(), f"kernelmagic-tests-inductor-{checkout}")
    yield
    if saved is None:
        os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    else:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved


@pytest.fixture(scope="module")
def broken_trace(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("compiled") / "brk.json")


@pytest.fixture(scope="module")
def broken(broken_trace) -> ProfileResult:
    """``with_break`` compiled (first in the warm-up) and profiled, its trace written."""
    fn = torch.compile(with_break, dynamic=False)
    x = torch.ones(4096)  # the same value each call: .item() returns one float
    return kernelmagic.profile(lambda: fn(x), iters=3, warmup=1, name="brk",
                               trace=broken_trace)


@pytest.fixture(scope="module")
def mlp() -> tuple[ProfileResult, torch.nn.Module, torch.Tensor]:
    # Work of a few ms per call: the compiled region's share of the iteration must not
    # hang on a loaded machine's hiccups outside it (the mostly-eager rule reads it).
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 8))
    compiled = torch.compile(model)
    x = torch.randn(256, 256)
    with torch.no_grad():
        result = kernelmagic.profile(lambda: compiled(x), iters=5, warmup=1, name="mlp")
    return result, compiled, x


def test_graph_break_shows_two_regions_the_reason_and_the_line(broken):
    regions = broken.compiled_regions
    assert len(regions) == 2
    outer, inner = regions
    assert outer.outermost and not inner.outermost
    assert outer.function == "with_break" and outer.file == __file__
    assert inner.function == f"torch_dynamo_resume_in_with_break_at_{BREAK_LINE}"
    assert all(r.count == 3 for r in regions)
    assert all(0 < r.graph_time_total <= r.cpu_time_total for r in regions)
    (gap,) = broken.graph_breaks
    assert gap.compile_id == outer.compile_id and gap.count == 3
    assert "Tensor.item()" in gap.reason
    assert "capture_scalar_outputs" in gap.hint
    assert (gap.file, gap.line) == (__file__, BREAK_LINE)
    assert gap.code == "s = y.sum().item()  # the graph break"
    eager = [part.rsplit(" ", 2)[0] for part in gap.top_ops.split("; ")]
    # its cache lookup and wrappers, then the Python no op recorded, after the eager ops
    assert eager[-2:] == ["dynamo", "Python"]
    assert {"aten::item", "aten::_local_scalar_dense"} <= set(eager[:-2])
    # the gap lies inside the outer region, outside its graphs
    assert 0 < gap.gap_time_total < outer.cpu_time_total - outer.graph_time_total


def test_warmup_compiles_are_named_and_kept_out(broken):
    phases = {c.compile_id: c.phase for c in broken.compiles}
    assert set(phases.values()) == {WARMUP}
    assert set(phases) == {r.compile_id for r in broken.compiled_regions}
    assert all(c.duration_s > 0 for c in broken.compiles)
    assert "recompile" not in _rules(broken)
    text = text_report(broken)
    assert "the warm-up's 2 compiles took" in text  # counted nouns (#28)
    assert "[graph breaks]" in text and f"test_compiled.py:{BREAK_LINE}" in text
    html = broken._repr_mimebundle_()["text/html"]
    assert "graph breaks" in html and f"test_compiled.py:{BREAK_LINE}" in html


def test_widget_lists_the_compiled_views(broken):
    pytest.importorskip("ipywidgets")
    from kernelmagic.render.widget import report_widget

    box = report_widget(broken, None)
    assert {"compiled", "graph breaks", "inductor kernels", "compiles"} <= set(box.km_views)
    assert box.km_views["graph breaks"].table.rows == broken.graph_breaks


def test_fused_kernel_lists_the_aten_ops_it_fused(broken):
    by_ops = {k.key: k.aten_ops for k in broken.fused_kernels}
    first = [k for k, ops in by_ops.items() if "aten.sin" in ops]
    assert len(first) == 1
    assert "aten.mul" in by_ops[first[0]]
    assert any("aten.cos" in ops for ops in by_ops.values())
    source = {k.key: k.source for k in broken.fused_kernels}
    assert f"{__file__}:{SIN_LINE}" in source[first[0]].split("; ")  # inductor's provenance
    (cos,) = [k for k in broken.fused_kernels if "aten.cos" in k.aten_ops]
    assert cos.source == f"{__file__}:{COS_LINE}"
    assert {k.compile_id for k in broken.fused_kernels} == {
        r.compile_id for r in broken.compiled_regions}
    assert f"test_compiled.py:{COS_LINE}" in text_report(broken)
    assert all(k.count == 3 and k.time_total > 0 and not k.on_device
               for k in broken.fused_kernels)


def test_compiled_view_survives_json(broken):
    again = ProfileResult.from_dict(json.loads(json.dumps(broken.to_dict())))
    assert again == broken
    assert again.graph_breaks == broken.graph_breaks
    assert again.fused_kernels == broken.fused_kernels


def test_a_trace_file_holds_the_same_regions_gaps_and_kernels(broken, broken_trace):
    loaded = kernelmagic.load(broken_trace)
    events = ("compile_id", "count", "cpu_time_total", "graph_time_total", "outermost")
    assert ([[getattr(r, f) for f in events] for r in loaded.compiled_regions]
            == [[getattr(r, f) for f in events] for r in broken.compiled_regions])
    assert [(b.compile_id, b.gap_time_total, b.top_ops) for b in loaded.graph_breaks] == [
        (b.compile_id, b.gap_time_total, b.top_ops) for b in broken.graph_breaks]
    assert loaded.graph_breaks[0].reason == ""  # dynamo's records are not in a trace
    assert [(k.key, k.time_total) for k in loaded.fused_kernels] == [
        (k.key, k.time_total) for k in broken.fused_kernels]


def test_recompile_inside_the_profiled_loop_names_the_guard():
    def scaled(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 3

    fn = torch.compile(scaled, dynamic=False)
    inputs = [torch.ones(8), torch.ones(16)]
    calls = []

    def step() -> None:
        calls.append(None)
        fn(inputs[len(calls) > 2])  # warm-up and the first iteration: 8; then 16

    result = kernelmagic.profile(step, iters=3, warmup=1, name="rec")
    late = [c for c in result.compiles if c.phase == PROFILED]
    assert len(late) == 1
    assert "size mismatch" in late[0].recompile_reason
    (finding,) = [f for f in find(result) if f.rule == "recompile"]
    assert "size mismatch" in finding.evidence and late[0].compile_id in finding.evidence
    assert "WARNING: 1 compile (" in text_report(result)  # counted nouns (#28)


def test_clean_compiled_mlp_one_region_no_finding(mlp):
    result, _, _ = mlp
    assert len(result.compiled_regions) == 1
    assert result.compiled_regions[0].outermost
    assert result.graph_breaks == []
    assert not _rules(result) & {"graph_break", "recompile", "mostly_eager"}
    assert result.fused_kernels  # the relu (and bias) fused into a C++ kernel


def test_dynamo_state_is_left_alone(mlp):
    from torch._dynamo import config as dynamo_config
    from torch._dynamo.utils import counters, get_compilation_metrics
    from torch._inductor import config as inductor_config

    _, compiled, x = mlp
    before = {k: dict(v) for k, v in counters.items()}
    metrics = len(get_compilation_metrics())
    profile_flag = inductor_config.cpp.enable_kernel_profile
    provenance = inductor_config.trace.provenance_tracking_level
    scalars = dynamo_config.capture_scalar_outputs
    with torch.no_grad():
        again = kernelmagic.profile(lambda: compiled(x), iters=2, warmup=1, name="again")
        compiled(x)  # still compiled: no reset, no recompile
    assert {k: dict(v) for k, v in counters.items()} == before
    assert len(get_compilation_metrics()) == metrics
    assert inductor_config.cpp.enable_kernel_profile == profile_flag
    assert inductor_config.trace.provenance_tracking_level == provenance
    assert dynamo_config.capture_scalar_outputs == scalars
    assert len(again.compiled_regions) == 1
    assert [c.phase for c in again.compiles] == ["before"]  # shown for its region


def sin_cos(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) * torch.cos(x) + x.relu()


@pytest.fixture(scope="module")
def compiled_before() -> tuple[ProfileResult, dict[str, object]]:
    """``sin_cos`` compiled and run before the profile, the usual way (compile in one cell,
    profile in the next): inductor's C++ kernel profiling was off when it compiled."""
    from torch._dynamo.utils import get_compilation_metrics
    from torch._inductor import config as inductor_config

    assert not inductor_config.cpp.enable_kernel_profile
    fn = torch.compile(sin_cos)
    x = torch.randn(512, 512)
    fn(x)
    metrics = len(get_compilation_metrics())
    result = kernelmagic.profile(lambda: fn(x), iters=3, warmup=1, name="before")
    fn(x)  # still compiled, as it was
    return result, {"metrics_after": len(get_compilation_metrics()), "metrics": metrics,
                    "profile_flag": inductor_config.cpp.enable_kernel_profile}


def test_a_function_compiled_before_shows_its_kernels_aten_ops(compiled_before):
    result, state = compiled_before
    kernels = result.fused_kernels
    assert kernels and all(not k.timed and k.count == 0 for k in kernels)
    assert all(k.key.startswith("cpp_fused_") for k in kernels)
    assert {k.compile_id for k in kernels} == {r.compile_id for r in result.compiled_regions}
    fused = {op.strip() for k in kernels for op in k.aten_ops.split(",")}
    assert {"aten.sin", "aten.cos", "aten.mul"} <= fused, kernels
    # The one line that says why there are no times and how to get them.
    report = text_report(result)
    assert report.count("kernels with no times: inductor's C++ kernels record their times "
                        "only when compiled with torch._inductor.config.cpp."
                        "enable_kernel_profile = True") == 1
    assert "not recorded" in report
    # ... and the user's dynamo state is as it was: no compile, no flag left switched on.
    assert state["metrics_after"] == state["metrics"]
    assert state["profile_flag"] is False
    assert [c.phase for c in result.compiles] == ["before"]


def test_a_dominant_compiled_graph_is_not_one_op(compiled_before):
    result, _ = compiled_before
    found = find(result)
    assert not any(f.rule == "dominant_op" and "CompiledFxGraph" in f.evidence for f in found)
    graph = next(f for f in found if f.rule == "dominant_graph")
    (region,) = result.compiled_regions
    assert graph.evidence.startswith(f"the compiled graph of region {region.compile_id} "
                                     "(sin_cos, test_compiled.py:")
    assert "its fused kernels (no times recorded): cpp_fused_" in graph.evidence
    assert "aten.sin" in graph.evidence
    assert "CompiledFxGraph" not in graph.suggestion
    assert "enable_kernel_profile = True before its first torch.compile" in graph.suggestion


def test_a_dominant_graph_with_kernel_times_names_the_heaviest():
    from kernelmagic.core.compiled_rows import CompiledRegionRow, FusedKernelRow

    rows = [OpRow("## Call CompiledFxGraph fabc ##", 10, 9000.0, 9000.0),
            OpRow("aten::add", 10, 1000.0, 1000.0)]
    regions = [CompiledRegionRow("0/0", 10, 9500.0, 9000.0, function="f", file="/a/b.py",
                                 line=3)]
    kernels = [FusedKernelRow("graph_0_cpp_fused_mul_sin_0", 10, 6000.0,
                              aten_ops="aten.sin, aten.mul", compile_id="0/0"),
               FusedKernelRow("graph_0_cpp_fused_add_1", 10, 2000.0, aten_ops="aten.add",
                              compile_id="0/0")]
    result = cpu_result(rows=rows, timings=[0.001] * 10, compiled_regions=regions,
                        fused_kernels=kernels)
    (f,) = [f for f in find(result) if f.rule == "dominant_graph"]
    assert f.evidence == ("the compiled graph of region 0/0 (f, b.py:3) takes 90% of self "
                          "time (900 µs per iteration); its heaviest fused kernels: "
                          "graph_0_cpp_fused_mul_sin_0 600 µs per iteration (aten.sin, "
                          "aten.mul); graph_0_cpp_fused_add_1 200 µs per iteration (aten.add)")
    assert f.suggestion.startswith("work on what its heaviest kernel, "
                                   "graph_0_cpp_fused_mul_sin_0, computes (aten.sin, aten.mul)")
    # A trace of a CPU graph holds no kernels: how to see them.
    bare = cpu_result(rows=rows, timings=[0.001] * 10, compiled_regions=regions)
    (g,) = [f for f in find(bare) if f.rule == "dominant_graph"]
    assert "enable_kernel_profile = True" in g.suggestion
    assert "dominant_op" not in _rules(bare)


def test_view_on_a_hand_made_table():
    table = table_of(
        (Kind.RANGE, "brk/iter 0", 0, 100, 1),
        (Kind.RANGE, "Torch-Compiled Region: 0/0", 1, 90, 1),
        (Kind.OP, "## Call CompiledFxGraph a ##", 5, 25, 1),
        (Kind.OP, "graph_0_cpp_fused_mul_sin_0", 10, 20, 1),
        (Kind.OP, "aten::item", 30, 40, 1),
        (Kind.OP, "TorchDynamo Cache Lookup", 41, 44, 1),
        (Kind.RANGE, "Torch-Compiled Region: 1/0", 45, 85, 1),
        (Kind.OP, "## Call CompiledFxGraph b ##", 50, 80, 1),
    )
    view = compiled_view(table, Figures(table), [(0, 100_000)])
    outer, inner = view.regions
    assert (outer.compile_id, outer.count, outer.cpu_time_total, outer.graph_time_total,
            outer.outermost) == ("0/0", 1, 89.0, 20.0, True)
    assert (inner.compile_id, inner.cpu_time_total, inner.graph_time_total,
            inner.outermost) == ("1/0", 40.0, 30.0, False)
    (gap,) = view.breaks
    assert (gap.compile_id, gap.count, gap.gap_time_total) == ("0/0", 1, 25.0)
    assert gap.top_ops == "aten::item 10.0 µs; dynamo 3.0 µs; Python 12.0 µs"
    (kernel,) = view.kernels
    assert (kernel.key, kernel.count, kernel.time_total, kernel.graph) == (
        "graph_0_cpp_fused_mul_sin_0", 1, 10.0, "graph_0")
    result = build_result(table, name="brk")
    assert result.compiled_regions == view.regions


def test_gpu_idle_in_the_gap():
    table = table_of(
        (Kind.RANGE, "Torch-Compiled Region: 0/0", 1, 90, 1),
        (Kind.OP, "## Call CompiledFxGraph a ##", 5, 25, 1),
        (Kind.OP, "aten::item", 30, 40, 1),
        (Kind.OP, "## Call CompiledFxGraph b ##", 50, 80, 1),
        (Kind.KERNEL, "triton_poi_fused_mul_sin_0", 20, 35, 7, {"device": 0}),
    )
    (gap,) = compiled_view(table, Figures(table), []).breaks
    assert (gap.gap_time_total, gap.gpu_idle_total) == (25.0, 15.0)  # busy 25-35 of 25-50


def test_on_a_gpu_a_gap_costs_the_gpu_idle_in_it():
    gap = GraphBreakRow("0/0", 10, 3000.0, reason="Unsupported Tensor.item() call",
                        gpu_idle_total=2000.0, file="/a/cell.py", line=7)
    result = cuda_result()
    result = dataclasses.replace(result, graph_breaks=[gap], timings=[0.001] * result.iters)
    (finding,) = [f for f in find(result) if f.rule == "graph_break"]
    # 10 iterations of 1 ms each (no breakdown: the timings' mean is the iteration) and
    # 2000 µs of GPU idle in the gaps: 200 µs of each 1000 µs iteration.
    assert (result.iters, result.breakdown) == (10, None)
    assert "the GPU idle for 200 µs of it" in finding.evidence
    assert finding.share == pytest.approx(0.2)


def test_config_is_restored_when_the_cell_raises():
    from torch._inductor import config as inductor_config

    before = (inductor_config.cpp.enable_kernel_profile,
              inductor_config.trace.provenance_tracking_level)

    def fails() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        kernelmagic.profile(fails, iters=1, warmup=1, name="fails")
    assert (inductor_config.cpp.enable_kernel_profile,
            inductor_config.trace.provenance_tracking_level) == before


def test_no_compiled_code_no_view():
    table = table_of((Kind.OP, "aten::add", 0, 10, 1))
    assert compiled_view(table, Figures(table), [(0, 20_000)]).regions == []
    assert "compiled" not in text_report(cpu_result())


def test_findings_on_exact_numbers():
    # 10 iterations of 1.0 ms (median); the gap 300 µs per iteration: 30%
    gap = GraphBreakRow("0/0", 10, 3000.0, reason="Unsupported Tensor.item() call",
                        hint="Set capture_scalar_outputs", file="/a/cell.py", line=7,
                        code="s = y.item()")
    result = cpu_result(graph_breaks=[gap])
    (finding,) = [f for f in find(result) if f.rule == "graph_break"]
    assert finding.share == pytest.approx(0.3, rel=0.1)
    assert "/a/cell.py:7" in finding.evidence and "300 µs per iteration" in finding.evidence
    assert finding.suggestion == "Set capture_scalar_outputs"
    small = dataclasses.replace(gap, gap_time_total=GRAPH_BREAK_SHARE * 1000 * 10 / 2)
    assert "graph_break" not in _rules(cpu_result(graph_breaks=[small]))
    region = kernelmagic.core.compiled_rows.CompiledRegionRow(
        "0/0", 10, cpu_time_total=EAGER_SHARE * 1000 * 10 / 5, graph_time_total=100.0)
    eager = next(f for f in find(cpu_result(compiled_regions=[region]))
                 if f.rule == "mostly_eager")
    assert "100 µs of the mean 1.03 ms iteration (9.7%)" in eager.evidence
    late = CompileRow("0/1", PROFILED, 0.5, function="f",
                      recompile_reason="0/0: tensor 'x' size mismatch at index 0")
    (rec,) = [f for f in find(cpu_result(compiles=[late])) if f.rule == "recompile"]
    assert "tensor 'x' size mismatch" in rec.evidence and "0.50 s" in rec.evidence


@pytest.mark.cuda
def test_cuda_triton_kernels_list_their_aten_ops():
    fn = torch.compile(with_break, dynamic=False)
    x = torch.ones(4096, device="cuda")
    result = kernelmagic.profile(lambda: fn(x), iters=3, warmup=1, name="brk_cuda")
    assert len(result.compiled_regions) == 2
    (gap,) = result.graph_breaks
    assert (gap.file, gap.line) == (__file__, BREAK_LINE)
    assert 0 < gap.gpu_idle_total <= gap.gap_time_total  # .item() waits, then Python runs
    triton = [k for k in result.fused_kernels if k.on_device]
    assert triton and all(k.key.startswith("triton_") for k in triton)
    assert len(triton) == len(result.fused_kernels)  # launches' CPU records are not rows
    sin = [k for k in triton if "aten.sin" in k.aten_ops]
    assert len(sin) == 1 and "aten.mul" in sin[0].aten_ops
    assert f"{__file__}:{SIN_LINE}" in sin[0].source.split("; ")
    assert {k.compile_id for k in triton} == {r.compile_id for r in result.compiled_regions}
    assert all(r.device_time_total > 0 for r in result.compiled_regions if r.outermost)


TRITON_CODE = '''# AOT ID: ['3_inference']
# kernel path: /tmp/torchinductor/ab/cab.py
# Topologically Sorted Source Nodes: [sin, y], Original ATen: [aten.sin, aten.mul]
# Source node to ATen node mapping:
#   sin => sin
triton_poi_fused_mul_sin_0 = async_compile.triton('triton_poi_fused_mul_sin_0', """
@triton.jit
def triton_poi_fused_mul_sin_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    pass
""", device_str='cuda')

triton_red_fused_cos_sum_1 = async_compile.triton('triton_red_fused_cos_sum_1', """
""")

def call(args):
        # Topologically Sorted Source Nodes: [cos, s], Original ATen: [aten.cos, aten.sum]
        stream0 = get_raw_stream(0)
        triton_red_fused_cos_sum_1.run(buf0, buf1, 1, 1000, stream=stream0)
'''


def test_generated_code_comments_give_each_kernel_its_aten_ops(tmp_path):
    from kernelmagic.live.compile_watch import _scan

    path = tmp_path / "generated.py"
    path.write_text(TRITON_CODE)
    found = _scan(str(path))
    assert found["triton_poi_fused_mul_sin_0"] == "aten.sin, aten.mul"  # above the definition
    assert found["triton_red_fused_cos_sum_1"] == "aten.cos, aten.sum"  # above the launch
    assert found["graph_3_triton_poi_fused_mul_sin_0"] == "aten.sin, aten.mul"


def test_descriptive_names_give_the_aten_ops():
    from kernelmagic.live.compile_watch import aten_ops_from_name, split_reason

    assert aten_ops_from_name("graph_0_cpp_fused_mul_sin_0") == "aten.mul, aten.sin"
    assert aten_ops_from_name("triton_per_fused_native_layer_norm_2") == (
        "aten.native_layer_norm")
    assert aten_ops_from_name("aten::mm") == ""
    assert split_reason("Broke\n  Explanation: x\n  Hint: do A\n  Hint: or B\n") == (
        "Broke", "do A or B")


def test_kernel_lines_follow_code_that_moved(tmp_path):
    import json
    from types import SimpleNamespace

    from kernelmagic.live.compile_watch import _kernel_lines

    user = tmp_path / "cell.py"
    user.write_text("import torch\n\n\ndef f(x):\n    y = torch.sin(x) * 2\n    return y\n")
    stack = f'  File "{user}", line 2, in f\n    y = torch.sin(x) * 2\n        ^^^^\n'
    metric = SimpleNamespace(compile_id="4/0", inductor_provenance={
        json.dumps({"cpp_fused_mul_sin_0:1": [stack], "extern_kernels.mm:2": []})})
    # cached at line 2, the line is now 5
    assert _kernel_lines([metric]) == {("4/0", "cpp_fused_mul_sin_0"): [f"{user}:5"],
                                       ("4/0", "extern_kernels.mm"): []}


def test_each_break_is_matched_to_the_compile_that_broke():
    from traceback import FrameSummary
    from types import SimpleNamespace

    from kernelmagic.live.compile_watch import _with_reason

    why = "Unsupported Tensor.item() call\n  Hint: capture scalars"

    def record(*frames: tuple[str, int]) -> SimpleNamespace:
        return SimpleNamespace(reason=why, user_stack=[
            FrameSummary("/u/cell.py", line, name, lookup_line=False) for name, line in frames])

    # f (from line 4) breaks at 6; its resume (from 6) calls inner at 8, which breaks at 3
    records = [record(("f", 6)), record(("f", 8), ("inner", 3)), record(("inner", 3))]
    row = GraphBreakRow("0/0", 1, 10.0)
    at = {c.compile_id: _with_reason(row, c, records) for c in (
        CompileRow("0/0", WARMUP, 1.0, "f", "/u/cell.py", 4, graph_break=why),
        CompileRow("1/0", WARMUP, 1.0, "torch_dynamo_resume_in_f_at_6", "/u/cell.py", 6,
                   graph_break=why),
        CompileRow("2/0", WARMUP, 1.0, "inner", "/u/cell.py", 2, graph_break=why))}
    assert [(at[c].line, at[c].reason, at[c].hint) for c in ("0/0", "1/0", "2/0")] == [
        (6, "Unsupported Tensor.item() call", "capture scalars"),
        (3, "Unsupported Tensor.item() call", "capture scalars"),
        (3, "Unsupported Tensor.item() call", "capture scalars")]


def test_triton_launch_records_do_not_double_the_kernels():
    launch = {"correlation": 7}
    table = table_of(
        (Kind.RANGE, "Torch-Compiled Region: 0/0", 0, 50, 1),
        (Kind.OP, "## Call CompiledFxGraph a ##", 5, 40, 1),
        (Kind.OP, "triton_poi_fused_mul_sin_0", 10, 20, 1),
        (Kind.RUNTIME, "cuLaunchKernel", 12, 18, 1, launch),
        (Kind.KERNEL, "triton_poi_fused_mul_sin_0", 30, 34, 7, {"device": 0, **launch}),
    )
    (kernel,) = compiled_view(table, Figures(table), []).kernels
    assert (kernel.key, kernel.on_device, kernel.time_total) == (
        "triton_poi_fused_mul_sin_0", True, 4.0)


def test_a_cached_graphs_stale_lines_are_found_again_or_left_out(tmp_path):
    """A graph from inductor's cache names the file and lines it was first compiled from."""
    from kernelmagic.live.compile_watch import _current_place

    now = tmp_path / "cell_now.py"
    now.write_text("import torch\n\n\ndef g(x):\n    y = torch.sin(x) * 2\n    return y\n")
    gone = str(tmp_path / "cell_then.py")  # an earlier version of the cell, no longer there
    code = "y = torch.sin(x) * 2"
    assert _current_place(gone, 2, code, str(now)) == f"{now}:5"
    assert _current_place(str(now), 2, code, str(now)) == f"{now}:5"  # moved in its file
    assert _current_place(str(now), 5, code, str(now)) == f"{now}:5"
    assert _current_place(gone, 2, "z = torch.cos(x)", str(now)) == ""  # never shown wrong


def _metric(compile_id: str, **fields) -> object:
    """A compilation-metrics record as dynamo keeps one (the fields kernelmagic reads)."""
    from types import SimpleNamespace

    base = dict(compile_id=compile_id, co_name=None, co_filename=None, co_firstlineno=None,
                duration_us=None, restart_reasons=None, recompile_reason=None,
                is_forward=True, is_runtime=None, inductor_provenance=None)
    return SimpleNamespace(**{**base, **fields})


def test_a_lazy_backward_compile_does_not_hide_the_forward_record(monkeypatch):
    """A training step's backward is compiled at its first call: a record of the same compile
    id (``is_forward=False``, no frame, no graph break); a runtime record (autotuning) is not
    a compile."""
    from kernelmagic.core.compiled_rows import CompiledRegionRow
    from kernelmagic.live import compile_watch
    from kernelmagic.render.compiled import compile_table

    why = "Unsupported Tensor.item() call\n  Hint: capture scalars"
    records: list[object] = []
    monkeypatch.setattr(compile_watch, "_metrics", lambda: list(records))
    monkeypatch.setattr(compile_watch, "_break_records", lambda: [])
    watch = compile_watch.Watch()
    records += [_metric("0/0", co_name="f", co_filename="/u/cell.py", co_firstlineno=4,
                        duration_us=2_000_000, restart_reasons={why}),
                _metric("0/0", is_forward=False, duration_us=500_000),
                _metric("0/0", is_runtime=True, duration_us=100_000)]
    watch.profiling()
    result = cpu_result(compiled_regions=[CompiledRegionRow("0/0", 10, 500.0, 100.0)],
                        graph_breaks=[GraphBreakRow("0/0", 10, 300.0)])
    out = watch.annotate(result)
    assert (out.compiled_regions[0].function, out.compiled_regions[0].file) == (
        "f", "/u/cell.py")
    assert (out.graph_breaks[0].reason, out.graph_breaks[0].hint) == (
        "Unsupported Tensor.item() call", "capture scalars")
    assert [(c.compile_id, c.backward, c.function, c.duration_s) for c in out.compiles] == [
        ("0/0", False, "f", 2.0), ("0/0", True, "f", 0.5)]
    table = compile_table(out)
    assert [table.column("order").show(c) for c in out.compiles] == ["1", "2"]
    assert [table.column("op").show(c) for c in out.compiles] == ["0/0", "0/0 backward"]


def test_a_compile_whose_record_reuses_an_evicted_records_memory_is_new(monkeypatch):
    """Dynamo keeps the last 64 records: one dropped during the run is freed, and a new
    record may take its place in memory (its ``id``); it is still this run's compile."""
    from kernelmagic.core.compiled_rows import CompiledRegionRow
    from kernelmagic.live import compile_watch

    records: list[object] = [_metric("0/0", co_name="old", duration_us=1)]
    monkeypatch.setattr(compile_watch, "_metrics", lambda: list(records))
    monkeypatch.setattr(compile_watch, "_break_records", lambda: [])
    watch = compile_watch.Watch()
    watch.profiling()
    records.clear()  # evicted: nothing else holds it
    for i in range(20):  # new records, one likely where the old one was
        records.append(_metric(f"{i + 1}/0", co_name="new", duration_us=1))
    result = cpu_result(compiled_regions=[CompiledRegionRow(f"{i + 1}/0", 10, 1.0, 1.0)
                                          for i in range(20)])
    assert {c.phase for c in watch.annotate(result).compiles} == {PROFILED}


def test_compiled_backward_graphs_count_as_compiled_code():
    """A compiled training step runs its backward graphs from autograd, outside dynamo's
    regions: they are compiled code, not eager (no mostly-eager finding)."""
    table = table_of(
        (Kind.RANGE, "step/iter 0", 0, 100, 1),
        (Kind.RANGE, "Torch-Compiled Region: 0/0", 1, 30, 1),
        (Kind.OP, "## Call CompiledFxGraph a ##", 5, 25, 1),
        (Kind.OP, "graph_0_cpp_fused_mul_sin_0", 10, 20, 1),
        (Kind.OP, "autograd::engine::evaluate_function: CompiledFunctionBackward", 35, 95, 1),
        (Kind.OP, "CompiledFunctionBackward", 36, 94, 1),
        (Kind.OP, "aten::zeros", 37, 40, 1),
        (Kind.OP, "## Call CompiledFxGraph b ##", 45, 90, 1),
        (Kind.OP, "graph_0_cpp_fused_cos_mul_0", 50, 80, 1),
    )
    view = compiled_view(table, Figures(table), [(0, 100_000)])
    assert [(r.compile_id, r.count, r.cpu_time_total, r.graph_time_total, r.outermost)
            for r in view.regions] == [("0/0", 1, 29.0, 20.0, True),
                                       ("backward", 1, 58.0, 45.0, True)]
    assert {k.key: k.compile_id for k in view.kernels} == {
        "graph_0_cpp_fused_mul_sin_0": "0/0", "graph_0_cpp_fused_cos_mul_0": "backward"}
    assert view.breaks == []
    result = build_result(table, name="step")
    assert "mostly_eager" not in _rules(result)  # 87 of 100 µs compiled
    assert "compiled regions 87.0 µs of the mean 100 µs" in text_report(result)


LAZY_COMPILE = '''
import os, sys
import torch
import kernelmagic

def f(x):
    return torch.sin(x) * 2

x = torch.ones(64)
box = {}

def cell():  # a cell that compiles: torch.compile's first use in this process
    box.setdefault("fn", torch.compile(f, dynamic=False))(x)

kernelmagic.profile(lambda: x + 1, iters=1, warmup=1, name="eager")
assert "torch._dynamo" not in sys.modules  # no torch.compile used: dynamo never imported
assert "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE" not in os.environ
result = kernelmagic.profile(cell, iters=2, warmup=1, name="lazy")
from torch._inductor import config
print([(k.aten_ops, k.source.rsplit(":", 1)[-1]) for k in result.fused_kernels])
print(config.cpp.enable_kernel_profile, config.trace.provenance_tracking_level,
      "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE" in os.environ, "INDUCTOR_PROVENANCE" in os.environ)
'''


def test_a_cell_that_first_uses_torch_compile_gets_its_kernels(tmp_path):
    """Inductor's config is imported by the cell's own torch.compile, after the run began:
    kernel profiling and provenance still apply to its compile, and are off again after.
    A profile without torch.compile imports no dynamo."""
    import os
    import subprocess
    import sys

    script = tmp_path / "lazy.py"
    script.write_text(LAZY_COMPILE)
    env = {k: v for k, v in os.environ.items()
           if k not in ("TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE", "INDUCTOR_PROVENANCE",
                        "TORCH_COMPILE_DEBUG")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), env.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                         text=True, timeout=600, check=True).stdout.splitlines()
    assert out == ["[('aten.mul, aten.sin', '7')]", "False 0 False False"]  # line 7: f's


def test_a_helpers_line_is_not_moved_into_the_compiled_frames_file(tmp_path):
    """A kernel from a helper in another file keeps the helper's line, even where the
    compiled frame's file holds the same code elsewhere."""
    import json
    from types import SimpleNamespace

    from kernelmagic.live.compile_watch import _kernel_lines

    helpers = tmp_path / "helpers.py"
    helpers.write_text("import torch\ndef act(x):\n    return torch.sin(x) * 2\n")
    cell = tmp_path / "cell.py"
    cell.write_text("from helpers import act\ndef f(x):\n    return act(x)\n"
                    "def unused(x):\n    return torch.sin(x) * 2\n")
    stack = (f'  File "{cell}", line 3, in f\n    return act(x)\n'
             f'  File "{helpers}", line 3, in act\n    return torch.sin(x) * 2\n')
    metric = SimpleNamespace(compile_id="0/0", co_filename=str(cell), inductor_provenance={
        json.dumps({"cpp_fused_mul_sin_0:1": [stack]})})
    assert _kernel_lines([metric]) == {("0/0", "cpp_fused_mul_sin_0"): [f"{helpers}:3"]}


def test_the_gaps_listing_adds_up_to_the_gap():
    """The gap's eager ops (the first ``GAP_OPS``, then the others summed), dynamo's work
    and the Python between them (no op recorded) add up to the gap."""
    events = [(Kind.RANGE, "Torch-Compiled Region: 0/0", 0, 200, 1),
              (Kind.OP, "## Call CompiledFxGraph a ##", 1, 10, 1)]
    at = 20
    for i, us in enumerate((30, 20, 10, 8, 6, 4)):  # six eager ops: 78 µs
        events.append((Kind.OP, f"aten::op{i}", at, at + us, 1))
        at += us + 2
    events += [(Kind.OP, "TorchDynamo Cache Lookup", 120, 125, 1),
               (Kind.OP, "## Call CompiledFxGraph b ##", 150, 190, 1)]
    table = table_of(*events)
    (gap,) = compiled_view(table, Figures(table), [(0, 300_000)]).breaks
    assert gap.gap_time_total == 140.0
    assert gap.top_ops == ("aten::op0 30.0 µs; aten::op1 20.0 µs; aten::op2 10.0 µs; "
                           "aten::op3 8.0 µs; 2 other ops 10.0 µs; dynamo 5.0 µs; "
                           "Python 57.0 µs")


def test_a_graph_break_with_no_graph_after_it_is_still_listed(monkeypatch):
    """A frame that breaks after its last graph (a ``print`` before ``return``) leaves no gap
    between two graphs: the break is still a row, with its reason and line, and no gap."""
    from traceback import FrameSummary
    from types import SimpleNamespace

    from kernelmagic.core.compiled_rows import CompiledRegionRow
    from kernelmagic.live import compile_watch

    why = "Failed to trace builtin operator\n  Hint: Avoid calling builtin `print`"
    records = [_metric("0/0", co_name="f", co_filename="/u/cell.py", co_firstlineno=4,
                       duration_us=1_000_000, restart_reasons={why})]
    breaks = [SimpleNamespace(reason=why, user_stack=[
        FrameSummary("/u/cell.py", 6, "f", lookup_line=False)])]
    monkeypatch.setattr(compile_watch, "_metrics", lambda: list(records))
    monkeypatch.setattr(compile_watch, "_break_records", lambda: list(breaks))
    watch = compile_watch.Watch()
    result = cpu_result(compiled_regions=[  # called on its own and nested: one break
        CompiledRegionRow("0/0", 10, 500.0, 100.0),
        CompiledRegionRow("0/0", 10, 400.0, 100.0, outermost=False)])
    (row,) = watch.annotate(result).graph_breaks
    assert (row.compile_id, row.count, row.gap_time_total, row.reason, row.hint, row.file,
            row.line) == ("0/0", 0, 0.0, "Failed to trace builtin operator",
                          "Avoid calling builtin `print`", "/u/cell.py", 6)
    text = text_report(dataclasses.replace(result, graph_breaks=[row]))
    assert "[graph breaks]" in text and "no gap" in text
    assert "graph-break gaps" not in text


def test_same_named_triton_kernels_of_two_graphs_are_rows_of_their_regions():
    """Triton kernels are named per graph (``triton_poi_fused_add_0`` in each graph that
    has one): a kernel's row is its name in its region, so its lines are that graph's."""
    table = table_of(
        (Kind.RANGE, "step/iter 0", 0, 200, 1),
        (Kind.RANGE, "Torch-Compiled Region: 0/0", 1, 190, 1),
        (Kind.OP, "## Call CompiledFxGraph a ##", 5, 40, 1),
        (Kind.RUNTIME, "cuLaunchKernel", 10, 12, 1, {"correlation": 1}),
        (Kind.OP, "aten::item", 45, 50, 1),
        (Kind.RANGE, "Torch-Compiled Region: 1/0", 60, 180, 1),
        (Kind.OP, "## Call CompiledFxGraph b ##", 70, 170, 1),
        (Kind.RUNTIME, "cuLaunchKernel", 80, 82, 1, {"correlation": 2}),
        (Kind.KERNEL, "triton_poi_fused_add_0", 20, 24, 7, {"device": 0, "correlation": 1}),
        (Kind.KERNEL, "triton_poi_fused_add_0", 90, 96, 7, {"device": 0, "correlation": 2}),
    )
    kernels = compiled_view(table, Figures(table), [(0, 200_000)]).kernels
    assert sorted((k.key, k.compile_id, k.count, k.time_total) for k in kernels) == [
        ("triton_poi_fused_add_0", "0/0", 1, 4.0), ("triton_poi_fused_add_0", "1/0", 1, 6.0)]
    from kernelmagic.render.compiled import kernel_table

    table = kernel_table(cpu_result(fused_kernels=kernels))
    assert sorted(table.column("region").show(k) for k in kernels) == ["0/0", "1/0"]


def test_a_cached_graphs_repeated_line_is_found_in_the_frames_file(tmp_path):
    """A graph cached from another copy of the file (still there) names that copy; a line
    whose code the frame's file holds twice is taken at its recorded number when that
    number reads the same code, not from the other copy."""
    from kernelmagic.live.compile_watch import _current_place

    text = ("import torch\n\n\ndef g(x):\n    x = torch.sin(x) * 2\n"
            "    x = torch.sin(x) * 2\n    return x\n")
    now, then = tmp_path / "now.py", tmp_path / "then.py"
    now.write_text(text)
    then.write_text(text)
    code = "x = torch.sin(x) * 2"
    assert _current_place(str(then), 6, code, str(now), str(then)) == f"{now}:6"


def test_a_compiled_call_inside_a_gap_does_not_take_the_break():
    """Code after a graph break that calls another compiled function (its own region, no
    break of its own): both gaps around that function's graph are the breaking frame's."""
    table = table_of(
        (Kind.RANGE, "Torch-Compiled Region: 0/0", 0, 200, 1),
        (Kind.OP, "## Call CompiledFxGraph a ##", 5, 20, 1),
        (Kind.RANGE, "Torch-Compiled Region: 2/0", 40, 70, 1),
        (Kind.OP, "## Call CompiledFxGraph k ##", 45, 65, 1),
        (Kind.RANGE, "Torch-Compiled Region: 1/0", 100, 190, 1),
        (Kind.OP, "## Call CompiledFxGraph b ##", 110, 180, 1),
    )
    breaks = compiled_view(table, Figures(table), []).breaks
    assert [(b.compile_id, b.count, b.gap_time_total) for b in breaks] == [("0/0", 2, 70.0)]


def test_a_region_called_both_nested_and_on_its_own_counts_its_own_calls():
    """A compiled function called on its own and from another region's eager code: its
    calls on their own are compiled time of the iteration, its nested calls are not again."""
    table = table_of(
        (Kind.RANGE, "cell/iter 0", 0, 100, 1),
        (Kind.RANGE, "Torch-Compiled Region: 0/0", 0, 50, 1),
        (Kind.OP, "## Call CompiledFxGraph a ##", 1, 5, 1),
        (Kind.RANGE, "Torch-Compiled Region: 2/0", 10, 20, 1),
        (Kind.OP, "## Call CompiledFxGraph k ##", 11, 19, 1),
        (Kind.RANGE, "Torch-Compiled Region: 2/0", 60, 80, 1),
        (Kind.OP, "## Call CompiledFxGraph k ##", 61, 79, 1),
    )
    regions = compiled_view(table, Figures(table), [(0, 100_000)]).regions
    assert [(r.compile_id, r.count, r.cpu_time_total, r.outermost) for r in regions] == [
        ("0/0", 1, 50.0, True), ("2/0", 1, 20.0, True), ("2/0", 1, 10.0, False)]
    report = text_report(build_result(table, name="cell"))
    assert "compiled regions 70.0 µs of the mean 100 µs" in report


def test_config_is_restored_after_ctrl_c_and_a_refused_profile_inside_the_warm_up():
    from torch._inductor import config as inductor_config

    def flags() -> tuple[bool, int]:
        return (inductor_config.cpp.enable_kernel_profile,
                inductor_config.trace.provenance_tracking_level)

    before = flags()
    seen = []

    def cell() -> None:
        seen.append(flags())
        if len(seen) == 1:  # the warm-up: a profile of its own, refused before it runs
            with pytest.raises(ProfilerBusyError, match="already profiling"):
                kernelmagic.profile(lambda: None, iters=1, warmup=0, name="inner")
            seen.append(flags())
        else:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        kernelmagic.profile(cell, iters=2, warmup=1, name="outer")
    assert seen[0] == seen[1] == (True, 1)  # switched on for the run, kept by the inner
    assert flags() == before


def test_a_forward_kernel_takes_no_lines_from_the_backward_of_its_compile(tmp_path):
    """The backward's record has the forward's compile id, and its kernels are named per
    graph too (``cpp_fused_mul_0`` in both): a forward kernel's lines are the forward's."""
    import json

    from kernelmagic.live.compile_watch import _kernel_lines

    cell = tmp_path / "cell.py"
    cell.write_text("def f(x):\n    y = x * 2\n    return y * y\n")

    def provenance(line: int) -> set[str]:
        code = cell.read_text().splitlines()[line - 1].strip()
        stack = f'  File "{cell}", line {line}, in f\n    {code}\n'
        return {json.dumps({"cpp_fused_mul_0:1": [stack]})}

    forward = _metric("0/0", co_filename=str(cell), inductor_provenance=provenance(2))
    backward = _metric("0/0", is_forward=False, inductor_provenance=provenance(3))
    assert _kernel_lines([forward, backward]) == {("0/0", "cpp_fused_mul_0"): [f"{cell}:2"]}


_MODULES_CELL = """\
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(64, 64)

    def forward(self, x):
        return torch.relu(self.lin(x))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Sequential(Block(), Block())
        self.head = torch.nn.Linear(64, 2)

    def forward(self, x):
        return self.head(self.encoder(x))


def breaks(x):
    z = torch.tanh(x) + 1
    n = z.sum().item()
    return torch.exp(z) * n


torch.manual_seed(0)
model = Net()
model.encoder = torch.compile(model.encoder)
step = torch.compile(breaks)
x = torch.randn(8, 64)
"""
# (lines unlike with_break's: a cached graph's stale line is found again by its code)
_BREAK_IN_CELL = _MODULES_CELL.splitlines().index("    n = z.sum().item()") + 1


@pytest.fixture(scope="module")
def from_cells(shell) -> tuple[ProfileResult, int]:
    """A compiled module and a compiled function that breaks its graph, both defined in
    an earlier cell, profiled from the next: (the result, the defining cell's number)."""
    from IPython.utils.capture import capture_output

    shell.reset(new_session=False)
    shell.run_cell("import torch", store_history=False)
    defined = shell.run_cell(_MODULES_CELL, store_history=True)
    assert defined.success, defined.error_in_exec
    with capture_output():
        ran = shell.run_cell("%%profile -n 3 -w 1 -o r -q\nwith torch.no_grad():\n"
                             "    model(x)\nstep(x)\n", store_history=True)
    assert ran.success, ran.error_in_exec
    return shell.user_ns["r"], defined.execution_count


def test_a_graph_break_in_a_cell_reads_cell_n_and_its_line(from_cells):
    result, n = from_cells
    (gap,) = [b for b in result.graph_breaks if b.reason]
    assert (gap.file, gap.line) == (f"cell[{n}]", _BREAK_IN_CELL)
    assert gap.code == "n = z.sum().item()"
    framed = [r for r in result.compiled_regions if r.function == "breaks"]
    assert framed and all(r.file == f"cell[{n}]" for r in framed)
    text = text_report(result)
    assert f"cell[{n}]:{_BREAK_IN_CELL} n = z.sum().item()" in text
    assert ".py:" not in "".join(line for line in text.splitlines() if "graph" in line)
    html = result._repr_mimebundle_()["text/html"]
    assert f"cell[{n}]:{_BREAK_IN_CELL}" in html
    for finding in find(result):  # (named only when the gap is a large enough share)
        if finding.rule == "graph_break":
            assert f"cell[{n}]:{_BREAK_IN_CELL}" in finding.evidence


def test_a_compiled_module_is_named_by_its_attribute_path(from_cells):
    result, _ = from_cells
    named = {r.function for r in result.compiled_regions}
    assert "model.encoder" in named
    assert "inner" not in named  # torch's wrapper frame (nn.Sequential's forward is torch's)
    (region,) = [r for r in result.compiled_regions if r.function == "model.encoder"]
    assert (region.file, region.line) == ("", 0)  # not torch's external_utils.py
    assert any(c.function == "model.encoder" for c in result.compiles)
    text = text_report(result)
    assert "model.encoder" in text and "external_utils.py" not in text


def test_module_names_match_the_lifted_parameters_only():
    from types import SimpleNamespace

    from kernelmagic.live.compiled_modules import compiled_modules, module_names

    net = torch.nn.Module()
    net.encoder = torch.compile(torch.nn.Sequential(torch.nn.Linear(4, 3)))
    net.head = torch.nn.Linear(3, 2)
    net.head.compile()
    twin = torch.compile(torch.nn.Sequential(torch.nn.Linear(4, 3)))
    found = dict(compiled_modules({"net": net, "_hidden": twin, "n": 3}))
    assert found == {"net.encoder": net.encoder._orig_mod, "net.head": net.head}
    def metric(compile_id: str, shapes: object, frame: str = "forward") -> SimpleNamespace:
        """A compile's record, as dynamo's metrics hold it."""
        return SimpleNamespace(compile_id=compile_id, co_name=frame, graph_node_shapes=shapes)

    records = [metric("0/0", str({"l_fn_modules_0_parameters_weight_": [3, 4],
                                  "l_args_0_": [2, 4]}), frame="inner"),
               metric("1/0", {"l_self_parameters_weight_": [2, 3],
                              "l_self_parameters_bias_": [2]}),
               metric("2/0", {"l_self_parameters_weight_": [5, 3]}),  # another shape
               metric("3/0", {"l_x_": [2, 4]}),  # no parameters
               metric("4/0", {"l_self_parameters_weight_": [2, 3]}, frame="train_step")]
    modules = compiled_modules({"net": net})
    assert module_names(records, modules) == {"0/0": "net.encoder", "1/0": "net.head"}
    both = [*modules, ("twin", twin._orig_mod)]  # two modules hold 0/0's: neither named
    assert module_names(records, both) == {"1/0": "net.head"}
