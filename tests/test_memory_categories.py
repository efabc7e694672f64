"""--memory's own categories (``views/memory_rules.py``, ``live/memory_owners.py``): the
parameters, optimizer state and gradients at the peak are the model's and the optimizer's
bytes, for SGD, SGD with momentum, Adam and AdamW; an inference cell finds its parameters
through the module it called; the hooks go when the cell raises; where torch's
MemoryProfileTimeline names the same memory otherwise, only its known error differs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from fakes import table_of
from torch import nn
from workloads import training_step

import kernelmagic
from kernelmagic.core.events import Kind
from kernelmagic.core.memory_rows import (
    AT_END,
    BEFORE,
    CATEGORIES,
    NEVER,
    AllocationRecords,
    KnownStorages,
)
from kernelmagic.live import memory_categories, memory_owners
from kernelmagic.live.session import table_from_session
from kernelmagic.render.memory import highest_peaks
from kernelmagic.views.iterations import iteration_windows
from kernelmagic.views.memory import memory_views
from kernelmagic.views.memory_rules import categorised_ledger

KIB = 2**10
US = 1000


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _state_bytes(opt: torch.optim.Optimizer) -> int:
    return _bytes(v for s in opt.state.values() for v in s.values() if torch.is_tensor(v))


def _mlp_step(make_optimizer):
    """A small MLP (big weights, a batch of 4: the peak comes with the gradients) and one
    training step of it."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 64))
    opt = make_optimizer(model.parameters())
    x = torch.randn(4, 128)

    def step() -> None:
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    return model, opt, x, step


OPTIMIZERS = {
    "SGD": lambda p: torch.optim.SGD(p, lr=0.1),
    "SGD momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "Adam": lambda p: torch.optim.Adam(p),
    "AdamW": lambda p: torch.optim.AdamW(p),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_parameters_state_and_gradients_at_the_peak_are_the_models(name):
    model, opt, x, step = _mlp_step(OPTIMIZERS[name])
    result = kernelmagic.profile(step, iters=3, warmup=1, memory=True)
    (peak,) = highest_peaks(result)
    params = _bytes(model.parameters())
    assert peak.parameter == params
    assert peak.optimizer_state == _state_bytes(opt)
    assert (peak.optimizer_state > 0) == (name != "SGD")
    assert peak.gradient == params  # the peak comes once every gradient exists
    assert peak.input == _bytes([x])  # the model's argument, from before profiling
    assert peak.unknown == 0
    assert result.memory_note == ""
    shapes = {r.shape for r in result.memory_alive if r.category == "parameter"}
    assert {"[256, 128]", "[64, 256]"} <= shapes


def test_adamw_temporaries_are_temporary():
    # AdamW's step makes sqrt(v) and a div of it, each the size of a weight, freed at once.
    model, _, _, step = _mlp_step(OPTIMIZERS["AdamW"])
    result = kernelmagic.profile(step, iters=3, warmup=1, memory=True)
    (peak,) = highest_peaks(result)
    temps = {(r.op, r.nbytes) for r in result.memory_alive if r.category == "temporary"}
    biggest = max(p.numel() * p.element_size() for p in model.parameters())
    assert peak.temporary > 0 and ("aten::sqrt", biggest) in temps


def test_an_inference_cell_finds_its_parameters_through_the_module():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)).eval()
    x = torch.randn(8, 64)

    def infer() -> None:
        with torch.no_grad():
            model(x)

    result = kernelmagic.profile(infer, iters=3, warmup=1, memory=True)
    (peak,) = highest_peaks(result)
    assert peak.parameter == _bytes(model.parameters())
    assert peak.input == _bytes([x])
    assert peak.optimizer_state == peak.gradient == peak.unknown == 0
    assert peak.activation + peak.temporary == peak.rise > 0


