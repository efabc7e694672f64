"""Compiled ``nn.Module``s named by their path in the user's namespace (``model.encoder``),
not by the frame dynamo compiled for them: the module's ``forward``, or, for a module whose
``forward`` is torch's own (``nn.Sequential``), torch's wrapper ``inner`` in
``torch/_dynamo/external_utils.py``, which says nothing to the user.

A compile is a module's when every parameter and buffer it lifted as its frame's local
(dynamo's ``graph_node_shapes``: ``l_self_modules_lin_parameters_weight_``) is one of that
module's, with the same shape, and no other compiled module's. Read only: the user's
namespace (the running IPython shell's, else ``__main__``'s) and dynamo's records.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import sys
from collections.abc import Iterable
from typing import Any

__all__ = ["as_module", "compiled_modules", "module_names"]

_DYNAMO = "torch._dynamo"
#: The frame dynamo compiles for a module whose ``forward`` is torch's own (its
#: ``external_utils.wrap_inline``): says nothing to the user.
_WRAPPER = ("inner", "external_utils.py")
#: The frames dynamo compiles for a compiled module: its ``forward``, torch's wrapper, or
#: ``nn.Module``'s call (``module.compile()``).
_MODULE_FRAMES = frozenset({"forward", "inner", "_call_impl", "_wrapped_call_impl"})
#: A lifted parameter or buffer in dynamo's ``graph_node_shapes``:
#: ``l_self_modules_encoder_parameters_weight_`` (``L['self'].encoder.weight``).
_LIFTED = re.compile(r"^l_\w*?_((?:modules_\w+?_)*(?:parameters|buffers)_\w+)_$")


def _user_namespace() -> dict[str, Any]:
    """The running IPython shell's namespace, else ``__main__``'s."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None:
        return dict(shell.user_ns)
    main = sys.modules.get("__main__")
    return dict(vars(main)) if main is not None else {}


def compiled_modules(namespace: dict[str, Any] | None = None) -> list[tuple[str, Any]]:
    """(path, module dynamo traces) for each compiled ``nn.Module`` ``namespace`` (the
    user's, by default) reaches: ``model`` for ``model = torch.compile(model)``,
    ``model.encoder`` for an attribute replaced by its compiled module or a module compiled
    in place (``model.encoder.compile()``); a module reached by several paths, by the
    shortest."""
    if _DYNAMO not in sys.modules or "torch" not in sys.modules:
        return []
    import torch

    wrapper = getattr(sys.modules.get("torch._dynamo.eval_frame"), "OptimizedModule", None)
    found: dict[int, tuple[str, Any]] = {}
    for name, value in (namespace if namespace is not None else _user_namespace()).items():
        if name.startswith("_") or not isinstance(value, torch.nn.Module):
            continue
        for sub_path, sub in value.named_modules():
            traced = (sub._orig_mod if wrapper is not None and isinstance(sub, wrapper)
                      else sub if getattr(sub, "_compiled_call_impl", None) is not None
                      else None)
            if traced is None:
                continue
            path = ".".join(p for p in (name, sub_path) if p).replace("._orig_mod", "")
            if id(traced) not in found or len(path) < len(found[id(traced)][0]):
                found[id(traced)] = (path, traced)
    return list(found.values())


def _lifted_names(module: Any) -> dict[str, list[int]]:
    """Each parameter's and buffer's name as dynamo names its graph input, without the
    local's prefix (``encoder.0.weight`` -> ``modules_encoder_modules_0_parameters_weight``)
    -> its shape."""
    out: dict[str, list[int]] = {}
    for kind, named in (("parameters", module.named_parameters()),
                        ("buffers", module.named_buffers())):
        for name, tensor in named:
            *mods, leaf = name.split(".")
            key = "".join(f"modules_{m}_" for m in mods) + f"{kind}_{leaf}"
            out[re.sub(r"\W", "_", key).lower()] = list(tensor.shape)
    return out


def module_names(metrics: Iterable[Any], modules: list[tuple[str, Any]]) -> dict[str, str]:
    """Compile id -> the path of the compiled module it traced: the one module of
    ``modules`` that holds every parameter and buffer the compile lifted as its frame's
    local (same names, same shapes), in a module's frame (``_MODULE_FRAMES``). A compile
    lifting none, or matching several modules, is left out."""
    if not modules:
        return {}
    names = [(path, _lifted_names(m)) for path, m in modules]
    out: dict[str, str] = {}
    for m in metrics:
        if getattr(m, "co_name", None) not in _MODULE_FRAMES:
            continue
        lifted = {found[1]: list(shape) for found, shape in
                  ((_LIFTED.match(k), v) for k, v in _node_shapes(m).items()) if found}
        matching = [path for path, held in names
                    if lifted and all(held.get(k) == shape for k, shape in lifted.items())]
        if len(matching) == 1:
            out[str(m.compile_id)] = matching[0]
    return out


def _node_shapes(metric: Any) -> dict[str, Any]:
    """A compile's graph inputs and nodes -> shapes (dynamo keeps them as a dict's text)."""
    shapes = getattr(metric, "graph_node_shapes", None)
    if isinstance(shapes, str):
        try:
            shapes = ast.literal_eval(shapes)
        except (ValueError, SyntaxError):
            return {}
    return shapes if isinstance(shapes, dict) else {}


def as_module(row: Any, paths: dict[str, str]) -> Any:
    """``row`` (a region or compile) named by its compiled module's path; torch's wrapper
    frame (``_WRAPPER``) left without a file and line."""
    path = paths.get(row.compile_id)
    if path is None:
        return row
    wrapper = (row.function, os.path.basename(row.file)) == _WRAPPER
    return dataclasses.replace(row, function=path, file="" if wrapper else row.file,
                               line=0 if wrapper else row.line)
