"""Many ranks from trace folders: breakdown on real traces, findings, bad input, display."""

from __future__ import annotations

import json
import shutil
import warnings
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace

import pytest
from loaded import loaded
from ranks_data import (
    CPU_ONLY,
    NCCL_RANK,
    RANK_FILES,
    RANKS,
    copy_ranks,
    expected_breakdown,
    stretched,
    write_with_info,
)

import kernelmagic
from kernelmagic.core.records import TraceFileError
from kernelmagic.findings.ranks import (
    COMM_BOUND_SHARE,
    communication_bound_across_ranks,
    straggler,
    straggler_spread,
)
from kernelmagic.io.ranks import (
    DuplicateRank,
    RanksError,
    RankSkipped,
    load_ranks,
    parse_rank,
)
from kernelmagic.results.rank_summary import RankSummary
from kernelmagic.results.ranks import ManyRanksResult


@pytest.fixture(scope="module")
def many() -> ManyRanksResult:
    return kernelmagic.load(RANKS)


# --- loading and the breakdown on real traces -------------------------------------------


def test_folder_is_a_run_of_ranks(many):
    assert isinstance(many, ManyRanksResult)
    assert sorted(many.ranks) == [0, 1]
    assert many.world_size == 128 and many.backend == "nccl"
    for rank, path in enumerate(RANK_FILES):
        assert many.summaries[rank].file == path.name
        # each rank's result is what loading its file alone gives, less the timeline (and
        # the critical path drawn on it)
        alone = loaded(path)
        assert "timeline" in alone.views and alone.timeline
        assert many.ranks[rank] == replace(alone, timeline=[], critical_spans=[], views=[
            v for v in alone.views if v != "timeline"])
    assert kernelmagic.load(RANK_FILES) == many  # a list of files works the same


@pytest.mark.parametrize("path", [*RANK_FILES, NCCL_RANK], ids=lambda p: p.name)
def test_breakdown_matches_the_raw_json(path):
    parsed = parse_rank(str(path))
    assert parsed.error is None
    got, want = parsed.summary, expected_breakdown(path)
    assert got.device == "cuda" and got.steps == want["steps"]
    for field in ("step_median_us", "step_iqr_us", "compute_us", "communication_us",
                  "memcpy_us", "idle_us"):
        assert getattr(got, field) == pytest.approx(want[field], abs=1e-3), field
    assert got.overlap == pytest.approx(want["overlap"], abs=1e-9)
    assert 0 < got.overlap < 1 and got.communication_us > 0
    # The same trace opened alone: its summary's breakdown is the same figures.
    alone = loaded(path).breakdown
    for field in ("compute", "communication", "memcpy", "idle"):
        assert getattr(alone, field) == pytest.approx(want[f"{field}_us"], abs=1e-3), field
    assert alone.overlap == pytest.approx(want["overlap"], abs=1e-9)


def test_op_times_per_step_are_the_rows(many):
    rank0 = many.ranks[0]
    summary = many.summaries[0]
    mm = next(r for r in rank0.rows if r.key == "aten::mm")
    assert summary.op_us["aten::mm"] == pytest.approx(mm.self_device_time_total / rank0.iters)


def test_cpu_only_trace_counts_gloo_ranges_as_communication():
    s = parse_rank(str(CPU_ONLY)).summary
    assert (s.rank, s.world_size, s.backend, s.device) == (34, 300, "gloo", "cpu")
    # ProfilerStep#551 is [1212075529876.817, +210109.162] µs; the gloo:all_reduce ranges
    # inside it: [1212075548353.304, +173209.713] and [1212075556659.473, +170471.258] on
    # two threads, whose union ends at 1212075556659.473 + 170471.258. No op in the step.
    assert s.step_median_us == pytest.approx(210109.162)
    assert s.communication_us == pytest.approx(1212075727130.731 - 1212075548353.304)
    assert s.compute_us == 0 and s.memcpy_us == 0 and s.overlap is None
    assert s.idle_us == pytest.approx(210109.162 - s.communication_us)
    run = load_ranks([CPU_ONLY])
    header = run.table().splitlines()[0].split()
    assert header[:6] == ["rank", "steps", "step", "(median)", "step", "IQR"]
    assert "memcpy" not in header and "overlapped" not in header  # GPU-only columns
    assert [f.rule for f in run.findings()] == ["communication_bound"]  # 85% of the step
    assert isinstance(run, kernelmagic.ManyRanksResult)


