"""Each view declared once: its option, its record, its tables, its picture, its findings.

A view is one ``ViewSpec``, registered with ``register``. Everything else reads the
declaration: ``build_result`` builds each view's record with ``build`` (when its ``option``
is asked for) and keeps it whole in ``ProfileResult.view_records``; ``to_pandas`` lists the
record's ``frames`` (a frame's columns are its row dataclass's fields, their units in the
fields' metadata: ``core/records.py: unit``); the text, HTML and widget reports show the
tables ``tables`` makes, ``notes`` above them and ``picture`` above the first table (the
widget: in the same tab). The renderer functions are named by dotted paths
(``"kernelmagic.render.steps:steps_tables"``), resolved by the render layer when a report
is drawn, so this module, below the results and the renderers, imports neither.

The built-in views are declared in ``views/specs.py``, in the order the reports list them;
a view of its own module registers on import (every module of ``kernelmagic.views`` is
imported when the registry is first read) and comes after them, by ``order``. Such a view
may declare its option here too (``flag``, ``help``): ``view_options`` gives it to the
magic (its flag and its ``%%profile?`` line) and to ``profile()`` (its keyword), and
``--nsight`` refuses it, like every view's option (a view is built from torch's profiler
events, which an ``--nsight`` run does not record).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, make_dataclass
from functools import cache
from typing import Any

from kernelmagic.core.options import Option

__all__ = ["Frame", "ViewInputs", "ViewSpec", "register", "rows_record", "view_options",
           "view_spec", "view_specs"]


@dataclass(frozen=True)
class Frame:
    """One list of rows a record holds, as ``to_pandas(name)`` gives it: ``rows`` names the
    record's attribute, ``row`` the row dataclass (its fields are the columns; a field's
    ``metadata["unit"]`` its unit, ``metadata["column"] = False``: not a column)."""

    name: str
    rows: str
    row: type


def rows_record(name: str, row: type, doc: str, module: str = __name__,
                note: bool = False) -> type:
    """The record of a view that holds one list of ``row`` and nothing else (with ``note``,
    a line of text too): a frozen dataclass ``name`` with the field ``rows: list[row]``
    (empty by default), and ``note: str`` ("" by default)."""
    fields: list[Any] = [("rows", list[row], field(default_factory=list))]
    if note:
        fields.append(("note", str, ""))
    record = make_dataclass(name, fields, frozen=True, namespace={"__doc__": doc})
    record.__module__ = module
    return record


@dataclass(frozen=True)
class ViewInputs:
    """What ``build_result`` hands each view's ``build``: the event table (with
    ``derive_links`` applied), the tree's ``Figures``, the iterations' (start, end) ns
    windows, the run's name, the views asked for, whether a device was profiled, the index
    of the median iteration, the profiled code's file and its cell label, and ``extra``:
    what only some views take (``steps_target``, ``memory_ledger``, ``python_samples``, ...;
    see ``build_result``)."""

    table: Any
    figures: Any
    windows: Sequence[tuple[int, int]]
    name: str
    views: Sequence[str] = ()
    on_device: bool = False
    median: int = 0
    source_file: str | None = None
    cell_label: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ViewSpec:
    """A view, declared once.

    - ``name``: its key in ``ProfileResult.view_records`` (and ``result.view(name)``).
    - ``record``: the record's dataclass (fields of JSON-friendly declared types, defaults
      for all: the default record is what a result without the view holds).
    - ``build``: the record from ``ViewInputs`` (None: another step sets it, as the live
      runner does for ``--roofline``, ``--counters`` and ``--try``).
    - ``option``: the ``ProfileOptions`` field that asks for it ("" when it is always built),
      or, with ``flag``, the name of the option the view declares itself.
    - ``flag``, ``help``: the option's flag (``"--threads"``) and its one-line help, for a
      view that declares its own option (no ``ProfileOptions`` field: ``more_views``).
    - ``frames``: its lists of rows for ``to_pandas``.
    - ``tables``: ``"module:function"`` of ``(result) -> [(title, Table or note)]``.
    - ``notes``: ``"module:function"`` of ``(result) -> [one-line notes]``.
    - ``picture``: ``"module:function"`` of ``(result) -> Picture | None``, drawn once per
      report and shown above the view's first table (in its tab in the widget).
    - ``findings``: the rules (``findings/``) that read the record, by name.
    - ``order``: where the reports list it (the built-ins' is their place in ``specs.py``).
    """

    name: str
    record: type
    build: Callable[[ViewInputs], Any] | None = None
    option: str = ""
    flag: str = ""
    help: str = ""
    frames: tuple[Frame, ...] = ()
    tables: str = ""
    notes: str = ""
    picture: str = ""
    findings: tuple[str, ...] = ()
    order: int = 1000

    def asked(self, views: Sequence[str]) -> bool:
        """Whether ``build_result`` builds it for ``views``: always without an option."""
        return not self.option or self.option in views


_SPECS: dict[str, ViewSpec] = {}


def register(spec: ViewSpec) -> ViewSpec:
    """Add ``spec`` (replacing one of the same name: a module imported again)."""
    if spec.flag and not (spec.option and spec.help):
        raise ValueError(f"view {spec.name}: a flag needs its option's name and help")
    _SPECS[spec.name] = spec
    return spec


@cache
def _load_view_modules() -> None:
    """Import every module of ``kernelmagic.views`` once, so each registers its views."""
    import kernelmagic.views as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")


def view_specs() -> list[ViewSpec]:
    """Every registered view, in the reports' order (equal orders: as registered)."""
    _load_view_modules()
    return sorted(_SPECS.values(), key=lambda spec: spec.order)  # a stable sort


def view_spec(name: str) -> ViewSpec | None:
    """The view registered as ``name``, or None."""
    _load_view_modules()
    return _SPECS.get(name)


def view_options() -> tuple[Option, ...]:
    """The options the views registered so far declare themselves (``flag``), as the magic
    and ``profile()`` read options: deeper views that need torch's profiler.

    Only views of modules already imported: the built-in views declare no flag (their
    options are ``ProfileOptions`` fields), so ``%load_ext`` need not import every view
    module (about 80 ms); a view module of one's own is imported before ``%load_ext``."""
    return tuple(Option((spec.flag,), spec.help, view=True, needs_profiler=True,
                        name=spec.option)
                 for spec in _SPECS.values() if spec.flag)
