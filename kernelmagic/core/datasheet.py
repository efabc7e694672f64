"""Datasheet figures of common GPUs: peak FLOP/s per dtype and memory bandwidth.

Pure data, no torch: ``--roofline`` takes its GPU roofs from here
(``kernelmagic/live/device_peaks.py``), and a trace's device (named in its
``deviceProperties``) is looked up here too, so the advice on a trace knows its GPU's
figures (``kernelmagic/core/machine.py``).
"""

from __future__ import annotations

T = 1e12  # TFLOP/s
TB = 1e12  # TB/s (datasheets use decimal units)

#: Datasheet peaks of common GPUs: dense (no structured sparsity) FLOP/s for float32
#: (CUDA cores, no TF32), bfloat16 and float16 (tensor cores, FP32 accumulate), and
#: memory bandwidth. The first pattern found in the device name wins, so longer names
#: come first. GPUs without native bf16 (T4, V100) get their float32 figure for it.
DATASHEET: list[tuple[str, str, dict[str, float], float]] = [
    # (pattern in the device name, label, flops_per_s per dtype, bytes_per_s)
    # NVIDIA GH200 datasheet: FP32 67 TF, BF16/FP16 1,979 TF sparse, 4 TB/s (HBM3)
    ("GH200", "GH200", {"float32": 67 * T, "bfloat16": 989 * T, "float16": 989 * T}, 4.0 * TB),
    # NVIDIA H200 datasheet, NVL: FP32 60 TF, BF16/FP16 1,671 TF sparse, 4.8 TB/s
    ("H200 NVL", "H200 NVL", {"float32": 60 * T, "bfloat16": 835 * T, "float16": 835 * T},
     4.8 * TB),
    # NVIDIA H200 datasheet (SXM): FP32 67 TF, BF16/FP16 1,979 TF with sparsity, 4.8 TB/s.
    # Measured on an H200 (torch 2.11+cu130, tools/gpu_capture.py): 8192^3 matmul
    # float32 51.2 TFLOP/s (TF32 off), bfloat16 789, float16 760; copy of 1 GiB 4.26 TB/s
    # (read + write): 76-89% of these figures, as expected of dense library kernels.
    ("H200", "H200", {"float32": 67 * T, "bfloat16": 989 * T, "float16": 989 * T}, 4.8 * TB),
    # NVIDIA H100 datasheet, PCIe: FP32 51 TF, BF16/FP16 1,513 TF sparse, 2.0 TB/s
    ("H100 PCIe", "H100 PCIe",
     {"float32": 51 * T, "bfloat16": 756 * T, "float16": 756 * T}, 2.0 * TB),
    # NVIDIA H100 datasheet, NVL: FP32 60 TF, BF16/FP16 1,671 TF sparse, 3.9 TB/s
    ("H100 NVL", "H100 NVL",
     {"float32": 60 * T, "bfloat16": 835 * T, "float16": 835 * T}, 3.9 * TB),
    # NVIDIA H100 datasheet, SXM: FP32 67 TF, BF16/FP16 1,979 TF sparse, 3.35 TB/s
    ("H100", "H100 SXM", {"float32": 67 * T, "bfloat16": 989 * T, "float16": 989 * T},
     3.35 * TB),
    # NVIDIA A100 datasheet: FP32 19.5 TF, BF16/FP16 312 TF; 80 GB SXM 2,039 GB/s,
    # 80 GB PCIe 1,935 GB/s, 40 GB 1,555 GB/s
    ("A100-SXM4-80GB", "A100 80GB SXM",
     {"float32": 19.5 * T, "bfloat16": 312 * T, "float16": 312 * T}, 2.039 * TB),
    ("A100 80GB PCIe", "A100 80GB PCIe",
     {"float32": 19.5 * T, "bfloat16": 312 * T, "float16": 312 * T}, 1.935 * TB),
    ("A100", "A100 40GB", {"float32": 19.5 * T, "bfloat16": 312 * T, "float16": 312 * T},
     1.555 * TB),
    # NVIDIA L40S datasheet: FP32 91.6 TF, BF16/FP16 733 TF sparse, 864 GB/s
    ("L40S", "L40S", {"float32": 91.6 * T, "bfloat16": 366 * T, "float16": 366 * T},
     0.864 * TB),
    # NVIDIA L40 datasheet: FP32 90.5 TF, BF16/FP16 362 TF sparse, 864 GB/s
    ("L40", "L40", {"float32": 90.5 * T, "bfloat16": 181 * T, "float16": 181 * T},
     0.864 * TB),
    # NVIDIA L4 datasheet: FP32 30.3 TF, BF16/FP16 242 TF sparse, 300 GB/s
    ("L4", "L4", {"float32": 30.3 * T, "bfloat16": 121 * T, "float16": 121 * T}, 0.300 * TB),
    # NVIDIA A10 datasheet: FP32 31.2 TF, BF16/FP16 250 TF sparse, 600 GB/s. (The A10G
    # has its own figures and no NVIDIA datasheet: it is measured instead.)
    ("A10G", "", {}, 0.0),
    ("A10", "A10", {"float32": 31.2 * T, "bfloat16": 125 * T, "float16": 125 * T},
     0.600 * TB),
    # NVIDIA T4 datasheet: FP32 8.1 TF, FP16 65 TF (tensor cores), 320 GB/s; no bf16
    ("T4", "T4", {"float32": 8.1 * T, "bfloat16": 8.1 * T, "float16": 65 * T}, 0.320 * TB),
    # NVIDIA V100 datasheet (SXM2): FP32 15.7 TF, tensor 125 TF, 900 GB/s; PCIe 14/112
    ("V100-SXM", "V100 SXM2",
     {"float32": 15.7 * T, "bfloat16": 15.7 * T, "float16": 125 * T}, 0.900 * TB),
    ("V100", "V100 PCIe", {"float32": 14 * T, "bfloat16": 14 * T, "float16": 112 * T},
     0.900 * TB),
    # NVIDIA Ada whitepaper, RTX 4090: FP32 82.6 TF, FP16/BF16 tensor (FP32 accumulate)
    # 165.2 TF, 1,008 GB/s
    ("RTX 4090", "RTX 4090",
     {"float32": 82.6 * T, "bfloat16": 165.2 * T, "float16": 165.2 * T}, 1.008 * TB),
    # NVIDIA Ampere GA102 whitepaper, RTX 3090: FP32 35.6 TF, FP16/BF16 tensor (FP32
    # accumulate) 71 TF, 936 GB/s
    ("RTX 3090", "RTX 3090",
     {"float32": 35.6 * T, "bfloat16": 71 * T, "float16": 71 * T}, 0.936 * TB),
    # NVIDIA RTX A6000 datasheet: FP32 38.7 TF, tensor 309.7 TF sparse (FP16), 768 GB/s
    ("RTX A6000", "RTX A6000",
     {"float32": 38.7 * T, "bfloat16": 154.8 * T, "float16": 154.8 * T}, 0.768 * TB),
]


def datasheet(device_name: str) -> tuple[str, dict[str, float], float] | None:
    """(label, flops_per_s, bytes_per_s) of the first table entry found in the name."""
    for pattern, label, flops, bandwidth in DATASHEET:
        if pattern in device_name:
            return (label, dict(flops), bandwidth) if label else None
    return None