# --- findings ---------------------------------------------------------------------------


def test_communication_bound_fires_on_the_real_ranks(many):
    found = {f.rule: f for f in many.findings()}
    assert "straggler" not in found  # 615 vs 619 ms: within the others' spread
    f = found["communication_bound"]
    shares = sorted(s.exposed_communication_us / s.step_median_us
                    for s in many.summaries.values())
    typical = (shares[0] + shares[1]) / 2
    assert typical > COMM_BOUND_SHARE
    assert f"takes {typical:.0%} of the step (median over 2 ranks)" in f.evidence
    worst = max(many.summaries.values(), key=lambda s: s.exposed_communication_us
                / s.step_median_us)
    assert f"worst rank {worst.rank}" in f.evidence
    assert f"{worst.overlap:.0%} of its" in f.evidence


@pytest.mark.parametrize("path", [RANK_FILES[0], CPU_ONLY], ids=lambda p: p.name)
def test_communication_bound_fires_first_on_one_rank(path):
    result = loaded(path)
    parts = result.breakdown
    share = parts.exposed_communication / parts.wall
    assert share > COMM_BOUND_SHARE
    found = {f.rule: f for f in result.findings()}
    comm = found["communication_bound"]
    where = f"on the {'GPU' if parts.device == 'cuda' else 'CPU'}"
    exposed = (f"{share:.0%}) is not" if parts.overlap
               else f"{share:.0%} of the iteration) {where}, none of it overlapped")
    assert where in comm.evidence and exposed in comm.evidence
    if parts.device == "cpu":  # gloo: 85% of the step, nothing else to say first
        assert result.findings()[0] is comm
    assert "dominant_op" not in {f.rule for f in result.findings()}
    shown = result.summary()
    assert f"communication {100 * parts.share('communication'):.0f}%" in shown


def test_communication_bound_silent_on_the_nccl_rank():
    one = load_ranks([NCCL_RANK])
    s = one.summaries[0]
    assert s.exposed_communication_us / s.step_median_us < COMM_BOUND_SHARE
    assert one.findings() == []
    assert "communication_bound" not in {f.rule for f in loaded(NCCL_RANK).findings()}


