"""Profiles saved by the release before results serialised from their fields (format
version 1) still load, with the figures the files hold.

The files were written by that code (``tests/data/saved_*_v1.json``): a trace's result, a
live CPU run with every CPU view (``--memory --shapes --flops --stack --modules --timeline
--roofline``) and a saved run of two ranks. The expectations are read from the JSON text
with the standard library, not from kernelmagic.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

import kernelmagic
from kernelmagic.results.ranks import ManyRanksResult
from kernelmagic.results.result import ProfileResult

DATA = Path(__file__).parent / "data"


def raw(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def plain(value: Any) -> Any:
    """An object loaded from JSON, back to JSON's shapes (tuples as lists), field by field."""
    if hasattr(value, "__dataclass_fields__"):
        return {name: plain(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def holds(loaded: Any, saved: Any, path: str) -> None:
    """``loaded`` (``plain``) holds every value ``saved`` has; fields added since the file
    was written take their defaults and are not in it."""
    if isinstance(saved, dict):
        for key, value in saved.items():
            holds(loaded[key], value, f"{path}.{key}")
    elif isinstance(saved, list):
        assert len(loaded) == len(saved), path
        for i, (a, b) in enumerate(zip(loaded, saved, strict=True)):
            holds(a, b, f"{path}[{i}]")
    else:
        assert loaded == saved, path


def check_profile(result: ProfileResult, data: dict[str, Any]) -> None:
    """Every field of ``result`` is the file's value; the totals are the file's sums."""
    for name, value in data.items():
        if name in ("format", "version"):
            continue
        holds(plain(getattr(result, name)), value, name)
    assert result.self_cpu_time_total == pytest.approx(
        sum(r["self_cpu_time_total"] for r in data["rows"]))
    assert result.stats.median == pytest.approx(statistics.median(data["timings"]))


@pytest.mark.parametrize("name", ["saved_profile_v1.json", "saved_live_cpu_v1.json"])
def test_version_1_profiles_load_with_their_figures(name):
    data = raw(name)
    assert data["version"] == 1
    result = kernelmagic.load(DATA / name)
    assert isinstance(result, ProfileResult)
    check_profile(result, data)


def test_version_1_profile_figures_by_hand():
    trace = kernelmagic.load(DATA / "saved_profile_v1.json")
    assert (trace.name, trace.iters, trace.device, trace.source) == ("cpu_only", 1, "cpu", "trace")
    assert [r.key for r in trace.rows] == [r["key"] for r in raw("saved_profile_v1.json")["rows"]]
    live = kernelmagic.load(DATA / "saved_live_cpu_v1.json")
    assert live.views == ["memory", "shapes", "flops", "stack", "modules", "timeline",
                          "roofline"]
    assert live.memory_peaks and live.memory_alive and live.roofline and live.modules
    assert all(isinstance(t, tuple) for r in live.ranges for t in r.top_ops)


def test_version_1_many_ranks_load_with_their_figures():
    data = raw("saved_ranks_v1.json")
    result = kernelmagic.load(DATA / "saved_ranks_v1.json")
    assert isinstance(result, ManyRanksResult)
    assert sorted(result.ranks) == [item["summary"]["rank"] for item in data["ranks"]]
    for item in data["ranks"]:
        rank = item["summary"]["rank"]
        check_profile(result.ranks[rank], item["result"])
        holds(plain(result.summaries[rank]), item["summary"], "summary")
