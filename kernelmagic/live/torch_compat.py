"""Everything that drives torch's profiler, so version drift lives in one file.

Starting sessions, ranges, synchronising, device memory peaks and trace export live
here; the finished session's raw events are read once by ``kernelmagic/live/session.py``
into an ``EventTable``, and nothing else reads a torch profiler object.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import torch
from torch.autograd import profiler as autograd_profiler

from kernelmagic.core.range_names import SYNC_RANGE
from kernelmagic.live import quiet_kineto_logs

__all__ = [
    "cuda_available", "device_name", "device_peak", "export_trace", "gpu_runtime",
    "labelled_range", "module_ranges", "new_profiler", "profiler_running", "release",
    "reset_device_peak", "return_freed_memory", "synchronize", "warm_profiler",
]

_profiler_warmed: set[bool] = set()  # for CPU-only and for CUDA sessions separately
_nvtx_works: bool | None = None


def cuda_available() -> bool:
    return torch.cuda.is_available()


def device_name() -> str | None:
    """The name of the current CUDA device, e.g. ``NVIDIA H200``."""
    return torch.cuda.get_device_name() if torch.cuda.is_available() else None


def gpu_runtime() -> str:
    """``"rocm"`` on a ROCm (HIP) build of torch, else ``"cuda"``; the device is "cuda" on both."""
    return "rocm" if getattr(torch.version, "hip", None) else "cuda"


def synchronize() -> None:
    """Wait for queued GPU work, if this process has started CUDA at all."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        with autograd_profiler.record_function(SYNC_RANGE):
            torch.cuda.synchronize()


def profiler_running() -> bool:
    """True while another torch profiler (for example the user's own) is active."""
    enabled = getattr(torch._C._autograd, "_profiler_enabled", None)
    if enabled is not None:
        return bool(enabled())
    return bool(getattr(autograd_profiler, "_is_profiler_enabled", False))


def _nvtx_usable() -> bool:
    """NVTX calls raise on CPU-only builds; probe once and remember."""
    global _nvtx_works
    if _nvtx_works is None:
        _nvtx_works = False
        if torch.version.cuda is not None and torch.cuda.is_available():
            with contextlib.suppress(RuntimeError, AttributeError):
                torch.cuda.nvtx.range_push("kernelmagic/probe")
                torch.cuda.nvtx.range_pop()
                _nvtx_works = True
    return _nvtx_works


@contextlib.contextmanager
def labelled_range(name: str) -> Iterator[None]:
    """A ``record_function`` range and, where CUDA NVTX works, an NVTX range of one name.

    Both are closed in ``finally`` blocks, so an exception or ``KeyboardInterrupt`` in
    the body leaves neither open.
    """
    nvtx = _nvtx_usable()
    with autograd_profiler.record_function(name):
        if nvtx:
            torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            if nvtx:
                torch.cuda.nvtx.range_pop()


def new_profiler(profile_device: bool, *, shapes: bool = False, memory: bool = False,
                 flops: bool = False, stack: bool = False) -> Any:
    """A Kineto-backed profiler session (not yet started).

    ``torch.autograd.profiler.profile(use_kineto=True)`` is the engine under
    ``torch.profiler.profile`` without the latter's ~1 s import of inductor on first
    use; both produce the same events and the same ``key_averages()``.
    """
    quiet_kineto_logs()
    # ``memory`` records neither shapes nor Python calls: kernelmagic's own category
    # analysis (``views/memory_rules.py``) reads addresses, not torch's data flow.
    return autograd_profiler.profile(use_kineto=True, record_shapes=shapes, profile_memory=memory,
                                     with_flops=flops, with_stack=stack,
                                     use_device="cuda" if profile_device else None)


