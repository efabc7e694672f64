"""Ctrl-C after some profiled iterations: the report of those, then KeyboardInterrupt."""

from __future__ import annotations

import pytest
import torch
from IPython.utils.capture import capture_output

import kernelmagic
from kernelmagic.live import torch_compat
from kernelmagic.render.bundle import WIDGET_MIME
from kernelmagic.results.result import ProfileResult


def interrupted_on(run: int, adds_before: int = 2):
    """A callable that does a few adds and a mul, and raises on its ``run``-th call
    between the adds and the mul (so that run leaves ops behind in the profile)."""
    n = 0

    def fn() -> None:
        nonlocal n
        n += 1
        for _ in range(adds_before):
            torch.ones(4).add(1)
        if n == run:
            raise KeyboardInterrupt
        torch.ones(4).mul(2)

    return fn


def test_api_attaches_the_completed_iterations_and_reraises():
    with pytest.raises(KeyboardInterrupt) as info:
        kernelmagic.profile(interrupted_on(run=1 + 3), iters=5, warmup=1, name="ki")
    assert not torch_compat.profiler_running()
    result = info.value.result
    assert (result.iters, result.planned_iters, result.interrupted_after) == (2, 5, 2)
    assert len(result.timings) == 2
    rows = {r.key: r for r in result.rows}
    # The cut-short third iteration ran its adds: they are not counted.
    assert rows["aten::add"].count == 2 * 2
    assert rows["aten::mul"].count == 2
    assert rows["aten::ones"].count == 3 * 2
    assert "interrupted after 2 of 5 iterations (+1 warm-up)" in result.summary()
    again = ProfileResult.from_dict(result.to_dict())
    assert again == result and again.interrupted_after == 2


def test_interrupt_before_first_profiled_iteration_has_no_result():
    with pytest.raises(KeyboardInterrupt) as info:
        kernelmagic.profile(interrupted_on(run=2), iters=5, warmup=1)
    assert not hasattr(info.value, "result")
    assert not torch_compat.profiler_running()


def test_old_files_read_as_not_interrupted():
    from fakes import cpu_result

    data = cpu_result().to_dict()
    del data["planned_iters"]
    result = ProfileResult.from_dict(data)
    assert result.planned_iters == 0 and result.interrupted_after is None
    assert "10 iterations (+3 warm-up)" in result.summary()


def test_magic_shows_partial_report_then_ends_interrupted(ip):
    ip.run_cell("n = 0")
    cell = ("%%profile -n 5 -w 1 --name ki -o res\n"
            "n += 1\ntorch.ones(4).add(1)\nif n == 1 + 3:\n    raise KeyboardInterrupt")
    with capture_output() as cap:
        res = ip.run_cell(cell)
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert not torch_compat.profiler_running()
    assert len(cap.outputs) == 2  # the static report and its widget
    from test_magic import report_data
    data = report_data(cap.outputs)
    mark = "interrupted after 2 of 5 iterations"
    assert data["text/plain"].startswith(f"ki · CPU · {mark} (+1 warm-up)")
    assert mark in data["text/html"]
    assert WIDGET_MIME in data
    result = ip.user_ns["res"]
    assert result.interrupted_after == 2 and result.iters == 2
    assert {r.key: r.count for r in result.rows}["aten::add"] == 2
    assert ip.user_ns["n"] == 4  # the cell stopped at the interrupt


def test_magic_interrupt_in_warmup_shows_nothing(ip):
    ip.run_cell("n = 0")
    with capture_output() as cap:
        res = ip.run_cell("%%profile -n 5 -w 2\nn += 1\nif n == 2:\n    raise KeyboardInterrupt")
    assert isinstance(res.error_in_exec, KeyboardInterrupt)
    assert not cap.outputs


def test_cut_short_iteration_leaves_the_table_with_its_gpu_work_and_other_threads():
    """On a hand-made CUDA-like table: the cut range, its ops (any depth), the kernels
    they launched, another thread's op inside its span and its memory records go; the
    completed iteration and the outer range stay, and the views see one iteration."""
    from kernelmagic.core.events import Kind, TableBuilder, derive_links
    from kernelmagic.results.builder import build_result
    from kernelmagic.views.iterations import without_range

    b = TableBuilder()
    b.add(Kind.RANGE, "r", 0, 1000, tid=1)
    for i, (s, e) in enumerate([(10, 400), (500, 900)]):
        b.add(Kind.RANGE, f"r/iter {i}", s, e, tid=1)
        b.add(Kind.OP, "aten::mm", s + 10, s + 100, tid=1)
        b.add(Kind.RUNTIME, "cudaLaunchKernel", s + 20, s + 30, tid=1, correlation=i + 1)
        b.add(Kind.KERNEL, "gemm", s + 40, s + 240, tid=7, device=0, correlation=i + 1)
        b.add(Kind.MEMORY, "[memory]", s + 15, s + 15, tid=1, nbytes=64)
    b.add(Kind.OP, "autograd::engine", 600, 700, tid=2)  # backward thread, in iter 1
    table = derive_links(b.freeze())
    cut = without_range(table, "r/iter 1")
    names = [cut.names[i] for i in cut.name.tolist()]
    assert names.count("aten::mm") == 1 and names.count("gemm") == 1
    assert "r/iter 1" not in names and "autograd::engine" not in names
    assert names.count("[memory]") == 1 and "r" in names and "r/iter 0" in names
    assert without_range(table, "r/iter 5") is table  # no such range: unchanged
    result = build_result(cut, name="r", timings=[0.5e-6])
    rows = {r.key: r for r in result.rows}
    assert rows["aten::mm"].count == 1
    assert rows["aten::mm"].self_device_time_total == pytest.approx(0.2)  # one 200 ns gemm
    assert [k.count for k in result.kernels] == [1]
