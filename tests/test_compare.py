"""Comparing two runs, keeping profiles in files, and the command line."""

import json

import pytest
from cli_run import run_cli
from fakes import cpu_result

import kernelmagic
from kernelmagic.core.records import ProfileFileError
from kernelmagic.core.rows import OpRow
from kernelmagic.results.compare import OpDelta


def faster():
    rows = [OpRow("aten::addmm", 20, 2500.0, 2900.0), OpRow("aten::gelu", 10, 2000.0, 2000.0),
            OpRow("aten::view", 200, 100.0, 100.0), OpRow("aten::fused", 5, 300.0, 300.0)]
    return cpu_result(name="after", rows=rows, iters=5,
                      timings=[0.0006, 0.0005, 0.0005, 0.0005, 0.0006])


def test_per_op_deltas_use_per_iteration_self_time():
    cmp = faster().compare(cpu_result())
    by_key = {d.key: d for d in cmp.rows}
    # before: 10 iterations, after: 5, so totals are divided by each run's own count.
    assert by_key["aten::addmm"] == OpDelta("aten::addmm", 500.0, 500.0)
    assert by_key["aten::fused"].status == "new" and by_key["aten::fused"].after == 60.0
    assert by_key["aten::copy_"].status == "gone" and by_key["aten::copy_"].speedup is None
    assert by_key["aten::gelu"].speedup == pytest.approx(200 / 400)
    assert cmp.appeared == ["aten::fused"]
    # Presence decides new/gone, not time: the 0 µs op of the first run is gone too.
    assert cmp.vanished == ["<script>alert(1)</script>", "aten::copy_", "aten::linear"]
    assert cmp.self_time_before == pytest.approx(810.0)
    assert cmp.self_time_after == pytest.approx(500 + 400 + 20 + 60)
    assert cmp.rows[0].key == "aten::gelu"  # the largest absolute change comes first


def test_speedup_and_noise_verdict():
    before = cpu_result()  # median 1.0 ms, IQR [0.001, 0.001075]
    cmp = faster().compare(before)
    assert cmp.speedup == pytest.approx(2.0)
    assert cmp.beyond_noise
    # The Hodges-Lehmann interval by hand: the 50 ratios before/after, sorted; at 95% the
    # normal approximation's rank is floor(50/2 - 1.96 sqrt(50 * 16 / 12)) = 8.
    ratios = sorted(b / a for b in before.timings for a in faster().timings)
    assert (cmp.interval.low, cmp.interval.high) == pytest.approx((ratios[7], ratios[-8]))
    assert cmp.verdict() == (f"2.00x faster, 95% interval {ratios[7]:.2f}-{ratios[-8]:.2f}x: "
                             "beyond the noise")
    overlapping = cpu_result(name="same", timings=[0.00095, 0.00105, 0.001, 0.0011, 0.001])
    cmp2 = overlapping.compare(before)
    assert not cmp2.beyond_noise
    assert cmp2.verdict().endswith(": within the noise")
    slower = cpu_result(timings=[0.002] * 5).compare(before)
    assert slower.verdict().startswith("2.00x slower, 95% interval ")
    assert slower.verdict().endswith("x slower: beyond the noise")


def test_too_few_iterations_are_never_beyond_the_noise():
    one = cpu_result(timings=[0.00101], iters=1).compare(cpu_result(timings=[0.001], iters=1))
    assert not one.beyond_noise
    assert one.verdict() == ("1.01x slower, too few iterations to judge the noise "
                             "(use --iters 5 or more)")


def test_ops_compared_once_per_name_with_shapes():
    shaped = [OpRow("aten::add", 2, 10.0, 10.0, input_shapes="[4]"),
              OpRow("aten::add", 2, 30.0, 30.0, input_shapes="[8]")]
    before = cpu_result(rows=shaped, views=["shapes"], iters=2)
    after = cpu_result(rows=[OpRow("aten::add", 4, 20.0, 20.0)], iters=2)
    (only,) = after.compare(before).rows
    assert (only.key, only.before, only.after, only.status) == ("aten::add", 20.0, 10.0, "both")


def test_comparison_text_and_bundle():
    cmp = faster().compare(cpu_result())
    text = cmp.table()
    first = text.splitlines()[0]
    assert first.startswith("after vs cell[7]: 2.00x faster, 95% interval ")
    assert ": beyond the noise · per iteration (median)" in first
    assert "new ops: aten::fused; gone: <script>alert(1)</script>, aten::copy_, aten::linear" \
        in text
    assert "aten::addmm" in text and "1.00x" in text and "gone" in text
    bundle = cmp._repr_mimebundle_(include={"text/html", "text/plain"})
    assert "data:image/png;base64," in bundle["text/html"]
    assert "&lt;script&gt;" in bundle["text/html"] and "<script>" not in bundle["text/html"]


def test_comparison_widget_sorts():
    from kernelmagic.render.compare import comparison_widget

    box = comparison_widget(faster().compare(cpu_result()), None)
    table = box.km_table
    assert table.order[0] == "aten::gelu"
    table.headers["before"].click()
    assert table.order[0] == "aten::addmm"
    table.headers["before"].click()
    assert table.order[-1] == "aten::addmm"


def test_save_and_load_round_trip(tmp_path):
    r = cpu_result()
    path = r.save(tmp_path / "run.json")
    assert kernelmagic.load(path) == r
    assert json.loads(path.read_text())["version"] == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"format": "kernelmagic.profile", "version": 7}', "format version 7 is not supported"),
        ('{"rows": [', "invalid JSON at line 1"),
        ('{"a": 1}', "not a kernelmagic profile"),
    ],
)
def test_load_errors_name_the_file(tmp_path, content, message):
    path = tmp_path / "broken.json"
    path.write_text(content)
    with pytest.raises(ProfileFileError) as err:
        kernelmagic.load(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)
    with pytest.raises(ProfileFileError, match="no such file"):
        kernelmagic.load(tmp_path / "missing.json")


def cli(*args):
    return run_cli(*args)


def test_cli_show_and_compare(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    cpu_result().save(a)
    faster().save(b)
    out = cli("show", str(a), "--limit", "2")
    assert out.returncode == 0
    assert out.stdout.startswith("cell[7] · CPU · 10 iterations")
    assert "aten::addmm" in out.stdout and "... 4 more ops" in out.stdout
    assert "Findings:" in out.stdout
    out = cli("compare", str(a), str(b))
    assert out.returncode == 0
    assert out.stdout.startswith("after vs cell[7]: 2.00x faster")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("show", "{missing}"), "no such file"),
        (("show", "{bad}"), "invalid JSON"),
        (("compare", "{bad}", "{bad}"), "invalid JSON"),
        (("frobnicate",), "invalid choice"),
        (("show",), "the following arguments are required"),
        (("show", "{good}", "--sort", "self_device"), "has no device times"),
        (("show", "{good}", "--limit", "0"), "--limit must be at least 1"),
    ],
)
def test_cli_bad_input_is_one_line(tmp_path, args, message):
    bad, good = tmp_path / "bad.json", tmp_path / "good.json"
    bad.write_text("{")
    cpu_result().save(good)
    paths = {"missing": tmp_path / "nope.json", "bad": bad, "good": good}
    out = cli(*(a.format(**paths) for a in args))
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernelmagic: error: ")
    assert message in lines[0]
