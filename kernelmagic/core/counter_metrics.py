"""Hardware counters per kernel (``--counters``): which CUPTI metrics are read, what each
means, and the row a kernel's counters become.

The metric names are Nsight Compute's (CUPTI's profiler API reads the same ones): a trace
recorded with ``torch.profiler._ExperimentalConfig(profiler_metrics=[...])`` carries them
as the ``args`` of its ``cuda_profiler_range`` events, one event per kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelmagic.core.records import Record, unit

#: The trace category of one kernel's counter range.
COUNTER_CATEGORY = "cuda_profiler_range"

_SASS = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"
#: FLOP instruction counters -> (precision, FLOPs per instruction): an FMA is two.
FLOP_METRICS: dict[str, tuple[str, int]] = {
    _SASS.format(f"{p}{op}"): (precision, 2 if op == "fma" else 1)
    for p, precision in (("d", "fp64"), ("f", "fp32"), ("h", "fp16"))
    for op in ("add", "mul", "fma")
}
#: Instructions issued to the tensor cores (not FLOPs: their width depends on the GPU and
#: the instruction), where the GPU exposes the counter.
TENSOR_METRIC = "sm__inst_executed_pipe_tensor.sum"
DRAM_READ_METRIC = "dram__bytes_read.sum"
DRAM_WRITE_METRIC = "dram__bytes_write.sum"
#: Achieved occupancy: active warps as a percentage of the SM's maximum.
OCCUPANCY_METRIC = "sm__warps_active.avg.pct_of_peak_sustained_active"
#: What a live ``--counters`` run asks CUPTI for.
LIVE_METRICS: tuple[str, ...] = (*FLOP_METRICS, TENSOR_METRIC, DRAM_READ_METRIC,
                                 DRAM_WRITE_METRIC, OCCUPANCY_METRIC)
#: What a live run asks for again when CUPTI gave no ranges for ``LIVE_METRICS``: one metric
#: the GPU lacks fails the whole range-profiler session, and the tensor-core and occupancy
#: counters are the ones least sure to exist on every GPU.
CORE_METRICS: tuple[str, ...] = (*FLOP_METRICS, DRAM_READ_METRIC, DRAM_WRITE_METRIC)
#: The most kernels Kineto's range profiler counts in one per-kernel session (its default
#: ``CUPTI_PROFILER_MAX_RANGES``, which torch gives no way to raise): later kernels go uncounted.
MAX_RANGES = 1500
#: Metrics summed over a kernel's calls (occupancy is averaged instead).
SUMMED_METRICS = frozenset(LIVE_METRICS) - {OCCUPANCY_METRIC}
PRECISIONS = ("fp64", "fp32", "fp16")


@dataclass(frozen=True)
class CounterRow(Record):
    """One kernel (by name) with its hardware counters, summed over ``count`` calls.

    Counts are over the calls read: one run of the block for ``--counters``, the whole
    trace for a trace. ``time`` is the device time (µs) of those calls as timed (for
    ``--counters``, since counting serialises and replays kernels, the profiled iterations'
    mean time per call times ``count``; the matching kernel events for a trace; 0 when
    unknown). FLOPs
    are instructions x lanes, FMAs counted twice; ``tensor_inst`` are tensor-core
    instructions. ``dram_peak_share`` is the DRAM throughput over the device's peak
    bandwidth (0 when either is unknown); ``occupancy`` the mean achieved occupancy in %
    (-1 when not read). ``has_*`` say which counters the GPU gave.
    """

    key: str
    count: int = unit("calls, summed over {over}")
    launched_by: str = ""
    fp64_flops: float = unit("FLOP", 0.0)
    fp32_flops: float = unit("FLOP", 0.0)
    fp16_flops: float = unit("FLOP", 0.0)
    tensor_inst: float = unit("tensor-core instructions", 0.0)
    dram_read_bytes: float = unit("bytes", 0.0)
    dram_write_bytes: float = unit("bytes", 0.0)
    occupancy: float = unit("% (-1: not read)", -1.0)
    time: float = unit("µs, device time of the calls counted", 0.0)
    flops_per_s: float = unit("FLOP/s", 0.0)
    dram_bytes_per_s: float = unit("bytes/s", 0.0)
    dram_peak_share: float = unit("fraction (0 to 1)", 0.0)
    has_flops: bool = False
    has_dram: bool = False
    has_tensor: bool = False

    @property
    def flops(self) -> float:
        return self.fp64_flops + self.fp32_flops + self.fp16_flops

    @property
    def dram_bytes(self) -> float:
        return self.dram_read_bytes + self.dram_write_bytes

    @property
    def intensity(self) -> float:
        """Measured FLOP per DRAM byte (0 when no DRAM traffic was read)."""
        return self.flops / self.dram_bytes if self.dram_bytes else 0.0
