"""``to_pandas``: every view of a result as a DataFrame, with pandas optional."""

from __future__ import annotations

import builtins
import dataclasses

import pytest
from fakes import cpu_result, cuda_result

from kernelmagic.core.collective_rows import Collective
from kernelmagic.core.rows import Breakdown, KernelRow, OpRow, Span
from kernelmagic.io import frames
from kernelmagic.results.compare import compare
from kernelmagic.results.rank_summary import RankSummary
from kernelmagic.results.ranks import ManyRanksResult

pd = pytest.importorskip("pandas")


def test_ops_frame_holds_the_rows_numbers():
    result = cpu_result()
    df = result.to_pandas()  # "ops" is the default
    assert list(df["key"]) == [r.key for r in result.rows]
    assert df["self_cpu_time_total"].sum() == pytest.approx(result.self_cpu_time_total)
    assert list(df.columns)[:4] == ["key", "count", "self_cpu_time_total", "cpu_time_total"]
    row = df.set_index("key").loc["aten::addmm"]
    assert row["count"] == 20 and row["self_cpu_time_total"] == 5000.0


def test_op_totals_merge_shape_split_rows():
    result = cpu_result(views=["shapes"], rows=[
        dataclasses.replace(r, input_shapes=s) for r, s in
        zip(cpu_result().rows[:2] * 2, ["[[2]]", "[[2]]", "[[4]]", "[[4]]"], strict=True)])
    totals = result.to_pandas("op_totals").set_index("key")
    assert len(result.to_pandas("ops")) == 4 and len(totals) == 2
    assert totals.loc["aten::addmm", "self_cpu_time_total"] == 10000.0


def test_every_listed_view_exports_with_its_columns_even_when_empty():
    result = cpu_result()
    names = frames.view_names(result)
    for view in ("ops", "op_totals", "kernels", "timeline", "timings", "ranges", "roofline",
                 "stack", "modules"):
        assert view in names
    for view in names:
        rows, columns = frames.records(result, view)
        df = result.to_pandas(view)
        assert list(df.columns) == columns and len(df) == len(rows)
    assert list(result.to_pandas("kernels").columns) == [
        f.name for f in dataclasses.fields(KernelRow)]


def test_timings_are_seconds_per_iteration_with_gpu_busy_when_profiled():
    result = cpu_result()
    df = result.to_pandas("timings")
    assert list(df["seconds"]) == result.timings and list(df["iteration"]) == list(range(10))
    gpu = dataclasses.replace(cuda_result(), gpu_busy=[900.0] * 10)
    assert list(gpu.to_pandas("timings")["gpu_busy_us"]) == [900.0] * 10


def test_timeline_and_breakdown_frames():
    spans = [Span("aten::mm", "CPU", 0.0, 5.0), Span("gemm", "stream 7", 1.0, 4.0)]
    result = cpu_result(timeline=spans, breakdown=Breakdown(wall=100.0, compute=60.0,
                                                            idle=40.0))
    tl = result.to_pandas("timeline")
    assert list(tl["lane"]) == ["CPU", "stream 7"] and list(tl["end"] - tl["start"]) == [5, 3]
    bd = result.to_pandas("breakdown")
    assert bd.loc[0, "compute"] == 60.0 and bd.loc[0, "idle"] == 40.0


def test_an_unknown_view_names_the_views_there_are():
    with pytest.raises(ValueError, match=r"no view 'opz'.*ops, op_totals, kernels"):
        cpu_result().to_pandas("opz")


