"""Results with exact, hand-checkable numbers for renderer and result tests."""

from __future__ import annotations

from kernelmagic.core.events import EventTable, TableBuilder, derive_links
from kernelmagic.core.rows import OpRow
from kernelmagic.results.result import ProfileResult

US = 1000  # ns


def table_of(*events, meta=None) -> EventTable:
    """Events as (kind, name, start µs, end µs, tid[, keyword fields]) tuples, linked as a
    source links them (``derive_links``)."""
    builder = TableBuilder()
    for kind, name, start, end, tid, *rest in events:
        builder.add(kind, name, start * US, end * US, tid, **(rest[0] if rest else {}))
    return derive_links(builder.freeze(meta=meta))


def cpu_result(**overrides) -> ProfileResult:
    rows = [
        OpRow("aten::linear", 20, 200.0, 6200.0),
        OpRow("aten::addmm", 20, 5000.0, 5800.0),
        OpRow("aten::copy_", 40, 800.0, 800.0),
        OpRow("aten::gelu", 10, 2000.0, 2000.0),
        OpRow("aten::view", 200, 100.0, 100.0),
        OpRow("<script>alert(1)</script>", 1, 0.0, 0.0),
    ]
    fields = dict(name="cell[7]", iters=10, warmup=3, device="cpu", rows=rows,
                  timings=[0.0011, 0.0010, 0.0012, 0.0010, 0.0009,
                           0.0010, 0.0011, 0.0010, 0.0010, 0.0010],
                  sort="self_cpu", topk=3, torch_version="2.13.0")
    fields.update(overrides)
    return ProfileResult(**fields)


def cuda_result() -> ProfileResult:
    rows = [
        OpRow("aten::mm", 10, 300.0, 350.0, 9000.0, 9000.0),
        OpRow("aten::add", 10, 100.0, 120.0, 1000.0, 1000.0),
        OpRow("cudaLaunchKernel", 20, 400.0, 400.0, 0.0, 0.0),
    ]
    return ProfileResult(name="gpu", iters=10, warmup=3, device="cuda", rows=rows,
                         timings=[0.0012] * 10, sort="self_device", topk=10,
                         device_name="NVIDIA H200", torch_version="2.13.0")
