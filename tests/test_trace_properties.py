"""Property tests: random well-formed traces against a brute-force reference.

``trace_strategies`` generates traces (ops and ranges nested on several threads, runtime
calls launching kernels, memcpys and memsets on several streams, unlaunched GPU work, int
or string ids, today's or the TensorBoard era's categories) together with the rows the
attribution rule gives, worked out in plain Python. Each property loads the trace with
``kernelmagic.load`` and checks:

- conservation: the rows' self device time adds up to the time of all GPU work;
- op rows: count, self CPU and total CPU time of every op and runtime call;
- every row's self device time, range rows and unlaunched rows, and no other row;
- the same rows whatever the ids, categories, number forms, event order and noise;
- a broken trace either loads or raises a one-line ``TraceFileError`` naming the file.

Each ``check_*`` function is one property on one example; the tests run them on 910
derandomized examples (the same on every run), ``tools/trace_property_soak.py`` on
many random ones.
"""

from __future__ import annotations

import itertools
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trace_strategies import (
    CANONICAL,
    Broken,
    Event,
    Style,
    Trace,
    broken_traces,
    canonical_styles,
    close,
    device_total,
    expected_rows,
    styles,
    to_text,
    traces,
    write,
)

import kernelmagic
from kernelmagic.core.records import TraceFileError

_names = itertools.count()


def ci(examples: int) -> settings:
    """CI settings: the same examples on every run (derandomized), no deadline."""
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.large_base_example])


# --- loading -------------------------------------------------------------------------


def load(trace: Trace, style: Style, folder: Path) -> Any:
    """``trace`` written in ``style`` under ``folder``, read by ``kernelmagic.load``."""
    path = write(folder / f"t{next(_names)}{style.suffix}", to_text(trace, style), style.gzip)
    try:
        return kernelmagic.load(path)
    finally:
        path.unlink()


def kind_of(row: Any) -> str:
    return getattr(row, "kind", "op")  # (rows without a kind are op rows)


def rows_of(result: Any) -> dict[tuple[str, str], Any]:
    """``{(kind, key): row}``; two rows of one kind and key would be an error."""
    out: dict[tuple[str, str], Any] = {}
    for row in result.rows:
        key = (kind_of(row), row.key)
        assert key not in out, f"two rows {key}"
        out[key] = row
    return out


def figures(row: Any) -> dict[str, Any]:
    return {"count": row.count, "self_cpu_time_total": row.self_cpu_time_total,
            "cpu_time_total": row.cpu_time_total,
            "self_device_time_total": row.self_device_time_total}


def mismatches(got: dict[tuple[str, str], Any], want: dict[tuple[str, str], Any],
               fields: tuple[str, ...]) -> list[str]:
    """What differs between kernelmagic's rows and the reference's, one line each."""
    out = [f"missing row {k}: expected {want[k].us()}" for k in sorted(want.keys() - got.keys())]
    out += [f"extra row {k}: {figures(got[k])}" for k in sorted(got.keys() - want.keys())]
    for k in sorted(want.keys() & got.keys()):
        expected, row = want[k].us(), figures(got[k])
        for name in fields:
            same = (row[name] == expected[name] if name == "count"
                    else close(row[name], expected[name]))
            if not same:
                out.append(f"{k} {name}: kernelmagic {row[name]!r}, expected {expected[name]!r}")
    return out


def explain(trace: Trace, style: Style, problems: list[str]) -> str:
    return "\n".join([*problems, f"style: {style}", trace.describe()])


# --- the properties, one example each (also run by tools/trace_property_soak.py) ---


def check_conservation(trace: Trace, style: Style, folder: Path) -> None:
    """The rows' self device time is the time of every kernel, memcpy and memset."""
    result = load(trace, style, folder)
    got = sum(r.self_device_time_total for r in result.rows)
    want = device_total(trace)
    assert close(got, want), explain(trace, style, [
        f"rows' self device time {got!r} µs, GPU work {want!r} µs",
        *(f"  row {k}: {r.self_device_time_total!r}" for k, r in rows_of(result).items()
          if r.self_device_time_total)])


