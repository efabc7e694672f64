"""The plain-Python core on real workloads: numbers reconcile with torch's own."""

import itertools

import pytest
import torch
from workloads import block_and_input

import kernelmagic
from kernelmagic.core.options import ProfileOptions
from kernelmagic.live import runner, torch_compat


@pytest.fixture(scope="module")
def block_run():
    block, x = block_and_input()
    seen = {}

    def keep(prof):
        seen["prof"] = prof

    with torch.inference_mode():
        result = kernelmagic.profile(lambda: block(x), iters=3, warmup=1, name="block",
                                     on_trace_ready=keep)
    return result, seen["prof"]


def test_block_profile_reconciles_with_key_averages(block_run):
    result, prof = block_run
    averages = {a.key: a for a in prof.key_averages()}
    assert result.rows, "the Block must record operators"
    for row in result.rows:
        avg = averages[row.key]
        assert row.count == avg.count
        assert row.self_cpu_time_total == pytest.approx(avg.self_cpu_time_total)
        assert row.cpu_time_total == pytest.approx(avg.cpu_time_total)
        assert row.self_device_time_total == pytest.approx(avg.self_device_time_total)
        assert row.device_time_total == pytest.approx(avg.device_time_total)
    left_out = set(averages) - {r.key for r in result.rows}
    assert left_out == {"block", "block/iter 0", "block/iter 1", "block/iter 2"}
    # Total self time: torch's own table footer counts our ranges' self time too.
    ranges = sum(averages[k].self_cpu_time_total for k in left_out)
    assert result.self_cpu_time_total + ranges == pytest.approx(
        prof.key_averages().self_cpu_time_total)


def test_block_ops_and_counts(block_run):
    result, _ = block_run
    rows = {r.key: r for r in result.rows}
    # Two LayerNorms, two Linear in the MLP, per forward: counts sum over 3 iterations.
    assert rows["aten::layer_norm"].count == 2 * 3
    assert rows["aten::gelu"].count == 3
    assert result.top(1)[0].self_cpu_time_total == max(r.self_cpu_time_total for r in result.rows)
    assert len(result.timings) == 3 and all(t > 0 for t in result.timings)
    assert (result.name, result.iters, result.warmup, result.device) == ("block", 3, 1, "cpu")
    assert result.sort == "self_cpu"


def test_ranges_wrap_block_and_each_iteration(block_run):
    _, prof = block_run
    names = [e.name for e in prof.function_events if getattr(e, "is_user_annotation", False)]
    assert names.count("block") == 1
    assert [n for n in names if n.startswith("block/iter")] == [
        "block/iter 0", "block/iter 1", "block/iter 2"]
    assert "block/warmup" not in names  # the warm-up runs outside the profiler


def test_runs_warmup_plus_iters_times_and_user_ranges_stay_out():
    calls = []

    def work():
        calls.append(1)
        with torch.profiler.record_function("my phase"):
            torch.ones(8).mul(2)

    result = kernelmagic.profile(work, iters=4, warmup=2, name="w")
    assert len(calls) == 6
    keys = {r.key for r in result.rows}
    assert "aten::mul" in keys and "my phase" not in keys
    assert result.top(1, by="calls")[0].count % 4 == 0


def test_code_object_runs_in_namespace_and_assignments_persist():
    ns = {"torch": torch, "n": 0}
    code = compile("n += 1\ny = torch.ones(3) * n", "<cell>", "exec")
    result = kernelmagic.profile(code, namespace=ns, iters=2, warmup=1)
    assert ns["n"] == 3
    assert ns["y"].tolist() == [3.0, 3.0, 3.0]
    assert "aten::mul" in {r.key for r in result.rows}


def test_freed_heap_goes_back_unless_the_caller_does_it(monkeypatch):
    trims = []
    monkeypatch.setattr(torch_compat, "return_freed_memory", lambda: trims.append(1))
    kernelmagic.profile(lambda: torch.ones(4).add(1), iters=2, warmup=0)
    assert trims == [1]  # the API trims before returning
    run = runner.plan(ProfileOptions(iters=2, warmup=0))
    runner.execute(lambda: torch.ones(4).add(1), run, free_memory=False)
    assert trims == [1]  # the magic does it itself, after showing the report
    kernelmagic.profile(lambda: torch.ones(4).add(1), iters=2, warmup=0,
                        on_trace_ready=lambda prof: None)
    assert trims == [1]  # the session is the caller's: nothing freed


def test_fake_clock_gives_exact_timings():
    ticks = itertools.count()
    run = runner.plan(ProfileOptions(iters=3, warmup=0, name="t"))
    result = runner.execute(lambda: None, run, clock=lambda: next(ticks) * 0.5)
    assert result.timings == [0.5, 0.5, 0.5]
    assert result.stats.median == 0.5


@pytest.mark.parametrize("exc", [ValueError("boom"), KeyboardInterrupt()])
def test_exception_stops_profiler_and_next_run_works(exc):
    n = 0

    def fails_on_third():
        nonlocal n
        n += 1
        torch.ones(2).add(1)
        if n == 3:
            raise exc

    with pytest.raises(type(exc)):
        kernelmagic.profile(fails_on_third, iters=5, warmup=1)
    assert not torch_compat.profiler_running()
    result = kernelmagic.profile(lambda: torch.ones(2).add(1), iters=2, warmup=0)
    assert "aten::add" in {r.key for r in result.rows}


def test_exception_during_warmup_propagates():
    def bad():
        raise RuntimeError("in warm-up")

    with pytest.raises(RuntimeError, match="in warm-up"):
        kernelmagic.profile(bad, iters=2, warmup=1)
    assert not torch_compat.profiler_running()


def test_running_profiler_is_refused_clearly():
    with torch.autograd.profiler.profile(use_kineto=True), \
            pytest.raises(runner.ProfilerBusyError, match="already running"):
        kernelmagic.profile(lambda: None, iters=1)
    assert kernelmagic.profile(lambda: torch.ones(1).add(1), iters=1, warmup=0).rows


def test_nvtx_not_called_on_cpu_builds(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("CPU-only behaviour")

    def explode(*a, **k):
        raise AssertionError("NVTX must not be called without CUDA")

    monkeypatch.setattr(torch.cuda.nvtx, "range_push", explode)
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", explode)
    assert kernelmagic.profile(lambda: torch.ones(1).add(1), iters=1, warmup=1).rows


def test_options_validated_before_anything_runs():
    ran = []
    with pytest.raises(ValueError, match="-n/--iters"):
        kernelmagic.profile(lambda: ran.append(1), iters=0)
    with pytest.raises(TypeError, match="callable or a code object"):
        kernelmagic.profile(42)
    assert ran == []
