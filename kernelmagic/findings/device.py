"""Advice that fits the device: which lower precision to try, if any (``precision``), and
float32 convolutions holding a GPU's time (``fp32_conv``).

The device is the result's ``device_info`` (``kernelmagic/core/machine.py``): its family
and its own peaks per dtype. A lower precision is suggested only where the device runs it
faster than float32 by those figures (a CPU without native bfloat16 runs it many times
slower; a V100 has no bfloat16 Tensor Cores), and named as the device supports it:
float16 autocast on Volta and Turing, bfloat16 (or TF32) on Ampere and later, nothing
about Tensor Cores on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelmagic.core.machine import AMPERE, CPU, GPU, PRE_VOLTA, TURING, VOLTA, DeviceInfo
from kernelmagic.core.op_names import CONV_OPS, is_fp32_conv
from kernelmagic.core.units import format_us, percent, ratio_range, si
from kernelmagic.findings.base import Finding, of_wall
from kernelmagic.results.result import ProfileResult

CONV_SHARE = 0.3  # convolutions' share of device time worth a precision and layout hint
FP32_CONV_SHARE = 0.5  # float32 kernels' share of the convolutions' kernel time

TF32 = 'TF32: torch.set_float32_matmul_precision("high")'
#: A CPU whose figures are unknown (a trace, a result saved before ``device_info``).
UNKNOWN_CPU = ("lower precision only where the CPU runs it faster (native bfloat16: AMX, "
               "AVX512-BF16; kernelmagic.peaks() measures it)")


@dataclass(frozen=True)
class Precision:
    """The lower precision to try on this device: ``call`` (the autocast to write, ""
    when none is faster) and ``note`` (why this one, or why none, with the figures)."""

    dtype: str
    call: str
    note: str
    slower: bool = False  # the device's own figures say it runs this dtype no faster

    @property
    def variant(self) -> str:
        """The ``--try`` variant of this precision (``bf16``, ``fp16``)."""
        return {"bfloat16": "bf16", "float16": "fp16"}.get(self.dtype, "")

    @property
    def variants(self) -> tuple[str, ...]:
        """What the advice suggests trying: the precision unless the device runs it no
        faster (where it is unknown, measuring it is the way to know)."""
        return (self.variant,) if self.variant and not self.slower else ()

    @property
    def against(self) -> tuple[str, ...]:
        """What the advice says not to use: the precision this device runs no faster."""
        return (self.variant,) if self.variant and self.slower else ()


def _autocast(device: str, dtype: str) -> str:
    return f'torch.autocast("{device}", dtype=torch.{dtype})'


def _rates(info: DeviceInfo, dtype: str) -> str:
    """``3.52 GFLOP/s against 135 GFLOP/s in float32`` from the device's figures."""
    flops = info.flops_per_s
    if not flops.get(dtype) or not flops.get("float32"):
        return ""
    return f"{si(flops[dtype], 'FLOP/s')} against {si(flops['float32'], 'FLOP/s')} in float32"


def _wanted(info: DeviceInfo) -> str:
    """The lower precision the device's family runs on its fast units."""
    if info.family in (VOLTA, TURING):
        return "float16"
    if info.family in (CPU, AMPERE):
        return "bfloat16"
    return "bfloat16" if info.faster("bfloat16") else "float16"


