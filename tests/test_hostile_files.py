"""Hostile and broken files (issue #35): each is a result or one documented error, whose one
line names the file, the place and the fault; both trace readers agree; the CLI exits 2.

The messages asserted here are the words a user reads: what is wrong and where, never a
Python internal (``RecursionError``, ``sys.set_int_max_str_digits``).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ci_gate import need_modules
from cli_run import run_cli

import kernelmagic
from kernelmagic.core.records import ProfileFileError, TraceFileError
from kernelmagic.sources import trace_fast, trace_stream, trace_text
from kernelmagic.sources.trace_stream import StreamReader

need_modules("msgspec", install="pip install -e .")

DATA = Path(__file__).parent / "data"
GOOD = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.5,
        "dur": 2}
GOOD_TEXT = json.dumps(GOOD)
#: The event the tests break: the good one, 10 µs later (identical events count once).
LATER = json.dumps({**GOOD, "ts": 20.5})


def trace_with(event_text: str) -> str:
    """A trace of one good event, then ``event_text``."""
    return '{"schemaVersion": 1, "traceEvents": [' + GOOD_TEXT + ", " + event_text + "]}"


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(gzip.compress(content) if name.endswith(".gz") else content)
    return path


def one_line(error: BaseException, path: Path) -> str:
    message = str(error)
    assert "\n" not in message and message.startswith(f"{path}: "), message
    return message[len(f"{path}: "):]


def refused(path: Path, error: type[Exception] = TraceFileError) -> str:
    """The one line ``kernelmagic.load`` raises (and, for a trace, the streaming reader;
    msgspec's reader must leave such a file), without the file's name."""
    if error is TraceFileError:
        assert trace_fast.read_table(path) is None, "the fast reader took a file it must leave"
        with pytest.raises(TraceFileError) as streamed:
            StreamReader(path).read()
    with pytest.raises(error) as err:
        kernelmagic.load(path)
    message = one_line(err.value, path)
    if error is TraceFileError:
        assert str(streamed.value) == str(err.value)
    return message


# --- traces ------------------------------------------------------------------------------


def test_nesting_deeper_than_any_trace(tmp_path):
    deep = "[" * 200_000 + "]" * 200_000  # the 400 KB file
    event = LATER[:-1] + ', "args": {"x": ' + deep + "}}"
    path = write(tmp_path, "deep.json", trace_with(event))
    column = trace_with(event).index(event) + 1
    assert refused(path) == (f"invalid JSON at line 1 column {column} (a value nested deeper "
                             "than any trace: arrays or objects inside each other about a "
                             "thousand levels deep) in traceEvents[1]")


def test_nesting_a_little_deep_reads_the_same_in_both_readers(tmp_path):
    # 100 levels: deeper than msgspec's pre-check (MAX_NESTING), well within Python's
    args = '{"x": ' + "[" * 100 + "]" * 100 + "}"
    path = write(tmp_path, "t.json", trace_with(LATER[:-1] + ', "args": ' + args + "}"))
    assert trace_fast.read_table(path) is None
    assert kernelmagic.load(path).rows[0].count == 2
    shallow = write(tmp_path, "u.json", trace_with(LATER[:-1] + ', "args": {"x": [[1]]}}'))
    assert_readers_agree(shallow)


def test_an_integer_of_5000_digits(tmp_path):
    event = LATER.replace("20.5", "9" * 5000)
    path = write(tmp_path, "t.json", trace_with(event))
    message = refused(path)
    column = trace_with(event).index(event) + 1
    assert message == (f"invalid JSON at line 1 column {column} (a number of more than 4300 "
                       "digits) in traceEvents[1]")
    assert "set_int_max_str_digits" not in message


@pytest.mark.parametrize(("change", "expected"), [
    ('"ts": NaN', "'ts' is NaN, expected a finite number"),
    ('"dur": Infinity', "'dur' is Infinity, expected a finite number"),
    ('"dur": -Infinity', "'dur' is -Infinity, expected a finite number"),
    ('"ts": 999999999999999999999999999999',
     "'ts' is 99999999999999999999… (30 digits) µs, beyond any real trace (at most "
     "4611686018 s)"),
    ('"dur": 1e300', "'dur' is 1e300 µs, beyond any real trace (at most 1000000 s)"),
    ('"dur": 2000000000000', "'dur' is 2000000000000 µs, beyond any real trace (at most "
                             "1000000 s)"),
    ('"dur": -0.5', "'dur' is negative (-0.5)"),
])
def test_numbers_out_of_range(tmp_path, change, expected):
    key = change.split(":")[0]
    event = LATER.replace({'"ts"': '"ts": 20.5', '"dur"': '"dur": 2'}[key], change)
    path = write(tmp_path, "t.json", trace_with(event))
    assert refused(path) == f"traceEvents[1] ('aten::mm'): {expected}"


def test_nan_in_a_field_that_is_read_and_in_one_that_is_not(tmp_path):
    flops = write(tmp_path, "f.json", trace_with(LATER[:-1] + ', "args": {"flops": NaN}}'))
    assert refused(flops) == "traceEvents[1] ('aten::mm'): args 'flops' is NaN, expected a " \
                             "finite number"
    unread = write(tmp_path, "u.json", trace_with(LATER[:-1] + ', "args": {"x": NaN}}'))
    assert kernelmagic.load(unread).rows[0].count == 2  # as before: only read fields matter


def test_a_duplicate_key_counts_once_the_last_in_both_readers(tmp_path):
    event = LATER.replace('"dur": 2', '"dur": 2, "dur": 7')
    path = write(tmp_path, "t.json", trace_with(event))
    fast = assert_readers_agree(path)
    assert sorted((fast.end - fast.start).tolist()) == [2000, 7000]  # ns: 2 µs, then 7 µs


def test_metadata_of_the_wrong_type_is_left_out_by_both_readers(tmp_path):
    # found by the fuzzer: the streaming reader kept 2.5 as the text "2.5" (a trace name)
    text = ('{"traceName": 2.5, "deviceProperties": [{"name": 7.5}], "distributedInfo": '
            '{"rank": true, "world_size": ' + str(2**70) + ', "backend": "nccl"}, '
            '"traceEvents": [' + GOOD_TEXT + "]}")
    path = write(tmp_path, "t.json", text)
    table = assert_readers_agree(path)
    assert {k: table.meta[k] for k in ("trace_name", "device_name", "rank", "world_size",
                                       "backend") if k in table.meta} == {"backend": "nccl"}
    result = kernelmagic.load(path)
    assert result.distributed == {"backend": "nccl"}
    assert type(result).from_dict(json.loads(json.dumps(result.to_dict()))).distributed == \
        {"backend": "nccl"}  # what a trace gives, a saved profile takes back


def test_non_utf8_bytes_in_a_gzip(tmp_path):
    text = trace_with(LATER.replace("aten::mm", "aten::\udcff"))
    text = text.encode("utf-8", "surrogateescape")
    path = write(tmp_path, "t.json.gz", text)
    assert refused(path) == "not a text file (not UTF-8): not a kernelmagic profile or trace"


def test_gunzip_past_the_limit_stops_with_one_line(tmp_path, monkeypatch):
    padded = '{"traceEvents": [' + GOOD_TEXT + "]" + " " * 3_000_000 + "}"
    path = write(tmp_path, "t.json.gz", padded)
    assert kernelmagic.load(path).rows[0].count == 1  # under the default limit
    monkeypatch.setenv("KERNELMAGIC_MAX_GUNZIP_BYTES", str(1 << 20))
    with pytest.raises(TraceFileError) as err:
        StreamReader(path).read()
    assert one_line(err.value, path) == ("decompresses to more than 1.00 MiB, the limit (set "
                                         "KERNELMAGIC_MAX_GUNZIP_BYTES to read it)")
    monkeypatch.delenv("KERNELMAGIC_MAX_GUNZIP_BYTES")
    monkeypatch.setattr(trace_stream, "MAX_GUNZIP_BYTES", 1 << 20)
    assert trace_stream.gunzip_limit() == 1 << 20


@pytest.fixture(params=["isal", "zlib"])
def gunzip_by(request, monkeypatch):
    """python-isal's gunzip (a dependency), and the standard library's that takes its place
    where isal cannot be imported."""
    import zlib

    if request.param == "zlib":
        monkeypatch.setattr(trace_text, "_zlib", zlib)
    elif trace_text._zlib is zlib:
        pytest.skip("python-isal is not installed")
    return request.param


def test_msgspec_reader_never_gunzips_past_its_limit_whatever_the_trailer_says(gunzip_by):
    data = b" " * 3_000_000
    packed = bytearray(gzip.compress(data) * 2)  # two members
    assert trace_text.gunzip(bytes(packed), 10_000_000) == data * 2
    assert trace_text.gunzip(bytes(packed), 5_000_000) is None
    assert trace_text.gunzip(bytes(packed[:-10]), 10_000_000) is None  # truncated
    real = DATA / "v100_gpu_annotations.json.gz"
    assert trace_text.text_bytes(real) == gzip.decompress(real.read_bytes())


def assert_readers_agree(path: Path) -> Any:
    fast = trace_fast.read_table(path)
    slow = StreamReader(path).read()
    assert fast is not None
    for column in ("kind", "name", "start", "end", "tid", "device", "correlation", "flops",
                   "shapes", "nbytes"):
        np.testing.assert_array_equal(getattr(fast, column), getattr(slow, column), column)
    assert fast.names == slow.names and fast.origin_ns == slow.origin_ns
    return fast


# --- saved profiles ------------------------------------------------------------------


def saved(tmp_path: Path, change: Any, name: str = "p.json") -> Path:
    """The version 1 live profile with ``change(data)`` applied, written as JSON text."""
    data = json.loads((DATA / "saved_live_cpu_v1.json").read_text())
    text = change(data)
    path = tmp_path / name
    path.write_text(text if isinstance(text, str) else json.dumps(data))
    return path


def put(where: str, value: Any):
    """A change setting the field at ``where`` (``rows.0.count``) to ``value``."""
    def change(data: dict[str, Any]) -> None:
        *parents, last = where.split(".")
        for part in parents:
            data = data[int(part)] if part.isdigit() else data[part]
        data[int(last) if last.isdigit() else last] = value
    return change


@pytest.mark.parametrize(("where", "value", "expected"), [
    ("rows.0.self_cpu_time_total", "abc",
     'rows[0].self_cpu_time_total: expected a number, got "abc"'),
    ("iters", "3", 'iters: expected an integer, got "3"'),
    ("rows.2.count", True, "rows[2].count: expected an integer, got true"),
    ("rows.2.count", 2.5, "rows[2].count: expected an integer, got 2.5"),
    ("topk", 2**70, "topk: an integer out of range (an integer of about 21 digits)"),
    ("name", None, "name: expected a string, got null"),
    ("iters", 0, "iters: expected an integer >= 1, got 0"),
    ("warmup", -1, "warmup: expected an integer >= 0, got -1"),
    ("timings", [], "timings: expected at least 1 item, got 0"),
    ("breakdown", "x", 'breakdown: expected an object, got "x"'),
    ("ranges.0.top_ops.0", ["aten::mm"], "ranges[0].top_ops[0]: expected a list of 2 items, "
                                         "got 1"),
    ("memory_peaks.0.total", [1], "memory_peaks[0].total: expected a number, got a list"),
    ("peak_memory", [], "peak_memory: expected an object, got a list"),
    ("roofline_peaks.bytes_per_s", "fast",
     "roofline_peaks['bytes_per_s']: expected a number, got \"fast\""),
    ("distributed", {"rank": [0]}, "distributed['rank']: expected an integer or a string, got "
                                   "a list"),
    ("rows", {}, "rows: expected a list, got an object"),
])
def test_wrong_types_in_a_saved_profile_name_the_field(tmp_path, where, value, expected):
    path = saved(tmp_path, put(where, value))
    assert refused(path, ProfileFileError) == f"malformed kernelmagic profile: {expected}"


def test_a_missing_field_without_a_default(tmp_path):
    def drop_key(data: dict[str, Any]) -> None:
        del data["rows"][0]["key"]

    path = saved(tmp_path, drop_key)
    assert refused(path, ProfileFileError) == "malformed kernelmagic profile: rows[0]: no 'key'"


@pytest.mark.parametrize(("text", "expected"), [
    (lambda d: json.dumps(d).replace('"iters": 3', '"iters": NaN'),
     "not a kernelmagic profile (NaN is not a JSON number)"),
    (lambda d: json.dumps(d).replace('"topk": 10', '"topk": ' + "7" * 5000),
     "not a kernelmagic profile (a number of thousands of digits)"),
    (lambda d: json.dumps(d).replace('"iters": 3', '"iters": 3, "iters": 4'),
     "not a kernelmagic profile (the key 'iters' twice in one object)"),
    (lambda d: json.dumps(d).replace('"distributed": {}',
                                     '"distributed": ' + "[" * 100_000 + "]" * 100_000),
     "not a kernelmagic profile (values nested about a thousand levels deep)"),
    (lambda d: json.dumps(d)[:5000], "not a kernelmagic profile (invalid JSON at line 1)"),
])
def test_broken_json_in_a_saved_profile(tmp_path, text, expected):
    assert refused(saved(tmp_path, text), ProfileFileError) == expected


def test_non_utf8_bytes_in_a_saved_profile(tmp_path):
    text = (DATA / "saved_profile_v1.json").read_bytes()
    at = text.index(b"cpu_only")
    path = tmp_path / "p.json"
    path.write_bytes(text[:at] + b"\xff" + text[at + 1:])
    assert refused(path, ProfileFileError) == f"not a kernelmagic profile (not UTF-8 text: byte " \
                                              f"{at})"


def test_wrong_type_in_a_saved_many_ranks_result(tmp_path):
    data = json.loads((DATA / "saved_ranks_v1.json").read_text())
    data["ranks"][1]["summary"]["op_us"] = {"aten::mm": "slow"}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    assert refused(path, ProfileFileError) == ("malformed kernelmagic many-ranks result: "
                                               "ranks[1].summary.op_us['aten::mm']: expected a "
                                               "number, got \"slow\"")


# --- the CLI and the magic -----------------------------------------------------------


def test_cli_exits_2_with_the_one_line_and_no_traceback(tmp_path):
    deep = write(tmp_path, "deep.json", trace_with('{"x": ' + "[" * 200_000 + "]" * 200_000
                                                   + "}"))
    bad = saved(tmp_path, put("rows.0.self_cpu_time_total", "abc"))
    for args in (["show", str(deep)], ["show", str(bad)],
                 ["compare", str(bad), str(DATA / "cpu_only.json.gz")]):
        out = run_cli(*args, cwd=DATA.parent.parent)
        assert out.returncode == 2 and out.stdout == "", out.stderr
        assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
        assert out.stderr.startswith("kernelmagic: error: ")
    assert out.stderr == (f"kernelmagic: error: {bad}: malformed kernelmagic profile: "
                          'rows[0].self_cpu_time_total: expected a number, got "abc"\n')


def test_magic_compare_with_a_hostile_file_is_a_usage_error(ip, tmp_path):
    from IPython.core.error import UsageError
    from IPython.utils.capture import capture_output

    bad = saved(tmp_path, put("iters", "3"))
    with capture_output():
        res = ip.run_cell(f"%%profile -n 1 -w 0 -q --compare {bad}\nx = 1")
    assert isinstance(res.error_in_exec, UsageError)
    assert str(res.error_in_exec) == (f"--compare: {bad}: malformed kernelmagic profile: "
                                      'iters: expected an integer, got "3"')


# --- rank folders ----------------------------------------------------------------------


def test_a_rank_folder_with_hostile_files(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from kernelmagic.io.ranks import RanksError, RankSkipped

    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "rank-0.json.gz").write_bytes((DATA / "cpu_only.json.gz").read_bytes())
    deep = folder / "rank-1.json"
    deep.write_text(trace_with('{"x": ' + "[" * 50_000 + "]" * 50_000 + "}"))
    with pytest.warns(RankSkipped) as seen:
        result = kernelmagic.load(folder, executor=ThreadPoolExecutor(1))
    assert len(result.ranks) == 1  # the good file (its distributedInfo says rank 34)
    (warning,) = seen
    assert str(warning.message).startswith(f"skipped {deep}: invalid JSON at line 1 column ")
    assert "nested deeper than any trace" in str(warning.message)
    (folder / "rank-0.json.gz").write_bytes(b"\x1f\x8b" + b"\x00" * 40)  # corrupt gzip
    with pytest.raises(RanksError) as err:
        kernelmagic.load(folder, executor=ThreadPoolExecutor(1))
    assert "\n" not in str(err.value)
    assert str(err.value).startswith("none of the 2 trace files could be read; first: ")