@contextlib.contextmanager
def module_ranges() -> Iterator[None]:
    """Open a ``record_function`` range ``module: <path> (<Type>)`` around every module call.

    Paths are ``named_modules()`` names under the outermost module called, e.g. ``ff.0``
    or ``layers.3.attn`` (containers such as ``ModuleList`` are never called, so paths
    come from the root's tree, not the call stack); the outermost module's path is its
    type name. Global forward hooks are removed, and
    ranges left open by an exception are closed, on the way out.
    """
    from torch.nn.modules import module as nn_module

    open_: list[tuple[Any, str, Any]] = []
    paths_under: dict[int, dict[int, str]] = {}  # id(root) -> {id(module): "ff.0"}

    def path_of(module: Any) -> str:
        if not open_:
            return ""
        root = open_[0][0]
        if id(root) not in paths_under:
            paths_under[id(root)] = {id(m): n for n, m in root.named_modules()}
        found = paths_under[id(root)].get(id(module))
        if found is not None:
            return found
        # Called from inside but not a submodule of the root: name it by its type.
        parent_path = open_[-1][1]
        return f"{parent_path}.{type(module).__name__}" if parent_path else type(module).__name__

    def before(module: Any, args: Any) -> None:
        path = path_of(module)
        label = path or type(module).__name__
        rf = autograd_profiler.record_function(f"module: {label} ({type(module).__name__})")
        rf.__enter__()
        open_.append((module, path, rf))

    def after(module: Any, args: Any, output: Any) -> None:
        while open_:
            done, _, rf = open_.pop()
            rf.__exit__(None, None, None)
            if done is module:
                break

    handles = [nn_module.register_module_forward_pre_hook(before),
               nn_module.register_module_forward_hook(after)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        while open_:
            open_.pop()[2].__exit__(None, None, None)


def warm_profiler(profile_device: bool) -> None:
    """Run one throwaway profiler session per process.

    The first Kineto session in a process initialises its tracer (and CUPTI on CUDA)
    and can drop events (pytorch/pytorch#175790, #192021); measuring the second one
    keeps that cold start out of the user's numbers.
    """
    if profile_device in _profiler_warmed:
        return
    with new_profiler(profile_device):
        torch.ones(2).add_(1)
        if profile_device:
            torch.ones(2, device="cuda").add_(1)
            torch.cuda.synchronize()
    _profiler_warmed.add(profile_device)


def release(prof: Any) -> None:
    """Break the parent/child links between the session's events.

    They form reference cycles, so a finished session's hundreds of thousands of events
    would wait for a full garbage collection; without the links, they are freed as soon
    as the session is dropped. Only for sessions nobody else holds.
    """
    # ``_function_events``: reading ``function_events`` would run torch's slow parse.
    for event in getattr(prof, "_function_events", None) or ():
        event.cpu_parent = None
        event.cpu_children = []


_malloc_trim: Any = None


def return_freed_memory() -> None:
    """Hand freed heap back to the OS (glibc's ``malloc_trim``; a no-op elsewhere).

    Parsing a profile churns through many small allocations; glibc keeps the freed
    pages, so without this the process's resident memory ratchets up run after run.
    """
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = False
        try:
            import ctypes

            _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            pass
    if _malloc_trim:
        _malloc_trim(0)


def reset_device_peak() -> float:
    """Start a new peak-memory window on the CUDA device; returns bytes allocated now."""
    if not torch.cuda.is_initialized():
        return 0.0
    torch.cuda.reset_peak_memory_stats()
    return float(torch.cuda.memory_allocated())


def device_peak(baseline: float) -> float:
    """Rise of CUDA memory allocated above ``baseline`` since the last reset (bytes)."""
    if not torch.cuda.is_initialized():
        return 0.0
    return max(0.0, float(torch.cuda.max_memory_allocated()) - baseline)


def export_trace(prof: Any, path: str) -> None:
    """Write the session as a Chrome trace (Perfetto, chrome://tracing); gzip for .gz."""
    if not path.endswith(".gz"):
        prof.export_chrome_trace(path)
        return
    import gzip
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        plain = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(plain)
        with open(plain, "rb") as src, gzip.open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)


def dtype_name(dtype: Any) -> str:
    """``torch.bfloat16`` -> ``bfloat16``."""
    return str(dtype).removeprefix("torch.")


