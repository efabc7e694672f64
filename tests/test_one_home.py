"""Ideas that had two or three homes which came to disagree have one now (issue 45): this
scan of the package fails when a second copy appears. Ratios and shares are written only by
``core/units.py`` (``tests/test_units.py`` scans for those)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from kernelmagic.core.memory_rows import (
    CATEGORIES,
    MEMORY_CATEGORIES,
    MemoryPeakRow,
    MemoryPoint,
)
from kernelmagic.views.gpu_idle import CAUSES, EDGE, HTOD_COPY, LAUNCH_GAP

PACKAGE = Path(__file__).resolve().parent.parent / "kernelmagic"


def _modules() -> list[tuple[str, ast.Module]]:
    return [(path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text()))
            for path in sorted(PACKAGE.rglob("*.py"))]


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring constants of a module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _strings(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, text) of every string constant that is not a docstring."""
    docs = _docstrings(tree)
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def _listed(node: ast.AST) -> list[str]:
    """The string elements of a tuple, list or set literal, or a dict literal's keys."""
    items = (node.keys if isinstance(node, ast.Dict)
             else node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [])
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]


MEMORY_HOME = "core/memory_rows.py"
#: core/timing.py's thresholds that decide whether a change is beyond the noise.
NOISE_RULE = {"MIN_EFFECT", "MIN_PAIRS", "MIN_UNPAIRED", "MIN_ITERS", "LOAD_DIFFERS"}


def test_memory_categories_are_declared_once():
    # What a category is, how it reads and its colour: core/memory_rows.py only. Elsewhere
    # a category is named where a rule needs it (CATEGORIES.index("gradient"), a rule's
    # order of a few), never listed whole, and never reworded ("optimizer state").
    words = {c.words for c in MEMORY_CATEGORIES if " " in c.words}
    found = []
    for name, tree in _modules():
        if name == MEMORY_HOME:
            continue
        found += [f"{name}:{n.lineno}: lists memory categories" for n in ast.walk(tree)
                  if 2 * sum(item in CATEGORIES for item in _listed(n)) > len(CATEGORIES)]
        found += [f"{name}:{line}: {text!r}" for line, text in _strings(tree) if text in words]
    assert not found, f"declare memory categories in {MEMORY_HOME}:\n" + "\n".join(found)


def test_the_memory_records_have_a_field_per_category():
    # declared once (core/memory_rows.py: with_category_bytes), after each record's own
    fields = [f for f in MemoryPoint.__dataclass_fields__ if f not in ("device", "iteration",
                                                                        "t_us")]
    assert tuple(fields) == CATEGORIES
    assert tuple(MemoryPeakRow.__dataclass_fields__)[-len(CATEGORIES):] == CATEGORIES
    assert tuple(MemoryPeakRow.__dataclass_fields__)[:3] == ("device", "iteration", "t_us")
    assert all(MemoryPoint.__dataclass_fields__[c].metadata["unit"] == "bytes"
               for c in CATEGORIES)


def test_why_the_gpu_waits_has_one_taxonomy():
    # The gpu idle view's causes (views/gpu_idle.py) are the only ones; the finding and
    # everything that quotes a cause reads them from there.
    assert len(CAUSES) == len(set(CAUSES)) == 5
    spelled = {EDGE, HTOD_COPY, LAUNCH_GAP}
    found = [f"{name}:{line}: {text!r}" for name, tree in _modules()
             if name != "views/gpu_idle.py"
             for line, text in _strings(tree) if text in spelled]
    assert not found, "import the cause from views/gpu_idle.py:\n" + "\n".join(found)


def test_one_definition_of_each_findings_renderer():
    # The many-ranks report had its own findings_html, which dropped the saving.
    defined = Counter(node.name for _, tree in _modules() for node in tree.body
                      if isinstance(node, ast.FunctionDef))
    assert defined["findings_html"] == 1 and defined["findings_text"] == 1


def test_one_noise_rule():
    # Whether a run is too spread, or a change beyond the noise: core/timing.py's rules.
    found = []
    for name, tree in _modules():
        if name == "core/timing.py":
            continue
        for node in ast.walk(tree):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            found += [f"{name}:{node.lineno}: {t.id}" for t in targets
                      if isinstance(t, ast.Name) and ("NOIS" in t.id or t.id in NOISE_RULE)]
    assert not found, "the noise rule lives in core/timing.py:\n" + "\n".join(found)


def test_one_home_for_matplotlib_figures():
    # The bar chart, comparison, ranks and roofline charts each made their Figure and its Agg
    # canvas: render/chart.py's new_figure makes them now (and figure_png writes them).
    makers = sorted({f"{name}:{node.lineno}" for name, tree in _modules()
                     for node in ast.walk(tree)
                     if isinstance(node, ast.Name) and node.id in ("Figure", "FigureCanvasAgg")
                     and name != "render/chart.py"})
    assert not makers, "figures are made by render/chart.py: new_figure\n" + "\n".join(makers)


def test_one_home_for_cutting_a_label_at_its_end():
    # Four renderers, a view and the record reader cut a label with "…" by hand:
    # core/units.py's cut_end does it.
    cut = sorted(f"{name}:{node.lineno}" for name, tree in _modules()
                 if name != "core/units.py"
                 for node in ast.walk(tree)
                 if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)
                 and isinstance(node.left, ast.Subscript)  # text[: width - 1] + "…"
                 and isinstance(node.right, ast.Constant) and node.right.value == "…")
    assert not cut, "core/units.py: cut_end cuts a label at its end\n" + "\n".join(cut)
