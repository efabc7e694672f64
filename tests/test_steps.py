"""``--steps TARGET`` (#32): each call of a module or function as a step.

The view on hand-made tables with exact numbers; the findings on results with injected
step times; then live runs of models written here (a two-layer causal decoder with random
weights generating 16 tokens from a 64-token prompt, a training loop of 8 batches), through
``kernelmagic.profile`` and the magic. Live assertions are structural or compare steps of
one run with each other, never against the machine's speed.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
import time

import pytest
import torch
import torch.nn.functional as F
from fakes import cpu_result, table_of
from IPython.utils.capture import capture_output
from torch import nn
from workloads import Decoder, generate

import kernelmagic
from kernelmagic.core.events import Kind
from kernelmagic.core.options import ProfileOptions, StepTarget
from kernelmagic.core.step_rows import RepeatedCall, StepGroupRow, StepRow, StepsSummary
from kernelmagic.findings.steps import (
    SLOWDOWN_RISE,
    slow_first_step,
    step_overhead,
    steps_slow_down,
    time_between_steps,
)
from kernelmagic.render.text import text_report
from kernelmagic.results.result import ProfileResult
from kernelmagic.views.steps import steps_view
from kernelmagic.views.tree import Figures

R, OP, M = Kind.RANGE, Kind.OP, Kind.MEMORY

# --- the view, on hand-made tables -------------------------------------------------------


def generation_table():
    """Two iterations of 100 µs: a prefill step (x (1, 4)) and two decode steps (x (1, 1)),
    an argmax between them; memory records: 400 B kept by the prefill, 16 B per decode."""
    events = []
    for i, base in enumerate((0, 100)):
        events += [
            (R, f"r/iter {i}", base, base + 100, 1),
            (R, "r/step 0: x (1, 4) int64", base + 10, base + 40, 1),
            (OP, "aten::mm", base + 12, base + 38, 1),
            (M, "[memory]", base + 30, base + 30, 1, {"nbytes": 400}),
            (OP, "aten::argmax", base + 45, base + 48, 1),
            (R, "r/step 1: x (1, 1) int64", base + 50, base + 60 + i, 1),
            (OP, "aten::add", base + 51, base + 57, 1),
            (M, "[memory]", base + 55, base + 55, 1, {"nbytes": 16}),
            (R, "r/step 2: x (1, 1) int64", base + 70, base + 80 + 2 * i, 1),
            (OP, "aten::add", base + 71, base + 79, 1),
            (M, "[memory]", base + 75, base + 75, 1, {"nbytes": 16}),
        ]
    return table_of(*events)


WINDOWS = [(0, 100_000), (100_000, 200_000)]


def test_steps_view_times_groups_and_between():
    table = generation_table()
    view = steps_view(table, Figures(table), WINDOWS, "r", target="model", memory=True,
                      median_iteration=1)
    walls = [(s.iteration, s.index, s.group, s.wall_us, s.cpu_us) for s in view.rows]
    assert walls == [
        (0, 0, "prefill", 30.0, 26.0), (0, 1, "decode", 10.0, 6.0), (0, 2, "decode", 10.0, 8.0),
        (1, 0, "prefill", 30.0, 26.0), (1, 1, "decode", 11.0, 6.0), (1, 2, "decode", 12.0, 8.0)]
    prefill, decode = view.groups
    assert (prefill.group, prefill.inputs, prefill.count, prefill.median_us) == (
        "prefill", "x (1, 4) int64", 1, 30.0)
    assert (decode.group, decode.inputs, decode.count) == ("decode", "x (1, 1) int64", 2)
    assert decode.median_us == 10.5  # of 10, 10, 11, 12
    assert decode.first_us == 10.5  # each iteration's first decode step: 10 and 11
    assert (decode.slowest_us, decode.slowest_index, decode.slowest_iteration) == (12.0, 2, 1)
    assert decode.steps_per_s == pytest.approx(1e6 / 10.5)
    assert decode.top_ops == {"aten::add": 7.0}  # (6 + 8) µs per 2 steps
    assert prefill.top_ops == {"aten::mm": 26.0}
    # Memory held since the iteration began, at each step's end: 400, 416, 432 bytes.
    assert [s.memory_held for s in view.rows[:3]] == [400.0, 416.0, 432.0]
    assert decode.memory_per_step == 16.0
    summary = view.summary
    assert (summary.target, summary.steps, summary.median_iteration) == ("model", 3, 1)
    # Iteration 0: 100 - (30 + 10 + 10) = 50 µs; iteration 1: 100 - 53 = 47 µs.
    assert summary.between_us == 48.5
    assert summary.between_top_ops == {"aten::argmax": 3.0}
    assert (summary.slowest_us, summary.slowest_index, summary.slowest_iteration) == (
        30.0, 0, 0)


def uneven_table(compile_in_first: bool = False):
    """Three iterations of four 50 µs steps back to back from each window's start, with
    ``aten::add`` 10 µs in each step but 40 µs in iteration 0's first; windows of 400,
    300 and 500 µs, so 200, 100 and 300 µs outside the steps. Between the steps: in
    iteration 0 ``aten::cat`` 100 µs and ``aten::argmax`` 80 µs, in iteration 1
    ``aten::argmax`` 90 µs, in iteration 2 ``aten::argmax`` 290 µs; on another thread in
    iteration 0, ``aten::copy_`` 150 µs (not the loop's). With ``compile_in_first``,
    dynamo compiles inside iteration 0's first step."""
    events = []
    for i, (base, length) in enumerate(((0, 400), (1000, 300), (2000, 500))):
        events.append((R, f"r/iter {i}", base, base + length, 1))
        for j in range(4):
            lo = base + 50 * j
            events.append((R, f"r/step {j}: x (1, 1) int64", lo, lo + 50, 1))
            add = 40 if (i, j) == (0, 0) else 10
            events.append((OP, "aten::add", lo + 2, lo + 2 + add, 1))
            if compile_in_first and (i, j) == (0, 0):
                events.append((OP, "_compile.compile_inner (dynamo_timed)", lo + 43, lo + 48,
                               1))
    events += [(OP, "aten::cat", 210, 310, 1), (OP, "aten::argmax", 315, 395, 1),
               (OP, "aten::copy_", 210, 360, 2),
               (OP, "aten::argmax", 1205, 1295, 1), (OP, "aten::argmax", 2205, 2495, 1)]
    return table_of(*events)


UNEVEN_WINDOWS = [(0, 400_000), (1_000_000, 1_300_000), (2_000_000, 2_500_000)]


def test_step_figures_are_medians_and_between_parts_fit_in_their_total():
    table = uneven_table()
    view = steps_view(table, Figures(table), UNEVEN_WINDOWS, "r", median_iteration=0)
    (group,) = view.groups
    assert (group.count, group.median_us) == (4, 50.0)
    # aten::add per step: 40 once, 10 eleven times: the median 10 µs (the mean is 12.5).
    assert group.top_ops == {"aten::add": 10.0}
    summary = view.summary
    # Outside the steps: 400 - 200, 300 - 200, 500 - 200: the median 200 µs, iteration 0's.
    assert summary.between_us == 200.0
    # Its ops on the loop's thread (the other thread's copy_ is not between the steps):
    assert summary.between_top_ops == {"aten::cat": 100.0, "aten::argmax": 80.0}
    assert sum(summary.between_top_ops.values()) <= summary.between_us
    assert group.first_compiles == 0
    # Two iterations: the lower middle one's ops (iteration 1: 100 µs, argmax 90 µs)
    # against the median 150 µs.
    view = steps_view(table, Figures(table), UNEVEN_WINDOWS[:2], "r")
    assert view.summary.between_us == 150.0
    assert view.summary.between_top_ops == {"aten::argmax": 90.0}


def test_a_compile_inside_a_first_step_is_counted_for_its_group():
    table = uneven_table(compile_in_first=True)
    view = steps_view(table, Figures(table), UNEVEN_WINDOWS, "r")
    assert view.groups[0].first_compiles == 1


def test_a_target_never_called_is_a_note_not_an_empty_view():
    table = table_of((R, "r/iter 0", 0, 100, 1), (OP, "aten::mm", 10, 20, 1))
    view = steps_view(table, Figures(table), [(0, 100_000)], "r", target="model")
    assert view.rows == [] and view.groups == []
    assert view.summary.note == "model was not called during the profiled iterations"


def test_inputs_that_differ_at_each_step_group_by_their_pattern():
    """No KV cache: the sequence grows by one token a step, so every step's inputs differ;
    they are one group, its sizes written as a range."""
    events = [(R, "r/iter 0", 0, 1000, 1)]
    for j in range(6):
        events.append((R, f"r/step {j}: x (1, {64 + j}) int64", 10 + 100 * j,
                       60 + 100 * j, 1))
    table = table_of(*events)
    view = steps_view(table, Figures(table), [(0, 1_000_000)], "r")
    assert [(g.group, g.count) for g in view.groups] == [("x (1, 64…69) int64", 6)]


def test_one_group_without_tensor_inputs_is_all_steps():
    table = table_of((R, "r/iter 0", 0, 100, 1), (R, "r/step 0", 10, 20, 1),
                     (R, "r/step 1", 30, 40, 1))
    view = steps_view(table, Figures(table), [(0, 100_000)], "r")
    assert [(g.group, g.inputs, g.count) for g in view.groups] == [("all steps", "", 2)]


# --- findings, on injected step times ----------------------------------------------------


def stepped(walls: list[list[float]], *, cpu: float | None = None, between: float = 0.0,
            timings: list[float] | None = None, first_compiles: int = 0) -> ProfileResult:
    """A CPU result whose iterations ran one group of steps of these wall times (µs)."""
    rows = [StepRow(iteration=i, index=j, group="decode", wall_us=w,
                    cpu_us=w if cpu is None else cpu)
            for i, ws in enumerate(walls) for j, w in enumerate(ws)]
    flat = sorted(r.wall_us for r in rows)
    firsts = sorted(ws[0] for ws in walls)
    group = StepGroupRow(group="decode", inputs="x (1, 1) int64", count=len(walls[0]),
                         median_us=flat[len(flat) // 2], first_us=firsts[len(firsts) // 2],
                         slowest_us=flat[-1], slowest_index=0, slowest_iteration=0,
                         cpu_us=flat[len(flat) // 2] if cpu is None else cpu,
                         first_compiles=first_compiles)
    iteration = sum(walls[0]) + between
    return cpu_result(
        iters=len(walls), timings=timings or [iteration / 1e6] * len(walls), steps=rows,
        step_groups=[group], views=["steps"],
        steps_summary=StepsSummary(target="model", steps=len(walls[0]),
                                   between_us=between,
                                   between_top_ops={"aten::argmax": 40.0}))


def test_slow_down_fires_on_rising_steps_with_the_numbers():
    # 8 steps rising by 10 µs from 100 µs: a fitted rise of 70%; a stall in one iteration
    # (1000 µs) does not count, each place takes its best time.
    rising = [100.0 + 10 * j for j in range(8)]
    stalled = [*rising[:3], 1000.0, *rising[4:]]
    found = steps_slow_down(stepped([rising, stalled, rising]))
    assert found is not None
    assert found.evidence == ("8 steps per iteration: the first takes 100 µs (best of the "
                              "iterations), the last 170 µs (a fitted rise of 70%; later "
                              "steps are slower in 100% of pairs)")
    assert "KV cache" in found.suggestion


def test_slow_down_is_silent_on_flat_and_on_shallow_steps():
    flat = [100.0, 103.0, 99.0, 101.0, 100.0, 102.0, 98.0, 101.0]
    assert steps_slow_down(stepped([flat, flat])) is None
    shallow = [100.0 + 1.2 * j for j in range(8)]  # rises 8.4%: below SLOWDOWN_RISE
    assert SLOWDOWN_RISE == 0.1
    assert steps_slow_down(stepped([shallow])) is None


def test_slow_first_step_fires_at_three_times_the_median():
    walls = [300.0, 100.0, 100.0, 100.0]
    found = slow_first_step(stepped([walls]))
    assert found is not None
    # Nothing compiled in the step: compilation is not named as a cause.
    assert found.evidence == ("300 µs against 100 µs for the median of its 4 steps per "
                              "iteration (3.0x): allocation or a cache filled on the first "
                              "call")
    assert "compil" not in found.suggestion
    assert slow_first_step(stepped([[290.0, 100.0, 100.0, 100.0]])) is None


def test_slow_first_step_names_compilation_only_where_it_compiled():
    found = slow_first_step(stepped([[300.0, 100.0, 100.0, 100.0]] * 3, first_compiles=2))
    assert found.evidence.endswith("(3.0x): torch.compile compiled in it (in 2 of the 3 "
                                   "iterations)")
    assert "so that it compiles there" in found.suggestion


def test_the_steps_line_and_table_say_their_figures_are_medians():
    from kernelmagic.render.steps import group_table, steps_notes

    result = stepped([[100.0, 120.0, 110.0]], between=100.0)
    line = steps_notes(result)[0]
    assert line.endswith("between the steps 100 µs per iteration (median; ops there: "
                         "aten::argmax 40.0 µs)")
    assert "top ops per step (median self time)" in [c.title for c in group_table(result).columns]


def test_overhead_bound_steps_on_the_cpu():
    # Each 100 µs step spends 40 µs in ops: 60 µs of Python per step, 4 steps per iteration.
    found = step_overhead(stepped([[100.0] * 4], cpu=40.0))
    assert found is not None
    assert found.evidence == ("decode steps (4 steps per iteration, 100 µs each): ops run "
                              "40.0 µs of each step (40%); the rest is Python outside ops")
    assert found.share == pytest.approx(240 / 400)
    assert step_overhead(stepped([[100.0] * 4], cpu=50.0)) is None  # at the bar


def test_time_between_steps_fires_above_its_share():
    found = time_between_steps(stepped([[100.0] * 4], between=100.0))  # 20%
    assert found is not None
    assert found.evidence == ("100 µs per iteration (20%) is spent between the calls of "
                              "model; ops there: aten::argmax 40.0 µs")
    assert time_between_steps(stepped([[100.0] * 4], between=99.0)) is None


def test_step_rows_survive_the_json_text_round_trip():
    result = stepped([[100.0, 120.0]], between=10.0)
    result.repeated_call = RepeatedCall(target="model", module_type="GPT", calls=16)
    back = ProfileResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert back.steps == result.steps and back.step_groups == result.step_groups
    assert back.steps_summary == result.steps_summary
    assert back.repeated_call == result.repeated_call
    assert list(back.to_pandas("steps").columns)[:6] == [
        "iteration", "index", "group", "wall_us", "cpu_us", "device_us"]
    assert back.to_pandas("step_groups")["count"].tolist() == [2]


# --- the models ------------------------------------------------------------------------


@pytest.fixture
def one_thread():
    """One intra-op thread: the two CPUs of a loaded machine are not fought over."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def report_text(cap) -> str:
    """The report's text/plain, as the magic displayed it."""
    return "\n".join(out.data.get("text/plain", "") for out in cap.outputs)


def hooks_of(module: nn.Module) -> int:
    return len(module._forward_pre_hooks) + len(module._forward_hooks)


def global_hooks() -> int:
    from torch.nn.modules import module as nn_module

    return len(nn_module._global_forward_pre_hooks) + len(nn_module._global_forward_hooks)


# --- live: generation ------------------------------------------------------------------


def test_generation_with_a_kv_cache_splits_prefill_from_flat_decode(one_thread):
    torch.manual_seed(0)
    model = Decoder().eval()
    prompt = torch.randint(0, 128, (1, 64))
    result = kernelmagic.profile(lambda: generate(model, prompt), iters=5, warmup=1,
                                 steps=model, memory=True, name="gen")
    assert hooks_of(model) == 0 and global_hooks() == 0
    prefill, decode = result.step_groups
    assert (prefill.group, prefill.inputs, prefill.count) == ("prefill", "idx (1, 64) int64", 1)
    assert (decode.group, decode.inputs, decode.count) == ("decode", "idx (1, 1) int64", 15)
    assert len(result.steps) == 5 * 16
    assert [s.index for s in result.steps[:16]] == list(range(16))
    assert result.steps_summary.target == "Decoder"
    # Each decode step feeds one token: the same work at each step, shown by its memory
    # below (its time is flat too, but a loaded machine's noise can cross the slow-down
    # rule's threshold: the rule's silence on flat steps is checked on exact times,
    # test_slow_down_is_silent_on_flat_and_on_shallow_steps).
    # The cache grows by one token's keys and values per layer per decode step: 2 layers x
    # (k, v) x 64 floats x 4 bytes = 1024 bytes, and the loop's idx by one int64 (8 bytes),
    # the same at each step once the prefill's logits are freed (after the first decode).
    it = [s for s in result.steps if s.iteration == result.steps_summary.median_iteration]
    growth = {b.memory_held - a.memory_held for a, b in itertools.pairwise(it[2:])}
    assert growth == {1024 + 8}
    assert decode.memory_per_step == 1024 + 8
    # Prefill's ops are not summed with decode's: the prefill step's top op is per step.
    assert prefill.top_ops and decode.top_ops
    text = text_report(result)
    assert "prefill: idx (1, 64) int64, 1 step, " in text
    assert "decode: idx (1, 1) int64, 15 steps, " in text and " steps/s" in text
    assert "[steps in order]" in text


def test_generation_without_a_cache_is_one_growing_group(one_thread):
    """Without a cache every step runs the whole, growing sequence: one group of 16 steps.
    Its live times rise by at most 79/64 - 1 = 23%, less than this loaded machine's noise
    (6% to 33% between runs), so the slow-down rule is checked on the live steps with each
    step's time set to what its work implies: proportional to its sequence length."""
    torch.manual_seed(0)
    model = Decoder().eval()
    prompt = torch.randint(0, 128, (1, 64))
    result = kernelmagic.profile(lambda: generate(model, prompt, cache=False), iters=2,
                                 warmup=1, steps=model, name="gen")
    (group,) = result.step_groups
    assert (group.group, group.inputs, group.count) == (
        "idx (1, 64…79) int64", "idx (1, 64…79) int64", 16)
    assert [s.inputs for s in result.steps[:3]] == [
        "idx (1, 64) int64", "idx (1, 65) int64", "idx (1, 66) int64"]
    by_length = dataclasses.replace(result, steps=[
        dataclasses.replace(s, wall_us=100.0 * (64 + s.index)) for s in result.steps])
    found = steps_slow_down(by_length)
    assert found is not None
    assert "the first takes 6.40 ms (best of the iterations), the last 7.90 ms" in found.evidence
    assert "a fitted rise of 23%" in found.evidence


# --- live: a training loop, a function target ------------------------------------------


SLOW_BATCH = 5


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor,
               y: torch.Tensor, slow: bool) -> float:
    if slow:
        time.sleep(0.15)
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def test_a_training_loop_through_the_magic(ip, one_thread):
    ip.push({"train_step": train_step, "SLOW": SLOW_BATCH})
    ip.run_cell("model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), "
                "torch.nn.Linear(64, 1))\n"
                "opt = torch.optim.SGD(model.parameters(), lr=0.01)\n"
                "batches = [(torch.randn(16, 32), torch.randn(16, 1)) for _ in range(8)]")
    with capture_output() as cap:
        res = ip.run_cell("%%profile -n 2 -w 1 --steps train_step -o r\n"
                          "for i, (x, y) in enumerate(batches):\n"
                          "    train_step(model, opt, x, y, i == SLOW)\n")
    res.raise_error()
    r = ip.user_ns["r"]
    assert ip.user_ns["train_step"] is train_step  # the wrapper is gone
    assert r.steps_summary.target == "train_step" and r.steps_summary.steps == 8
    (group,) = r.step_groups
    assert group.count == 8 and group.inputs.startswith("x (16, 32) float32; y (16, 1) float32")
    mine = [s for s in r.steps if s.iteration == r.steps_summary.median_iteration]
    assert max(mine, key=lambda s: s.wall_us).index == SLOW_BATCH
    assert r.steps_summary.slowest_index == SLOW_BATCH
    assert "Steps (train_step): 8 steps per iteration" in report_text(cap)


def add_one(x: torch.Tensor) -> torch.Tensor:
    return x + 1


def test_a_function_target_through_the_api():
    x = torch.ones(4)
    result = kernelmagic.profile(lambda: [add_one(x) for _ in range(3)], iters=2, warmup=0,
                                 steps=add_one, name="fn")
    assert globals()["add_one"] is add_one
    assert [(s.iteration, s.index) for s in result.steps] == [(i, j) for i in (0, 1)
                                                               for j in range(3)]
    (group,) = result.step_groups
    assert (group.group, group.count) == ("x (4,) float32", 3)
    # ``x + 1`` is an add, and a copy of the scalar 1 into a tensor: which of the two takes
    # longer (a few µs each) is the machine's to say.
    assert "aten::add" in group.top_ops
    assert set(group.top_ops) <= {"aten::add", "aten::_to_copy", "aten::copy_", "aten::to",
                                  "aten::empty_strided"}


def test_a_target_that_is_not_called_says_so_in_one_line(ip):
    ip.run_cell("model = torch.nn.Linear(4, 4)\nx = torch.ones(4)")
    with capture_output() as cap:
        res = ip.run_cell("%%profile -n 1 -w 0 --steps model -o r\ny = x + 1")
    res.raise_error()
    assert ip.user_ns["r"].steps == []
    assert "[steps]\nmodel was not called during the profiled iterations" in report_text(cap)


@pytest.mark.parametrize(("setup", "message"), [
    ("", "--steps thing: no such name in your namespace"),
    ("thing = 3", "--steps thing: must name an nn.Module or a function; got int"),
])
def test_bad_targets_are_usage_errors(ip, setup, message):
    from IPython.core.error import UsageError

    ip.run_cell(setup)
    with capture_output():
        res = ip.run_cell("%%profile --steps thing\nx = 1")
    assert isinstance(res.error_in_exec, UsageError)
    assert str(res.error_in_exec) == message


def test_a_nested_function_cannot_be_a_step():
    def inner() -> None:
        pass

    with pytest.raises(ValueError) as caught:
        ProfileOptions(steps=inner)
    assert str(caught.value).startswith("steps: inner is not bound to a name")
    with pytest.raises(ValueError) as caught:
        kernelmagic.profile(lambda: None, steps=3)
    assert str(caught.value) == "steps: must name an nn.Module or a function; got int"
    assert StepTarget.of(add_one).kind == "function"


# --- cleanup --------------------------------------------------------------------------


def test_hooks_and_wrappers_are_gone_after_an_exception(ip):
    ip.push({"add_one": add_one})
    ip.run_cell("model = torch.nn.Linear(4, 4)\nx = torch.ones(4)\nn = [0]")
    cell = ("n[0] += 1\nmodel(x)\nadd_one(x)\n"
            "if n[0] == 3: raise RuntimeError('boom')")  # in the first profiled iteration
    for target in ("model", "add_one"):
        ip.user_ns["n"][0] = 0
        with capture_output():
            res = ip.run_cell(f"%%profile -n 2 -w 2 --steps {target}\n{cell}")
        assert isinstance(res.error_in_exec, RuntimeError)
    assert hooks_of(ip.user_ns["model"]) == 0 and global_hooks() == 0
    assert ip.user_ns["add_one"] is add_one


def test_hooks_are_gone_after_ctrl_c():
    model = nn.Linear(4, 4)
    x = torch.ones(4)
    calls = [0]

    def cell() -> None:
        calls[0] += 1
        model(x)
        if calls[0] == 3:  # warm-up 1, then the second profiled iteration
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as caught:
        kernelmagic.profile(cell, iters=3, warmup=1, steps=model, name="cc")
    assert hooks_of(model) == 0
    assert [s.iteration for s in caught.value.result.steps] == [0]


# --- the hint without --steps ------------------------------------------------------------


def test_a_module_called_four_times_suggests_steps(ip, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch._dynamo", raising=False)  # other tests compile
    ip.run_cell("model = torch.nn.Linear(4, 4)\nx = torch.ones(4)")
    with capture_output() as cap:
        ip.run_cell("%%profile -n 1 -w 1 -o r\nfor _ in range(4):\n    model(x)")
    assert ip.user_ns["r"].repeated_call == RepeatedCall("model", "Linear", 4)
    assert ("model (Linear) ran its forward 4 times per run of the code, each at the top "
            "level: see each call as a step with --steps model") in report_text(cap)
    assert global_hooks() == 0
    with capture_output() as cap:
        ip.run_cell("%%profile -n 1 -w 1\nfor _ in range(3):\n    model(x)")
    assert "--steps" not in report_text(cap)


def test_steps_survive_a_trace_file(tmp_path):
    model = nn.Linear(8, 8)
    x = torch.ones(2, 8)
    path = tmp_path / "steps.json"
    live = kernelmagic.profile(lambda: [model(x) for _ in range(4)], iters=2, warmup=0,
                               steps=model, name="tr", trace=str(path))
    loaded = kernelmagic.load(path)
    assert "steps" in loaded.views
    assert [(s.iteration, s.index, s.inputs) for s in loaded.steps] == [
        (s.iteration, s.index, s.inputs) for s in live.steps]
    assert [(g.group, g.count) for g in loaded.step_groups] == [("input (2, 8) float32", 4)]


def test_no_count_once_dynamo_is_loaded(monkeypatch):
    """Dynamo guards on the global module hooks the count needs: with it loaded (a
    ``torch.compile`` in the process), compiled code would recompile after the count."""
    import types

    from kernelmagic.live.steps import RepeatedCalls

    monkeypatch.setitem(sys.modules, "torch._dynamo", types.ModuleType("torch._dynamo"))
    model, x = nn.Linear(4, 4), torch.ones(4)
    repeats = RepeatedCalls(None)
    with repeats.counting():
        assert global_hooks() == 0
        for _ in range(4):
            model(x)
    assert repeats.found() is None


def test_html_and_widget_list_the_steps_views():
    from kernelmagic.render.bundle import report_box
    from kernelmagic.render.html import html_report

    x = torch.ones(4)
    result = kernelmagic.profile(lambda: [add_one(x) for _ in range(3)], iters=2, warmup=0,
                                 steps=add_one, name="fn")
    html = html_report(result)
    assert 'class="km-view km-view-steps"' in html and "steps in order" in html
    assert "█" in html  # the bars
    box = report_box(result)
    assert {"steps", "steps in order"} <= set(box.km_views)
    assert len(box.km_views["steps in order"].table.rows) == 3
