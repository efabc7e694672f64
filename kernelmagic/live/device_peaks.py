"""The device's roofs: peak FLOP/s per dtype and peak memory bandwidth (``--roofline``).

On CPU the peaks are measured once per process by a short microbenchmark (a matmul per
dtype, a large copy; well under a second) and cached. On CUDA they come from the
datasheet table (``kernelmagic/core/datasheet.py``), keyed by substrings of
``torch.cuda.get_device_name()``, and are checked by a short measurement; a GPU the
table does not know is measured like a CPU.
``set_peaks`` overrides either.

torch is imported inside the functions, so importing this module is cheap.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kernelmagic.core.datasheet import datasheet
from kernelmagic.core.machine import DeviceInfo, gpu_info
from kernelmagic.core.roofline_bounds import Peaks
from kernelmagic.core.timing import paired_speedup
from kernelmagic.core.units import percent
from kernelmagic.live import torch_threads

__all__ = ["DTYPES", "device_info", "measure", "peaks", "quick_rates", "set_peaks"]

#: The dtypes a compute roof is kept for; ops in other dtypes use the float32 roof.
DTYPES = ("float32", "bfloat16", "float16")

#: A datasheet figure is doubted when the short measurement reaches less than this
#: share of it (a power-capped board, a MIG slice, a mismatched table entry).
DOUBT_BELOW = 0.25

BUDGET_S = 0.15  # seconds per dtype's matmuls, and for the copy
REPS = 20  # timings per size at most (the best counts)
COPY_BYTES = {"cpu": 64 * 2**20, "cuda": 512 * 2**20}  # beyond the caches (H200 L2: 50 MB)


_cache: dict[str, Peaks] = {}
_overrides: dict[str, dict[str, Any]] = {}


def peaks(device: str | None = None) -> Peaks:
    """The peaks of ``device`` (``"cpu"`` or ``"cuda"``; default: CUDA when available).

    Measured or looked up once per process, then cached; ``set_peaks`` overrides.
    """
    device = _device_key(device)
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
    device = _device_key(device)
    if flops_per_s is None and bytes_per_s is None:
        _overrides.pop(device, None)
        _cache.pop(device, None)
        return
    values = list(flops_per_s.values()) if isinstance(flops_per_s, dict) else [flops_per_s]
    for value in [*values, bytes_per_s]:
        if value is not None and (isinstance(value, bool) or not value > 0):
            raise ValueError(f"set_peaks: peaks must be positive numbers; got {value!r}")
    _overrides[device] = {"flops_per_s": flops_per_s, "bytes_per_s": bytes_per_s}


def _device_key(device: str | None) -> str:
    """``"cuda"`` (any ``cuda:N``) or ``"cpu"``; None: CUDA when available."""
    if device is None:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return "cuda" if device.startswith("cuda") else device


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
        return replace(_measured("cuda"),
                       note=f"{name} is not in kernelmagic's datasheet table: measured peaks")
    label, flops, bandwidth = found
    measured = measure("cuda")
    doubts = [f"{what} {percent(measured[what] / sheet)}" for what, sheet in
              [("bfloat16", flops["bfloat16"]), ("bytes_per_s", bandwidth)]
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

    max_n = 8192 if device == "cuda" else 1024
    threads = torch.get_num_threads()
    # One core, times the cores: a multi-threaded product on a busy machine stalls at its
    # barriers for whole scheduler slices, one thread does not.
    with torch_threads(1) if device != "cuda" else contextlib.nullcontext():
        matmuls = _matmuls(device, max_n, best_time, clock)
    scale = 1 if device == "cuda" else threads
    out = {dt: rate * scale for dt, rate in matmuls.items()}
    size = COPY_BYTES["cuda" if device == "cuda" else "cpu"]
    src = torch.empty(size // 4, device=device)
    dst = torch.empty_like(src)
    took = best_time(lambda: dst.copy_(src), BUDGET_S * 2 / 3)
    if device != "cuda" and threads > 1:  # the best of all threads and of one
        with torch_threads(1):
            took = min(took, best_time(lambda: dst.copy_(src), BUDGET_S * 2 / 3))
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


# --- what the advice needs: the device's family and which dtypes it runs faster ----------

QUICK_N = 128  # the quick check's square matmul: small, so a slow dtype costs milliseconds
QUICK_REPS = 24  # interleaved rounds (the best of each dtype is its rate)
QUICK_DTYPES = ("float32", "bfloat16")  # what the CPU advice compares
_quick: dict[str, float] = {}
_quick_interval: dict[str, list[float]] = {}


def device_info(profiles_device: bool) -> DeviceInfo:
    """The profiled device for the findings' advice (``kernelmagic/core/machine.py``).

    A GPU: its name and compute capability, with the roofs already measured in this
    process (``--roofline``) or else its datasheet peaks. The CPU: the roofs when
    ``--roofline`` measured them (or ``set_peaks`` set them), else ``quick_rates``: a
    few one-thread 128x128 matmuls in float32 and bfloat16, once per process (tens of
    milliseconds at most), enough to
    tell a CPU with native bfloat16 (several times float32's rate) from one without (a
    small fraction of it).
    """
    import torch

    from kernelmagic.live.torch_compat import gpu_runtime

    if profiles_device:
        kind = gpu_runtime()
        if not torch.cuda.is_available():  # (a test standing in for a GPU run)
            return DeviceInfo(kind=kind)
        major, minor = torch.cuda.get_device_capability()
        info = gpu_info(kind, torch.cuda.get_device_name(), f"{major}.{minor}")
        if "cuda" in _cache or "cuda" in _overrides:
            known = peaks("cuda")
            info = replace(info, flops_per_s=dict(known.flops_per_s),
                           peaks_source=known.source)
        return info
    if "cpu" in _cache or "cpu" in _overrides:
        known = peaks("cpu")
        return DeviceInfo(kind="cpu", name=_cpu_name(), flops_per_s=dict(known.flops_per_s),
                          peaks_source=known.source)
    rates = quick_rates()
    return DeviceInfo(kind="cpu", name=_cpu_name(), flops_per_s=rates,
                      peaks_source="measured (quick check)",
                      speedup_interval=dict(_quick_interval))


def quick_rates(clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """One thread's FLOP/s per dtype of ``QUICK_DTYPES`` on the CPU, from the best of
    ``QUICK_REPS`` matmuls of ``QUICK_N`` squared (cached per process). One thread, so a
    busy machine's scheduler stalls do not reach it; only the dtypes' ratio is used.

    The dtypes are timed in interleaved rounds (one matmul of each per round, the order
    alternating), so the ratio of each round pairs them under the same load: the 95%
    interval of each dtype's rate over float32's (``core/timing.py: paired_speedup``) is
    kept for ``DeviceInfo.speedup_interval``, and the advice follows it only beyond the
    noise."""
    if _quick:
        return dict(_quick)
    import torch

    times: dict[str, list[float]] = {name: [] for name in QUICK_DTYPES}
    with torch_threads(1), torch.inference_mode():
        mats = {name: torch.randn(QUICK_N, QUICK_N).to(getattr(torch, name))
                for name in QUICK_DTYPES}
        for a in mats.values():
            torch.mm(a, a)  # set-up: the kernel picked, pages touched
        for r in range(QUICK_REPS):
            for name in (QUICK_DTYPES if r % 2 == 0 else QUICK_DTYPES[::-1]):
                a = mats[name]
                t0 = clock()
                torch.mm(a, a)
                times[name].append(clock() - t0)
    for name, taken in times.items():
        best = min(taken)
        _quick[name] = 2 * QUICK_N**3 / best if best > 0 else 0.0
        if name != "float32":
            speed = paired_speedup(times["float32"], times[name])  # name's over float32's
            _quick_interval[name] = [speed.low, speed.high]
    return dict(_quick)


@functools.cache
def _cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else ``platform.processor()``."""
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor()