def check_op_rows(trace: Trace, style: Style, folder: Path) -> None:
    """Every op and runtime call is a row with the reference's count, self and total CPU."""
    got = {k: r for k, r in rows_of(load(trace, style, folder)).items() if k[0] == "op"}
    want = {k: r for k, r in expected_rows(trace).items() if k[0] == "op"}
    problems = mismatches(got, want, ("count", "self_cpu_time_total", "cpu_time_total"))
    assert not problems, explain(trace, style, problems)


def check_all_rows(trace: Trace, style: Style, folder: Path) -> None:
    """Exactly the reference's rows (ops, ranges, unlaunched work), each with its self
    device time; range rows with their count and CPU times too."""
    got = rows_of(load(trace, style, folder))
    want = expected_rows(trace)
    problems = mismatches(got, want, ("self_device_time_total",))
    ranges = {k for k in want.keys() & got.keys() if k[0] == "range"}
    problems += mismatches({k: got[k] for k in ranges}, {k: want[k] for k in ranges},
                           ("count", "self_cpu_time_total", "cpu_time_total"))
    assert not problems, explain(trace, style, problems)


def check_styles_agree(trace: Trace, style: Style, folder: Path) -> None:
    """``style`` gives the rows the canonical style gives, and the report renders."""
    base = rows_of(load(trace, CANONICAL, folder))
    result = load(trace, style, folder)
    result.table(None)
    result.summary()
    result.findings()
    got = rows_of(result)
    problems = [f"row {k} only with {CANONICAL}" for k in sorted(base.keys() - got.keys())]
    problems += [f"row {k} only with {style}" for k in sorted(got.keys() - base.keys())]
    for k in sorted(base.keys() & got.keys()):
        a, b = figures(base[k]), figures(got[k])
        for name in a:
            if a[name] != b[name] and (name == "count" or not close(a[name], b[name], 1e-9)):
                problems.append(f"{k} {name}: canonical {a[name]!r}, this style {b[name]!r}")
    assert not problems, explain(trace, style, problems)


def check_broken(broken: Broken, folder: Path) -> None:
    """A broken trace loads, or raises a one-line TraceFileError naming the file."""
    path = folder / f"b{next(_names)}{'.json.gz' if broken.zipped_name else '.json'}"
    path.write_bytes(broken.data)
    try:
        kernelmagic.load(path)
    except TraceFileError as exc:
        message = str(exc)
        assert "\n" not in message, f"{broken}: a message of several lines: {message!r}"
        assert str(path) in message, f"{broken}: the message does not name the file: " \
                                     f"{message!r}"
    except Exception as exc:  # anything else is the bug this property looks for
        raise AssertionError(f"{broken}: {type(exc).__name__}: {exc}\n"
                             f"{traceback.format_exc()}") from None
    finally:
        path.unlink()


# --- the tests: 910 derandomized examples, about 15 s on a 2-core machine ---------------


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("generated_traces")


@ci(150)
@given(trace=traces(), style=canonical_styles())
def test_op_rows_match_the_reference(folder: Path, trace: Trace, style: Style) -> None:
    check_op_rows(trace, style, folder)


@ci(150)
@given(trace=traces(), style=canonical_styles())
def test_every_microsecond_of_gpu_work_is_in_one_row(folder: Path, trace: Trace,
                                                      style: Style) -> None:
    check_conservation(trace, style, folder)


@ci(150)
@given(trace=traces(), style=canonical_styles())
def test_rows_own_the_reference_gpu_time(folder: Path, trace: Trace, style: Style) -> None:
    check_all_rows(trace, style, folder)


@ci(80)
@given(trace=traces(), style=styles())
def test_ids_categories_and_number_forms_do_not_change_the_rows(folder: Path, trace: Trace,
                                                                style: Style) -> None:
    check_styles_agree(trace, style, folder)


