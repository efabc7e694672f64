"""The op, runtime-call and kernel names kernelmagic recognises, in one place (imports
nothing heavy).

The findings (``kernelmagic/findings/``) read a profile through these names: which calls
wait for the GPU, launch kernels or belong to start-up, which ops are matmuls, elementwise
or dropout; the trace reader (``trace_loader.py``) tells float32 matmul kernels
from their names (``is_fp32_gemm``). Thresholds stay with the rules that use them.
"""

from __future__ import annotations

import re

#: Ops and runtime calls that make the CPU wait for the GPU, with what each does.
SYNC_OPS = {
    "aten::item": "reads a value to Python",
    "aten::_local_scalar_dense": "copies a scalar to the host",
    "aten::nonzero": "needs the result size on the host",
    "cudaStreamSynchronize": "waits for a stream",
    "cudaDeviceSynchronize": "waits for the device",
    "cudaMemcpy": "synchronous copy",
}
#: Waits the CPU makes for the GPU, beyond ``SYNC_OPS`` (time only, for ``gpu_idle``).
WAIT_CALLS = frozenset({"cudaEventSynchronize", "hipDeviceSynchronize", "hipStreamSynchronize",
                        "hipEventSynchronize", "hipMemcpy"})
#: Runtime calls that block the CPU until GPU work ends (the dependency model's sync edges,
#: ``views/dependencies.py``): device, stream and event synchronisation, and the blocking
#: (not ``Async``) memcpy, CUDA and ROCm.
BLOCKING_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", "cuMemcpy",
    "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy",
})
#: Runtime calls that make one stream wait for work on another (an event recorded there).
STREAM_WAIT_CALLS = frozenset({"cudaStreamWaitEvent", "cuStreamWaitEvent",
                               "hipStreamWaitEvent"})
LAUNCH_CALLS = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchCooperativeKernel", "cuLaunchKernel",
    "cuLaunchKernelEx", "cudaGraphLaunch", "hipLaunchKernel", "hipExtLaunchKernel",
    "hipModuleLaunchKernel", "hipExtModuleLaunchKernel", "hipGraphLaunch",
})
#: Runtime calls that belong to start-up or to the caching allocator's growth.
SETUP_CALLS = frozenset({
    "cuInit", "cuDevicePrimaryCtxRetain", "cuCtxCreate", "cudaGetDeviceCount", "cudaSetDevice",
    "cudaGetDeviceProperties", "cudaGetDeviceProperties_v2", "cudaDeviceGetStreamPriorityRange",
    "cudaStreamCreate", "cudaStreamCreateWithFlags", "cudaStreamCreateWithPriority",
    "cudaFree", "cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "cudaFreeHost",
    "cuModuleLoadData", "cuModuleLoadDataEx", "cuLibraryLoadData",
    "hipInit", "hipGetDeviceCount", "hipSetDevice", "hipGetDeviceProperties",
    "hipDeviceGetStreamPriorityRange", "hipStreamCreate", "hipStreamCreateWithFlags",
    "hipStreamCreateWithPriority", "hipFree", "hipMalloc", "hipHostMalloc", "hipHostFree",
    "hipModuleLoadData", "hipModuleLoadDataEx",
})
#: The caching allocator's calls among ``SETUP_CALLS``.
ALLOCATOR_CALLS = frozenset({"cudaMalloc", "cudaMallocHost", "cudaHostAlloc", "hipMalloc",
                             "hipHostMalloc"})
_RUNTIME = re.compile(r"^(cuda|cu|hip)[A-Z]")
#: The range (and op) names of a ``DataLoader``'s iteration.
DATA_LOADER = "enumerate(DataLoader)"
DROPOUT_OPS = ("aten::dropout", "aten::feature_dropout", "aten::alpha_dropout",
               "aten::feature_alpha_dropout")
