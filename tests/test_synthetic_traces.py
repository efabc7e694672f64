"""The synthetic one-window / many-step trace generator (benchmarks/synthetic_traces.py,
issue #43): the events asked for, its syncs and stream waits at the rates it promises, the
same events in both shapes, and kernelmagic reads them as written."""

from __future__ import annotations

import gzip
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import kernelmagic
from kernelmagic.core.events import Kind
from kernelmagic.sources.trace_file import read_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import synthetic_traces as st

EVENTS = 10_000


@pytest.fixture(scope="module")
def window(tmp_path_factory):
    path = tmp_path_factory.mktemp("window") / "trace.json.gz"
    return st.write_trace(path, EVENTS, steps=None, seed=1)


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    path = tmp_path_factory.mktemp("split") / "trace.json.gz"
    return st.write_trace(path, EVENTS, steps=5, seed=1)


def _names(path: str) -> Counter:
    table = read_table(path)
    return Counter(np.asarray(table.names, dtype=object)[table.name].tolist())


def test_the_events_asked_for_within_5_percent(window, split):
    for facts in (window, split):
        table = read_table(facts.path)
        assert abs(table.n - EVENTS) <= 0.05 * EVENTS
        # the table holds what the generator counted, plus the profiler's own span
        assert table.n == facts.events + 1


def test_one_item_and_one_device_sync_every_2000_events_and_two_waits_every_100(window):
    names = _names(window.path)
    # .item() at events 1000, 3000, ..., 9000; cudaDeviceSynchronize at 2000, ..., 8000
    # and one at the end (the GPU drained as the run ends)
    assert names["aten::item"] == names["aten::_local_scalar_dense"] == 5
    assert names["cudaStreamSynchronize"] == names["Memcpy DtoH (Device -> Pageable)"] == 5
    assert names["cudaDeviceSynchronize"] == 5
    # a side op every 100 events from the 50th: joined both ways
    assert names["cudaStreamWaitEvent"] == names["cudaEventRecord"] == 200
    assert names["aten::mul"] == 100
    assert (window.items, window.device_syncs, window.stream_waits) == (5, 5, 200)


def test_kernels_on_two_streams_each_with_its_launch(window):
    table = read_table(window.path)
    gpu = (table.kind == Kind.KERNEL) | (table.kind == Kind.MEMCPY)
    launches = table.kind == Kind.RUNTIME
    assert sorted(np.unique(table.tid[gpu]).tolist()) == [st.MAIN_STREAM, st.SIDE_STREAM]
    assert int((table.kind == Kind.KERNEL).sum()) == window.kernels
    with_work = np.isin(table.correlation[launches], table.correlation[gpu])
    assert int(with_work.sum()) == window.launches == window.kernels + window.memcpys
    # no GPU work starts before its launch began
    start_of = dict(zip(table.correlation[launches].tolist(),
                        table.start[launches].tolist(), strict=True))
    assert all(start_of[c] <= s for c, s in
               zip(table.correlation[gpu].tolist(), table.start[gpu].tolist(), strict=True))


def test_kernelmagic_reads_one_window_and_the_gpu_busy_the_generator_simulated(window):
    result = kernelmagic.load(window.path)
    assert result.iters == 1
    assert result.timings[0] * 1e6 == pytest.approx(window.span_us, abs=0.01)
    assert result.gpu_busy[0] == pytest.approx(window.gpu_busy_us, abs=0.01)
    assert 0.4 < window.gpu_busy_us / window.span_us < 0.9  # partly busy
    assert sum(k.count for k in result.kernels) == window.launches


def test_steps_split_the_same_events_into_n_iterations(window, split):
    result = kernelmagic.load(split.path)
    assert result.iters == 5
    # the steps tile the run: their lengths add up to the one window's
    assert sum(result.timings) * 1e6 == pytest.approx(window.span_us, abs=0.01)
    a, b = read_table(window.path), read_table(split.path)
    steps = b.kind == Kind.STEP
    assert int(steps.sum()) == 5
    for field in ("kind", "start", "end", "tid", "correlation"):
        assert np.array_equal(getattr(a, field), getattr(b, field)[~steps]), field


def test_same_seed_same_bytes(tmp_path):
    def text(folder: str, seed: int) -> bytes:
        (tmp_path / folder).mkdir()
        facts = st.write_trace(tmp_path / folder / "t.json.gz", 2_000, steps=None, seed=seed)
        return gzip.decompress(Path(facts.path).read_bytes())

    assert text("a", 3) == text("b", 3) != text("c", 4)
