"""Short kernel names that stay different: what a table shows in place of a C++ signature.

A GPU kernel's name is often a demangled C++ signature hundreds of characters long
(``void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, ...>
(int, ...)``). Cut at a fixed width, kernels that differ only in their template arguments
look the same. ``short_names`` first drops what never tells kernels apart (the return type,
the parameter list, namespaces, the ``{lambda()#2}::operator()() const`` chains of
lambdas), then, for a name still too long, keeps its head and the part where it differs
from the most similar other name of the table, with "…" where text was cut. Different full
names always get different short names. The full name stays in ``result.kernels`` (and in
the HTML table's tooltips).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from itertools import pairwise
from os.path import commonprefix

#: The widest short name: the text table's name column (``render/text.py``).
NAME_WIDTH = 60
ELLIPSIS = "…"

_LEADING_VOID = re.compile(r"^void\s+")
_OPERATOR_CALL = re.compile(r"::operator\(\)\(\)\s*const::")
_LAMBDA = re.compile(r"\{lambda\(([^(){}]*)\)#\d+\}")
_LAMBDA_CHAIN = re.compile(r"(?:lambda\([^()]*\)::)+(?=lambda\()")
_NAMESPACE = re.compile(r"(?<!\w)(?:\(anonymous namespace\)|[A-Za-z_]\w*)::(?!lambda\()"
                        r"(?=[A-Za-z_~(])")
_CLOSING = re.compile(r">\s+>")
_SPACES = re.compile(r"\s+")


def cut_middle(text: str, width: int) -> str:
    """``text`` at most ``width`` characters: its head and its tail with "…" between
    (``aten::_scaled_dot_pr…attention``), where the end of a name tells most apart."""
    if len(text) <= width:
        return text
    tail = (width - 1) // 2
    return text[: width - 1 - tail] + ELLIPSIS + text[len(text) - tail:]


def _matching_open(text: str, close: int) -> int:
    """The index of the "(" that the ")" at ``close`` closes (-1 when unbalanced)."""
    depth = 0
    for i in range(close, -1, -1):
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _drop_parameters(text: str) -> str:
    """``f<int>(float*, int)`` -> ``f<int>``; a label such as ``Memcpy HtoD (Host -> Device)``
    (a space before its parenthesis) is kept whole."""
    if not text.endswith(")"):
        return text
    start = _matching_open(text, len(text) - 1)
    if start > 0 and (text[start - 1].isalnum() or text[start - 1] in "_>"):
        return text[:start]
    return text


def _drop_scoped_parameters(text: str) -> str:
    """``launch_clamp_scalar(TensorIteratorBase&, Scalar)::lambda(float)`` ->
    ``launch_clamp_scalar::lambda(float)``: a function's parameters before ``::``."""
    out = text
    at = out.find(")::")
    while at >= 0:
        start = _matching_open(out, at)
        if start > 0 and (out[start - 1].isalnum() or out[start - 1] in "_>"):
            out = out[:start] + out[at + 1:]
            at = out.find(")::", start)
        else:
            at = out.find(")::", at + 1)
    return out


def simplify(name: str) -> str:
    """A kernel's name without what never tells kernels apart: the return type, the
    parameter list, namespaces and the ``operator()`` steps of lambda chains.

    ``void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>,
    at::detail::Array<char*, 1> >(int, ...)`` ->
    ``vectorized_elementwise_kernel<4, FillFunctor<float>, Array<char*, 1>>``.
    """
    text = _SPACES.sub(" ", name.strip())
    text = _LEADING_VOID.sub("", text)
    text = _drop_parameters(text)
    text = _OPERATOR_CALL.sub("::", text)
    text = _LAMBDA.sub(r"lambda(\1)", text)
    text = _LAMBDA_CHAIN.sub("", text)
    text = _drop_scoped_parameters(text)
    text = _NAMESPACE.sub("", text)
    while _CLOSING.search(text):
        text = _CLOSING.sub(">>", text)
    return text.strip() or name


