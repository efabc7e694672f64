"""``gather=True`` / ``%%profile --gather``: two gloo processes on the CPU, results on rank 0."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from IPython.core.error import UsageError
from port_race import retried
from ranks_data import spawnable_main

import kernelmagic
from kernelmagic.views.breakdown import is_comm_op

ITERS = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _torch_comm_us(prof) -> float:
    """Communication per torch's own events: the time (union over threads, within the
    iterations) during which a collective op runs or one of gloo's ``gloo:all_reduce``
    ranges, which run on gloo's threads with nothing under them."""
    events = prof.function_events
    windows = [(e.time_range.start, e.time_range.end) for e in events
               if e.name.startswith("step/iter ")]
    spans = sorted((max(e.time_range.start, lo), min(e.time_range.end, hi))
                   for e in events if is_comm_op(e.name)
                   and (e.is_user_annotation or any(lo <= e.time_range.start < hi
                                                    for lo, hi in windows))
                   for lo, hi in windows if min(e.time_range.end, hi) > max(e.time_range.start, lo))
    union, reach = 0.0, float("-inf")
    for lo, hi in spans:
        union += max(0.0, hi - max(lo, reach))
        reach = max(reach, hi)
    return union


def _rank_main(rank: int, world: int, port: int, out: str) -> None:
    os.environ["KINETO_LOG_LEVEL"] = "6"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        x = torch.randn(64, 64)

        def step() -> None:
            y = x @ x
            dist.all_reduce(y)

        held: list = []
        got = kernelmagic.profile(step, iters=ITERS, warmup=1, name="step", gather=True,
                                  on_trace_ready=held.append)
        report: dict = {"type": type(got).__name__, "comm_us": _torch_comm_us(held[0]),
                        "own": got.to_dict() if rank != 0 else None}
        if rank == 0:
            got.save(Path(out) / "gathered.json")

        # the magic, in an InteractiveShell of this rank
        from IPython.core.interactiveshell import InteractiveShell
        from IPython.utils.capture import capture_output

        shell = InteractiveShell.instance()
        shell.user_ns.update(step=step)
        shell.run_line_magic("load_ext", "kernelmagic")
        with capture_output(display=True) as cap:
            res = shell.run_cell("%%profile --gather -n 2 -w 0 -o r\nstep()\n")
        report["magic_ok"] = res.success
        report["magic_type"] = type(shell.user_ns.get("r")).__name__
        report["magic_stdout"] = cap.stdout
        report["magic_text"] = [o.data.get("text/plain", "") for o in cap.outputs]
        report["comm"] = _profile_all_reduce()
        (Path(out) / f"rank{rank}.json").write_text(json.dumps(report))
    finally:
        dist.destroy_process_group()


def _profile_all_reduce() -> dict:
    """One rank's own report of a cell that all-reduces 4M floats three times, then a dot
    product: gloo runs the collectives on its own threads, as ``gloo:all_reduce`` ranges
    with no op under them."""
    big = torch.ones(4 << 20)

    def cell() -> None:
        for _ in range(3):
            dist.all_reduce(big)
            big.fill_(1.0)
        big @ big

    held: list = []
    result = kernelmagic.profile(cell, iters=2, warmup=1, name="comm",
                                 on_trace_ready=held.append)
    events = held[0].function_events
    windows = [(e.time_range.start, e.time_range.end) for e in events
               if e.name.startswith("comm/iter ")]
    gloo = [e for e in events if e.name == "gloo:all_reduce"
            and any(lo <= e.time_range.start <= hi for lo, hi in windows)]
    return {
        "rows": [[r.key, r.kind, r.count, r.self_cpu_time_total] for r in result.rows],
        "torch_gloo": [len(gloo), sum(e.cpu_time_total for e in gloo)],
        "breakdown": [result.breakdown.communication, result.breakdown.compute,
                      result.breakdown.idle, result.breakdown.wall],
        "summary": result.summary(),
        "text": result._repr_mimebundle_()["text/plain"],
        "findings": [f.rule for f in result.findings()],
    }


@pytest.fixture(scope="module")
def gathered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gather")

    def run() -> Path:
        with spawnable_main():
            mp.spawn(_rank_main, args=(2, _free_port(), str(out)), nprocs=2, join=True)
        return out

    # The store's port is free when chosen; another process can bind it before rank 0 does.
    return retried(run, lambda exc: isinstance(exc, mp.ProcessRaisedException) and (
        "EADDRINUSE" in str(exc) or "ddress already in use" in str(exc)))


