"""Every finding rule on a profile that triggers it and on one that does not."""

import dataclasses
import importlib
import inspect
import time
from pathlib import Path

import pytest
import torch
from fakes import cpu_result

import kernelmagic
from kernelmagic import findings
from kernelmagic.core.rows import KernelRow, OpRow
from kernelmagic.core.units import format_seconds, percent
from kernelmagic.findings.counters import poor_reuse
from kernelmagic.findings.gpu import fp32_matmul, launch_bound, sync_points
from kernelmagic.findings.measurement import noisy, slow_warmup
from kernelmagic.findings.ops import dominant_op, fusable_elementwise
from kernelmagic.findings.roofline import memory_bound
from kernelmagic.results.result import ProfileResult


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
    finding = dominant_op(result)
    assert finding is not None
    # The matmul's work is aten::mm (~1.3 ms a call here) under aten::matmul (a few µs of
    # its own): between them nearly all the self time, so one of them dominates. Which one
    # is mm unless a scheduler stall lands in the wrapper's few µs: name either.
    rows = {r.key: r for r in result.rows}
    top = max(rows.values(), key=lambda r: r.self_cpu_time_total)
    assert top.key in ("aten::mm", "aten::matmul") and rows["aten::mm"].count == 3
    shown = percent(result.share(top))  # the table's "% self CPU" figure
    assert finding.evidence.startswith(f"{top.key} takes {shown} of self time (")
    assert finding.evidence.endswith(", 1 call per iteration)")  # singular after one (#28)
    # Lower precision only where this CPU's own figures say bfloat16 is faster (#28).
    fast = result.device_info.flops_per_s["bfloat16"] > result.device_info.flops_per_s["float32"]
    assert ('torch.autocast("cpu", dtype=torch.bfloat16)' in finding.suggestion) == fast
    assert "Tensor Core" not in finding.suggestion


def test_dominant_op_not_when_time_is_spread():
    rows = [OpRow(f"aten::op{i}", 10, 100.0, 100.0) for i in range(4)]
    assert dominant_op(cpu_result(rows=rows)) is None


# --- launch-bound ---------------------------------------------------------------------


def launchy(kernel_us):
    rows = [OpRow("aten::add", 500, 4000.0, 5000.0, 500 * kernel_us, 500 * kernel_us)]
    kernels = [KernelRow("vectorized_elementwise_kernel", 500, 500 * kernel_us, "aten::add")]
    return gpu(rows, kernels)


def test_launch_bound_triggers_on_many_tiny_kernels():
    f = launch_bound(launchy(kernel_us=2.0))
    assert f is not None
    assert "busy 10% of each iteration" in f.evidence
    assert "50 kernels with a median of 2.00 µs" in f.evidence
    assert "reduce-overhead" in f.suggestion


def test_launch_bound_not_when_kernels_are_long_or_gpu_busy():
    assert launch_bound(launchy(kernel_us=15.0)) is None  # busy 75%
    assert launch_bound(cpu_result()) is None


# --- synchronisation ------------------------------------------------------------------


def test_sync_points_on_item_and_dtoh_copies():
    rows = [OpRow("aten::mm", 10, 100.0, 100.0, 5000.0, 5000.0),
            OpRow("aten::item", 30, 60.0, 900.0),
            OpRow("aten::_local_scalar_dense", 30, 840.0, 840.0)]
    kernels = [KernelRow("Memcpy DtoH (Device -> Pageable)", 30, 60.0, "aten::_local_scalar_dense")]
    f = sync_points(gpu(rows, kernels))
    assert f is not None
    assert "aten::item ×3 (reads a value to Python)" in f.evidence
    assert "Memcpy DtoH (Device -> Pageable) ×3" in f.evidence
    assert ".item()" in f.suggestion


def test_sync_points_not_without_syncs_or_on_cpu():
    rows = [OpRow("aten::mm", 10, 100.0, 100.0, 5000.0, 5000.0)]
    assert sync_points(gpu(rows)) is None
    assert sync_points(cpu_result(rows=[OpRow("aten::item", 10, 5.0, 5.0)])) is None


# --- float32 matmuls ------------------------------------------------------------------


def fp32(kernel="ampere_sgemm_128x64_tn", precision="highest"):
    rows = [OpRow("aten::mm", 10, 100.0, 100.0, 8000.0, 8000.0),
            OpRow("aten::add", 10, 100.0, 100.0, 2000.0, 2000.0)]
    return gpu(rows, [KernelRow(kernel, 10, 8000.0, "aten::mm")], precision=precision)


def test_fp32_matmul_triggers_on_sgemm_at_highest_precision():
    f = fp32_matmul(fp32())
    assert f is not None
    assert f.evidence.startswith("matmuls take 80% of device time")
    assert 'set_float32_matmul_precision("high")' in f.suggestion


def test_fp32_matmul_not_with_tf32_or_bf16():
    assert fp32_matmul(fp32(precision="high")) is None
    assert fp32_matmul(fp32(kernel="sm90_xmma_gemm_bf16bf16_bf16f32")) is None
    assert fp32_matmul(fp32(kernel="ampere_tf32_s1688gemm_tf32_128x128")) is None


# --- fusable elementwise ops ----------------------------------------------------------