def _argument_starts(text: str, at: int) -> list[int]:
    """Where the template or call arguments that contain position ``at`` start, innermost
    first (``f<a, g<b, c>>`` at ``c`` -> the starts of ``c`` and of ``g<b, c>``)."""
    starts: list[int] = []
    level = 0
    found = False  # the argument of the current list is found; skip to its opening
    for i in range(at - 1, -1, -1):
        c = text[i]
        if c in ">)":
            level += 1
        elif c in "<(":
            if level:
                level -= 1
                continue
            if not found:
                starts.append(i + 1)
            found = False
        elif c == "," and not level and not found:
            starts.append(i + 2 if text[i + 1: i + 2] == " " else i + 1)
            found = True
    return starts


def _fit(text: str, nearest: int, next_nearest: int, width: int) -> str:
    """``text`` in at most ``width`` characters that still tell it apart: ``nearest`` is
    where it differs from the most similar other name, ``next_nearest`` from the most
    similar of the rest. Shown: the head (up to and including the ``next_nearest``
    difference), "…", then a window around the ``nearest`` difference."""
    if len(text) <= width:
        return text
    if nearest < width - 1:  # the prefix already tells it apart
        return text[: width - 1] + ELLIPSIS
    bracket = text.find("<")
    head_len = bracket + 1 if 0 < bracket < width // 2 else width // 3
    if next_nearest >= head_len:  # the head must tell it apart from the rest
        head_len = next_nearest + 1
        while head_len < len(text) and (text[head_len].isalnum() or text[head_len] == "_"):
            head_len += 1  # to the end of that word
        head_len = min(head_len, width // 2)
    room = width - head_len - 1  # after the head and its "…"
    # The window opens at the outermost argument around the difference that leaves room
    # to show the difference itself, else a little before the difference.
    shown_after = min(12, room // 3)
    starts = [a for a in _argument_starts(text, nearest)
              if head_len <= a and nearest - a <= room - shown_after]
    start = starts[-1] if starts else max(head_len, nearest - room + shown_after)
    if start + room >= len(text):  # the window reaches the end: no second "…"
        return text[:head_len] + ELLIPSIS + text[start:]
    return text[:head_len] + ELLIPSIS + text[start: start + room - 1] + ELLIPSIS


def _differences(ordered: list[str]) -> dict[str, tuple[int, int]]:
    """For each of the sorted, distinct ``ordered``: where it differs from the most similar
    other name, and from the most similar of those that differ from it sooner."""
    # (characters in common, which is what commonprefix compares: not path parts)
    adjacent = [len(commonprefix((a, b))) for a, b in pairwise(ordered)]  # noqa: RUF071
    out: dict[str, tuple[int, int]] = {}
    for i, text in enumerate(ordered):
        left = adjacent[i - 1] if i > 0 else 0
        right = adjacent[i] if i < len(adjacent) else 0
        nearest = max(left, right)
        next_nearest = 0
        for step in (-1, 1):  # walk outwards while the shared prefix stays as long
            j, shared = (i - 1, left) if step < 0 else (i, right)
            while 0 <= j < len(adjacent) and shared >= nearest:
                j += step
                shared = min(shared, adjacent[j]) if 0 <= j < len(adjacent) else -1
            if shared >= 0:
                next_nearest = max(next_nearest, shared)
        out[text] = (nearest, next_nearest)
    return out


def short_names(names: Iterable[str], width: int = NAME_WIDTH) -> dict[str, str]:
    """Each distinct name of ``names`` -> its short form (at most ``width`` characters);
    different names always get different short forms."""
    distinct = list(dict.fromkeys(names))
    simple = {n: simplify(n) for n in distinct}
    seen = Counter(simple.values())
    # Names that only their namespaces or parameters tell apart keep their full text.
    base = {n: (simple[n] if seen[simple[n]] == 1 else n) for n in distinct}
    where = _differences(sorted(set(base.values())))
    short = {n: _fit(base[n], *where[base[n]], width) for n in distinct}
    return tell_apart(short, base, width)


def tell_apart(short: dict[str, str], base: dict[str, str], width: int) -> dict[str, str]:
    """Guarantee: where two short forms still coincide, the later ones get their tail,
    then a number."""
    taken: set[str] = set()
    out: dict[str, str] = {}
    for name, text in short.items():
        if text in taken:
            tail = base[name][-(width - 1):]
            text = ELLIPSIS + tail if len(base[name]) > width else base[name]
            number = 2
            while text in taken:
                tag = f" #{number}"
                text = short[name][: width - len(tag) - 1] + ELLIPSIS + tag
                number += 1
        taken.add(text)
        out[name] = text
    return out