def test_rank0_gets_all_ranks_and_others_their_own(gathered):
    r0 = json.loads((gathered / "rank0.json").read_text())
    r1 = json.loads((gathered / "rank1.json").read_text())
    assert r0["type"] == "ManyRanksResult"
    assert r1["type"] == "ProfileResult"
    many = kernelmagic.load(gathered / "gathered.json")
    assert sorted(many.ranks) == [0, 1]
    for rank, summary in many.summaries.items():
        assert (summary.rank, summary.world_size, summary.backend) == (rank, 2, "gloo")
        assert summary.device == "cpu" and summary.steps == ITERS
        assert summary.overlap is None and summary.memcpy_us == 0
        assert summary.compute_us > 0 and summary.communication_us > 0
        result = many.ranks[rank]
        assert result.iters == ITERS and any(r.key == "aten::mm" for r in result.rows)
        assert summary.step_median_us == pytest.approx(result.stats.median * 1e6)
    # rank 1's own result is the one rank 0 received
    assert many.ranks[1].to_dict() == r1["own"]


def test_gathered_summaries_hold_each_all_reduce(gathered):
    many = kernelmagic.load(gathered / "gathered.json")
    for summary in many.summaries.values():
        # one all_reduce per iteration: gloo's own range, from the iteration's start
        assert [(a.step, a.name, a.index) for a in summary.collectives] == [
            (i, "gloo:all_reduce", 0) for i in range(ITERS)]
        assert all(0 <= a.arrival_us <= a.end_us for a in summary.collectives)
        assert len(summary.step_comm_us) == ITERS
        assert sum(summary.step_comm_us) == pytest.approx(summary.communication_us * ITERS)
    assert [(c.step, c.ranks) for c in many.collectives()] == [(i, 2) for i in range(ITERS)]


def test_live_communication_matches_torch_events(gathered):
    many = kernelmagic.load(gathered / "gathered.json")
    for rank in (0, 1):
        torch_comm = json.loads((gathered / f"rank{rank}.json").read_text())["comm_us"]
        ours = many.summaries[rank].communication_us * ITERS
        assert ours == pytest.approx(torch_comm, rel=0.01, abs=3.0)


def test_magic_gather_shows_all_ranks_on_rank0_and_one_line_elsewhere(gathered):
    r0 = json.loads((gathered / "rank0.json").read_text())
    r1 = json.loads((gathered / "rank1.json").read_text())
    assert r0["magic_ok"] and r1["magic_ok"]
    assert r0["magic_type"] == "ManyRanksResult"
    assert r1["magic_type"] == "ProfileResult"
    assert any(t.startswith("2 ranks (world size 2, gloo)") for t in r0["magic_text"])
    assert r1["magic_text"] == []
    line = r1["magic_stdout"].strip()
    assert "\n" not in line and line.startswith("cell[") and "2 iterations" in line


def test_gather_without_process_group_is_one_line_error():
    assert not dist.is_initialized()
    with pytest.raises(ValueError, match=r"^--gather needs an initialised torch.distributed"):
        kernelmagic.profile(lambda: None, iters=1, warmup=0, gather=True)
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "kernelmagic")
    with pytest.raises(UsageError, match=r"initialised torch\.distributed process group"):
        shell.run_cell_magic("profile", "--gather -n 1 -w 0", "x = 1\n")
    with pytest.raises(UsageError, match="--gather cannot be combined with --compare"):
        shell.run_cell_magic("profile", "--gather --compare a", "x = 1\n")


def test_one_rank_report_has_the_communication_row_and_share(gathered):
    """Without --gather, each rank's own report: gloo's collectives are a row (a range that
    owns its time: torch records them as asynchronous ranges, total time their duration and
    self time 0; nothing is under them, so kernelmagic's self time is the duration), and
    the summary gives their share."""
    for rank in (0, 1):
        comm = json.loads((gathered / f"rank{rank}.json").read_text())["comm"]
        rows = {(key, kind): (count, self_cpu) for key, kind, count, self_cpu in comm["rows"]}
        count, self_cpu = rows[("gloo:all_reduce", "range")]
        torch_count, torch_self = comm["torch_gloo"]
        assert count == torch_count >= 6  # 3 per iteration, 2 iterations
        assert self_cpu == pytest.approx(torch_self, rel=1e-9)
        assert ("aten::dot", "op") in rows
        communication, _compute, _idle, wall = comm["breakdown"]
        assert 0 < communication <= wall
        assert f"communication {100 * communication / wall:.0f}%" in comm["summary"]
        assert "[range] gloo:all_reduce" in comm["text"]