def test_fusable_elementwise_on_a_real_cell_of_small_ops():
    a, half = torch.randn(32), torch.full((32,), 0.5)

    def small_ops():
        x = a
        for _ in range(250):
            x = x.add(a).mul(half)  # tensor operands: no scalar-to-tensor copies
        return x

    # 1500 calls of a few µs: their mean stays under ELEMENTWISE_AVG_US (50 µs) unless the
    # profiled iterations stall for 75 ms in all, far beyond a loaded machine's scheduler
    # stalls (with 40 calls a call, one 6 ms stall was enough to hide the finding).
    result = kernelmagic.profile(small_ops, iters=3, warmup=1)
    assert {r.key: r.count for r in result.rows} == {"aten::add": 750, "aten::mul": 750}
    f = fusable_elementwise(result)
    assert f is not None
    assert f.evidence.startswith("500 elementwise calls per iteration averaging ")
    assert f.evidence.endswith(" take 100% of self time")
    assert "torch.compile" in f.suggestion


def test_fusable_elementwise_not_on_the_block():
    from workloads import block_and_input

    block, x = block_and_input(batch=1, seq=64)
    with torch.inference_mode():
        result = kernelmagic.profile(lambda: block(x), iters=2, warmup=1)
    assert fusable_elementwise(result) is None


# --- slow warm-up ---------------------------------------------------------------------


def test_slow_warmup_on_a_real_first_call_cost():
    state = {"first": True}

    def cached():
        if state["first"]:
            # Stands in for compilation on the first call; the rule needs 5x the steady
            # median, so this holds unless two of three tiny iterations stall for 100 ms.
            time.sleep(0.5)
            state["first"] = False
        torch.ones(8).add(1)

    result = kernelmagic.profile(cached, iters=3, warmup=2)
    f = slow_warmup(result)
    assert f is not None
    first, steady = result.warmup_timings[0], result.stats.median
    assert first >= 0.5  # time.sleep sleeps at least that long
    # The figures are the run's own (a loaded machine may stretch the sleep).
    assert f.evidence.startswith(f"first warm-up run {format_seconds(first)} vs "
                                 f"{format_seconds(steady)} per profiled iteration "
                                 f"({first / steady:.0f}x): ")


def test_slow_warmup_not_when_steady_or_without_warmup():
    assert slow_warmup(cpu_result(warmup_timings=[0.0012, 0.001])) is None
    assert slow_warmup(cpu_result(warmup_timings=[])) is None


# --- noise ----------------------------------------------------------------------------


def test_noisy_triggers_on_wide_spread():
    f = noisy(cpu_result(timings=[0.001, 0.002, 0.001, 0.003, 0.0015]))
    assert f is not None
    assert "--iters 50" in f.suggestion
    assert f.evidence == "the middle half of the 5 iterations spans 67% of the median (IQR 1.00 ms)"


def test_noisy_not_on_steady_runs():
    assert noisy(cpu_result()) is None  # IQR 7.5% of the median
    assert noisy(cpu_result(timings=[0.001])) is None


# --- together -------------------------------------------------------------------------


def test_find_runs_every_rule_biggest_share_first():
    assert rules(cpu_result()) == ["dominant_op"]
    # Launch-bound explains 400 of the 1000 µs iteration (the CPU's), the add's 100 µs the
    # other two; equal shares keep the order of RULES.
    found = launchy(2.0).findings()
    assert [(f.rule, f.share) for f in found] == [
        ("launch_bound", pytest.approx(0.4)), ("dominant_op", pytest.approx(0.1)),
        ("fusable_elementwise", pytest.approx(0.1))]


ALL_RULES = findings.RULES + findings.ROOFLINE_RULES + findings.COUNTER_RULES


def _rules_defined_in_findings() -> set:
    """Every function of a ``kernelmagic/findings/`` module that is a rule of a
    ``ProfileResult`` by its signature: one parameter, the result, and a ``Finding`` or
    None back (ranks' rules take a ``RankSummary`` and have their own list)."""
    package = Path(findings.__file__).parent
    found = set()
    for path in package.glob("*.py"):
        module = importlib.import_module(f"kernelmagic.findings.{path.stem}")
        for name, fn in vars(module).items():
            if not inspect.isfunction(fn) or fn.__module__ != module.__name__ \
                    or name.startswith("_"):
                continue
            params = list(inspect.signature(fn).parameters.values())
            annotations = fn.__annotations__
            if (len(params) == 1 and annotations.get(params[0].name) == "ProfileResult"
                    and annotations.get("return") == "Finding | None"):
                found.add(fn)
    return found


def test_every_rule_is_in_a_list_that_find_runs():
    defined = _rules_defined_in_findings()
    # The scan finds rules of each list (so an empty difference below means something).
    assert {findings.dominant_op, memory_bound, poor_reuse} <= defined
    assert len(ALL_RULES) == len(set(ALL_RULES))  # none listed twice
    assert set(ALL_RULES) == defined


@pytest.mark.parametrize("rule", ALL_RULES)
@pytest.mark.parametrize("empty", ["cpu", "gpu"])
def test_every_rule_is_silent_on_an_empty_profile(rule, empty):
    # No rows, and the roofline and counters asked for but empty: nothing to find.
    views = ["roofline", "counters"]
    result = (cpu_result(rows=[], views=views) if empty == "cpu" else
              dataclasses.replace(gpu([]), views=views))
    assert rule(result) is None