def test_hooks_are_removed_when_the_cell_raises(monkeypatch):
    seen = []
    monkeypatch.setattr(memory_owners.Owners, "called",
                        lambda self, module, args: seen.append(module))
    monkeypatch.setattr(memory_owners.Owners, "stepped",
                        lambda self, opt, args, kwargs: seen.append(opt))
    *_, step = _mlp_step(OPTIMIZERS["SGD"])
    calls = 0

    def fails() -> None:
        nonlocal calls
        calls += 1
        step()
        if calls == 1 + 2:
            raise ValueError("the cell's own error")

    with pytest.raises(ValueError, match="the cell's own error"):
        kernelmagic.profile(fails, iters=3, warmup=1, memory=True)
    assert seen  # the hooks ran during the profiled iterations
    seen.clear()
    step()
    assert seen == []  # and are gone


def test_a_plain_tensor_cell_without_modules_stays_unknown():
    kept = []
    result = kernelmagic.profile(lambda: kept.append(torch.empty(1000)), iters=2, warmup=1,
                                 memory=True)
    assert {r.category for r in result.memory_alive} == {"unknown"}


def _records(rows):
    """rows: (time µs, address, signed bytes, op)."""
    return AllocationRecords(time=np.asarray([t * US for t, *_ in rows], dtype=np.int64),
                             device=np.full(len(rows), -1, dtype=np.int16),
                             ptr=np.asarray([p for _, p, _, _ in rows], dtype=np.int64),
                             delta=np.asarray([d for _, _, d, _ in rows], dtype=np.int64),
                             op=[o for *_, o in rows], source=[""] * len(rows))


def _known(rows):
    """rows: (when µs or AT_END, address, bytes, category)."""
    return KnownStorages(
        when=np.asarray([w if w == AT_END else w * US for w, *_ in rows], dtype=np.int64),
        device=np.full(len(rows), -1, dtype=np.int16),
        ptr=np.asarray([p for _, p, _, _ in rows], dtype=np.int64),
        nbytes=np.asarray([n for _, _, n, _ in rows], dtype=np.int64),
        category=np.asarray([CATEGORIES.index(c) for *_, c in rows], dtype=np.int8),
        shape=[""] * len(rows), dtype=[""] * len(rows))


def test_rules_on_a_synthetic_training_iteration():
    # Forward 0-40 µs (mm 10-20, relu 25-35), backward 50-80, an optimizer step 85-95.
    rows = [
        (11, 0xA0, 4 * KIB, "aten::mm"),  # forward output, freed in backward: activation
        (12, 0xB0, KIB, "aten::mm"), (18, 0xB0, -KIB, "aten::mm"),  # inside one op
        (26, 0xC0, 4 * KIB, "aten::relu"),  # activation, freed by ReluBackward
        (52, 0xD0, 4 * KIB, "aten::threshold_backward"),  # autograd detail
        (55, 0xC0, -4 * KIB, ""), (59, 0xA0, -4 * KIB, ""),
        (64, 0xE0, 8 * KIB, "aten::mm"),  # becomes the weight's .grad
        (70, 0xD0, -4 * KIB, ""),
        (87, 0xF0, 8 * KIB, "aten::mul"), (93, 0xF0, -8 * KIB, "aten::mul"),  # in the step
        (96, 0xA0, 2 * KIB, "aten::empty")]  # reuses the activation's address, after it
    table = table_of(
        (Kind.RANGE, "profile/iter 0", 0, 100, 1),
        (Kind.OP, "aten::mm", 10, 20, 1), (Kind.OP, "aten::relu", 25, 35, 1),
        (Kind.OP, "autograd::engine::evaluate_function: ReluBackward0", 50, 60, 1),
        (Kind.OP, "autograd::engine::evaluate_function: MmBackward0", 62, 80, 1),
        (Kind.RANGE, "Optimizer.step#SGD.step", 85, 95, 1),
        (Kind.OP, "aten::add_", 86, 94, 1),
        *[(Kind.MEMORY, "[memory]", t, t, 1, {"nbytes": n}) for t, _, n, _ in rows])
    allocs = _records(rows)
    known = _known([(94, 0xE0, 8 * KIB, "gradient"), (AT_END, 0x100, 8 * KIB, "parameter"),
                    (AT_END, 0xE0, 8 * KIB, "gradient"), (AT_END, 0x200, KIB, "input"),
                    (AT_END, 0xA0, 2 * KIB, "input")])  # made in the session: not an input
    ledger = categorised_ledger(allocs, known, table, saw_model=True)
    named = {(b.created, b.nbytes): CATEGORIES[ledger.category[ledger.block == i][0]]
             for i, b in enumerate(ledger.blocks)}
    assert named == {
        (11 * US, 4 * KIB): "activation", (12 * US, KIB): "temporary",
        (26 * US, 4 * KIB): "activation", (52 * US, 4 * KIB): "autograd_detail",
        (64 * US, 8 * KIB): "gradient", (87 * US, 8 * KIB): "temporary",
        (96 * US, 2 * KIB): "activation",
        (BEFORE, 8 * KIB): "parameter", (BEFORE, KIB): "input"}
    assert [b.freed for b in ledger.blocks if b.created == BEFORE] == [NEVER, NEVER]
    assert (ledger.time[:2] == BEFORE).all() and ledger.delta[:2].tolist() == [8 * KIB, KIB]
    assert int(ledger.delta.sum()) == 8 * KIB + KIB + 8 * KIB + 2 * KIB
    views = memory_views(table, [(0, 100 * US)], ledger)
    (peak,) = views.peaks
    assert (peak.t_us, peak.gradient, peak.temporary, peak.parameter) == (
        87.0, 8 * KIB, 8 * KIB, 8 * KIB)


