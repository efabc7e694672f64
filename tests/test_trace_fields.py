"""The trace fields are declared once (``core/events.py``: ``TRACE_FIELDS``): a new ``args``
value is one line there, and both readers, the table builder and the live source's table
then carry its column. Here made-up fields are added to a copy of the spec, never to the
real one."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from ci_gate import need_modules
from trace_json import dumps

from kernelmagic.core.events import (
    TRACE_FIELDS,
    Kind,
    TableBuilder,
    TraceField,
    derive_links,
    select,
    table_of_columns,
)
from kernelmagic.sources import trace_fast
from kernelmagic.sources.trace_columns import Columns
from kernelmagic.sources.trace_stream import StreamReader

need_modules("msgspec", install='pip install -e ".[fast]"')

#: The real spec and two made-up fields: an int on complete events (a string holding one
#: counts too), a float on memory instants.
SPEC = (*TRACE_FIELDS,
        TraceField("sequence", "Sequence number", "sequence", "int64", -1),
        TraceField("share", "Pool share", "share", "float64", 0.5, on="memory"))
T0 = 1712195495505543


def _op(name: str, at: int, **args) -> dict:
    event = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 7,
             "ts": Decimal(f"{T0 + at}.000"), "dur": Decimal("1.500")}
    return {**event, "args": args} if args else event


def _trace(tmp_path: Path) -> Path:
    events = [
        _op("a", 0, **{"Sequence number": 7, "External id": 3}),
        _op("b", 2),  # no args: the default
        _op("c", 4, **{"Sequence number": None}),  # null: the default
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 7, "ts": T0 + 5,
         "args": {"Bytes": 64, "Pool share": 0.25}},
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 7, "ts": T0 + 6,
         "args": {"Bytes": -64}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": T0 + 8,
         "dur": 3, "args": {"device": 0, "stream": 7, "correlation": 5,
                            "Sequence number": "12"}},
    ]
    path = tmp_path / "t.json"
    path.write_text(dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_a_new_field_is_one_line_in_the_spec_and_both_readers_read_it(tmp_path):
    path = _trace(tmp_path)
    fast = trace_fast.read_table(path, fields=SPEC)
    slow = StreamReader(path, SPEC).read()
    assert fast is not None
    for table in (fast, slow):  # events in file order: a, b, c, two frees, gemm
        assert table.column("sequence").tolist() == [7, -1, -1, -1, -1, 12]
        assert table.column("sequence").dtype == np.int64
        assert table.column("share").tolist() == [0.5, 0.5, 0.5, 0.25, 0.5, 0.5]
    # Everything else is what the real spec reads, column for column.
    plain = trace_fast.read_table(path)
    for column in ("kind", "name", "start", "end", "tid", "device", "correlation", "flops",
                   "shapes", "nbytes", "dtypes"):
        assert fast.column(column).tolist() == plain.column(column).tolist(), column
        assert slow.column(column).tolist() == plain.column(column).tolist(), column
    # (dtypes: the one rule field's column the table does not name, #47)
    assert set(plain.extra) == {"dtypes"}
    assert set(fast.extra) == set(slow.extra) == {"dtypes", "sequence", "share"}


def test_the_new_column_survives_links_and_selection(tmp_path):
    table = derive_links(trace_fast.read_table(_trace(tmp_path), fields=SPEC))
    kept = select(table, table.kind == Kind.OP)
    assert kept.column("sequence").tolist() == [7, -1, -1]
    assert kept.column("share").tolist() == [0.5, 0.5, 0.5]


def test_a_value_of_the_wrong_type_is_named_by_the_streaming_reader(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(dumps({"traceEvents": [_op("a", 0), _op("b", 1, **{
        "Sequence number": "seven"})]}))
    assert trace_fast.read_table(path, fields=SPEC) is None
    with pytest.raises(ValueError, match=r"traceEvents\[1\] \('b'\)"):
        StreamReader(path, SPEC).read()


def test_the_builder_and_the_live_sources_table_fill_the_new_column():
    builder = TableBuilder(SPEC)
    builder.add(Kind.OP, "a", 0, 10, tid=1, sequence=3)
    builder.add(Kind.MEMORY, "[memory]", 5, 5, tid=1, nbytes=8, share=0.75)
    table = builder.freeze()
    assert table.column("sequence").tolist() == [3, -1]
    assert table.column("share").tolist() == [0.5, 0.75]
    with pytest.raises(TypeError, match="sequel"):
        builder.add(Kind.OP, "b", 0, 1, tid=1, sequel=2)
    # The live source gives its own columns; the fields' others are their defaults.
    n = 2
    given = {name: np.zeros(n, dtype) for name, dtype in (
        ("kind", np.int8), ("name", np.int32), ("start", np.int64), ("end", np.int64),
        ("tid", np.int64), ("device", np.int16), ("correlation", np.int64),
        ("flops", np.float64), ("shapes", np.int32), ("nbytes", np.int64))}
    live = table_of_columns([""], given, fields=SPEC)
    assert live.column("sequence").tolist() == [-1, -1]
    assert live.column("share").tolist() == [0.5, 0.5]


def test_a_spec_without_a_field_the_rules_read_or_with_an_unknown_rule_is_refused():
    without = tuple(f for f in TRACE_FIELDS if f.name != "stream")
    with pytest.raises(ValueError, match="stream missing"):
        Columns(without)
    odd = (*TRACE_FIELDS, TraceField("grid", "grid", "grid", "int64", 0, rule="x * y * z"))
    with pytest.raises(ValueError, match="grid with a rule"):
        Columns(odd)


def test_the_real_spec_matches_the_event_table():
    # Every field fills a column of the table, of the table's type for it.
    table = trace_fast.read_table(Path(__file__).parent / "data" / "cpu_only.json.gz")
    for f in TRACE_FIELDS:
        assert table.column(f.column).dtype == np.dtype(f.dtype), f.name
    assert set(table.extra) == {"dtypes"}  # the input dtypes' column, read by a rule
