"""GPU behaviour: run with ``pytest -m cuda`` on a CUDA machine (skipped elsewhere)."""

import pytest
import torch

import kernelmagic
from kernelmagic.live import torch_compat

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="module")
def mm_run():
    a = torch.randn(2048, 2048, device="cuda")
    seen = {}
    result = kernelmagic.profile(lambda: a @ a, iters=5, warmup=2, name="mm",
                                 on_trace_ready=lambda p: seen.setdefault("prof", p))
    return result, seen["prof"]


def test_device_is_profiled_and_is_default_sort(mm_run):
    result, _ = mm_run
    assert result.device == "cuda" and result.profiles_device
    assert result.sort == "self_device"
    assert result.device_name == torch.cuda.get_device_name()
    top = result.top(1)[0]
    assert top.key == "aten::mm" and top.self_device_time_total > 0


def test_device_totals_reconcile_with_torch(mm_run):
    from test_live_parity import torch_device_adjustments

    result, prof = mm_run
    averages = prof.key_averages()
    by_key = {a.key: a for a in averages}
    total_less, self_more = torch_device_adjustments(prof)
    for row in result.rows:
        if row.key.startswith("cu"):
            # Runtime calls: less kernelmagic's own synchronize, and torch also gives a
            # call the GPU work of an op whose id equals its CUPTI id by chance.
            assert row.device_time_total == 0.0
            continue
        want_self = by_key[row.key].self_device_time_total + self_more.get(row.key, 0.0)
        assert row.self_device_time_total == pytest.approx(want_self)
        want = by_key[row.key].device_time_total - total_less.get(row.key, 0.0)
        assert row.device_time_total == pytest.approx(want)
    kernels = sum(a.self_device_time_total for a in averages
                  if a.device_type != torch.autograd.DeviceType.CPU and not a.is_user_annotation)
    # Every kernel's time is attributed to exactly one op's self device time.
    assert result.self_device_time_total == pytest.approx(kernels, rel=1e-6)


def test_our_synchronize_is_not_in_the_rows():
    # The cell synchronises once per iteration itself, and kernelmagic once more after it:
    # torch records both (and the profiler's closing one); the row keeps only the cell's.
    a = torch.randn(512, 512, device="cuda")
    seen = {}

    def cell():
        a @ a
        torch.cuda.synchronize()

    result = kernelmagic.profile(cell, iters=4, warmup=1, name="sync",
                                 on_trace_ready=lambda p: seen.setdefault("prof", p))
    torch_calls = {e.key: e.count for e in seen["prof"].key_averages()}
    assert torch_calls["cudaDeviceSynchronize"] >= 2 * result.iters  # ours were recorded
    (row,) = [r for r in result.rows if r.key == "cudaDeviceSynchronize"]
    assert row.count == result.iters  # the cell's own, one per iteration


def test_our_synchronize_raises_no_sync_finding(mm_run):
    result, prof = mm_run
    torch_calls = {e.key: e.count for e in prof.key_averages()}
    assert torch_calls["cudaDeviceSynchronize"] >= result.iters  # one of ours per iteration
    assert [r for r in result.rows if r.key == "cudaDeviceSynchronize"] == []
    assert "sync_points" not in [f.rule for f in result.findings()]


def test_wall_clock_read_after_synchronize(mm_run):
    result, _ = mm_run
    per_iter_device_s = result.self_device_time_total / result.iters / 1e6
    # Without a synchronize the clock would stop at launch, far below the kernel time.
    # Two clocks (perf_counter against CUPTI's kernel times, ~0.35 ms a 2048² matmul on an
    # H200): the 10% covers a median against a mean and the clocks' µs-level alignment, and
    # is still far from the few µs of a launch.
    assert result.stats.median >= 0.9 * per_iter_device_s


def test_cpu_only_flag_skips_device():
    a = torch.randn(256, 256, device="cuda")
    result = kernelmagic.profile(lambda: a @ a, iters=2, warmup=1, cpu_only=True)
    assert result.device == "cpu" and result.self_device_time_total == 0


def test_nvtx_is_usable_and_balanced(monkeypatch):
    # Every NVTX push of a labelled range is popped, on a normal exit, after an exception
    # and after Ctrl-C; the real NVTX calls are made, counted on the way through.
    assert torch_compat._nvtx_usable()
    calls: list[str] = []
    push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop

    def counted_push(name):
        calls.append(f"push {name}")
        return push(name)

    def counted_pop():
        calls.append("pop")
        return pop()

    monkeypatch.setattr(torch.cuda.nvtx, "range_push", counted_push)
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", counted_pop)
    with torch_compat.labelled_range("outer"), torch_compat.labelled_range("inner"):
        torch.ones(1, device="cuda").add_(1)
    assert calls == ["push outer", "push inner", "pop", "pop"]
    for error in (ValueError, KeyboardInterrupt):
        calls.clear()
        with pytest.raises(error), torch_compat.labelled_range("failing"):
            raise error
        assert calls == ["push failing", "pop"]


def test_magic_report_has_device_columns():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "kernelmagic")
    sh.run_cell("import torch\na = torch.randn(1024, 1024, device='cuda')")
    with capture_output() as cap:
        res = sh.run_cell("%%profile -n 3 -w 1\nb = a @ a")
    assert res.success
    text = cap.outputs[0].data["text/plain"]
    assert "self device" in text and "CUDA (" in text


def test_kernel_view_and_gpu_idle():
    a = torch.randn(1024, 1024, device="cuda")
    result = kernelmagic.profile(lambda: torch.relu(a @ a), iters=4, warmup=2, timeline=True)
    assert result.kernels, "kernels are listed"
    launched = {k.launched_by for k in result.kernels}
    assert "aten::mm" in launched
    total = sum(k.device_time_total for k in result.kernels)
    assert total == pytest.approx(result.self_device_time_total, rel=0.05)
    assert len(result.gpu_busy) == 4
    # Two clocks: the kernels run between the two perf_counter reads of their iteration
    # (which ends synchronised), so busy <= wall in true time; the 5% (a few µs of an
    # iteration here) covers CUPTI's GPU timestamps converted to the CPU's clock.
    assert all(0 < busy <= t * 1e6 * 1.05 for busy, t in zip(result.gpu_busy, result.timings,
                                                              strict=True))
    lanes = {s.lane for s in result.timeline}
    assert "CPU" in lanes and any(lane.startswith("stream ") for lane in lanes)
    from kernelmagic.render.views import view_notes, view_tables

    assert view_tables(result)[0][0] == "kernels"
    assert any(n.startswith("GPU per iteration (mean): busy") for n in view_notes(result))


def test_device_memory_peak():
    def alloc():
        torch.empty(256, 1024, 1024, device="cuda")  # 1 GiB, freed at once

    result = kernelmagic.profile(alloc, iters=2, warmup=1, memory=True)
    assert result.peak_memory["device"] >= 2**30