def test_a_gpu_free_of_memory_from_before_profiling_opens_a_block_before():
    table = table_of((Kind.RANGE, "profile/iter 0", 0, 100, 1))
    allocs = _records([(10, 0xA0, -4 * KIB, "")])
    ledger = categorised_ledger(allocs, _known([]), table, saw_model=False)
    assert ledger.time.tolist() == [BEFORE, 10 * US]
    assert ledger.delta.tolist() == [4 * KIB, -4 * KIB]
    (block,) = ledger.blocks
    assert (block.created, block.freed) == (BEFORE, 10 * US)


@pytest.fixture(scope="module")
def with_torch_analysis():
    """The issue's AdamW training step under --memory, with shapes and Python calls
    recorded so that torch's own analysis of the same session has what it needs."""
    step = training_step()
    # torch's own analysis sometimes stops on an assertion of its own ("duplicate outputs"
    # of an autograd node, depending on how addresses were reused): a new session then.
    held: list = []
    for attempt in range(3):
        result = kernelmagic.profile(step, iters=3, warmup=2, memory=True, shapes=True,
                                     stack=True, on_trace_ready=held.append)
        try:
            ledger = memory_categories.memory_ledger(held[-1])
        except AssertionError:
            if attempt == 2:
                raise
            continue
        return result, held[-1], step, ledger
    raise AssertionError("unreachable")


def test_where_torch_is_right_ours_agree_and_its_adamw_error_is_ours_temporaries(
        with_torch_analysis):
    result, prof, _, ledger = with_torch_analysis
    table = table_from_session(prof)
    torch_views = memory_views(table, iteration_windows(table, result.name), ledger,
                               name=result.name)
    (ours,) = highest_peaks(result)
    theirs = torch_views.peaks[ours.iteration]
    assert (theirs.t_us, theirs.total) == (ours.t_us, ours.total)
    for category in ("optimizer_state", "gradient", "autograd_detail"):
        assert getattr(ours, category) == getattr(theirs, category), category
    assert ours.optimizer_state >= 16 * 2**20 and ours.gradient >= 8 * 2**20
    # AdamW's sqrt and div temporaries at the peak (4 MiB each): torch names them
    # "parameter" and "activation" (or "unknown"); they are temporaries. So are the
    # step's few scalar tensors, some of which torch names "input".
    assert ours.input == 64 * 512 * 4 <= theirs.input < ours.input + 64
    assert ours.temporary >= 8 * 2**20 and theirs.temporary < 64
    assert ours.parameter < theirs.parameter + theirs.activation + theirs.unknown
    mixed = ("parameter", "activation", "temporary", "unknown", "input")
    assert sum(getattr(ours, c) for c in mixed) == sum(getattr(theirs, c) for c in mixed)
