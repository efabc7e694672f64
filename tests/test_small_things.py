"""Advice that fits the source, and the small things: ROCm's label, kernel names that stay
different, saved names in comparison headings, ``show FOLDER --rank N``, top-level await, a
server started again when it loses the race for its port."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from html import escape
from pathlib import Path

import pytest
from fakes import cpu_result
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
from loaded import loaded
from ranks_data import RANKS, expected_breakdown

import kernelmagic
from kernelmagic.render.names import ELLIPSIS, NAME_WIDTH, short_names, simplify, tell_apart
from kernelmagic.results.compare import compare
from kernelmagic.results.result import (
    ProfileResult,
    at_least_iterations,
    more_iterations,
    record,
    timing_warning,
    warm_up,
)

DATA = Path(__file__).parent / "data"
MI250 = DATA / "mi250_rocm.json.gz"
A100 = DATA / "a100_alexnet.json.gz"
V100 = DATA / "v100_gpu_annotations.json.gz"
SPIKY = [0.001] * 9 + [0.009]  # the slowest iteration 9x the median of the others


@pytest.fixture(scope="module")
def mi250() -> ProfileResult:
    return loaded(MI250)


def run(ip, cell: str):
    with capture_output() as cap:
        result = ip.run_cell(cell, store_history=True)
    return result, cap


# --- 4. advice that fits the source ------------------------------------------------------


def test_a_trace_knows_it_is_one_and_keeps_knowing_after_a_round_trip(tmp_path):
    trace = loaded(A100)
    assert (trace.source, trace.from_trace) == ("trace", True)
    trace.save(tmp_path / "t.json")
    assert kernelmagic.load(tmp_path / "t.json").source == "trace"
    live = cpu_result()
    assert (live.source, live.from_trace) == ("live", False)
    old = live.to_dict()
    del old["source"], old["gpu_runtime"]  # a profile saved before these fields existed
    assert ProfileResult.from_dict(old).source == "live"


def test_advice_for_a_live_run_names_the_magic_option():
    live = cpu_result()
    assert more_iterations(live, 50) == "run more iterations (--iters 50)"
    assert at_least_iterations(live, 5) == "use --iters 5 or more"
    assert warm_up(live) == "more warm-up runs (--warmup)"
    assert record(live, "--shapes") == "--shapes"


def test_advice_for_a_trace_says_what_to_change_in_the_recording():
    trace = cpu_result(source="trace")
    assert more_iterations(trace, 50) == ("record more steps (torch.profiler.schedule(active=50), "
                                          "prof.step() after each)")
    assert at_least_iterations(trace, 5) == ("record 5 or more steps: "
                                             "torch.profiler.schedule(active=5)")
    assert warm_up(trace) == ("a warm-up before the profiler records (torch.profiler.schedule("
                              "wait=1, warmup=1, active=N), or a few steps before "
                              "prof.start())")
    assert record(trace, "--shapes") == "torch.profiler.profile(record_shapes=True)"
    assert record(trace, "--memory") == "torch.profiler.profile(profile_memory=True)"
    with pytest.raises(ValueError, match="unknown recording option '--iters'"):
        record(trace, "--iters")


def test_noisy_finding_on_a_trace_advises_recording_more_steps():
    # Needs findings.noisy to word its advice with result.more_iterations.
    (noisy,) = [f for f in cpu_result(timings=[0.001, 0.002] * 5, source="trace").findings()
                if f.rule == "noisy"]
    assert noisy.suggestion == ("record more steps (torch.profiler.schedule(active=50), "
                                "prof.step() after each) and keep other work off the machine")
    assert "--iters" not in str(noisy)


def test_steps_that_ramp_to_a_plateau_are_not_steady_state_not_noise():
    # v100_gpu_annotations' steps: 35.1, 72.1, then 95.6-95.7 ms three times, while the
    # queue of launched work fills (the GPU runs 65-89 ms behind the CPU). It said "The
    # measurement is noisy ... keep other work off the machine".
    from kernelmagic.core.timing import settling

    (first,) = [f for f in loaded(V100).findings() if f.rule == "noisy"]
    assert first.title == "The first iterations are not steady state"
    assert first.evidence.startswith("the first 2 iterations took 35.1 ms, 72.1 ms, the last 3 "
                                     "95.7 ms (within 5.0% of each other); the first ones are "
                                     "shorter: the GPU runs behind the CPU")
    assert first.suggestion.startswith("profile steady state: a warm-up before the profiler "
                                       "records")
    assert settling([5.0, 1.0, 1.0, 1.02, 0.99]) == 1  # a slow first run, then steady
    assert settling([1.0, 2.0] * 5) == 0  # noise: no plateau
    assert settling([3.0, 2.0, 1.0]) == 0  # (the rest, two iterations: too few to tell)
    # Noise that happens to end on a plateau: the first ones on both sides of it, or not
    # nearer each time (a reviewer's draws fired on 39% of noisy 4-iteration runs before).
    assert settling([7.0, 13.0, 10.0, 10.5]) == 0
    assert settling([0.7, 1.3, 1.0, 1.01, 1.0]) == 0
    assert settling([0.8, 0.5, 1.0, 1.01, 1.0]) == 0


def test_noisy_finding_on_a_live_run_still_names_iters():
    (noisy,) = [f for f in cpu_result(timings=[0.001, 0.002] * 5).findings()
                if f.rule == "noisy"]
    assert noisy.suggestion == ("run more iterations (--iters 50) and keep other work off the "
                                "machine")


def test_slow_iteration_warning_fits_the_source():
    head = ("The slowest iteration took 9.0x the median of the others: something may be cached "
            "after the first runs, or another process competed for the machine. ")
    assert timing_warning(cpu_result(timings=SPIKY)) == head + "Consider more --warmup or --iters."
    assert timing_warning(cpu_result(timings=SPIKY, source="trace")) == head + (
        "Warm up before the profiler records (torch.profiler.schedule(wait=1, warmup=1, "
        "active=N)) and record more steps.")
    assert timing_warning(cpu_result(source="trace")) is None


def test_html_summary_warning_fits_the_source():
    from kernelmagic.render.html import summary_html

    html = summary_html(cpu_result(timings=SPIKY, source="trace"))
    assert "record more steps." in html and "--warmup" not in html


def test_text_report_warning_fits_the_source():
    # Needs render/text.py's text_report to take its warning from result.timing_warning.
    from kernelmagic.render.text import text_report

    text = text_report(cpu_result(timings=SPIKY, source="trace"))
    assert "and record more steps." in text and "--warmup" not in text


def test_comparing_traces_with_too_few_steps_says_how_to_record_more():
    a, b = kernelmagic.load(A100), kernelmagic.load(A100)
    assert compare(a, b).verdict() == (
        "1.00x faster, too few iterations to judge the noise (record 5 or more steps: "
        "torch.profiler.schedule(active=5))")
    mixed = compare(a, cpu_result(timings=[0.001] * 2, iters=2))
    assert mixed.verdict().endswith(
        "(use --iters 5 or more; record 5 or more steps: torch.profiler.schedule(active=5))")


# --- 5a. ROCm is labelled ROCm; torch's device name stays "cuda" ----------------------------


def test_rocm_trace_is_labelled_rocm_and_its_device_is_still_cuda(mi250, tmp_path):
    assert (mi250.device, mi250.gpu_runtime) == ("cuda", "rocm")
    assert mi250.device_label == "ROCm (AMD Radeon Graphics)"
    mi250.save(tmp_path / "r.json")
    assert kernelmagic.load(tmp_path / "r.json").device_label == "ROCm (AMD Radeon Graphics)"


@pytest.mark.parametrize(("name", "label"), [
    ("a100_alexnet.json.gz", "CUDA (NVIDIA A100-PG509-200)"),
    ("v100_gpu_annotations.json.gz", "CUDA (Tesla V100-SXM2-32GB)"),
    ("cpu_only.json.gz", "CPU"),
])
def test_other_traces_keep_their_labels(name, label):
    result = loaded(DATA / name)
    assert result.device_label == label
    assert result.gpu_runtime == ("" if label == "CPU" else "cuda")


def test_device_label_of_live_results():
    assert cpu_result().device_label == "CPU"
    gpu = dict(device="cuda", device_name="NVIDIA H200")
    assert cpu_result(**gpu).device_label == "CUDA (NVIDIA H200)"  # "" reads as CUDA
    assert cpu_result(**gpu, gpu_runtime="cuda").device_label == "CUDA (NVIDIA H200)"
    rocm = cpu_result(device="cuda", device_name="AMD Instinct MI250X", gpu_runtime="rocm")
    assert rocm.device_label == "ROCm (AMD Instinct MI250X)"
    assert cpu_result(device="cuda").device_label == "CUDA (GPU)"


def test_live_runtime_follows_torch_build(monkeypatch):
    import torch

    from kernelmagic.live import torch_compat

    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    assert torch_compat.gpu_runtime() == "rocm"
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    assert torch_compat.gpu_runtime() == "cuda"


def test_summary_line_names_rocm(mi250):
    # Needs render/text.py's summary_line to name the device with result.device_label.
    assert mi250.summary().split(" · ")[:2] == ["mi250_rocm", "ROCm (AMD Radeon Graphics)"]


# --- 5b. kernel names shortened so that different kernels stay different -------------------


def test_simplify_drops_what_never_tells_kernels_apart():
    assert simplify(
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1>)"
    ) == "vectorized_elementwise_kernel<4, FillFunctor<float>, Array<char*, 1>>"
    assert simplify(
        "void at::native::vectorized_elementwise_kernel<4, at::native::sqrt_kernel_cuda("
        "at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() "
        "const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::"
        "sqrt_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::"
        "{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)"
    ) == "vectorized_elementwise_kernel<4, sqrt_kernel_cuda::lambda(float), Array<char*, 2>>"
    assert simplify("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long)") \
        == "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"
    assert simplify("Memcpy HtoD (Host -> Device)") == "Memcpy HtoD (Host -> Device)"
    assert simplify("triton_poi_fused_add_0") == "triton_poi_fused_add_0"


def test_the_issues_three_kernels_are_told_apart(mi250):
    short = short_names(k.key for k in mi250.kernels)
    elementwise = sorted(v for k, v in short.items()
                         if k.startswith("void at::native::vectorized_elementwise_kernel<4"))
    assert elementwise == [
        "vectorized_elementwise_kernel<4, BinaryFunctor<float, float…",
        "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>, Ar…",
        "vectorized_elementwise_kernel<4, FillFunctor<float>, Array<…",
        "vectorized_elementwise_kernel<4, launch_clamp_scalar::lambd…",
        "vectorized_elementwise_kernel<4, mse_kernel_cuda::lambda(fl…",
    ]


@pytest.mark.parametrize("path", sorted(DATA.glob("*.json.gz")) + sorted(RANKS.glob("*.json.gz")),
                         ids=lambda p: p.name)
def test_every_real_trace_keeps_its_kernels_apart_within_the_width(path):
    names = [k.key for k in loaded(path).kernels]
    short = short_names(names)
    assert len(set(short.values())) == len(set(names))
    assert max((len(s) for s in short.values()), default=0) <= NAME_WIDTH
    for name, text in short.items():
        assert text == simplify(name) or ELLIPSIS in text or text == name


def test_a_difference_past_the_width_is_shown_after_the_head():
    head = "kernel<" + "Metadata<float, 1>, " * 3
    names = [head + f"Functor<{t}>, Array<char*, 3>>" for t in ("float", "double")]
    assert short_names(names, width=60) == {
        names[0]: "kernel<…Functor<float>, Array<char*, 3>>",
        names[1]: "kernel<…Functor<double>, Array<char*, 3>>",
    }


def test_short_names_that_still_coincide_get_their_tail_then_a_number():
    base = {"a": "x" * 70 + "1", "b": "x" * 70 + "2", "c": "y" * 70 + "2"}
    same = {"a": "S…", "b": "S…", "c": "S…"}
    out = tell_apart(same, base, 60)
    assert out == {"a": "S…", "b": "…" + "x" * 58 + "2", "c": "…" + "y" * 58 + "2"}
    clash = tell_apart({"a": "S", "b": "S", "c": "S"}, {"a": "S", "b": "S", "c": "S"}, 60)
    assert sorted(clash.values()) == ["S", "S… #2", "S… #3"]


def test_kernel_table_shows_short_names_and_keeps_the_full_ones(mi250):
    from kernelmagic.render.html import rows_html
    from kernelmagic.render.text import text_report
    from kernelmagic.render.views import kernel_table

    table = kernel_table(mi250)
    name = table.columns[0]
    add = next(k for k in mi250.kernels if "CUDAFunctor_add" in k.key)
    assert name.show(add) == "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>, Ar…"
    assert name.value(add) == add.key  # sorts by, and titles with, the full name
    html = rows_html(table, [add])
    assert f'title="{escape(add.key)}"' in html
    # (names may break after their separators: <wbr>, #28)
    assert (">vectorized_elementwise_kernel&lt;4, CUDAFunctor_add&lt;float&gt;, Ar…</td>"
            in html.replace("<wbr>", ""))
    text = text_report(mi250)
    assert "\nvectorized_elementwise_kernel<4, CUDAFunctor_add<float>, Ar…      2  " in text
    assert "\nvectorized_elementwise_kernel<4, mse_kernel_cuda::lambda(fl…      1  " in text


# --- 5c. comparison headings use the saved name ---------------------------------------------


def test_comparison_headed_by_labels():
    from kernelmagic.render.compare import headline

    before, after = cpu_result(), cpu_result(name="cell[10]")
    cmp = compare(before, after, before_label="eager")
    assert (cmp.before_name, cmp.after_name) == ("eager", "cell[10]")
    assert headline(cmp).startswith("cell[10] vs eager: ")
    assert repr(cmp).startswith("<Comparison 'eager' -> 'cell[10]': ")
    assert headline(after.compare(before)).startswith("cell[10] vs cell[7]: ")  # no labels


def test_compare_after_save_is_headed_by_the_saved_names(ip):
    ip.run_cell("a = torch.randn(32, 32)")
    res, _ = run(ip, "%%profile -n 2 -w 0 -q --save eager\nc = a @ a")
    assert res.success
    res, cap = run(ip, "%%profile -n 2 -w 0 --compare eager\nc = a @ a")
    assert res.success and len(cap.outputs) == 4  # each: its static report, its widget
    first = cap.outputs[2].data["text/plain"].splitlines()[0]
    assert first.startswith(f"cell[{res.execution_count}] vs eager: ")
    res, cap = run(ip, "%%profile -n 2 -w 0 --save compiled --compare eager\nc = a @ a")
    assert cap.outputs[2].data["text/plain"].startswith("compiled vs eager: ")
    # An explicit --name names the run, as before.
    res, cap = run(ip, "%%profile -n 2 -w 0 --name fast --save f2 --compare eager\nc = a @ a")
    assert cap.outputs[2].data["text/plain"].startswith("fast vs eager: ")


# --- 5d. show FOLDER --rank N -------------------------------------------------------------


@pytest.fixture(scope="module")
def many():
    return kernelmagic.load(RANKS)


def test_ranks_report_says_how_to_see_one_rank(many):
    from kernelmagic.render.ranks import html_report, text_report

    assert text_report(many).splitlines()[-1] == (
        "A rank's full report: result.ranks[N], or python -m kernelmagic show FOLDER --rank N.")
    assert ("<code>result.ranks[N]</code>, or <code>python -m kernelmagic show FOLDER "
            "--rank N</code>.") in html_report(many)


def _report_parts(out: str) -> tuple[str, list[str], bool]:
    """A printed report's first line, its op table's rows, and whether it has findings."""
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("op (mean of "))
    rows = []
    for line in lines[header + 2:]:  # after the column names and the dashes
        if not line or line.startswith(("... ", "more columns")):
            break
        rows.append(line)
    return lines[0], rows, "Findings:" in lines


def test_cli_show_folder_rank_prints_that_ranks_report(capsys):
    from kernelmagic.cli import main

    # rank-1.json.gz holds two ProfilerStep# windows, median 619 ms (ranks_data's own
    # reading of the JSON); the report is named after the file.
    steps = expected_breakdown(RANKS / "rank-1.json.gz")
    assert (steps["steps"], round(steps["step_median_us"] / 1000)) == (2, 619)
    assert main(["show", str(RANKS), "--rank", "1", "--limit", "5"]) == 0
    first, rows, findings = _report_parts(capsys.readouterr().out)
    assert first.startswith("rank-1 · CUDA (GPU) · 2 iterations · 619 ms per iteration ")
    assert len(rows) == 5 and findings


def test_cli_show_saved_run_rank(many, tmp_path, capsys):
    from kernelmagic.cli import main

    steps = expected_breakdown(RANKS / "rank-0.json.gz")
    assert (steps["steps"], round(steps["step_median_us"] / 1000)) == (2, 615)
    saved = many.save(tmp_path / "run.json")
    assert main(["show", str(saved), "--rank", "0", "--no-findings"]) == 0
    first, rows, findings = _report_parts(capsys.readouterr().out)
    assert first.startswith("rank-0 · CUDA (GPU) · 2 iterations · 615 ms per iteration ")
    assert len(rows) == 25 and not findings  # the default --limit, and --no-findings


def test_cli_rank_errors_are_one_line(capsys):
    from kernelmagic.cli import main

    assert main(["show", str(RANKS), "--rank", "7"]) == 2
    assert capsys.readouterr().err == (
        f"kernelmagic: error: --rank 7: {RANKS} has no rank 7 (its ranks: 0, 1)\n")
    assert main(["show", str(A100), "--rank", "0"]) == 2
    assert capsys.readouterr().err == (
        f"kernelmagic: error: --rank 0: {A100} is one profile, not a run of many ranks "
        "(a folder of traces or a saved many-ranks result)\n")


# --- 5e. top-level await in a profiled cell -------------------------------------------------

ASYNC_SETUP = """\
import asyncio, torch
calls = 0
async def work():
    global calls
    await asyncio.sleep(0.001)
    calls += 1
    return torch.ones(8) @ torch.ones(8)
