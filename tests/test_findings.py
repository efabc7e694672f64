"""Every finding rule on a profile that triggers it and on one that does not."""

import time

import pytest
import torch
from fakes import cpu_result

import kernelmagic
from kernelmagic import findings
from kernelmagic.result import KernelRow, OpRow, ProfileResult


def gpu(rows, kernels=(), timings=(0.001,) * 10, precision="highest", warmup=()):
    return ProfileResult(name="g", iters=10, warmup=len(warmup), device="cuda", rows=list(rows),
                         timings=list(timings), sort="self_device", device_name="H200",
                         kernels=list(kernels), matmul_precision=precision,
                         warmup_timings=list(warmup))


def rules(result):
    return [f.rule for f in result.findings()]


# --- one op dominates -----------------------------------------------------------------


def test_dominant_op_on_a_real_matmul_cell():
    a = torch.randn(512, 512)
    result = kernelmagic.profile(lambda: a @ a, iters=3, warmup=1)
    finding = findings.dominant_op(result)
    assert finding is not None
    assert finding.evidence.startswith("aten::mm takes ")
    assert "torch.autocast" in finding.suggestion


def test_dominant_op_not_when_time_is_spread():
    rows = [OpRow(f"aten::op{i}", 10, 100.0, 100.0) for i in range(4)]
    assert findings.dominant_op(cpu_result(rows=rows)) is None


# --- launch-bound ---------------------------------------------------------------------


def launchy(kernel_us):
    rows = [OpRow("aten::add", 500, 4000.0, 5000.0, 500 * kernel_us, 500 * kernel_us)]
    kernels = [KernelRow("vectorized_elementwise_kernel", 500, 500 * kernel_us, "aten::add")]
    return gpu(rows, kernels)


def test_launch_bound_triggers_on_many_tiny_kernels():
    f = findings.launch_bound(launchy(kernel_us=2.0))
    assert f is not None
    assert "busy 10% of each iteration" in f.evidence
    assert "50 kernels with a median of 2.00 µs" in f.evidence
    assert "reduce-overhead" in f.suggestion


def test_launch_bound_not_when_kernels_are_long_or_gpu_busy():
    assert findings.launch_bound(launchy(kernel_us=15.0)) is None  # busy 75%
    assert findings.launch_bound(cpu_result()) is None


# --- synchronisation ------------------------------------------------------------------


def test_sync_points_on_item_and_dtoh_copies():
    rows = [OpRow("aten::mm", 10, 100.0, 100.0, 5000.0, 5000.0),
            OpRow("aten::item", 30, 60.0, 900.0),
            OpRow("aten::_local_scalar_dense", 30, 840.0, 840.0)]
    kernels = [KernelRow("Memcpy DtoH (Device -> Pageable)", 30, 60.0, "aten::_local_scalar_dense")]
    f = findings.sync_points(gpu(rows, kernels))
    assert f is not None
    assert "aten::item ×3 (reads a value to Python)" in f.evidence
    assert "Memcpy DtoH (Device -> Pageable) ×3" in f.evidence
    assert ".item()" in f.suggestion


def test_sync_points_not_without_syncs_or_on_cpu():
    rows = [OpRow("aten::mm", 10, 100.0, 100.0, 5000.0, 5000.0)]
    assert findings.sync_points(gpu(rows)) is None
    assert findings.sync_points(cpu_result(rows=[OpRow("aten::item", 10, 5.0, 5.0)])) is None


# --- float32 matmuls ------------------------------------------------------------------


def fp32(kernel="ampere_sgemm_128x64_tn", precision="highest"):
    rows = [OpRow("aten::mm", 10, 100.0, 100.0, 8000.0, 8000.0),
            OpRow("aten::add", 10, 100.0, 100.0, 2000.0, 2000.0)]
    return gpu(rows, [KernelRow(kernel, 10, 8000.0, "aten::mm")], precision=precision)


def test_fp32_matmul_triggers_on_sgemm_at_highest_precision():
    f = findings.fp32_matmul(fp32())
    assert f is not None
    assert f.evidence.startswith("matmuls take 80% of device time")
    assert 'set_float32_matmul_precision("high")' in f.suggestion


def test_fp32_matmul_not_with_tf32_or_bf16():
    assert findings.fp32_matmul(fp32(precision="high")) is None
    assert findings.fp32_matmul(fp32(kernel="sm90_xmma_gemm_bf16bf16_bf16f32")) is None
    assert findings.fp32_matmul(fp32(kernel="ampere_tf32_s1688gemm_tf32_128x128")) is None


# --- fusable elementwise ops ----------------------------------------------------------


def test_fusable_elementwise_on_a_real_cell_of_small_ops():
    a = torch.randn(32)

    def small_ops():
        x = a
        for _ in range(20):
            x = x.add(1).mul(0.5)
        return x

    f = findings.fusable_elementwise(kernelmagic.profile(small_ops, iters=3, warmup=1))
    assert f is not None
    assert f.evidence.startswith("40 elementwise calls per iteration")
    assert "torch.compile" in f.suggestion


def test_fusable_elementwise_not_on_the_block():
    from workloads import block_and_input

    block, x = block_and_input(batch=1, seq=64)
    with torch.inference_mode():
        result = kernelmagic.profile(lambda: block(x), iters=2, warmup=1)
    assert findings.fusable_elementwise(result) is None


# --- slow warm-up ---------------------------------------------------------------------


def test_slow_warmup_on_a_real_first_call_cost():
    state = {"first": True}

    def cached():
        if state["first"]:
            time.sleep(0.2)  # stands in for compilation on the first call
            state["first"] = False
        torch.ones(8).add(1)

    f = findings.slow_warmup(kernelmagic.profile(cached, iters=3, warmup=2))
    assert f is not None
    assert f.evidence.startswith("first warm-up run 2")


def test_slow_warmup_not_when_steady_or_without_warmup():
    assert findings.slow_warmup(cpu_result(warmup_timings=[0.0012, 0.001])) is None
    assert findings.slow_warmup(cpu_result(warmup_timings=[])) is None


# --- noise ----------------------------------------------------------------------------


def test_noisy_triggers_on_wide_spread():
    f = findings.noisy(cpu_result(timings=[0.001, 0.002, 0.001, 0.003, 0.0015]))
    assert f is not None
    assert "--iters 50" in f.suggestion
    assert f.evidence == "the middle half of the 5 iterations spans 67% of the median (IQR 1.00 ms)"


def test_noisy_not_on_steady_runs():
    assert findings.noisy(cpu_result()) is None  # IQR 7.5% of the median
    assert findings.noisy(cpu_result(timings=[0.001])) is None


# --- together -------------------------------------------------------------------------


def test_find_runs_every_rule_in_order():
    assert rules(cpu_result()) == ["dominant_op"]
    assert rules(launchy(2.0)) == ["dominant_op", "launch_bound", "fusable_elementwise"]
    assert len(findings.RULES) == 8


@pytest.mark.parametrize("rule", findings.RULES)
def test_every_rule_is_silent_on_an_empty_profile(rule):
    assert rule(cpu_result(rows=[])) is None
