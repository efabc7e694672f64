"""``--memory``: which storages are parameters, gradients, optimizer state and inputs,
learnt from the objects themselves through torch's public global hooks.

While the profiled iterations run, ``watch_owners`` holds two hooks, removed on the way
out whatever happens: ``register_optimizer_step_post_hook`` (each optimizer stepped; at
each step the addresses of its gradients, which a ``zero_grad`` makes anew each
iteration) and ``register_module_forward_pre_hook`` (each module called, and weak
references to the tensors it was called with). After the loop, ``Owners.known`` reads the
parameters, the optimizers' state and the gradients once more, and the inputs still alive,
as ``KnownStorages`` rows: addresses, sizes, shapes and categories, never the tensors.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch

from kernelmagic.core.events import EventTable
from kernelmagic.core.memory_rows import AT_END, CATEGORIES, KnownStorages
from kernelmagic.live.torch_compat import dtype_name
from kernelmagic.views.memory_rules import optimizer_steps

_PARAMETER = CATEGORIES.index("parameter")
_STATE = CATEGORIES.index("optimizer_state")
_GRADIENT = CATEGORIES.index("gradient")
_INPUT = CATEGORIES.index("input")

#: One storage: (device, address, bytes, shape, dtype).
Storage = tuple[int, int, int, str, str]


def device_index(device: Any) -> int | None:
    """-1 for CPU memory, the index for a GPU's, None for another device's."""
    if device.type == "cpu":
        return -1
    if device.type == "cuda":
        return int(device.index or 0)
    return None


def _storage(tensor: Any) -> Storage | None:
    """Where ``tensor``'s memory is, on the CPU or a CUDA device (None: elsewhere, or none)."""
    index = device_index(tensor.device)
    if index is None:
        return None
    try:
        storage = tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):  # a tensor subclass without storage
        return None
    ptr, nbytes = int(storage.data_ptr()), int(storage.nbytes())
    if ptr == 0 or nbytes == 0:
        return None
    return index, ptr, nbytes, str(list(tensor.shape)), dtype_name(tensor.dtype)


def _storages(tensors: Iterable[Any]) -> list[Storage]:
    """Where each of ``tensors`` has its memory, those with none on the CPU or CUDA left out."""
    return [where for where in map(_storage, tensors) if where is not None]


def _tensors(values: Iterable[Any]) -> list[Any]:
    """The tensors among ``values`` (an optimizer's state entry, a module's arguments)."""
    return [value for value in values if isinstance(value, torch.Tensor)]


class Owners:
    """What the hooks saw while ``--memory`` profiled: the optimizers stepped (with each
    step's gradients), the modules called, the tensors modules were called with."""

    def __init__(self) -> None:
        self.optimizers: dict[int, Any] = {}
        self.modules: dict[int, Any] = {}
        self.step_gradients: list[list[Storage]] = []  # per step, in the order they ran
        self.arguments: dict[int, weakref.ref[Any]] = {}

    def stepped(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """The optimizer step post hook: the optimizer, and its gradients' addresses."""
        self.optimizers[id(optimizer)] = optimizer
        grads = [p.grad for group in optimizer.param_groups for p in group["params"]
                 if p.grad is not None]
        self.step_gradients.append(_storages(grads))

    def called(self, module: Any, args: Any) -> None:
        """The module forward pre hook: the module, and weak references to its arguments."""
        self.modules[id(module)] = module
        for t in _tensors(args):
            self.arguments[id(t)] = weakref.ref(t)

    @property
    def saw_model(self) -> bool:
        """Whether a module was called or an optimizer stepped."""
        return bool(self.modules or self.optimizers)

    def _parameters(self) -> list[Any]:
        params: dict[int, Any] = {}
        for optimizer in self.optimizers.values():
            for group in optimizer.param_groups:
                params.update((id(p), p) for p in group["params"])
        for module in self.modules.values():
            params.update((id(p), p) for p in module.parameters())
        return list(params.values())

    def _state(self) -> Iterator[Any]:
        for optimizer in self.optimizers.values():
            for entry in optimizer.state.values():
                yield from _tensors(entry.values() if isinstance(entry, dict) else [entry])

    def known(self, table: EventTable) -> KnownStorages:
        """The storages seen, as rows: each step's gradients at the end of that step
        (``views.memory_rules.optimizer_steps`` of ``table``, when the count agrees), then,
        read now, the inputs still alive, the gradients, the optimizer state and the
        parameters (in that order: a later row's category wins for one storage)."""
        rows: list[tuple[Any, ...]] = []  # (when, category, *Storage)
        steps = optimizer_steps(table)
        if len(steps) == len(self.step_gradients):
            for (_, end), grads in zip(steps, self.step_gradients, strict=True):
                rows += [(end - 1, _GRADIENT, *g) for g in grads]
        alive = [r() for r in self.arguments.values()]
        params = self._parameters()
        now = [(_INPUT, [t for t in alive if t is not None]),
               (_GRADIENT, [p.grad for p in params if p.grad is not None]),
               (_STATE, list(self._state())), (_PARAMETER, params)]
        rows += [(AT_END, category, *where) for category, tensors in now
                 for where in _storages(tensors)]
        when, category, device, ptr, nbytes, shape, dtype = (
            zip(*rows, strict=True) if rows else ((),) * 7)
        return KnownStorages(
            when=np.asarray(when, dtype=np.int64), device=np.asarray(device, dtype=np.int16),
            ptr=np.asarray(ptr, dtype=np.int64), nbytes=np.asarray(nbytes, dtype=np.int64),
            category=np.asarray(category, dtype=np.int8), shape=list(shape), dtype=list(dtype))


@contextlib.contextmanager
def watch_owners() -> Iterator[Owners]:
    """The global optimizer-step and module-call hooks, for the profiled iterations;
    removed on the way out, also when the cell raises."""
    from torch.nn.modules.module import register_module_forward_pre_hook
    from torch.optim.optimizer import register_optimizer_step_post_hook

    owners = Owners()
    step_hook = register_optimizer_step_post_hook(owners.stepped)
    try:
        module_hook = register_module_forward_pre_hook(owners.called)
        try:
            yield owners
        finally:
            module_hook.remove()
    finally:
        step_hook.remove()
