"""A figure is computed once and printed the same way everywhere (#43): every real trace,
rendered as text, HTML and the widget, prints each share by ``percent``'s one rule (see
``test_units.py``), and each share it names (idle, compute, a row's share of self time, a
finding's saving) reads as ``percent`` of the one field the result holds for it.

The symptom this guards against: "idle 100%" in the summary line and "99.9% idle" two
lines below, on the same report (two formatters, two roundings of one field)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from loaded import loaded
from test_units import RULE

from kernelmagic.core.units import percent
from kernelmagic.render.chart import MAX_LABEL, chart_texts
from kernelmagic.render.html import html_report
from kernelmagic.render.table import row_label
from kernelmagic.render.text import text_report

DATA = Path(__file__).parent / "data"
SHARED = Path(__file__).parents[2] / "shared" / "traces"
TRACES = sorted(DATA.glob("*.json.gz")) + sorted(SHARED.glob("*.json.gz"))

#: A printed share: "12%", "8.3%", "< 0.1%", "> 99.9%" (and "-25%").
P = r"(?:[<>] )?-?\d+(?:\.\d+)?%"
TOKEN = re.compile(rf"(?<![\w.]){P}")
#: Where a report names the idle share: the summary ("idle 98% of the iteration", on the
#: CPU "other (Python between ops, waits) 84%"), the GPU line ("(99.8% idle)"), the
#: findings ("The GPU is idle 98%", "it idles 98%", "Python between ops takes 84%").
IDLE = [re.compile(p) for p in (
    rf"\bidles? ({P})", rf"({P}) idle\b", rf"\(Python between ops, waits\) ({P})",
    rf"Python between ops takes ({P}) of the iteration")]
#: The critical path's line gives its own composition ("idle 94%" of the median
#: iteration's path), another quantity than the breakdown's idle share of the mean
#: iteration: its figures are the path's (``views/critical_path.py``).
PATH_LINE = "Median iteration's critical path:"
GPU_SUMMARY = re.compile(rf"(?:GPU|MTIA|XPU|HPU|PrivateUse1|device): compute ({P}), "
                         rf"(?:communication ({P})[^,]*, )?"
                         rf"memcpy/memset ({P}), idle ({P}) of the iteration")
CPU_SUMMARY = re.compile(rf"CPU: ops ({P}), (?:communication ({P})[^,]*, )?")


class _Visible(HTMLParser):
    """The text a browser shows: tags dropped (their attributes' "100%" widths with
    them), ``<style>``/``<script>``/``<svg>`` skipped, blocks on lines of their own."""

    INLINE = frozenset({"wbr", "b", "i", "span", "a", "code", "small"})
    HIDDEN = frozenset({"style", "script", "svg"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.hidden += tag in self.HIDDEN
        if tag not in self.INLINE:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        self.hidden -= tag in self.HIDDEN
        if tag not in self.INLINE:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)


def visible(html: str) -> str:
    parser = _Visible()
    parser.feed(html)
    return "".join(parser.parts)


def widget_text(result) -> str:
    """Every HTML the widget holds, shown as text (the views' tables included)."""
    from kernelmagic.render.widget import report_widget

    out, todo = [], [report_widget(result, None)]
    while todo:
        w = todo.pop()
        todo += list(getattr(w, "children", ()))
        if isinstance(getattr(w, "value", None), str):
            out.append(visible(w.value))
    return "\n".join(out)


def renderings(result) -> dict[str, str]:
    """The report as each viewer shows it, and the chart's texts."""
    title, labels = chart_texts(result)
    shown = {"text": text_report(result), "html": visible(html_report(result)),
             "chart": "\n".join([title, *labels])}
    try:
        import ipywidgets  # noqa: F401
    except ImportError:  # pragma: no cover - a test dependency
        return shown
    return shown | {"widget": widget_text(result)}


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def report(request):
    result = loaded(request.param)
    return result, renderings(result)


def test_every_share_printed_follows_the_one_rule(report):
    result, shown = report
    for where, text in shown.items():
        for token in TOKEN.findall(text):
            assert RULE.match(token), f"{result.name} ({where}): {token!r} is not percent()'s"


def test_the_idle_share_reads_the_same_everywhere(report):
    # The summary, the GPU line and the findings read ``breakdown.share("idle")``.
    result, shown = report
    parts = result.breakdown
    assert parts is not None and parts.wall > 0
    expected = percent(parts.share("idle"))
    printed = {(where, m) for where, text in shown.items() for line in text.splitlines()
               if not line.startswith(PATH_LINE) for pattern in IDLE
               for m in pattern.findall(line)}
    assert ("text", expected) in printed  # the summary names it at least
    assert {m for _, m in printed} == {expected}, printed
    assert (expected == "100%") == (parts.idle == parts.wall)


def test_the_summary_shares_are_the_breakdowns(report):
    result, shown = report
    parts = result.breakdown
    share = lambda name: percent(parts.share(name))  # noqa: E731
    first = shown["text"].splitlines()[0]
    if parts.device == "cpu":
        (compute, comm) = CPU_SUMMARY.search(first).groups()
        assert compute == share("compute")
    else:
        compute, comm, memcpy, idle = GPU_SUMMARY.search(first).groups()
        assert (compute, memcpy, idle) == (share("compute"), share("memcpy"), share("idle"))
    assert comm == (share("communication") if parts.communication > 0 else None)
    # The same line in the HTML and the widget, character for character.
    for where in ("html", "widget"):
        if where in shown:
            assert first in shown[where], where


def test_a_rows_share_is_the_same_in_the_table_the_chart_and_the_findings(report):
    result, shown = report
    expected = {row_label(r): percent(result.share(r)) for r in result.rows}
    side = "% self device" if result.profiles_device else "% self CPU"
    table = result.table(None).splitlines()
    titles = re.split(r"\s{2,}", table[0])
    column = titles.index(side)
    checked = 0
    for line in table[2:]:
        cells = re.split(r"\s{2,}", line)
        if len(cells) == len(titles) and cells[0] in expected:
            assert cells[column] == expected[cells[0]], line
            checked += 1
    assert checked >= min(len(result.rows), 20)
    # The chart's bars, by the default sort (a self time for every trace).
    for label in shown["chart"].splitlines()[1:]:
        name, figure, _ = label.split(" · ")
        if len(name) < MAX_LABEL and name in expected:
            assert figure == expected[name], label
    for finding in result.findings():
        if finding.rule == "dominant_op":
            (key,) = finding.rows
            assert finding.evidence.startswith(f"{key} takes {expected[key]} of self time")


def test_a_findings_saving_is_its_share(report):
    result, shown = report
    for finding in result.findings():
        if finding.saving:
            assert finding.saving.endswith(f"({percent(finding.saves_share)})")
            assert finding.saving in shown["text"] and finding.saving in shown["html"]


@pytest.mark.parametrize("folder", [DATA / "ranks"] + ([SHARED / "ranks"]
                                                       if (SHARED / "ranks").is_dir() else []),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_ranks_report_prints_shares_by_the_one_rule(folder):
    import kernelmagic

    bundle = kernelmagic.load(folder)._repr_mimebundle_(include=["text/plain", "text/html"])
    for where, text in (("text", bundle["text/plain"]), ("html", visible(bundle["text/html"]))):
        tokens = TOKEN.findall(text)
        assert tokens  # overlaps and the communication-bound finding
        assert all(RULE.match(t) for t in tokens), (where, tokens)


def test_some_rows_share_is_all_only_when_the_rest_have_none():
    # Shares 0.1, 0.2 and 0.7 (and one row of none) sum to 0.9999999999999999 from the
    # largest: the rows' share is exactly 1 when nothing with time is left out.
    from fakes import cpu_result

    from kernelmagic.core.rows import OpRow

    times = [100.0, 200.0, 700.0, 0.0]
    rows = [OpRow(f"op{i}", 1, t, t) for i, t in enumerate(times)]
    result = cpu_result(rows=rows)
    assert sum(result.share(r) for r in reversed(rows)) != 1.0  # why share_of exists
    assert result.share_of(rows) == result.share_of(rows[:3]) == 1.0
    assert percent(result.share_of(rows[1:3])) == "90%"
    tiny = cpu_result(rows=[*rows[:3], OpRow("tiny", 1, 1e-9, 1e-9)])
    assert 0.9995 < tiny.share_of(tiny.rows[:3]) < 1.0
    assert percent(tiny.share_of(tiny.rows[:3])) == "> 99.9%"
    assert result.share_of([]) == 0.0


def test_the_symptom_of_43_is_gone():
    # a100_alexnet's GPU idles 43.4 s of a 43.4 s iteration, but not all of it: 66 ms of
    # GPU work. Before, the summary said "idle 100%" and the GPU line "99.8% idle".
    result = loaded(DATA / "a100_alexnet.json.gz")
    text = text_report(result)
    parts = result.breakdown
    assert 0.998 <= parts.share("idle") < 0.9985
    assert "idle 99.8% of the iteration" in text and "(99.8% idle)" in text
    assert "100%" not in text