def precision(result: ProfileResult) -> Precision:
    """What lower precision to suggest for ``result``'s device, if any."""
    info = result.device_info
    if info is None or info.family == GPU:  # saved before the device was recorded; unknown
        if result.profiles_device:
            return Precision("bfloat16", _autocast("cuda", "bfloat16")
                             + " (float16 on Volta/Turing)", "")
        return Precision("bfloat16", "", UNKNOWN_CPU)
    if info.family == PRE_VOLTA:
        return Precision("float16", "", f"this GPU (compute capability {info.capability}) has no "
                         "Tensor Cores: a lower precision does not make its matmuls faster",
                         slower=True)
    dtype = _wanted(info)
    faster = info.faster(dtype)
    rates = _rates(info, dtype)
    where = "this CPU" if info.family == CPU else "this GPU"
    if faster is False:
        return Precision(dtype, "", f"not {dtype}: {where} runs it "
                         + (f"at {rates}" if rates else "no faster than float32"), slower=True)
    if faster is None and info.family == CPU:
        interval = info.speedup_interval.get(dtype)
        if interval and rates:  # measured, but the difference is within its noise
            return Precision(dtype, "", f"this CPU runs {dtype} at {rates}, within the "
                             f"measurement's noise (95% interval "
                             f"{ratio_range(*interval)} float32's rate): --try "
                             f"{Precision(dtype, '', '').variant} measures it on this code")
        return Precision(dtype, "", UNKNOWN_CPU)
    device = "cpu" if info.family == CPU else "cuda"
    note = f"{where} runs {dtype} at {rates}" if rates else ""
    if info.family in (VOLTA, TURING):
        note = ("Volta and Turing Tensor Cores take float16, not bfloat16; with "
                "torch.amp.GradScaler when training")
    return Precision(dtype, _autocast(device, dtype), note)


def cheaper_matmuls(result: ProfileResult) -> str:
    """The advice for matmuls that dominate: the device's faster precision, else fewer,
    larger ones and why not a lower precision."""
    p = precision(result)
    if not p.call:
        tail = f"; {p.note}" if p.note else ""
        return f"make the matmuls cheaper: fewer, larger ones (batch them){tail}"
    extra = f"; {TF32}" if result.device_info and result.device_info.family == AMPERE else ""
    why = f" ({p.note})" if p.note else ""
    return (f"make the matmuls cheaper: lower precision, {p.call}{why}{extra}, "
            "or fewer/larger ones")


def fewer_bytes(result: ProfileResult) -> str:
    """Lower precision for memory-bound work, as the device supports it: its dtype halves
    the bytes; where its matmuls run slower in it, the advice says to keep them out."""
    p = precision(result)
    dtype = p.dtype or "bfloat16"
    if p.call or not p.note:
        return f"use lower precision ({dtype} halves the bytes)"
    return (f"store the memory-bound tensors in a smaller dtype ({dtype} halves the bytes), "
            f"keeping matmuls in float32 ({p.note})")


def fp32_conv(result: ProfileResult) -> Finding | None:
    """Convolutions (forward and backward) hold ``CONV_SHARE`` of a GPU's time, mostly in
    float32 kernels: the device's lower precision, ``channels_last`` and cuDNN's
    benchmark mode, like the float32-matmul finding."""
    if not result.profiles_device or result.self_device_time_total <= 0:
        return None
    convs = [r for r in result.op_totals if r.key in CONV_OPS]
    conv_time = sum(r.self_device_time_total for r in convs)
    share = conv_time / result.self_device_time_total
    kernels = [k for k in result.kernels if k.launched_by in CONV_OPS]
    fp32 = sorted((k for k in kernels if is_fp32_conv(k.key)), key=lambda k: -k.device_time_total)
    in_kernels = sum(k.device_time_total for k in kernels)
    if share < CONV_SHARE or not fp32 or in_kernels <= 0:
        return None
    if sum(k.device_time_total for k in fp32) / in_kernels < FP32_CONV_SHARE:
        return None
    per_iter = conv_time / result.iters
    example = fp32[0].key.split("(")[0]  # a C++ signature's name, without its arguments
    p = precision(result)
    tries = []
    if p.call:
        tries.append(f"{p.call} ({p.note})" if p.note else p.call)
        tries.append("channels_last (model.to(memory_format=torch.channels_last) and the "
                     "inputs), the layout Tensor Cores read")
    tries.append("torch.backends.cudnn.benchmark = True (fixed input shapes) to pick the "
                 "fastest algorithm")
    if not p.call and p.note:
        tries.append(p.note)
    return Finding(
        "fp32_conv", "Float32 convolutions take most of the GPU's time",
        f"convolutions and their backward take {percent(share)} of device time "
        f"({format_us(per_iter)} per iteration) in float32 kernels such as {example}",
        "; ".join(tries), of_wall(result, per_iter), variants=p.variants, against=p.against)
