import json

import pytest
from fakes import cpu_result, cuda_result

from kernelmagic.core.rows import OpRow
from kernelmagic.results.result import FORMAT_VERSION, ProfileResult


def test_totals_are_sums_of_self_time_not_inclusive_time():
    r = cpu_result()
    assert r.self_cpu_time_total == 200 + 5000 + 800 + 2000 + 100 + 0
    # The seed notebook's "total op time" summed inclusive times: nested ops twice.
    inclusive = sum(row.cpu_time_total for row in r.rows)
    assert inclusive == 14900 and inclusive > r.self_cpu_time_total
    assert sum(r.share(row) for row in r.rows) == pytest.approx(1.0)
    assert r.share(r.rows[1]) == pytest.approx(5000 / 8100)


def test_top_orders_by_each_key():
    r = cpu_result()
    assert [x.key for x in r.top(3)] == ["aten::addmm", "aten::gelu", "aten::copy_"]
    assert [x.key for x in r.top(2, by="cpu")] == ["aten::linear", "aten::addmm"]
    assert [x.key for x in r.top(1, by="calls")] == ["aten::view"]
    assert [x.key for x in r.top(1, by="avg")] == ["aten::linear"]  # 310 µs per call
    assert len(r.top()) == len(r.rows)
    with pytest.raises(ValueError, match="unknown sort key"):
        r.top(1, by="nope")


def test_a_device_sort_key_on_a_cpu_result_is_refused_in_one_line():
    # Before, table(by="device") raised a KeyError from deep in the renderer, and
    # top(by="device") ordered the rows by a field they do not have (all zero: by name).
    r = cpu_result()
    for call in (lambda: r.top(3, by="device"), lambda: r.table(3, by="device"),
                 lambda: r.table(3, by="self_device")):
        with pytest.raises(ValueError, match="needs device times") as info:
            call()
        assert "\n" not in str(info.value) and "self_cpu" in str(info.value)
    assert cuda_result().top(1, by="device")  # (a result with device times sorts by them)


def test_per_call_averages_mirror_torch():
    row = OpRow("aten::addmm", 20, 5000.0, 5800.0, 100.0, 400.0)
    assert row.cpu_time == 290.0
    assert row.device_time == 20.0


def test_device_figures():
    r = cuda_result()
    assert r.profiles_device
    assert r.self_device_time_total == 10000
    assert r.self_time_total == 10000
    assert r.share(r.rows[0]) == pytest.approx(0.9)
    assert r.share(r.rows[2], device=False) == pytest.approx(0.5)
    assert r.top(1, by="avg")[0].key == "aten::mm"


def test_json_round_trip():
    r = cpu_result()
    text = json.dumps(r.to_dict())
    back = ProfileResult.from_dict(json.loads(text))
    assert back == r
    assert back.rows == r.rows and back.timings == r.timings
    assert back.stats == r.stats


def test_from_dict_refuses_other_formats():
    data = cpu_result().to_dict()
    with pytest.raises(ValueError, match="format version 99 is not supported"):
        ProfileResult.from_dict({**data, "version": 99})
    with pytest.raises(ValueError, match="not a kernelmagic profile"):
        ProfileResult.from_dict({"rows": []})
    broken = {**data}
    del broken["rows"]
    with pytest.raises(ValueError, match="malformed"):
        ProfileResult.from_dict(broken)
    assert data["version"] == FORMAT_VERSION


def test_repr_is_short():
    assert repr(cpu_result()) == "<ProfileResult 'cell[7]': 10 iterations on cpu, 6 ops>"
