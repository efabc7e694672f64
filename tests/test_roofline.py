"""The roofline view (--roofline): exact counts, known bounds, the join, peaks, rendering."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from fakes import cpu_result, table_of

import kernelmagic
from kernelmagic.core.datasheet import datasheet
from kernelmagic.core.events import Kind
from kernelmagic.core.range_names import SYNC_RANGE
from kernelmagic.core.roofline_bounds import OVERHEAD_FRACTION, OpCount, Peaks, classify
from kernelmagic.core.rows import RooflineRow
from kernelmagic.findings.roofline import compute_far_from_peak, memory_bound, overhead_bound
from kernelmagic.live import device_peaks as peaks_mod
from kernelmagic.live.op_counter import count_ops, tensor_bytes
from kernelmagic.live.torch_compat import flop_formula_names
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.ops import op_rows, outer_window
from kernelmagic.views.roofline import attribute_times, build_rows, ops_to_open
from kernelmagic.views.tree import Figures

F32 = 4  # bytes per float32


def counts_of(fn):
    with torch.inference_mode():
        return {k: (c.calls, c.flops, c.bytes) for k, c in count_ops(fn).items()}


# --- exact counts ----------------------------------------------------------------------


def test_mm_and_addmm_counts():
    a, b, bias = torch.randn(64, 32), torch.randn(32, 16), torch.randn(16)
    assert counts_of(lambda: a @ b) == {
        "aten::mm": (1, 2 * 64 * 32 * 16, F32 * (64 * 32 + 32 * 16 + 64 * 16))}
    assert counts_of(lambda: torch.addmm(bias, a, b)) == {
        "aten::addmm": (1, 2 * 64 * 32 * 16, F32 * (16 + 64 * 32 + 32 * 16 + 64 * 16))}


def test_linear_is_counted_as_the_addmm_it_runs():
    a, w, bias = torch.randn(64, 32), torch.randn(16, 32), torch.randn(16)
    counts = counts_of(lambda: F.linear(a, w, bias))
    assert counts["aten::addmm"] == (1, 2 * 64 * 32 * 16, F32 * (16 + 64 * 32 + 32 * 16 + 64 * 16))
    assert counts["aten::t"][2] == 0  # a view moves nothing
    assert "aten::linear" not in counts


def test_conv2d_counts():
    img, w, bias = torch.randn(2, 3, 32, 32), torch.randn(8, 3, 3, 3), torch.randn(8)
    flops = 2 * (2 * 8 * 32 * 32) * (3 * 3 * 3)  # 2 x outputs x (in channels x kernel)
    moved = F32 * (2 * 3 * 32 * 32 + 8 * 3 * 3 * 3 + 8 + 2 * 8 * 32 * 32)
    assert counts_of(lambda: F.conv2d(img, w, bias, padding=1)) == {
        "aten::convolution": (1, flops, moved)}


def test_sdpa_counts():
    b, h, n, e = 2, 4, 128, 64
    q = torch.randn(b, h, n, e)
    counts = counts_of(lambda: F.scaled_dot_product_attention(q, q, q))
    (key, (calls, flops, moved)), = counts.items()
    assert calls == 1
    assert key.startswith("aten::_scaled_dot_product")
    assert flops == 2 * 2 * b * h * n * n * e  # Q K^T and P V
    # q, k, v and the output, plus the float32 log-sum-exp per row that the kernel returns
    assert moved == F32 * (4 * b * h * n * e + b * h * n)


def test_elementwise_and_reduction_counts():
    a = torch.randn(1000)
    assert counts_of(lambda: a + a) == {"aten::add": (1, 1000, 3 * 1000 * F32)}
    assert counts_of(lambda: a.sum()) == {"aten::sum": (1, 1000, (1000 + 1) * F32)}
    assert counts_of(lambda: a * 2.0) == {"aten::mul": (1, 1000, 2 * 1000 * F32)}


def test_views_move_nothing_and_broadcasts_count_once():
    a = torch.randn(32, 64)
    assert counts_of(lambda: a.view(64, 32)) == {"aten::view": (1, 0, 0)}
    assert counts_of(lambda: a.t()) == {"aten::t": (1, 0, 0)}
    assert tensor_bytes(torch.randn(64).expand(32, 64)) == 64 * F32
    assert counts_of(lambda: a.clone())["aten::clone"] == (1, 0, 2 * 32 * 64 * F32)


# --- known bounds on this machine's measured peaks ----------------------------------------


@pytest.fixture(scope="module")
def known():
    a = torch.randn(1024, 1024)
    big = torch.randn(16 * 2**20)
    tiny = torch.randn(8)

    def muls():
        for _ in range(300):
            tiny.mul(1.5)

    out = {}
    with torch.inference_mode():
        for name, fn in [("mm", lambda: a @ a), ("add", lambda: big + big), ("muls", muls)]:
            out[name] = kernelmagic.profile(fn, iters=3, warmup=1, roofline=True, name=name)
    return out


#: The findings of a run that a busy machine slowed (``findings/measurement.py``).
SLOWED = {"busy_machine", "noisy"}


def rows_of(result):
    return {r.key: r for r in result.roofline}


def test_large_matmul_is_compute_bound(known):
    mm = rows_of(known["mm"])["aten::mm"]
    assert mm.bound == "compute"
    assert (mm.count, mm.flops, mm.bytes) == (3, 2 * 1024**3, 3 * 1024 * 1024 * F32)
    assert mm.intensity == pytest.approx(2 * 1024**3 / (3 * 1024 * 1024 * F32))
    assert mm.flops_per_s == pytest.approx(3 * mm.flops / (mm.time / 1e6))
    # The verdict is each bound's share of the time: mm's against its wrapper aten::matmul
    # (a few µs of its own, so "compute" unless a stall the size of the matmuls lands there).
    verdict, rows = known["mm"].roofline_verdict, known["mm"].roofline
    assert verdict["compute"] == pytest.approx(mm.time / sum(r.time for r in rows))
    assert max(verdict, key=verdict.get) == "compute"


def test_large_add_is_memory_bound(known):
    add = rows_of(known["add"])["aten::add"]
    # Left of the ridge whatever the load (both rates share one time); under 1% of the
    # roof ("overhead") only in a run slowed by a busy machine, which the report says.
    rules = {f.rule for f in known["add"].findings()}
    assert add.bound == "memory" or (add.bound == "overhead" and rules & SLOWED), rules
    assert add.bytes == 3 * 16 * 2**20 * F32 and add.flops == 16 * 2**20
    assert add.bytes_per_s == pytest.approx(3 * add.bytes / (add.time / 1e6))


def test_tiny_multiplies_are_overhead_bound(known):
    mul = rows_of(known["muls"])["aten::mul"]
    assert mul.bound == "overhead" and mul.count == 900
    assert mul.roof_share < OVERHEAD_FRACTION
    assert known["muls"].roofline_verdict["overhead"] > 0.9
    rules = [f.rule for f in known["muls"].findings()]
    assert "overhead_bound" in rules


def test_profiled_time_is_unchanged_by_the_counting_run(known):
    # The counting run happens after the profiled iterations: the op table still
    # holds exactly iters calls of the matmul.
    result = known["mm"]
    assert {r.key: r.count for r in result.rows}["aten::mm"] == 3
    assert "roofline" in result.views and result.roofline_peaks["source"] == "measured"


def test_fused_attention_is_opened_and_its_matmuls_counted():
    from workloads import block_and_input

    block, x = block_and_input(batch=2, seq=64)
    with torch.inference_mode():
        result = kernelmagic.profile(lambda: block(x), iters=2, warmup=1, roofline=True)
    rows = rows_of(result)
    # 2 x 8 heads of (64 x 64) @ (64 x 64): Q K^T and P V, counted inside the fused op.
    assert rows["aten::bmm"].flops == 2 * (2 * 8) * 64 * 64 * 64
    assert rows["aten::bmm"].count == 2 * 2
    fused = rows["aten::_native_multi_head_attention"]
    assert (fused.flops, fused.bytes, fused.counted) == (0.0, 0.0, False)
    # Uncounted, it keeps only its own self time: its counted matmuls' time is theirs.
    own = {r.key: r.self_cpu_time_total for r in result.rows}
    assert fused.time == pytest.approx(own["aten::_native_multi_head_attention"])


# --- classification and the join, on exact numbers ------------------------------------


ROOFS = Peaks(device="cpu", flops_per_s={"float32": 100e9, "bfloat16": 400e9,
                                         "float16": 400e9},
              bytes_per_s=10e9, source="test")


def test_classify_threshold_and_ridge():
    # The ridge is at 10 FLOP/byte: nearer the compute roof right of it.
    assert classify(50e9, 1e9, "float32", ROOFS) == ("compute", 0.5)
    assert classify(5e9, 5e9, "float32", ROOFS) == ("memory", 0.5)
    below = OVERHEAD_FRACTION * 0.99
    assert classify(below * 100e9, below * 10e9, "float32", ROOFS)[0] == "overhead"
    at = OVERHEAD_FRACTION
    assert classify(0.0, at * 10e9, "float32", ROOFS)[0] == "memory"
    assert classify(at * 100e9, 0.0, "float32", ROOFS)[0] == "compute"
    # The compute roof follows the dtype: 50 GFLOP/s is 12.5% of the bf16 roof.
    assert classify(50e9, 1e9, "bfloat16", ROOFS) == ("compute", 0.125)
    assert classify(50e9, 1e9, "float64", ROOFS) == ("compute", 0.5)  # float32's roof




COUNTED = {"aten::addmm", "aten::_native_multi_head_attention"}


def test_time_goes_to_the_outermost_counted_op():
    # Self CPU times (µs): linear 5, t 1, addmm 100 + its copy_ 20, the fused op 2 + the
    # addmm inside it 50, our synchronize's cudaDeviceSynchronize 9.
    table = table_of(
        (Kind.RANGE, "cell/iter 0", 0, 300, 1),
        (Kind.OP, "aten::linear", 1, 127, 1),
        (Kind.OP, "aten::t", 2, 3, 1),
        (Kind.OP, "aten::addmm", 5, 125, 1),
        (Kind.OP, "aten::copy_", 10, 30, 1),  # addmm's internal copy: addmm's work
        (Kind.OP, "aten::_native_multi_head_attention", 130, 182, 1),
        (Kind.OP, "aten::addmm", 131, 181, 1),  # inside another counted op: the outer owns it
        (Kind.RANGE, SYNC_RANGE, 189, 200, 1),
        (Kind.RUNTIME, "cudaDeviceSynchronize", 190, 199, 1),
    )
    assert table.parent.tolist() == [-1, 0, 1, 1, 3, 0, 5, 0, 7]
    times, calls = attribute_times(table, COUNTED, on_device=False)
    assert times == {"aten::linear": 5.0, "aten::t": 1.0, "aten::addmm": 120.0,
                     "aten::_native_multi_head_attention": 52.0}
    assert calls == {"aten::linear": 1, "aten::t": 1, "aten::addmm": 1,
                     "aten::_native_multi_head_attention": 1}
    # The same self times as the op rows: each name's time is the sum of the self CPU
    # times of the rows it absorbed.
    rows = {r.key: r for r in op_rows(table, Figures(table))}
    assert times["aten::addmm"] == (rows["aten::addmm"].self_cpu_time_total - 50.0
                                    + rows["aten::copy_"].self_cpu_time_total)


def test_device_time_goes_to_the_outermost_counted_op():
    # The same tree on CUDA: each op's self device time is its own kernels' time.
    def launch(at, corr):
        return (Kind.RUNTIME, "cudaLaunchKernel", at, at + 1, 1, {"correlation": corr})

    def kernel(name, start, end, corr):
        return (Kind.KERNEL, name, start, end, 7, {"device": 0, "correlation": corr})

    table = table_of(
        (Kind.RANGE, "cell", 0, 400, 1),
        (Kind.RANGE, "cell/iter 0", 0, 300, 1),
        (Kind.OP, "aten::linear", 1, 127, 1),
        (Kind.OP, "aten::t", 2, 3, 1),
        (Kind.OP, "aten::addmm", 5, 125, 1), launch(6, 1),
        (Kind.OP, "aten::copy_", 10, 30, 1), launch(11, 2),
        (Kind.OP, "aten::_native_multi_head_attention", 130, 182, 1), launch(131, 3),
        (Kind.OP, "aten::addmm", 135, 181, 1), launch(136, 4),
        (Kind.RANGE, SYNC_RANGE, 189, 200, 1),
        (Kind.RUNTIME, "cudaDeviceSynchronize", 190, 199, 1),
        (Kind.RUNTIME, "cudaDeviceSynchronize", 500, 510, 1),  # the profiler's, outside "cell"
        kernel("gemm", 200, 300, 1), kernel("copy", 300, 320, 2),
        kernel("softmax", 320, 322, 3), kernel("gemm", 330, 380, 4),
    )
    window = outer_window(table, "cell")
    times, calls = attribute_times(table, COUNTED, on_device=True, window=window)
    assert times == {"aten::linear": 0.0, "aten::t": 0.0, "aten::addmm": 120.0,
                     "aten::_native_multi_head_attention": 52.0}
    assert calls == {"aten::linear": 1, "aten::t": 1, "aten::addmm": 1,
                     "aten::_native_multi_head_attention": 1}
    # Without the window the profiler's own synchronize is an op of the walk.
    _, everything = attribute_times(table, COUNTED, on_device=True)
    assert everything["cudaDeviceSynchronize"] == 1


def test_ops_above_formula_ops_are_opened():
    table = table_of(
        (Kind.OP, "aten::_native_multi_head_attention", 0, 100, 1),
        (Kind.PYTHON, "nn/functional.py(1): f", 1, 99, 1),  # frames are walked through
        (Kind.OP, "aten::linear", 2, 50, 1),
        (Kind.OP, "aten::addmm", 3, 49, 1),
        (Kind.OP, "aten::bmm", 60, 90, 1),
        (Kind.OP, "aten::conv2d", 200, 300, 1),
        (Kind.OP, "aten::convolution", 201, 299, 1),
        (Kind.OP, "aten::_convolution", 202, 298, 1),  # its formula op parent stops the walk
        (Kind.OP, "aten::mkldnn_convolution", 203, 297, 1),
        (Kind.OP, "aten::add", 400, 410, 1),
    )
    assert ops_to_open(table, flop_formula_names()) == {
        "aten::_native_multi_head_attention", "aten::linear", "aten::conv2d"}


def test_rows_rates_and_raised_roofs():
    counts = {"aten::add": OpCount("aten::add", calls=2, flops=2e6, bytes=24e6, dtype="float32")}
    rows, used = build_rows({"aten::add": 1000.0, "aten::linear": 10.0},
                            {"aten::add": 4, "aten::linear": 4}, counts, ROOFS)
    add, linear = rows
    assert (add.key, add.flops, add.bytes, add.count) == ("aten::add", 1e6, 12e6, 4)
    assert add.bytes_per_s == pytest.approx(4 * 12e6 / 1e-3)  # 48 GB/s: above the 10 GB/s roof
    assert used.bytes_per_s == pytest.approx(48e9) and "memory roof raised" in used.note
    assert add.bound == "memory" and add.roof_share == pytest.approx(1.0)
    assert (linear.bound, linear.counted, linear.bytes) == ("overhead", False, 0.0)


def test_random_numbers_sorting_and_indexing_are_unexplained_not_memory_bound():
    """No FLOPs counted and a few % of the memory roof: the roofline cannot explain them."""
    from kernelmagic.render.roofline import verdict_line

    counts = {k: OpCount(k, calls=1, flops=0.0, bytes=1e6, dtype="float32")
              for k in ("aten::bernoulli_", "aten::sort", "aten::add")}
    times = {"aten::bernoulli_": 1000.0, "aten::sort": 1000.0, "aten::add": 1000.0}
    rows, _ = build_rows(times, dict.fromkeys(times, 1), counts, ROOFS)  # 1 GB/s: 10% of roof
    bounds = {r.key: r.bound for r in rows}
    assert bounds == {"aten::bernoulli_": "unexplained", "aten::sort": "unexplained",
                      "aten::add": "memory"}
    result = cpu_result()
    result.roofline, result.views = rows, ["roofline"]
    line = verdict_line(result)
    assert line.startswith("Roofline: 0% compute-bound, 33% memory-bound, 0% overhead, "
                           "67% unexplained by the roofline (random numbers, sorting, indexing)")


# --- peaks -------------------------------------------------------------------------------


@pytest.mark.parametrize("name, label", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H200", "H200"), ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
    ("NVIDIA A100-PCIE-40GB", "A100 40GB"), ("Tesla T4", "T4"), ("NVIDIA L4", "L4"),
    ("NVIDIA L40S", "L40S"), ("NVIDIA A10", "A10"), ("Tesla V100-SXM2-16GB", "V100 SXM2"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"),
])
def test_datasheet_lookup(name, label):
    found = datasheet(name)
    assert found is not None and found[0] == label
    assert found[1]["bfloat16"] >= found[1]["float32"] > 0 and found[2] > 1e11


def test_cuda_peaks_from_the_datasheet_checked_by_measurement(monkeypatch):
    sheet = datasheet("NVIDIA H200")[1]
    measured = {"float32": 50e12, "bfloat16": 790e12, "float16": 800e12, "bytes_per_s": 4.3e12}
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setattr(peaks_mod, "measure", lambda device="cpu": dict(measured))
    found = peaks_mod._cuda_peaks()
    assert (found.source, found.flops_per_s, found.bytes_per_s, found.note) == (
        "datasheet: H200", sheet, 4.8e12, "")
    assert found.measured == measured
    # A board that measures far below its datasheet is flagged, the datasheet kept.
    measured.update(bfloat16=100e12, bytes_per_s=0.5e12)
    doubted = peaks_mod._cuda_peaks()
    assert doubted.flops_per_s == sheet and "bfloat16 10%" in doubted.note
    assert "bytes_per_s 10%" in doubted.note and "set_peaks" in doubted.note
    # A GPU the table does not know is measured.
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA A10G")
    unknown = peaks_mod._cuda_peaks()
    assert unknown.source == "measured" and unknown.flops_per_s["bfloat16"] == 100e12
    assert "not in kernelmagic's datasheet table" in unknown.note


def test_unknown_gpus_are_measured():
    assert datasheet("NVIDIA A10G") is None and datasheet("Some Future GPU") is None


def test_cpu_peaks_are_measured_once_and_can_be_set():
    first = kernelmagic.peaks("cpu")
    assert first.source == "measured" and first.bytes_per_s > 0
    assert all(first.flops_per_s[dt] > 0 for dt in ("float32", "bfloat16", "float16"))
    assert kernelmagic.peaks("cpu") is first  # cached for the process
    try:
        kernelmagic.set_peaks(flops_per_s={"float32": 1e12}, bytes_per_s=2e11, device="cpu")
        now = kernelmagic.peaks("cpu")
        assert (now.flops_per_s["float32"], now.bytes_per_s, now.source) == (
            1e12, 2e11, "set_peaks")
        assert now.flops_per_s["bfloat16"] == first.flops_per_s["bfloat16"]
        kernelmagic.set_peaks(5e11, device="cpu")
        assert set(kernelmagic.peaks("cpu").flops_per_s.values()) == {5e11}
        with pytest.raises(ValueError, match="positive"):
            kernelmagic.set_peaks(bytes_per_s=-1, device="cpu")
    finally:
        peaks_mod._overrides.pop("cpu", None)
    assert kernelmagic.peaks("cpu") is first


def test_set_peaks_moves_the_roofs_of_a_profile():
    a = torch.randn(256, 256)
    try:
        kernelmagic.set_peaks(1e18, bytes_per_s=1e18, device="cpu")  # far above any CPU
        result = kernelmagic.profile(lambda: a @ a, iters=2, warmup=1, roofline=True)
    finally:
        peaks_mod._overrides.pop("cpu", None)
    assert result.roofline_peaks["source"] == "set_peaks"
    assert rows_of(result)["aten::mm"].bound == "overhead"


# --- result, rendering, findings ------------------------------------------------------------


def test_round_trip_and_older_files(known, tmp_path):
    result = known["add"]
    back = ProfileResult.from_dict(result.to_dict())
    assert back == result and back.roofline == result.roofline
    older = result.to_dict()
    del older["view_records"]["roofline"]  # a file from before --roofline
    old = ProfileResult.from_dict(older)
    assert old.roofline == [] and old.roofline_peaks == {}
    # A file from before --roofline has no roofline findings (and no error finding them),
    # where the same run with its roofline has one (memory_bound; overhead_bound in a run
    # a busy machine slowed: test_large_add_is_memory_bound).
    rules = {f.rule for f in result.findings()}
    assert "memory_bound" in rules or ("overhead_bound" in rules and rules & SLOWED), rules
    assert not {f.rule for f in old.findings()} & {"memory_bound", "overhead_bound",
                                                   "compute_far_from_peak"}


def test_text_html_and_widget(known):
    from kernelmagic.render.bundle import mime_bundle
    from kernelmagic.render.text import text_report
    from kernelmagic.render.widget import report_widget

    result = known["mm"]
    text = text_report(result)
    assert "[roofline]" in text and "Roofline: " in text and "compute-bound" in text
    html = mime_bundle(result, include=["text/html"])["text/html"]
    view = html[html.index("km-view-roofline"):]
    assert 'alt="roofline chart"' in view and "FLOP/byte" in view
    box = report_widget(result, None)
    assert "roofline" in box.km_views
    table = box.km_views["roofline"]
    table.click("flops")
    assert table.order == ["aten::mm", "aten::matmul"]  # the wrapper counts no FLOPs
    table.click("flops")
    assert table.order == ["aten::matmul", "aten::mm"]
    # The chart (drawn when none is passed) above the table, in one box the selector shows.
    chart, shown = box.km_boxes["roofline"].children
    assert chart.format == "png" and shown is table.widget


def fake_result(rows, iters=1, **peaks):
    roofs = {"flops_per_s": {"float32": 100e9, "bfloat16": 400e9, "float16": 400e9},
             "bytes_per_s": 10e9, "source": "test", **peaks}
    return ProfileResult(name="fake", iters=iters, warmup=0, device="cpu", rows=[],
                         timings=[1.0] * iters, roofline=rows, roofline_peaks=roofs,
                         views=["roofline"])


def rrow(key, bound, time, flops=0.0, moved=0.0, count=1, dtype="float32"):
    seconds = time / 1e6
    return RooflineRow(key=key, count=count, flops=flops, bytes=moved,
                       intensity=flops / moved if moved else 0.0,
                       flops_per_s=flops * count / seconds, bytes_per_s=moved * count / seconds,
                       bound=bound, time=time, dtype=dtype, roof_share=0.5)


def test_memory_bound_finding():
    rows = [rrow("aten::add", "memory", 600.0, 1e6, 12e6), rrow("aten::mm", "compute", 400.0)]
    found = memory_bound(fake_result(rows))
    assert found is not None and "60% of op time" in found.evidence
    assert "aten::add 60%" in found.evidence and "torch.compile" in found.suggestion
    rows[1] = rrow("aten::mm", "compute", 700.0)
    assert memory_bound(fake_result(rows)) is None  # 46%: not most of the time


def test_overhead_finding():
    rows = [rrow("aten::mul", "overhead", 800.0, 8, 64, count=300),
            rrow("aten::mm", "compute", 200.0)]
    found = overhead_bound(fake_result(rows))
    assert found is not None and "80% of op time" in found.evidence
    assert "300 calls per iteration" in found.evidence and "CUDA graphs" in found.suggestion


def test_compute_far_from_peak_finding():
    # 20 GFLOP/s in float32 against a 100 GFLOP/s roof, and bf16 is 4x higher.
    rows = [rrow("aten::mm", "compute", 1000.0, 20e6, 1e5)]
    found = compute_far_from_peak(fake_result(rows))
    assert found is not None and "20% of its 100 GFLOP/s roof" in found.evidence
    assert "bfloat16" in found.suggestion
    # At 90% of the roof, in bf16: nothing to say.
    rows = [rrow("aten::mm", "compute", 1000.0, 360e6, 1e5, dtype="bfloat16")]
    assert compute_far_from_peak(fake_result(rows)) is None


# --- the magic --------------------------------------------------------------------------------


def test_magic_roofline_option(ip):
    from IPython.utils.capture import capture_output

    ip.run_cell("a = torch.randn(512, 512)")
    with capture_output() as cap:
        res = ip.run_cell("%%profile -n 2 -w 1 --roofline -o r\nb = a @ a")
    assert res.success, res.error_in_exec
    from test_magic import report_data
    data = report_data(cap.outputs)
    assert "[roofline]" in data["text/plain"]
    assert data["text/html"].count("data:image/svg+xml;base64,") == 1, "the bars"
    assert data["text/html"].count("data:image/png;base64,") == 1, "the roofline"
    from test_magic import widget_of

    box = widget_of(data)
    assert "roofline" in box.km_selector.options
    box.km_selector.value = "roofline"  # a tab's table and picture are made when it is shown
    chart = box.km_boxes["roofline"].children[0]
    assert chart.format == "png" and len(chart.value) > 1000
    result = ip.user_ns["r"]
    assert {r.key: r.bound for r in result.roofline}["aten::mm"] == "compute"


def test_counting_failure_is_reported_not_raised():
    calls = []

    def fn():
        calls.append(1)
        if len(calls) > 3:  # warm-up 1 + 2 profiled: the 4th run is the counting one
            raise RuntimeError("boom")
        torch.ones(4).add(1)

    result = kernelmagic.profile(fn, iters=2, warmup=1, roofline=True)
    assert result.roofline == [] and "counting run failed" in result.roofline_peaks["note"]
    from kernelmagic.render.text import text_report

    assert "counting run failed (RuntimeError: boom)" in text_report(result)


@pytest.mark.cuda
def test_cuda_matmul_against_datasheet():
    a = torch.randn(4096, 4096, device="cuda")
    result = kernelmagic.profile(lambda: a @ a, iters=3, warmup=2, roofline=True)
    mm = {r.key: r for r in result.roofline}["aten::mm"]
    assert mm.bound == "compute" and mm.time > 0
    assert mm.flops == 2 * 4096**3
    name = torch.cuda.get_device_name()
    if datasheet(name) is not None:
        assert result.roofline_peaks["source"].startswith("datasheet: ")


def test_readme_names_the_threshold():
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    assert "--roofline" in readme
