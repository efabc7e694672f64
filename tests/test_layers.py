"""torch's private names (``torch._C``, ``torch._dynamo``, ``torch.profiler._memory_profiler``,
``torch.ops.aten._foo``, ...) are used only in ``kernelmagic/live/``, the package that drives
torch and absorbs its version drift. Advice text that names one (a string) is fine.

The check reads every module's syntax tree: an import of a private torch module, an
import of a private name from a torch module, an attribute chain on a name bound to torch
that passes through a private attribute, and a private module named to
``importlib.import_module`` or ``__import__``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kernelmagic"
ALLOWED = PACKAGE / "live"


def _private(part: str) -> bool:
    """``_C``, ``_dynamo``: private; ``__version__``, ``__file__`` (dunders) are not."""
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _private_module(dotted: str) -> bool:
    parts = dotted.split(".")
    return parts[0] == "torch" and any(_private(p) for p in parts[1:])


def _chain(node: ast.expr) -> list[str] | None:
    """``torch.ops.aten._foo`` -> ``["torch", "ops", "aten", "_foo"]``; None when the chain
    does not start at a plain name (a call's result, a subscript)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def private_torch_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) of each use of a private torch name in ``source``."""
    tree = ast.parse(source)
    inner: set[int] = set()  # attributes inside a longer chain: the chain is checked whole
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            inner.add(id(node.value))
    torch_names: set[str] = set()  # local names bound to torch or one of its modules
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "torch":
                    continue
                if _private_module(alias.name):
                    found.append((node.lineno, f"import {alias.name}"))
                torch_names.add(alias.asname or "torch")
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] != "torch":
                continue
            private_module = _private_module(node.module)
            if private_module:
                found.append((node.lineno, f"from {node.module} import ..."))
            for alias in node.names:
                if _private(alias.name) and not private_module:
                    found.append((node.lineno, f"from {node.module} import {alias.name}"))
                torch_names.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            chain = _chain(node)
            if chain and chain[0] in torch_names and any(_private(p) for p in chain[1:]):
                found.append((node.lineno, ".".join(chain)))
        elif isinstance(node, ast.Call):
            found.extend(_dynamic_import(node, torch_names))
    return sorted(set(found))


def _dynamic_import(call: ast.Call, torch_names: set[str]) -> list[tuple[int, str]]:
    """``importlib.import_module("torch._dynamo")``, ``__import__(...)``,
    ``getattr(torch, "_C")``."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    args = call.args
    if name in ("import_module", "__import__") and args:
        text = args[0]
        if isinstance(text, ast.Constant) and isinstance(text.value, str) \
                and _private_module(text.value):
            return [(call.lineno, f"{name}({text.value!r})")]
    if name == "getattr" and len(args) >= 2:
        chain = _chain(args[0])
        text = args[1]
        if chain and chain[0] in torch_names and isinstance(text, ast.Constant) \
                and isinstance(text.value, str) and _private(text.value):
            return [(call.lineno, f"getattr({'.'.join(chain)}, {text.value!r})")]
    return []


def _modules_outside_live() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if ALLOWED not in p.parents)


def _uses_in(path: Path) -> list[tuple[int, str]]:
    return private_torch_uses(path.read_text(encoding="utf-8"))


def test_private_torch_names_only_in_live():
    outside = _modules_outside_live()
    assert len(outside) > 50  # the whole package but live/ is read
    found = {str(p.relative_to(PACKAGE.parent)): uses for p in outside
             if (uses := _uses_in(p))}
    assert found == {}, "torch's private names belong in kernelmagic/live/ (behind a " \
        "function named for what it does, e.g. in live/torch_compat.py)"


def test_live_is_where_they_are():
    # The check sees the uses live/ has, so an empty answer elsewhere means something.
    compat = _uses_in(ALLOWED / "torch_compat.py")
    assert any(what.startswith("torch._C.") for _, what in compat)
    memory = _uses_in(ALLOWED / "memory_categories.py")
    assert any("torch.profiler._memory_profiler" in what for _, what in memory)


@pytest.mark.parametrize("source, what", [
    ("import torch._dynamo\n", "import torch._dynamo"),
    ("import torch._inductor.config as c\n", "import torch._inductor.config"),
    ("from torch._C import _profiler\n", "from torch._C import ..."),
    ("from torch.profiler._memory_profiler import MemoryProfile\n",
     "from torch.profiler._memory_profiler import ..."),
    ("from torch import _C\n", "from torch import _C"),
    ("import torch\nx = torch._C._demangle('a')\n", "torch._C._demangle"),
    ("import torch as t\nt._dynamo.reset()\n", "t._dynamo.reset"),
    ("from torch.utils import _pytree\n", "from torch.utils import _pytree"),
    ("import torch\nf = torch.ops.aten._scaled_dot_product_flash_attention\n",
     "torch.ops.aten._scaled_dot_product_flash_attention"),
    ("from torch import autograd\nautograd._profiler_enabled()\n",
     "autograd._profiler_enabled"),
    ("import importlib\nimportlib.import_module('torch._inductor.codecache')\n",
     "import_module('torch._inductor.codecache')"),
    ("import torch\ngetattr(torch, '_C')\n", "getattr(torch, '_C')"),
])
def test_the_check_sees_each_kind_of_use(source, what):
    assert [w for _, w in private_torch_uses(source)] == [what]


@pytest.mark.parametrize("source", [
    "import torch\nprint(torch.__version__, torch.cuda.is_available())\n",
    "advice = 'mark it dynamic: torch._dynamo.mark_dynamic(x, 0)'\n",
    "import asyncio\nasyncio.events._set_running_loop(None)\n",  # not torch
    "import sys\nloaded = 'torch._dynamo' in sys.modules\n",
    "from torch.profiler import profile\nprofile().key_averages()\n",
])
def test_the_check_leaves_public_names_and_text_alone(source):
    assert private_torch_uses(source) == []
