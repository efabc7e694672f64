"""``--steps TARGET``: a range ``NAME/step j`` around each call of the target, and the
count of top-level module calls that suggests ``--steps`` when it was not given.

``StepRanges`` installs forward pre- and post-hooks on a module, or binds a wrapper in the
function's place in each namespace that binds it, only while the profiled iterations run;
on the way out (success, an exception, Ctrl-C) the hooks are removed, the original
function bound again and any step range left open closed. Each range is labelled with the
call's tensor inputs (``x (1, 64) int64``) so the view (``kernelmagic/views/steps.py``) can
group prefill apart from decode.

``RepeatedCalls`` counts, during one warm-up run (never a timed one), how often each
module's forward ran at the top level (not inside another module's forward); not once
``torch.compile`` has been used in the process (see ``RepeatedCalls.counting``).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from torch.nn.modules import module as nn_module

from kernelmagic.core.options import StepTarget
from kernelmagic.core.range_names import INPUT_SEPARATOR, step_range
from kernelmagic.core.step_rows import RepeatedCall
from kernelmagic.live import torch_compat

#: Tensor inputs written into a step's label, at most (the rest are left out).
MAX_INPUTS = 4


def _tensor_text(value: Any) -> str | None:
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None or not hasattr(value, "data_ptr"):
        return None
    return f"{tuple(shape)} {torch_compat.dtype_name(dtype)}"


def _named_values(names: list[str], args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(name, value) of each argument, and one level into tuples, lists and dicts."""
    pairs = [(names[k] if k < len(names) else f"arg{k}", v) for k, v in enumerate(args)]
    pairs += list(kwargs.items())
    for name, value in pairs:
        yield name, value
        if isinstance(value, (tuple, list)):
            yield from ((f"{name}[{k}]", v) for k, v in enumerate(value))
        elif isinstance(value, dict):
            yield from ((f"{name}[{k!r}]", v) for k, v in value.items())


def inputs_label(names: list[str], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The call's tensor inputs, shapes and dtypes: ``x (1, 64) int64; mask (64, 64) bool``."""
    texts = ((name, _tensor_text(value)) for name, value in _named_values(names, args, kwargs))
    return INPUT_SEPARATOR.join(itertools.islice(
        (f"{name} {text}" for name, text in texts if text is not None), MAX_INPUTS))


def _parameter_names(fn: Any) -> list[str]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


class StepRanges:
    """The step ranges of one run (``target`` None: nothing is installed, ``run`` just
    calls). A context manager around the profiled iterations; ``run(fn)`` runs one
    iteration, its steps counted from 0."""

    def __init__(self, target: StepTarget | None, name: str) -> None:
        self.target = target
        self.name = name
        self.step = 0
        self._open: list[Any] = []  # the open range of the outermost call, if any
        self._depth = 0
        self._undo: list[Callable[[], None]] = []
        self._names: list[str] = []

    def run(self, fn: Callable[[], Any]) -> Any:
        __tracebackhide__ = True
        self.step = 0
        return fn()

    def _begin(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._depth += 1
        if self._depth > 1:  # a call inside a call (recursion): part of the outer step
            return
        label = step_range(self.name, self.step, inputs_label(self._names, args, kwargs))
        self.step += 1
        scope = torch_compat.labelled_range(label)
        scope.__enter__()
        self._open.append(scope)

    def _end(self) -> None:
        self._depth = max(0, self._depth - 1)
        if self._depth == 0:
            self._close()

    def _close(self) -> None:
        while self._open:
            self._open.pop().__exit__(None, None, None)

    def __enter__(self) -> StepRanges:
        target = self.target
        if target is None:
            return self
        try:
            if target.kind == "module":
                self._hook(target.obj)
            else:
                self._wrap(target)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        while self._undo:
            self._undo.pop()()
        self._close()
        self._depth = 0

    def _hook(self, module: Any) -> None:
        self._names = _parameter_names(module.forward)

        def before(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            self._begin(args, kwargs)

        def after(_module: Any, _args: Any, _output: Any) -> None:
            self._end()

        pre = module.register_forward_pre_hook(before, with_kwargs=True)
        self._undo.append(pre.remove)
        post = module.register_forward_hook(after, always_call=True)
        self._undo.append(post.remove)

    def _wrap(self, target: StepTarget) -> None:
        original = target.obj
        self._names = _parameter_names(original)

        @functools.wraps(original)
        def step(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            self._begin(args, kwargs)
            try:
                return original(*args, **kwargs)
            finally:
                self._end()

        for ns in target.namespaces:
            for key in [k for k, v in list(ns.items()) if v is original]:
                ns[key] = step
                self._undo.append(functools.partial(_rebind, ns, key, step, original))


def _rebind(ns: dict[str, Any], key: str, wrapper: Any, original: Any) -> None:
    """Bind ``original`` again where ``wrapper`` still is (the user may have rebound it)."""
    if ns.get(key) is wrapper:
        ns[key] = original


class RepeatedCalls:
    """Counts top-level module calls while ``counting()`` is on (one warm-up run).

    ``source_file`` is the profiled code's file: the outermost frame running it is where
    ``--steps`` would look a module up, so the module's name is found there.
    """

    def __init__(self, source_file: str | None) -> None:
        self.source_file = source_file
        self.calls: Counter[int] = Counter()
        self.modules: dict[int, tuple[str, str]] = {}  # id -> (name, type)
        self._depth = 0

    @contextlib.contextmanager
    def counting(self, on: bool = True) -> Iterator[None]:
        """Count the top-level module calls of the body when ``on``. Not once dynamo is
        loaded (``torch.compile`` used in this process): dynamo guards on the global hooks,
        so compiled code would recompile when they go, and it warns about them."""
        if not on or "torch._dynamo" in sys.modules:
            yield
            return

        def before(module: Any, _args: Any) -> None:
            if self._depth == 0:
                self.calls[id(module)] += 1
                if id(module) not in self.modules:
                    self.modules[id(module)] = (self._name_of(module), type(module).__name__)
            self._depth += 1

        def after(_module: Any, _args: Any, _output: Any) -> None:
            self._depth = max(0, self._depth - 1)

        handles = [nn_module.register_module_forward_pre_hook(before),
                   nn_module.register_module_forward_hook(after, always_call=True)]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()
            self._depth = 0

    def _name_of(self, module: Any) -> str:
        found = ""
        frame: FrameType | None = sys._getframe(2)
        while frame is not None:
            if self.source_file is None or frame.f_code.co_filename == self.source_file:
                names = [k for k, v in frame.f_locals.items() if v is module]
                if names:
                    found = names[0]  # the outermost frame's name wins
            frame = frame.f_back
        return found

    def found(self) -> RepeatedCall | None:
        """The module called most often at the top level, when it was called twice or more."""
        if not self.calls:
            return None
        key, calls = self.calls.most_common(1)[0]
        if calls < 2:
            return None
        name, module_type = self.modules[key]
        return RepeatedCall(target=name, module_type=module_type, calls=calls)
