"""What a result knows about the machine it ran on: the device (``DeviceInfo``: its family
and which lower precisions it runs faster than float32) and, for a live run, what else
competed for the CPU while the iterations were timed (``CpuLoad``).

Plain, frozen, JSON-friendly records with no torch inside, so the findings that word
their advice from them stay pure functions of the result, and a trace (whose
``deviceProperties`` name its GPU) gets the same advice as a live run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelmagic.core.datasheet import datasheet
from kernelmagic.core.records import Record
from kernelmagic.core.timing import CONFIDENCE, SpeedUp

#: ``DeviceInfo.family`` values.
CPU, PRE_VOLTA, VOLTA, TURING, AMPERE, ROCM, GPU = (
    "cpu", "pre-volta", "volta", "turing", "ampere+", "rocm", "gpu")


@dataclass(frozen=True)
class DeviceInfo(Record):
    """The profiled device, as the advice needs it.

    ``kind`` is ``"cpu"``, ``"cuda"`` or ``"rocm"`` (or another accelerator's backend, read
    from a trace: ``"mtia"``, ...; its family is ``gpu``, unknown); ``capability`` the
    compute capability (``"7.0"``; a ROCm GPU's major.minor as torch reports it; "" when unknown);
    ``flops_per_s`` the device's own peak FLOP/s per dtype where known (``float32``,
    ``bfloat16``, ``float16``: measured on a CPU, from the datasheet on a GPU), with
    ``peaks_source`` saying which (``"measured"``, ``"datasheet: V100 SXM2"``).
    """

    kind: str
    name: str = ""
    capability: str = ""
    flops_per_s: dict[str, float] = field(default_factory=dict)
    peaks_source: str = ""
    # per dtype, the 95% interval (low, high) of its rate over float32's where the rates
    # were timed in interleaved rounds (the CPU's quick check): ``faster`` then judges
    # by the one noise rule (core/timing.py), never by a difference within it
    speedup_interval: dict[str, list[float]] = field(default_factory=dict)

    @property
    def major(self) -> int | None:
        """The capability's major number, None when unknown."""
        head = self.capability.partition(".")[0]
        return int(head) if head.isdigit() else None

    @property
    def family(self) -> str:
        """``cpu``, ``pre-volta`` (no Tensor Cores), ``volta`` (7.0/7.2), ``turing`` (7.5),
        ``ampere+`` (8.0 and later: bfloat16 and TF32), ``rocm``, or ``gpu`` (unknown)."""
        if self.kind == "cpu":
            return CPU
        if self.kind == "rocm":
            return ROCM
        major = self.major
        if major is None:
            return GPU
        if major < 7:
            return PRE_VOLTA
        if major == 7:
            return TURING if self.capability.partition(".")[2] == "5" else VOLTA
        return AMPERE

    def speedup(self, dtype: str) -> float | None:
        """How many times float32's peak ``dtype``'s peak is, by the device's own figures
        (None when either is unknown)."""
        fp32, low = self.flops_per_s.get("float32", 0.0), self.flops_per_s.get(dtype, 0.0)
        return low / fp32 if fp32 > 0 and low > 0 else None

    def faster(self, dtype: str) -> bool | None:
        """Whether ``dtype`` (``bfloat16``, ``float16``) runs faster than float32 here: the
        device's figures when it has them, else what its family supports; None when
        unknown (a CPU whose peaks were not measured, an unknown GPU)."""
        interval = self.speedup_interval.get(dtype)
        if interval:  # judged by the one noise rule, as a measured speed-up
            judged = SpeedUp(1.0, *interval, n=0, coverage=CONFIDENCE)
            return judged.faster if judged.beyond_noise else None
        ratio = self.speedup(dtype)
        if ratio is not None:
            return ratio > 1.0
        family = self.family
        if family in (VOLTA, TURING):
            return dtype == "float16"
        if family == AMPERE:
            return True
        if family == PRE_VOLTA:
            return False
        if family == ROCM and self.major is not None:
            return dtype == "float16" or self.major >= 9  # bfloat16: MI200 (gfx90a) on
        return None


def gpu_info(kind: str, name: str, capability: str) -> DeviceInfo:
    """A GPU's ``DeviceInfo`` with its datasheet peaks when the table knows its name."""
    found = datasheet(name) if kind == "cuda" else None
    if found is None:
        return DeviceInfo(kind=kind, name=name, capability=capability)
    label, flops, _ = found
    return DeviceInfo(kind=kind, name=name, capability=capability, flops_per_s=flops,
                      peaks_source=f"datasheet: {label}")


BUSY_OTHER_CORES = 0.5        # other processes' CPU (in cores) worth naming ...
BUSY_SHARE = 0.25             # ... when it is this share of the cores, or leaves fewer free
#                               cores than torch has threads
BUSY_MIN_SECONDS = 0.1        # spans shorter than this are too coarse to judge (10 ms ticks)


@dataclass(frozen=True)
class CpuLoad(Record):
    """What competed for the CPU while the profiled iterations were timed (a live run).

    ``cores``: the cores this process may run on; ``torch_threads``: torch's intra-op
    threads; ``other_cores``: the CPU time of every other process over the timed span,
    in cores (``1.0``: one core kept busy all along); ``own_cores`` the same for this
    process; ``load_average``: the one-minute load average at the end (runnable
    processes, this one included); ``seconds``: the span measured.
    """

    cores: int
    torch_threads: int
    other_cores: float
    own_cores: float = 0.0
    load_average: float = 0.0
    seconds: float = 0.0

    @property
    def other_share(self) -> float:
        """Other processes' CPU time as a share of all the cores' time."""
        return self.other_cores / self.cores if self.cores > 0 else 0.0

    @property
    def free_cores(self) -> float:
        """Cores left to this process on average: ``cores - other_cores``."""
        return max(0.0, self.cores - self.other_cores)

    @property
    def crowded(self) -> bool:
        """Fewer cores left free than torch has threads."""
        return self.torch_threads > self.free_cores

    @property
    def busy(self) -> bool:
        """Other processes used at least ``BUSY_OTHER_CORES`` of the cores over a span
        of ``BUSY_MIN_SECONDS`` or more, and either ``BUSY_SHARE`` of them or so much
        that the machine is ``crowded``: every time measured then waited for a core (the
        busy-machine finding; ``--compare`` does not judge such a run)."""
        if self.seconds < BUSY_MIN_SECONDS or self.cores <= 0:
            return False
        return self.other_cores >= BUSY_OTHER_CORES and (
            self.crowded or self.other_share >= BUSY_SHARE)
