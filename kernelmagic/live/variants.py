"""The variants ``%%profile --try`` measures: built-in ones and the user's own.

A variant is a context manager entered around each warm-up and timed run of the cell
and left after it, on success, error and Ctrl-C alike (``with`` does it), so nothing it
sets outlives the run. ``compile`` and ``cudagraphs`` also hand the cell to
``torch.compile`` once, before its runs. ``why_not(on_device)`` says why this machine
cannot run a variant ("" when it can): such a variant is a row that says so.

``@kernelmagic.variant("name")`` on a context-manager function (a generator function, or
one returning a context manager) registers ``--try name`` for the session. Importing
this module imports no torch: the variants import it when they run.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kernelmagic.core.units import counted
from kernelmagic.live import torch_threads

#: ``sdpa=NAME``: the backend names of ``torch.nn.attention.SDPBackend``.
SDPA_BACKENDS = {"math": "MATH", "efficient": "EFFICIENT_ATTENTION",
                 "flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION"}
#: SDPA backends that a CPU build of torch lacks (it has math and flash only).
SDPA_CUDA_ONLY = ("efficient", "cudnn")
AUTO = "auto"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")


@dataclass(frozen=True)
class Variant:
    """How to run the cell differently. ``context(on_device)`` is entered around each
    run; ``compile_mode`` (``torch.compile``'s ``mode``, "" for the default) is set for
    the variants that compile the cell; ``tolerance`` names the dtype whose usual
    tolerance its numerical error is held to (None: the value's own dtype);
    ``advice`` are words of the findings' suggestions that this variant tries."""

    name: str
    label: str
    context: Callable[[bool], contextlib.AbstractContextManager[Any]]
    why_not: Callable[[bool], str] = lambda on_device: ""
    compile_mode: str | None = None
    tolerance: str | None = None
    advice: tuple[str, ...] = ()

    @property
    def compiles(self) -> bool:
        return self.compile_mode is not None


def _nothing(on_device: bool) -> contextlib.AbstractContextManager[Any]:
    return contextlib.nullcontext()


def _needs_cuda(on_device: bool) -> str:
    return "" if on_device else "needs a CUDA GPU, and this run profiles the CPU only"


def _autocast(on_device: bool, dtype_name: str) -> contextlib.AbstractContextManager[Any]:
    import torch

    return torch.autocast("cuda" if on_device else "cpu", dtype=getattr(torch, dtype_name))


@contextlib.contextmanager
def _tf32(on_device: bool) -> Iterator[None]:
    """Matmul precision "high" and cuDNN's TF32, both put back afterwards."""
    import torch

    precision = torch.get_float32_matmul_precision()
    cudnn = torch.backends.cudnn.allow_tf32
    try:
        torch.set_float32_matmul_precision("high")
        torch.backends.cudnn.allow_tf32 = True
        yield
    finally:
        torch.set_float32_matmul_precision(precision)
        torch.backends.cudnn.allow_tf32 = cudnn


def _inference(on_device: bool) -> contextlib.AbstractContextManager[Any]:
    import torch

    return torch.inference_mode()


def _sdpa(backend: str) -> contextlib.AbstractContextManager[Any]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(getattr(SDPBackend, SDPA_BACKENDS[backend]))


def _sdpa_why_not(backend: str, on_device: bool) -> str:
    if not on_device and backend in SDPA_CUDA_ONLY:
        return (f"needs a CUDA GPU: torch's CPU attention has the math and flash kernels "
                f"only, not {backend}")
    return ""


BUILT_IN: dict[str, Variant] = {v.name: v for v in (
    Variant("bf16", "bf16 autocast", lambda d: _autocast(d, "bfloat16"),
            tolerance="bfloat16", advice=("bfloat16",)),
    Variant("fp16", "fp16 autocast", lambda d: _autocast(d, "float16"), _needs_cuda,
            tolerance="float16", advice=("float16",)),
    Variant("tf32", "TF32 matmuls", _tf32, _needs_cuda, tolerance="tf32",
            advice=("TF32",)),
    Variant("compile", "torch.compile", _nothing, compile_mode="",
            advice=("torch.compile",)),
    Variant("cudagraphs", "CUDA graphs", _nothing, _needs_cuda,
            compile_mode="reduce-overhead", advice=("reduce-overhead",)),
    Variant("inference", "inference_mode", _inference, advice=("inference_mode",)),
)}

#: The user's variants (``@kernelmagic.variant``), for the life of the process.
_USER: dict[str, Variant] = {}


def register(name: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
    """``@kernelmagic.variant(name)`` (``kernelmagic/api.py``): a decorator that makes its
    context-manager function (a generator function is made one, as
    ``contextlib.contextmanager`` does) the variant ``name`` for the life of the process,
    replacing one of that name; ValueError for a name that is not a word, or built in."""
    if not isinstance(name, str) or not _NAME.match(name) or name == AUTO:
        raise ValueError(f"a variant name is a word (letters, digits, _ . -); got {name!r}")
    if name in BUILT_IN or name.startswith(("threads=", "sdpa=")):
        raise ValueError(f"{name!r} is a built-in variant; choose another name")

    def add(fn: Callable[[], Any]) -> Callable[[], Any]:
        make = contextlib.contextmanager(fn) if inspect.isgeneratorfunction(fn) else fn
        _USER[name] = Variant(name, name, lambda on_device: make())
        return fn

    return add


def valid_names() -> list[str]:
    """Every name ``--try`` takes, as a usage message lists them."""
    return [*BUILT_IN, "threads=N", f"sdpa={'|'.join(SDPA_BACKENDS)}", *_USER, AUTO]


def lookup(name: str) -> Variant:
    """The variant called ``name``; ValueError listing the valid names otherwise."""
    if name in _USER:
        return _USER[name]
    if name in BUILT_IN:
        return BUILT_IN[name]
    key, _, value = name.partition("=")
    if key == "threads" and value.isdigit() and int(value) >= 1:
        n = int(value)
        return Variant(name, counted(n, "thread"), lambda on_device: torch_threads(n),
                       advice=("set_num_threads",))
    if key == "sdpa" and value in SDPA_BACKENDS:
        return Variant(name, f"SDPA {value}", lambda on_device: _sdpa(value),
                       lambda on_device: _sdpa_why_not(value, on_device))
    if key == "threads":
        raise ValueError(f"--try: {name!r}: N in threads=N is a whole number of at least 1")
    if key == "sdpa":
        raise ValueError(f"--try: {name!r}: the backend is one of {', '.join(SDPA_BACKENDS)}")
    raise ValueError(f"--try: unknown variant {name!r}; valid: {', '.join(valid_names())}")


def parse(names: str | Sequence[str]) -> list[str]:
    """``--try``'s value (``"bf16,compile"``) or the API's list, checked, in order, each
    once; ValueError (one line, listing the valid names) on an unknown one. ``auto``
    stays as it is: it is resolved against the baseline's findings."""
    items = names.split(",") if isinstance(names, str) else list(names)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"--try: a variant is named by a string; got {item!r}")
        name = item.strip().replace(" ", "")
        if not name:
            continue
        if name != AUTO:
            lookup(name)
        if name not in out:
            out.append(name)
    if not out:
        raise ValueError(f"--try needs at least one variant; valid: {', '.join(valid_names())}")
    return out


def suggested(wanted: Sequence[str], against: Sequence[str], on_device: bool) -> list[str]:
    """``--try auto``: the variants named in ``wanted`` (the findings' ``variants``, in
    their order) that no finding advises against (``against``) and this device can run,
    each once."""
    out: list[str] = []
    for name in wanted:
        try:
            found = lookup(name)
        except ValueError:
            continue
        if name not in out and name not in against and not found.why_not(on_device):
            out.append(name)
    return out