def test_missing_pandas_is_an_import_error_naming_the_extra(monkeypatch):
    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("No module named 'pandas'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(ImportError, match=r"kernelmagic\[pandas\]"):
        cpu_result().to_pandas("ops")
    rows, _ = frames.records(cpu_result(), "ops")  # the records need no pandas
    assert len(rows) == 6


def test_comparison_frame_is_the_per_op_change():
    before = cpu_result()
    after = cpu_result(rows=[dataclasses.replace(r, self_cpu_time_total=r.self_cpu_time_total / 2)
                             for r in before.rows])
    df = compare(before, after).to_pandas().set_index("key")
    assert df.loc["aten::addmm", "before"] == 500.0  # µs per iteration, 10 iterations
    assert df.loc["aten::addmm", "after"] == 250.0
    assert df.loc["aten::addmm", "delta"] == -250.0 and df.loc["aten::addmm", "speedup"] == 2.0


def test_many_ranks_frames_have_a_rank_column():
    parts = [(cpu_result(name=f"r{r}"), RankSummary(rank=r, world_size=2, steps=10,
                                                    step_median_us=1000.0 + r))
             for r in (0, 1)]
    many = ManyRanksResult.from_parts(parts)
    ranks = many.to_pandas()
    assert list(ranks["rank"]) == [0, 1] and list(ranks["step_median_us"]) == [1000.0, 1001.0]
    ops = many.to_pandas("ops")
    assert list(ops.columns)[:2] == ["rank", "key"] and len(ops) == 12
    assert ops.groupby("rank")["self_cpu_time_total"].sum().tolist() == [8100.0, 8100.0]


# --- units (#28) -------------------------------------------------------------------------


def _numeric_fields(row_type) -> list[str]:
    """The row's numbers that measure something (not a line, depth, iteration or rank)."""
    ids = {"line", "depth", "iteration", "rank", "world_size", "index", "slowest_index",
           "slowest_iteration"}
    return [f.name for f in dataclasses.fields(row_type)
            if str(f.type) in ("float", "int", "float | None", "dict[str, float]")
            and f.name not in ids]


def test_every_measured_column_of_every_view_says_its_unit():
    """Each view's frames (``views/registry.py``) declare their columns' units on the row's
    fields (``core/records.py: unit``): a number without one fails here, at its declaration."""
    from kernelmagic.views.registry import view_specs

    row_types = [OpRow, RankSummary]
    row_types += [frame.row for spec in view_specs() for frame in spec.frames]
    for row_type in row_types:
        declared = {f.name for f in dataclasses.fields(row_type) if "unit" in f.metadata}
        missing = [c for c in _numeric_fields(row_type) if c not in declared]
        assert not missing, (row_type.__name__, missing)


def test_frames_carry_their_units_in_attrs():
    result = cpu_result()  # 10 iterations
    ops = result.to_pandas("ops")
    assert ops.attrs["iterations"] == 10
    assert ops.attrs["units"]["self_cpu_time_total"] == "µs, summed over the 10 profiled iterations"
    assert ops.attrs["units"]["count"] == "calls, summed over the 10 profiled iterations"
    # aten::addmm: 5,000 µs over 10 iterations is 500 µs per iteration, by hand.
    row = ops.set_index("key").loc["aten::addmm"]
    assert row["self_cpu_time_total"] / ops.attrs["iterations"] == 500.0
    assert result.to_pandas("timings").attrs["units"] == {"seconds": "seconds"}
    one = cpu_result(iters=1, timings=[0.001]).to_pandas("ops")
    assert one.attrs["units"]["cpu_time_total"] == "µs, summed over the 1 profiled iteration"
    cmp = compare(result, result).to_pandas()
    assert cmp.attrs["units"]["before"] == "µs per iteration"
    assert cmp.attrs["units"]["speedup"] == "before / after"


def test_many_ranks_frames_say_their_units():
    parts = [(cpu_result(name=f"r{r}"), RankSummary(rank=r, world_size=2, steps=10,
                                                    step_median_us=1000.0 + r))
             for r in (0, 1)]
    many = ManyRanksResult.from_parts(parts)
    assert many.to_pandas().attrs["units"]["step_median_us"] == "µs per step"
    ops = many.to_pandas("ops")
    assert ops.attrs["units"]["self_cpu_time_total"] == ("µs, summed over the 10 profiled "
                                                         "iterations")


def test_a_job_of_no_ranks_still_has_every_column_and_unit():
    # An empty job: the ranks and collectives frames keep their columns (a rank's
    # collectives are the next view, not a column) and their units, with no rows.
    empty = ManyRanksResult.from_parts([])
    ranks = empty.to_pandas("ranks")
    fields = [f.name for f in dataclasses.fields(RankSummary) if f.name != "collectives"]
    assert list(ranks.columns) == fields and len(ranks) == 0
    assert ranks.attrs["units"]["step_median_us"] == "µs per step"
    collectives = empty.to_pandas("collectives")
    assert list(collectives.columns) == [f.name for f in dataclasses.fields(Collective)]
    assert len(collectives) == 0 and collectives.attrs["units"]["skew_us"].startswith("µs")
