"""README's and the docs' examples are what the code prints today, and their links resolve.

Each example in README.md or a page of docs/ is a fenced block right after a marker line
``<!-- example: NAME -->`` (each NAME once across all of them); ``EXAMPLES`` below says how
each is made:

- from a trace file in ``tests/data`` (the same bytes every time): the block must equal the
  command's output exactly;
- from a live run on this machine (timings differ from run to run): the block must have
  the output's shape: the same lines once every figure is masked, for the lines that do not
  depend on which op took longest (the summary, headings and column titles), and op names
  that the run really has.

``KM_UPDATE_README=1 python -m pytest tests/test_readme_examples.py`` rewrites the blocks
from a fresh run, in whichever file holds each (then review the diff: a live run's figures
are that machine's).

``test_docs_links_resolve``: every relative link in those files names a file that exists,
and every ``#anchor`` a heading of the page it points at.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_run import run_cli
from workloads import block_and_input

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = REPO / "docs"
MARKER = re.compile(r"^<!-- example: ([\w-]+) -->\n```\n(.*?)```\n", re.M | re.S)
UPDATE = os.environ.get("KM_UPDATE_README") == "1"


def _cli(*args: str) -> str:
    out = run_cli(*args, cwd=REPO)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _block_cell() -> Callable[[], None]:
    import torch

    block, x = block_and_input()

    def cell() -> None:
        with torch.inference_mode():
            block(x)

    return cell


def _mlp_cell() -> Callable[[], None]:
    """The seed Block's MLP (``block.ff``) on the Block's input: its matmuls hold most of
    the time on any machine, so the report leads with a finding that prices them."""
    import torch

    block, x = block_and_input()

    def cell() -> None:
        with torch.inference_mode():
            block.ff(x)

    return cell


def report_example(full: bool = False) -> str:
    import kernelmagic
    from kernelmagic.render.text import findings_text

    result = kernelmagic.profile(_mlp_cell(), iters=10, warmup=3, name="block.ff")
    table = result.table(None if full else 8)
    # in the report's order: what to do first (the findings), then the table
    parts = [result.summary(), findings_text(result), table]
    return "\n\n".join(p for p in parts if p) + "\n"


def modules_example(full: bool = False) -> str:
    import torch

    import kernelmagic
    from kernelmagic.render.text import render_table
    from kernelmagic.render.views import module_table

    block, x = block_and_input()

    def cell() -> None:
        with torch.inference_mode():
            block(x)

    result = kernelmagic.profile(cell, iters=3, warmup=1, name="block", modules=True)
    return "[modules]\n" + render_table(module_table(result), None) + "\n"


def roofline_example(full: bool = False) -> str:
    import kernelmagic
    from kernelmagic.render.roofline import roofline_table, verdict_line
    from kernelmagic.render.text import render_table

    result = kernelmagic.profile(_block_cell(), iters=10, warmup=3, name="block",
                                 roofline=True)
    found = [f for f in result.findings() if f.rule in _roofline_rules()]
    table = render_table(roofline_table(result), None if full else 6)
    lines = [verdict_line(result), "", "[roofline]", table]
    if found:
        lines += ["", "Findings:", *(f"- {f}" for f in found)]
    return "\n".join(lines) + "\n"


def _roofline_rules() -> set[str]:
    from kernelmagic.findings.roofline import RULES

    return {rule.__name__ for rule in RULES}


def compare_example(full: bool = False) -> str:
    import torch

    import kernelmagic
    from kernelmagic.render.compare import comparison_text

    cell = _block_cell()

    def bf16() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            cell()

    before = kernelmagic.profile(cell, iters=10, warmup=3, name="fp32")
    after = kernelmagic.profile(bf16, iters=10, warmup=3, name="bf16")
    return comparison_text(after.compare(before), limit=None if full else 8) + "\n"


def steps_example(full: bool = False) -> str:
    import torch
    from workloads import Decoder, generate

    import kernelmagic
    from kernelmagic.render.steps import group_table, step_table, steps_notes
    from kernelmagic.render.text import render_table

    torch.manual_seed(0)
    model = Decoder().eval()
    prompt = torch.randint(0, 128, (1, 64))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the demo notebook: too small a model to gain from more
    try:
        result = kernelmagic.profile(lambda: generate(model, prompt), iters=5, warmup=1,
                                     name="generate", steps=model, memory=True)
    finally:
        torch.set_num_threads(threads)
    return "\n".join(["[steps]", render_table(group_table(result)), "", "[steps in order]",
                      render_table(step_table(result), None), "", *steps_notes(result)]) + "\n"


def nccl_trace_example(full: bool = False) -> str:
    return _cli("show", "tests/data/a100_nccl_rank.json.gz", "--limit", "6")


#: name -> (how to make it, whether it is a live run)
def what_if_example(full: bool = False) -> str:
    import kernelmagic

    result = kernelmagic.load(REPO / "tests" / "data" / "a100_nccl_rank.json.gz")
    asks = [("{'aten::convolution_backward': 2.0}", {"aten::convolution_backward": 2.0}, "both"),
            ("{'aten::convolution_backward': 2.0}", {"aten::convolution_backward": 2.0},
             "device"),
            ("{'nccl:all_reduce': inf}", {"nccl:all_reduce": float("inf")}, "both"),
            ("{'aten::empty': inf, 'aten::view': inf}",
             {"aten::empty": float("inf"), "aten::view": float("inf")}, "cpu")]
    lines = [f">>> result.what_if({text}, side={side!r})\n{result.what_if(ask, side)}"
             for text, ask, side in asks]
    top = sorted(result.rows, key=lambda r: -r.max_gain_us)[:5]
    lines.append(">>> # the five rows worth the most: row.max_gain_us\n" + "\n".join(
        f"{r.key:<28} {r.max_gain_us:>10,.1f} µs" for r in top))
    return "\n".join(lines) + "\n"


EXAMPLES: dict[str, tuple[Callable[..., str], bool]] = {
    "what-if": (what_if_example, False),
    "report": (report_example, True),
    "modules": (modules_example, True),
    "roofline": (roofline_example, True),
    "compare": (compare_example, True),
    "steps": (steps_example, True),
    "nccl-trace": (nccl_trace_example, False),
}

#: A figure and its unit; a share at an edge of ``percent``'s rule ("< 0.1%", "> 99.9%")
#: is a figure like any other.
_NUMBER = re.compile(r"(?:[<>] (?=\d))?[−+-]?\d[\d,.]*(?:e[+-]?\d+)?"
                     r"(?:\s?(?:[kMGTP]?(?:B/s|B|FLOP/s)|[kMGTP]\b|ns|µs|ms|s|%|x))?")


#: The profiler's cost reads one of two ways, by its sign on that run (on a loaded machine the
#: profiled iterations can come out faster): one shape.
_OVERHEAD = re.compile(r"the (?:best profiled iteration|profiled median) ran # faster"
                       r"|profiling adds # \((?:best against best|medians)\)")


def masked(line: str) -> str:
    """A line with every figure replaced by ``#`` and runs of blanks by one space."""
    line = re.sub(r"\s+", " ", _NUMBER.sub("#", line)).strip()
    return _OVERHEAD.sub("the profiler's cost #", line)


