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


def showcase_result() -> ProfileResult:
    """A result with what made the pictures and tables of #28 hard to read: a name that
    broke mid-word, a module tree, a timeline with long names, crowded roofline points and
    a graph break with a long reason and hint (the widest table)."""
    from kernelmagic.core.compiled_rows import GraphBreakRow
    from kernelmagic.core.rows import ModuleRow, RooflineRow, Span

    rows = [
        OpRow("aten::addmm", 30, 22000.0, 22400.0),
        OpRow("Optimizer.zero_grad#AdamW.zero_grad", 10, 900.0, 1500.0, kind="range"),
        OpRow("autograd::engine::evaluate_function: AddmmBackward0", 30, 800.0, 9000.0),
        OpRow("aten::gelu", 10, 1260.0, 1260.0),
        OpRow("aten::copy_", 40, 547.0, 547.0),
    ]
    modules = [ModuleRow("block", "Block", 0, 10, 36000.0, 100.0),
               ModuleRow("block.attn", "MultiheadAttention", 1, 10, 14000.0, 200.0),
               ModuleRow("block.attn.out_proj", "NonDynamicallyQuantizableLinear", 2, 10,
                         3000.0, 3000.0),
               ModuleRow("block.ff", "Sequential", 1, 10, 20000.0, 50.0),
               ModuleRow("block.ff.0", "Linear", 2, 10, 9000.0, 9000.0),
               ModuleRow("block.ff.1", "GELU", 2, 10, 1260.0, 1260.0)]
    spans = [Span("autograd::engine::evaluate_function: AddmmBackward0", "CPU", 0.0, 900.0),
             Span("aten::addmm", "CPU", 900.0, 3100.0),
             Span("Optimizer.zero_grad#AdamW.zero_grad", "CPU", 3100.0, 3200.0),
             Span("aten::gelu", "CPU", 3200.0, 3330.0),
             Span("aten::copy_", "CPU", 3330.0, 3390.0)]
    names = ["aten::addmm", "aten::mm", "aten::bmm", "aten::gelu", "aten::_softmax",
             "aten::native_layer_norm", "aten::add", "aten::mul", "aten::relu", "aten::copy_"]
    roofline = []
    for i, name in enumerate(names):  # five pairs of nearly coinciding points
        x = [140, 140, 19.7, 0.125, 0.125][i // 2] * (1 + 0.02 * (i % 2))
        y = [2.2e11, 2.2e11, 1.86e11, 2.9e9, 2.9e9][i // 2] * (1 + 0.03 * (i % 2))
        roofline.append(RooflineRow(name, 10, 1e9, 1e9 / x, x, y, y / x,
                                    "compute" if x > 1 else "memory",
                                    time=1000.0 * (10 - i), dtype="float32", roof_share=0.5))
    breaks = [GraphBreakRow(
        "0/0", 10, 5200.0,
        reason="Data-dependent branching: detected data-dependent branching on a tensor "
               "value (a Python `if` on tensor.item() inside the compiled function)",
        hint="Use torch.cond to express dynamic control flow, or move the branch out of the "
             "compiled function; see https://pytorch.org/docs/main/compile/programming_model"
             ".graph_breaks_index.html for every kind of graph break",
        file="/home/user/project/model.py", line=42, code="if x.sum() > 0:",
        top_ops="aten::item 1.2 µs; aten::_local_scalar_dense 1.0 µs; dynamo 9.8 µs; "
                "Python 20.1 µs")]
    return ProfileResult(
        name="showcase", iters=10, warmup=3, device="cpu", rows=rows,
        timings=[0.0036] * 10, sort="self_cpu", topk=10, torch_version="2.13.0",
        views=["memory", "stack", "python", "modules", "timeline", "steps", "roofline"],
        modules=modules, timeline=spans, roofline=roofline, graph_breaks=breaks,
        roofline_peaks={"flops_per_s": {"float32": 2.33e11}, "bytes_per_s": 1.16e11,
                        "source": "measured"},
        **every_other_view())


def every_other_view() -> dict:
    """One or two rows of each CPU view the showcase lacks (#45: every tab of the widget
    shows its table and its picture): ranges, source lines, Python lines, memory (its
    timeline, what was alive at the peak, growth), steps and --try's experiments."""
    from kernelmagic.core.experiment_rows import ExperimentRow
    from kernelmagic.core.memory_rows import LiveBlockRow, MemoryGrowthRow, MemoryPoint
    from kernelmagic.core.rows import PythonLineRow, RangeRow, SourceRow
    from kernelmagic.core.step_rows import StepGroupRow, StepRow, StepsSummary

    mib = 2**20
    return dict(
        ranges=[RangeRow("data loading", 10, 4000.0, top_ops=[("aten::copy_", 547.0)])],
        sources=[SourceRow("cell[3]:4 <module>", "cell[3]", 4, "<module>", "y = model(x)",
                           True, 30000.0, ops=90)],
        python_lines=[PythonLineRow("cell[3]:5", "<module>", "loss = y.sum().item()",
                                    120.0, 0.033, line=5, samples=40)],
        peak_memory={"cpu": 8.0 * mib, "device": 0.0},
        memory_timeline=[MemoryPoint("CPU", 0, 0.0, parameter=4 * mib),
                         MemoryPoint("CPU", 0, 1800.0, parameter=4 * mib, activation=4 * mib),
                         MemoryPoint("CPU", 0, 3600.0, parameter=4 * mib)],
        memory_alive=[LiveBlockRow("CPU", 4 * mib, "activation", "[1024, 1024]", "float32",
                                   "aten::addmm", "block.ff.0", 900.0, False)],
        memory_growth=[MemoryGrowthRow("CPU", "aten::empty", "cell[3]:6", 1024.0, 10, 10,
                                       10240.0)],
        steps=[StepRow(0, i, "decode", 300.0 + 10 * i, 290.0, inputs="(1, 1) int64")
               for i in range(3)],
        step_groups=[StepGroupRow("decode", "(1, 1) int64", 3, 310.0, 300.0, 320.0, 2, 0,
                                  290.0, top_ops={"aten::addmm": 200.0})],
        steps_summary=StepsSummary("model", steps=3, median_us=310.0, first_us=300.0,
                                   slowest_us=320.0, slowest_index=2, between_us=100.0),
        experiments=[ExperimentRow("bf16", label="bfloat16 autocast", median_us=2400.0,
                                   speedup=1.5, speedup_low=1.4, speedup_high=1.6,
                                   verdict="faster", beyond_noise=True, iters=10, rounds=5,
                                   batch=1, profiled_us=2500.0)],
    )