def test_straggler_fires_on_a_slowed_real_rank(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(RANK_FILES[0], folder / RANK_FILES[0].name)
    stretched(RANK_FILES[1], folder / RANK_FILES[1].name, 1.3)
    run = kernelmagic.load(folder)
    slow, ref = run.summaries[1], run.summaries[0]
    assert slow.step_median_us == pytest.approx(1.3 * 619271.5, rel=1e-6)
    f = {x.rule: x for x in run.findings()}["straggler"]
    assert f.title == "rank 1 is a straggler"
    assert "median step 805 ms against 615 ms for the other 1 rank" in f.evidence
    diffs = sorted(((slow.op_us.get(k, 0) - ref.op_us.get(k, 0), k)
                    for k in set(slow.op_us) | set(ref.op_us)), key=lambda d: -abs(d[0]))
    assert "against rank 0 (the median rank): " + diffs[0][1] in f.evidence
    assert all(k in f.evidence for _, k in diffs[:3])


def _s(rank: int, median: float, iqr: float = 1.0, **kw) -> RankSummary:
    return RankSummary(rank=rank, world_size=8, step_median_us=median, step_iqr_us=iqr, **kw)


@pytest.mark.parametrize(("others", "iqr", "center", "spread"), [
    ([100e3, 101e3, 102e3], 1e3, 101e3, 0.05 * 101e3),        # the 5% floor
    ([100e3, 110e3, 120e3, 130e3], 1e3, 115e3, 1.5 * 15e3),   # between-rank IQR
    ([100e3, 100e3], 20e3, 100e3, 20e3),                     # step-to-step noise
])
def test_straggler_threshold(others, iqr, center, spread):
    rest = [_s(r, m, iqr) for r, m in enumerate(others)]
    assert straggler_spread(rest) == pytest.approx((center, spread))
    n = len(rest)
    assert straggler([*rest, _s(n, center + spread * 0.999)]) is None
    f = straggler([*rest, _s(n, center + spread * 1.001)])
    assert f is not None and f.title == f"rank {n} is a straggler"


def test_straggler_names_the_ops_that_differ_most_from_the_median_rank():
    rest = [_s(0, 100e3, op_us={"a": 1.0}), _s(1, 101e3, op_us={"a": 40.0, "b": 12.0,
                                                                  "d": 3.0, "e": 1.0}),
            _s(2, 102e3, op_us={"a": 2.0})]
    slow = _s(3, 120e3, op_us={"a": 50.0, "b": 10.0, "c": 5.0, "d": 0.0})
    f = straggler([*rest, slow])
    assert f is not None
    assert f.evidence.endswith("against rank 1 (the median rank): a +10.0 µs, "
                               "c +5.00 µs, d −3.00 µs")
    assert straggler([slow]) is None  # one rank: nobody to straggle behind


@pytest.mark.parametrize(("overlap", "fires"), [(0.5, False), (0.2, True), (None, True)])
def test_communication_bound_threshold(overlap, fires):
    # communication 30 ms of a 100 ms step: exposed 15 %, 24 %, 30 % (CPU: no overlap)
    ranks = [_s(r, 100e3, communication_us=30e3, overlap=overlap) for r in range(3)]
    f = communication_bound_across_ranks(ranks)
    assert (f is not None) is fires
    if fires:
        share = 0.3 * (1 - (overlap or 0))
        assert f"takes {share:.0%} of the step (median over 3 ranks)" in f.evidence


# --- bad input --------------------------------------------------------------------------


def test_a_file_of_another_job_is_skipped_and_the_missing_ranks_named(tmp_path):
    for rank, path in enumerate(RANK_FILES):  # 2 ranks of a 4-rank job, 1 of a 64-rank one
        write_with_info(path, tmp_path / f"a{rank}.json.gz",
                        {"backend": "nccl", "rank": rank, "world_size": 4})
    write_with_info(RANK_FILES[0], tmp_path / "b.json.gz",
                    {"backend": "nccl", "rank": 0, "world_size": 64})
    with pytest.warns(RankSkipped) as seen:
        run = kernelmagic.load(tmp_path)
    assert sorted(run.ranks) == [0, 1] and run.world_size == 4
    (message,) = [str(w.message) for w in seen]
    assert message == (f"skipped {tmp_path / 'b.json.gz'}: world_size 64, the others 4 "
                       "(another job)")
    assert run.missing_ranks == [2, 3]
    assert run.summary().endswith(" · 2 ranks of the job without a file: 2-3")
    assert "2 ranks of the job without a file: 2-3" in run._repr_mimebundle_(
        include=["text/plain"])["text/plain"]


def test_two_jobs_of_as_many_files_keep_the_first_files_job(tmp_path):
    write_with_info(RANK_FILES[0], tmp_path / "a.json.gz",
                    {"backend": "nccl", "rank": 0, "world_size": 128})
    write_with_info(RANK_FILES[1], tmp_path / "b.json.gz",
                    {"backend": "nccl", "rank": 1, "world_size": 64})
    with pytest.warns(RankSkipped, match=r"b\.json\.gz: world_size 64, the others 128"):
        run = kernelmagic.load(tmp_path)
    assert list(run.ranks) == [0] and run.missing_ranks == list(range(1, 128))


def test_same_rank_twice_is_one_line_error(tmp_path):
    shutil.copy(RANK_FILES[0], tmp_path / "a.json.gz")
    shutil.copy(RANK_FILES[0], tmp_path / "b.json.gz")
    with pytest.raises(DuplicateRank) as err:
        kernelmagic.load(tmp_path)
    assert str(err.value) == "a.json.gz and b.json.gz are both rank 0"


def test_unreadable_file_is_a_warning_and_the_rest_loads(tmp_path):
    copy_ranks(tmp_path)
    (tmp_path / "broken.json").write_text('{"traceEvents": [{"ph": "X", "name": ')
    with pytest.warns(RankSkipped) as seen:
        run = kernelmagic.load(tmp_path)
    assert sorted(run.ranks) == [0, 1]
    (message,) = [str(w.message) for w in seen]
    assert message.startswith(f"skipped {tmp_path / 'broken.json'}: ")
    assert "\n" not in message


def test_cli_warns_in_one_line_and_shows_the_rest(tmp_path, capsys):
    from kernelmagic.cli import main

    copy_ranks(tmp_path)
    (tmp_path / "broken.json").write_text("{")
    assert main(["show", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert err.startswith(f"kernelmagic: warning: skipped {tmp_path / 'broken.json'}: ")
    assert err.count("\n") == 1 and out.startswith("2 ranks (world size 128, nccl)")
    write_with_info(RANK_FILES[1], tmp_path / "rank-1.json.gz",
                    {"backend": "nccl", "rank": 1, "world_size": 64})
    assert main(["show", str(tmp_path)]) == 0  # a tie: the first file's job is shown
    out, err = capsys.readouterr()
    assert err.splitlines()[-1] == (f"kernelmagic: warning: skipped {tmp_path / 'rank-1.json.gz'}"
                                    ": world_size 64, the others 128 (another job)")
    assert out.startswith("1 rank (world size 128, nccl)")
    assert "127 ranks of the job without a file: 1-127" in out.splitlines()[0]


def test_nothing_readable_or_no_traces(tmp_path):
    (tmp_path / "x.json").write_text("not json")
    with pytest.raises(RanksError, match=r"^none of the 1 trace files could be read; "
                                         r"first: .*x\.json"):
        load_ranks([tmp_path / "x.json"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TraceFileError, match="a folder with no traces"):
        kernelmagic.load(empty)
    missing = parse_rank(str(tmp_path / "nope.json"))
    assert missing.result is None and "nope.json" in missing.error


def test_rank_from_the_file_name_without_distributed_info(tmp_path):
    write_with_info(RANK_FILES[0], tmp_path / "host_rank7.1700.pt.trace.json.gz", None)
    write_with_info(RANK_FILES[1], tmp_path / "other.json.gz", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = kernelmagic.load(tmp_path)
    assert sorted(run.ranks) == [0, 7]  # no number in the name: the first free rank
    assert run.summaries[7].file == "host_rank7.1700.pt.trace.json.gz"
    assert run.world_size is None


# --- executors, saving, display, CLI ----------------------------------------------------


def test_any_executor_gives_the_same_result(many):
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert kernelmagic.load(RANKS, executor=pool) == many


class _OneWorkerDies(Executor):
    """Runs inline; the worker given rank-1's file dies."""

    def submit(self, fn, /, *args, **kwargs):
        future: Future = Future()
        if "rank-1" in args[0]:
            future.set_exception(BrokenProcessPool("a worker process died"))
        else:
            future.set_result(fn(*args, **kwargs))
        return future


def test_a_dead_worker_is_that_file_skipped(many):
    with pytest.warns(RankSkipped, match=r"rank-1\.json\.gz: the worker failed "
                                         r"\(BrokenProcessPool: a worker process died\)"):
        run = kernelmagic.load(RANKS, executor=_OneWorkerDies())
    assert list(run.ranks) == [0] and run.ranks[0] == many.ranks[0]


def test_save_and_load_round_trip(many, tmp_path, monkeypatch):
    path = many.save(tmp_path / "run.json")
    assert json.loads(path.read_text())["format"] == "kernelmagic.ranks"

    def no_trace_reader(*args, **kwargs):
        raise AssertionError("a saved result went through a trace reader")

    # Read as the saved result it is, never parsed as a trace first.
    monkeypatch.setattr("kernelmagic.io.traces.start_reading", no_trace_reader)
    back = kernelmagic.load(path)
    assert isinstance(back, ManyRanksResult) and back == many
    assert back.findings() == many.findings()
    assert back.summaries[1] == many.summaries[1]


def test_table_summary_and_text_report(many):
    lines = many.table().splitlines()
    assert len(lines) == 2 + 2  # header, rule, one line per rank
    assert lines[2].split()[:4] == ["0", "2", "615", "ms"]
    assert lines[3].endswith("rank-1.json.gz")
    line = many.summary()
    assert "\n" not in line and line.startswith("2 ranks (world size 128, nccl)")
    assert "slowest rank 1 619 ms" in line
    bundle = many._repr_mimebundle_(include=["text/plain"])
    assert list(bundle) == ["text/plain"]
    assert many.table() in bundle["text/plain"] and "Communication-bound" in bundle["text/plain"]


def test_html_has_chart_table_and_findings(many):
    html = many._repr_mimebundle_(include=["text/html"])["text/html"]
    assert html.count('<img class="km-chart"') == 1
    ranks_part = html.split('class="km-collectives"')[0]
    assert ranks_part.count('<tr class="km-row"') == 2  # (every 2nd row is striped)
    assert "km-rule-communication_bound" in html


def test_widget_click_shows_a_rank_report(many):
    from IPython.core.interactiveshell import InteractiveShell

    from kernelmagic.render.ranks import chart_png, ranks_widget

    InteractiveShell.instance()
    box = ranks_widget(many, chart_png(many))
    assert list(box.km_rank_buttons) == [0, 1]
    assert box.km_detail.children == ()
    box.km_rank_buttons[1].click()
    title, report = box.km_detail.children
    assert "rank 1" in title.value
    assert report.km_table.order[:3] == [r.key for r in many.ranks[1].top(3)]
    assert box.km_rank_buttons[1].button_style == "info"
    box.km_rank_buttons[0].click()
    assert box.km_detail.children[1].km_table.order[0] == many.ranks[0].top(1)[0].key


def test_cli_show_folder(many, capsys):
    from kernelmagic.cli import main
    from kernelmagic.render.ranks import text_report

    assert main(["show", str(RANKS)]) == 0
    assert capsys.readouterr().out == text_report(many) + "\n"
    assert main(["compare", str(RANKS), str(RANK_FILES[0])]) == 2
    assert "many ranks" in capsys.readouterr().err


def test_the_text_report_of_a_result_reads_many_ranks_too(many):
    # kernelmagic.render.text.text_report is the report users reach for; on a folder's
    # result it raised AttributeError ('ManyRanksResult' object has no attribute 'stats').
    from kernelmagic.render import ranks, text

    assert text.text_report(many) == ranks.text_report(many)
    assert text.text_report(many, findings=False) == ranks.text_report(many, findings=False)


def test_summary_json_round_trip():
    s = _s(3, 1.5e5, op_us={"aten::mm": 2.0}, overlap=0.25)
    assert RankSummary.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert replace(s, overlap=None).exposed_communication_us == 0.0


def test_magic_compare_with_many_ranks_is_a_usage_error(shell):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match=r"--compare .*ranks: many ranks; compare with one"):
        shell.run_cell_magic("profile", f"--compare {RANKS} -n 1 -w 0", "x = 1\n")


# --- the client holds summaries; full reports on demand (issue #34) ---------------------


def test_report_needs_no_full_rank_report(many):
    from kernelmagic.render.ranks import html_report, text_report
    from kernelmagic.results.ranks import RankReports

    run = kernelmagic.load(RANKS)
    assert isinstance(run.ranks, RankReports) and run.ranks.cached == []
    text_report(run), html_report(run), run.findings(), run.summary(), run.profiles_device
    assert run.ranks.cached == []  # nothing parsed again for the report
    assert run.ranks[1] == many.ranks[1] and run.ranks.cached == [1]


def test_rank_reports_parse_on_demand_and_keep_a_handful():
    from kernelmagic.results.ranks import RankReports

    parsed: list[str] = []

    def parse(path: str):
        parsed.append(path)
        return f"report of {path}"

    reports = RankReports({r: f"f{r}" for r in (3, 0, 1, 2, 4, 5)}, parse, keep=2)
    assert list(reports) == [0, 1, 2, 3, 4, 5] and len(reports) == 6 and parsed == []
    assert reports[0] == "report of f0" and reports[0] == "report of f0"
    assert parsed == ["f0"]  # kept: not parsed twice
    reports[1], reports[0], reports[2]  # 0 used more recently than 1: 1 goes
    assert reports.cached == [0, 2] and parsed == ["f0", "f1", "f2"]
    reports[1]
    assert parsed == ["f0", "f1", "f2", "f1"] and reports.cached == [2, 1]
    with pytest.raises(KeyError):
        reports[6]


def test_a_rank_file_gone_since_loading_names_it(tmp_path):
    copy_ranks(tmp_path)
    run = kernelmagic.load(tmp_path)
    for path in tmp_path.iterdir():
        path.unlink()
    with pytest.raises(RanksError, match=r"rank-0\.json\.gz"):
        run.ranks[0]


# --- the heatmap past 32 ranks (issue #34) -----------------------------------------------


def test_summary_keeps_each_step_time(many):
    from kernelmagic.results.rank_summary import HEATMAP_STEPS

    for rank, summary in many.summaries.items():
        timings = many.ranks[rank].timings
        assert summary.step_us == pytest.approx([t * 1e6 for t in timings[:HEATMAP_STEPS]])
        assert summary.steps == len(timings)


def test_step_grid_rows_are_ranks_columns_steps():
    from kernelmagic.render.ranks import step_grid

    run = ManyRanksResult(ranks={}, summaries={
        0: _s(0, 2e3, step_us=[1000.0, 2000.0, 3000.0]), 1: _s(1, 5e3, step_us=[5000.0])})
    assert step_grid(run) == [[1.0, 2.0, 3.0], [5.0, None, None]]  # ms; None: no such step


def test_chart_is_a_heatmap_past_32_ranks():
    import io

    from PIL import Image

    from kernelmagic.render.ranks import BARS_UP_TO, chart_png, heatmap_png

    def run(n: int) -> ManyRanksResult:
        return ManyRanksResult(ranks={}, summaries={
            r: _s(r, 1e3, step_us=[1e3 + 10 * r + s for s in range(8)], compute_us=900.0)
            for r in range(n)})

    assert BARS_UP_TO == 32
    assert chart_png(run(33)) == heatmap_png(run(33))
    assert chart_png(run(32)) != heatmap_png(run(32))
    assert Image.open(io.BytesIO(heatmap_png(run(1024)))).size[0] > 0


def test_past_32_ranks_the_table_puts_far_ranks_first_and_folds_the_rest():
    from kernelmagic.render.ranks import alike_ranks, rank_ranges, ranks_table

    steps = {r: 100e3 + r for r in range(40)}
    steps[7], steps[12] = 150e3, 80e3
    run = ManyRanksResult(ranks={}, summaries={r: _s(r, v) for r, v in steps.items()})
    alike, center, spread = alike_ranks(run)
    # by hand: the 20th and 21st of the 40 sorted medians are 100,020 and 100,021 µs; the
    # spread is the 5% floor of that median (the ranks' IQRs are 1 µs, their medians' ~31)
    assert center == 100020.5 and spread == pytest.approx(0.05 * 100020.5)
    assert alike == [r for r in range(40) if r not in (7, 12)]
    text = ranks_table(run)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["rank", "vs", "median"]
    body = [line.split()[0] for line in lines[2:-1]]
    assert body == ["7", "12"]  # 49,979.5 µs above the median, then 20,020.5 µs below
    assert "+50.0 ms" in lines[2] and "−20.0 ms" in lines[3]  # 3 significant digits
    assert lines[-1].startswith("38 ranks within ±5.00 ms of the median step")
    assert lines[-1].endswith("(folded): 0-6, 8-11, 13-39")
    assert rank_ranges([5]) == "5" and rank_ranges([3, 1, 2, 9]) == "1-3, 9"
    small = ManyRanksResult(ranks={}, summaries={r: _s(r, 1e3) for r in range(32)})
    assert "folded" not in ranks_table(small)  # 32 ranks: one row each, in rank order
