"""Plain-language findings: what the profile shows, the numbers behind it, what to try.

Each rule is a pure function of a ``ProfileResult`` that returns a ``Finding`` or None.
A finding carries ``share``, the fraction of the iteration it explains; ``find`` lists
the findings by it, largest first (ties: the order of ``RULES``), so a report leads with
the biggest problem it can see. Thresholds are module constants so the README and the
tests can name them; the op and call names the rules recognise are in
``kernelmagic/core/op_names.py``.

One module per subject, each importing only ``base`` and the subjects it defers to:

- ``base``: ``Finding``, and the iteration's length and shares every rule reads
- ``startup``: CUDA start-up or first-call set-up inside the profiled window
  (``startup_in_window``); the other rules do not blame that time on anything else
- ``device``: which lower precision the device runs faster (``precision``, the advice
  the other rules word from it); float32 convolutions holding a GPU's time (``fp32_conv``)
- ``gpu``: the GPU idle most of the iteration with what the CPU events point to
  (``gpu_idle``, ``cpu_causes``), launch-bound, host-device syncs, float32 matmuls
- ``communication``: communication not hidden by compute
- ``training``: dropout (or CUDA batch norm) in training mode with no backward pass
- ``ops``: one op dominating (silent on what the rules above explain), small elementwise ops
- ``measurement``: a busy machine (other processes competing for the CPU), a slow first
  run, a noisy measurement
- ``memory``: memory every iteration keeps (``--memory``)
- ``compiled``: torch.compile's graph breaks, recompiles in the loop, mostly-eager cells
- ``steps``: ``--steps``' steps: overhead-bound, slowing down, a slow first step, time
  between the steps
- ``roofline``: the roofline's regimes (``--roofline``), listed by ``find`` with the rest
- ``counters``: measured DRAM traffic (``--counters``): near the peak, or far above the
  roofline's modelled bytes (poor reuse)
- ``experiments``: not a rule: after ``--try``, the suggestions a variant tried quote
  what was measured, and advice measured slower is withdrawn
- ``ranks``: across the ranks of a distributed run (straggler, communication-bound), rules
  of ``RankSummary`` objects with their own ``find``
"""

from __future__ import annotations

from collections.abc import Callable

from kernelmagic.core.op_names import (
    BATCH_NORM_TRAINING,
    DATA_LOADER,
    DROPOUT_OPS,
    DROPOUT_TRAINING,
    ELEMENTWISE_OPS,
    LAUNCH_CALLS,
    MATMUL_OPS,
    SETUP_CALLS,
    SYNC_OPS,
    WAIT_CALLS,
)
from kernelmagic.findings.base import NAMED, Finding, wall_us
from kernelmagic.findings.communication import COMM_BOUND_SHARE, communication_bound
from kernelmagic.findings.compiled import (
    EAGER_SHARE,
    GRAPH_BREAK_SHARE,
    graph_break_gap,
    mostly_eager,
    recompile_in_loop,
)
from kernelmagic.findings.counters import NEAR_PEAK, REUSE_RATIO
from kernelmagic.findings.counters import RULES as COUNTER_RULES
from kernelmagic.findings.device import (
    CONV_SHARE,
    FP32_CONV_SHARE,
    Precision,
    cheaper_matmuls,
    fp32_conv,
    precision,
)
from kernelmagic.findings.experiments import with_measurements
from kernelmagic.findings.gpu import (
    CAUSE_SHARE,
    GPU_IDLE_SHARE,
    LAUNCH_BOUND_BUSY,
    LAUNCH_BOUND_CPU_RATIO,
    MATMUL_SHARE,
    SHORT_KERNEL_US,
    Cause,
    cpu_causes,
    fp32_matmul,
    gpu_idle,
    launch_bound,
    sync_points,
)
from kernelmagic.findings.measurement import (
    BUSY_MIN_SECONDS,
    BUSY_OTHER_CORES,
    BUSY_SHARE,
    NOISY_BEST,
    NOISY_SPREAD,
    SLOW_WARMUP_RATIO,
    busy_machine,
    noisy,
    slow_warmup,
)
from kernelmagic.findings.memory import GROWTH_MIN_BYTES, memory_growth
from kernelmagic.findings.ops import (
    DOMINANT_SHARE,
    ELEMENTWISE_AVG_US,
    ELEMENTWISE_CALLS,
    ELEMENTWISE_SHARE,
    dominant_op,
    fusable_elementwise,
)
from kernelmagic.findings.roofline import RULES as ROOFLINE_RULES
from kernelmagic.findings.startup import (
    SETUP_CALL_US,
    SETUP_LAUNCH_US,
    SLOW_FIRST_ITER_RATIO,
    STARTUP_SHARE,
    Setup,
    setup,
    startup_in_window,
)
from kernelmagic.findings.steps import (
    BETWEEN_SHARE,
    FIRST_STEP_MIN,
    FIRST_STEP_RATIO,
    SLOWDOWN_AGREEMENT,
    SLOWDOWN_MIN_STEPS,
    SLOWDOWN_RISE,
    STEP_BUSY,
    STEP_IN_OPS,
    slow_first_step,
    step_overhead,
    steps_slow_down,
    time_between_steps,
)
from kernelmagic.findings.training import TRAIN_MODE_SHARE, train_mode_under_no_grad
from kernelmagic.results.result import ProfileResult