# --- counting FLOPs and bytes per op (--roofline) ----------------------------------------

#: CPU attention kernels missing from ``torch.utils.flop_counter``'s registry, counted
#: with the formula torch registers for the CUDA flash kernel (same arguments first).
_SDPA_ALIASES = ("_scaled_dot_product_flash_attention_for_cpu",)


def dispatch_mode_base() -> type:
    """``TorchDispatchMode``: sees every aten op below autograd, with its tensors."""
    from torch.utils._python_dispatch import TorchDispatchMode

    return TorchDispatchMode


def flop_formula(func: Any) -> Any:
    """torch.utils.flop_counter's formula for an ``OpOverload``, or None.

    Called as ``formula(*args, **kwargs, out_val=out)`` like ``FlopCounterMode`` does.
    """
    from torch.utils import flop_counter

    registry = getattr(flop_counter, "flop_registry", {})
    packet = getattr(func, "_overloadpacket", None)
    if packet in registry:
        return registry[packet]
    if getattr(packet, "__name__", "") in _SDPA_ALIASES:
        return registry.get(torch.ops.aten._scaled_dot_product_flash_attention)
    return None


def flop_formula_names() -> set[str]:
    """Profiler names of the ops torch.utils.flop_counter has a formula for."""
    from torch.utils import flop_counter

    names = {f"aten::{getattr(p, '__name__', '')}"
             for p in getattr(flop_counter, "flop_registry", {})}
    return names | {f"aten::{n}" for n in _SDPA_ALIASES}


def redispatch_below_python(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    """Run ``func``'s kernel directly, below the Python dispatch key.

    Called inside a dispatch mode that is active again (``with mode:``), the ops the
    kernel calls internally reach the mode too: it sees inside fused kernels such as
    ``aten::_native_multi_head_attention``.
    """
    tensors = tensor_leaves((args, kwargs))
    if not tensors:
        raise RuntimeError("no tensor argument to redispatch on")
    keys = torch._C._dispatch_keys(tensors[0]) & torch._C._dispatch_keyset_full_after(
        torch._C.DispatchKey.Python)
    return func.redispatch(keys, *args, **kwargs)


def op_name(func: Any) -> str:
    """The profiler's name of an ``OpOverload``: ``aten.mm.default`` -> ``aten::mm``."""
    schema = getattr(func, "_schema", None)
    if schema is not None:
        return str(schema.name)
    return str(func).rsplit(".", 1)[0].replace(".", "::", 1)


def op_tags(func: Any) -> tuple[bool, bool, bool]:
    """(is a view, is pointwise, is a reduction) of an ``OpOverload``."""
    tags = set(getattr(func, "tags", ()) or ())
    pointwise = getattr(torch.Tag, "pointwise", None)
    reduction = getattr(torch.Tag, "reduction", None)
    return (bool(getattr(func, "is_view", False)), pointwise in tags and pointwise is not None,
            reduction in tags and reduction is not None)


def decomposition(func: Any) -> Any:
    """``func.decompose`` when the op has a composite (decomposable) kernel, else None."""
    key = getattr(torch._C.DispatchKey, "CompositeImplicitAutograd", None)
    has = getattr(func, "has_kernel_for_dispatch_key", None)
    if key is None or has is None:
        return getattr(func, "decompose", None)
    return func.decompose if has(key) else None


def tensor_leaves(tree: Any) -> list[Any]:
    """The tensors in nested args/kwargs/outputs (lists, tuples, dicts)."""
    if isinstance(tree, torch.Tensor):
        return [tree]
    found: list[Any] = []
    if isinstance(tree, (list, tuple)):  # the usual flat args: no stack needed
        for node in tree:
            if isinstance(node, torch.Tensor):
                found.append(node)
            elif isinstance(node, (list, tuple, dict)):
                found = []
                break
        else:
            return found
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, torch.Tensor):
            found.append(node)
        elif isinstance(node, (list, tuple)):
            stack.extend(reversed(node))
        elif isinstance(node, dict):
            stack.extend(reversed(list(node.values())))
    return found

