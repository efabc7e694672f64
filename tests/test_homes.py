"""Each name has one home: it is imported from the module that defines it, never through
another module that merely imported it (an alias shim), and no ``__all__`` lists a name its
module did not define. ``kernelmagic/__init__.py``'s lazy public names (``_LAZY``) are the
one exception, by design: they point at their homes."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import kernelmagic

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ("kernelmagic", "tests", "benchmarks", "tools")


def _module_file(module: str) -> Path | None:
    base = ROOT / module.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


@cache
def _defined(module: str) -> frozenset[str]:
    """Names a module defines itself (functions, classes, assignments, submodules)."""
    path = _module_file(module)
    assert path is not None, module
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    if path.name == "__init__.py":
        names.update(p.stem for p in path.parent.glob("*.py"))
        names.update(p.name for p in path.parent.iterdir() if p.is_dir())
    if module == "kernelmagic":
        names.update(kernelmagic._LAZY)
    return frozenset(names)


def _python_files() -> list[Path]:
    return [p for folder in SCANNED for p in sorted((ROOT / folder).rglob("*.py"))]


def test_every_name_is_imported_from_its_home():
    shims = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                    and node.module.split(".")[0] == "kernelmagic"
                    and _module_file(node.module) is not None):
                continue
            shims += [f"{path.relative_to(ROOT)}:{node.lineno}: {a.name} from {node.module}"
                      for a in node.names if a.name not in _defined(node.module)]
    assert not shims, "import these from the module that defines them:\n" + "\n".join(shims)


def test_no_module_re_exports_a_name():
    found = []
    for path in sorted((ROOT / "kernelmagic").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                found += [f"{module}: {e.value}" for e in node.value.elts
                          if e.value not in _defined(module)]
    assert not found, "__all__ lists names defined elsewhere:\n" + "\n".join(found)


def test_the_public_names_point_at_their_homes():
    for name, module in kernelmagic._LAZY.items():
        assert name in _defined(module), (name, module)
        assert getattr(kernelmagic, name).__module__ == module, name
