"""Each collective across ranks (issue #34, Must 4): arrivals matched by step, name and
index; skew and transfer worked out by hand on tiny traces and from the generator's plan;
the finding that names the rank the others wait for; the collectives view and report."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from ranks_data import CPU_ONLY, NCCL_RANK, RANK_FILES, tiny_rank

import kernelmagic
from kernelmagic.findings.ranks import SKEW_MIN_SHARE, collective_skew
from kernelmagic.io.ranks import parse_rank
from kernelmagic.render.ranks import collectives_text, text_report
from kernelmagic.results.ranks import ManyRanksResult
from kernelmagic.views.collectives import COLLECTIVES_KEPT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import rank_traces as rt

# Three ranks of one step [1000, 2000] µs, each on its own clock. Per rank: (all_reduce
# kernel start, end), (broadcast kernel start, end) and the compute before them.
ARRIVALS = {0: ((1200, 1500), (1600, 1700)),
            1: ((1250, 1502), (1590, 1700)),
            2: ((1380, 1498), (1610, 1690))}
CLOCKS = {0: 0.0, 1: 5_000_000.0, 2: -300.0}


def _tiny_job(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    for rank, ((a, e), (b, f)) in ARRIVALS.items():
        kernels = [("gemm_a", 1010, 1010 + 100 * (rank + 1))]
        if rank == 2:
            kernels += [("relu_k", 1330, 1370), ("adam_k", 1520, 1600)]
        tiny_rank(folder / f"rank{rank}.json", rank, 3, (1000, 2000), kernels,
                  [("nccl:all_reduce", 1100, a, e), ("nccl:broadcast", 1500, b, f)],
                  clock=CLOCKS[rank])
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> ManyRanksResult:
    return kernelmagic.load(_tiny_job(tmp_path_factory.mktemp("tiny")))


def test_each_rank_keeps_its_arrivals_from_its_own_step_start(tiny):
    a = tiny.summaries[2].collectives
    assert [(x.step, x.name, x.index) for x in a] == [(0, "nccl:all_reduce", 0),
                                                      (0, "nccl:broadcast", 0)]
    # µs from the step's start (1000), whatever the rank's clock
    assert (a[0].arrival_us, a[0].end_us) == pytest.approx((380, 498))
    assert (a[1].arrival_us, a[1].end_us) == pytest.approx((610, 690))
    # before the all-reduce: step start to arrival [1000, 1380]: gemm_a 300, relu_k 40
    assert a[0].busy == [("gemm_a", pytest.approx(300)), ("relu_k", pytest.approx(40))]
    # before the broadcast: the all-reduce's end to arrival [1498, 1610]: adam_k 80
    assert a[1].busy == [("adam_k", pytest.approx(80))]


def test_skew_and_transfer_by_hand(tiny):
    reduce_, bcast = tiny.collectives()
    # all-reduce: arrivals 1200, 1250, 1380 -> first rank 0, last rank 2, skew 180;
    # ends 1500, 1502, 1498 -> median 1500, transfer 1500 - 1380 = 120
    assert (reduce_.name, reduce_.ranks, reduce_.first_rank, reduce_.last_rank) == (
        "nccl:all_reduce", 3, 0, 2)
    assert (reduce_.skew_us, reduce_.transfer_us) == pytest.approx((180, 120))
    assert reduce_.late_busy == tiny.summaries[2].collectives[0].busy
    # broadcast: arrivals 1600, 1590, 1610 -> first rank 1, last rank 2, skew 20;
    # ends 1700, 1700, 1690 -> median 1700, transfer 90
    assert (bcast.first_rank, bcast.last_rank) == (1, 2)
    assert (bcast.skew_us, bcast.transfer_us) == pytest.approx((20, 90))


def test_finding_names_the_late_rank_and_what_it_ran(tiny):
    (found,) = [f for f in tiny.findings() if f.rule == "collective_skew"]
    assert found.title == "Collectives wait for rank 2"
    # 180 + 20 µs of skew in one step of 1 ms (20%), 120 + 90 µs of transfer
    assert found.evidence == (
        "rank 2 is the last to arrive at 2 of 2 collectives (nccl:all_reduce, nccl:broadcast; "
        "1 step): the first rank waits 200 µs per step for it (20% of the median step "
        "1.00 ms), against 210 µs per step of transfer once all have arrived; meanwhile "
        "it runs gemm_a 300 µs, adam_k 80.0 µs, relu_k 40.0 µs per step")


def test_finding_threshold(tiny):
    collectives = tiny.collectives()
    summaries = list(tiny.summaries.values())
    step = 200 / SKEW_MIN_SHARE  # the skew per step is exactly the threshold: silent
    at = [replace(s, step_median_us=step) for s in summaries]
    assert collective_skew(at, collectives) is None
    above = [replace(s, step_median_us=step - 1) for s in summaries]
    assert collective_skew(above, collectives) is not None


def test_collectives_view_and_report(tiny):
    frame = tiny.to_pandas("collectives")
    assert list(frame.columns[:8]) == ["step", "name", "index", "ranks", "first_rank",
                                       "last_rank", "skew_us", "transfer_us"]
    assert frame["skew_us"].tolist() == pytest.approx([180, 20])
    assert frame.attrs["units"]["skew_us"] == "µs"
    assert "collectives" not in tiny.to_pandas("ranks").columns
    text = collectives_text(tiny)
    lines = text.splitlines()
    assert lines[0].startswith("Collectives with the largest skew (2 collectives of 2 ")
    assert lines[3].split()[:6] == ["0", "nccl:all_reduce", "#0", "rank", "0", "rank"]
    assert "180 µs" in lines[3] and "120 µs" in lines[3]
    assert text in text_report(tiny)
    assert "km-collectives" in tiny._repr_mimebundle_(include=["text/html"])["text/html"]


def test_generator_slow_rank_is_last_by_its_extra_compute(tmp_path):
    job = rt.Job(world_size=4, seed=2, slow_rank=1, slow_by=0.25, jitter=0.0, kernels=8,
                 collectives=2)
    rt.write_job(tmp_path, job, 40 * 1024)
    run = kernelmagic.load(tmp_path)
    collectives = run.collectives()
    steps = run.summaries[0].steps
    assert len(collectives) == min(COLLECTIVES_KEPT, 2 * steps)
    for c in collectives:
        kernels, transfers = rt._step_plan(job, c.step)
        chunk = kernels[:4] if c.index == 0 else kernels[4:]
        # the slow rank reaches each all-reduce 0.25 x its compute since the last one late
        assert (c.ranks, c.last_rank, c.first_rank) == (4, 1, 0)
        assert c.skew_us == pytest.approx(0.25 * sum(chunk), abs=0.01)
        assert c.transfer_us == pytest.approx(transfers[c.index], abs=0.01)
    (found,) = [f for f in run.findings() if f.rule == "collective_skew"]
    assert found.title == "Collectives wait for rank 1"
    # the collectives even the step out: every rank's median step is the same
    assert len({round(s.step_median_us, 3) for s in run.summaries.values()}) == 1
    assert "(median over ranks; the same on every rank)" in text_report(run).splitlines()[0]


def test_a_summary_keeps_at_most_the_first_collectives(tmp_path):
    (path,) = rt.write_job(tmp_path, rt.Job(world_size=1, kernels=2, collectives=3), 64 * 1024)
    kept = parse_rank(str(path)).summary.collectives
    assert len(kept) == COLLECTIVES_KEPT
    assert [(a.step, a.index) for a in kept[:4]] == [(0, 0), (0, 1), (0, 2), (1, 0)]


def test_cpu_only_gloo_ranges_are_collectives():
    a = parse_rank(str(CPU_ONLY)).summary.collectives
    # the two gloo:all_reduce ranges of ProfilerStep#551 (start 1212075529876.817 µs)
    assert [(x.name, x.index) for x in a] == [("gloo:all_reduce", 0), ("gloo:all_reduce", 1)]
    assert a[0].arrival_us == pytest.approx(1212075548353.304 - 1212075529876.817)
    assert a[0].end_us == pytest.approx(a[0].arrival_us + 173209.713)


def test_real_traces_single_rank_and_two_ranks():
    one = kernelmagic.load([NCCL_RANK])
    assert {c.ranks for c in one.collectives()} == {1}
    assert not [f for f in one.findings() if f.rule == "collective_skew"]
    assert collectives_text(one) == ""
    names = {a.name for a in one.summaries[0].collectives}
    assert names == {"nccl:all_reduce", "nccl:broadcast"}
    two = kernelmagic.load(RANK_FILES)
    for c in two.collectives():
        got = {r: next(a for a in two.summaries[r].collectives
                       if (a.step, a.name, a.index) == (c.step, c.name, c.index))
               for r in (0, 1)}
        assert c.skew_us == pytest.approx(abs(got[0].arrival_us - got[1].arrival_us))
    text_report(two)  # renders


# --- the communication heatmap (Must 3) --------------------------------------------------


def test_comm_grid_is_what_the_generator_put_in(tmp_path):
    from kernelmagic.render.ranks import comm_grid

    job = rt.Job(world_size=3, seed=5, slow_rank=2, slow_by=0.4, jitter=0.0, kernels=6)
    rt.write_job(tmp_path, job, 30 * 1024)
    run = kernelmagic.load(tmp_path)
    grid = comm_grid(run)
    steps = run.summaries[0].steps
    assert len(grid) == 3 and all(len(row) == steps for row in grid)
    for rank, row in zip(run.summaries, grid, strict=True):
        for step, got in enumerate(row):
            kernels, transfers = rt._step_plan(job, step)
            chunks = (kernels[:3], kernels[3:])
            # each all-reduce lasts from this rank's arrival to the slow rank's plus the
            # transfer: (1.4 - own factor) x the compute before it, + the transfer
            mine = 1.4 if rank == 2 else 1.0
            want = sum((1.4 - mine) * sum(c) + t for c, t in zip(chunks, transfers,
                                                                 strict=True))
            assert got == pytest.approx(want / 1000.0, abs=1e-4), (rank, step)


def test_heatmap_past_32_ranks_has_a_communication_panel():
    import io

    from PIL import Image

    from kernelmagic.render.ranks import chart_png, comm_grid
    from kernelmagic.results.rank_summary import RankSummary

    def run(comm: bool) -> ManyRanksResult:
        return ManyRanksResult(ranks={}, summaries={r: RankSummary(
            rank=r, step_median_us=1e3, step_us=[1e3 + s for s in range(8)],
            step_comm_us=[100.0 * (r % 3) + s for s in range(8)] if comm else [])
            for r in range(40)})

    assert comm_grid(run(True))[4][:2] == [0.1, 0.101]  # ms: rank 4 is 100 µs + step
    with_comm = Image.open(io.BytesIO(chart_png(run(True)))).size
    without = Image.open(io.BytesIO(chart_png(run(False)))).size  # an old saved summary
    assert with_comm[0] == 2 * without[0] and with_comm[1] == without[1]


# --- saved results -----------------------------------------------------------------------


def test_save_and_load_keep_collectives_and_comm_times(tiny, tmp_path):
    back = kernelmagic.load(tiny.save(tmp_path / "run.json"))
    assert back == tiny
    for rank, summary in tiny.summaries.items():
        assert summary.collectives and summary.step_comm_us
        assert back.summaries[rank] == summary
    assert back.collectives() == tiny.collectives()
    assert back.findings() == tiny.findings()


def test_a_ranks_file_saved_before_collectives_still_loads(tiny, tmp_path):
    import json

    data = tiny.to_dict()
    for item in data["ranks"]:  # what kernelmagic wrote before these fields existed
        del item["summary"]["collectives"], item["summary"]["step_comm_us"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    old = kernelmagic.load(path)
    assert all(s.collectives == [] and s.step_comm_us == [] for s in old.summaries.values())
    assert old.collectives() == [] and collectives_text(old) == ""
    assert not [f for f in old.findings() if f.rule == "collective_skew"]
    assert old.summary() == tiny.summary()
    text_report(old)


def test_a_collective_ending_before_its_last_arrival_is_not_aligned(tmp_path):
    # rank 1's step start is 500 µs off: its all-reduce seems to arrive at 850 µs while
    # rank 0's ends at 400 µs, which cannot be if both steps had started together
    tiny_rank(tmp_path / "rank0.json", 0, 2, (1000, 2000), [("gemm_a", 1010, 1100)],
              [("nccl:all_reduce", 1100, 1200, 1400)])
    tiny_rank(tmp_path / "rank1.json", 1, 2, (1000, 2000), [("gemm_a", 1010, 1800)],
              [("nccl:all_reduce", 1830, 1850, 1905)])
    run = kernelmagic.load(tmp_path)
    (c,) = run.collectives()
    # arrivals 200 and 850; ends 400 and 905 -> median 652.5, before the last arrival
    assert (c.skew_us, c.transfer_us, c.aligned) == (pytest.approx(650), 0.0, False)
    assert not [f for f in run.findings() if f.rule == "collective_skew"]
    text = collectives_text(run)
    assert "1 not aligned (*: ended before the last arrival" in text
    assert "nccl:all_reduce #0 *" in text


def test_busy_on_a_cpu_trace_is_self_time_of_ops():
    from kernelmagic.core.events import Kind, TableBuilder, derive_links
    from kernelmagic.views.collectives import collective_arrivals

    b = TableBuilder()  # µs x 1000 = ns; thread 1 computes, thread 2 is gloo's
    b.add(Kind.OP, "aten::linear", 0, 100_000, tid=1)
    b.add(Kind.OP, "aten::mm", 10_000, 70_000, tid=1)
    b.add(Kind.OP, "aten::relu", 105_000, 125_000, tid=1)  # half of it after the arrival
    b.add(Kind.RANGE, "gloo:all_reduce", 115_000, 200_000, tid=2)
    table = derive_links(b.freeze())
    (a,) = collective_arrivals(table, [(0, 300_000)])
    assert (a.name, a.arrival_us, a.end_us) == ("gloo:all_reduce", 115.0, 200.0)
    # [0, 115]: mm 60, linear 100 - 60 = 40 of its own, relu 10 (clipped at the arrival)
    assert a.busy == [("aten::mm", 60.0), ("aten::linear", 40.0), ("aten::relu", 10.0)]
