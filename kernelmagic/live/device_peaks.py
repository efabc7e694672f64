"""The device's roofs: peak FLOP/s per dtype and peak memory bandwidth (``--roofline``).

On CPU the peaks are measured once per process by a short microbenchmark (a matmul per
dtype, a large copy; well under a second) and cached. On CUDA they come from the
datasheet table below, keyed by substrings of ``torch.cuda.get_device_name()``, and are
checked by a short measurement; a GPU the table does not know is measured like a CPU.
``set_peaks`` overrides either.

torch is imported inside the functions, so importing this module is cheap.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kernelmagic.core.roofline_bounds import Peaks

#: The dtypes a compute roof is kept for; ops in other dtypes use the float32 roof.
DTYPES = ("float32", "bfloat16", "float16")

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

#: A datasheet figure is doubted when the short measurement reaches less than this
#: share of it (a power-capped board, a MIG slice, a mismatched table entry).
DOUBT_BELOW = 0.25

BUDGET_S = 0.15  # seconds per dtype's matmuls, and for the copy
REPS = 20  # timings per size at most (the best counts)
COPY_BYTES = {"cpu": 64 * 2**20, "cuda": 512 * 2**20}  # beyond the caches (H200 L2: 50 MB)


_cache: dict[str, Peaks] = {}
_overrides: dict[str, dict[str, Any]] = {}


def datasheet(device_name: str) -> tuple[str, dict[str, float], float] | None:
    """(label, flops_per_s, bytes_per_s) of the first table entry found in the name."""
    for pattern, label, flops, bandwidth in DATASHEET:
        if pattern in device_name:
            return (label, dict(flops), bandwidth) if label else None
    return None


def peaks(device: str | None = None) -> Peaks:
    """The peaks of ``device`` (``"cpu"`` or ``"cuda"``; default: CUDA when available).

    Measured or looked up once per process, then cached; ``set_peaks`` overrides.
    """
    import torch

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = "cuda" if device.startswith("cuda") else device
    if device not in _cache:
        _cache[device] = _cuda_peaks() if device == "cuda" else _measured("cpu")
    found = _cache[device]
    override = _overrides.get(device)
    if not override:
        return found
    flops = dict(found.flops_per_s)
    given = override.get("flops_per_s")
    if isinstance(given, dict):
        flops.update({str(k): float(v) for k, v in given.items()})
    elif given is not None:
        flops = {dt: float(given) for dt in DTYPES}
    bandwidth = override.get("bytes_per_s")
    return replace(found, flops_per_s=flops,
                   bytes_per_s=found.bytes_per_s if bandwidth is None else float(bandwidth),
                   source="set_peaks")


def set_peaks(flops_per_s: float | dict[str, float] | None = None,
              bytes_per_s: float | None = None, device: str | None = None) -> None:
    """Override the roofs used by ``--roofline`` for ``device`` (default: the current one).

    ``flops_per_s`` is one figure for every dtype or a dict per dtype (others keep their
    measured/datasheet value). With no figures at all, the overrides are dropped and
    the cached measurement is forgotten (the next ``peaks()`` measures again).
    """
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = "cuda" if device.startswith("cuda") else device
    if flops_per_s is None and bytes_per_s is None:
        _overrides.pop(device, None)
        _cache.pop(device, None)
        return
    values = list(flops_per_s.values()) if isinstance(flops_per_s, dict) else [flops_per_s]
    for value in [*values, bytes_per_s]:
        if value is not None and (isinstance(value, bool) or not value > 0):
            raise ValueError(f"set_peaks: peaks must be positive numbers; got {value!r}")
    _overrides[device] = {"flops_per_s": flops_per_s, "bytes_per_s": bytes_per_s}


# --- measuring ---------------------------------------------------------------------------


def _measured(device: str) -> Peaks:
    measured = measure(device)
    flops = {dt: measured[dt] for dt in DTYPES}
    return Peaks(device=device, flops_per_s=flops, bytes_per_s=measured["bytes_per_s"],
                 source="measured", measured=measured)


def _cuda_peaks() -> Peaks:
    import torch

    name = torch.cuda.get_device_name()
    found = datasheet(name)
    if found is None:
        peaks_ = _measured("cuda")
        return replace(peaks_, note=f"{name} is not in kernelmagic's datasheet table: "
                                    "measured peaks")
    label, flops, bandwidth = found
    measured = measure("cuda")
    doubts = [f"{what} {measured[what] / sheet:.0%}" for what, sheet in
              [*((dt, flops[dt]) for dt in ("bfloat16",)), ("bytes_per_s", bandwidth)]
              if measured.get(what, 0.0) < DOUBT_BELOW * sheet]
    note = (f"measured well below the {label} datasheet ({', '.join(doubts)} of it): "
            "a power cap, a MIG slice or another GPU? kernelmagic.set_peaks(...) overrides"
            if doubts else "")
    # A roof is a ceiling: a measurement above the datasheet raises it.
    flops = {dt: max(v, measured.get(dt, 0.0)) for dt, v in flops.items()}
    bandwidth = max(bandwidth, measured.get("bytes_per_s", 0.0))
    return Peaks(device="cuda", flops_per_s=flops, bytes_per_s=bandwidth,
                 source=f"datasheet: {label}", measured=measured, note=note)


def measure(device: str = "cpu",
            clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Achieved FLOP/s of a matmul per dtype and bytes/s of a large copy, briefly.

    A peak is a best case, so each figure is the best of many short timings. On CPU the
    matmuls run on one thread and the rate is multiplied by ``torch.get_num_threads()``
    (a multi-threaded product on a busy machine stalls for whole scheduler slices). Each
    dtype's square matmul grows from 128 while the next size (8x the work) still fits
    its ``BUDGET_S`` (slow dtypes, like float16 on many CPUs, stop small), timed up to
    ``REPS`` times per size. The copy reads and writes ``COPY_BYTES[device]``.
    """
    import torch

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    def best_time(fn: Callable[[], Any], budget: float) -> float:
        fn()  # set-up: kernels picked or compiled, pages touched
        sync()
        best, start = float("inf"), clock()
        for _ in range(REPS):
            t0 = clock()
            fn()
            sync()
            best = min(best, clock() - t0)
            if clock() - start > budget:
                break
        return best

    out: dict[str, float] = {}
    max_n = 8192 if device == "cuda" else 1024
    threads = torch.get_num_threads()
    if device != "cuda":
        # One core, times the cores: a multi-threaded product on a busy machine stalls
        # at its barriers for whole scheduler slices, one thread does not.
        torch.set_num_threads(1)
    try:
        matmuls = _matmuls(device, max_n, best_time, clock)
    finally:
        torch.set_num_threads(threads)
    scale = 1 if device == "cuda" else threads
    out.update({dt: rate * scale for dt, rate in matmuls.items()})
    size = COPY_BYTES["cuda" if device == "cuda" else "cpu"]
    src = torch.empty(size // 4, device=device)
    dst = torch.empty_like(src)
    took = best_time(lambda: dst.copy_(src), BUDGET_S * 2 / 3)
    if device != "cuda" and threads > 1:  # the best of all threads and of one
        torch.set_num_threads(1)
        try:
            took = min(took, best_time(lambda: dst.copy_(src), BUDGET_S * 2 / 3))
        finally:
            torch.set_num_threads(threads)
    out["bytes_per_s"] = 2 * size / took if took > 0 else 0.0
    return out


def _matmuls(device: str, max_n: int, best_time: Callable[[Callable[[], Any], float], float],
             clock: Callable[[], float]) -> dict[str, float]:
    import torch

    out: dict[str, float] = {}
    with torch.inference_mode():
        for name in DTYPES:
            dtype = getattr(torch, name)
            n, best, start = 128, 0.0, clock()
            while True:
                a = torch.randn(n, n, device=device).to(dtype)
                b = torch.randn(n, n, device=device).to(dtype)
                left = BUDGET_S - (clock() - start)
                took = best_time(lambda a=a, b=b: torch.mm(a, b), left / 2)
                if took > 0:
                    best = max(best, 2 * n**3 / took)
                left = BUDGET_S - (clock() - start)
                if n >= max_n or 8 * took * 4 > left:
                    break
                n *= 2
            out[name] = best
    return out
