"""Snapshot tests of the text report: what terminal IPython shows."""

from fakes import cpu_result, cuda_result

from kernelmagic.core.rows import Breakdown

#: Every figure is the old summed one over the 10 iterations (addmm: 20 calls, 5.00 ms
#: self, 5.80 ms total -> 2 calls, 500 µs, 580 µs per iteration); shares unchanged.
CPU_TABLE = """\
op (mean of 10 it.)        calls/iter  self CPU/iter  total CPU/iter  % self CPU
-------------------------  ----------  -------------  --------------  ----------
aten::addmm                         2         500 µs          580 µs         62%
aten::gelu                          1         200 µs          200 µs         25%
aten::copy_                         4        80.0 µs         80.0 µs        9.9%
aten::linear                        2        20.0 µs          620 µs        2.5%
aten::view                         20        10.0 µs         10.0 µs        1.2%
<script>alert(1)</script>         0.1           0 µs            0 µs          0%
more columns (CPU/call): result.table(all_columns=True)"""

CUDA_TABLE = """\
op (mean of 10 it.)  calls/iter  self device/iter  total device/iter  % self device  self CPU/iter
-------------------  ----------  ----------------  -----------------  -------------  -------------
aten::mm                      1            900 µs             900 µs            90%        30.0 µs
aten::add                     1            100 µs             100 µs            10%        10.0 µs
cudaLaunchKernel              2              0 µs               0 µs             0%        40.0 µs
more columns (device/call, total CPU/iter, CPU/call, % self CPU): result.table(all_columns=True)"""

#: ``all_columns``: the per-call figures, the CPU total and share too.
CUDA_ALL_COLUMNS = """\
op (mean of 10 it.)  calls/iter  self device/iter  total device/iter  device/call  % self device  self CPU/iter  total CPU/iter  CPU/call  % self CPU
-------------------  ----------  ----------------  -----------------  -----------  -------------  -------------  --------------  --------  ----------
aten::mm                      1            900 µs             900 µs       900 µs            90%        30.0 µs         35.0 µs   35.0 µs         38%
aten::add                     1            100 µs             100 µs       100 µs            10%        10.0 µs         12.0 µs   12.0 µs         12%
cudaLaunchKernel              2              0 µs               0 µs         0 µs             0%        40.0 µs         40.0 µs   20.0 µs         50%"""  # noqa: E501


def test_cpu_table_snapshot():
    assert cpu_result().table() == CPU_TABLE


def test_cuda_table_snapshot():
    assert cuda_result().table() == CUDA_TABLE
    assert cuda_result().table(all_columns=True) == CUDA_ALL_COLUMNS


def test_summary_lines():
    # A result without a breakdown (a profile file saved before it existed).
    assert cpu_result().summary() == (
        "cell[7] · CPU · 10 iterations (+3 warm-up) · 1.00 ms per iteration "
        "(median; IQR 75.0 µs, best 900 µs) · rows: 810 µs self CPU time per iteration "
        "(mean; 79% of the mean wall time)"
    )
    assert cuda_result().summary() == (
        "gpu · CUDA (NVIDIA H200) · 10 iterations (+3 warm-up) · 1.20 ms per iteration "
        "(median; IQR 0 µs, best 1.20 ms) · GPU busy 83% of the mean wall time · "
        "rows: 1.00 ms self device, 80.0 µs self CPU time per iteration (mean)"
    )


def test_summary_says_where_the_time_went():
    cpu = cpu_result()
    cpu.breakdown = Breakdown("cpu", wall=1000.0, compute=700.0, communication=110.0,
                              idle=190.0)
    assert cpu.summary().endswith(
        " · rows: 810 µs self CPU time per iteration (mean) · CPU: ops 70%, communication 11%, "
        "other (Python between ops, waits) 19% of the iteration")
    gpu = cuda_result()
    gpu.breakdown = Breakdown("cuda", wall=1200.0, compute=900.0, communication=300.0,
                              memcpy=40.0, idle=150.0, overlap=0.5)
    assert gpu.summary().endswith(
        " · rows: 1.00 ms self device, 80.0 µs self CPU time per iteration (mean) · GPU: compute "
        "75%, communication 25% (50% of it overlapped by compute), memcpy/memset 3.3%, "
        "idle 12% of the iteration")
    alone = cpu_result()
    alone.breakdown = Breakdown("cpu", wall=1000.0, compute=810.0, idle=190.0)
    assert alone.summary().endswith(" · CPU: ops 81%, other (Python between ops, waits) 19% "
                                    "of the iteration"), "no communication: not named"