"""


def test_top_level_await_runs_each_iteration_to_completion(ip):
    ip.run_cell(ASYNC_SETUP)
    res, _ = run(ip, "%%profile -n 3 -w 2 -q -o r\nx = await work()\ny = x + 1")
    assert res.success, res.error_in_exec
    assert ip.user_ns["calls"] == 5  # 2 warm-up runs + 3 profiled, each awaited to its end
    assert float(ip.user_ns["y"]) == 9.0
    r = ip.user_ns["r"]
    counts = {row.key: row.count for row in r.rows}
    assert (r.iters, counts["aten::dot"], counts["aten::add"]) == (3, 3, 3)
    assert all(t >= 0.001 for t in r.timings)  # the sleep is inside each timed iteration


def test_top_level_await_in_the_line_magic(ip):
    ip.run_cell(ASYNC_SETUP)
    res, _ = run(ip, "%profile -n 2 -w 0 -q await work()")
    assert res.success and ip.user_ns["calls"] == 2


def test_top_level_await_inside_a_running_event_loop(ip):
    # A Jupyter kernel runs each cell while its own event loop is running on this thread.
    ip.run_cell(ASYNC_SETUP)

    async def kernel():
        loop = asyncio.get_running_loop()
        res, _ = run(ip, "%%profile -n 2 -w 1 -q\nx = await work()")
        assert asyncio.get_running_loop() is loop  # the kernel's loop is back in place
        return res

    res = asyncio.run(kernel())
    assert res.success, res.error_in_exec
    assert ip.user_ns["calls"] == 3


def test_top_level_await_with_autoawait_off_is_a_one_line_usage_error(ip):
    ip.run_cell(ASYNC_SETUP)
    ip.run_line_magic("autoawait", "False")
    try:
        res, cap = run(ip, "%%profile -n 2 -w 0\nx = await work()")
    finally:
        ip.run_line_magic("autoawait", "True")
    assert isinstance(res.error_in_exec, UsageError)
    assert str(res.error_in_exec) == (
        "the cell uses top-level await and %autoawait is off: turn it on (%autoawait asyncio), "
        "or wrap the code in a function and run it with asyncio.run(main())")
    assert "SyntaxError" not in cap.stdout + cap.stderr
    assert ip.user_ns["calls"] == 0


def test_other_syntax_errors_are_still_syntax_errors(ip):
    res, cap = run(ip, "%%profile\nx = await (\n")
    assert isinstance(res.error_in_exec, UsageError)
    assert str(res.error_in_exec) == "the cell has a syntax error (shown above)"
    assert "SyntaxError" in cap.stdout + cap.stderr


def test_profile_an_async_function_from_python():
    calls = []

    async def step():
        await asyncio.sleep(0)
        calls.append(1)

    result = kernelmagic.profile(step, iters=3, warmup=1, name="async")
    assert len(calls) == 4 and result.iters == 3


def test_json_of_a_trace_result_names_its_source(tmp_path):
    data = json.loads(kernelmagic.load(MI250).save(tmp_path / "m.json").read_text())
    assert (data["source"], data["gpu_runtime"], data["device"]) == ("trace", "rocm", "cuda")


def test_a_lost_port_race_is_started_again_and_nothing_else_is():
    from port_race import STARTS, retried

    calls: list[int] = []

    def start(fails: int, error: Exception) -> Callable[[], str]:
        def go() -> str:
            calls.append(1)
            if len(calls) <= fails:
                raise error
            return "up"
        return go

    def lost(exc: Exception) -> bool:
        return "already in use" in str(exc)

    assert retried(start(STARTS - 1, OSError("Address already in use")), lost) == "up"
    assert len(calls) == STARTS
    calls.clear()
    with pytest.raises(OSError):  # lost every time: the last error, after STARTS starts
        retried(start(STARTS, OSError("Address already in use")), lost)
    assert len(calls) == STARTS
    calls.clear()
    with pytest.raises(ValueError):  # any other error: at once
        retried(start(1, ValueError("a cell raised")), lost)
    assert len(calls) == 1


def _settling_by_definition(timings):
    """``core/timing.py: settling`` as its docstring says it, every split tried."""
    import itertools
    import statistics

    n = len(timings)
    for k in range(1, n - max(3, (n + 1) // 2) + 1):
        tail, middle = timings[k:], statistics.median(timings[k:])
        head = [t - middle for t in timings[:k]]
        if (all(abs(t - middle) <= 0.05 * middle for t in tail)
                and all(abs(d) > 0.15 * middle for d in head)
                and (all(d < 0 for d in head) or all(d > 0 for d in head))
                and all(abs(a) > abs(b) for a, b in itertools.pairwise(head))):
            return k
    return 0


def test_settling_passes_wide_tails_without_changing_its_answer():
    # It skips the splits whose rest spans wider than a plateau can (linear in the
    # iterations, where trying each split's median was quadratic: 1.4 s at 5,000): the
    # same answers as every split tried, on ramps and on noise.
    import numpy as np

    from kernelmagic.core.timing import settling

    rng = np.random.default_rng(0)
    for _ in range(3000):
        n = int(rng.integers(3, 14))
        t = list(rng.lognormal(0, float(rng.choice([0.01, 0.05, 0.2])), n))
        for i in range(int(rng.integers(0, 3))):  # a ramp up to the plateau, sometimes
            t[i] *= 0.3 + 0.2 * i
        assert settling(t) == _settling_by_definition(t), t
    for _ in range(200):  # longer runs, ramps of up to a dozen iterations among them
        n = int(rng.integers(14, 300))
        t = list(rng.lognormal(0, float(rng.choice([0.005, 0.01, 0.2])), n))
        for i in range(int(rng.integers(0, 12))):
            t[i] *= 0.2 + 0.06 * i
        assert settling(t) == _settling_by_definition(t), t


def test_settling_takes_no_median_per_split_of_a_steady_rest(monkeypatch):
    # A rest steady from the second iteration on, whose first iterations are no ramp: every
    # split's rest is narrow enough for a plateau, so the range check passes them all; a
    # ramp must rise or fall strictly, and this one does neither past its second value.
    # It took a median per split: 1.1 s at 8,000 iterations.
    from kernelmagic.core import timing

    medians = []
    real = timing.statistics.median
    monkeypatch.setattr(timing.statistics, "median", lambda v: medians.append(1) or real(v))
    timings = [1.0, 0.5, 0.7] + [1.0] * 7997
    assert timing.settling(timings) == 0
    assert len(medians) <= 2
    assert timing.settling([0.3, 0.5, 0.7] + [1.0] * 7997) == 3  # a ramp still is one
    # A slow strict drift passes both of those tests at every split; its last head value
    # is never beyond the noise band of a median in the rest's range (1.1 s at 8,000).
    medians.clear()
    assert timing.settling([1 + 1e-5 * i for i in range(8000)]) == 0
    assert len(medians) == 0
    for slope in (1e-3, 0.01, 0.05, 0.2):  # strict drifts, steep ones ramps, against the
        for n in (14, 60, 299):  # definition (median taken only where it can answer)
            for ramp in ([1 + slope * i for i in range(n)], [1 + slope * (n - i)
                                                             for i in range(n)]):
                assert timing.settling(ramp) == _settling_by_definition(ramp), (slope, n)
