"""Sort keys and the primary self time have one home (``kernelmagic/core/sorting.py``):
every reader of a result (its shares, the chart, the table, comparisons, ranks, findings)
orders and totals by the same rule. Expected figures are worked out by hand from
``tests/fakes.py``'s rows."""

from __future__ import annotations

import pytest
from fakes import cpu_result, cuda_result

from kernelmagic.core.rows import OpRow
from kernelmagic.core.sorting import (
    SORT_KEYS,
    SORTS,
    default_sort,
    resolve_sort,
    self_time,
    self_time_field,
    self_time_label,
    sort_column,
    sort_help,
    sort_key,
    sort_value,
)
from kernelmagic.findings.base import per_iter_self
from kernelmagic.render.chart import chart_texts
from kernelmagic.render.table import column_for_sort, op_table
from kernelmagic.results.builder import build_result
from kernelmagic.results.compare import compare
from kernelmagic.results.rank_summary import summarize

# 4 calls; self CPU 10, total CPU 30, self device 200, total device 600 (µs).
ROW = OpRow("aten::mm", 4, 10.0, 30.0, 200.0, 600.0)


def test_the_primary_self_time_is_the_devices_when_profiled():
    assert self_time_field(True) == "self_device_time_total"
    assert self_time_field(False) == "self_cpu_time_total"
    assert self_time(ROW, True) == 200.0
    assert self_time(ROW, False) == 10.0
    assert self_time_label(True) == "self device"
    assert self_time_label(False) == "self CPU"
    assert default_sort(True) == "self_device"
    assert default_sort(False) == "self_cpu"


@pytest.mark.parametrize(("key", "device", "expected"), [
    ("self_device", True, 200.0), ("self_cpu", True, 10.0), ("device", True, 600.0),
    ("cpu", True, 30.0), ("calls", True, 4.0),
    ("avg", True, 150.0),  # 600 µs of device time over 4 calls
    ("avg", False, 7.5),  # 30 µs of CPU time over 4 calls
    ("max_gain", True, 0.0),  # the row's max_gain_us (the dependency model's; none here)
])
def test_each_sort_key_orders_by_its_figure(key, device, expected):
    assert sort_value(key, device)(ROW) == expected


def test_the_table_of_keys_is_the_options():
    from kernelmagic.core.options import ProfileOptions

    with pytest.raises(ValueError, match="must be one of self_device, self_cpu, device, cpu, "
                                         "calls, avg, max_gain; got 'bogus'"):
        ProfileOptions(sort="bogus")
    assert list(SORT_KEYS) == ["self_device", "self_cpu", "device", "cpu", "calls", "avg",
                               "max_gain"]
    assert [k.name for k in SORTS if k.device] == ["self_device", "device"]
    with pytest.raises(ValueError, match="unknown sort key 'bogus'; expected one of self_device"):
        sort_key("bogus")


def test_the_options_help_lists_every_key_and_the_defaults():
    from kernelmagic.core.options import OPTIONS

    text = ("sort key: self_device (default when CUDA is profiled), self_cpu (default "
            "otherwise), device, cpu, calls, avg, max_gain")
    assert sort_help() == text
    assert [o.help for o in OPTIONS if o.name == "sort"] == [text]


def test_resolve_sort_refuses_device_keys_without_a_device():
    assert resolve_sort(None, True) == "self_device"
    assert resolve_sort(None, False) == "self_cpu"
    assert resolve_sort("calls", False) == "calls"
    with pytest.raises(ValueError, match="-s/--sort device needs device profiling, but "
                                         "--cpu-only was given"):
        resolve_sort("device", False, cpu_only=True)
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_sort("self_device", False)


def test_sort_columns_are_the_op_tables_columns():
    cuda, cpu = cuda_result(), cpu_result()
    assert sort_column("avg", True) == "device_avg"
    assert sort_column("avg", False) == "cpu_avg"
    for key in SORT_KEYS:
        if key == "max_gain":  # a column only where the dependency model priced the rows
            continue
        if not sort_key(key).device:
            op_table(cpu).column(column_for_sort(cpu, key))  # KeyError if missing
        op_table(cuda).column(column_for_sort(cuda, key))


def test_every_reader_of_a_result_takes_the_same_self_time():
    gpu = cuda_result()  # self device: 9000 + 1000 + 0 µs; self CPU: 300 + 100 + 400 µs
    mm = gpu.rows[0]
    assert gpu.self_time_total == 10000.0
    assert gpu.share(mm) == pytest.approx(0.9)
    assert gpu.share(mm, device=False) == pytest.approx(300 / 800)
    assert per_iter_self(gpu, mm) == 900.0  # 9000 µs over 10 iterations
    assert summarize(gpu, rank=0).op_us == {"aten::mm": 900.0, "aten::add": 100.0}
    assert compare(gpu, gpu).time_label == "self device"
    cpu = cpu_result()
    assert cpu.self_time_total == 8100.0  # 200 + 5000 + 800 + 2000 + 100 + 0
    assert per_iter_self(cpu, cpu.rows[1]) == 500.0
    assert compare(cpu, gpu).time_label == "self CPU"  # one side without a device


def test_the_charts_title_names_what_the_key_measures():
    gpu = cuda_result()
    title, bars = chart_texts(gpu, by="self_cpu", k=2)
    # Shares of the self CPU total (800 µs): 400 and 300 µs.
    assert title == "gpu: top 2 ops by self CPU time per iteration, 88% of self time"
    assert bars == ["cudaLaunchKernel · 50% · 40.0 µs", "aten::mm · 38% · 30.0 µs"]
    title, bars = chart_texts(gpu, by="device", k=1)
    assert title == "gpu: top 1 op by total device time per iteration (nested ops overlap)"
    assert bars == ["aten::mm · 90% · 900 µs"]  # 9000 of 10000 µs of self device time


def test_a_built_result_sorts_by_the_default_of_its_device():
    from fakes import table_of

    from kernelmagic.core.events import Kind

    table = table_of((Kind.OP, "aten::mm", 0, 10, 1))
    assert build_result(table, name="x").sort == "self_cpu"