def _pages() -> list[Path]:
    """README.md and every page of docs/: where examples live."""
    return [README, *sorted(DOCS.glob("*.md"))]


def _found() -> list[tuple[str, Path, str]]:
    """(name, file, block) of every example, in file order."""
    return [(m.group(1), page, m.group(2))
            for page in _pages() for m in MARKER.finditer(page.read_text(encoding="utf-8"))]


def _blocks() -> dict[str, str]:
    return {name: block for name, _, block in _found()}


def _file_of(name: str) -> Path:
    return next(page for found, page, _ in _found() if found == name)


def test_every_example_has_a_maker_and_every_maker_an_example() -> None:
    names = [name for name, _, _ in _found()]
    assert len(names) == len(set(names)), f"an example name is used twice: {sorted(names)}"
    assert set(names) == set(EXAMPLES)


def _stable_lines(text: str) -> list[str]:
    """The lines whose shape does not depend on which op took longest: the first (a
    summary or a heading), headings in brackets, column titles and rules under them."""
    lines = text.splitlines()
    keep = [lines[0]] if lines else []
    for i, line in enumerate(lines[1:], start=1):
        after_title = i + 1 < len(lines) and set(lines[i + 1].replace(" ", "")) == {"-"}
        if line.startswith("[") or after_title:
            keep.append(line)
    return [_RAISED.sub("", _VERDICT.sub(r"\1 <verdict> ·", masked(x))) for x in keep]


#: A comparison's verdict ("1.84x faster, beyond the noise of both runs", "within the noise:
#: ...") is that run's timing, like its figures: masked too.
_VERDICT = re.compile(r"^(\S+ vs \S+:) .*? ·")
#: The roofline's note that a roof was raised to an op's rate: whether it appears depends on
#: how fast the machine was when the peaks were measured (a loaded CI machine measures less).
_RAISED = re.compile(r"(?: · |; )[\w#, ]+ roofs? raised to the fastest op's rate \([^)]*\)")


def _row_names(text: str) -> set[str]:
    """The first cell of each table row (after a ``---`` rule, up to a blank line)."""
    names, inside = set(), False
    for line in text.splitlines():
        if set(line.replace(" ", "")) == {"-"}:
            inside = True
            continue
        if not line.strip() or line.startswith("..."):
            inside = False
            continue
        if inside:
            names.add(line.split("  ")[0].strip())
    return names


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_readme_example_is_what_the_code_prints(name: str) -> None:
    make, live = EXAMPLES[name]
    shown = _blocks()[name]
    if UPDATE:
        fresh = make()
        page = _file_of(name)
        text = page.read_text(encoding="utf-8")
        text = re.sub(rf"(<!-- example: {re.escape(name)} -->\n```\n).*?(```\n)",
                      lambda m: m.group(1) + fresh + m.group(2), text, flags=re.S)
        page.write_text(text, encoding="utf-8")
        return
    if not live:
        assert shown == make()
        return
    fresh = make(full=True)  # every row, so that any op the example lists can be found
    assert _stable_lines(shown) == _stable_lines(fresh)
    # Every op the example lists is one this code really reports for the same cell (the
    # order and the figures are that run's).
    assert _row_names(shown) <= _row_names(fresh), name


# --- links ------------------------------------------------------------------------------

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^```.*?^```[^\n]*$", re.M | re.S)


def _prose(text: str) -> str:
    """``text`` without fenced blocks and inline code, where a link is no link."""
    return re.sub(r"`[^`\n]*`", "", _FENCE.sub("", text))


def _anchors(page: Path) -> set[str]:
    """The ``#anchors`` GitHub gives the headings of ``page`` (its slugger's rule)."""
    seen: dict[str, int] = {}
    for line in _FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        heading = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        if count:
            seen[f"{slug}-{count}"] = 1
    return set(seen)


def test_docs_links_resolve() -> None:
    broken = []
    for page in [*_pages(), REPO / "benchmarks" / "README.md"]:
        if not page.exists():
            continue
        for target in _LINK.findall(_prose(page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):  # https:, mailto:: not ours to check
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(REPO)}: {target}"
            if not linked.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                broken.append(f"{where} (no such heading)")
    assert not broken, "\n".join(broken)
