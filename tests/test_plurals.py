"""Counted nouns read right (#28): a count of one never takes a plural noun, nor two a singular one.

Every trace in ``tests/data`` and ``/work/shared/traces`` (when present) is loaded, then
rendered as it is and with its counts rewritten to 0, 1 and 2 per iteration over 1 and 2
iterations: the text report, the HTML report, every view's table, the findings and a
comparison with itself. The words the report counts in are then searched for a number
that disagrees with its noun.
"""

from __future__ import annotations

import re
from dataclasses import fields, is_dataclass, replace
from pathlib import Path

import pytest
from fakes import cpu_result, cuda_result
from loaded import loaded

import kernelmagic
from kernelmagic.core.units import counted
from kernelmagic.results.result import ProfileResult

DATA = Path(__file__).parent / "data"
SHARED = Path("/work/shared/traces")
TRACES = sorted(p for p in DATA.glob("*.json.gz"))
SHARED_TRACES = sorted(SHARED.glob("*.json.gz")) if SHARED.is_dir() else []

#: Nouns the reports count in. "1 <plural>" or "0/2 <singular>" next to one is wrong.
NOUNS = ("call", "kernel", "iteration", "op", "step", "rank", "launch", "sync", "range",
         "region", "allocation", "compile", "recompile", "graph break", "break", "thread",
         "stream", "run", "row", "module", "source location", "source", "event", "warm-up",
         "time", "copy", "point", "core", "instruction", "element", "graph", "tensor")
PLURALS = {"launch": "launches", "copy": "copies", "sync": "syncs"}
_ALT = "|".join(sorted((re.escape(n) for n in NOUNS), key=len, reverse=True))
_PL = "|".join(sorted((re.escape(PLURALS.get(n, n + "s")) for n in NOUNS), key=len,
                      reverse=True))
#: A lone "1" (not 1.5, 21, 1,000, x1, 1/2) before a plural noun.
ONE_PLURAL = re.compile(rf"(?<![\w.,/×x-])1 (?:more )?(?:op |kernel |counter )?(?:{_PL})\b")
#: A lone 0 or 2 before a singular noun that is not the start of a longer word or of a
#: compound noun ("2 op calls", "2 kernel launches", "2 counter ranges").
MANY_SINGULAR = re.compile(rf"(?<![\w.,/×x-])[02] (?:more )?(?:{_ALT})(?![\w-])(?! (?:{_PL})\b)")
#: "graph" and "time" are also words of their own (a "2 graph breaks", "0 time spent").
FALSE_SINGULAR = re.compile(r"[02] (?:graph breaks?|time (?:spent|per|in)|run (?:of|per))")

COUNT_FIELDS = {"count", "ops", "blocks", "iterations"}


def wrong_counts(text: str) -> list[str]:
    """Every place in ``text`` where a count disagrees with its noun, with context."""
    out = []
    for m in ONE_PLURAL.finditer(text):
        out.append(text[max(0, m.start() - 50): m.end() + 10])
    for m in MANY_SINGULAR.finditer(text):
        if FALSE_SINGULAR.match(text, m.start()):
            continue
        out.append(text[max(0, m.start() - 50): m.end() + 10])
    return out


def test_the_search_finds_what_the_issue_saw():
    # The phrases of #28, and their right forms, by hand.
    assert wrong_counts("(1.76 µs per iteration, 1 " "calls per iteration)")
    assert wrong_counts("1.41 ms of CPU work launches 1 " "kernels with a median")
    assert wrong_counts("over 1 " "iterations")
    assert wrong_counts("2 call per iteration")
    assert wrong_counts("inside ops (1 op calls; most: aten::mm)")
    for right in ("1 call per iteration", "launches 1 kernel", "1 iteration", "2 calls",
                  "0 kernels", "21 calls", "1.5 calls", "2 graph breaks", "1 graph break",
                  "1,001 calls", "15 more ops", "1 more op", "2 op calls", "1 op call"):
        assert not wrong_counts(right), right


@pytest.mark.parametrize("n, noun, expected", [
    (0, "call", "0 calls"), (1, "call", "1 call"), (2, "call", "2 calls"),
    (1, "launch", "1 launch"), (1234, "kernel", "1,234 kernels"), (1.5, "call", "1.5 calls"),
])
def test_counted(n, noun, expected):
    plural = PLURALS.get(noun)
    assert counted(n, noun, plural) == expected


def _with_counts(result: ProfileResult, per_iter: int, iters: int) -> ProfileResult:
    """``result`` over ``iters`` iterations with every row's count ``per_iter`` per
    iteration (times unchanged)."""
    def recount(row):
        if not is_dataclass(row):
            return row
        changes = {f.name: per_iter * iters for f in fields(row)
                   if f.name in COUNT_FIELDS and isinstance(getattr(row, f.name), int)
                   and not isinstance(getattr(row, f.name), bool)}
        return replace(row, **changes) if changes else row

    lists = {f.name: [recount(x) for x in getattr(result, f.name)] for f in fields(result)
             if isinstance(getattr(result, f.name), list) and f.name != "timings"}
    timings = (list(result.timings) * 2)[:iters] or [1e-3] * iters
    return replace(result, iters=iters, timings=timings, **lists)


def _renderings(result: ProfileResult) -> dict[str, str]:
    from kernelmagic.render.html import html_report
    from kernelmagic.render.text import render_table, text_report
    from kernelmagic.render.views import view_tables

    out = {"text": text_report(result), "html": html_report(result),
           "findings": "\n".join(f"{f.title}: {f.evidence}. {f.suggestion}"
                                 for f in result.findings()),
           "compare": result.compare(result).table(None)}
    for title, view in view_tables(result):
        out[f"view {title}"] = render_table(view, None) if hasattr(view, "columns") else str(view)
    return out


def _check(result: ProfileResult, label: str) -> None:
    bad = []
    for per_iter in (0, 1, 2):
        for iters in (1, 2):
            variant = _with_counts(result, per_iter, iters)
            for where, text in _renderings(variant).items():
                bad += [f"{label} ({per_iter}/it, {iters} it) {where}: ...{s}..."
                        for s in wrong_counts(text)]
    for where, text in _renderings(result).items():
        bad += [f"{label} as recorded, {where}: ...{s}..." for s in wrong_counts(text)]
    assert not bad, "\n".join(bad[:20])


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_no_count_disagrees_with_its_noun_on_the_test_traces(path):
    _check(loaded(path), path.name)


@pytest.mark.parametrize("path", SHARED_TRACES, ids=lambda p: p.name)
def test_no_count_disagrees_with_its_noun_on_the_shared_traces(path):
    _check(loaded(path), path.name)


@pytest.mark.parametrize("make", [cpu_result, cuda_result], ids=["cpu-fake", "gpu-fake"])
def test_no_count_disagrees_with_its_noun_on_hand_made_results(make):
    _check(make(), make.__name__)


def test_many_ranks_count_their_ranks_and_steps():
    from kernelmagic.render.text import text_report

    run = kernelmagic.load(DATA / "ranks")
    texts = [run.summary(), run.table(), repr(run),
             "\n".join(f"{f.title}: {f.evidence}. {f.suggestion}" for f in run.findings())]
    texts += [text_report(r) for r in run.ranks.values()]
    bad = [s for t in texts for s in wrong_counts(t)]
    assert not bad, bad