__all__ = [
    "BATCH_NORM_TRAINING",
    "BETWEEN_SHARE",
    "BUSY_MIN_SECONDS",
    "BUSY_OTHER_CORES",
    "BUSY_SHARE",
    "CAUSE_SHARE",
    "COMM_BOUND_SHARE",
    "CONV_SHARE",
    "COUNTER_RULES",
    "DATA_LOADER",
    "DOMINANT_SHARE",
    "DROPOUT_OPS",
    "DROPOUT_TRAINING",
    "EAGER_SHARE",
    "ELEMENTWISE_AVG_US",
    "ELEMENTWISE_CALLS",
    "ELEMENTWISE_OPS",
    "ELEMENTWISE_SHARE",
    "FIRST_STEP_MIN",
    "FIRST_STEP_RATIO",
    "FP32_CONV_SHARE",
    "GPU_IDLE_SHARE",
    "GRAPH_BREAK_SHARE",
    "GROWTH_MIN_BYTES",
    "LAUNCH_BOUND_BUSY",
    "LAUNCH_BOUND_CPU_RATIO",
    "LAUNCH_CALLS",
    "MATMUL_OPS",
    "MATMUL_SHARE",
    "NAMED",
    "NEAR_PEAK",
    "NOISY_BEST",
    "NOISY_SPREAD",
    "REUSE_RATIO",
    "ROOFLINE_RULES",
    "RULES",
    "SETUP_CALLS",
    "SETUP_CALL_US",
    "SETUP_LAUNCH_US",
    "SHORT_KERNEL_US",
    "SLOWDOWN_AGREEMENT",
    "SLOWDOWN_MIN_STEPS",
    "SLOWDOWN_RISE",
    "SLOW_FIRST_ITER_RATIO",
    "SLOW_WARMUP_RATIO",
    "STARTUP_SHARE",
    "STEP_BUSY",
    "STEP_IN_OPS",
    "SYNC_OPS",
    "TRAIN_MODE_SHARE",
    "WAIT_CALLS",
    "Cause",
    "Finding",
    "Precision",
    "Setup",
    "busy_machine",
    "cheaper_matmuls",
    "communication_bound",
    "cpu_causes",
    "dominant_op",
    "find",
    "fp32_conv",
    "fp32_matmul",
    "fusable_elementwise",
    "gpu_idle",
    "graph_break_gap",
    "launch_bound",
    "memory_growth",
    "mostly_eager",
    "noisy",
    "precision",
    "recompile_in_loop",
    "setup",
    "slow_first_step",
    "slow_warmup",
    "startup_in_window",
    "step_overhead",
    "steps_slow_down",
    "sync_points",
    "time_between_steps",
    "train_mode_under_no_grad",
    "wall_us",
    "with_measurements",
]

RULES: list[Callable[[ProfileResult], Finding | None]] = [
    # share 1, whatever their size: a leak runs out of memory however fast it is; on a
    # busy machine every other figure is off
    memory_growth, busy_machine,
    communication_bound, startup_in_window, gpu_idle, train_mode_under_no_grad, dominant_op,
    launch_bound, sync_points, fp32_matmul, fp32_conv, fusable_elementwise, slow_warmup, noisy,
    graph_break_gap, recompile_in_loop, mostly_eager,  # torch.compile (findings/compiled.py)
    step_overhead, steps_slow_down, slow_first_step, time_between_steps,  # --steps
]


def find(result: ProfileResult) -> list[Finding]:
    """Every rule's finding for ``result`` (``RULES``, then the roofline's), the largest
    ``share`` of the iteration first; equal shares keep the rules' order."""
    rules = RULES + ROOFLINE_RULES if result.roofline else RULES
    if result.counters:  # --counters, or a trace recorded with profiler metrics
        rules = rules + COUNTER_RULES
    found = [f for f in (rule(result) for rule in rules) if f is not None]
    found = sorted(found, key=lambda f: -f.share)
    return with_measurements(found, result) if result.experiments else found
