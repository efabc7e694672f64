"""Counts FLOPs and bytes moved per op in one run of the cell (``--roofline``).

``count_ops(fn)`` runs ``fn`` once under a ``TorchDispatchMode`` and returns, per op
name as the profiler spells it (``aten::mm``), the calls, FLOPs and bytes of that run:

- FLOPs: ``torch.utils.flop_counter``'s formulas (matmuls, convolutions, attention);
  ops torch has no formula for count one FLOP per output element when tagged
  ``pointwise`` (copies excepted: 0) and one per input element when tagged
  ``reduction``; everything else 0.
- Bytes: the sizes of the op's input and output tensors (dimensions broadcast with
  stride 0 counted once). Views and aliases (``view``, ``t``, ``expand``...), fresh
  allocations (``empty``) and ops that return no tensor move nothing.
- Composite ops with no formula (``aten::linear``, ``aten::layer_norm`` in inference
  mode) are decomposed while counting, as torch's ``FlopCounterMode`` does, so the
  counts land on the ops that do the work (``aten::addmm``...).
- Fused kernels that the profile showed calling matmuls internally (the ``open_ops``,
  e.g. ``aten::_native_multi_head_attention``) are opened: their kernel runs below the
  Python dispatch key with the mode active, so the matmuls inside (``bmm``, ``addmm``)
  are counted, and the fused op itself is not.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelmagic.core.roofline_bounds import OpCount
from kernelmagic.live import torch_compat

#: Copies are tagged pointwise but compute nothing.
COPY_OPS = frozenset({"aten::clone", "aten::copy_", "aten::_to_copy", "aten::lift_fresh_copy",
                      "aten::fill_", "aten::zero_", "aten::_copy_from"})
#: Ops that allocate or alias without reading or writing any element.
NO_TRAFFIC_OPS = frozenset({"aten::empty", "aten::empty_like", "aten::empty_strided",
                            "aten::_unsafe_view", "aten::alias", "aten::lift_fresh",
                            "aten::resolve_conj", "aten::resolve_neg", "aten::_reshape_alias",
                            "aten::set_", "aten::detach"})


def tensor_bytes(t: Any) -> float:
    """Bytes a tensor holds: dimensions broadcast with stride 0 are counted once."""
    try:
        if t.is_contiguous():  # no stride-0 dimension of size > 1: every element counts
            return float(t.numel() * t.element_size())
        n = math.prod(size for size, stride in zip(t.shape, t.stride(), strict=True) if stride)
        return float(n * t.element_size())
    except (RuntimeError, NotImplementedError):  # sparse, nested: no strides
        return float(t.numel() * t.element_size())


@dataclass(frozen=True)
class OpInfo:
    """What counting needs to know about one ``OpOverload``, looked up once."""

    key: str
    formula: Any  # torch's FLOP formula, or None
    view: bool
    pointwise: bool
    reduction: bool
    decompose: Any  # the composite decomposition, or None


def op_info(func: Any) -> OpInfo:
    view, pointwise, reduction = torch_compat.op_tags(func)
    formula = torch_compat.flop_formula(func)
    return OpInfo(key=torch_compat.op_name(func), formula=formula, view=view,
                  pointwise=pointwise, reduction=reduction,
                  decompose=torch_compat.decomposition(func) if formula is None else None)


def op_flops(info: OpInfo, args: Any, kwargs: dict[str, Any], out: Any,
             outputs: list[Any]) -> float:
    """FLOPs of one call (see the module's docstring for the rules); ``outputs``: the
    tensors of ``out``."""
    if info.formula is not None:
        return float(info.formula(*args, **kwargs, out_val=out))
    if info.pointwise and info.key not in COPY_OPS:
        return float(sum(t.numel() for t in outputs))
    if info.reduction:
        inputs = torch_compat.tensor_leaves(args)
        return float(inputs[0].numel()) if inputs else 0.0
    return 0.0


def op_bytes(info: OpInfo, args: Any, kwargs: dict[str, Any], outputs: list[Any]) -> float:
    """Bytes one call reads and writes: its input and output tensors (``outputs``; views:
    0)."""
    if info.view or info.key in NO_TRAFFIC_OPS:
        return 0.0
    if not outputs:
        return 0.0
    inputs = torch_compat.tensor_leaves(args)
    if kwargs:
        inputs += torch_compat.tensor_leaves(kwargs)
    return sum(tensor_bytes(t) for t in inputs) + sum(tensor_bytes(t) for t in outputs)


def _dtype(args: Any, kwargs: dict[str, Any]) -> str:
    tensors = torch_compat.tensor_leaves((args, kwargs))
    for t in tensors:
        if t.is_floating_point():
            return torch_compat.dtype_name(t.dtype)
    return torch_compat.dtype_name(tensors[0].dtype) if tensors else ""


def _mode_class(dynamo_loaded: bool) -> type:
    class CountingMode(torch_compat.dispatch_mode_base()):  # type: ignore[misc]
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # torch wraps a mode's __torch_dispatch__ so that Dynamo never compiles it,
            # which imports torch._dynamo (seconds) on first use. Keep that only when
            # Dynamo is already loaded (the cell may use torch.compile).
            return dynamo_loaded

        def __init__(self, counts: dict[str, OpCount], open_ops: frozenset[str]) -> None:
            super().__init__()
            self.counts = counts
            self.open_ops = open_ops

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            info = _INFO.get(func)
            if info is None:
                info = _INFO[func] = op_info(func)
            if info.decompose is not None:
                # A composite op (aten::linear...): count the ops it is made of.
                with self:
                    out = info.decompose(*args, **kwargs)
                if out is not NotImplemented:
                    return out
            entry = self.counts.get(info.key)
            if entry is None:
                entry = self.counts[info.key] = OpCount(info.key, dtype=_dtype(args, kwargs))
            entry.calls += 1
            if info.key in self.open_ops and not info.view:
                # A fused kernel with matmuls inside (profiled as its children): count
                # the ops it calls instead of it.
                with self:
                    try:
                        out = torch_compat.redispatch_below_python(func, args, kwargs)
                    except RuntimeError:
                        out = None
                if out is not None:
                    entry.opened = True
                    return out
            out = func(*args, **kwargs)
            outputs = torch_compat.tensor_leaves(out)  # once for both counts
            entry.flops += op_flops(info, args, kwargs, out, outputs)
            entry.bytes += op_bytes(info, args, kwargs, outputs)
            return out

    return CountingMode


_INFO: dict[Any, OpInfo] = {}
_MODES: dict[bool, type] = {}


def count_ops(fn: Callable[[], Any],
              open_ops: frozenset[str] = frozenset()) -> dict[str, OpCount]:
    """Run ``fn`` once under the counting mode; per op name, its calls, FLOPs and bytes.

    Ops named in ``open_ops`` are run below the Python dispatch key with the mode
    still active, so the ops their kernels call are counted instead of them.
    """
    dynamo_loaded = "torch._dynamo" in sys.modules
    mode = _MODES.get(dynamo_loaded)
    if mode is None:
        mode = _MODES[dynamo_loaded] = _mode_class(dynamo_loaded)
    counts: dict[str, OpCount] = {}
    with mode(counts, open_ops):
        fn()
    return counts