#: Ops that run only when dropout trains: the random mask (CPU) or the fused kernel (GPU).
DROPOUT_TRAINING = ("aten::bernoulli_", "aten::native_dropout", "aten::_fused_dropout")
#: Kernels of batch norm in training mode (batch statistics).
BATCH_NORM_TRAINING = re.compile(r"bn_fw_tr|BatchNormFwdTrain|batch_norm_collect_statistics")
MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
              "aten::linear", "aten::_scaled_mm", "aten::addbmm"}
ELEMENTWISE_OPS = {
    "aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::mul", "aten::mul_",
    "aten::div", "aten::div_", "aten::relu", "aten::relu_", "aten::gelu", "aten::silu",
    "aten::sigmoid", "aten::tanh", "aten::exp", "aten::log", "aten::pow", "aten::sqrt",
    "aten::rsqrt", "aten::neg", "aten::abs", "aten::where", "aten::clamp", "aten::clamp_min",
    "aten::maximum", "aten::minimum", "aten::addcmul", "aten::addcdiv", "aten::sin",
    "aten::cos", "aten::reciprocal", "aten::fill_", "aten::masked_fill",
}
#: A GEMM kernel's name that says float32 (``is_fp32_gemm``) ...
FP32_GEMM = re.compile(r"sgemm|f32f32_f32|gemm.*fp32", re.IGNORECASE)
#: ... unless it also says TF32 or a lower precision.
LOW_PRECISION = re.compile(r"tf32|bf16|f16|half|fp8|e4m3|e5m2", re.IGNORECASE)


#: Convolution ops and their backward (the ops that launch the convolution kernels).
CONV_OPS = frozenset({
    "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution",
    "aten::cudnn_convolution", "aten::cudnn_convolution_transpose", "aten::miopen_convolution",
    "aten::miopen_convolution_transpose", "aten::convolution_backward",
    "aten::cudnn_convolution_backward", "aten::miopen_convolution_backward",
    "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
    "aten::mkldnn_convolution", "aten::slow_conv2d_forward", "aten::_slow_conv2d_backward",
})
#: A convolution kernel's name that says float32: cuDNN's single-precision kernels
#: (``scudnn``, ``sgemm``, ``implicit_convolve_sgemm``, ``dgrad_engine<float, ...``) ...
FP32_CONV = re.compile(r"sgemm|scudnn|<float,|f32f32_f32|fp32", re.IGNORECASE)
#: ... unless it names a Tensor Core shape (``h884``, ``s1688``: half inputs).
TENSOR_CORE_SHAPE = re.compile(r"[hs](884|1688|16816)")


def is_fp32_conv(kernel: str) -> bool:
    """A float32 convolution kernel, not a TF32 or lower-precision one, by its name."""
    return (bool(FP32_CONV.search(kernel)) and not LOW_PRECISION.search(kernel)
            and not TENSOR_CORE_SHAPE.search(kernel))


def is_copy(name: str) -> bool:
    """Whether GPU work of this name is a copy or a fill (Kineto names them "Memcpy HtoD
    (Pageable -> Device)", "Memset (Device)"), not a kernel."""
    return name.startswith(("Memcpy", "Memset"))


def is_runtime_call(name: str) -> bool:
    """A CUDA or HIP runtime or driver call (``cudaMalloc``, ``cuInit``, ``hipFree``)."""
    return bool(_RUNTIME.match(name))


def is_fp32_gemm(kernel: str) -> bool:
    """A float32 matmul kernel, not a TF32 or lower-precision one, by its name."""
    return bool(FP32_GEMM.search(kernel)) and not LOW_PRECISION.search(kernel)

#: How dynamo names the ranges it opens while it compiles (``_compile.compile_inner
#: (dynamo_timed)``, ``OutputGraph.call_user_compiler (dynamo_timed)``: torch >= 2.1's
#: ``dynamo_timed``): a step holding one compiled in it.
COMPILE_MARK = " (dynamo_timed)"


def is_compile_event(name: str) -> bool:
    """Whether the event is part of a torch.compile compile (dynamo's timed ranges)."""
    return name.endswith(COMPILE_MARK)