def test_limit_and_sort_key():
    text = cpu_result().table(limit=2, by="calls")
    lines = text.splitlines()
    assert lines[2].startswith("aten::view ") and lines[3].startswith("aten::copy_ ")
    assert lines[-2] == "... 4 more ops (result.table(None) lists all)"
    assert lines[-1] == "more columns (CPU/call): result.table(all_columns=True)"
    # Sorted by its only extra column, the table shows every column: no empty hint
    # (before: "more columns (): result.table(all_columns=True)").
    by_avg = cpu_result().table(limit=2, by="avg")
    assert "CPU/call" in by_avg.splitlines()[0] and "more columns" not in by_avg


def test_report_carries_timing_warning():
    from kernelmagic.render.text import text_report

    spiky = cpu_result(timings=[0.001, 0.001, 0.001, 0.009])
    assert "Warning: The slowest iteration took 9.0x" in text_report(spiky)
    assert "Warning" not in text_report(cpu_result())


def test_empty_profile():
    assert cpu_result(rows=[]).table().endswith("(no ops were recorded)")


def test_plurals_and_no_warm_up_part_without_warm_up():
    one = cpu_result(timings=[0.001])
    one.iters, one.warmup = 1, 0
    assert " · 1 iteration · " in one.summary()
    three = cpu_result()
    assert " · 10 iterations (+3 warm-up) · " in three.summary()
    lines = cpu_result().table(limit=5).splitlines()
    assert lines[-2] == "... 1 more op (result.table(None) lists all)"
    from kernelmagic.render.html import static_table_html
    from kernelmagic.render.table import op_table

    assert static_table_html(op_table(cpu_result()), limit=5).endswith(">1 more op not shown.</p>")
    assert static_table_html(op_table(cpu_result()), limit=4).endswith(">2 more ops not shown.</p>")


def test_counts_round_before_choosing_their_prefix():
    from kernelmagic.core.units import format_count, si

    assert format_count(999.7e9) == "1 T"  # not "1e+03 G"
    assert format_count(999.4e9) == "999 G"
    assert format_count(999.7) == "1 k"
    assert si(1.0004e12, "FLOP/s") == "1 TFLOP/s"
    assert format_count(1234567) == "1.23 M" and format_count(12.5) == "12.5"


def test_the_profilers_cost_names_what_it_compares():
    # Like against like (``profiler_overhead``): the best profiled iteration against the
    # best warm-up run, or the median against the interleaved rounds' median. Where the
    # profiled run came out faster, the sentence says which (before: "the profiled
    # iterations ran 24% faster" beside a median slower than the unprofiled time).
    from kernelmagic.render.text import profiler_cost

    timings = [0.0011, 0.0010, 0.0012, 0.0010, 0.0009]  # best 0.9 ms, median 1.0 ms
    best = cpu_result(timings=timings, warmup_timings=[0.003, 0.0012, 0.00125])
    assert profiler_cost(best) == ("1.20 ms per iteration unprofiled (the best of 2 warm-up "
                                   "runs after the first); the best profiled iteration ran "
                                   "25% faster")
    median = cpu_result(timings=timings, unprofiled_timings=[0.0012, 0.0013, 0.0011])
    assert profiler_cost(median) == ("1.20 ms per iteration unprofiled (3 interleaved "
                                     "rounds); the profiled median ran 17% faster")
    slower = cpu_result(timings=timings, warmup_timings=[0.003, 0.0006])
    assert profiler_cost(slower).endswith("; profiling adds 50% (best against best)")
