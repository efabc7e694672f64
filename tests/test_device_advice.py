"""Advice that fits the device (#28): a lower precision only where the device's own figures
say it is faster, named as each family supports it, and float32 convolutions on a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import cpu_result
from loaded import loaded

import kernelmagic
from kernelmagic import findings
from kernelmagic.core.machine import DeviceInfo, gpu_info
from kernelmagic.core.rows import KernelRow, OpRow
from kernelmagic.results.result import ProfileResult

DATA = Path(__file__).parent / "data"
G = 1e9

#: The issue's CPU: --roofline measured float32 at 135 GFLOP/s and bfloat16 at 3.52.
SLOW_BF16 = DeviceInfo(kind="cpu", flops_per_s={"float32": 135 * G, "bfloat16": 3.52 * G,
                                                "float16": 2.0 * G}, peaks_source="measured")
#: A CPU with native bfloat16 (AMX): three times float32.
FAST_BF16 = DeviceInfo(kind="cpu", flops_per_s={"float32": 100 * G, "bfloat16": 300 * G,
                                                "float16": 2.0 * G}, peaks_source="measured")
V100 = gpu_info("cuda", "Tesla V100-SXM2-32GB", "7.0")
T4 = gpu_info("cuda", "Tesla T4", "7.5")
A100 = gpu_info("cuda", "NVIDIA A100-SXM4-80GB", "8.0")
P100 = gpu_info("cuda", "Tesla P100-PCIE-16GB", "6.0")
MI250 = DeviceInfo(kind="rocm", name="AMD Instinct MI250X", capability="9.0")


def matmul_cpu(info):
    """A CPU profile where aten::mm holds 90% of self time."""
    rows = [OpRow("aten::mm", 10, 9000.0, 9000.0), OpRow("aten::add", 10, 1000.0, 1000.0)]
    return cpu_result(rows=rows, timings=[0.001] * 10, device_info=info)


def gpu(info, rows, kernels, precision="highest"):
    return ProfileResult(name="g", iters=10, warmup=1, device="cuda", rows=list(rows),
                         timings=[0.001] * 10, sort="self_device", device_name=info.name,
                         kernels=list(kernels), matmul_precision=precision, device_info=info,
                         gpu_runtime="rocm" if info.kind == "rocm" else "cuda")


def conv_gpu(info, kernel="volta_scudnn_128x64_relu_interior_nn_v1"):
    """Convolutions hold 600 of 1000 µs of device time, in ``kernel``."""
    rows = [OpRow("aten::cudnn_convolution", 10, 100.0, 100.0, 3000.0, 3000.0),
            OpRow("aten::convolution_backward", 10, 100.0, 100.0, 3000.0, 3000.0),
            OpRow("aten::add_", 10, 100.0, 100.0, 4000.0, 4000.0)]
    kernels = [KernelRow(kernel, 10, 3000.0, "aten::cudnn_convolution"),
               KernelRow("volta_sgemm_64x64_nt", 10, 3000.0, "aten::convolution_backward"),
               KernelRow("elementwise_kernel", 10, 4000.0, "aten::add_")]
    return gpu(info, rows, kernels)


def matmul_gpu(info):
    rows = [OpRow("aten::mm", 10, 100.0, 100.0, 8000.0, 8000.0),
            OpRow("aten::add", 10, 100.0, 100.0, 2000.0, 2000.0)]
    return gpu(info, rows, [KernelRow("volta_sgemm_128x64_nn", 10, 8000.0, "aten::mm")])


# --- the family each device belongs to --------------------------------------------------


def test_families_and_what_each_runs_faster():
    assert [d.family for d in (SLOW_BF16, V100, T4, A100, P100, MI250)] == \
        ["cpu", "volta", "turing", "ampere+", "pre-volta", "rocm"]
    # By the figures: 3.52 < 135 GFLOP/s; the V100's datasheet bf16 is its fp32 (15.7 TF).
    assert SLOW_BF16.faster("bfloat16") is False and FAST_BF16.faster("bfloat16") is True
    assert V100.faster("bfloat16") is False and V100.faster("float16") is True
    assert V100.speedup("float16") == pytest.approx(125 / 15.7)
    assert A100.faster("bfloat16") is True and P100.faster("float16") is False
    assert DeviceInfo(kind="cpu").faster("bfloat16") is None  # a CPU trace: unknown


# --- CPU --------------------------------------------------------------------------------


def test_cpu_without_fast_bfloat16_is_not_told_to_use_it():
    f = findings.dominant_op(matmul_cpu(SLOW_BF16))
    assert f is not None and "autocast" not in f.suggestion
    assert "not bfloat16: this CPU runs it at 3.52 GFLOP/s against 135 GFLOP/s in float32" \
        in f.suggestion
    assert "Tensor" not in f.suggestion


def test_cpu_with_fast_bfloat16_is_told_to_use_it():
    f = findings.dominant_op(matmul_cpu(FAST_BF16))
    assert 'torch.autocast("cpu", dtype=torch.bfloat16)' in f.suggestion
    assert "300 GFLOP/s against 100 GFLOP/s in float32" in f.suggestion
    assert "Tensor" not in f.suggestion and "TF32" not in f.suggestion


def test_cpu_of_unknown_figures_gets_a_condition_not_an_order():
    f = findings.dominant_op(matmul_cpu(DeviceInfo(kind="cpu")))
    assert "autocast" not in f.suggestion and "only where the CPU runs it faster" in f.suggestion


def test_a_live_cpu_run_records_its_device_and_figures():
    import torch

    a = torch.randn(256, 256)
    result = kernelmagic.profile(lambda: a @ a, iters=2, warmup=1)
    info = result.device_info
    assert info is not None and info.family == "cpu"
    # the quick check measures these two; --roofline's roofs, once measured in this
    # process (tests/test_roofline.py), add float16
    assert {"float32", "bfloat16"} <= set(info.flops_per_s) <= {"float32", "bfloat16",
                                                                 "float16"}
    assert all(v > 0 for v in info.flops_per_s.values())
    assert ProfileResult.from_dict(result.to_dict()).device_info == info


# --- Volta and Turing: float16 -----------------------------------------------------------


@pytest.mark.parametrize("info", [V100, T4], ids=["volta", "turing"])
def test_volta_and_turing_get_float16_autocast(info):
    conv = findings.fp32_conv(conv_gpu(info))
    assert conv is not None and conv.share == pytest.approx(0.6)  # 600 µs of a 1 ms iteration
    assert 'torch.autocast("cuda", dtype=torch.float16)' in conv.suggestion
    assert "channels_last" in conv.suggestion and "cudnn.benchmark = True" in conv.suggestion
    assert "dtype=torch.bfloat16" not in conv.suggestion
    mm = findings.fp32_matmul(matmul_gpu(info))
    assert mm is not None and 'dtype=torch.float16' in mm.suggestion
    assert "TF32" not in mm.suggestion and "dtype=torch.bfloat16" not in mm.suggestion


def test_fp32_conv_evidence_and_threshold():
    f = findings.fp32_conv(conv_gpu(V100))
    assert f.evidence == ("convolutions and their backward take 60% of device time (600 µs "
                          "per iteration) in float32 kernels such as "
                          "volta_scudnn_128x64_relu_interior_nn_v1")
    # Tensor-core (half) kernels: not float32.
    half = conv_gpu(V100, kernel="volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small")
    assert findings.fp32_conv(half) is not None  # the backward's sgemm still holds half
    rows = [OpRow("aten::cudnn_convolution", 10, 100.0, 100.0, 2900.0, 2900.0),
            OpRow("aten::add_", 10, 100.0, 100.0, 7100.0, 7100.0)]
    below = gpu(V100, rows, [KernelRow("volta_scudnn_128x64", 10, 2900.0,
                                       "aten::cudnn_convolution")])
    assert findings.fp32_conv(below) is None  # 29% of device time: under CONV_SHARE
    assert findings.fp32_conv(matmul_cpu(FAST_BF16)) is None  # a CPU


def test_v100_trace_leads_with_its_float32_convolutions():
    result = loaded(DATA / "v100_gpu_annotations.json.gz")
    assert result.device_info.family == "volta" and result.device_info.capability == "7.0"
    f = result.findings()[0]
    assert f.rule == "fp32_conv"
    assert f.suggestion.startswith('torch.autocast("cuda", dtype=torch.float16)')
    assert "bfloat16 (" not in f.suggestion


# --- Ampere and later: bfloat16 or TF32 ----------------------------------------------------


def test_ampere_gets_bfloat16_or_tf32():
    mm = findings.fp32_matmul(matmul_gpu(A100))
    assert mm.suggestion == ('TF32: torch.set_float32_matmul_precision("high"), or '
                             'torch.autocast("cuda", dtype=torch.bfloat16)')
    conv = findings.fp32_conv(conv_gpu(A100, kernel="sm80_xmma_fprop_implicit_gemm_f32f32_f32"))
    assert 'torch.autocast("cuda", dtype=torch.bfloat16)' in conv.suggestion
    # cuDNN's TF32 kernels (its default on Ampere) already use the Tensor Cores: silent.
    tf32 = conv_gpu(A100, kernel="sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32")
    tf32.kernels[1] = KernelRow("sm80_xmma_dgrad_tf32f32", 10, 3000.0,
                                "aten::convolution_backward")
    assert findings.fp32_conv(tf32) is None
    dominant = findings.dominant_op(matmul_gpu(A100))
    assert "dtype=torch.bfloat16" in dominant.suggestion and "TF32" in dominant.suggestion


def test_a_gpu_without_tensor_cores_is_not_told_to_lower_precision():
    assert findings.fp32_matmul(matmul_gpu(P100)) is None
    dominant = findings.dominant_op(matmul_gpu(P100))
    assert "autocast" not in dominant.suggestion and "no Tensor Cores" in dominant.suggestion
    conv = findings.fp32_conv(conv_gpu(P100))
    assert "autocast" not in conv.suggestion and "channels_last" not in conv.suggestion


# --- ROCm ----------------------------------------------------------------------------------


def test_rocm_gets_bfloat16_on_mi200_and_float16_before():
    conv = findings.fp32_conv(conv_gpu(MI250))
    assert 'torch.autocast("cuda", dtype=torch.bfloat16)' in conv.suggestion
    older = DeviceInfo(kind="rocm", name="AMD Radeon VII", capability="8.0")
    assert 'dtype=torch.float16' in findings.fp32_conv(conv_gpu(older)).suggestion
    trace = loaded(DATA / "mi250_rocm.json.gz")
    assert trace.device_info.kind == "rocm" and trace.device_info.family == "rocm"


# --- memory-bound work: fewer bytes, in the device's dtype ------------------------------------


def memory_bound(info, device="cpu"):
    from kernelmagic.core.rows import RooflineRow

    row = RooflineRow(key="aten::add", count=10, flops=1e6, bytes=1e7, intensity=0.1,
                      flops_per_s=1e9, bytes_per_s=1e10, bound="memory", time=9000.0,
                      dtype="float32", roof_share=0.5)
    peaks = {"flops_per_s": dict(info.flops_per_s), "bytes_per_s": 2e10, "source": "test"}
    return ProfileResult(name="m", iters=10, warmup=1, device=device, rows=[],
                         timings=[0.001] * 10, roofline=[row], roofline_peaks=peaks,
                         views=["roofline"], device_info=info)


def test_memory_bound_names_the_devices_dtype_and_keeps_slow_matmuls_out():
    from kernelmagic.findings import roofline

    fast = roofline.memory_bound(memory_bound(FAST_BF16))
    assert fast.suggestion.endswith("and use lower precision (bfloat16 halves the bytes)")
    slow = roofline.memory_bound(memory_bound(SLOW_BF16))
    assert slow.suggestion.endswith(
        "and store the memory-bound tensors in a smaller dtype (bfloat16 halves the bytes), "
        "keeping matmuls in float32 (not bfloat16: this CPU runs it at 3.52 GFLOP/s against "
        "135 GFLOP/s in float32)")
    volta = roofline.memory_bound(memory_bound(V100, device="cuda"))
    assert volta.suggestion.endswith("(float16 halves the bytes)")