@ci(300)
@given(broken=broken_traces())
def test_a_broken_trace_loads_or_raises_one_line(folder: Path, broken: Broken) -> None:
    check_broken(broken, folder)


@ci(40)
@given(trace=traces(), style=st.builds(Style, ids=st.sampled_from(("str", "mixed")),
                                       cats=st.sampled_from(("new", "old"))))
def test_string_ids_match_the_reference(folder: Path, trace: Trace, style: Style) -> None:
    check_op_rows(trace, style, folder)
    check_all_rows(trace, style, folder)


# --- the reference itself, on a trace worked out by hand ------------------------------


def hand_worked() -> Trace:
    """Thread 1: range "forward" [0, 100) holds op aten::mm [10, 60) (a launch [20, 30) and
    aten::add [40, 50) inside) and a launch [70, 80); a launch [200, 210) with nothing
    around it; an empty range "## block ##" [300, 310); range "nccl:all_reduce" [400, 500)
    around aten::copy_ [410, 420). GPU work 5, 7 and 11 µs launched, 13 µs unlaunched."""
    us = 1000
    ev = [
        Event("range", "forward", 0, 100 * us, 1),
        Event("op", "aten::mm", 10 * us, 50 * us, 1),
        Event("runtime", "cudaLaunchKernel", 20 * us, 10 * us, 1, correlation=1),
        Event("op", "aten::add", 40 * us, 10 * us, 1),
        Event("runtime", "cudaMemcpyAsync", 70 * us, 10 * us, 1, correlation=2),
        Event("runtime", "cudaMemsetAsync", 200 * us, 10 * us, 1, correlation=3),
        Event("range", "## block ##", 300 * us, 10 * us, 1),
        Event("range", "nccl:all_reduce", 400 * us, 100 * us, 1),
        Event("op", "aten::copy_", 410 * us, 10 * us, 1),
        Event("kernel", "elementwise_kernel", 25 * us, 5 * us, 7, 0, 1),
        Event("memcpy", "Memcpy DtoD (Device -> Device)", 75 * us, 7 * us, 7, 0, 2),
        Event("memset", "Memset (Device)", 205 * us, 11 * us, 13, 0, 3),
        Event("kernel", "elementwise_kernel", 600 * us, 13 * us, 13, 0, 99),
    ]
    return Trace(tuple(ev), base=1_700_000_000_000_000_123)


HAND_WORKED_ROWS = {  # (count, self CPU, total CPU, self device), µs
    ("op", "aten::mm"): (1, 30.0, 50.0, 5.0),
    ("op", "aten::add"): (1, 10.0, 10.0, 0.0),
    ("op", "aten::copy_"): (1, 10.0, 10.0, 0.0),
    ("op", "cudaLaunchKernel"): (1, 10.0, 10.0, 0.0),
    ("op", "cudaMemcpyAsync"): (1, 10.0, 10.0, 0.0),
    ("op", "cudaMemsetAsync"): (1, 10.0, 10.0, 11.0),
    ("range", "forward"): (1, 40.0, 100.0, 7.0),
    ("range", "## block ##"): (1, 10.0, 10.0, 0.0),
    ("unlaunched", "elementwise_kernel"): (1, 0.0, 0.0, 13.0),
}


def test_the_reference_on_a_hand_worked_trace() -> None:
    rows = expected_rows(hand_worked())
    assert {k: (r.count, r.self_cpu / 1000, r.cpu_total / 1000, r.self_device / 1000)
            for k, r in rows.items()} == HAND_WORKED_ROWS
    assert device_total(hand_worked()) == 36.0


@pytest.mark.parametrize("style", [CANONICAL, Style(ids="str", cats="old", numbers="trim",
                                                    order="shuffle", noise=True, gzip=True)],
                         ids=["today", "tensorboard era"])
def test_the_hand_worked_trace(folder: Path, style: Style) -> None:
    trace = hand_worked()
    check_op_rows(trace, style, folder)
    check_conservation(trace, style, folder)
    check_all_rows(trace, style, folder)
