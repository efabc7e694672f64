"""--counters and --nsight on a real GPU: run with ``pytest -m cuda`` (skipped elsewhere)."""

import pytest
import torch
from workloads import block_and_input

import kernelmagic

pytestmark = pytest.mark.cuda


def test_counters_on_the_block_keep_the_timed_run_and_read_or_say_why():
    block, x = block_and_input()
    block, x = block.cuda(), x.cuda()
    with torch.inference_mode():
        result = kernelmagic.profile(lambda: block(x), iters=3, warmup=2, name="block",
                                     counters=True)
    print(result.counters_note)
    print(result.table(limit=5))
    assert result.kernels and len(result.timings) == 3  # the timed run is whole
    assert "counters" in result.views
    if not result.counters:  # no permission, no range profiler: one line says so
        assert result.counters_note.startswith("no hardware counters")
        pytest.skip(result.counters_note)
    assert "joined" in result.counters_note and "not joined" not in result.counters_note
    timed = {k.key for k in result.kernels}
    assert {r.key for r in result.counters} <= timed | {"__missing__"}
    gemm_flops = sum(r.flops for r in result.counters)
    assert gemm_flops > 0 and any(r.dram_bytes > 0 for r in result.counters)
    assert all(0 <= r.dram_peak_share < 1.5 for r in result.counters)
    assert any(r.launched_by for r in result.counters)


def test_nsight_mode_times_the_iterations_without_torchs_profiler():
    a = torch.randn(1024, 1024, device="cuda")
    result = kernelmagic.profile(lambda: a @ a, iters=3, warmup=1, name="nsight",
                                 nsight=True)
    assert result.capture == "nsight" and result.rows == [] and len(result.timings) == 3
    assert "Nsight capture" in result.summary() or "Nsight capture" in str(result.table())
