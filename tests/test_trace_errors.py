"""Bad trace files: each raises TraceFileError (a ValueError) with one line naming the file."""

from __future__ import annotations

import gzip
import json
import subprocess
from pathlib import Path

import pytest
from cli_run import run_cli

import kernelmagic
from kernelmagic.core.records import ProfileFileError, TraceFileError
from kernelmagic.sources.trace_file import read_table

DATA = Path(__file__).parent / "data"
GOOD = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.5,
        "dur": 2}


def trace_text(*events: object, **meta: object) -> str:
    return json.dumps({"schemaVersion": 1, **meta, "traceEvents": list(events)})


def raises_one_line(path: Path, *fragments: str) -> str:
    with pytest.raises(TraceFileError) as err:
        read_table(path)
    message = str(err.value)
    assert isinstance(err.value, ValueError) and isinstance(err.value, ProfileFileError)
    assert "\n" not in message
    assert message.startswith(f"{path}: "), message
    for fragment in fragments:
        assert fragment in message, message
    return message


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def test_truncated_gzip(tmp_path):
    whole = (DATA / "a100_alexnet.json.gz").read_bytes()
    for cut in (len(whole) // 2, len(whole) - 4):  # inside the data; inside the trailer
        path = write(tmp_path, f"cut{cut}.json.gz", whole[:cut])
        raises_one_line(path, "truncated gzip file")


def test_corrupt_gzip(tmp_path):
    raw = bytearray(gzip.compress(trace_text(GOOD).encode()))
    raw[20:30] = b"\xff" * 10
    raises_one_line(write(tmp_path, "bad.json.gz", bytes(raw)), "corrupt gzip file")


def test_not_json(tmp_path):
    raises_one_line(write(tmp_path, "notes.json", "hello, world\n"),
                    "not a kernelmagic profile or trace", "invalid JSON at line 1 column 1")


def test_not_text(tmp_path):
    raises_one_line(write(tmp_path, "blob.json", b"\x00\xff\xfe\x80" * 10), "not UTF-8")


@pytest.mark.parametrize("content", ["", "  \n\n"])
def test_empty_file(tmp_path, content):
    raises_one_line(write(tmp_path, "empty.json", content), "empty file")
    raises_one_line(write(tmp_path, "empty.json.gz", gzip.compress(content.encode())),
                    "empty file (after gunzip)")


def test_json_without_trace_events(tmp_path):
    raises_one_line(write(tmp_path, "meta.json", '{"schemaVersion": 1, "deviceProperties": []}'),
                    "JSON without 'traceEvents'", "'schemaVersion'")
    raises_one_line(write(tmp_path, "scalar.json", "42"), "a JSON number, not an object")


def test_trace_events_not_a_list(tmp_path):
    raises_one_line(write(tmp_path, "t.json", '{"traceEvents": {"ph": "X"}}'),
                    "'traceEvents' is a JSON object, not a list of events")


def test_truncated_plain_json(tmp_path):
    text = trace_text(GOOD, GOOD, GOOD)
    raises_one_line(write(tmp_path, "t.json", text[: len(text) - 30]),
                    "the file ends early", "traceEvents[2]")
    raises_one_line(write(tmp_path, "u.json", text[:-2]), "the file ends early")


def test_invalid_json_inside_events_gives_line_and_column(tmp_path):
    good = json.dumps(GOOD)
    text = '{"traceEvents": [\n' + good + ",\n" + good.replace('"dur": 2', '"dur": 2,,') + "\n]}"
    raises_one_line(write(tmp_path, "t.json", text), "invalid JSON at line 3 column",
                    "traceEvents[1]")


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        ({"ts": "soon"},
         ["traceEvents[1] ('aten::mm')", "'ts' is a JSON string, expected a number"]),
        ({"ts": None}, ["'ts' is a JSON null, expected a number"]),
        ({"dur": [1]}, ["'dur' is a JSON array, expected a number"]),
        ({"dur": -3}, ["'dur' is negative (-3)"]),
        ({"name": 7}, ["'name' is a JSON number, expected a string"]),
        ({"args": [1, 2]}, ["'args' is a JSON array, expected an object"]),
        ({"ph": 5}, ["'ph' is a JSON number, expected a string"]),
        ({"ts": None, "ph": "i", "name": "[memory]"}, ["'ts' is a JSON null"]),
        ({"dur": None}, ["no 'dur'"]),
        # said by name (they read "cannot read this event (an id or count out of range?)")
        ({"cat": ["cpu_op"]}, ["'cat' is a JSON array, expected a string"]),
        ({"tid": [1]}, ["'tid' is a JSON array, expected an integer or a string"]),
        ({"tid": True}, ["'tid' is a JSON boolean, expected an integer or a string"]),
        ({"tid": 1 << 70}, [f"'tid' is {1 << 70}, out of range (a 64-bit integer)"]),
        ({"args": {"correlation": (1 << 64) + 1}},
         [f"args 'correlation' is {(1 << 64) + 1}, out of range (a 64-bit integer)"]),
    ],
)
def test_events_with_wrong_types(tmp_path, change, fragments):
    bad = {**GOOD, **change}
    if change.get("dur", 0) is None:
        del bad["dur"]
    raises_one_line(write(tmp_path, "t.json", trace_text(GOOD, bad)), *fragments)


def test_event_that_is_not_an_object(tmp_path):
    raises_one_line(write(tmp_path, "t.json", trace_text(GOOD, [1, 2])),
                    "traceEvents[1] is a JSON array, not an event object")


def test_folder_with_no_traces_or_several(tmp_path):
    (tmp_path / "notes.txt").write_text("no trace here")
    with pytest.raises(TraceFileError) as err:
        kernelmagic.load(tmp_path)
    assert str(err.value) == f"{tmp_path}: a folder with no traces (*.json, *.json.gz)"
    write(tmp_path, "a.pt.trace.json", trace_text(GOOD))
    write(tmp_path, "b.pt.trace.json", trace_text(GOOD))
    # a folder of several traces is a run of many ranks (issue 11: kernelmagic/ranks/)
    assert sorted(kernelmagic.load(tmp_path).ranks) == [0, 1]


def test_load_reports_trace_errors_too(tmp_path):
    path = write(tmp_path, "t.json.gz", b"")
    with pytest.raises(TraceFileError, match="empty file"):
        kernelmagic.load(path)
    with pytest.raises(ProfileFileError, match="no such file"):
        kernelmagic.load(tmp_path / "missing.json.gz")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=Path(__file__).parent.parent)


def test_cli_exits_2_with_the_one_line(tmp_path):
    whole = (DATA / "a100_alexnet.json.gz").read_bytes()
    cut = write(tmp_path, "cut.json.gz", whole[: len(whole) // 2])
    out = cli("show", str(cut))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == f"kernelmagic: error: {cut}: truncated gzip file (it ends before the " \
                         "end of its data)\n"
    empty = write(tmp_path, "empty.json", "")
    out = cli("compare", str(DATA / "a100_alexnet.json.gz"), str(empty))
    assert out.returncode == 2
    assert out.stderr == f"kernelmagic: error: {empty}: empty file\n"


def test_a_trace_without_events(tmp_path):
    only_meta = {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "py"}}
    for events in ([], [only_meta]):
        path = write(tmp_path, "t.json", trace_text(*events))
        with pytest.raises(TraceFileError) as err:
            kernelmagic.load(path)
        assert str(err.value) == f"{path}: a trace with no events"
